"""Validate + render all Slurm files for generated clusters of 512, 4,096 and 16,384 nodes.

Each cluster: 8 GPUs per node, 32 nodes per leaf switch, 64 leaves per spine under one core,
64 tenants, two partitions. Prints, per size: seconds in-process (best of 3), seconds for the
whole `gpucluster render` process (best of 3) and the peak RSS of that process.

    python benchmarks/render_scale.py [--sizes 512 4096 16384]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files

NODES_PER_LEAF = 32
LEAVES_PER_SPINE = 64
TENANTS = 64


def write_inventory(root: Path, nodes: int) -> Path:
    leaves = nodes // NODES_PER_LEAF
    width = len(str(nodes))
    groups = {
        f"leaf{leaf:04d}_nodes": {
            "hosts": {
                f"gpu[{leaf * NODES_PER_LEAF + 1:0{width}d}:{(leaf + 1) * NODES_PER_LEAF:0{width}d}]": None
            }
        }
        for leaf in range(leaves)
    }
    hosts = {
        "all": {"children": {"controllers": {"hosts": {"ctl1": None}}, "gpu_nodes": {"children": groups}}}
    }
    tree: dict[str, list[str]] = {}
    spines = max(1, leaves // LEAVES_PER_SPINE)
    tree["core"] = [f"spine{s:02d}" for s in range(spines)]
    for s in range(spines):
        tree[f"spine{s:02d}"] = [
            f"leaf{leaf:04d}" for leaf in range(s * LEAVES_PER_SPINE, min(leaves, (s + 1) * LEAVES_PER_SPINE))
        ]
    for leaf in range(leaves):
        tree[f"leaf{leaf:04d}"] = [f"leaf{leaf:04d}_nodes"]
    gpus = nodes * 8
    quota = gpus // TENANTS // 2
    cluster = {
        "cluster": {
            "name": f"scale{nodes}",
            "slurm": {"version": "22.05", "controller": "ctl1", "accounting": {"host": "ctl1"}},
            "node_types": {
                "dgx-h100": {
                    "sockets": 2, "cores_per_socket": 56, "threads_per_core": 2, "memory_mb": 2000000,
                    "gpus": {"model": "h100", "count": 8, "devices": "/dev/nvidia[0-7]"},
                }
            },
            "nodes": [{"group": "gpu_nodes", "type": "dgx-h100"}],
            "fabric": {"tree": tree},
            "partitions": [
                {"name": "batch", "nodes": ["gpu_nodes"], "default": True},
                {"name": "debug", "nodes": list(groups)[:2], "max_time": "01:00:00"},
            ],
            "qos": [{"name": "normal"}],
            "tenants": [
                {"name": f"tenant-{t:02d}", "fairshare": 1 + t, "gpu_quota": quota, "gpu_limit": quota * 2,
                 "users": [f"user{t:02d}"], "qos": ["normal"]}
                for t in range(TENANTS)
            ],
        }
    }  # fmt: skip
    directory = root / f"scale{nodes}"
    (directory / "group_vars" / "all").mkdir(parents=True)
    (directory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    (directory / "group_vars" / "all" / "cluster.yml").write_text(yaml.safe_dump(cluster, sort_keys=False))
    return directory


def in_process(directory: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one validate + render of the Slurm files."""
    start, cpu = time.perf_counter(), time.process_time()
    files = render_files(load_cluster(directory), only=["slurm"])
    elapsed = time.perf_counter() - start, time.process_time() - cpu
    assert "slurm/slurm.conf" in files
    return elapsed


def whole_cli(directory: Path, out: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of one `gpucluster render` process."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpucluster.cli",
            "render",
            str(directory),
            "--out",
            str(out),
            "--only",
            "slurm",
        ],
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"gpucluster render failed for {directory}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 4096, 16384])
    args = parser.parse_args()
    results: dict[int, float] = {}
    # CPU seconds beside wall seconds: on a shared 2-core machine wall time also counts waiting.
    print(
        f"{'nodes':>7} {'in-process s':>13} {'(CPU s)':>8} {'ms/node':>8} {'CLI s':>7} {'(CPU s)':>8} {'peak RSS MiB':>13}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            directory = write_inventory(Path(tmp), size)
            best, best_cpu = min(in_process(directory) for _ in range(3))
            runs = [whole_cli(directory, Path(tmp) / f"out{size}") for _ in range(3)]
            cli, cli_cpu, _ = min(runs)
            rss = max(r[2] for r in runs)
            results[size] = best
            print(
                f"{size:>7} {best:>13.3f} {best_cpu:>8.3f} {best / size * 1000:>8.3f} "
                f"{cli:>7.2f} {cli_cpu:>8.2f} {rss:>13.1f}"
            )
    if 4096 in results and 16384 in results:
        print(
            f"growth 16,384 / 4,096 in-process: {results[16384] / results[4096]:.2f}x (linear would be 4.00x)"
        )


if __name__ == "__main__":
    main()
