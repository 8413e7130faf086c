"""`gpucluster lab verify`: `gpucluster verify` against the lab, through the lab's own Ansible
inventory and settings (podman connection, vault password), run as every lab playbook is."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpucluster.lab.inventory import write_inventory
from gpucluster.lab.playbook import run_playbook
from gpucluster.lab.shell import LabError
from gpucluster.lab.state import LabState
from gpucluster.layers import load_cluster
from gpucluster.model.cluster import Cluster
from gpucluster.verify.checks import CheckResult
from gpucluster.verify.collect import verify_cluster


def verify(progress: Callable[[str], None]) -> tuple[Cluster, list[CheckResult]]:
    """The checks of the lab that is up, judged against the inventory it was built from."""
    state = LabState.load()
    if state is None or not state.inventory:
        raise LabError("no lab is up (run `gpucluster lab up`)")
    source = Path(state.inventory)
    cluster = load_cluster(source)
    # As `lab up` and converge do: the generated inventory is rewritten from the source first.
    target = write_inventory(source, cluster)

    def run(playbook: Path, extra: list[str]) -> None:
        run_playbook(target, progress, playbook=playbook, extra=extra)

    return cluster, verify_cluster(cluster, run)
