"""gpucluster-mps (gpucluster/programs/gpucluster_mps.py), Slurm's MPS Prolog, Epilog and TaskProlog:
its decisions from the environment slurmd gives each hook (prolog_epilog.shtml: CUDA_VISIBLE_DEVICES
and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE for gres/mps jobs, SLURM_JOB_ACCOUNT, SLURM_SCRIPT_CONTEXT),
and the nvidia-cuda-mps-control commands exactly as they run on a GPU node. No GPU here: the daemon
itself runs only there (the lab's jobs run the hooks for real without it, tests/lab/test_sharing.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpucluster.programs import gpucluster_mps as mps

CONF = """\
[mps-nodes]
nodes = gpu04 gpu05
between_tenants = no

[shared-mps]
nodes = gpu06
between_tenants = yes
"""


def job_env(
    job: str, account: str, gpu: str = "0", node: str = "gpu04", context: str = "prolog_slurmd"
) -> dict[str, str]:
    return {
        "SLURM_SCRIPT_CONTEXT": context,
        "SLURM_JOB_ID": job,
        "SLURM_JOB_ACCOUNT": account,
        "SLURMD_NODENAME": node,
        "CUDA_VISIBLE_DEVICES": gpu,
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
        "PATH": "/nonexistent",  # no nvidia-cuda-mps-control: as in the lab
    }


@pytest.fixture
def node(tmp_path: Path) -> tuple[Path, Path]:
    conf = tmp_path / "gpucluster-mps.conf"
    conf.write_text(CONF)
    return conf, tmp_path / "state"


def hook(node: tuple[Path, Path], env: dict[str, str], *extra: str) -> int:
    conf, state = node
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = env["PATH"]
    try:
        return mps.main(["--config", str(conf), "--state-dir", str(state), *extra], env)
    finally:
        os.environ["PATH"] = old


def test_the_commands_as_they_run_on_a_gpu_node(tmp_path: Path) -> None:
    directory = tmp_path / "gpu3" / "tenant-research"
    assert mps.start_command(directory, "3").text() == (
        f"CUDA_VISIBLE_DEVICES=3 CUDA_MPS_PIPE_DIRECTORY={directory} "
        f"CUDA_MPS_LOG_DIRECTORY={directory}/log nvidia-cuda-mps-control -d"
    )
    assert mps.stop_command(directory).text() == (
        f"echo quit | CUDA_MPS_PIPE_DIRECTORY={directory} nvidia-cuda-mps-control"
    )


def test_a_daemon_per_gpu_and_tenant_stopped_after_its_last_job(node: tuple[Path, Path]) -> None:
    _, state = node
    # research's first job starts research's daemon on GPU 0.
    plan = mps.prolog_plan(job_env("11", "research"), False, state)
    assert plan.start == [("0", "tenant-research")]
    assert hook(node, job_env("11", "research")) == 0
    # A second research job on GPU 0 joins it; a product job there gets a daemon of its own.
    assert mps.prolog_plan(job_env("12", "research"), False, state).start == []
    hook(node, job_env("12", "research"))
    assert mps.prolog_plan(job_env("13", "product"), False, state).start == [("0", "tenant-product")]
    hook(node, job_env("13", "product"))
    # The TaskProlog points each job's tasks at its tenant's daemon.
    assert mps.task_exports(job_env("12", "research", context="prolog_task"), state) == [
        f"export CUDA_MPS_PIPE_DIRECTORY={state}/gpu0/tenant-research",
        f"export CUDA_MPS_LOG_DIRECTORY={state}/gpu0/tenant-research/log",
    ]
    # The Epilog of research's first job leaves its daemon to the second; the second's stops it.
    assert mps.epilog_plan(job_env("11", "research", context="epilog_slurmd"), state).stop == []
    hook(node, job_env("11", "research", context="epilog_slurmd"))
    assert mps.epilog_plan(job_env("12", "research", context="epilog_slurmd"), state).stop == [
        ("0", "tenant-research")
    ]
    hook(node, job_env("12", "research", context="epilog_slurmd"))
    assert mps.jobs_of(state) == {"13": [("0", "tenant-product")]}


def test_tenants_share_a_daemon_where_declared(node: tuple[Path, Path]) -> None:
    _, state = node
    hook(node, job_env("21", "research", node="gpu06"))
    assert mps.jobs_of(state) == {"21": [("0", "shared")]}
    assert mps.prolog_plan(job_env("22", "product", node="gpu06"), True, state).start == []


def test_jobs_without_mps_and_nodes_without_it_are_left_alone(node: tuple[Path, Path]) -> None:
    _, state = node
    whole_gpu = job_env("31", "research")
    del whole_gpu["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"]
    assert hook(node, whole_gpu) == 0
    assert hook(node, job_env("32", "research", node="gpu01")) == 0
    assert mps.jobs_of(state) == {}
    assert mps.task_exports(job_env("31", "research", context="prolog_task"), state) == []


def test_no_mps_control_never_fails_the_job(
    node: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the NVIDIA stack the hook says why (slurmd logs a Prolog's stderr) and exits 0: a
    failing Prolog would drain the node."""
    assert hook(node, job_env("41", "research")) == 0
    assert "nvidia-cuda-mps-control not found" in capsys.readouterr().err
    assert (
        "prolog_slurmd gpucluster-mps: job 41: nvidia-cuda-mps-control not found"
        in (node[1] / mps.LOG).read_text()
    )
    assert hook(node, job_env("41", "research", context="epilog_slurmd")) == 0
    assert mps.jobs_of(node[1]) == {}


def test_dry_run_prints_the_commands_and_changes_nothing(
    node: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, state = node
    assert hook(node, job_env("51", "research", gpu="2"), "--dry-run") == 0
    assert (
        capsys.readouterr().out.strip() == mps.start_command(state / "gpu2" / "tenant-research", "2").text()
    )
    assert not state.exists()
