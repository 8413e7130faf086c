#!/usr/bin/env python3
"""gpucluster-mps: CUDA MPS control daemons for the Slurm jobs that ask for gres/mps.

Slurm runs it as the Prolog and Epilog (as root) and as the TaskProlog (as the job's user), as
Slurm's gres.shtml describes for MPS: the Prolog sees CUDA_VISIBLE_DEVICES (the GPU's index on
the node) and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE for a job allocated gres/mps, and starts an MPS
control daemon for that GPU unless one already serves the job's tenant there; the Epilog stops it
once no job of that tenant uses it; the TaskProlog points the job's tasks at it
(CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY).

A daemon serves one tenant (Slurm account) on one GPU, unless its node type lets tenants share
one (gpus.sharing.mps_between_tenants): a tenant's MPS clients never reach another's server.
What each node does is in /etc/slurm/gpucluster-mps.conf (rendered by gpucluster), a section per
set of nodes: `nodes` (names) and `between_tenants` (yes/no).

Python 3 standard library only. Without nvidia-cuda-mps-control (no NVIDIA driver stack) the
daemon is not started and the job runs without MPS; the hook says so on stderr and in
/run/gpucluster-mps/gpucluster-mps.log (slurmd keeps no output of a Prolog that succeeds), and
never fails the job, which would drain the node.
"""

from __future__ import annotations

import argparse
import configparser
import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CONF = "/etc/slurm/gpucluster-mps.conf"
STATE = "/run/gpucluster-mps"
CONTROL = "nvidia-cuda-mps-control"
SHARED = "shared"
LOG = "gpucluster-mps.log"  # in the state directory: what a hook could not do


@dataclass(frozen=True)
class Command:
    """One run of nvidia-cuda-mps-control: its arguments, the environment it needs, its input."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    stdin: str = ""

    def text(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.env)
        feed = f"echo {self.stdin.strip()} | " if self.stdin else ""
        return f"{feed}{env} {' '.join(self.argv)}".strip()


def daemon_dir(state: Path, gpu: str, key: str) -> Path:
    """Where the daemon of one GPU and one tenant (or all: `shared`) keeps its pipes and logs."""
    return state / f"gpu{gpu}" / key


def start_command(directory: Path, gpu: str) -> Command:
    env = (
        ("CUDA_VISIBLE_DEVICES", gpu),
        ("CUDA_MPS_PIPE_DIRECTORY", str(directory)),
        ("CUDA_MPS_LOG_DIRECTORY", str(directory / "log")),
    )
    return Command((CONTROL, "-d"), env)


def stop_command(directory: Path) -> Command:
    return Command((CONTROL,), (("CUDA_MPS_PIPE_DIRECTORY", str(directory)),), "quit\n")


def tenant_key(env: Mapping[str, str], between_tenants: bool) -> str:
    if between_tenants:
        return SHARED
    account = env.get("SLURM_JOB_ACCOUNT", "") or "no-account"
    return "tenant-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in account)


def mps_gpus(env: Mapping[str, str]) -> list[str]:
    """The GPUs a job uses through MPS: those of CUDA_VISIBLE_DEVICES when Slurm set
    CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (it does only for gres/mps), else none."""
    if not env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"):
        return []
    return [g for g in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.isdigit()]


@dataclass
class Plan:
    """What a hook does: records to write or remove, daemons to start or stop."""

    record: dict[str, str]  # job record name -> content ("<gpu> <key>" lines)
    forget: list[str]
    start: list[tuple[str, str]]  # (gpu, key)
    stop: list[tuple[str, str]]


def jobs_of(state: Path) -> dict[str, list[tuple[str, str]]]:
    """Job id -> the (gpu, key) pairs it holds, from the records the Prologs wrote."""
    found: dict[str, list[tuple[str, str]]] = {}
    for path in sorted((state / "jobs").glob("*")):
        pairs = []
        for line in path.read_text(encoding="utf-8").splitlines():
            gpu, _, key = line.partition(" ")
            if gpu and key:
                pairs.append((gpu, key))
        found[path.name] = pairs
    return found


def prolog_plan(env: Mapping[str, str], between_tenants: bool, state: Path) -> Plan:
    job = env.get("SLURM_JOB_ID", "")
    gpus = mps_gpus(env)
    if not job or not gpus:
        return Plan({}, [], [], [])
    key = tenant_key(env, between_tenants)
    held = {pair for pairs in jobs_of(state).values() for pair in pairs}
    start = [(gpu, key) for gpu in gpus if (gpu, key) not in held]
    return Plan({job: "".join(f"{gpu} {key}\n" for gpu in gpus)}, [], start, [])


def epilog_plan(env: Mapping[str, str], state: Path) -> Plan:
    job = env.get("SLURM_JOB_ID", "")
    jobs = jobs_of(state)
    if job not in jobs:
        return Plan({}, [], [], [])
    others = {pair for other, pairs in jobs.items() if other != job for pair in pairs}
    stop = [pair for pair in jobs[job] if pair not in others]
    return Plan({}, [job], [], stop)


def task_exports(env: Mapping[str, str], state: Path) -> list[str]:
    """TaskProlog output: the job's tasks use the daemon of their GPU and tenant."""
    pairs = jobs_of(state).get(env.get("SLURM_JOB_ID", ""), [])
    if not pairs:
        return []
    gpu, key = pairs[0]
    directory = daemon_dir(state, gpu, key)
    return [
        f"export CUDA_MPS_PIPE_DIRECTORY={directory}",
        f"export CUDA_MPS_LOG_DIRECTORY={directory / 'log'}",
    ]


