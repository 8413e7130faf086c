"""How long one `gpucluster` command takes as a whole process, and where its start-up goes.

Prints, for `render inventories/superpod` (a Kubernetes layer, no cloud layer) and `validate
inventories/lab` (core only): the best wall and CPU seconds of N runs, and the import cost of the
big pieces (from `python -X importtime`), so a regression shows which import grew.

    python benchmarks/cli_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GPUCLUSTER = Path(sys.executable).parent / "gpucluster"
# Top-level imports worth naming (cumulative microseconds in -X importtime).
PIECES = [
    "pydantic",
    "gpucluster.modelbase",
    "gpucluster.model",
    "typer",
    "rich.console",
    "jinja2",
    "yaml",
    "gpucluster.k8s.model",
    "gpucluster.k8s.render",
    "gpucluster.cloud.model",
]


def timed(command: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, cwd=REPO, check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def import_costs(args: list[str]) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gpucluster.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    costs: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        found = re.match(r"import time:\s+\d+ \|\s+(\d+) \|\s*(\S+)$", line)
        if found and found.group(2) in PIECES:
            costs.setdefault(found.group(2), int(found.group(1)) / 1e6)
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; best of {runs} runs")
    with tempfile.TemporaryDirectory() as out:
        commands = {
            "render superpod": ["render", "inventories/superpod", "--out", out],
            "validate lab": ["validate", "inventories/lab"],
        }
        for name, args in commands.items():
            results = [timed([str(GPUCLUSTER), *args]) for _ in range(runs)]
            wall = min(r[0] for r in results)
            cpu = min(r[1] for r in results)
            print(f"{name:16s} whole process: {wall:.3f} s wall, {cpu:.3f} s CPU")
            costs = import_costs(args)
            print("  imports (cumulative s): " + ", ".join(f"{k} {v:.3f}" for k, v in costs.items()))
            if "gpucluster.cloud.model" not in costs:
                print("  (the cloud layer was not imported)")


if __name__ == "__main__":
    main()
