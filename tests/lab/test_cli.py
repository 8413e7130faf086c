"""`gpucluster lab status|run` against the lab that is up."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpucluster.lab.paths import REPO_ROOT

from .conftest import Lab

pytestmark = pytest.mark.lab


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", "lab", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_status_shows_nodes_fabric_and_jobs(lab_cluster: Lab) -> None:
    proc = cli("status")
    assert proc.returncode == 0, proc.stderr
    hosts = len(lab_cluster.cluster.inventory.hostvars)
    assert hosts == 7  # two controllers, four GPU nodes and the login node
    assert proc.stdout.startswith(f"lab: up ({hosts} hosts from ")
    for word in ("nodes", "fabric", "jobs", "gpu04", "SwitchName=spine", "gpu:h100:8"):
        assert word in proc.stdout


def test_run_passes_the_command_and_its_exit_code(lab_cluster: Lab) -> None:
    proc = cli("run", "--", "srun", "-N2", "--switches=1", "hostname")
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.split()) == 2
    failing = cli("run", "--", "sh", "-c", "exit 7")
    assert failing.returncode == 7


def test_run_as_a_tenant_user(lab_cluster: Lab) -> None:
    proc = cli("run", "--user", "bob", "--", "srun", "id", "-un")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "bob"


def test_status_names_a_stopped_daemon_and_its_fix(lab_cluster: Lab) -> None:
    lab_cluster.ok("systemctl", "stop", "slurmd", host="gpu04")
    try:
        proc = cli("status")
        assert proc.returncode == 1, proc.stdout
        assert proc.stdout.splitlines()[0].startswith("lab: partly built from ")
        assert (
            "  gpu04: slurmd is not running: run `gpucluster lab up` (the playbook starts it)" in proc.stdout
        )
        assert "fatal" not in proc.stdout + proc.stderr
    finally:
        lab_cluster.ok("systemctl", "start", "slurmd", host="gpu04")
    lab_cluster.wait(lambda: lab_cluster.node_states().get("gpu04") == "idle", 60, "gpu04 to be idle again")
    assert cli("status").returncode == 0
