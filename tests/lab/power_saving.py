"""Power saving with real slurmctld: inventories/lab-power (one GPU node always on, two that Slurm
keeps off) brought up as a user would, its power-saved nodes behind the lab's own Redfish BMC
(gpucluster/lab/redfish.py), which starts and stops their containers. gpucluster-power, installed by
the slurm_power role, is Slurm's ResumeProgram, SuspendProgram and ResumeFailProgram; what runs is
the product's own Redfish client against that BMC.

On 26.05 and 24.11: the nodes start off; a job that needs both powers them on and completes, and
they go off again after SuspendTime idle; a node with a job is never powered off; a node whose
slurmd does not start is set DOWN with the program's reason and its job requeued, and runs it once
the node is mended; `gpucluster lab verify` says each node's power.

A lab of its own (GPUCLUSTER_LAB_PREFIX, GPUCLUSTER_LAB_SUBNET and GPUCLUSTER_LAB_DIR):
tests/lab_releases/test_power_labs.py runs this file in a pytest process with those set. Run here
without them it would replace the lab in .lab: it refuses.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster.lab import nodes
from gpucluster.lab.paths import REPO_ROOT, podman_env
from gpucluster.model.powered import saved_hosts

from .conftest import Lab, own_lab_up
from .test_verify import verify

pytestmark = pytest.mark.lab

RELEASES = ("26.05", "24.11")
INVENTORY = REPO_ROOT / "inventories" / "lab-power"
POWER_LOG = "/var/log/slurm/gpucluster-power.log"
# inventories/lab-power: SuspendTime 20 s, SuspendTimeout 15 s, ResumeTimeout 60 s; slurmctld
# looks for nodes to suspend every few seconds. Bounds with room for a loaded machine.
POWER_ON_BOUND = 120
POWER_OFF_BOUND = 150


@pytest.fixture(scope="module", params=RELEASES)
def power_lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    release: str = request.param
    root = tmp_path_factory.mktemp(f"power-{release}")
    with own_lab_up(INVENTORY, release, root, "the power-saving labs") as own:
        yield own.lab


def _saved(lab: Lab) -> list[str]:
    return saved_hosts(lab.cluster)


def _state(lab: Lab, node: str) -> str:
    return lab.node_states().get(node, "")


def _powered_down(lab: Lab, node: str) -> bool:
    """sinfo's `~` (powered down) on an idle node, and its container stopped by the BMC."""
    return _state(lab, node) == "idle~" and not nodes.container_running(nodes.container_name(node))


def _job_state(lab: Lab, job: str) -> str:
    out = lab.ok("sacct", "--noheader", "--allocations", "--parsable2", f"--jobs={job}", "--format=State")
    return out.strip().splitlines()[0].split()[0] if out.strip() else ""


def _queue_state(lab: Lab, job: str) -> str:
    return lab.ok("squeue", "--noheader", f"--jobs={job}", "--format=%T").strip()


def _power_log(lab: Lab) -> list[str]:
    return lab.ok("cat", POWER_LOG).splitlines()


def _wait_all_off(lab: Lab, bound: float = POWER_OFF_BOUND) -> None:
    lab.wait(
        lambda: all(_powered_down(lab, n) for n in _saved(lab)),
        bound,
        f"{', '.join(_saved(lab))} powered down with their containers stopped",
    )


def test_the_power_saved_nodes_are_off_until_a_job_needs_them(power_lab: Lab) -> None:
    lab = power_lab
    assert _saved(lab) == ["gpu11", "gpu12"]
    _wait_all_off(lab)
    # The node that is always on is up, and excluded from suspension (SuspendExcNodes).
    assert _state(lab, "gpu01") == "idle"
    assert nodes.container_running(nodes.container_name("gpu01"))
    conf = lab.ok("scontrol", "show", "config")
    assert re.search(r"SuspendExcNodes\s+=\s+gpu01", conf), conf


def test_a_job_on_both_powers_them_on_and_they_go_off_again_when_idle(power_lab: Lab) -> None:
    lab = power_lab
    _wait_all_off(lab)
    logged = len(_power_log(lab))
    submitted = time.monotonic()
    job = lab.submit("-N2", "--nodelist=gpu[11-12]", "--wrap=hostname", user="alice")
    lab.wait(
        lambda: _job_state(lab, job) == "COMPLETED", POWER_ON_BOUND, f"job {job} on gpu[11-12] to complete"
    )
    took = time.monotonic() - submitted
    new = _power_log(lab)[logged:]
    for node in _saved(lab):
        # The program's own lines: the BMC's reset for the job, then slurmd's registration.
        assert [
            ln
            for ln in new
            if f" resume {node}: bmc: " in ln and "ComputerSystem.Reset On" in ln and job in ln
        ], new
        assert [ln for ln in new if f" resume {node}: slurmd registered after" in ln], new
    print(f"\ntwo-node job on power-saved nodes: submitted to completed in {took:.1f} s")
    print("\n".join(line for line in new if " resume " in line))
    idle_since = time.monotonic()
    _wait_all_off(lab)
    print(f"both powered down {time.monotonic() - idle_since:.1f} s after the job ended (SuspendTime 20 s)")
    new = _power_log(lab)[logged:]
    assert all([ln for ln in new if f" suspend {node}: " in ln] for node in _saved(lab)), new


