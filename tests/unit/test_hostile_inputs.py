"""Any inventory, however hostile or generated, is judged in bounded time and memory.

Each hostile inventory goes through `gpucluster validate` in a child process that runs under an
address-space and a CPU-time rlimit (a regression fails here instead of eating the machine); the
child must exit 2 naming the file, print no traceback, and stay well within a wall-time bound and
a peak-RSS bound. The peak is the child's own VmHWM, read at its exit: getrusage of a child also
counts the pages of this (large) test process, which the child shared until it ran Python.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpucluster.hostranges import MAX_HOSTS
from gpucluster.layers import load_cluster
from gpucluster.yamlfile import MAX_ALIAS_NODES, MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES
from tests.conftest import REPO, SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory

WALL_LIMIT_S = 10.0
RSS_LIMIT_MIB = 300.0
ADDRESS_SPACE = 1536 * 2**20  # the safety net: a child needing more fails instead of swapping
CPU_SECONDS = 30


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    wall: float
    rss_mib: float


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


# `python -m gpucluster.cli ARGS`, writing the peak RSS (VmHWM, KiB) at exit to the file named first.
_CLI = """\
import atexit, runpy, sys
peak_file = sys.argv.pop(1)
def peak():
    with open("/proc/self/status") as status, open(peak_file, "w") as handle:
        handle.write(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
atexit.register(peak)
runpy.run_module("gpucluster.cli", run_name="__main__", alter_sys=True)
"""


def validate(directory: Path) -> Run:
    """`gpucluster validate DIR` in a limited child: exit code, output, wall time, peak RSS."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile() as peak,
    ):
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", _CLI, peak.name, "validate", str(directory)],
            stdout=out,
            stderr=err,
            cwd=REPO,
            preexec_fn=_limits,
        )
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return Run(
            proc.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            wall,
            int(Path(peak.name).read_text() or 0) / 1024,
        )


def assert_refused(run: Run, file: Path, *fragments: str) -> None:
    assert run.code == 2, (run.code, run.stderr[-2000:])
    assert "Traceback" not in run.stderr + run.stdout
    assert str(file) in run.stderr, run.stderr[:2000]
    for fragment in fragments:
        assert fragment in run.stderr, run.stderr[:2000]
    assert run.wall < WALL_LIMIT_S, f"{run.wall:.1f} s"
    assert 0 < run.rss_mib < RSS_LIMIT_MIB, f"{run.rss_mib:.0f} MiB"


