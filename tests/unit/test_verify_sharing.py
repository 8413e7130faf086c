"""The `gpu-sharing` row of `gpucluster verify`: one job per node kind and way of sharing, judged on
what Slurm gives such a job (SLURM_SHARDS_ON_NODE, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE with
gpucluster-mps's pipe directory, one MIG device); a cluster sharing no GPU has no such row."""

from __future__ import annotations

import pytest

from gpucluster.layers import load_cluster
from gpucluster.verify.checks import CheckResult, Status, run_checks
from gpucluster.verify.observed import JobRun
from gpucluster.verify.probes import GPUS, Plan, make_plan
from gpucluster.verify.sharing import SHARING
from tests.conftest import InventoryFactory
from tests.unit.verify_fixtures import CLUSTER, HOSTS, JOB_NAME, healthy, with_job

# Shards and MPS are not configured in one Slurm cluster (gpucluster refuses the pair), so two
# clusters: every h100 node (g[1-3]) with 8 GPUs of 4 shards each, or g3 shared by MPS (a
# cluster.nodes entry); in both, g4: two H100 in MIG, 2 x 3g.40gb and 7 x 1g.10gb.
SHARDS = '          gpus: {model: h100, count: 8, devices: "/dev/nvidia[0-7]"}\n'
NODES = "        - {group: gpus, type: h100}\n"
G3_MPS = '        - {group: g3, type: h100, gpus: {model: h100, count: 8, devices: "/dev/nvidia[0-7]", sharing: {mps: 100}}}\n'
G4_MIG = (
    "        - {group: g4, type: h100, gpus: {model: h100, count: 2, memory_gb: 80,"
    ' sharing: {mig: {per_gpu: [{gpus: "0", profiles: {3g.40gb: 2}}, {gpus: "1", profiles: {1g.10gb: 7}}]}}}}\n'
)


def shared_plan(inventories: InventoryFactory, mps: bool) -> Plan:
    cluster = CLUSTER.replace('version: "22.05"', 'version: "26.05"')
    assert SHARDS in cluster and NODES in cluster
    if not mps:
        cluster = cluster.replace(SHARDS, SHARDS.replace('[0-7]"}', '[0-7]", sharing: {shard: 4}}'))
    cluster = cluster.replace(
        NODES,
        "        - {group: leaf_a, type: h100}\n"
        + (G3_MPS if mps else "        - {group: g3, type: h100}\n")
        + G4_MIG,
    )
    return make_plan(load_cluster(inventories.make(HOSTS, cluster, name=f"mps-{mps}")), job_name=JOB_NAME)


@pytest.fixture
def plan(inventories: InventoryFactory) -> Plan:
    """g[1-3] by shards, g4 by MIG."""
    return shared_plan(inventories, mps=False)


@pytest.fixture
def mps_plan(inventories: InventoryFactory) -> Plan:
    """g3 by MPS, g4 by MIG."""
    return shared_plan(inventories, mps=True)


def sharing_row(plan: Plan, **runs: JobRun) -> CheckResult:
    seen = healthy(plan)
    for job_id, run in runs.items():
        seen = with_job(seen, job_id, run)
    return next(r for r in run_checks(plan, seen) if r.name == SHARING)


def ok(node: str, *lines: str) -> JobRun:
    return JobRun(rc=0, stdout="\n".join([f"job=91 node={node}", *lines]) + "\n", seconds=0.4)


def test_one_job_per_way_asking_one_share(plan: Plan, mps_plan: Plan) -> None:
    jobs = {j.id: j for j in plan.jobs if j.kind == SHARING}
    assert sorted(jobs) == [f"{SHARING}/g1/shard", f"{SHARING}/g4/mig"]
    assert "--gres=shard:1" in jobs[f"{SHARING}/g1/shard"].argv
    assert "--gres=gpu:3g.40gb:1" in jobs[f"{SHARING}/g4/mig"].argv
    mps_jobs = {j.id: j for j in mps_plan.jobs if j.kind == SHARING}
    assert sorted(mps_jobs) == [f"{SHARING}/g3/mps", f"{SHARING}/g4/mig"]
    assert "--gres=mps:25" in mps_jobs[f"{SHARING}/g3/mps"].argv
    # MIG instances are not whole GPUs: g4's gpu-visibility job is left to this row.
    assert [s.subject for s in plan.skipped if s.kind == GPUS] == ["g4"]


