"""A 2026 GPU fleet written from the README alone (issue 37): the input a newcomer gets wrong and
the day-2 changes they make, each reported where it was written with what to do (exit 2), or done
right; never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.errors import InventoryError
from gpucluster.layers import load_cluster
from tests.conftest import InventoryFactory, run_cli

CLUSTER_FILE = "group_vars/all/cluster.yml"


def problems(directory: Path) -> list[str]:
    with pytest.raises(InventoryError) as info:
        load_cluster(directory)
    return [str(p).removeprefix(str(directory) + "/") for p in info.value.problems]


def test_a_leaf_switch_whose_group_was_emptied_is_named_not_a_crash(inventories: InventoryFactory) -> None:
    """Decommissioning a scalable unit by emptying its group: KeyError 'su2-leaf', exit 1, before."""
    directory = inventories.copy_example("superpod")
    hosts = directory / "hosts.yml"
    text = hosts.read_text(encoding="utf-8")
    emptied = text.replace(
        "        dgx_su2:\n          hosts:\n            dgx[033:064]:\n",
        "        dgx_su2:\n          hosts: {}\n",
    )
    assert emptied != text
    hosts.write_text(emptied, encoding="utf-8")
    found = problems(directory)
    assert (
        f"{CLUSTER_FILE}:57: cluster.fabric.tree.su2-leaf[0]: group `dgx_su2` has no hosts: remove it here "
        f"(hosts decommissioned), or give it hosts in {directory}/hosts.yml" in found
    )
    proc = run_cli("validate", str(directory))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "KeyError" not in proc.stderr
