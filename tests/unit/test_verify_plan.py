"""What `gpucluster verify` plans from the model (hosts, files, jobs), the job runner it ships to
the controller, and the command line's exit codes."""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from gpucluster.verify import remote_jobs
from gpucluster.verify.probes import (
    ALLOCATION_WAIT,
    COALLOCATION,
    GPUS,
    NCCL,
    TOPOLOGY,
    gpu_script,
    make_plan,
    optional_files,
)
from tests.conftest import REPO, InventoryFactory, run_cli
from tests.unit.verify_fixtures import CLUSTER, HOSTS, JOB_NAME, small_plan


def test_hosts_come_from_the_model(inventories: InventoryFactory) -> None:
    plan = small_plan(inventories)
    assert plan.controller == "ctl1"
    assert plan.hosts == ("ctl1", "ctl2", "db1", "g1", "g2", "g3", "g4")
    # slurmdbd's host holds no slurm.conf and runs no job: no config or uid drift there.
    assert plan.config_hosts == plan.user_hosts == ("ctl1", "ctl2", "g1", "g2", "g3", "g4")
    assert plan.gpu_nodes == ("g1", "g2", "g3", "g4")
    assert plan.users == ("alice", "bob", "carol")


def test_expected_config_is_what_render_makes(inventories: InventoryFactory) -> None:
    plan = small_plan(inventories)
    rendered = render_files(plan.cluster, only=["slurm"])
    for name, digest in plan.expected_config.items():
        text = rendered.get(f"slurm/{name}")
        assert digest == (hashlib.sha256(text.encode()).hexdigest() if text is not None else None), name
    assert plan.expected_config["topology.yaml"] is None  # 22.05 gets topology.conf
    assert "accounts.yaml" not in plan.expected_config
    # The files slurm_common removes when not rendered are expected absent.
    assert set(optional_files()) <= set(plan.expected_config)
    assert {"gres.conf", "topology.conf", "topology.yaml"} <= set(optional_files())


def test_the_optional_files_are_the_ones_slurm_common_removes() -> None:
    """verify expects a file absent exactly when slurm_common would have removed it."""
    defaults = yaml.safe_load((REPO / "roles" / "slurm_common" / "defaults" / "main.yml").read_text())
    assert defaults["slurm_common_optional_files"] == optional_files()


def test_jobs_are_bounded_and_named_for_cleanup(inventories: InventoryFactory) -> None:
    plan = small_plan(inventories)
    assert {job.id for job in plan.jobs} == {
        "co-allocation/gpu",
        "co-allocation/prod",
        "topology/leaf-a",
        "topology/leaf-b",
        "gpu-visibility/g1",
        "gpu-visibility/g2",
        "gpu-visibility/g3",
        "gpu-visibility/g4",
        NCCL,
    }
    for job in plan.jobs:
        srun = job.argv[job.argv.index("srun") :]
        assert f"--job-name={JOB_NAME}" in srun
        assert f"--immediate={ALLOCATION_WAIT}" in srun
        assert any(a.startswith("--time=") for a in srun)
        assert job.timeout > ALLOCATION_WAIT


def test_partitions_one_at_a_time_then_leaves_then_gpus(inventories: InventoryFactory) -> None:
    stages = [[job.id for job in stage] for stage in small_plan(inventories).stages]
    assert stages == [
        ["co-allocation/gpu"],
        ["co-allocation/prod"],
        ["topology/leaf-a", "topology/leaf-b"],
        ["gpu-visibility/g1", "gpu-visibility/g2", "gpu-visibility/g3", "gpu-visibility/g4"],
        [NCCL],
    ]


def test_coallocation_job_covers_the_whole_partition(inventories: InventoryFactory) -> None:
    job = next(j for j in small_plan(inventories).jobs if j.id == "co-allocation/gpu")
    assert job.kind == COALLOCATION and job.nodes == ("g1", "g2", "g3", "g4")
    assert job.argv[:1] == ("srun",)  # as root: the partition admits every account
    assert {"--partition=gpu", "--nodes=4", "--nodelist=g[1-4]", "--ntasks-per-node=1"} <= set(job.argv)


def test_a_partition_of_some_tenants_runs_as_one_of_their_users(inventories: InventoryFactory) -> None:
    job = next(j for j in small_plan(inventories).jobs if j.id == "co-allocation/prod")
    assert job.argv[:5] == ("runuser", "-u", "bob", "--", "srun")
    assert "--account=product" in job.argv and "--nodelist=g[3-4]" in job.argv


