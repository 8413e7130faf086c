"""ssh to compute nodes (cluster.slurm.node_ssh): from the login node a user gets into a node only
while a job of theirs runs there, the session joins that job and ends with it; an admin gets in
anywhere. The users reach the nodes with the cluster keys the users role put in their homes."""

from __future__ import annotations

import pytest

from .conftest import Lab

pytestmark = pytest.mark.lab

LOGIN = "login01"
NODE = "gpu02"
OTHER_NODE = "gpu03"
SSH = ("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10")
REFUSED = "Access denied by pam_slurm_adopt"


def ssh(lab: Lab, user: str, node: str, *command: str) -> tuple[int, str]:
    proc = lab.sh(*SSH, node, *command, user=user, host=LOGIN, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


def user_processes(lab: Lab, user: str, name: str, host: str) -> list[str]:
    proc = lab.sh("pgrep", "-u", user, "-x", name, host=host)
    return proc.stdout.split()


def test_a_user_gets_into_a_node_only_with_a_job_there_and_the_session_ends_with_it(lab_cluster: Lab) -> None:
    code, out = ssh(lab_cluster, "alice", NODE, "hostname")
    assert code != 0 and REFUSED in out, out

    job = lab_cluster.ok(
        "sbatch", "--parsable", "--output=/dev/null", f"--nodelist={NODE}", "--wrap", "sleep 600",
        user="alice", host=LOGIN,
    ).strip().split(";")[0]  # fmt: skip
    lab_cluster.wait(
        lambda: lab_cluster.ok("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING",
        60,
        f"job {job} to run",
    )

    # In: the session's processes sit in the job's extern step (its cgroup), on this node only.
    code, out = ssh(lab_cluster, "alice", NODE, "cat", "/proc/self/cgroup")
    assert code == 0, out
    assert f"/job_{job}/step_extern" in out, out
    code, out = ssh(lab_cluster, "alice", OTHER_NODE, "hostname")
    assert code != 0 and REFUSED in out, out

    # A session left open: its process is one of the job's (scontrol listpids on the node).
    lab_cluster.ok("setsid", "-f", *SSH, NODE, "sleep", "577", user="alice", host=LOGIN)
    lab_cluster.wait(
        lambda: bool(user_processes(lab_cluster, "alice", "sleep", NODE)[1:]), 30, "the ssh session's sleep"
    )
    listed = lab_cluster.ok("scontrol", "listpids", job, host=NODE)
    session = lab_cluster.ok("pgrep", "-u", "alice", "-f", "^sleep 577$", host=NODE).split()
    assert session and all(pid in listed.split() for pid in session), listed

    # The job ends: the session goes with it, on the node and on the login node.
    lab_cluster.ok("scancel", job, user="alice", host=LOGIN)
    lab_cluster.wait(
        lambda: not user_processes(lab_cluster, "alice", "sleep", NODE), 60, "the job's processes to end"
    )
    lab_cluster.wait(
        lambda: not user_processes(lab_cluster, "alice", "ssh", LOGIN), 60, "the ssh session to close"
    )


def test_a_user_without_an_association_is_refused_by_sbatch_and_by_ssh(lab_cluster: Lab) -> None:
    submitted = lab_cluster.sh("sbatch", "--output=/dev/null", "--wrap", "true", user="outsider", host=LOGIN)
    assert submitted.returncode != 0
    assert "Invalid account" in submitted.stderr, submitted.stderr
    # Refused by pam_slurm_adopt (no job), not for want of a key.
    code, out = ssh(lab_cluster, "outsider", NODE, "hostname")
    assert code != 0 and REFUSED in out, out


def test_an_admin_gets_into_every_compute_node_without_a_job(lab_cluster: Lab) -> None:
    for node in lab_cluster.nodes_up:
        code, out = ssh(lab_cluster, "ops", node, "hostname")
        assert (code, out.strip()) == (0, node)
