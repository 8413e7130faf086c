"""Power saving with gpucluster's own programs, against real slurmctld and the lab's Redfish BMC.

The lab's power-saved nodes (gpu11, gpu12: cluster.nodes[].power bmc) are off while idle: their
containers are stopped. A job needing both makes slurmctld run gpucluster-power-resume, which asks
the lab's BMC over Redfish (HTTPS, its certificate checked) to power them on; their containers boot,
slurmd registers, the job runs. After SuspendTime idle, gpucluster-power-suspend powers them off
again. A node whose power-on does not bring slurmd up is DOWN with the program's reason and the
job is requeued, not lost; a node with a job is never powered off. `lab status` and `lab verify`
say each node's power state.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucluster.lab import nodes
from gpucluster.lab.paths import podman_env
from gpucluster.model.powered import saved_hosts

from .conftest import Lab, run_scrubbed
from .test_verify import verify

pytestmark = pytest.mark.lab

POWER_LOG = "/var/log/slurm/gpucluster-power.log"
RESUME = "/usr/local/sbin/gpucluster-power-resume"
SUSPEND = "/usr/local/sbin/gpucluster-power-suspend"
# SuspendTime 20 s, slurmctld looks every 2 s (power_save_interval), SuspendTimeout 15 s, then the
# BMC's graceful shutdown (up to 10 s): about 50 s from idle to off, with a margin for a busy host.
IDLE_TO_OFF = 150
# ResumeTimeout 60 s: the program gives up 10 s before it.
RESUME_TIMEOUT = 60


def running(host: str) -> bool:
    return nodes.container_running(nodes.container_name(host))


def saved(lab: Lab) -> list[str]:
    return saved_hosts(lab.cluster)


def powered_down(lab: Lab, hosts: list[str]) -> bool:
    states = lab.node_states()
    return all(states.get(h, "").endswith("~") and not running(h) for h in hosts)


def power_log(lab: Lab) -> list[str]:
    """The program's log on the controller in charge (it runs where slurmctld runs)."""
    return lab.sh("cat", POWER_LOG).stdout.splitlines()


def job_state(lab: Lab, job: str) -> str:
    out = lab.ok("sacct", "--noheader", "--allocations", "--parsable2", f"--jobs={job}", "--format=State")
    return out.strip().splitlines()[-1] if out.strip() else ""


def squeue_state(lab: Lab, job: str) -> str:
    return lab.sh("squeue", "--noheader", f"--jobs={job}", "--format=%T").stdout.strip()


@pytest.fixture
def power_lab(lab_cluster: Lab) -> Iterator[Lab]:
    """The shared lab with its power-saved nodes off, as Slurm leaves them when idle."""
    lab_cluster.wait(
        lambda: powered_down(lab_cluster, saved(lab_cluster)), IDLE_TO_OFF, "the power-saved nodes off"
    )
    yield lab_cluster