def test_leaf_jobs_ask_for_one_switch_in_a_partition_holding_the_leaf(inventories: InventoryFactory) -> None:
    jobs = {j.subject: j for j in small_plan(inventories).jobs if j.kind == TOPOLOGY}
    assert set(jobs) == {"leaf-a", "leaf-b"}
    for leaf, nodes in (("leaf-a", "g[1-2]"), ("leaf-b", "g[3-4]")):
        assert {"--switches=1", "--nodes=2", f"--nodelist={nodes}", "--partition=gpu"} <= set(jobs[leaf].argv)


def test_gpu_jobs_hold_every_gpu_of_their_node(inventories: InventoryFactory) -> None:
    job = next(j for j in small_plan(inventories).jobs if j.id == "gpu-visibility/g3")
    assert job.kind == GPUS
    assert {"--nodelist=g3", "--nodes=1", "--ntasks=1", "--gres=gpu:8"} <= set(job.argv)
    assert job.argv[-1] == gpu_script([f"/dev/nvidia{i}" for i in range(8)])


def test_nccl_pairs_two_nodes_and_needs_the_binary_there(inventories: InventoryFactory) -> None:
    job = next(j for j in small_plan(inventories).jobs if j.kind == NCCL)
    assert job.nodes == job.needs == ("g1", "g2")
    assert {"--nodes=2", "--nodelist=g1,g2", "--ntasks-per-node=8", "--gres=gpu:8", "--mpi=pmix"} <= set(
        job.argv
    )
    assert "{all_reduce_perf}" in job.argv


def test_a_partition_whose_tenants_have_no_users_is_skipped_with_the_reason(
    inventories: InventoryFactory,
) -> None:
    cluster_text = CLUSTER.replace("tenants: [product]", "tenants: [ops]").replace(
        "      tenants:\n", "      tenants:\n        - {name: ops, fairshare: 1}\n"
    )
    plan = make_plan(load_cluster(inventories.make(HOSTS, cluster_text, name="small")), job_name=JOB_NAME)
    assert "co-allocation/prod" not in {j.id for j in plan.jobs}
    assert [(s.kind, s.subject, s.reason) for s in plan.skipped] == [
        (COALLOCATION, "prod", "partition prod admits only ops, which have no users")
    ]


def test_a_cpu_only_cluster_plans_no_gpu_or_nccl_job(inventories: InventoryFactory) -> None:
    cluster_text = CLUSTER.replace(
        '          gpus: {model: h100, count: 8, devices: "/dev/nvidia[0-7]"}\n', ""
    )
    cluster_text = cluster_text.replace("gpu_quota: 16, gpu_limit: 24, ", "").replace(
        "gpu_quota: 8, gpu_limit: 16, ", ""
    )
    plan = make_plan(load_cluster(inventories.make(HOSTS, cluster_text, name="small")), job_name=JOB_NAME)
    assert plan.gpu_nodes == ()
    assert {j.kind for j in plan.jobs} == {COALLOCATION, TOPOLOGY}
    assert [(s.kind, s.reason) for s in plan.skipped] == [(NCCL, "no GPU nodes in the inventory")]


def test_playbook_vars_are_plain_json(inventories: InventoryFactory, tmp_path: Path) -> None:
    doc = small_plan(inventories).playbook_vars(tmp_path / "out.json")
    again = json.loads(json.dumps(doc))
    assert again["gpucluster_verify_output"] == str(tmp_path / "out.json")
    plan = again["gpucluster_verify"]
    assert plan["munge_key"] == "/etc/munge/munge.key" and plan["accounting"] is True
    assert Path(plan["jobs_script"]).is_file()
    assert [len(stage) for stage in plan["jobs"]["stages"]] == [1, 1, 2, 4, 1]


# --- the GPU job's script, run by sh as srun would ------------------------------------------------


def test_gpu_script_tells_usable_from_missing_devices(tmp_path: Path) -> None:
    present = tmp_path / "nvidia0"
    subprocess.run(["ln", "-s", "/dev/null", str(present)], check=True)  # a character device, like the lab's
    script = gpu_script([str(present), str(tmp_path / "nvidia1")])
    env = {
        "PATH": "/usr/bin:/bin",
        "SLURM_JOB_ID": "5",
        "SLURMD_NODENAME": "g1",
        "CUDA_VISIBLE_DEVICES": "0,1",
    }
    out = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[:4] == [
        "job=5 node=g1",
        "cuda=0,1",
        f"usable={present}",
        f"unusable={tmp_path / 'nvidia1'}",
    ]


# --- the job runner ---------------------------------------------------------------------------------


