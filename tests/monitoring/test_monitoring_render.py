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

from gpucluster.errors import InventoryError
from gpucluster.layers import layer_warnings, load_cluster
from gpucluster.model.cluster import Cluster
from gpucluster.monitoring.dashboards import SLURMCTLD_METRICS, served_metrics
from gpucluster.monitoring.model import monitoring_of
from gpucluster.monitoring.render import RULES_PATH, render_monitoring
from gpucluster.monitoring.rules import alert_rules
from gpucluster.monitoring.summary import summary
from gpucluster.monitoring.targets import SLURMCTLD_ENDPOINTS
from gpucluster.rendering import render_files
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
    # With power-saved nodes: their exporters' own alert (silent while Slurm keeps them off); with a
    # return-to-service gate: a node that failed it.
    optional = {"PowerSavedNodeExporterMissing", "GateNodeOut"}
    assert set(alerts) - optional == REQUIRED_ALERTS
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


def test_metrics_type_in_extra_is_refused_where_monitoring_writes_it_and_the_sites_own_elsewhere(
    tmp_path: Path,
) -> None:
    """Slurm keeps one of two MetricsType lines: the layer's would silently lose."""
    extra = (
        "    health: {interval: 10}\n",
        "    health: {interval: 10}\n    extra: {MetricsType: metrics/openmetrics}\n",
    )
    with pytest.raises(InventoryError) as caught:
        load_cluster(lab_at(tmp_path / "26.05", "26.05", extra))
    assert [str(p).split(": ", 1)[1] for p in caught.value.problems] == [
        "cluster.slurm.extra.MetricsType: MetricsType is written by cluster.monitoring; remove it here (Slurm "
        "would keep one of the two lines)"
    ]
    # 24.11 knows no such key: the core refuses it there, as any key of another release.
    with pytest.raises(InventoryError) as caught:
        load_cluster(lab_at(tmp_path / "24.11", "24.11", extra))
    assert "is not a slurm.conf key of Slurm 24.11" in str(caught.value.problems[0])


SITE_EXPORTER = ("    dcgm_exporter: false\n", "    dcgm_exporter: false\n    slurm_exporter: {port: 9341}\n")


def test_releases_without_openmetrics_scrape_no_slurm_job_and_the_collector_gives_the_metrics(
    tmp_path: Path,
) -> None:
    """Nothing installs a Slurm exporter: a job for one would only be down (and fail verify). The
    state collector gives what the rules and dashboards read, so nothing is missing to warn of."""
    cluster = load_cluster(lab_at(tmp_path, "24.11"))
    assert not cluster.release.openmetrics
    jobs = _jobs(cluster)
    assert sorted(jobs) == ["alertmanager", "node", "prometheus"]
    assert "MetricsType" not in render_files(cluster)["slurm/slurm.conf"]
    assert not layer_warnings(cluster)
    assert summary(cluster)["slurm_metrics"] == (
        "the state collector on the controllers (sinfo, squeue: partition and node GPUs, the queue, node "
        "states); Slurm 24.11's slurmctld serves none (25.11+)"
    )
    # The verify row expects exactly these targets: none that nothing serves.
    assert not any(job.startswith("slurm") for job, _ in expected_targets(cluster))


def test_a_declared_site_exporter_is_scraped_on_every_controller(tmp_path: Path) -> None:
    cluster = load_cluster(lab_at(tmp_path, "24.11", SITE_EXPORTER))
    job = _jobs(cluster)["slurm_exporter"]
    assert job["metrics_path"] == "/metrics"
    assert [g["targets"] for g in job["static_configs"]] == [["ctl01:9341"], ["ctl02:9341"]]  # type: ignore[union-attr]
    assert [g["labels"]["controller"] for g in job["static_configs"]] == ["primary", "backup1"]  # type: ignore[index]
    assert not layer_warnings(cluster)
    # Beside the collector's metrics, which the rules keep reading.
    assert summary(cluster)["slurm_metrics"].endswith(
        "; the site's Slurm exporter is scraped too (port 9341)"
    )
    assert (
        "gpucluster_slurm_partition_gpus"
        in render_monitoring(cluster)["monitoring/rules/gpucluster.rules.yml"]
    )


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


