"""Hostile and very large inventories: what `gpucluster validate` costs before it answers.

Every case runs in a child process; the peak RSS printed is that child's own (its VmHWM):

- refused inputs, through `gpucluster validate` (exit code, wall and CPU seconds, peak RSS, the
  first problem): an alias bomb in cluster.yml at depths 5..8 (each list holds nine aliases of the
  one before, so depth d stands for 9**d items), a cluster.yml over the file size limit, a host
  range of 10**8 hosts in hosts.yml, and lists nested 100,000 deep;
- valid inventories: 20,000 tenants (200 parents of 99 children, a user each) and 16,384 hosts
  listed one by one (an `ansible_host` each, 32 per leaf switch, 64 leaves per spine): CPU seconds
  of the validation alone (`load_cluster` in the child, best of 5) and the child's peak RSS.

    python benchmarks/validate_scale.py [--depths 5 6 7 8] [--tenants 20000] [--hosts 16384]
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

from gpucluster.yamlfile import MAX_FILE_BYTES

HOSTS_PER_LEAF = 32
LEAVES_PER_SPINE = 64
CHILDREN_PER_PARENT = 99

SMALL_HOSTS = """\
all:
  children:
    ctl: {hosts: {head: }}
    gpus: {hosts: {"n[01:04]": }}
