"""Running playbooks/slurm.yml against the lab, with progress and the PLAY RECAP parsed."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpucluster.lab.inventory import vault_password_file
from gpucluster.lab.paths import PLAYBOOK, REPO_ROOT, podman_env, state_dir
from gpucluster.lab.shell import LabError
from gpucluster.tools import venv_env, venv_tool

RECAP_RE = re.compile(
    r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)"
)
TASK_RE = re.compile(r"^TASK \[(?P<name>.*)\]")


@dataclass(frozen=True)
class PlaybookRun:
    changed: dict[str, int]
    failed: dict[str, int]
    seconds: float
    log: Path

    @property
    def total_changed(self) -> int:
        return sum(self.changed.values())


def ansible_env() -> dict[str, str]:
    return {
        **venv_env(podman_env()),
        "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(REPO_ROOT / "roles"),
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_STDOUT_CALLBACK": "default",
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p),
    }


def run_playbook(
    inventory: Path,
    progress: Callable[[str], None],
    playbook: Path = PLAYBOOK,
    extra: list[str] | None = None,
) -> PlaybookRun:
    """ansible-playbook with the lab inventory; the full output goes to <state>/ansible.log."""
    log = state_dir() / "ansible.log"
    cmd = [
        venv_tool("ansible-playbook"), "-i", str(inventory), str(playbook),
        "--vault-password-file", str(vault_password_file()), *(extra or []),
    ]  # fmt: skip
    started = time.monotonic()
    changed: dict[str, int] = {}
    failed: dict[str, int] = {}
    with log.open("w", encoding="utf-8") as handle:
        proc = subprocess.Popen(
            cmd, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            handle.write(line)
            task = TASK_RE.match(line)
            if task:
                progress(f"playbook: {task.group('name')}")
            recap = RECAP_RE.match(line)
            if recap:
                changed[recap.group("host")] = int(recap.group("changed"))
                failed[recap.group("host")] = int(recap.group("failed")) + int(recap.group("unreachable"))
        code = proc.wait()
    result = PlaybookRun(changed, failed, time.monotonic() - started, log)
    if code != 0 or any(failed.values()):
        tail = "".join(log.read_text(encoding="utf-8").splitlines(keepends=True)[-40:])
        raise LabError(f"ansible-playbook failed (exit {code}); full log: {log}\n{tail}")
    return result