def test_what_each_job_must_see(plan: Plan, mps_plan: Plan) -> None:
    mig = {f"{SHARING}/g4/mig": ok("g4", "cuda=MIG-5c6d1d3e-0000-0000-0000-000000000000", "mig=1")}
    shard = {f"{SHARING}/g1/shard": ok("g1", "cuda=0", "shards=1", "mps=", "pipe=")}
    mps = {
        f"{SHARING}/g3/mps": ok(
            "g3", "cuda=0", "shards=", "mps=25", "pipe=/run/gpucluster-mps/gpu0/tenant-research"
        )
    }
    row = sharing_row(plan, **shard, **mig)
    assert row.status == Status.PASS, row.detail
    assert row.detail == "g1 shard:1: SLURM_SHARDS_ON_NODE=1; g4 gpu:3g.40gb:1: one 3g.40gb device"
    row = sharing_row(mps_plan, **mps, **mig)
    assert row.status == Status.PASS, row.detail
    assert (
        row.detail == "g3 mps:25: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25; g4 gpu:3g.40gb:1: one 3g.40gb device"
    )
    broken_mig = {f"{SHARING}/g4/mig": ok("g4", "cuda=0", "mig=2")}
    row = sharing_row(plan, **{f"{SHARING}/g1/shard": ok("g1", "cuda=0,1", "shards=")}, **broken_mig)
    assert row.status == Status.FAIL and row.names == ("g1", "g4")
    assert row.detail.split("; ") == [
        "g1 shard (shard:1): CUDA_VISIBLE_DEVICES has 2 devices, not 1",
        "g1 shard (shard:1): SLURM_SHARDS_ON_NODE=unset",
        "g4 mig (gpu:3g.40gb:1): nvidia-smi -L lists 2 MIG 3g.40gb devices, not 1",
    ]
    row = sharing_row(mps_plan, **{f"{SHARING}/g3/mps": ok("g3", "cuda=0", "mps=25", "pipe=")}, **mig)
    assert row.status == Status.FAIL and row.names == ("g3",)
    assert (
        row.detail
        == "g3 mps (mps:25): CUDA_MPS_PIPE_DIRECTORY=unset (gpucluster-mps's TaskProlog did not run)"
    )


def test_no_row_without_shared_gpus(inventories: InventoryFactory) -> None:
    plan = make_plan(load_cluster(inventories.make(HOSTS, CLUSTER)), job_name=JOB_NAME)
    assert SHARING not in [r.name for r in run_checks(plan, healthy(plan))]


def test_the_nodes_row_expects_the_shared_gres(plan: Plan) -> None:
    """A shard node's Gres (gpu:h100:8,shard:32) and a MIG node's (its instances) are what the
    inventory says: the nodes row passes on them, and fails on whole GPUs there."""
    from gpucluster.verify.observed import Command
    from tests.unit.verify_fixtures import node_line, with_controller

    gres = {
        "g1": "gpu:h100:8(S:0-1),shard:32(S:0-1)",
        "g2": "gpu:h100:8(S:0-1),shard:32(S:0-1)",
        "g3": "gpu:h100:8(S:0-1),shard:32(S:0-1)",
        "g4": "gpu:3g.40gb:2,gpu:1g.10gb:7",
    }
    seen = healthy(plan)
    nodes = "\n".join(node_line(n, Gres=gres[n]) for n in plan.cluster.hosts) + "\n"
    row = next(
        r for r in run_checks(plan, with_controller(seen, nodes=Command(0, nodes))) if r.name == "nodes"
    )
    assert row.status == Status.PASS, row.detail
    gres["g4"] = "gpu:h100:2"
    nodes = "\n".join(node_line(n, Gres=gres[n]) for n in plan.cluster.hosts) + "\n"
    row = next(
        r for r in run_checks(plan, with_controller(seen, nodes=Command(0, nodes))) if r.name == "nodes"
    )
    assert row.status == Status.FAIL and "g4" in row.detail, row.detail
