"""The verification report: a table (one row per check) or JSON."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from gpucluster.cluster import Cluster
from gpucluster.verify.checks import CheckResult, Status

if TYPE_CHECKING:
    from rich.console import Console

STYLE = {Status.PASS: "green", Status.FAIL: "bold red", Status.SKIPPED: "yellow"}


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


def print_table(cluster: Cluster, results: list[CheckResult], console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"gpucluster verify: {cluster.spec.name} ({cluster.source})")
    table.add_column("check", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("seen")
    for result in results:
        style = STYLE[result.status]
        table.add_row(result.name, f"[{style}]{result.status}[/{style}]", escape(result.detail))
    console.print(table)
    counts = {status: sum(r.status == status for r in results) for status in Status}
    console.print(", ".join(f"{counts[s]} {s}" for s in Status), highlight=False)


def emit(cluster: Cluster, results: list[CheckResult], json_output: bool, console: Console) -> int:
    """Print the report (JSON on stdout, or the table); the exit code: 0 only when nothing failed."""
    if json_output:
        sys.stdout.write(as_json(cluster, results))
    else:
        print_table(cluster, results, console)
    return 1 if failed(results) else 0