"""

# Peak RSS is read in the child (VmHWM of /proc/self/status, KiB, written to the file named by
# its first argument): getrusage of a child also counts the parent's pages, which the child
# shared until it ran Python (the kernel keeps the high-water mark across exec).
_PEAK = """\
import atexit, sys
peak_file = sys.argv.pop(1)
def peak():
    with open("/proc/self/status") as status, open(peak_file, "w") as handle:
        handle.write(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
atexit.register(peak)
"""

# `python -m gpucluster.cli ARGS`, with the peak written at exit.
_CLI = (
    _PEAK
    + """\
import runpy
runpy.run_module("gpucluster.cli", run_name="__main__", alter_sys=True)
"""
)

# Validation alone, timed inside the child: load_cluster (no interpreter start-up, no imports).
_TIMED = (
    _PEAK
    + """\
import time
from gpucluster.layers import load_cluster
times = []
for _ in range(5):
    start = time.process_time()
    load_cluster(sys.argv[1])
    times.append(time.process_time() - start)
print(min(times))
"""
)


def _write(directory: Path, hosts: str, cluster: str) -> Path:
    (directory / "group_vars" / "all").mkdir(parents=True)
    (directory / "hosts.yml").write_text(hosts)
    (directory / "group_vars" / "all" / "cluster.yml").write_text(cluster)
    return directory


def alias_bomb(depth: int) -> str:
    """cluster.yml of depth + 2 lines whose aliases expand to 9**depth scalars."""
    lines = ["cluster:", "  name: bomb", "  l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    for level in range(1, depth):
        lines.append(f"  l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def small_cluster(extra: str = "") -> str:
    return (
        "cluster:\n  name: small\n  slurm: {version: '22.05', controller: head}\n"
        "  node_types: {h100: {sockets: 2, cores_per_socket: 8, memory_mb: 64000,"
        " gpus: {model: h100, count: 8, devices: '/dev/nvidia[0-7]'}}}\n"
        "  nodes: [{group: gpus, type: h100}]\n"
        "  partitions: [{name: batch, nodes: [gpus], default: true}]\n" + extra
    )


def tenants_inventory(root: Path, tenants: int) -> Path:
    parents = max(1, tenants // (CHILDREN_PER_PARENT + 1))
    nodes = parents * 4  # 32 GPUs per parent: quota 30, its 99 children 30 x 1 and 69 x 0
    hosts = {
        "all": {"children": {"ctl": {"hosts": {"head": None}}, "gpus": {"hosts": {f"gpu[1:{nodes}]": None}}}}
    }
    listed: list[dict[str, object]] = []
    for p in range(parents):
        listed.append({"name": f"org-{p:04d}", "fairshare": 10, "gpu_quota": 30, "users": [f"admin{p:04d}"]})
    for t in range(tenants - parents):
        listed.append(
            {
                "name": f"team-{t:06d}",
                "parent": f"org-{t % parents:04d}",
                "fairshare": 1,
                "gpu_quota": int(t // parents < 30),
                "users": [f"user{t:06d}"],
            }
        )
    cluster = {"cluster": {
        "name": "tenants",
        "slurm": {"version": "22.05", "controller": "head", "accounting": {"host": "head"}},
        "node_types": {"h100": {"sockets": 2, "cores_per_socket": 56, "memory_mb": 2000000,
                                "gpus": {"model": "h100", "count": 8, "devices": "/dev/nvidia[0-7]"}}},
        "nodes": [{"group": "gpus", "type": "h100"}],
        "partitions": [{"name": "batch", "nodes": ["gpus"], "default": True}],
        "qos": [{"name": "normal"}],
        "tenants": listed,
    }}  # fmt: skip
    text = yaml.safe_dump(cluster, sort_keys=False, default_flow_style=None, width=200)
    return _write(root / f"tenants{tenants}", yaml.safe_dump(hosts), text)


def hosts_inventory(root: Path, count: int) -> Path:
    leaves = count // HOSTS_PER_LEAF
    groups = {
        f"leaf{leaf:04d}_nodes": {
            "hosts": {
                f"gpu{n:05d}": {"ansible_host": f"10.{n >> 16}.{(n >> 8) & 255}.{n & 255}"}
                for n in range(leaf * HOSTS_PER_LEAF + 1, (leaf + 1) * HOSTS_PER_LEAF + 1)
            }
        }
        for leaf in range(leaves)
    }
    hosts = {"all": {"children": {"ctl": {"hosts": {"head": None}}, "gpus": {"children": groups}}}}
    spines = max(1, leaves // LEAVES_PER_SPINE)
    tree: dict[str, list[str]] = {"core": [f"spine{s:02d}" for s in range(spines)]}
    for s in range(spines):
        tree[f"spine{s:02d}"] = [
            f"leaf{leaf:04d}" for leaf in range(s * LEAVES_PER_SPINE, min(leaves, (s + 1) * LEAVES_PER_SPINE))
        ]
    for leaf in range(leaves):
        tree[f"leaf{leaf:04d}"] = [f"leaf{leaf:04d}_nodes"]
    cluster = {"cluster": {
        "name": "hosts",
        "slurm": {"version": "22.05", "controller": "head", "accounting": {"host": "head"}},
        "node_types": {"h100": {"sockets": 2, "cores_per_socket": 56, "memory_mb": 2000000,
                                "gpus": {"model": "h100", "count": 8, "devices": "/dev/nvidia[0-7]"}}},
        "nodes": [{"group": "gpus", "type": "h100"}],
        "fabric": {"tree": tree},
        "partitions": [{"name": "batch", "nodes": ["gpus"], "default": True},
                       {"name": "debug", "nodes": list(groups)[:2], "max_time": "01:00:00"}],
        "qos": [{"name": "normal"}],
        "tenants": [{"name": "all-users", "fairshare": 1, "gpu_quota": count * 8}],
    }}  # fmt: skip
    return _write(
        root / f"hosts{count}",
        yaml.safe_dump(hosts, sort_keys=False),
        yaml.safe_dump(cluster, sort_keys=False),
    )


def run_child(code: str, args: list[str]) -> tuple[int, float, float, float, str]:
    """Exit code, wall seconds, CPU seconds, peak RSS (MiB) and output of a child running `code`."""
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile() as peak:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", code, peak.name, *args], stdout=out, stderr=subprocess.STDOUT
        )
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
        rss = int(Path(peak.name).read_text() or 0) / 1024
    return proc.returncode, elapsed, usage.ru_utime + usage.ru_stime, rss, text


def refusal(label: str, directory: Path) -> None:
    code, wall, cpu, rss, text = run_child(_CLI, ["validate", str(directory)])
    first = text.splitlines()[0].replace(str(directory) + "/", "") if text else ""
    print(f"{label:<40} {code:>4} {wall:>7.2f} {cpu:>7.2f} {rss:>8.1f}  {first[:110]}")


def validation(label: str, directory: Path) -> None:
    code, wall, _, rss, text = run_child(_TIMED, [str(directory)])
    if code != 0:
        raise SystemExit(f"{label}: validation failed:\n{text}")
    print(f"{label:<40} {float(text):>14.3f} {wall:>7.2f} {rss:>8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--depths", type=int, nargs="+", default=[5, 6, 7, 8])
    parser.add_argument("--tenants", type=int, default=20_000)
    parser.add_argument("--hosts", type=int, default=16_384)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print(f"{'refused input':<40} {'exit':>4} {'wall s':>7} {'CPU s':>7} {'RSS MiB':>8}  first problem")
        for depth in args.depths:
            directory = _write(root / f"bomb{depth}", SMALL_HOSTS, alias_bomb(depth))
            refusal(f"alias bomb, depth {depth} ({9**depth:,} items)", directory)
        oversized = _write(root / "oversized", SMALL_HOSTS, small_cluster())
        with (oversized / "group_vars" / "all" / "cluster.yml").open("a") as handle:
            handle.write(("# " + "x" * 1021 + "\n") * (MAX_FILE_BYTES // 1024 + 1))
        size = (oversized / "group_vars" / "all" / "cluster.yml").stat().st_size
        refusal(f"cluster.yml of {size / 2**20:.1f} MiB", oversized)
        huge = _write(root / "range", SMALL_HOSTS.replace("n[01:04]", "n[1:100000000]"), small_cluster())
        refusal("host range n[1:100000000]", huge)
        deep = _write(root / "deep", SMALL_HOSTS, "cluster: " + "[" * 100_000 + "]" * 100_000 + "\n")
        refusal("lists nested 100,000 deep", deep)
        print()
        print(f"{'valid input':<40} {'validate CPU s':>14} {'wall s':>7} {'RSS MiB':>8}")
        validation(f"{args.tenants:,} tenants", tenants_inventory(root, args.tenants))
        validation(f"{args.hosts:,} hosts", hosts_inventory(root, args.hosts))


if __name__ == "__main__":
    main()
