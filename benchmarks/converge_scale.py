"""Converge cost per node: the lab at two sizes, each measured whole.

    python benchmarks/converge_scale.py                 # 4 and 12 GPU nodes (7 and 15 hosts)
    python benchmarks/converge_scale.py --sizes 4 8

For each size: `lab up` with the image cached, a no-op converge (the playbook again, changed=0),
a config-only `gpucluster apply` (a partition's MaxTime, what the plan limits to the controllers),
and the ping sweep (`ansible all -m ansible.builtin.ping` over the lab's inventory and connection:
the floor of touching every host once). Wall seconds, and the CPU seconds of the child processes
for the converge. Then the slope per GPU node between the two sizes and what it projects for 1,000
nodes at the forks of ansible.cfg on this machine's cores: a straight-line projection, not a
measurement.

Needs root and podman; starts from no lab (refuses when one is up) and takes each lab down.
"""

from __future__ import annotations

import argparse
import configparser
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpucluster.lab import lab
from gpucluster.lab.inventory import vault_password_file, write_inventory
from gpucluster.lab.paths import DEFAULT_INVENTORY, REPO_ROOT
from gpucluster.lab.playbook import ansible_env
from gpucluster.lab.state import LabState
from gpucluster.layers import load_cluster
from gpucluster.tools import venv_tool

LIMIT_BEFORE = 'max_time: "1-00:00:00"'
LIMIT_AFTER = 'max_time: "2-00:00:00"'


@dataclass
class Size:
    gpu_nodes: int
    hosts: int = 0
    lab_up: float = 0.0
    converge: float = 0.0
    converge_cpu: float = 0.0
    converge_changed: int = -1
    apply: float = 0.0
    apply_hosts: str = ""
    ping: float = 0.0


def quiet(message: str) -> None:
    del message


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def sized_inventory(gpu_nodes: int, into: Path) -> Path:
    """inventories/lab with its GPU nodes split evenly under the two leaf switches."""
    target = into / f"lab-{gpu_nodes}"
    shutil.copytree(DEFAULT_INVENTORY, target)
    hosts = target / "hosts.yml"
    half = gpu_nodes // 2
    text = hosts.read_text(encoding="utf-8")
    text = text.replace("gpu[01:02]:", f"gpu[01:{half:02d}]:").replace(
        "gpu[03:04]:", f"gpu[{half + 1:02d}:{gpu_nodes:02d}]:"
    )
    hosts.write_text(text, encoding="utf-8")
    return target


def ping_sweep(inventory: Path) -> float:
    started = time.monotonic()
    subprocess.run(
        [
            venv_tool("ansible"), "all", "-i", str(inventory), "-m", "ansible.builtin.ping",
            "--vault-password-file", str(vault_password_file()),
        ],
        env=ansible_env(), cwd=REPO_ROOT, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return time.monotonic() - started


def config_only_apply(deployed: Path, scratch: Path) -> tuple[float, str]:
    """`gpucluster apply OLD NEW --yes` of one partition's MaxTime on the running lab."""
    old = scratch / "applied-old"
    new = scratch / "applied-new"
    shutil.copytree(deployed, old, symlinks=True)
    shutil.copytree(deployed, new, symlinks=True)
    cluster_yml = new / "group_vars" / "all" / "cluster.yml"
    text = cluster_yml.read_text(encoding="utf-8")
    if LIMIT_BEFORE not in text:
        raise SystemExit(f"{cluster_yml}: no {LIMIT_BEFORE} to change (inventories/lab changed?)")
    cluster_yml.write_text(text.replace(LIMIT_BEFORE, LIMIT_AFTER, 1), encoding="utf-8")
    env = {**ansible_env(), "ANSIBLE_VAULT_PASSWORD_FILE": str(vault_password_file())}
    started = time.monotonic()
    proc = subprocess.run(
        [venv_tool("gpucluster"), "apply", str(old), str(new), "--yes"],
        env=env, cwd=REPO_ROOT, check=False, capture_output=True, text=True,
    )  # fmt: skip
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(
            f"gpucluster apply failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}"
        )
    limits = sorted(set(re.findall(r"--limit (\S+)", proc.stdout)))
    return seconds, " ".join(limits)


def measure(gpu_nodes: int, scratch: Path) -> Size:
    size = Size(gpu_nodes)
    scratch = scratch / f"size-{gpu_nodes}"
    scratch.mkdir()
    inventory = sized_inventory(gpu_nodes, scratch)
    cluster = load_cluster(inventory)
    size.hosts = len(lab.lab_hosts(cluster))
    try:
        started = time.monotonic()
        lab.up(inventory, progress=quiet)
        size.lab_up = time.monotonic() - started
        cpu, started = children_cpu(), time.monotonic()
        again = lab.converge(progress=quiet)
        size.converge, size.converge_cpu = time.monotonic() - started, children_cpu() - cpu
        size.converge_changed = again.total_changed
        deployed = write_inventory(inventory, cluster)
        size.ping = ping_sweep(deployed)
        size.apply, size.apply_hosts = config_only_apply(deployed, scratch)
    finally:
        lab.down(progress=quiet)
    print(f"measured: {size}", flush=True)
    return size


def forks() -> int:
    config = configparser.ConfigParser()
    config.read(REPO_ROOT / "ansible.cfg")
    return config.getint("defaults", "forks", fallback=5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[4, 12], metavar="GPU_NODES")
    args = parser.parse_args()
    small, large = sorted(args.sizes)
    if small < 2 or small % 2 or large % 2 or small == large:
        parser.error("two different even sizes of at least 2 (the nodes split under two leaf switches)")
    if LabState.load() is not None:
        print(
            "a lab is up: run `gpucluster lab down` first (the benchmark starts from nothing)",
            file=sys.stderr,
        )
        return 2
    with tempfile.TemporaryDirectory(prefix="gpucluster-converge-scale-") as scratch:
        sizes = [measure(n, Path(scratch)) for n in (small, large)]
    print(f"{'lab':<28} {'lab up':>8} {'no-op converge':>22} {'apply':>8} {'ping':>6} {'converge/ping':>14}")
    for s in sizes:
        label = f"{s.hosts} hosts ({s.gpu_nodes} GPU nodes)"
        converge = f"{s.converge:.1f} s ({s.converge_cpu:.0f} CPU-s)"
        print(
            f"{label:<28} {s.lab_up:7.1f}s {converge:>22} {s.apply:7.1f}s {s.ping:5.1f}s {s.converge / s.ping:13.0f}x"
        )
    for s in sizes:
        print(
            f"changed on the no-op converge at {s.gpu_nodes} GPU nodes: {s.converge_changed}; apply limited to: {s.apply_hosts}"
        )
    a, b = sizes
    slope = (b.converge - a.converge) / (b.gpu_nodes - a.gpu_nodes)
    cpu_slope = (b.converge_cpu - a.converge_cpu) / (b.gpu_nodes - a.gpu_nodes)
    print(f"slope: {slope:.2f} s of wall and {cpu_slope:.1f} CPU-s per added GPU node (no-op converge)")
    projected = a.converge + slope * (1000 - a.gpu_nodes)
    print(
        f"projection, not a measurement: a no-op converge of 1,000 GPU nodes from one Ansible host "
        f"with forks={forks()} and {os.cpu_count()} cores like this one: about {projected / 60:.0f} min "
        f"({cpu_slope * 1000 / 3600:.1f} CPU-hours); a config-only apply stays on the controllers "
        f"({b.apply:.1f} s here at {b.gpu_nodes} GPU nodes)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
