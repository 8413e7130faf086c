"""The lab's login node (cluster.slurm.login: login01): users submit there, no job runs there."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpucluster.lab.paths import REPO_ROOT

from .conftest import Lab

pytestmark = pytest.mark.lab

LOGIN = "login01"


def test_a_user_submits_from_the_login_node_and_the_job_runs_on_a_gpu_node(lab_cluster: Lab) -> None:
    job = lab_cluster.ok(
        "sbatch", "--parsable", "--output=/dev/null", "--gres=gpu:h100:1", "--wrap", "hostname",
        user="alice", host=LOGIN,
    ).strip().split(";")[0]  # fmt: skip

    def accounted() -> list[str]:
        # From the login node too: sacct reaches slurmdbd with the cluster's key and files.
        out = lab_cluster.ok(
            "sacct", "-j", job, "-X", "--noheader", "--parsable2", "--format=State,NodeList",
            user="alice", host=LOGIN,
        )  # fmt: skip
        return out.strip().split("|") if out.strip() else []

    lab_cluster.wait(lambda: accounted()[:1] == ["COMPLETED"], 90, f"job {job} to complete in sacct")
    state, node = accounted()
    assert state == "COMPLETED"
    assert node in lab_cluster.cluster.hosts and node != LOGIN


def test_the_login_node_is_in_no_partition(lab_cluster: Lab) -> None:
    listed = lab_cluster.ok("sinfo", "--noheader", "--Node", "--format=%N", host=LOGIN).split()
    assert set(listed) == set(lab_cluster.cluster.hosts)
    assert LOGIN not in listed


def test_no_slurmd_runs_on_the_login_node(lab_cluster: Lab) -> None:
    assert lab_cluster.sh("pgrep", "-x", "slurmd", host=LOGIN).returncode == 1
    enabled = lab_cluster.sh("systemctl", "is-enabled", "slurmd", host=LOGIN)
    assert enabled.stdout.strip() == "disabled", enabled.stdout + enabled.stderr


def test_sshd_runs_on_the_login_node(lab_cluster: Lab) -> None:
    assert lab_cluster.ok("systemctl", "is-active", "ssh", host=LOGIN).strip() == "active"


def test_lab_run_runs_on_the_login_node_by_default(lab_cluster: Lab) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", "lab", "run", "--", "hostname"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == LOGIN
    on_controller = subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", "lab", "run", "--host", "ctl01", "--", "hostname"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert on_controller.stdout.strip() == "ctl01", on_controller.stderr
