"""The return-to-service gate as a procedure: nodes an administrator declares repaired
(`gpucluster node repaired INVENTORY HOST...`, playbooks/node-gate.yml). The upgrade's and the
moves' steps say how their nodes come back through it (upgrade.py, moves.py).

The gate itself runs on the nodes (gpucluster-healthcheck, cluster.gate); this module only hands
nodes to it: bare-metal Slurm's through the playbook, Kubernetes' by the taint its command names.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpucluster.changes.playbooks import PROCEDURES
from gpucluster.errors import InventoryError, Problem
from gpucluster.hostlists import compress, expand
from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster

# Where playbooks/ is in a clone of gpucluster (and in its Ansible collection).
PLAYBOOKS_ROOT = Path(__file__).resolve().parents[2]
# Runs a playbook with extra arguments against the cluster's Ansible inventory; raises on failure.
PlaybookRunner = Callable[[Path, list[str]], None]


@dataclass(frozen=True)
class GateRequest:
    """The nodes a `repaired` sends to the gate: bare-metal Slurm's through the playbook, those
    of Kubernetes by a taint (kubectl)."""

    slurm: tuple[str, ...]
    kubernetes: tuple[str, ...]

    def kubectl(self, way_back: str = "repaired") -> str:
        """The taint the gate's pods act on (their failures so far forgotten)."""
        from gpucluster.k8s.gate import taint_command

        return taint_command(list(self.kubernetes), way_back)


def gate_request(cluster: Cluster, names: list[str]) -> GateRequest:
    """The hosts named (host names or hostlists), each a node of the inventory; a host the gate
    cannot take (unknown, a controller, a login host) is an error naming it."""
    hosts = [h for name in names for h in expand(name)]
    problems = []
    if cluster.spec.gate is None:
        problems.append(
            cluster.inventory.cluster_file.problem(
                "cluster", "the inventory has no gate: set cluster.gate first (`gate: {}` takes its defaults)"
            )
        )
    unknown = [h for h in hosts if h not in cluster.owner_of]
    if unknown:
        problems.append(
            Problem(
                cluster.inventory.hosts_file.file,
                "",
                f"no node of the inventory: {compress(unknown)} (the gate takes the nodes of cluster.nodes)",
            )
        )
    if problems:
        raise InventoryError(problems)
    slurm = tuple(h for h in hosts if cluster.owner_of[h] == Owner.SLURM)
    kubernetes = tuple(h for h in hosts if cluster.owner_of[h] != Owner.SLURM)
    return GateRequest(slurm, kubernetes)


def node_gate_playbook() -> Path:
    playbook = PLAYBOOKS_ROOT / PROCEDURES["gate"].playbook
    if not playbook.is_file():
        raise FileNotFoundError(
            f"{PROCEDURES['gate'].playbook} is not beside this gpucluster ({PLAYBOOKS_ROOT}): run "
            f"`ansible-playbook -i INVENTORY {PROCEDURES['gate'].playbook} -e gate_hosts=HOST,...` from a "
            "clone of gpucluster or its Ansible collection"
        )
    return playbook


def send_to_gate(request: GateRequest, run: PlaybookRunner, way_back: str = "repaired") -> None:
    """playbooks/node-gate.yml on the Slurm nodes of the request."""
    if not request.slurm:
        return
    extra = {"gate_hosts": ",".join(request.slurm), "gate_way_back": way_back}
    run(node_gate_playbook(), ["--extra-vars", json.dumps(extra)])
