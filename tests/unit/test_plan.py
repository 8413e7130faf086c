"""`gpucluster plan`: each changed key with what applying it needs, and the overall action."""

from __future__ import annotations

from pathlib import Path

from gpucluster.layers import load_cluster
from gpucluster.modelbase import Update
from gpucluster.plan import plan, required_action
from tests.conftest import InventoryFactory, run_cli


def edited_lab(
    inventories: InventoryFactory, cluster_edits: dict[str, str], hosts_edits: dict[str, str]
) -> Path:
    directory = inventories.copy_example("lab", name="edited")
    for name, edits in (("group_vars/all/cluster.yml", cluster_edits), ("hosts.yml", hosts_edits)):
        path = directory / name
        text = path.read_text()
        for old, new in edits.items():
            assert old in text
            text = text.replace(old, new)
        path.write_text(text)
    return directory


def test_no_change_needs_nothing(inventories: InventoryFactory) -> None:
    lab = load_cluster(inventories.copy_example("lab"))
    assert plan(lab, lab) == []
    assert required_action([]) is None


def test_accounts_only_change(inventories: InventoryFactory) -> None:
    old = load_cluster(inventories.copy_example("lab"))
    new = load_cluster(edited_lab(inventories, {"fairshare: 60": "fairshare: 70"}, {}))
    changes = plan(old, new)
    assert [(c.path, c.old, c.new, c.update) for c in changes] == [
        ("cluster.tenants.research.fairshare", "60", "70", Update.ACCOUNTS)
    ]


def test_node_added_needs_restart_and_dominates(inventories: InventoryFactory) -> None:
    old = load_cluster(inventories.copy_example("lab"))
    new = load_cluster(
        edited_lab(
            inventories, {'max_time: "1-00:00:00"': 'max_time: "2-00:00:00"'}, {"gpu[03:04]": "gpu[03:05]"}
        )
    )
    changes = {c.path: c for c in plan(old, new)}
    assert changes["cluster.partitions.gpu.max_time"].update is Update.RECONFIGURE
    assert changes["hosts"].new == "+gpu05"
    assert required_action(list(changes.values())) is Update.RESTART


def test_cli_plan(inventories: InventoryFactory) -> None:
    new = edited_lab(inventories, {"gpu_limit: 24": "gpu_limit: 28"}, {})
    proc = run_cli("plan", "inventories/lab", str(new))
    assert proc.returncode == 0
    assert "cluster.tenants.research.gpu_limit: 24 -> 28  [accounts]" in proc.stdout
    assert "overall: accounts" in proc.stdout
