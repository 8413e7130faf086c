#!/usr/bin/env python3
"""gpucluster-mig: a node's MIG layout made what its node type declares, with nvidia-smi.

`plan` prints the nvidia-smi commands that would make the GPUs match the layout (nothing when they
do) and exits 10 when there are some; `apply` runs them; `check` exits 1 naming each GPU that
differs. The layout is /etc/gpucluster/mig.json, rendered by gpucluster from gpus.sharing.mig:
{"gpus": {"0": {"1g.10gb": 7}, ...}}. The gpu_mig role runs `apply` only on a drained, empty
node, and the gpucluster-mig unit runs it at boot before slurmd (GPU instances do not survive a
reboot; MIG mode does).

Per GPU whose instances differ: MIG mode on (`nvidia-smi -i N -mig 1`; a GPU whose mode stays
pending is reset, `nvidia-smi -i N -r`, which needs no process on it), its compute and GPU
instances destroyed (`nvidia-smi mig -i N -dci`, `-dgi`), the declared ones created largest
first with their default compute instance (`nvidia-smi mig -i N -cgi 3g.40gb,1g.10gb -C`), as
NVIDIA's MIG user guide describes ("Getting Started with MIG").

`--observed DIR` reads what nvidia-smi would print from files instead (`query-gpu.csv`: the
output of `nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending
--format=csv,noheader`; `lgi.txt`: of `nvidia-smi mig -lgi`), for a host without GPUs.
Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

CONFIG = "/etc/gpucluster/mig.json"
QUERY = ["--query-gpu=index,mig.mode.current,mig.mode.pending", "--format=csv,noheader"]
# `nvidia-smi mig -lgi` rows: |   0  MIG 1g.10gb          19        7          4:1     |
GI_ROW = re.compile(r"^\|\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s+\|")
# Placement order of NVIDIA's guide: larger instances first leave room for the small ones.
PLAN_CHANGES = 10


@dataclass
class Gpu:
    index: str
    mig_current: bool
    mig_pending: bool
    instances: Counter[str] = field(default_factory=Counter)


def parse_query(text: str) -> dict[str, Gpu]:
    gpus: dict[str, Gpu] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            gpus[parts[0]] = Gpu(parts[0], parts[1] == "Enabled", parts[2] == "Enabled")
    return gpus


def parse_instances(text: str, gpus: dict[str, Gpu]) -> None:
    for line in text.splitlines():
        match = GI_ROW.match(line)
        if match and match.group(1) in gpus:
            gpus[match.group(1)].instances[match.group(2)] += 1


def profile_size(name: str) -> tuple[int, int]:
    """(compute slices, memory GB) of `3g.40gb`, to order instances largest first."""
    found = re.match(r"(\d+)g\.(\d+)gb", name)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def commands_for(gpu: Gpu, wanted: dict[str, int]) -> list[list[str]]:
    """The nvidia-smi commands (after `nvidia-smi`) that give one GPU its declared instances."""
    commands: list[list[str]] = []
    if not gpu.mig_current:
        if not gpu.mig_pending:
            commands.append(["-i", gpu.index, "-mig", "1"])
        commands.append(["-i", gpu.index, "-r"])
    if gpu.mig_current and gpu.instances == Counter(wanted):
        return commands
    if gpu.instances:
        commands.append(["mig", "-i", gpu.index, "-dci"])
        commands.append(["mig", "-i", gpu.index, "-dgi"])
    profiles = sorted(
        (name for name, count in wanted.items() for _ in range(count)), key=profile_size, reverse=True
    )
    if profiles:
        commands.append(["mig", "-i", gpu.index, "-cgi", ",".join(profiles), "-C"])
    return commands


def differences(gpus: dict[str, Gpu], layout: dict[str, dict[str, int]]) -> list[str]:
    """What differs from the declared layout, a line per GPU."""
    found = []
    for index, wanted in sorted(layout.items(), key=lambda item: int(item[0])):
        gpu = gpus.get(index)
        if gpu is None:
            found.append(f"GPU {index}: not found")
            continue
        have = ", ".join(f"{n} x {p}" for p, n in sorted(gpu.instances.items())) or "no instances"
        want = ", ".join(f"{n} x {p}" for p, n in sorted(wanted.items()))
        if not gpu.mig_current:
            found.append(f"GPU {index}: MIG mode off (declared: {want})")
        elif gpu.instances != Counter(wanted):
            found.append(f"GPU {index}: {have} (declared: {want})")
    return found


class Smi:
    """nvidia-smi, or the files of what it printed (--observed)."""

    def __init__(self, binary: str | None, observed: Path | None) -> None:
        self.binary = binary
        self.observed = observed

    def read(self, args: list[str], name: str) -> str:
        if self.observed is not None:
            return (self.observed / name).read_text(encoding="utf-8")
        assert self.binary is not None
        proc = subprocess.run([self.binary, *args], capture_output=True, text=True, timeout=120, check=False)
        # `mig -lgi` with none: "No GPU instances found" and a non-zero exit.
        if proc.returncode != 0 and "No GPU instances found" not in proc.stdout + proc.stderr:
            raise RuntimeError(f"nvidia-smi {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def gpus(self) -> dict[str, Gpu]:
        gpus = parse_query(self.read(QUERY, "query-gpu.csv"))
        parse_instances(self.read(["mig", "-lgi"], "lgi.txt"), gpus)
        return gpus

    def run(self, args: list[str]) -> None:
        assert self.binary is not None and self.observed is None
        proc = subprocess.run([self.binary, *args], capture_output=True, text=True, timeout=600, check=False)
        if proc.returncode != 0:
            raise RuntimeError(
                f"nvidia-smi {' '.join(args)}: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()}"
            )


def load_layout(path: Path) -> dict[str, dict[str, int]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {str(k): {str(p): int(n) for p, n in v.items()} for k, v in data["gpus"].items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpucluster-mig", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["plan", "apply", "check"])
    parser.add_argument("--config", default=CONFIG)
    parser.add_argument("--nvidia-smi", default="nvidia-smi")
    parser.add_argument("--observed", type=Path, help="read nvidia-smi's output from this directory")
    args = parser.parse_args(argv)
    layout = load_layout(Path(args.config))
    binary = shutil.which(args.nvidia_smi)
    if binary is None and args.observed is None:
        print(f"gpucluster-mig: {args.nvidia_smi} not found: no NVIDIA driver here", file=sys.stderr)
        return 2
    smi = Smi(binary, args.observed)
    try:
        gpus = smi.gpus()
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"gpucluster-mig: {exc}", file=sys.stderr)
        return 2
    if args.action == "check":
        found = differences(gpus, layout)
        for line in found:
            print(line)
        return 1 if found else 0
    plan = [
        command
        for index, wanted in sorted(layout.items(), key=lambda item: int(item[0]))
        if index in gpus
        for command in commands_for(gpus[index], wanted)
    ]
    missing = [index for index in layout if index not in gpus]
    if missing:
        print(f"gpucluster-mig: GPUs {', '.join(missing)} not found by nvidia-smi", file=sys.stderr)
        return 2
    if args.action == "plan":
        for command in plan:
            print("nvidia-smi " + " ".join(command))
        return PLAN_CHANGES if plan else 0
    if args.observed is not None:
        print("gpucluster-mig: apply needs the GPUs (not --observed)", file=sys.stderr)
        return 2
    try:
        for command in plan:
            print("nvidia-smi " + " ".join(command), flush=True)
            smi.run(command)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"gpucluster-mig: {exc}", file=sys.stderr)
        return 1
    found = differences(smi.gpus(), layout)
    for line in found:
        print(f"gpucluster-mig: after apply: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
