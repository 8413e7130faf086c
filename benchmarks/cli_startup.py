"""How long one `gpucluster` command takes as a whole process, and where its start-up goes.

Prints, for `render inventories/superpod` (a Kubernetes layer, no cloud layer) and `validate
inventories/lab` (core only): the best wall and CPU seconds of N runs, the import cost of the big
pieces (from `python -X importtime`), which layers the process loaded, and two floors for
comparison: the bare interpreter, and the interpreter importing pydantic (which every command
that reads an inventory needs). The floors end as any Python process does, tearing the interpreter
down; the `gpucluster` program ends a short command with os._exit once its output is flushed
(gpucluster/cli.py), so a command can take less than the pydantic floor.

Each command runs once untimed first, as a user's second run would find things: Python's bytecode
of the package written (even under PYTHONDONTWRITEBYTECODE) and the compiled templates cached (in a
temporary $XDG_CACHE_HOME).

    python benchmarks/cli_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
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
# Top-level imports worth naming (cumulative seconds in -X importtime). Modules a layer loads
# through importlib (gpucluster.k8s.*, gpucluster.cloud.*) are not in importtime's output: which
# layers were loaded is read from sys.modules instead.
PIECES = ["pydantic", "gpucluster.model.base", "gpucluster.model.spec", "yaml", "jinja2", "argparse"]
LAYERS = ["gpucluster.k8s", "gpucluster.cloud", "gpucluster.lab"]
NEVER = ["typer", "click", "rich", "shtab"]

# `python -m gpucluster.cli ARGS`, writing the imported modules' names at exit to the file named
# first (tests/unit/test_command_line.py runs it too).
MODULES_AT_EXIT = """\
import atexit, json, runpy, sys
modules_file = sys.argv.pop(1)
def dump():
    with open(modules_file, "w") as handle:
        json.dump(sorted(sys.modules), handle)
atexit.register(dump)
runpy.run_module("gpucluster.cli", run_name="__main__", alter_sys=True)
"""


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, cwd=REPO, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def best(command: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    results = [timed(command, env) for _ in range(runs)]
    return min(r[0] for r in results), min(r[1] for r in results)


def import_costs(args: list[str], env: dict[str, str]) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gpucluster.cli", *args],
        cwd=REPO,
        env=env,
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


def loaded_packages(args: list[str], env: dict[str, str]) -> list[str]:
    with tempfile.NamedTemporaryFile(suffix=".json") as modules_file:
        subprocess.run(
            [sys.executable, "-c", MODULES_AT_EXIT, modules_file.name, *args],
            cwd=REPO,
            env=env,
            check=True,
            capture_output=True,
        )
        modules = set(json.loads(Path(modules_file.name).read_text()))
    return [p for p in LAYERS + NEVER if any(m == p or m.startswith(f"{p}.") for m in modules)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; best of {runs} runs")
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(scratch) / "cache")}
        warm_up = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
        python = [sys.executable]
        floors = {
            "python -c pass": [*python, "-c", "pass"],
            "import pydantic": [*python, "-c", "import pydantic.main, pydantic.fields"],
        }
        for name, command in floors.items():
            wall, cpu = best(command, env, runs)
            print(f"{name:16s} whole process: {wall:.3f} s wall, {cpu:.3f} s CPU (floor, for comparison)")
        commands = {
            "render superpod": ["render", "inventories/superpod", "--out", str(Path(scratch) / "out")],
            "validate lab": ["validate", "inventories/lab"],
        }
        for name, args in commands.items():
            timed([str(GPUCLUSTER), *args], warm_up)
            wall, cpu = best([str(GPUCLUSTER), *args], env, runs)
            print(f"{name:16s} whole process: {wall:.3f} s wall, {cpu:.3f} s CPU")
            costs = import_costs(args, env)
            print("  imports (cumulative s): " + ", ".join(f"{k} {v:.3f}" for k, v in costs.items()))
            print("  loaded: " + (", ".join(loaded_packages(args, env)) or "no layer"))


if __name__ == "__main__":
    main()
