"""Which slurmctld error lines the trial counts against the files, and which it knows it caused."""

from __future__ import annotations

from gpucluster.layers import load_cluster
from gpucluster.trial.slurmctld import _expected_noise
from tests.conftest import INVENTORIES


def test_a_slow_clock_on_a_busy_machine_is_not_the_files() -> None:
    cluster = load_cluster(INVENTORIES / "lab")
    slow = "slurmctld: [2026-11-25T04:16:24.082] error: High latency for 1000 calls to gettimeofday(): 14751 microseconds"
    assert _expected_noise(cluster, slow)
    bad = "slurmctld: [2026-11-25T04:16:24.082] error: Parsing error at unrecognized key: Frobnicate"
    assert not _expected_noise(cluster, bad)