def between_tenants_of(conf: Path, node: str) -> bool | None:
    """The node's setting in gpucluster-mps.conf; None: the node shares no GPU by MPS."""
    parser = configparser.ConfigParser(interpolation=None)
    if not parser.read(conf, encoding="utf-8"):
        return None
    for section in parser.sections():
        if node in parser[section].get("nodes", "").split():
            return parser[section].getboolean("between_tenants", fallback=False)
    return None


def run(command: Command, control: str | None, dry_run: bool) -> str | None:
    """Run one command; the reason it did not run, or None."""
    if dry_run:
        print(command.text())
        return None
    if control is None:
        return f"{CONTROL} not found (no NVIDIA driver stack with MPS here): MPS not started or stopped"
    env = {**os.environ, **dict(command.env)}
    try:
        proc = subprocess.run(
            [control, *command.argv[1:]],
            input=command.stdin,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{command.text()}: {exc}"
    if proc.returncode != 0:
        return f"{command.text()}: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()}"
    return None


def carry_out(plan: Plan, state: Path, dry_run: bool) -> list[str]:
    """Apply a plan: records first (the TaskProlog reads them), then the daemons."""
    problems: list[str] = []
    control = shutil.which(CONTROL)
    for job, content in plan.record.items():
        if not dry_run:
            (state / "jobs").mkdir(parents=True, exist_ok=True, mode=0o755)
            (state / "jobs" / job).write_text(content, encoding="utf-8")
    for gpu, key in plan.start:
        directory = daemon_dir(state, gpu, key)
        if not dry_run:
            (directory / "log").mkdir(parents=True, exist_ok=True, mode=0o755)
            directory.chmod(0o755)
        problem = run(start_command(directory, gpu), control, dry_run)
        if problem:
            problems.append(problem)
    for gpu, key in plan.stop:
        directory = daemon_dir(state, gpu, key)
        problem = run(stop_command(directory), control, dry_run)
        if problem:
            problems.append(problem)
        elif not dry_run:
            shutil.rmtree(directory, ignore_errors=True)
    for job in plan.forget:
        if not dry_run:
            (state / "jobs" / job).unlink(missing_ok=True)
    return problems


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpucluster-mps", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=CONF)
    parser.add_argument("--state-dir", default=STATE)
    parser.add_argument("--dry-run", action="store_true", help="print the commands, change nothing")
    args = parser.parse_args(argv)
    env = dict(os.environ if env is None else env)
    state = Path(args.state_dir)
    context = env.get("SLURM_SCRIPT_CONTEXT", "")
    if context == "prolog_task":
        for line in task_exports(env, state):
            print(line)
        return 0
    node = env.get("SLURMD_NODENAME", "")
    between = between_tenants_of(Path(args.config), node)
    if context not in ("prolog_slurmd", "epilog_slurmd") or (between is None and context == "prolog_slurmd"):
        return 0
    lock_path = state / "lock"
    if not args.dry_run:
        state.mkdir(parents=True, exist_ok=True, mode=0o755)
    with open(lock_path if not args.dry_run else os.devnull, "a", encoding="utf-8") as lock:
        if not args.dry_run:
            fcntl.flock(lock, fcntl.LOCK_EX)
        plan = (
            prolog_plan(env, bool(between), state) if context == "prolog_slurmd" else epilog_plan(env, state)
        )
        for problem in carry_out(plan, state, args.dry_run):
            line = f"gpucluster-mps: job {env.get('SLURM_JOB_ID', '?')}: {problem}"
            print(line, file=sys.stderr)
            if not args.dry_run:  # slurmd keeps no output of a Prolog that succeeds
                with open(state / LOG, "a", encoding="utf-8") as log:
                    log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {context} {line}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
