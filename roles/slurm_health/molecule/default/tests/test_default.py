"""slurm_health on the Molecule container: the program and healthcheck.conf are gpucluster's,
Slurm runs them, a lost GPU drains the node (by hand and as the Prolog of a job) and its return
resumes it, and an administrator's drain is never undone. Every test leaves the node as it found
it: devices back, node resumed, queue empty."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[5]
INVENTORY = REPO / "molecule" / "inventory" / "molhealth"
PROGRAM = "/usr/local/sbin/gpucluster-healthcheck"
NODE = "gchealth01"
DEVICE = "/dev/nvidia1"


def node(host) -> tuple[str, str]:
    """(state, reason) of the node as slurmctld has them. Not sinfo: after a job's launch failed,
    22.05's sinfo can show the node `mixed` for minutes while it holds no CPU (CPUAlloc=0)."""
    out = host.check_output(f"scontrol show node {NODE}")
    state = re.search(r"\bState=(\S+)", out).group(1)
    found = re.search(r"^\s*Reason=(.*?)(?: \[[^\[\]]*@[^\[\]]*\])?$", out, re.MULTILINE)
    return state, found.group(1) if found else ""


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.fixture
def restore(host) -> Iterator[None]:
    """Put the GPU device back, empty the queue and resume the node, whatever the test did."""
    mode, major, minor = host.check_output(f"stat --format='%a %t %T' {DEVICE}").split()
    yield
    host.run("scancel --user=root")
    if not host.file(DEVICE).exists:
        host.check_output(f"mknod -m {mode} {DEVICE} c {int(major, 16)} {int(minor, 16)}")
    if "DRAIN" in node(host)[0]:
        host.check_output(f"scontrol update NodeName={NODE} State=RESUME")
    # A resumed node answers again after a ping round; a job requeued a moment ago may still be
    # completing there.
    wait_for(lambda: node(host) == ("IDLE", ""), 60, "the node to be idle again")


def test_program_is_the_repository_file(host) -> None:
    installed = host.file(PROGRAM)
    assert installed.mode == 0o755 and installed.user == "root"
    source = REPO / "gpucluster" / "programs" / "gpucluster_healthcheck.py"
    assert installed.sha256sum == hashlib.sha256(source.read_bytes()).hexdigest()


def test_healthcheck_conf_is_byte_identical_to_gpucluster_render(host, tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", "render", str(INVENTORY), "--out", str(tmp_path)],
        check=True,
        cwd=REPO,
        capture_output=True,
    )
    for name in ("healthcheck.conf", "slurm.conf"):
        expected = hashlib.sha256((tmp_path / "slurm" / name).read_bytes()).hexdigest()
        assert host.file(f"/etc/slurm/{name}").sha256sum == expected, name


def test_slurm_runs_it_as_health_check_and_prolog(host) -> None:
    config = host.check_output("scontrol show config")
    settings = dict(re.findall(r"^(\w+)\s+= (.*)$", config, re.MULTILINE))
    assert settings["HealthCheckProgram"] == PROGRAM
    assert settings["HealthCheckInterval"].split()[0] == "3600"
    assert settings["HealthCheckNodeState"] == "ANY"
    # 24.05 on take several Prologs and `scontrol show config` lists them its own way: the file says
    # which, and the job test below proves slurmd runs it.
    assert f"Prolog={PROGRAM}" in host.file("/etc/slurm/slurm.conf").content_string.splitlines()
    assert settings.get("Prolog", PROGRAM) == PROGRAM


def test_healthy_node_is_idle_and_a_run_changes_nothing(host) -> None:
    assert node(host) == ("IDLE", "")
    result = host.run(PROGRAM)
    assert result.rc == 0, result.stdout + result.stderr
    assert "healthy; no change" in result.stdout
    assert node(host) == ("IDLE", "")


def test_lost_gpu_drains_the_node_and_its_return_resumes_it(host, restore: None) -> None:
    host.check_output(f"rm {DEVICE}")
    result = host.run(PROGRAM)
    assert result.rc == 1, result.stdout + result.stderr
    assert node(host) == ("IDLE+DRAIN", f"[health] gpu count: 1 of 2 (missing {DEVICE})")
    # A second failing run leaves the reason (and its timestamp) as it is.
    assert "already drained for this" in host.run(PROGRAM).stdout
    host.check_output(f"mknod -m 666 {DEVICE} c 1 3")
    result = host.run(PROGRAM)
    assert result.rc == 0, result.stdout + result.stderr
    assert "resumed" in result.stdout
    # Slurm marks a resumed node not responding (IDLE+NOT_RESPONDING) until slurmd registers again.
    wait_for(lambda: node(host) == ("IDLE", ""), 30, "the resumed node to be idle")


def test_an_administrators_drain_is_never_undone(host, restore: None) -> None:
    host.check_output(f"scontrol update NodeName={NODE} State=DRAIN Reason=maintenance")
    assert host.run(PROGRAM).rc == 0
    assert node(host) == ("IDLE+DRAIN", "maintenance")
    # Failing, it still keeps the administrator's reason.
    host.check_output(f"rm {DEVICE}")
    assert host.run(PROGRAM).rc == 1
    assert node(host) == ("IDLE+DRAIN", "maintenance")


def test_prolog_drains_the_node_and_the_job_does_not_run(host, restore: None) -> None:
    host.check_output(f"rm {DEVICE}")
    job = host.check_output("sbatch --parsable --output=/dev/null --wrap='touch /tmp/ran-on-lost-gpu'")
    job = job.strip().split(";")[0]
    wait_for(lambda: node(host)[1].startswith("[health]"), 60, "the Prolog to drain the node")
    state, reason = node(host)
    assert reason == f"[health] gpu count: 1 of 2 (missing {DEVICE})"  # not Slurm's "Prolog error"
    assert "DRAIN" in state.split("+")
    # Requeued instead of run.
    wait_for(
        lambda: host.check_output(f"squeue --noheader --jobs={job} --format=%T").strip() == "PENDING",
        30,
        "the job to be requeued",
    )
    assert not host.file("/tmp/ran-on-lost-gpu").exists
