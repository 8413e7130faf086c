"""GPU health checks on the lab's real daemons: slurmd runs gpucluster-healthcheck every
`cluster.slurm.health.interval` seconds. A node that loses a GPU device is drained with a
`[health]` reason within two intervals while jobs elsewhere run on; its device back, it returns
to idle by itself; a node an administrator drained stays drained through the runs.

Every test puts back what it changed (device files, drained nodes), also when it fails."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest

from .conftest import Lab

pytestmark = pytest.mark.lab

# slurmctld starts a health check run when the interval has passed and its last ping round is done;
# the run itself and the scontrol call take a second or two.
MARGIN = 15
SICK, DEVICE = "gpu02", "/dev/nvidia3"
BUSY = "gpu01"
MAINTAINED = "gpu03"
STATE_FILE = "/var/lib/gpucluster/health/state.json"


def interval(lab: Lab) -> int:
    health = lab.cluster.spec.slurm.health
    assert health is not None, "the lab inventory sets cluster.slurm.health"
    return health.interval


def node(lab: Lab, host: str) -> tuple[str, str]:
    """(state, reason) of one node as slurmctld has them, e.g. ("IDLE+DRAIN", "maintenance").
    Not sinfo: after a job's launch failed, 22.05's sinfo can show `mixed` for a node holding no
    CPU for a while."""
    out = lab.ok("scontrol", "show", "node", host)
    state = re.search(r"\bState=(\S+)", out)
    assert state, out
    reason = re.search(r"^\s*Reason=(.*?)(?: \[[^\[\]]*@[^\[\]]*\])?$", out, re.MULTILINE)
    return state.group(1), reason.group(1) if reason else ""


def last_run(lab: Lab, host: str) -> dict[str, object]:
    """What the health check's last periodic run on `host` found and did ({} before the first)."""
    proc = lab.sh("cat", STATE_FILE, host=host)
    if proc.returncode != 0:
        return {}
    run: dict[str, object] = json.loads(proc.stdout).get("last_run", {})
    return run


def job(lab: Lab, job_id: str) -> tuple[str, str]:
    """(state, nodes) of a job, ("", "") once it is gone."""
    out = lab.ok("squeue", "--noheader", f"--jobs={job_id}", "--format=%T %N").split()
    return (out[0], out[1]) if len(out) == 2 else ("", "")


def device_args(lab: Lab) -> list[str]:
    """mknod's arguments to make DEVICE again as the lab created it (`podman run --device`)."""
    mode, major, minor = lab.ok("stat", "--format=%a %t %T", DEVICE, host=SICK).split()
    return ["-m", mode, DEVICE, "c", str(int(major, 16)), str(int(minor, 16))]


@pytest.fixture
def put_back(lab_cluster: Lab) -> Iterator[tuple[Lab, list[str]]]:
    """Whatever happens in the test: the GPU device exists again as the lab made it, and the nodes
    these tests drain are resumed (a test failing midway would otherwise leave them drained for
    the tests after it)."""
    lab = lab_cluster
    mknod = device_args(lab)
    try:
        yield lab, mknod
    finally:
        if lab.sh("test", "-e", DEVICE, host=SICK).returncode != 0:
            lab.ok("mknod", *mknod, host=SICK)
        for host in (SICK, MAINTAINED):
            if "DRAIN" in node(lab, host)[0].split("+"):
                # The health check may resume SICK itself between the read and this update: the
                # wait below judges the outcome.
                lab.sh("scontrol", "update", f"NodeName={host}", "State=RESUME")
        lab.wait(
            lambda: all("DRAIN" not in node(lab, host)[0].split("+") for host in (SICK, MAINTAINED)),
            30,
            f"{SICK} and {MAINTAINED} to be undrained",
        )


def test_lost_gpu_drains_its_node_and_its_return_resumes_it(put_back: tuple[Lab, list[str]]) -> None:
    lab, mknod = put_back
    every = interval(lab)
    elsewhere = lab.submit(f"--nodelist={BUSY}", "--wrap=sleep 600")
    lab.wait(lambda: job(lab, elsewhere) == ("RUNNING", BUSY), 60, f"the job on {BUSY} to run")

    lab.ok("rm", DEVICE, host=SICK)
    lab.wait(
        lambda: node(lab, SICK)[1].startswith("[health]"),
        2 * every + MARGIN,
        f"the health check to drain {SICK} (two intervals of {every} s and a margin)",
    )
    assert node(lab, SICK) == ("IDLE+DRAIN", f"[health] gpu count: 7 of 8 (missing {DEVICE})")
    # Only that node: the job elsewhere runs on, the other nodes still take work.
    assert job(lab, elsewhere) == ("RUNNING", BUSY)
    states = lab.node_states()
    assert all("drain" not in state for host, state in states.items() if host != SICK), states

    lab.ok("mknod", *mknod, host=SICK)
    lab.wait(
        lambda: node(lab, SICK) == ("IDLE", ""),
        2 * every + MARGIN,
        f"{SICK} to return to idle by itself once its GPU is back",
    )
    assert job(lab, elsewhere) == ("RUNNING", BUSY)


def test_maintenance_drain_stays_through_health_runs(put_back: tuple[Lab, list[str]]) -> None:
    lab, _ = put_back
    every = interval(lab)
    lab.ok("scontrol", "update", f"NodeName={MAINTAINED}", "State=DRAIN", "Reason=maintenance")
    # Runs ending in the second after the drain may have looked at the node just before it.
    drained_at = float(lab.ok("date", "+%s.%N", host=MAINTAINED)) + 1
    seen: set[float] = set()

    def two_runs_since_the_drain() -> bool:
        run = last_run(lab, MAINTAINED)
        epoch = run.get("epoch")
        if isinstance(epoch, (int, float)) and epoch > drained_at:
            seen.add(float(epoch))
            # Each run that saw the drain decided to leave it.
            assert run["action"] == "none" and "left alone" in str(run["why"]), run
        return len(seen) >= 2

    lab.wait(two_runs_since_the_drain, 3 * every + MARGIN, f"two health check runs on {MAINTAINED}")
    assert node(lab, MAINTAINED) == ("IDLE+DRAIN", "maintenance")
    # And a moment later still: nothing undoes it in the background.
    time.sleep(2)
    assert node(lab, MAINTAINED) == ("IDLE+DRAIN", "maintenance")
