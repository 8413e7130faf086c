"""The `targets` row of `gpucluster verify`: every scrape target the model gives Prometheus is
active and up, as Prometheus' own targets API says on the monitoring host."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from gpucluster.model.cluster import Cluster
from gpucluster.monitoring.model import monitoring_of
from gpucluster.monitoring.targets import scrape_jobs
from gpucluster.packagedata import data_path
from gpucluster.verify.checks import CheckResult, Status

MONITORING_PLAYBOOK = data_path("verify", "monitoring.yml")
NAME = "scrape-targets"


def expected_targets(cluster: Cluster) -> list[tuple[str, str]]:
    monitoring = monitoring_of(cluster)
    if monitoring is None:
        return []
    return [(job.name, t.address) for job in scrape_jobs(cluster, monitoring) for t in job.targets]


def judge(expected: list[tuple[str, str]], answer: dict[str, Any], host: str) -> CheckResult:
    """Prometheus' answer (the playbook's record of curl) against the targets of the model."""
    if answer.get("rc") != 0:
        why = str(answer.get("stderr") or "no answer").strip().splitlines()
        return CheckResult(
            NAME, Status.FAIL, f"Prometheus on {host} does not answer: {why[0] if why else ''}", (host,)
        )
    try:
        active = json.loads(str(answer.get("stdout")))["data"]["activeTargets"]
    except (ValueError, KeyError, TypeError):
        return CheckResult(NAME, Status.FAIL, f"Prometheus on {host} gave no targets list", (host,))
    seen = {(t["labels"].get("job", ""), t["labels"].get("instance", "")): t for t in active}
    problems: list[str] = []
    names: list[str] = []
    powered_off: list[str] = []
    for job, address in expected:
        target = seen.get((job, address))
        if target is None:
            problems.append(f"{job} {address}: not scraped")
        elif target.get("health") != "up" and (target.get("labels") or {}).get("power"):
            # A power-saved node's target (labelled with its power kind) is down while Slurm keeps
            # the node off: that is the saving, not a fault (the nodes row says Slurm's power state).
            powered_off.append(address)
        elif target.get("health") != "up":
            problems.append(
                f"{job} {address}: {target.get('health')} ({target.get('lastError') or 'no error given'})"
            )
        else:
            continue
        names.append(address.rsplit(":", 1)[0])
    extra = sorted(f"{job} {address}" for job, address in seen if (job, address) not in set(expected))
    if extra:
        problems.append(f"not in the model: {', '.join(extra)}")
    if problems:
        return CheckResult(NAME, Status.FAIL, "; ".join(problems), tuple(dict.fromkeys(names)))
    if powered_off:
        up = len(expected) - len(powered_off)
        return CheckResult(
            NAME, Status.PASS, f"{up} scrape targets up; down while power-saved: {', '.join(powered_off)}"
        )
    return CheckResult(NAME, Status.PASS, f"all {len(expected)} scrape targets up")


def check_targets(cluster: Cluster, run: Any) -> CheckResult | None:
    """None without cluster.monitoring; `run` is verify's PlaybookRunner."""
    monitoring = monitoring_of(cluster)
    if monitoring is None:
        return None
    with tempfile.TemporaryDirectory(prefix="gpucluster-verify-") as tmp:
        output = Path(tmp) / "targets.json"
        extra = {
            "gpucluster_verify_output": str(output),
            "gpucluster_verify_monitoring": {"host": monitoring.host, "port": monitoring.prometheus_port},
        }
        plan = Path(tmp) / "vars.json"
        plan.write_text(json.dumps(extra), encoding="utf-8")
        run(MONITORING_PLAYBOOK, ["--extra-vars", f"@{plan}"])
        answer = json.loads(output.read_text(encoding="utf-8")) if output.is_file() else {}
    return judge(expected_targets(cluster), answer, monitoring.host)