def alias_bomb(depth: int) -> str:
    """cluster.yml whose aliases expand to 9**depth scalars in depth + 2 lines."""
    lines = ["cluster:", "  name: bomb", "  l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    for level in range(1, depth):
        lines.append(f"  l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def crossing_line(depth: int) -> int:
    """Line of alias_bomb(depth) where the nodes that aliases add pass MAX_ALIAS_NODES."""
    through_aliases = 0
    size = 10  # of l0's list
    for level in range(1, depth):
        for _ in range(9):
            through_aliases += size
            if through_aliases > MAX_ALIAS_NODES:
                return 3 + level
        size = 1 + 9 * size
    raise AssertionError("the bomb stays within the limit")


def cluster_file(directory: Path) -> Path:
    return directory / "group_vars" / "all" / "cluster.yml"


@pytest.mark.parametrize("depth", [5, 6, 7, 8, 9])
def test_alias_bomb_is_refused_in_bounded_time_and_memory(inventories: InventoryFactory, depth: int) -> None:
    directory = inventories.make(SMALL_HOSTS, alias_bomb(depth), name=f"bomb{depth}")
    run = validate(directory)
    if 9**depth > MAX_ALIAS_NODES:
        # Refused on the line where the expansion crosses the limit, before anything expands.
        assert_refused(
            run, cluster_file(directory), "YAML aliases would add more than", f"{MAX_ALIAS_NODES:,}"
        )
        assert f"{cluster_file(directory)}:{crossing_line(depth)}: cluster.l" in run.stderr, run.stderr
    else:
        assert_refused(run, cluster_file(directory), "unknown key")  # expanded: within the limit


def test_alias_bomb_in_hosts_file_is_refused(inventories: InventoryFactory) -> None:
    bomb = "all:\n  vars:\n    l0: &l0 [x, x, x, x, x, x, x, x, x]\n"
    for level in range(1, 9):
        bomb += f"    l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]\n"
    directory = inventories.make(bomb, SMALL_CLUSTER)
    assert_refused(validate(directory), directory / "hosts.yml", "YAML aliases would add more than")


def test_a_file_of_too_many_items_is_refused_before_they_are_built(inventories: InventoryFactory) -> None:
    # 2 MB, far below the size limit: the count of items refuses it, on its line.
    items = "cluster:\n  name: many\n  users: [" + "u, " * MAX_NODES + "u]\n"
    directory = inventories.make(SMALL_HOSTS, items)
    run = validate(directory)
    assert_refused(run, cluster_file(directory), f"holds more than {MAX_NODES:,} keys, values and list items")
    assert f"{cluster_file(directory)}:3: cluster.users[" in run.stderr, run.stderr


def test_deep_nesting_is_refused_not_a_crash(inventories: InventoryFactory) -> None:
    # libyaml's composer recursed in C: 100,000 levels crashed the process with SIGSEGV.
    directory = inventories.make(SMALL_HOSTS, "cluster: " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert_refused(validate(directory), cluster_file(directory), f"deeper than {MAX_DEPTH} levels")


def test_nesting_through_aliases_counts_too(inventories: InventoryFactory) -> None:
    chain = "cluster:\n  a0: &a0 [x]\n" + "".join(f"  a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 150))
    directory = inventories.make(SMALL_HOSTS, chain)
    assert_refused(validate(directory), cluster_file(directory), f"deeper than {MAX_DEPTH} levels")


def test_oversized_files_are_refused_before_being_read(inventories: InventoryFactory) -> None:
    directory = inventories.make(SMALL_HOSTS, SMALL_CLUSTER)
    extra = directory / "group_vars" / "all" / "zz-generated.yml"
    with extra.open("w") as handle:
        handle.write("# " + "x" * 1021 + "\n")
        handle.truncate(MAX_FILE_BYTES + 1)  # sparse: a file of the size, without the disk
    assert_refused(validate(directory), extra, f"larger than {MAX_FILE_BYTES:,} bytes")
    with (directory / "hosts.yml").open("a") as handle:
        handle.write(("# " + "x" * 1021 + "\n") * (MAX_FILE_BYTES // 1024 + 1))
    extra.unlink()
    assert_refused(validate(directory), directory / "hosts.yml", f"larger than {MAX_FILE_BYTES:,} bytes")


def test_special_files_are_refused_not_waited_on(inventories: InventoryFactory) -> None:
    directory = inventories.make(SMALL_HOSTS, SMALL_CLUSTER)
    fifo = directory / "group_vars" / "all" / "pipe.yml"
    os.mkfifo(fifo)  # reading it would block forever
    assert_refused(validate(directory), fifo, "not a regular file")
    fifo.unlink()
    endless = directory / "group_vars" / "all" / "zero.yml"
    endless.symlink_to("/dev/zero")
    assert_refused(validate(directory), endless, "not a regular file")


@pytest.mark.parametrize(
    ("pattern", "count"),
    [("gpu[1:99999999]", "99,999,999"), ("r[1:300]n[1:300]g[1:300]", "27,000,000")],
)
def test_huge_host_range_is_refused_before_expanding(
    inventories: InventoryFactory, pattern: str, count: str
) -> None:
    directory = inventories.make(SMALL_HOSTS.replace("n[05:08]", pattern), SMALL_CLUSTER)
    assert_refused(
        validate(directory), directory / "hosts.yml", f"stands for {count} hosts", f"{MAX_HOSTS:,}"
    )


def test_zero_padded_range_of_unequal_width_stays_refused(inventories: InventoryFactory) -> None:
    directory = inventories.make(SMALL_HOSTS.replace("n[05:08]", "gpu[01:99999999]"), SMALL_CLUSTER)
    assert_refused(validate(directory), directory / "hosts.yml", "equal width")


def test_many_ranges_together_are_bounded(inventories: InventoryFactory) -> None:
    ranges = "".join(f"                r{i}n[1:{MAX_HOSTS // 2}]:\n" for i in range(40))
    directory = inventories.make(SMALL_HOSTS.replace("                n[05:08]:\n", ranges), SMALL_CLUSTER)
    assert_refused(validate(directory), directory / "hosts.yml", f"more than {MAX_HOSTS:,} hosts")


def test_long_chain_of_groups_loads(inventories: InventoryFactory) -> None:
    # Checking group cycles recursed once per level: 5,000 nested groups raised RecursionError.
    chain = "".join(f"    g{i}: {{children: {{g{i + 1}: }}}}\n" for i in range(5000))
    hosts = "all:\n  children:\n    ctl: {hosts: {head: }}\n    gpus: {children: {g0: }}\n" + chain
    hosts += "    g5000: {hosts: {'n[01:08]': }}\n"
    cluster = (
        textwrap.dedent(SMALL_CLUSTER)
        .replace("leaf1: [rack1]", "leaf1: [n01, n02, n03, n04]")
        .replace("leaf2: [rack2]", "leaf2: [n05, n06, n07, n08]")
    )
    directory = inventories.make(hosts, cluster)
    start = time.process_time()
    assert len(load_cluster(directory).hosts) == 8
    assert time.process_time() - start < 5


@pytest.mark.parametrize("reverse", [False, True])
def test_long_chains_of_tenants_and_switches_validate_in_linear_time(
    inventories: InventoryFactory, reverse: bool
) -> None:
    # Walking up each chain cost quadratic (tenants) and cubic (switches) time: 4,000 took minutes.
    count = 4000
    order = range(count - 1, -1, -1) if reverse else range(count)
    tenants = "".join(
        f"  - {{name: t{i}, fairshare: 1, gpu_quota: 1"
        + (f", parent: t{i + 1}}}\n" if i < count - 1 else "}\n")
        for i in order
    )
    switches = "".join(f"    s{i}: [s{i + 1}]\n" for i in order if i < count - 1)
    cluster = (
        textwrap.dedent(SMALL_CLUSTER).split("  fabric:")[0]
        + "  fabric:\n    tree:\n"
        + textwrap.indent(switches, "  ")
        + f"      s{count - 1}: [gpus]\n"
        + "  partitions:\n    - {name: batch, nodes: [gpus], default: true}\n"
        + "  tenants:\n"
        + textwrap.indent(tenants, "  ")
    )
    directory = inventories.make(SMALL_HOSTS, cluster)
    start = time.process_time()
    model = load_cluster(directory)
    assert len(model.spec.tenants) == count
    assert len(model.switch_path["n01"]) == count
    assert time.process_time() - start < 5


def test_inventory_with_anchors_and_merge_keys_still_loads(inventories: InventoryFactory) -> None:
    # Anchors, aliases and merge keys used the ordinary way: many uses, little expansion.
    tenants = "".join(
        f"    - {{<<: *tenant, name: team-{i:04d}, users: [u{i:04d}]}}\n" for i in range(1, 3000)
    )
    cluster = f"""\
cluster:
  name: anchors
  slurm: {{version: "22.05", controller: head}}
  node_types:
    h100: &node {{sockets: 2, cores_per_socket: 8, memory_mb: 64000,
                 gpus: {{model: h100, count: 8, devices: "/dev/nvidia[0-7]"}}}}
    h200:
      <<: *node
      memory_mb: 128000
  nodes:
    - {{group: rack1, type: h100}}
    - {{group: rack2, type: h200}}
  partitions:
    - &batch {{name: batch, nodes: [gpus], default: true}}
    - {{<<: *batch, name: debug, default: false, max_time: "01:00:00"}}
  qos:
    - {{name: normal}}
  tenants:
    - &tenant {{name: team-0000, fairshare: 1, gpu_quota: 0, gpu_limit: 8, qos: [normal]}}
{tenants}"""
    directory = inventories.make(SMALL_HOSTS, cluster)
    run = validate(directory)
    assert run.code == 0, run.stderr
    assert "3000 tenants" in run.stdout, run.stdout
    assert run.wall < WALL_LIMIT_S and run.rss_mib < RSS_LIMIT_MIB
    model = load_cluster(directory)
    assert model.spec.node_types["h200"].memory_mb == 128000
    assert model.spec.node_types["h200"].cores_per_socket == 8
    assert [p.name for p in model.spec.partitions] == ["batch", "debug"]


def test_merge_keys_give_the_merged_values(inventories: InventoryFactory) -> None:
    cluster = (
        SMALL_CLUSTER.replace(
            "h100: {sockets: 2, cores_per_socket: 8, memory_mb: 64000,",
            "h100: {<<: {sockets: 2, cores_per_socket: 4, memory_mb: 64000}, cores_per_socket: 8,",
        )
        .replace("    - {name: team-a,", "    - &a {name: team-a,")
        .replace(
            "    - {name: team-b, fairshare: 50, gpu_quota: 32, users: [bob]}",
            "    - {<<: *a, name: team-b, gpu_limit: null, users: [bob], qos: []}",
        )
    )
    cluster_model = load_cluster(inventories.make(SMALL_HOSTS, cluster))
    assert cluster_model.spec.node_types["h100"].cores_per_socket == 8
    team_b = cluster_model.tenants_by_name["team-b"]
    assert (team_b.fairshare, team_b.gpu_quota, team_b.users) == (50, 32, ["bob"])
