"""The monitoring layer's render of every example inventory, checked by Debian's promtool (the one
scripts/setup.sh puts in .venv/bin: a missing promtool fails these tests, it never skips them), and
the model facts the scrape configuration carries."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpucluster.cluster import Cluster
from gpucluster.errors import InventoryError
from gpucluster.layers import layer_warnings, load_cluster
from gpucluster.monitoring.dashboards import EXPORTED_METRICS
from gpucluster.monitoring.model import monitoring_of
from gpucluster.monitoring.render import RULES_PATH, render_monitoring
from gpucluster.monitoring.rules import alert_rules
from gpucluster.monitoring.targets import SLURMCTLD_ENDPOINTS
from gpucluster.render import render_files
from gpucluster.verify.monitoring import expected_targets
from tests.conftest import INVENTORIES, example_inventories

PROMTOOL = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "promtool"
MONITORED = [
    e
    for e in example_inventories()
    if "monitoring:" in (INVENTORIES / e / "group_vars/all/cluster.yml").read_text()
]
# The alert list the issue asks for, each by the rule that answers it.
REQUIRED_ALERTS = {
    "SlurmNodeDrained", "SlurmNodeDown", "GpusIdleWhileJobsPend", "GpuXidError", "GpuEccError",
    "HealthCheckDrainedNode", "SlurmControllerFailover", "SlurmctldUnreachable", "SlurmdbdUnreachable",
    "SlurmrestdUnreachable", "NodeOwnerDisagrees", "NodeExporterMissing",
}  # fmt: skip


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL.is_file(), f"{PROMTOOL} missing: run scripts/setup.sh (it extracts Debian's promtool)"
    return subprocess.run([str(PROMTOOL), *args], cwd=cwd, capture_output=True, text=True, check=False)


def write(files: dict[str, str], root: Path) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root / "monitoring"


def test_the_examples_enable_monitoring() -> None:
    assert "lab" in MONITORED and "superpod" in MONITORED and len(MONITORED) >= 8


@pytest.mark.parametrize("example", MONITORED)
def test_promtool_accepts_config_and_rules_and_every_rule_test_passes(example: str, tmp_path: Path) -> None:
    _promtool_passes(render_monitoring(load_cluster(INVENTORIES / example)), tmp_path)


def _promtool_passes(files: dict[str, str], tmp_path: Path) -> None:
    monitoring = write(files, tmp_path)
    rules = monitoring / "rules" / "gpucluster.rules.yml"
    # On the monitoring host the rules sit at RULES_PATH; here, beside the config.
    config = tmp_path / "prometheus.yml"
    config.write_text((monitoring / "prometheus.yml").read_text().replace(RULES_PATH, str(rules)))
    checked = promtool("check", "config", str(config), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    checked = promtool("check", "rules", str(rules), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", "gpucluster.rules.test.yml", cwd=monitoring / "rules")
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr
    # One test per rule, each expecting its alert to fire.
    tests = yaml.safe_load((monitoring / "rules" / "gpucluster.rules.test.yml").read_text())["tests"]
    alerts = [r["alert"] for r in yaml.safe_load(rules.read_text())["groups"][0]["rules"]]
    assert sorted(t["name"] for t in tests) == sorted(alerts)
    assert set(alerts) == REQUIRED_ALERTS
    assert all(t["alert_rule_test"][-1]["exp_alerts"] for t in tests)


def test_a_broken_rule_fails_its_promtool_test(tmp_path: Path) -> None:
    """The rule tests can fail: a rule whose threshold no longer matches its series is caught."""
    monitoring = write(render_monitoring(load_cluster(INVENTORIES / "lab")), tmp_path)
    rules = monitoring / "rules" / "gpucluster.rules.yml"
    rules.write_text(
        rules.read_text().replace("(DCGM_FI_DEV_XID_ERRORS) > 0", "(DCGM_FI_DEV_XID_ERRORS) > 100")
    )
    tested = promtool("test", "rules", "gpucluster.rules.test.yml", cwd=monitoring / "rules")
    assert tested.returncode != 0 and "GpuXidError" in tested.stdout + tested.stderr


def test_every_rule_has_a_runbook_line() -> None:
    cluster = load_cluster(INVENTORIES / "lab")
    monitoring = monitoring_of(cluster)
    assert monitoring is not None
    for rule in alert_rules(cluster, monitoring):
        assert rule.runbook and "\n" not in rule.runbook, rule.alert


def _jobs(cluster: Cluster) -> dict[str, dict[str, object]]:
    config = yaml.safe_load(render_monitoring(cluster)["monitoring/prometheus.yml"])
    return {job["job_name"]: job for job in config["scrape_configs"]}


def test_lab_scrapes_both_controllers_endpoints_and_labels_every_node_from_the_model() -> None:
    cluster = load_cluster(INVENTORIES / "lab")
    jobs = _jobs(cluster)
    for endpoint in SLURMCTLD_ENDPOINTS:
        job = jobs[f"slurmctld_{endpoint.replace('-', '_')}"]
        assert job["metrics_path"] == f"/metrics/{endpoint}"
        groups = job["static_configs"]
        assert [g["targets"] for g in groups] == [["ctl01:6817"], ["ctl02:6817"]]  # type: ignore[union-attr]
        assert [g["labels"]["controller"] for g in groups] == ["primary", "backup1"]  # type: ignore[index]
    nodes = {g["labels"]["host"]: g["labels"] for g in jobs["node"]["static_configs"]}  # type: ignore[index,union-attr]
    assert sorted(nodes) == ["ctl01", "ctl02", "gpu01", "gpu02", "gpu03", "gpu04", "login01"]
    assert nodes["gpu03"] == {
        "cluster": "lab", "gpus": "8", "host": "gpu03", "node_type": "sim-h100", "owner": "slurm",
        "partitions": "gpu", "role": "compute", "switch": "leaf2",
    }  # fmt: skip
    assert nodes["login01"]["role"] == "login,monitoring"
    assert nodes["ctl01"]["role"] == "controller,restapi"
    assert "MetricsType=metrics/openmetrics" in render_files(cluster)["slurm/slurm.conf"]


def lab_at(tmp_path: Path, version: str, *edits: tuple[str, str]) -> Path:
    shutil.copytree(INVENTORIES / "lab", tmp_path / "lab")
    path = tmp_path / "lab" / "group_vars" / "all" / "cluster.yml"
    text = path.read_text().replace('version: "26.05"', f'version: "{version}"')
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)
    return tmp_path / "lab"


SITE_EXPORTER = ("    dcgm_exporter: false\n", "    dcgm_exporter: false\n    slurm_exporter: {port: 9341}\n")


def test_releases_without_openmetrics_scrape_no_slurm_job_and_warn_what_is_missing(tmp_path: Path) -> None:
    """Nothing installs a Slurm exporter: a job for one would only be down (and fail verify)."""
    cluster = load_cluster(lab_at(tmp_path, "24.11"))
    assert not cluster.release.openmetrics
    jobs = _jobs(cluster)
    assert sorted(jobs) == ["alertmanager", "node", "prometheus"]
    assert "MetricsType" not in render_files(cluster)["slurm/slurm.conf"]
    warnings = [str(w).removeprefix(f"{tmp_path}/lab/") for w in layer_warnings(cluster)]
    assert warnings == [
        "group_vars/all/cluster.yml:108: cluster.monitoring: Slurm 24.11's slurmctld serves no metrics "
        "(metrics/openmetrics came in 25.11) and no Slurm exporter is declared: Prometheus gets no partition, "
        "job, node-allocation and scheduler metrics (slurm_partition_*, slurm_jobs_*, slurm_node_*, slurm_bf_*), "
        "so the GpusIdleWhileJobsPend alert and the dashboard panels reading them stay empty; node states and "
        "reasons, the controller in control, slurmdbd and slurmrestd still come from the state collector. For "
        "them: Slurm 25.11 or later, or declare the exporter the site runs on every controller "
        "(cluster.monitoring.slurm_exporter: {port: N})"
    ]
    # The verify row expects exactly these targets: none that nothing serves.
    assert not any(job.startswith("slurm") for job, _ in expected_targets(cluster))


def test_a_declared_site_exporter_is_scraped_on_every_controller(tmp_path: Path) -> None:
    cluster = load_cluster(lab_at(tmp_path, "24.11", SITE_EXPORTER))
    job = _jobs(cluster)["slurm_exporter"]
    assert job["metrics_path"] == "/metrics"
    assert [g["targets"] for g in job["static_configs"]] == [["ctl01:9341"], ["ctl02:9341"]]  # type: ignore[union-attr]
    assert [g["labels"]["controller"] for g in job["static_configs"]] == ["primary", "backup1"]  # type: ignore[index]
    assert not layer_warnings(cluster)


def test_the_slurm_exporter_needs_its_port(tmp_path: Path) -> None:
    with pytest.raises(InventoryError) as caught:
        load_cluster(lab_at(tmp_path, "24.11", (SITE_EXPORTER[0], "    slurm_exporter: {}\n")))
    text = "\n".join(str(p) for p in caught.value.problems)
    assert "cluster.yml:114: cluster.monitoring.slurm_exporter.port" in text


@pytest.mark.parametrize(
    ("version", "edits"),
    [("24.11", ()), ("24.11", (SITE_EXPORTER,)), ("22.05", ())],
    ids=["24.11", "24.11-site-exporter", "22.05"],
)
def test_promtool_accepts_the_older_releases_render(
    version: str, edits: tuple[tuple[str, str], ...], tmp_path: Path
) -> None:
    cluster = load_cluster(lab_at(tmp_path, version, *edits))
    _promtool_passes(render_monitoring(cluster), tmp_path / "out")


def test_slurmctld_unreachable_fires_when_every_controllers_collector_is_silent(tmp_path: Path) -> None:
    """`scontrol ping` from the collectors, not a Slurm scrape job: with every controller down, no
    collector reports at all, and that counts as unreachable too (where Slurm has controllers)."""
    monitoring = write(render_monitoring(load_cluster(INVENTORIES / "lab")), tmp_path)
    rules = yaml.safe_load((monitoring / "rules" / "gpucluster.rules.yml").read_text())["groups"][0]["rules"]
    (annotations,) = [r["annotations"] for r in rules if r["alert"] == "SlurmctldUnreachable"]
    tests = {
        "rule_files": ["gpucluster.rules.yml"],
        "evaluation_interval": "5s",
        "tests": [
            {
                "name": "no collector reports",
                "interval": "5s",
                "input_series": [{"series": 'up{job="node",host="ctl01"}', "values": "0x20"}],
                "alert_rule_test": [
                    {
                        "eval_time": "30s",
                        "alertname": "SlurmctldUnreachable",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "critical", "cluster": "lab"},
                                "exp_annotations": annotations,
                            }
                        ],
                    }
                ],
            },
            {
                "name": "the backup answers",
                "interval": "5s",
                "input_series": [
                    {
                        "series": 'gpucluster_slurm_controller_in_control{slurm_controller="ctl01"}',
                        "values": "0x20",
                    },
                    {
                        "series": 'gpucluster_slurm_controller_in_control{slurm_controller="ctl02"}',
                        "values": "1x20",
                    },
                ],
                "alert_rule_test": [
                    {"eval_time": "30s", "alertname": "SlurmctldUnreachable", "exp_alerts": []}
                ],
            },
        ],
    }
    (monitoring / "rules" / "absent.test.yml").write_text(yaml.safe_dump(tests))
    tested = promtool("test", "rules", "absent.test.yml", cwd=monitoring / "rules")
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_superpod_nodes_carry_block_tenant_and_owner() -> None:
    cluster = load_cluster(INVENTORIES / "superpod")
    labels = [g["labels"] for g in _jobs(cluster)["node"]["static_configs"]]  # type: ignore[index,union-attr]
    compute = [lab for lab in labels if "node_type" in lab]
    assert compute and all(lab["owner"] in {"slurm", "kubernetes"} for lab in compute)
    assert {lab["owner"] for lab in compute} == {str(o) for o in cluster.owner_of.values()}
    blocks = {lab.get("nvlink_block") for lab in compute} - {None}
    assert blocks == set(cluster.blocks) or not cluster.blocks
    for lab in compute:
        host = lab["host"]
        assert lab.get("nvlink_block") == cluster.block_of.get(host)


def test_dashboards_are_grafana_json_whose_queries_name_served_metrics() -> None:
    served = {m for metrics in EXPORTED_METRICS.values() for m in metrics}
    cluster = load_cluster(INVENTORIES / "superpod")
    files = render_monitoring(cluster)
    boards = {rel: json.loads(text) for rel, text in files.items() if rel.endswith(".json")}
    assert len(boards) == 5
    ids: set[int] = set()
    for rel, board in boards.items():
        assert board["uid"] and board["title"].startswith(f"{cluster.name}: ") and board["panels"], rel
        ids.clear()
        for panel in board["panels"]:
            assert panel["id"] not in ids and panel["targets"], (rel, panel["title"])
            ids.add(panel["id"])
            for target in panel["targets"]:
                names = set(
                    re.findall(r"\b([A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{|\[|\)|$| -| \*|\))", target["expr"])
                )
                metrics = {
                    n for n in names if n.startswith(("slurm_", "DCGM_", "gpucluster_", "node_")) or n == "up"
                }
                assert metrics and metrics <= served, (rel, target["expr"], metrics - served)
    # The rules read the same metrics the collectors serve.
    rule_text = files["monitoring/rules/gpucluster.rules.yml"]
    for metric in ("slurm_partition_gpus", "slurm_partition_jobs_pending", "gpucluster_slurm_node_state"):
        assert metric in rule_text and metric in served


def test_monitoring_host_must_be_an_inventory_host(tmp_path: Path) -> None:
    shutil.copytree(INVENTORIES / "lab", tmp_path / "lab")
    path = tmp_path / "lab" / "group_vars" / "all" / "cluster.yml"
    path.write_text(path.read_text().replace("    host: login01\n", "    host: nosuchhost\n"))
    with pytest.raises(InventoryError) as caught:
        load_cluster(tmp_path / "lab")
    text = "\n".join(str(p) for p in caught.value.problems)
    assert "cluster.monitoring.host" in text and "nosuchhost" in text and "cluster.yml:" in text


def test_the_collectors_labels_are_none_of_the_node_targets() -> None:
    """node-exporter serves the collector's metrics; a label its target also carries (the model's
    `role`, `host`, ...) would win over the metric's, which Prometheus renames exported_<name>."""
    files = render_monitoring(load_cluster(INVENTORIES / "superpod"))
    collector = files["monitoring/slurm-state-collector.sh"]
    served = set(re.findall(r'(\w+)=\\?"', collector))
    assert {"slurm_node", "state", "reason", "slurm_controller", "controller_role"} <= served
    config = yaml.safe_load(files["monitoring/prometheus.yml"])
    (node,) = [job for job in config["scrape_configs"] if job["job_name"] == "node"]
    target_labels = {key for group in node["static_configs"] for key in group["labels"]}
    assert not served & (target_labels | {"job", "instance"})