def metric_names(expr: str) -> set[str]:
    """The metrics a PromQL expression reads: its identifiers less strings, label matchers, label
    lists, ranges, functions and operators."""
    text = re.sub(r'"[^"]*"', '""', expr)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    words = set(re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\b(?!\s*\()", text))
    return words - {"and", "or", "unless", "bool", "offset"}


def _cluster(name: str, tmp_path: Path) -> Cluster:
    """An example, or the lab at another release (`lab-24.11`)."""
    if name.startswith("lab-"):
        return load_cluster(lab_at(tmp_path, name.removeprefix("lab-")))
    return load_cluster(INVENTORIES / name)


@pytest.mark.parametrize("name", ["superpod", "lab", "lab-24.11", "lab-22.05"])
def test_dashboards_are_grafana_json_whose_queries_name_served_metrics(name: str, tmp_path: Path) -> None:
    """Each query names what the release's sources serve: slurmctld's metrics from 25.11, the
    collector's as its rendered script writes them before; and Prometheus parses every query."""
    cluster = _cluster(name, tmp_path)
    monitoring = monitoring_of(cluster)
    assert monitoring is not None
    files = render_monitoring(cluster)
    served = {m for metrics in served_metrics(cluster).values() for m in metrics}
    script = files["monitoring/slurm-state-collector.sh"]
    assert set(served_metrics(cluster)["collector"]) == set(re.findall(r"\b(gpucluster_\w+)[{ ]", script))
    boards = {rel: json.loads(text) for rel, text in files.items() if rel.endswith(".json")}
    assert len(boards) == 5
    ids: set[int] = set()
    queries = []
    for rel, board in boards.items():
        assert board["uid"] and board["title"].startswith(f"{cluster.name}: ") and board["panels"], rel
        ids.clear()
        for panel in board["panels"]:
            assert panel["id"] not in ids and panel["targets"], (rel, panel["title"])
            ids.add(panel["id"])
            for target in panel["targets"]:
                queries.append(target["expr"])
                metrics = metric_names(target["expr"])
                assert metrics and metrics <= served, (rel, target["expr"], metrics - served)
    slurm_queries = [q for q in queries if "slurm_partition" in q or "slurm_node_gpus" in q]
    assert len(slurm_queries) >= 8, slurm_queries
    if cluster.release.openmetrics:
        assert not any("gpucluster_slurm_partition" in q for q in queries)
    else:
        assert not any(re.search(r"(?<!gpucluster_)slurm_(partition|node)_", q) for q in queries)
    # Every query parses: promtool checks them as recording rules.
    recorded = {
        "groups": [{"name": "q", "rules": [{"record": f"q{i}", "expr": q} for i, q in enumerate(queries)]}]
    }
    (tmp_path / "queries.yml").write_text(yaml.safe_dump(recorded))
    checked = promtool("check", "rules", "queries.yml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The rules read the same metrics the sources serve.
    rule_text = files["monitoring/rules/gpucluster.rules.yml"]
    for metric in ("gpucluster_slurm_node_state",) + (
        ("slurm_partition_gpus", "slurm_partition_jobs_pending")
        if cluster.release.openmetrics
        else ("gpucluster_slurm_partition_gpus", "gpucluster_slurm_partition_jobs_pending_gpus")
    ):
        assert metric in rule_text and metric in served, metric
    assert set(SLURMCTLD_METRICS) & served == (
        set(SLURMCTLD_METRICS) if cluster.release.openmetrics else set()
    )


# The release's source: total GPUs, allocated GPUs, what the pending jobs say.
IDLE_GPU_SOURCES = {
    "24.11": (
        "gpucluster_slurm_partition_gpus",
        "gpucluster_slurm_partition_gpus_alloc",
        "gpucluster_slurm_partition_jobs_pending_gpus",
    ),
    "26.05": ("slurm_partition_gpus", "slurm_partition_jobs_gpus_alloc", "slurm_partition_jobs_pending"),
}


@pytest.mark.parametrize("version", sorted(IDLE_GPU_SOURCES))
def test_gpus_idle_while_jobs_pend_reads_the_releases_source_and_fires_only_for_idle_gpus(
    version: str, tmp_path: Path
) -> None:
    """Its rendered promtool test proves it fires (both forms: the examples and the older
    releases' renders run it); here also that it stays quiet with every GPU allocated and with
    nothing pending (on 24.11: no pending job asking for a GPU). On 24.11 both controllers'
    collectors report the same series: one alert, not two."""
    total, alloc, pending = IDLE_GPU_SOURCES[version]
    monitoring = write(render_monitoring(load_cluster(lab_at(tmp_path, version))), tmp_path / "out")
    rules = yaml.safe_load((monitoring / "rules" / "gpucluster.rules.yml").read_text())["groups"][0]["rules"]
    (rule,) = [r for r in rules if r["alert"] == "GpusIdleWhileJobsPend"]
    assert set(re.findall(r"\b(\w*slurm_\w+)", rule["expr"])) == {total, alloc, pending}
    generated = yaml.safe_load((monitoring / "rules" / "gpucluster.rules.test.yml").read_text())["tests"]
    (test,) = [t for t in generated if t["name"] == "GpusIdleWhileJobsPend"]
    series = {(s["series"].split("{")[0], s["series"]) for s in test["input_series"]}
    assert {name for name, _ in series} == {total, alloc, pending}
    hosts = {m.group(1) for _, text in series if (m := re.search(r'host="(\w+)"', text))}
    assert hosts == ({"ctl01", "ctl02"} if version == "24.11" else set())

    def quiet(case: str, values: dict[str, str]) -> dict[str, object]:
        return {
            "name": case,
            "interval": test["interval"],
            "input_series": [
                {"series": s["series"], "values": values.get(s["series"].split("{")[0], s["values"])}
                for s in test["input_series"]
            ],
            "alert_rule_test": [
                {
                    "eval_time": test["alert_rule_test"][-1]["eval_time"],
                    "alertname": rule["alert"],
                    "exp_alerts": [],
                }
            ],
        }

    cases = [quiet("every GPU allocated", {alloc: "32x100"}), quiet("nothing pending", {pending: "0x100"})]
    (monitoring / "rules" / "quiet.test.yml").write_text(
        yaml.safe_dump(
            {"rule_files": ["gpucluster.rules.yml"], "evaluation_interval": test["interval"], "tests": cases}
        )
    )
    tested = promtool("test", "rules", "quiet.test.yml", cwd=monitoring / "rules")
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_monitoring_host_must_be_an_inventory_host(tmp_path: Path) -> None:
    shutil.copytree(INVENTORIES / "lab", tmp_path / "lab")
    path = tmp_path / "lab" / "group_vars" / "all" / "cluster.yml"
    path.write_text(path.read_text().replace("    host: login01\n", "    host: nosuchhost\n"))
    with pytest.raises(InventoryError) as caught:
        load_cluster(tmp_path / "lab")
    text = "\n".join(str(p) for p in caught.value.problems)
    assert "cluster.monitoring.host" in text and "nosuchhost" in text and "cluster.yml:" in text


@pytest.mark.parametrize("name", ["superpod", "lab-24.11"])
def test_the_collectors_labels_are_none_of_the_node_targets(name: str, tmp_path: Path) -> None:
    """node-exporter serves the collector's metrics; a label its target also carries (the model's
    `role`, `host`, `partitions`, ...) would win over the metric's, which Prometheus renames
    exported_<name>."""
    files = render_monitoring(_cluster(name, tmp_path))
    collector = files["monitoring/slurm-state-collector.sh"]
    served = set(re.findall(r'(\w+)=\\?"', collector))
    assert {"slurm_node", "state", "reason", "slurm_controller", "controller_role"} <= served
    assert ("partition" in served) == name.endswith("24.11")
    config = yaml.safe_load(files["monitoring/prometheus.yml"])
    (node,) = [job for job in config["scrape_configs"] if job["job_name"] == "node"]
    target_labels = {key for group in node["static_configs"] for key in group["labels"]}
    assert not served & (target_labels | {"job", "instance"})


# Per source: a node's GPU series as Prometheus stores them (from each controller), by metric.
NODE_GPU_SERIES = {
    "24.11": (
        ("gpucluster_slurm_node_gpus", "gpucluster_slurm_node_gpus_alloc"),
        ("gpucluster_slurm_partition_gpus", "gpucluster_slurm_partition_gpus_alloc"),
        '{{slurm_node="{node}",host="{ctl}",role="controller"}}',
        '{{partition="gpu",host="{ctl}",role="controller"}}',
    ),
    "26.05": (
        ("slurm_node_gpus", "slurm_node_gpus_alloc"),
        ("slurm_partition_gpus", "slurm_partition_jobs_gpus_alloc"),
        '{{node="{node}",host="{ctl}",job="slurmctld_nodes"}}',
        '{{partition="gpu",host="{ctl}",job="slurmctld_partitions"}}',
    ),
}


@pytest.mark.parametrize("version", sorted(NODE_GPU_SERIES))
def test_idle_gpu_hours_add_up_per_partition_and_per_tenant(version: str, tmp_path: Path) -> None:
    """The dashboard's queries evaluated by promtool over a day: gpu01 (tenant research) 6 of 8
    GPUs idle, gpu02 (tenant product) none. Both controllers report the same numbers (on 25.11+
    a standby slurmctld redirects /metrics to the primary), counted once."""
    (node_gpus, node_alloc), (part_gpus, part_alloc), node_labels, part_labels = NODE_GPU_SERIES[version]
    files = render_monitoring(load_cluster(lab_at(tmp_path, version)))
    board = json.loads(files["monitoring/grafana/dashboards/idle-gpu-hours.json"])
    queries = {panel["title"]: panel["targets"][0]["expr"] for panel in board["panels"]}
    # Samples every 5 min from the 5th: the day's window holds 288 of them, whichever end a
    # Prometheus release includes.
    day = "_ {}x300"
    series = [{"series": 'up{job="node",host="gpu01",tenant="research"}', "values": day.format(1)}]
    series.append({"series": 'up{job="node",host="gpu02",tenant="product"}', "values": day.format(1)})
    for ctl in ("ctl01", "ctl02"):
        for node, alloc in (("gpu01", 2), ("gpu02", 8)):
            labels = node_labels.format(node=node, ctl=ctl)
            series += [
                {"series": node_gpus + labels, "values": day.format(8)},
                {"series": node_alloc + labels, "values": day.format(alloc)},
            ]
        series += [
            {"series": part_gpus + part_labels.format(ctl=ctl), "values": day.format(16)},
            {"series": part_alloc + part_labels.format(ctl=ctl), "values": day.format(10)},
        ]
    expected = {
        "Idle GPU hours per partition (24 h)": [{"labels": '{partition="gpu"}', "value": 6 * 24}],
        "Idle GPU hours on nodes of tenant research (24 h)": [{"labels": "{}", "value": 6 * 24}],
        "Idle GPU hours on nodes of tenant product (24 h)": [{"labels": "{}", "value": 0}],
    }
    tests = {
        "tests": [
            {
                "interval": "5m",
                "input_series": series,
                "promql_expr_test": [
                    {"expr": queries[title], "eval_time": "24h", "exp_samples": samples}
                    for title, samples in expected.items()
                ],
            }
        ]
    }
    (tmp_path / "idle.test.yml").write_text(yaml.safe_dump(tests))
    tested = promtool("test", "rules", "idle.test.yml", cwd=tmp_path)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr
