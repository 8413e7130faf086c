"""`gpucluster verify` verdicts: a healthy cluster passes; each fault fails its check, naming what is wrong.

Observations are built in Slurm 22.05's own output formats (tests/unit/verify_fixtures.py) and
broken one thing at a time, as the lab's fault tests break the live cluster.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gpucluster.layers import load_cluster
from gpucluster.verify import parse
from gpucluster.verify.checks import (
    ASSOC_FIELDS,
    QOS_FIELDS,
    USER_FIELDS,
    CheckResult,
    Status,
    check_accounts,
    run_checks,
)
from gpucluster.verify.collect import collect, verify_cluster
from gpucluster.verify.observed import Command, HostSeen, JobRun, Observations, VerifyError
from gpucluster.verify.probes import NCCL, Plan, make_plan
from gpucluster.verify.report import as_json, failed
from tests.conftest import InventoryFactory
from tests.unit.verify_fixtures import (
    ASSOC_TEXT,
    CLUSTER,
    HOSTS,
    JOB_NAME,
    QOS_TEXT,
    TOPOLOGY_TEXT,
    USERS_TEXT,
    healthy,
    job_output,
    make_cluster,
    module_path,
    nccl_output,
    node_line,
    small_plan,
    with_controller,
    with_host,
    with_job,
)

CHECK_NAMES = [
    "nodes",
    "gate",
    "co-allocation",
    "gpu-visibility",
    "topology",
    "accounts",
    "slurm-version",
    "munge-key",
    "slurm-config",
    "users",
    "nccl",
    "cleanup",
]


@pytest.fixture
def plan(inventories: InventoryFactory) -> Plan:
    return small_plan(inventories)


def rows(plan: Plan, seen: Observations) -> dict[str, CheckResult]:
    results = run_checks(plan, seen)
    assert [r.name for r in results] == CHECK_NAMES
    return {r.name: r for r in results}


def only_failure(plan: Plan, seen: Observations) -> CheckResult:
    """The one failing row (every other row passes or is skipped as on a healthy cluster)."""
    by_name = rows(plan, seen)
    failing = [r for r in by_name.values() if r.status == Status.FAIL]
    assert len(failing) == 1, [(r.name, r.detail) for r in failing]
    healthy_rows = rows(plan, healthy(plan))
    for name, row in by_name.items():
        if row is not failing[0]:
            assert row.status == healthy_rows[name].status, (name, row.detail)
    return failing[0]


def test_a_healthy_cluster_passes_and_nccl_is_said_skipped(plan: Plan) -> None:
    by_name = rows(plan, healthy(plan))
    assert {n: r.status for n, r in by_name.items() if r.status != Status.PASS} == {"nccl": Status.SKIPPED}
    assert by_name["nccl"].detail == (
        "all_reduce_perf (nccl-tests) not found on g1, g2: install nccl-tests to measure an all-reduce"
    )
    assert (
        by_name["nodes"].detail.startswith("4 nodes as the inventory") and "4 idle" in by_name["nodes"].detail
    )
    assert by_name["slurm-version"].detail == "Slurm 22.05.8 on all 7 hosts"
    assert "gres.conf" in by_name["slurm-config"].detail
    assert by_name["topology"].detail.endswith("--switches=1 jobs ran under leaf-a, leaf-b alone")
    assert not failed(list(by_name.values()))


def test_json_report_lists_every_check(plan: Plan, inventories: InventoryFactory) -> None:
    results = run_checks(plan, with_host(healthy(plan), "g2", munge_key="0" * 64))
    doc = json.loads(as_json(plan.cluster, results))
    assert doc["ok"] is False and doc["cluster"] == "small"
    assert [c["name"] for c in doc["checks"]] == CHECK_NAMES
    munge = next(c for c in doc["checks"] if c["name"] == "munge-key")
    assert (munge["status"], munge["names"]) == ("fail", ["g2"])
    assert "0" * 64 not in json.dumps(doc)  # checksums are compared, never shown


# --- drift ---------------------------------------------------------------------------------------


def test_a_different_uid_on_one_node_fails_only_users(plan: Plan) -> None:
    seen = healthy(plan)
    passwd = seen.hosts["g3"].passwd
    assert passwd is not None
    seen = with_host(seen, "g3", passwd=passwd.replace("alice:x:2001:2001", "alice:x:2999:2001"))
    row = only_failure(plan, seen)
    assert row.name == "users" and row.names == ("g3",)
    assert row.detail == "g3: alice is uid 2999 gid 2001, elsewhere uid 2001 gid 2001"


def test_a_user_missing_on_a_controller_is_named(plan: Plan) -> None:
    seen = with_host(healthy(plan), "ctl2", passwd="alice:x:2001:2001::/home/alice:/bin/sh\n")
    row = only_failure(plan, seen)
    assert (row.name, row.names, row.detail) == ("users", ("ctl2",), "ctl2: no user bob, carol")


def test_a_different_munge_key_on_one_node_fails_only_munge(plan: Plan) -> None:
    other = "f" * 64
    row = only_failure(plan, with_host(healthy(plan), "g4", munge_key=other))
    assert row.name == "munge-key" and row.names == ("g4",)
    assert row.detail == "g4: munge key differs from the one of ctl[1-2],db1,g[1-3]"
    assert other not in row.detail


def test_munge_key_tie_sides_with_the_primary_controller(inventories: InventoryFactory) -> None:
    plan = small_plan(inventories)
    seen = healthy(plan)
    # Four hosts (ctl1 among them) against three: the minority is named; a 50/50 split never names ctl1.
    for host in ("ctl2", "db1", "g1"):
        seen = with_host(seen, host, munge_key="e" * 64)
    row = rows(plan, seen)["munge-key"]
    assert row.names == ("ctl2", "db1", "g1")


def test_a_missing_munge_key_is_named(plan: Plan) -> None:
    row = only_failure(plan, with_host(healthy(plan), "db1", munge_key=None))
    assert (row.name, row.names, row.detail) == ("munge-key", ("db1",), "db1: no munge key")


def test_another_slurm_version_on_one_host(plan: Plan) -> None:
    row = only_failure(plan, with_host(healthy(plan), "g2", versions="slurmd slurm-wlm 23.02.7\n"))
    assert row.name == "slurm-version" and row.names == ("g2",)
    assert row.detail == "g2 slurmd 23.02.7, others 22.05.8"


def test_a_running_slurmd_of_another_version_is_named(plan: Plan) -> None:
    seen = healthy(plan)
    assert seen.controller is not None
    text = seen.controller.nodes.stdout.replace(node_line("g1"), node_line("g1", Version="22.05.9"))
    row = only_failure(plan, with_controller(seen, nodes=Command(0, text)))
    assert (row.name, row.names) == ("slurm-version", ("g1",))
    assert "g1 slurmd (running) 22.05.9" in row.detail


def test_a_version_other_than_the_inventory_release_fails(plan: Plan) -> None:
    seen = healthy(plan)
    for host in plan.hosts:
        program = seen.hosts[host].versions.split()[0]
        seen = with_host(seen, host, versions=f"{program} slurm 23.11.1\n")
    assert seen.controller is not None
    nodes = seen.controller.nodes.stdout.replace("Version=22.05.8", "Version=23.11.1")
    row = rows(plan, with_controller(seen, nodes=Command(0, nodes)))["slurm-version"]
    assert row.status == Status.FAIL
    assert row.detail == "Slurm 23.11.1 is not the inventory's release 22.05"


def test_debian_slurmdbd_without_its_config_prints_no_version_and_is_left_out(plan: Plan) -> None:
    versions = (
        "slurmctld slurm-wlm 22.05.8\nslurmd slurm-wlm 22.05.8\n"
        "slurmdbd slurmdbd: No slurmdbd.conf file (/etc/slurm/slurmdbd.conf) slurmdbd: fatal: StorageType must be specified\n"
    )
    assert (
        rows(plan, with_host(healthy(plan), "g1", versions=versions))["slurm-version"].status == Status.PASS
    )


def test_config_drift_and_stale_files_are_named(plan: Plan) -> None:
    seen = healthy(plan)
    config = dict(seen.hosts["g2"].config)
    config["slurm.conf"] = "a" * 64
    config["topology.yaml"] = "b" * 64  # the inventory renders topology.conf for 22.05, not this
    row = only_failure(plan, with_host(seen, "g2", config=config))
    assert row.name == "slurm-config" and row.names == ("g2",)
    assert row.detail == (
        "g2: slurm.conf differ from the inventory's; g2: topology.yaml present, but the inventory renders none"
    )


def test_a_missing_gres_conf_on_a_controller(plan: Plan) -> None:
    config = dict(healthy(plan).hosts["ctl2"].config)
    config["gres.conf"] = None
    row = only_failure(plan, with_host(healthy(plan), "ctl2", config=config))
    assert (row.name, row.detail) == ("slurm-config", "ctl2: gres.conf missing")


def test_an_unreachable_node_fails_every_drift_check_naming_it(plan: Plan) -> None:
    seen = with_host(healthy(plan), "g4", **{"unreachable": "Failed to connect to the host via ssh"})
    by_name = rows(plan, seen)
    for name in ("slurm-version", "munge-key", "slurm-config", "users"):
        assert by_name[name].status == Status.FAIL and by_name[name].names == ("g4",), name
        assert by_name[name].detail.startswith("g4: unreachable (Failed to connect")


# --- Slurm's view of the nodes -------------------------------------------------------------------


def test_a_drained_node_fails_nodes_with_its_reason(plan: Plan) -> None:
    seen = healthy(plan)
    assert seen.controller is not None
    text = seen.controller.nodes.stdout.replace(
        node_line("g2"),
        node_line("g2", state="IDLE+DRAIN", reason="gres/gpu count reported lower than configured (7 < 8)"),
    )
    row = only_failure(plan, with_controller(seen, nodes=Command(0, text)))
    assert row.name == "nodes" and row.names == ("g2",)
    assert row.detail == (
        "g2: IDLE+DRAIN (gres/gpu count reported lower than configured (7 < 8) [root@2024-05-01T10:10:00])"
    )


def test_nodes_in_the_gate_are_listed_with_why_and_one_that_stays_out_fails(plan: Plan) -> None:
    seen = healthy(plan)
    assert seen.controller is not None
    assert rows(plan, seen)["gate"].detail == "no node in the return-to-service gate"
    waiting = "[gate] health/quick burn-in: quick running since 10:12:00"
    out = "[gate] repaired/deep out: pcie: GPU 3 x8 of x16 (failed 2 burn-in(s))"
    text = seen.controller.nodes.stdout.replace(
        node_line("g2"), node_line("g2", state="IDLE+DRAIN", reason=waiting)
    )
    row = rows(plan, with_controller(seen, nodes=Command(0, text)))["gate"]
    assert (row.status, row.detail) == (Status.PASS, f"1 node(s) in the gate: g2: {waiting}")
    text = text.replace(node_line("g3"), node_line("g3", state="IDLE+DRAIN", reason=out))
    row = rows(plan, with_controller(seen, nodes=Command(0, text)))["gate"]
    assert (row.status, row.names, row.detail) == (Status.FAIL, ("g3",), f"g2: {waiting}; g3: {out}")


@pytest.mark.parametrize(
    ("state", "ok"),
    [
        ("IDLE", True),
        ("ALLOCATED", True),
        ("MIXED", True),
        ("IDLE+COMPLETING", True),
        ("DOWN+NOT_RESPONDING", False),
        ("IDLE+NOT_RESPONDING", False),
        ("ALLOCATED+DRAIN", False),
        ("IDLE+CLOUD+POWERED_DOWN", False),
        ("UNKNOWN", False),
    ],
)
def test_node_states_that_take_jobs(state: str, ok: bool) -> None:
    assert parse.usable(parse.NodeState.parse(state)) is ok


def test_a_down_node_without_reason_says_so(plan: Plan) -> None:
    seen = healthy(plan)
    assert seen.controller is not None
    text = seen.controller.nodes.stdout.replace(node_line("g1"), node_line("g1", state="DOWN"))
    row = rows(plan, with_controller(seen, nodes=Command(0, text)))["nodes"]
    assert (row.status, row.detail) == (Status.FAIL, "g1: DOWN (no reason given)")


def test_node_hardware_and_partitions_as_the_node_type(plan: Plan) -> None:
    seen = healthy(plan)
    assert seen.controller is not None
    broken = node_line("g3", CPUTot="4", Gres="gpu:h100:4(S:0)", AvailableFeatures="(null)", Partitions="gpu")
    text = seen.controller.nodes.stdout.replace(node_line("g3"), broken).replace(node_line("g4") + "\n", "")
    text += node_line("g9") + "\n"
    row = rows(plan, with_controller(seen, nodes=Command(0, text)))["nodes"]
    assert row.status == Status.FAIL and row.names == ("g3", "g4", "g9")
    assert row.detail.split("; ") == [
        "g3: CPUs 4, inventory 8",
        "g3: GRES gpu:h100:4, inventory gpu:h100:8",
        "g3: features none, inventory ib,nvlink",
        "g3: partitions gpu, inventory gpu,prod",
        "g4: unknown to Slurm",
        "g9: known to Slurm but not a Slurm node of the inventory",
    ]


def test_scontrol_failing_names_the_controller(plan: Plan) -> None:
    command = Command(1, "", "scontrol: error: Unable to contact slurm controller (connect failure)\n")
    row = rows(plan, with_controller(healthy(plan), nodes=command))["nodes"]
    assert (row.status, row.names) == (Status.FAIL, ("ctl1",))
    assert row.detail == (
        "scontrol show node failed on ctl1: scontrol: error: Unable to contact slurm controller (connect failure)"
    )


# --- jobs ------------------------------------------------------------------------------------------


def test_a_missing_gpu_device_fails_only_gpu_visibility(plan: Plan) -> None:
    job = next(j for j in plan.jobs if j.id == "gpu-visibility/g2")
    out = job_output(job).replace("usable=/dev/nvidia3\n", "unusable=/dev/nvidia3\n")
    row = only_failure(plan, with_job(healthy(plan), job.id, JobRun(rc=0, stdout=out)))
    assert row.name == "gpu-visibility" and row.names == ("g2",)
    assert row.detail == "g2: 7 of 8 GPU devices usable (/dev/nvidia3 missing or not usable), node type has 8"


def test_fewer_cuda_devices_than_the_node_type(plan: Plan) -> None:
    job = next(j for j in plan.jobs if j.id == "gpu-visibility/g4")
    out = job_output(job).replace("cuda=0,1,2,3,4,5,6,7", "cuda=0,1,2,3") + "nvidia-smi=4\n"
    row = only_failure(plan, with_job(healthy(plan), job.id, JobRun(rc=0, stdout=out)))
    assert row.detail == "g4: CUDA_VISIBLE_DEVICES has 4 GPUs; nvidia-smi lists 4 GPUs, node type has 8"


def test_a_gpu_job_that_cannot_start_is_named(plan: Plan) -> None:
    run = JobRun(
        rc=1,
        stderr="srun: error: Unable to allocate resources: Requested node configuration is not available\n",
    )
    row = only_failure(plan, with_job(healthy(plan), "gpu-visibility/g1", run))
    assert row.names == ("g1",)
    assert row.detail == (
        "g1: exit 1: srun: error: Unable to allocate resources: Requested node configuration is not available"
    )


def test_coallocation_needs_every_node_in_one_running_job(plan: Plan) -> None:
    job = next(j for j in plan.jobs if j.id == "co-allocation/gpu")
    out = "job=61 node=g1\nstate=RUNNING nodes=g[1-2]\njob=61 node=g2\njob=62 node=g3\n"
    row = only_failure(plan, with_job(healthy(plan), job.id, JobRun(rc=0, stdout=out)))
    assert row.name == "co-allocation" and row.names == ("gpu", "g4", "g3")
    assert row.detail.split("; ") == [
        "partition gpu: no task ran on g4",
        "partition gpu: 2 job ids (61, 62), expected one",
        "partition gpu: squeue shows RUNNING on g[1-2]",
    ]


def test_a_failed_launch_names_the_nodes_that_ran_nothing(plan: Plan) -> None:
    out = "job=63 node=g1\nstate=RUNNING nodes=g[1-4]\njob=63 node=g2\njob=63 node=g4\n"
    err = (
        "srun: error: Task launch for StepId=63.0 failed on node g3: Invalid job credential\n"
        "srun: error: Application launch failed: Invalid job credential\n"
    )
    row = only_failure(
        plan, with_job(healthy(plan), "co-allocation/gpu", JobRun(rc=1, stdout=out, stderr=err))
    )
    assert row.names == ("gpu", "g3")
    assert row.detail == (
        "partition gpu: exit 1: srun: error: Task launch for StepId=63.0 failed on node g3: Invalid job credential"
    )


def test_a_launch_failure_before_any_output_names_the_node_srun_names(plan: Plan) -> None:
    err = "srun: error: Task launch for StepId=65.0 failed on node g3: Invalid job credential\n"
    row = only_failure(plan, with_job(healthy(plan), "co-allocation/gpu", JobRun(rc=1, stderr=err)))
    assert row.names == ("gpu", "g3")


def test_a_job_blocked_by_a_drained_node_names_it_and_why(plan: Plan) -> None:
    seen = healthy(plan)
    assert seen.controller is not None
    drained = node_line("g2", state="IDLE+DRAIN", reason="[health] /dev/nvidia3 is missing")
    seen = with_controller(
        seen, nodes=Command(0, seen.controller.nodes.stdout.replace(node_line("g2"), drained))
    )
    busy = "srun: error: Unable to allocate resources: Requested nodes are busy\n"
    seen = with_job(seen, "co-allocation/gpu", JobRun(rc=1, stderr=busy))
    seen = with_job(seen, "gpu-visibility/g2", JobRun(rc=1, stderr=busy))
    by_name = rows(plan, seen)
    assert {n: r.names for n, r in by_name.items() if r.status == Status.FAIL} == {
        "nodes": ("g2",),
        "co-allocation": ("gpu", "g2"),
        "gpu-visibility": ("g2",),
    }
    assert by_name["gpu-visibility"].detail == (
        "g2: exit 1: srun: error: Unable to allocate resources: Requested nodes are busy "
        "(g2 is IDLE+DRAIN ([health] /dev/nvidia3 is missing [root@2024-05-01T10:10:00]))"
    )


def test_a_job_stopped_at_its_bound(plan: Plan) -> None:
    run = JobRun(timed_out=True, seconds=90.0, stderr="srun: job 64 queued and waiting for resources\n")
    row = only_failure(plan, with_job(healthy(plan), "co-allocation/prod", run))
    assert row.detail == "partition prod: stopped after 90s (srun: job 64 queued and waiting for resources)"


def test_a_leaf_whose_job_lands_elsewhere_and_a_tree_that_differs(plan: Plan) -> None:
    seen = with_job(healthy(plan), "topology/leaf-a", JobRun(rc=0, stdout="job=70 node=g1\njob=70 node=g3\n"))
    text = TOPOLOGY_TEXT.replace("Nodes=g[3-4]\n", "Nodes=g[3-5]\n")
    row = only_failure(plan, with_controller(seen, topology=Command(0, text)))
    assert row.name == "topology" and row.names == ("leaf-b", "leaf-a")
    assert row.detail.split("; ") == [
        "leaf leaf-b: Slurm has g[3-5], inventory g[3-4]",
        "leaf leaf-a: the --switches=1 job ran on g[1,3], expected g[1-2]",
    ]


def test_check_mode_skips_the_job_checks(plan: Plan) -> None:
    by_name = rows(plan, with_controller(healthy(plan), jobs=None, cleanup=""))
    for name in ("co-allocation", "gpu-visibility", "nccl", "cleanup"):
        assert (by_name[name].status, by_name[name].detail) == (Status.SKIPPED, "jobs not run (check mode)")
    assert by_name["topology"].status == Status.PASS  # the tree is still compared
    assert not failed(list(by_name.values()))


def test_a_failed_job_runner_fails_the_job_checks(plan: Plan) -> None:
    seen = with_controller(healthy(plan), jobs=None, jobs_error="ModuleNotFoundError: No module named 'x'")
    by_name = rows(plan, seen)
    for name in ("co-allocation", "gpu-visibility", "topology", "nccl", "cleanup"):
        assert by_name[name].status == Status.FAIL and by_name[name].names == ("ctl1",), name


def test_jobs_left_in_the_queue_fail_cleanup(plan: Plan) -> None:
    row = only_failure(plan, with_controller(healthy(plan), cleanup="jobs still queued: 71 72"))
    assert row.detail == f"{JOB_NAME}: jobs still queued: 71 72"
    assert row.names == ("ctl1",)


def test_jobs_left_on_nodes_that_do_not_answer_name_those_nodes(plan: Plan) -> None:
    """A job whose node cannot end it (its slurmd does not understand slurmctld) stays queued there."""
    row = only_failure(plan, with_controller(healthy(plan), cleanup="jobs still queued: 71 72 on g2,g[3-4]"))
    assert row.detail == f"{JOB_NAME}: jobs still queued: 71 72 on g2,g[3-4]"
    assert row.names == ("g2", "g3", "g4")


# --- nccl ------------------------------------------------------------------------------------------


def nccl_run(plan: Plan, **kwargs: Any) -> Observations:
    job = next(j for j in plan.jobs if j.kind == NCCL)
    return with_job(healthy(plan), job.id, JobRun(rc=0, stdout=nccl_output(list(job.nodes), **kwargs)))


def test_nccl_all_reduce_reports_transport_and_bandwidth(plan: Plan) -> None:
    row = rows(plan, nccl_run(plan))["nccl"]
    assert row.status == Status.PASS
    assert row.detail == "16 ranks on g1,g2, transport IB (NET/IB, P2P/IPC), bus bandwidth 98.4521 GB/s"


def test_nccl_wrong_values_fail(plan: Plan) -> None:
    row = rows(plan, nccl_run(plan, wrong=3))["nccl"]
    assert (row.status, row.names) == (Status.FAIL, ("g1", "g2"))
    assert row.detail.endswith(": 3 wrong values")


def test_nccl_without_mpi_is_not_an_all_reduce_across_nodes(plan: Plan) -> None:
    row = rows(plan, nccl_run(plan, mpi=False))["nccl"]
    assert row.status == Status.FAIL
    assert "not one all-reduce across g1,g2" in row.detail and "MPI=1" in row.detail


def test_nccl_found_on_one_node_only_is_skipped_plainly(plan: Plan) -> None:
    job = next(j for j in plan.jobs if j.kind == NCCL)
    seen = with_job(healthy(plan), job.id, JobRun(skipped="all_reduce_perf (nccl-tests) not found on g2"))
    row = rows(plan, seen)["nccl"]
    assert (row.status, row.detail) == (
        Status.SKIPPED,
        "all_reduce_perf (nccl-tests) not found on g2: install nccl-tests to measure an all-reduce",
    )


# --- accounting ------------------------------------------------------------------------------------


def without_tenant(text: str, tenant: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith(f"{tenant}|"))


def test_a_tenant_removed_by_hand_fails_only_accounts_naming_it(plan: Plan) -> None:
    seen = with_controller(
        healthy(plan),
        assoc=Command(0, without_tenant(ASSOC_TEXT, "product")),
        users=Command(0, USERS_TEXT.replace("bob|product\n", "")),
    )
    row = only_failure(plan, seen)
    assert row.name == "accounts" and row.names == ("product", "bob")
    assert (
        row.detail
        == "tenant product: no account in slurmdbd; tenant product: user bob is not associated with it"
    )


@pytest.mark.parametrize(
    ("assoc", "qos", "users", "detail", "names"),
    [
        (
            ASSOC_TEXT.replace("research||root|16|", "research||root|50|"),
            QOS_TEXT,
            USERS_TEXT,
            "tenant research: Fairshare 50, inventory 16",
            ("research",),
        ),
        (
            ASSOC_TEXT.replace("|gres/gpu=24|", "|cpu=64,gres/gpu=32|"),
            QOS_TEXT,
            USERS_TEXT,
            "tenant research: GrpTRES 32, inventory 24",
            ("research",),
        ),
        (
            ASSOC_TEXT.replace(
                "product||root|8|gres/gpu=16|normal|normal", "product||root|8|gres/gpu=16|capped,normal|"
            ),
            QOS_TEXT,
            USERS_TEXT,
            "tenant product: QOS capped,normal, inventory normal; tenant product: DefaultQOS none, inventory normal",
            ("product",),
        ),
        (
            ASSOC_TEXT,
            QOS_TEXT.replace("gres/gpu=2|||2-00:00:00", "gres/gpu=4|||2880"),
            USERS_TEXT,
            "QOS capped: MaxTRESPerUser 4, inventory 2",
            ("capped",),
        ),
        (
            ASSOC_TEXT,
            QOS_TEXT + "scavenger|0|||||\n",
            USERS_TEXT,
            "QOS scavenger: in slurmdbd, not in the inventory",
            ("scavenger",),
        ),
        (
            ASSOC_TEXT + "old||root|10|||\nold|alice||1|||\n",
            QOS_TEXT,
            USERS_TEXT,
            "account old: in slurmdbd, not a tenant of the inventory; "
            "user alice: associated with old, which the inventory does not say",
            ("old", "alice"),
        ),
        (
            ASSOC_TEXT,
            QOS_TEXT,
            USERS_TEXT.replace("carol|research", "carol|product"),
            "user carol: default account product, inventory research",
            ("carol",),
        ),
    ],
)
def test_accounts_differences_are_named(
    plan: Plan, assoc: str, qos: str, users: str, detail: str, names: tuple[str, ...]
) -> None:
    seen = with_controller(
        healthy(plan), assoc=Command(0, assoc), qos=Command(0, qos), users=Command(0, users)
    )
    row = only_failure(plan, seen)
    assert (row.name, row.detail, row.names) == ("accounts", detail, names)


def slurm_associations() -> Any:
    spec = importlib.util.spec_from_file_location("slurm_associations", module_path())
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Its dataclasses look their module up in sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "assoc",
    [
        ASSOC_TEXT,
        without_tenant(ASSOC_TEXT, "product"),
        ASSOC_TEXT.replace("research||root|60|", "research||root|50|"),
        ASSOC_TEXT.replace("|gres/gpu=24|", "|gres/gpu=30|"),
        ASSOC_TEXT + "old||root|10|||\n",
        ASSOC_TEXT.replace("research|carol||1||capped,normal|normal\n", ""),
    ],
)
def test_accounts_check_agrees_with_the_slurm_accounts_role(plan: Plan, assoc: str) -> None:
    """The check passes exactly when the role (removing what the inventory lacks) has nothing to do."""
    role = slurm_associations()
    current = role.current_state(
        plan.cluster.spec.name, f"{plan.cluster.spec.name}\n", QOS_TEXT, assoc, USERS_TEXT
    )
    from gpucluster.slurm.accounts import desired_associations

    todo = role.plan(desired_associations(plan.cluster), current, remove_absent=True)
    result = check_accounts(plan, with_controller(healthy(plan), assoc=Command(0, assoc)))
    assert (result.status == Status.PASS) == (todo == []), (result.detail, todo)
    assert (QOS_FIELDS, ASSOC_FIELDS, USER_FIELDS) == (role.QOS_FIELDS, role.ASSOC_FIELDS, role.USER_FIELDS)


def test_no_accounting_skips_accounts(inventories: InventoryFactory) -> None:
    from tests.unit.verify_fixtures import CLUSTER, HOSTS

    without_dbd = HOSTS.replace("        dbd:\n          hosts:\n            db1:\n", "")
    assert without_dbd != HOSTS
    directory = inventories.make(
        without_dbd, CLUSTER.replace("        accounting: {host: db1}\n", ""), name="small"
    )
    from gpucluster.layers import load_cluster

    plan = make_plan(load_cluster(directory), job_name=JOB_NAME)
    assert "db1" not in plan.hosts
    row = rows(plan, healthy(plan))["accounts"]
    assert (row.status, row.detail) == (Status.SKIPPED, "the inventory has no accounting (slurm.accounting)")


# --- parsing -----------------------------------------------------------------------------------------


def test_oneliner_fields_keep_spaces_and_inner_equals() -> None:
    fields = parse.key_values(node_line("g1", state="IDLE+DRAIN", reason="maintenance window"))
    assert fields["OS"] == "Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)"
    assert fields["CfgTRES"] == "cpu=8,mem=62.50G,billing=8,gres/gpu=8"
    assert fields["AllocTRES"] == ""
    assert fields["Reason"] == "maintenance window [root@2024-05-01T10:10:00]"
    assert parse.gres(fields["Gres"]) == {"gpu:h100:8"}
    assert parse.names("(null)") == set()


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("2-00:00:00", 2880),
        ("2880", 2880),
        ("02:00:00", 120),
        ("1-12", 2160),
        ("30:00", 30),
        ("UNLIMITED", None),
        ("", None),
    ],
)
def test_slurm_times(text: str, minutes: int | None) -> None:
    assert parse.slurm_minutes(text) == minutes


def test_topology_lines() -> None:
    switches = parse.topology(TOPOLOGY_TEXT)
    assert switches["spine"].switches == ("leaf-a", "leaf-b") and switches["spine"].level == 1
    assert switches["leaf-b"].nodes == ("g3", "g4")


# --- collecting ----------------------------------------------------------------------------------------


def playbook_output(seen: Observations) -> dict[str, Any]:
    """The JSON document the verify playbook writes for these observations."""

    def command(value: Command | None) -> dict[str, Any] | None:
        return None if value is None else {"rc": value.rc, "stdout": value.stdout, "stderr": value.stderr}

    hosts: dict[str, Any] = {}
    for host, host_seen in seen.hosts.items():
        if host_seen.unreachable:
            hosts[host] = {"unreachable": host_seen.unreachable}
        else:
            hosts[host] = {
                "versions": host_seen.versions,
                "munge_key": host_seen.munge_key,
                "config": {k: v or "" for k, v in host_seen.config.items()},
                "passwd": host_seen.passwd,
                "all_reduce_perf": host_seen.all_reduce_perf,
            }
    controller = seen.controller
    assert controller is not None and controller.jobs is not None
    runner = {"jobs": {k: vars(v) for k, v in controller.jobs.items()}, "cleanup": controller.cleanup}
    return {
        "hosts": hosts,
        "controller": {
            "nodes": command(controller.nodes),
            "topology": command(controller.topology),
            "qos": command(controller.qos),
            "assoc": command(controller.assoc),
            "users": command(controller.users),
            "jobs": {"rc": 0, "stdout": json.dumps(runner), "stderr": ""},
        },
    }


def fake_playbook(document: dict[str, Any], seen_vars: list[dict[str, Any]]) -> Any:
    """A runner that, like the playbook, writes `document` where the plan's extra vars say."""

    def run(playbook: Path, extra: list[str]) -> None:
        assert playbook.name == "verify.yml" and extra[0] == "--extra-vars"
        plan_vars = json.loads(Path(extra[1].removeprefix("@")).read_text())
        seen_vars.append(plan_vars)
        Path(plan_vars["gpucluster_verify_output"]).write_text(json.dumps(document))

    return run


def test_collect_reads_back_what_the_playbook_wrote(plan: Plan) -> None:
    seen = healthy(plan)
    given: list[dict[str, Any]] = []
    assert collect(plan, fake_playbook(playbook_output(seen), given)) == seen
    plan_vars = given[0]["gpucluster_verify"]
    assert plan_vars["hosts"] == ["ctl1", "ctl2", "db1", "g1", "g2", "g3", "g4"]
    assert plan_vars["controller"] == "ctl1"
    assert plan_vars["jobs"]["job_name"] == JOB_NAME


def test_an_unreachable_primary_controller_is_one_error(inventories: InventoryFactory) -> None:
    cluster = make_cluster(inventories)
    seen = with_host(healthy(small_plan(inventories)), "ctl1", unreachable="Failed to connect\nto the host")
    document = playbook_output(seen)
    document["controller"] = None
    with pytest.raises(VerifyError) as caught:
        verify_cluster(cluster, fake_playbook(document, []))
    assert str(caught.value) == "cannot reach ctl1, the primary controller: Failed to connect"


def test_verify_cluster_judges_what_was_collected(inventories: InventoryFactory) -> None:
    cluster = make_cluster(inventories)
    seen = with_host(healthy(small_plan(inventories)), "g1", munge_key="9" * 64)
    results = verify_cluster(cluster, fake_playbook(playbook_output(seen), []))
    assert [(r.name, r.names) for r in results if r.status == Status.FAIL] == [("munge-key", ("g1",))]


