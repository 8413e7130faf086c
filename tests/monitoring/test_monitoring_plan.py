"""`gpucluster plan` names the scrape targets a change adds, removes or relabels."""

from __future__ import annotations

import shutil
from pathlib import Path

from gpucluster.changes.plan import make_plan, text_lines
from gpucluster.layers import load_cluster
from tests.conftest import INVENTORIES


def _copy(tmp_path: Path, name: str) -> Path:
    shutil.copytree(INVENTORIES / "lab", tmp_path / name)
    return tmp_path / name


def test_a_new_node_adds_its_targets_and_a_moved_switch_relabels(tmp_path: Path) -> None:
    new = _copy(tmp_path, "new")
    hosts = new / "hosts.yml"
    # gpu05 joins leaf2; gpu02 moves from leaf1 to leaf2.
    text = hosts.read_text().replace("gpu[01:02]:", "gpu01:").replace("gpu[03:04]:", "gpu[02:05]:")
    hosts.write_text(text)
    result = make_plan(load_cluster(INVENTORIES / "lab"), load_cluster(new))
    targets = result.monitoring_targets
    assert targets is not None
    assert targets["added"] == ["node gpu05:9100"]
    assert targets["removed"] == []
    assert "node gpu02:9100 (switch: leaf1 -> leaf2)" in targets["relabelled"]
    lines = text_lines(result)
    assert "monitoring targets added (1):" in lines and "  node gpu05:9100" in lines
    assert result.as_dict()["monitoring_targets"] == targets


def test_turning_monitoring_off_removes_every_target(tmp_path: Path) -> None:
    new = _copy(tmp_path, "new")
    cluster_file = new / "group_vars" / "all" / "cluster.yml"
    text = cluster_file.read_text()
    cluster_file.write_text(text[: text.index("  # Prometheus and Alertmanager on login01")])
    result = make_plan(load_cluster(INVENTORIES / "lab"), load_cluster(new))
    assert result.monitoring_targets is not None
    assert "node login01:9100" in result.monitoring_targets["removed"]
    assert result.monitoring_targets["added"] == []
    assert any(f.path == "monitoring/prometheus.yml" and f.status == "removed" for f in result.files)


def test_no_monitoring_no_targets_entry() -> None:
    cluster = load_cluster(INVENTORIES / "gke-prod")
    assert make_plan(cluster, cluster).monitoring_targets is None
