"""Shared storage in the lab (cluster.storage: /home and /scratch, site-managed): one host
directory at each mount point on every lab host stands in for the NFS or Lustre mount of a real
site. Users submit from their home on the login node, as on a real cluster."""

from __future__ import annotations

import shlex

import pytest

from .conftest import Lab

pytestmark = pytest.mark.lab

LOGIN = "login01"


def in_home(lab: Lab, user: str, script: str) -> str:
    """Run a shell script as `user` on the login node, from their home directory."""
    return lab.ok("bash", "-c", f"cd && {script}", user=user, host=LOGIN)


def finished(lab: Lab, job: str) -> bool:
    out = lab.ok("sacct", "-j", job, "-X", "--noheader", "--parsable2", "--format=State")
    return out.strip() in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")


def test_a_batch_job_from_the_home_directory_writes_its_output_there(lab_cluster: Lab) -> None:
    script = "#!/bin/bash\n#SBATCH --nodelist=gpu02\nhostname\npwd\n"
    job = in_home(
        lab_cluster, "alice",
        f"mkdir -p batch && cd batch && printf %s {shlex.quote(script)} > job.sh && sbatch --parsable job.sh",
    ).strip().split(";")[0]  # fmt: skip
    lab_cluster.wait(lambda: finished(lab_cluster, job), 90, f"job {job} to finish")
    # Read back on the login node: slurmstepd on gpu02 wrote it into the same directory.
    assert in_home(lab_cluster, "alice", f"cat batch/slurm-{job}.out").split() == [
        "gpu02",
        "/home/alice/batch",
    ]


def test_srun_output_and_error_files_land_in_the_working_directory(lab_cluster: Lab) -> None:
    in_home(
        lab_cluster, "alice",
        "mkdir -p steps && cd steps && rm -f out.txt err.txt && "
        "srun --nodelist=gpu03 --output=out.txt --error=err.txt sh -c 'hostname; echo oops >&2'",
    )  # fmt: skip
    assert in_home(lab_cluster, "alice", "cat steps/out.txt").strip() == "gpu03"
    assert in_home(lab_cluster, "alice", "cat steps/err.txt").strip() == "oops"


def test_a_file_a_job_writes_on_gpu01_is_read_by_a_job_on_gpu03(lab_cluster: Lab) -> None:
    path = "/scratch/alice-handoff.txt"
    written = in_home(
        lab_cluster, "alice", f"srun --nodelist=gpu01 sh -c 'echo from-$(hostname) > {path}; cat {path}'"
    )
    assert written.strip() == "from-gpu01"
    read = in_home(lab_cluster, "alice", f"srun --nodelist=gpu03 sh -c 'cat {path}; rm {path}'")
    assert read.strip() == "from-gpu01"


def test_a_user_cannot_write_into_another_users_home(lab_cluster: Lab) -> None:
    # From a job on a node and on the login node alike.
    in_job = lab_cluster.sh(
        "srun", "--nodelist=gpu01", "touch", "/home/alice/from-bob", user="bob", host=LOGIN
    )
    assert in_job.returncode != 0 and "Permission denied" in in_job.stderr, in_job.stderr
    on_login = lab_cluster.sh("touch", "/home/alice/from-bob", user="bob", host=LOGIN)
    assert on_login.returncode != 0 and "Permission denied" in on_login.stderr, on_login.stderr
    assert lab_cluster.sh("test", "-e", "/home/alice/from-bob", host=LOGIN).returncode == 1