def test_runner_puts_in_the_path_found_on_every_node() -> None:
    job = {
        "id": "nccl",
        "argv": ["srun", "{all_reduce_perf}", "-g", "1"],
        "timeout": 5,
        "needs": ["g1", "g2"],
    }
    path = "/opt/nccl-tests/build/all_reduce_perf"
    assert remote_jobs.with_tool(job, {"g1": path, "g2": path}) == (["srun", path, "-g", "1"], None)
    assert remote_jobs.with_tool(job, {"g1": path, "g2": ""}) == (
        None,
        "all_reduce_perf (nccl-tests) not found on g2",
    )
    argv, why = remote_jobs.with_tool(job, {"g1": path, "g2": "/usr/local/bin/all_reduce_perf"})
    assert argv is None and why is not None and why.startswith("all_reduce_perf is at different paths")


def test_runner_stops_a_job_past_its_bound() -> None:
    result = remote_jobs.run_job(
        {"id": "x", "argv": ["sh", "-c", "echo started; sleep 30"], "timeout": 1}, {}
    )
    assert result["timed_out"] is True and result["rc"] is None
    assert result["stdout"] == "started\n"
    assert result["seconds"] < 20


def record_cleanup(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replace the runner's scancel/squeue cleanup by a record of the job names it was given."""
    cancelled: list[str] = []

    def cleanup(name: str) -> str:
        cancelled.append(name)
        return "no job left"

    monkeypatch.setattr(remote_jobs, "cleanup", cleanup)
    return cancelled


def test_runner_runs_stages_and_always_cleans_up(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    cancelled = record_cleanup(monkeypatch)
    payload = {
        "job_name": JOB_NAME,
        "stages": [
            [{"id": "a", "argv": ["sh", "-c", "echo a"], "timeout": 5}],
            [
                {"id": "b", "argv": ["sh", "-c", "echo b >&2; exit 3"], "timeout": 5},
                {"id": "c", "argv": ["true"], "timeout": 5, "needs": ["g1"]},
            ],
        ],
        "found": {"g1": ""},
    }
    encoded = base64.b64encode(json.dumps(payload).encode()).decode()
    assert remote_jobs.main(["remote_jobs.py", encoded]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert cancelled == [JOB_NAME] and doc["cleanup"] == "no job left"
    assert (doc["jobs"]["a"]["rc"], doc["jobs"]["a"]["stdout"]) == (0, "a\n")
    assert (doc["jobs"]["b"]["rc"], doc["jobs"]["b"]["stderr"]) == (3, "b\n")
    assert doc["jobs"]["c"] == {"skipped": "all_reduce_perf (nccl-tests) not found on g1"}


def test_runner_cleans_up_when_a_job_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    cancelled = record_cleanup(monkeypatch)
    payload = {"job_name": JOB_NAME, "stages": [[{"id": "a", "argv": ["/nonexistent/srun"], "timeout": 5}]]}
    encoded = base64.b64encode(json.dumps(payload).encode()).decode()
    with pytest.raises(FileNotFoundError):
        remote_jobs.main(["remote_jobs.py", encoded])
    assert cancelled == [JOB_NAME]


def test_runner_needs_only_the_standard_library() -> None:
    """It runs on the controller's python3, where gpucluster is not installed."""
    code = f"import runpy, sys; sys.path = [p for p in sys.path if 'site-packages' not in p and p != {str(REPO)!r} and p != '']; runpy.run_path({str(Path(remote_jobs.__file__))!r})"
    proc = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=False, cwd="/"
    )
    assert "ModuleNotFoundError" not in proc.stderr and "ImportError" not in proc.stderr, proc.stderr


# --- command line -------------------------------------------------------------------------------------


def test_a_bad_inventory_exits_2(inventories: InventoryFactory) -> None:
    directory = inventories.make(HOSTS, CLUSTER.replace("controller: [ctl1, ctl2]", "controller: [nohost]"))
    proc = run_cli("verify", str(directory))
    assert proc.returncode == 2
    assert "controller `nohost` is not a host of" in proc.stderr


def test_an_unreachable_cluster_is_one_line_and_exit_1(inventories: InventoryFactory) -> None:
    # Every host at a closed local port: ssh is refused at once.
    unreachable = "{ansible_host: 127.0.0.1, ansible_port: 1, ansible_ssh_common_args: '-o ConnectTimeout=3'}"
    hosts = textwrap.dedent(HOSTS).replace("ctl1:\n", f"ctl1: {unreachable}\n")
    directory = inventories.make(hosts, CLUSTER)
    proc = run_cli("verify", str(directory), "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("verify: cannot reach ctl1, the primary controller: "), proc.stderr
    # With --json, the same line as the error document on stdout (docs/cli-json.md).
    assert json.loads(proc.stdout) == {"ok": False, "error": lines[-1]}
    assert "Traceback" not in proc.stderr
    # Progress first: the elapsed time, then what it does.
    assert shlex.split(lines[0])[1:3] == ["verify:", "observing"]