def test_a_host_observed_as_missing_is_unreachable(plan: Plan) -> None:
    document = playbook_output(healthy(plan))
    del document["hosts"]["g2"]
    from gpucluster.verify.observed import read_observations

    seen = read_observations(document, plan.controller)
    assert seen.hosts.get("g2", HostSeen(unreachable="not observed")).unreachable == "not observed"
    assert rows(plan, seen)["munge-key"].names == ("g2",)


@pytest.fixture
def configless_plan(inventories: InventoryFactory) -> Plan:
    text = CLUSTER.replace(
        "        controller: [ctl1, ctl2]\n", "        controller: [ctl1, ctl2]\n        configless: true\n"
    )
    return make_plan(load_cluster(inventories.make(HOSTS, text, name="small")), job_name=JOB_NAME)


def configless_healthy(plan: Plan) -> Observations:
    """The nodes hold no served file in /etc/slurm; their slurmd fetched every one of them."""
    seen = healthy(plan)
    for host in plan.fetching_hosts:
        config = {
            name: (None if name in plan.served_config else digest)
            for name, digest in seen.hosts[host].config.items()
        }
        seen = with_host(seen, host, config=config, served=dict(plan.served_config))
    return seen


def test_configless_nodes_fetch_what_controllers_hold(configless_plan: Plan) -> None:
    plan = configless_plan
    assert plan.fetching_hosts == ("g1", "g2", "g3", "g4")
    assert list(plan.served_config) == [
        "slurm.conf",
        "cgroup.conf",
        "plugstack.conf",
        "gres.conf",
        "topology.conf",
    ]
    assert plan.served_config["slurm.conf"] == plan.expected_config["slurm.conf"]
    row = rows(plan, configless_healthy(plan))["slurm-config"]
    assert row.status == Status.PASS, row.detail
    assert "fetched from slurmctld on g[1-4]" in row.detail
    # The playbook gets where to look and what.
    extra = plan.playbook_vars(Path("/tmp/out.json"))["gpucluster_verify"]
    assert (extra["served_dir"], extra["fetching_hosts"]) == ("/run/slurm/conf", ["g1", "g2", "g3", "g4"])


def test_configless_node_with_an_old_copy_or_a_stale_fetch_fails(configless_plan: Plan) -> None:
    plan = configless_plan
    seen = configless_healthy(plan)
    config = {**seen.hosts["g2"].config, "slurm.conf": "a" * 64}
    row = only_failure(plan, with_host(seen, "g2", config=config))
    assert row.detail == "g2: slurm.conf present, but slurmctld serves them (configless)"
    served = {**seen.hosts["g3"].served, "gres.conf": "b" * 64, "topology.conf": None}
    row = only_failure(plan, with_host(seen, "g3", served=served))
    assert row.names == ("g3",)
    assert "g3: topology.conf not fetched from slurmctld" in row.detail
    assert "g3: gres.conf fetched, but differ from the inventory's" in row.detail
    # Controllers keep every file: the classic expectations hold there.
    config = {**seen.hosts["ctl1"].config, "slurm.conf": None}
    assert only_failure(plan, with_host(seen, "ctl1", config=config)).detail == "ctl1: slurm.conf missing"


def test_classic_plan_fetches_nothing(plan: Plan) -> None:
    assert plan.fetching_hosts == () and plan.served_config == {}
