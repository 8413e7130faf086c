"""The lab's record of what it created on the host; `lab down` removes exactly this."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpucluster.lab.paths import state_dir

STATE_FILE = "state.json"


@dataclass
class LabState:
    """Every host object the lab made, recorded as soon as it exists (so a failed `up` is undone too)."""

    inventory: str = ""
    image: str = ""
    subnet: str = ""
    bridge: str = ""
    addresses: dict[str, str] = field(default_factory=dict)
    netns: list[str] = field(default_factory=list)
    veths: list[str] = field(default_factory=list)
    containers: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    # True once playbooks/slurm.yml completed against these hosts (what `lab status` calls up).
    converged: bool = False
    # The lab's Redfish BMC service (gpucluster.lab.bmc), when the inventory has power-saved nodes.
    bmc_pid: int = 0

    @staticmethod
    def path() -> Path:
        return state_dir() / STATE_FILE

    @classmethod
    def load(cls) -> LabState | None:
        path = cls.path()
        if not path.is_file():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(**data)

    def save(self) -> None:
        path = self.path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    def remember(self, kind: str, name: str) -> None:
        """Record one created object (netns, veths, files) and persist at once."""
        items: list[str] = getattr(self, kind)
        if name not in items:
            items.append(name)
            self.save()
