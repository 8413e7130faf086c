"""The verification report: a table (one row per check) or JSON."""

from __future__ import annotations

import json
import sys

from gpucluster.console import table
from gpucluster.model.cluster import Cluster
from gpucluster.verify.checks import CheckResult, Status


def failed(results: list[CheckResult]) -> bool:
    return any(r.status == Status.FAIL for r in results)


def as_json(cluster: Cluster, results: list[CheckResult]) -> str:
    doc = {
        "cluster": cluster.spec.name,
        "inventory": cluster.source,
        "ok": not failed(results),
        "checks": [r.as_dict() for r in results],
    }
    return json.dumps(doc, indent=2) + "\n"


def as_table(cluster: Cluster, results: list[CheckResult]) -> str:
    """A row per check, then how many passed, failed and were skipped."""
    rows = [[result.name, str(result.status), result.detail] for result in results]
    counts = {status: sum(r.status == status for r in results) for status in Status}
    title = f"gpucluster verify: {cluster.spec.name} ({cluster.source})"
    totals = ", ".join(f"{counts[s]} {s}" for s in Status)
    return f"{table(title, ('check', 'result', 'seen'), rows)}\n{totals}\n"


def emit(cluster: Cluster, results: list[CheckResult], json_output: bool) -> int:
    """Print the report on stdout (JSON, or the table); the exit code: 0 only when nothing failed."""
    sys.stdout.write(as_json(cluster, results) if json_output else as_table(cluster, results))
    return 1 if failed(results) else 0