def test_power_saved_nodes_are_off_until_a_job_needs_them(power_lab: Lab) -> None:
    hosts = saved(power_lab)
    assert hosts == ["gpu11", "gpu12"]
    states = power_lab.node_states()
    assert {h: states[h] for h in hosts} == {h: "idle~" for h in hosts}
    assert not any(running(h) for h in hosts)
    # `lab status` says both what the BMC reports and what Slurm shows.
    proc = run_scrubbed(".venv/bin/gpucluster lab status", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = proc.stdout[proc.stdout.index("NODE POWER(BMC) SLURM") :].splitlines()
    assert rows[1:3] == ["gpu11 Off idle~", "gpu12 Off idle~"], proc.stdout


def test_a_job_powers_two_nodes_on_runs_and_they_are_powered_off_when_idle(power_lab: Lab) -> None:
    before = len(power_log(power_lab))
    submitted = time.monotonic()
    job = power_lab.submit("--partition=burst", "--nodes=2", "--wrap=srun hostname")
    power_lab.wait(
        lambda: job_state(power_lab, job) == "COMPLETED", RESUME_TIMEOUT + 60, f"job {job} to complete"
    )
    print(f"job {job}: submit to completion {time.monotonic() - submitted:.1f} s with two nodes powered on")
    log = power_log(power_lab)[before:]
    for host in ("gpu11", "gpu12"):
        assert any(
            f"resume {host}: bmc: PowerState Off -> On (ComputerSystem.Reset On) for job(s) {job}" in line
            for line in log
        ), log
        assert any(re.search(rf"resume {host}: slurmd registered after [\d.]+ s", line) for line in log), log
    # Idle for SuspendTime: powered off again, through the BMC, gracefully.
    power_lab.wait(lambda: powered_down(power_lab, ["gpu11", "gpu12"]), IDLE_TO_OFF, "both nodes off again")
    log = power_log(power_lab)[before:]
    for host in ("gpu11", "gpu12"):
        assert any(
            f"suspend {host}: bmc: PowerState On -> Off (ComputerSystem.Reset GracefulShutdown)" in line
            for line in log
        ), log


def test_a_node_with_a_job_is_never_powered_off(power_lab: Lab) -> None:
    job = power_lab.submit("--partition=burst", "--nodes=1", "--nodelist=gpu11", "--wrap=sleep 45")
    # Running on a node that is up: squeue's RUNNING, not CONFIGURING (sacct counts a job whose
    # nodes still power up as RUNNING already).
    power_lab.wait(
        lambda: running("gpu11") and squeue_state(power_lab, job) == "RUNNING",
        RESUME_TIMEOUT + 30,
        f"job {job} to run on gpu11 powered on",
    )
    # Longer than SuspendTime: Slurm does not suspend a busy node; asked anyway, the program refuses.
    proc = power_lab.sh("runuser", "-u", "slurm", "--", SUSPEND, "gpu11")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert running("gpu11")
    assert any("suspend gpu11: not powered off: it has a job" in line for line in power_log(power_lab))
    power_lab.wait(lambda: job_state(power_lab, job) == "COMPLETED", 120, f"job {job} to complete on gpu11")
    power_lab.wait(lambda: powered_down(power_lab, ["gpu11"]), IDLE_TO_OFF, "gpu11 off once idle")


def _mask_slurmd(host: str, masked: bool) -> None:
    """Break (or mend) a powered-off node's disk: its slurmd will not start at the next boot."""
    name = nodes.container_name(host)
    root = subprocess.run(
        ["podman", "mount", name], env=podman_env(), capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        unit = Path(root) / "etc/systemd/system/slurmd.service"
        if masked:
            unit.symlink_to("/dev/null")
        else:
            unit.unlink(missing_ok=True)
    finally:
        subprocess.run(["podman", "unmount", name], env=podman_env(), capture_output=True, check=False)


def test_a_node_that_does_not_come_up_is_down_with_the_reason_and_its_job_is_not_lost(power_lab: Lab) -> None:
    _mask_slurmd("gpu12", True)
    try:
        job = power_lab.submit("--partition=burst", "--nodes=2", "--wrap=srun hostname")
        power_lab.wait(
            lambda: power_lab.node_states().get("gpu12", "").startswith("down"),
            RESUME_TIMEOUT + 60,
            "gpu12 DOWN after its failed power-on",
        )
        shown = power_lab.ok("scontrol", "show", "node", "gpu12")
        reason = re.search(r"Reason=(.*?)(?: \[|$)", shown, re.MULTILINE)
        assert reason and reason.group(1).startswith(
            "[power] bmc: powered on, but slurmd did not register within its ResumeTimeout"
        ), shown
        # Requeued, not lost: pending again (gpu11 alone cannot run it).
        power_lab.wait(
            lambda: job_state(power_lab, job) in ("PENDING", "REQUEUED"), 60, f"job {job} requeued"
        )
        assert re.search(r"Restarts=[1-9]", power_lab.ok("scontrol", "show", "job", job))
        power_lab.wait(lambda: not running("gpu12"), 60, "the failed node powered off")
        # slurmctld gives up itself at ResumeTimeout, 10 s after the program: a resume before
        # that is undone (it sets the node DOWN+POWERED_DOWN and runs ResumeFailProgram). The
        # node keeps the program's reason.
        power_lab.wait(
            lambda: power_lab.node_states().get("gpu12") == "down~", 60, "slurmctld to count gpu12 off"
        )
        assert reason.group(1) in power_lab.ok("scontrol", "show", "node", "gpu12")
    finally:
        _mask_slurmd("gpu12", False)
    # Mended: back to Slurm, which powers it on for the job waiting.
    power_lab.ok("scontrol", "update", "NodeName=gpu12", "State=RESUME")
    power_lab.wait(
        lambda: job_state(power_lab, job) == "COMPLETED", 2 * RESUME_TIMEOUT + 120, f"job {job} to complete"
    )
    power_lab.wait(lambda: powered_down(power_lab, ["gpu11", "gpu12"]), IDLE_TO_OFF, "both nodes off again")


def test_verify_says_the_power_state_of_each_power_saved_node(power_lab: Lab) -> None:
    checks = verify()
    assert checks["nodes"]["status"] == "pass", checks["nodes"]
    assert checks["nodes"]["detail"].endswith("; power-saved: gpu11 powered down, gpu12 powered down")
    # No job of verify's powered a node on.
    assert powered_down(power_lab, ["gpu11", "gpu12"])
