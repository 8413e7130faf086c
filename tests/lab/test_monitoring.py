"""Monitoring on the lab (26.05): Prometheus on login01 scrapes slurmctld's own endpoints on both
controllers and node-exporter on every host, all up; Slurm's node metrics match sinfo; a node the
health check drains makes the drain alerts fire in Alertmanager; `gpucluster lab verify` has the
targets row. Reuses the session's lab (the playbook installed monitoring with it); measured 3 min
20 s, 95 s of it the one `lab verify` (its jobs included).
Every test puts back what it changed (the GPU device, the drained node)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from gpucluster.lab.paths import REPO_ROOT
from gpucluster.monitoring.model import monitoring_of
from gpucluster.tools import venv_tool
from gpucluster.verify.monitoring import expected_targets

from .conftest import Lab
from .test_health import DEVICE, MARGIN, SICK, device_args, interval, node

pytestmark = pytest.mark.lab


def api(lab: Lab, url: str, *curl: str) -> Any:
    """A Prometheus or Alertmanager API answer, asked from inside the lab on the monitoring host."""
    monitoring = monitoring_of(lab.cluster)
    assert monitoring is not None, "the lab inventory enables monitoring"
    out = lab.ok("curl", "-sS", "-m", "10", *curl, url, host=monitoring.host)
    return json.loads(out)


def targets(lab: Lab) -> dict[tuple[str, str], dict[str, Any]]:
    doc = api(lab, "http://localhost:9090/api/v1/targets?state=active")
    return {(t["labels"]["job"], t["labels"]["instance"]): t for t in doc["data"]["activeTargets"]}


def query(lab: Lab, promql: str) -> list[dict[str, Any]]:
    doc = api(lab, "http://localhost:9090/api/v1/query", "-G", "--data-urlencode", f"query={promql}")
    assert doc["status"] == "success", doc
    result: list[dict[str, Any]] = doc["data"]["result"]
    return result


def test_every_scrape_target_is_up(lab_cluster: Lab) -> None:
    lab = lab_cluster
    expected = expected_targets(lab.cluster)
    assert ("slurmctld_nodes", "ctl02:6817") in expected and ("node", "login01:9100") in expected

    def all_up() -> bool:
        seen = targets(lab)
        return all(seen.get(t, {}).get("health") == "up" for t in expected)

    lab.wait(all_up, 60, "every scrape target up")
    seen = targets(lab)
    assert sorted(seen) == sorted(expected), "Prometheus scrapes exactly the model's targets"
    print(
        "\ntargets:\n"
        + "\n".join(f"  {job} {address} {seen[(job, address)]['health']}" for job, address in expected)
    )
    # The model's labels are on the node targets.
    gpu = seen[("node", "gpu03:9100")]["labels"]
    assert (gpu["owner"], gpu["partitions"], gpu["switch"], gpu["node_type"]) == (
        "slurm",
        "gpu",
        "leaf2",
        "sim-h100",
    )


def test_slurm_node_metrics_match_sinfo(lab_cluster: Lab) -> None:
    lab = lab_cluster
    sinfo = lab.ok("sinfo", "--noheader", "--Node", "--format=%N %c %G").split("\n")
    rows = {line.split()[0]: line.split() for line in sinfo if line.strip()}
    cpus = {
        r["metric"]["node"]: int(r["value"][1])
        for r in query(lab, 'slurm_node_cpus{job="slurmctld_nodes",controller="primary"}')
    }
    gpus = {
        r["metric"]["node"]: int(r["value"][1])
        for r in query(lab, 'slurm_node_gpus{job="slurmctld_nodes",controller="primary"}')
    }
    assert sorted(cpus) == sorted(rows)
    for name, (_, ncpus, gres) in rows.items():
        assert cpus[name] == int(ncpus), name
        # gres like gpu:h100:8(S:0)
        assert gpus[name] == int(gres.split(":")[2].split("(")[0]), (name, gres)


@pytest.fixture
def device_back(lab_cluster: Lab) -> Iterator[Lab]:
    lab = lab_cluster
    mknod = device_args(lab)
    try:
        yield lab
    finally:
        if lab.sh("test", "-e", DEVICE, host=SICK).returncode != 0:
            lab.ok("mknod", *mknod, host=SICK)
        if "DRAIN" in node(lab, SICK)[0].split("+"):
            # The health check resumes the node itself once the device is back, possibly between
            # the read above and this update ("Invalid node state transition"): the wait below
            # judges the outcome, not this command.
            lab.sh("scontrol", "update", f"NodeName={SICK}", "State=RESUME")
        lab.wait(lambda: "DRAIN" not in node(lab, SICK)[0].split("+"), 60, f"{SICK} undrained")


def firing(lab: Lab, name: str) -> list[dict[str, Any]]:
    alerts: list[dict[str, Any]] = api(lab, "http://localhost:9093/api/v2/alerts?active=true")
    return [a for a in alerts if a["labels"]["alertname"] == name and a["status"]["state"] == "active"]


def test_a_health_check_drain_fires_the_drain_alerts_in_alertmanager(device_back: Lab) -> None:
    lab = device_back
    every = interval(lab)
    lab.ok("rm", DEVICE, host=SICK)
    lab.wait(
        lambda: node(lab, SICK)[1].startswith("[health]"),
        2 * every + MARGIN,
        f"the health check to drain {SICK}",
    )
    reason = node(lab, SICK)[1]
    # The collector (every 15 s), a scrape and an evaluation (5 s each), `for` 10 s, Alertmanager.
    lab.wait(
        lambda: bool(firing(lab, "HealthCheckDrainedNode")) and bool(firing(lab, "SlurmNodeDrained")),
        90,
        "the drain alerts in Alertmanager",
    )
    health = firing(lab, "HealthCheckDrainedNode")[0]
    drained = firing(lab, "SlurmNodeDrained")[0]
    print("\nfiring:", json.dumps({k: drained[k] for k in ("labels", "annotations", "startsAt")}, indent=1))
    assert health["labels"]["slurm_node"] == SICK and health["labels"]["reason"] == reason
    assert drained["labels"]["slurm_node"] == SICK and drained["labels"]["state"] == "drained"
    assert drained["annotations"]["summary"] == f"{SICK} is drained: {reason}"
    assert drained["annotations"]["runbook"]


def test_lab_verify_has_the_targets_row(lab_cluster: Lab) -> None:
    proc = subprocess.run(
        [venv_tool("gpucluster"), "lab", "verify", "--json"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    rows = {row["name"]: row for row in json.loads(proc.stdout)["checks"]}
    row = rows["scrape-targets"]
    print(f"\nscrape-targets: {row['status']}: {row['detail']}")
    assert row["status"] == "pass", row
    assert row["detail"] == f"all {len(expected_targets(lab_cluster.cluster))} scrape targets up"
