"""Compressed hostlists are read back by the real Slurm parser as exactly the same hosts."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster.hostlists import compress, expand

pytestmark = [
    pytest.mark.slurm,
    # CI installs slurm-client, so there the comparison with Slurm always runs.
    pytest.mark.skipif(
        shutil.which("scontrol") is None and not os.environ.get("CI"), reason="no slurm-client"
    ),
]


@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    # scontrol's hostlist verbs need only a parsable slurm.conf, no daemon.
    conf = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    conf.write_text("ClusterName=hl\nSlurmctldHost=localhost\nNodeName=n1\nPartitionName=p Nodes=n1\n")
    return {**os.environ, "SLURM_CONF": str(conf)}


def slurm_hostnames(expression: str, env: dict[str, str]) -> list[str]:
    proc = subprocess.run(
        ["scontrol", "show", "hostnames", expression], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, f"Slurm refused {expression!r}: {proc.stdout}{proc.stderr}"
    return proc.stdout.split()


def slurm_hostlist(hosts: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(
        ["scontrol", "show", "hostlist", ",".join(hosts)], capture_output=True, text=True, env=env, check=True
    )
    return proc.stdout.strip()


CASES = [
    [f"gpu{i:03d}" for i in [*range(1, 129), 130]],
    [f"r{r:02d}n{n:02d}" for r in range(1, 9) for n in range(1, 19)],
    ["su1-leaf", "su2-leaf", "su3-leaf", "spine"],
    ["a1b3", "a2b3", "a3b3", "n9", "n10", "n11"],
    ["node1", "node01", "node001"],
    ["gpu-ib0", "gpu-ib1", "x", "dgx-a100-07", "dgx-a100-08"],
]


@pytest.mark.parametrize("hosts", CASES, ids=[c[0] for c in CASES])
def test_slurm_reads_our_hostlists(hosts: list[str], slurm_env: dict[str, str]) -> None:
    expression = compress(hosts)
    assert sorted(slurm_hostnames(expression, slurm_env)) == sorted(set(hosts))
    assert sorted(expand(expression)) == sorted(set(hosts))


def test_we_read_slurms_own_hostlists(slurm_env: dict[str, str]) -> None:
    for hosts in CASES:
        assert sorted(expand(slurm_hostlist(hosts, slurm_env))) == sorted(set(hosts))


names = st.builds(
    lambda prefix, number, width, suffix: f"{prefix}{str(number).zfill(width)}{suffix}",
    st.sampled_from(["gpu", "dgx", "r1n", "rack2-node", "a", "nvl72-r"]),
    st.integers(0, 300),
    st.integers(1, 4),
    st.sampled_from(["", "", "", "-ib", "b3"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(host_names=st.lists(names, min_size=1, max_size=60))
def test_generated_host_sets_round_trip_through_slurm(
    slurm_env: dict[str, str], host_names: list[str]
) -> None:
    expression = compress(host_names)
    assert sorted(slurm_hostnames(expression, slurm_env)) == sorted(set(host_names))


def test_compress_is_order_independent() -> None:
    hosts = [f"gpu{i:03d}" for i in range(1, 40)]
    assert compress(hosts) == compress(reversed(hosts)) == "gpu[001-039]"


def test_suffix_ranges_are_never_emitted() -> None:
    assert compress(["su1-leaf", "su2-leaf"]) == "su1-leaf,su2-leaf"
    assert compress([f"r{r}n{n}" for r in (1, 2) for n in (1, 2)]) == "r[1-2]n[1-2]"


def test_slurm_config_fixture_is_minimal(slurm_env: dict[str, str]) -> None:
    assert Path(slurm_env["SLURM_CONF"]).read_text().startswith("ClusterName=")
