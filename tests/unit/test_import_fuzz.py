"""`gpucluster import` on hostile and broken files (issue 36, item 9): truncated lines, binary
bytes, unbalanced quotes, keys and values of every kind mixed at random, include loops and a
100,000-node hostlist. Each either imports or is refused with file and line (InventoryError,
exit 2 from the command); none raises anything else, and each finishes within a bound.
GPUCLUSTER_IMPORT_FUZZ sets how many random site files hypothesis tries (default 150)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster.errors import InventoryError
from gpucluster.slurm.view import SiteFiles
from gpucluster.slurm_import.adopt import import_cluster, write_inventory
from tests.unit.test_import_real_shapes import GPU_NODES, HEAD, NODES

EXAMPLES = int(os.environ.get("GPUCLUSTER_IMPORT_FUZZ", "150"))

# Pieces real files are made of, whole and broken.
FRAGMENTS = [
    *HEAD.splitlines(),
    *NODES.splitlines(),
    *GPU_NODES.splitlines(),
    "GresTypes=gpu",
    'RebootProgram="/sbin/reboot now"',
    'InteractiveStepOptions="--pty $SHELL',  # unbalanced quote
    'Prolog="/a b" "c"',
    "ControlAddr=10.0.0.1",
    "NodeName=x[1-3] NodeAddr=10.0.0.[1-2]",
    "NodeName=y[01-04] Gres=gpu:a100:4,shard:8 State=DRAIN",
    "PartitionName=p Nodes=x[1-3],nosuch Default=YES MaxTime=1-",
    "PartitionName=DEFAULT MaxTime=bogus",
    "SallocDefaultCommand=",
    "DefaultStorageType=slurmdbd",
    "include other.conf",
    "include /nonexistent/%c.conf",
    "TopologyPlugin=topology/tree",
    "SlurmctldHost=h(",
    "Key",
    "=value",
    "NodeName=",
    "NodeName=z[5-1]",
    "NodeName=w[1-2]] CPUs=-4",
    "CPUs=abc",
    "\\",
    "# comment \\",
    "a=b\\#c # d",
    "\x00\x01\x02 binary",
    "\udcff".encode("utf-8", "surrogateescape").decode("latin-1"),
]
OTHER_FILES = {
    "gres.conf": [
        "Name=gpu File=/dev/nvidia[0-1]",
        "NodeName=g[1-2] Name=gpu Type=t File=/dev/nvidia[0-1] Cores=0-3,99",
        "AutoDetect=nvml",
        "Name=gpu Count=2G",
        "NodeName=nosuch Name=gpu",
        "Name=gpu File=/dev/dri/card0",
    ],
    "topology.conf": [
        "SwitchName=s1 Nodes=n[1-2],ghost",
        "SwitchName=s2 Switches=s[1-3]",
        "SwitchName=s3",
        "Foo=bar",
    ],
    "cgroup.conf": ["ConstrainCores=yes", "TaskAffinity=maybe", "CgroupPlugin=cgroup/v3", "Bogus=1"],
    "plugstack.conf": ["required", "include plugstack.conf", "optional /x.so a b", "bogus line"],
}


def _truncated(line: str, cut: int) -> str:
    return line[: max(0, len(line) - cut)]


@st.composite
def site(draw: st.DrawFn) -> dict[str, str]:
    def lines(pool: list[str], most: int) -> str:
        chosen = draw(st.lists(st.sampled_from(pool), max_size=most))
        cuts = draw(st.lists(st.integers(0, 12), min_size=len(chosen), max_size=len(chosen)))
        return "\n".join(
            _truncated(line, cut) if cut > 8 else line for line, cut in zip(chosen, cuts, strict=True)
        )

    # Half start from a file the import takes, so that the random lines reach past the parser.
    base = draw(st.sampled_from(["", HEAD + NODES, HEAD + "GresTypes=gpu\n" + GPU_NODES]))
    files = {"slurm.conf": base + lines(FRAGMENTS, 25 if not base else 4)}
    for name, pool in OTHER_FILES.items():
        if draw(st.booleans()):
            files[name] = lines(pool, 5)
    if draw(st.booleans()):
        files["other.conf"] = lines(FRAGMENTS, 5)
    return files


def _import(root: Path, files: dict[str, str], version: str = "24.11") -> None:
    etc = root / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (etc / name).write_text(text, encoding="utf-8", errors="surrogateescape")
    try:
        write_inventory(import_cluster(SiteFiles.in_directory(etc), version), root / "inv", check=True)
    except InventoryError as exc:
        assert exc.problems  # refused with what and where


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(site())
def test_random_site_files_import_or_are_refused(
    tmp_path_factory: pytest.TempPathFactory, files: dict[str, str]
) -> None:
    started = time.monotonic()
    _import(tmp_path_factory.mktemp("fuzz"), files)
    assert time.monotonic() - started < 20


def test_binary_and_truncated_files_are_refused_with_their_line(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "slurm.conf").write_bytes(HEAD.encode() + b"\x7fELF\x02\x01\x01\x00\x00\nNodeName=n1 CPUs=")
    with pytest.raises(InventoryError) as caught:
        import_cluster(SiteFiles.in_directory(etc), "24.11")
    assert any(p.line == 6 and "slurm.conf" in p.file for p in caught.value.problems), caught.value.problems


def test_an_include_loop_ends_with_its_line(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "slurm.conf").write_text(HEAD + "include a.conf\n" + NODES)
    (etc / "a.conf").write_text("include b.conf\n")
    (etc / "b.conf").write_text("include a.conf\n")
    started = time.monotonic()
    with pytest.raises(InventoryError) as caught:
        import_cluster(SiteFiles.in_directory(etc), "24.11")
    assert time.monotonic() - started < 5
    assert any("include" in p.path and p.line == 1 for p in caught.value.problems), caught.value.problems


def test_a_plugstack_include_loop_ends(tmp_path: Path) -> None:
    _import(tmp_path, {"slurm.conf": HEAD + NODES, "plugstack.conf": "include plugstack.conf\n"})


def test_a_hundred_thousand_nodes_in_bounded_time(tmp_path: Path) -> None:
    """One NodeName line of 100,000 nodes (python-hostlist's largest expansion): imported within
    the bound of the speed test's size scaled, or refused with the line; and one more than that is
    refused, not expanded."""
    started = time.monotonic()
    big = (
        HEAD + "NodeName=n[000001-100000] CPUs=8 RealMemory=16000\nPartitionName=all Nodes=ALL Default=YES\n"
    )
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "slurm.conf").write_text(big)
    result = import_cluster(SiteFiles.in_directory(etc), "24.11")
    assert time.monotonic() - started < 60
    assert "n[000001-100000]" in result.hosts_yml or "n[000001:100000]" in result.hosts_yml
    (etc / "slurm.conf").write_text(big.replace("100000]", "100001]"))
    started = time.monotonic()
    with pytest.raises(InventoryError) as caught:
        import_cluster(SiteFiles.in_directory(etc), "24.11")
    assert time.monotonic() - started < 5
    assert any(p.line == 6 for p in caught.value.problems), caught.value.problems
