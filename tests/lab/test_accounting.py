"""Accounting from the tenants: jobs recorded with GPU TRES, outsiders refused, QOS limits, fair-share."""

from __future__ import annotations

import pytest

from gpucluster.model.base import Owner
from gpucluster.slurm.accounts import fair_shares

from .conftest import Lab

pytestmark = pytest.mark.lab


def test_job_is_recorded_with_its_gpus(lab_cluster: Lab) -> None:
    job = lab_cluster.submit("--gres=gpu:h100:2", "--wrap=true", user="bob")
    lab_cluster.wait(
        lambda: (
            "gres/gpu=2"
            in lab_cluster.ok(
                "sacct", "-X", "--noheader", "-P", f"--jobs={job}", "--format=State,Account,AllocTRES"
            )
        ),
        60,
        f"job {job} in sacct with gres/gpu=2",
    )
    row = lab_cluster.ok(
        "sacct", "-X", "--noheader", "-P", f"--jobs={job}", "--format=User,Account,AllocTRES"
    )
    user, account, tres = row.strip().split("|")
    assert (user, account) == ("bob", "product")
    assert "gres/gpu=2" in tres.split(",")


def test_user_outside_every_tenant_is_refused(lab_cluster: Lab) -> None:
    proc = lab_cluster.sh("srun", "true", user="outsider")
    assert proc.returncode != 0
    assert "Invalid account" in proc.stderr


def test_qos_gpu_limit_keeps_a_job_pending(lab_cluster: Lab) -> None:
    limit = next(q.max_gpus_per_user for q in lab_cluster.cluster.spec.qos if q.name == "capped")
    assert limit == 2
    first = lab_cluster.submit("--qos=capped", "--gres=gpu:h100:2", "--wrap=sleep 300", user="alice")
    lab_cluster.wait(
        lambda: lab_cluster.ok("squeue", "--noheader", f"--jobs={first}", "--format=%T").strip() == "RUNNING",
        30,
        "the first capped job to run",
    )
    second = lab_cluster.submit("--qos=capped", "--gres=gpu:h100:1", "--wrap=sleep 300", user="alice")
    lab_cluster.wait(
        lambda: (
            lab_cluster.ok("squeue", "--noheader", f"--jobs={second}", "--format=%T %r").strip()
            == "PENDING QOSMaxGRESPerUser"
        ),
        30,
        "the second capped job to pend on the QOS GPU limit",
    )
    # Another tenant's user is not held back by alice's usage.
    other = lab_cluster.submit("--gres=gpu:h100:2", "--wrap=sleep 300", user="bob")
    lab_cluster.wait(
        lambda: lab_cluster.ok("squeue", "--noheader", f"--jobs={other}", "--format=%T").strip() == "RUNNING",
        30,
        "bob's job to run",
    )


def test_sshare_shows_each_tenant_fairshare(lab_cluster: Lab) -> None:
    out = lab_cluster.ok("sshare", "--noheader", "--parsable2", "--format=Account,User,RawShares")
    shares = {
        account.strip(): raw
        for account, user, raw in (line.split("|") for line in out.splitlines())
        if not user
    }
    # A tenant's shares are its Slurm GPU quota (gpucluster.slurm.accounts.fair_shares).
    slurm = lab_cluster.cluster.owned_by(Owner.SLURM)
    for tenant in lab_cluster.cluster.spec.tenants:
        assert shares[tenant.name] == str(fair_shares(slurm, tenant))


def test_associations_match_the_rendered_accounts(lab_cluster: Lab) -> None:
    out = lab_cluster.ok(
        "sacctmgr",
        "-nP",
        "show",
        "assoc",
        "where",
        "cluster=lab",
        "format=Account,User,Fairshare,GrpTRES,QOS",
    )
    rows = {(a, u): (fs, tres, qos) for a, u, fs, tres, qos in (line.split("|") for line in out.splitlines())}
    assert rows[("research", "")] == ("16", "gres/gpu=24", "capped,normal")
    assert rows[("product", "")] == ("16", "gres/gpu=32", "normal")
    assert {u for (a, u) in rows if a == "research" and u} == {"alice", "carol"}
    assert {u for (a, u) in rows if a == "product" and u} == {"bob"}