def test_a_node_with_a_job_is_never_powered_off(power_lab: Lab) -> None:
    lab = power_lab
    _wait_all_off(lab)
    job = lab.submit("--nodelist=gpu11", "--wrap=sleep 70", user="alice")
    # squeue, not sacct: accounting says RUNNING while the job is still CONFIGURING (its node
    # powering up).
    lab.wait(lambda: _queue_state(lab, job) == "RUNNING", POWER_ON_BOUND, f"job {job} running on gpu11")
    # Past SuspendTime and SuspendTimeout twice over: the node stays allocated and its container up.
    seen: set[str] = set()
    deadline = time.monotonic() + 50
    while time.monotonic() < deadline:
        seen.add(_state(lab, "gpu11"))
        assert nodes.container_running(nodes.container_name("gpu11")), "gpu11's container stopped under a job"
        time.sleep(2)
    assert seen <= {"allocated", "mixed"}, seen
    lab.wait(lambda: _job_state(lab, job) == "COMPLETED", 60, f"job {job} to complete")
    _wait_all_off(lab)


def _mask_slurmd(node: str, masked: bool) -> None:
    """slurmd masked (or not) in the node's stopped container, through its filesystem: the next
    power-on by the BMC boots a node whose slurmd never starts."""
    name = nodes.container_name(node)
    root = subprocess.run(
        ["podman", "mount", name], env=podman_env(), capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        unit = Path(root) / "etc/systemd/system/slurmd.service"
        if masked:
            unit.symlink_to("/dev/null")
        elif unit.is_symlink():
            unit.unlink()
    finally:
        subprocess.run(["podman", "unmount", name], env=podman_env(), capture_output=True, check=False)


def test_a_node_whose_slurmd_never_starts_goes_down_with_the_reason_and_its_job_waits(
    power_lab: Lab,
) -> None:
    lab = power_lab
    _wait_all_off(lab)
    _mask_slurmd("gpu12", masked=True)
    try:
        job = lab.submit("--nodelist=gpu12", "--wrap=hostname", user="alice")
        lab.wait(
            lambda: _state(lab, "gpu12").startswith("down"),
            POWER_ON_BOUND,
            "gpu12 set DOWN by gpucluster-power",
        )
        reason = lab.ok("sinfo", "--noheader", "--Node", "--nodes=gpu12", "--format=%E").strip()
        assert reason.startswith(
            "[power] bmc: powered on, but slurmd did not register within its ResumeTimeout"
        ), reason
        # Requeued, never lost: pending again (held where Slurm holds a job requeued after a
        # failed launch), not failed.
        state = lab.ok("squeue", "--noheader", f"--jobs={job}", "--format=%T %r").strip()
        assert state.startswith("PENDING"), state
        print(f"\ngpu12: {reason}\njob {job}: {state}")
        # Powered off by the program (a node that did not come up costs nothing meanwhile), then
        # slurmctld's own ResumeFailProgram call, which sets it DOWN again: an admin's resume
        # before that call would be undone by it.
        lab.wait(
            lambda: (
                _state(lab, "gpu12") == "down~"
                and not nodes.container_running(nodes.container_name("gpu12"))
                and any(" resume-fail gpu12: DOWN: " in line for line in _power_log(lab))
            ),
            90,
            "gpu12 powered down and the ResumeFailProgram's DOWN",
        )
    finally:
        _mask_slurmd("gpu12", masked=False)
    # Mended: resumed by the admin, powered on for the job that waited, which now runs. Slurm makes
    # a requeued job eligible again some 120 s after the requeue.
    lab.ok("scontrol", "update", "NodeName=gpu12", "State=RESUME")
    if "held" in lab.ok("squeue", "--noheader", f"--jobs={job}", "--format=%r").lower():
        lab.ok("scontrol", "release", job)
    lab.wait(
        lambda: _job_state(lab, job) == "COMPLETED", 120 + POWER_ON_BOUND, f"job {job} to complete on gpu12"
    )
    print("\n".join(line for line in _power_log(lab) if " gpu12: " in line)[-2000:])
    _wait_all_off(lab)


def test_verify_says_each_nodes_power_and_powers_none_on(power_lab: Lab) -> None:
    lab = power_lab
    _wait_all_off(lab)
    checks = verify()
    failing = {n: row["detail"] for n, row in checks.items() if row["status"] == "fail"}
    assert failing == {}, failing
    assert "; power-saved: gpu11 powered down, gpu12 powered down" in checks["nodes"]["detail"]
    targets = checks["scrape-targets"]["detail"]
    assert "down while power-saved:" in targets and "gpu11" in targets and "gpu12" in targets, targets
    assert all(_powered_down(lab, n) for n in _saved(lab))
