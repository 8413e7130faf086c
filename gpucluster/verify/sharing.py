"""The `gpu-sharing` row of `gpucluster verify`: on one node of each kind of shared GPUs, a job
asking for one share sees what Slurm gives such a job (gres.shtml, prolog_epilog.shtml):

- shard: one GPU (CUDA_VISIBLE_DEVICES) and SLURM_SHARDS_ON_NODE=1;
- mps: one GPU, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE of its share, and the MPS pipe directory
  gpucluster-mps gives the job's tenant (CUDA_MPS_PIPE_DIRECTORY, from the TaskProlog);
- MIG: one device (CUDA_VISIBLE_DEVICES) of the profile it asked for, which `nvidia-smi -L` lists
  as that profile's MIG device where the driver is installed.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from gpucluster.model.cluster import Cluster
from gpucluster.model.sharing import mig_counts
from gpucluster.verify.parse import task_lines

SHARING = "gpu-sharing"
MPS_DIR = "/run/gpucluster-mps/"


def share_script(profile: str | None) -> str:
    """What a sharing job prints: `key=value` lines (parse.task_lines reads them)."""
    mig = (
        "if command -v nvidia-smi >/dev/null 2>&1; then "
        f'echo "mig=$(nvidia-smi -L 2>/dev/null | grep -c {shlex.quote("MIG " + profile)})"; fi'
        if profile
        else ""
    )
    return (
        'echo "job=$SLURM_JOB_ID node=$SLURMD_NODENAME"; '
        'echo "cuda=${CUDA_VISIBLE_DEVICES-}"; '
        'echo "shards=${SLURM_SHARDS_ON_NODE-}"; '
        'echo "mps=${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE-}"; '
        'echo "pipe=${CUDA_MPS_PIPE_DIRECTORY-}"; ' + mig
    )


@dataclass(frozen=True)
class Share:
    """One share to ask for on a node, and what the job must see."""

    node: str
    kind: str  # shard, mps, mig
    gres: str
    percent: int | None = None  # mps
    profile: str | None = None  # mig
    gpucluster_daemon: bool = True  # mps: gpucluster-mps's TaskProlog gives the tenant's pipe

    @property
    def job_id(self) -> str:
        return f"{SHARING}/{self.node}/{self.kind}"


def shares(view: Cluster) -> list[Share]:
    """One node of each node type (with its hosts' overrides) per way it shares its GPUs."""
    found: list[Share] = []
    seen: set[tuple[str, str]] = set()
    for host in view.hosts:
        gpus = view.node_type(host).gpus
        if gpus is None or gpus.sharing is None:
            continue
        sharing = gpus.sharing
        kind_key = f"{view.node_type_of[host]}:{view.entry_of.get(host)}"
        if sharing.shard is not None and (kind_key, "shard") not in seen:
            seen.add((kind_key, "shard"))
            found.append(Share(host, "shard", "shard:1"))
        if sharing.mps is not None and (kind_key, "mps") not in seen:
            seen.add((kind_key, "mps"))
            count = max(1, sharing.mps // 4)
            found.append(
                Share(
                    host, "mps", f"mps:{count}", percent=count * 100 // sharing.mps,
                    gpucluster_daemon=sharing.mps_daemon == "gpucluster",
                )
            )  # fmt: skip
        if sharing.mig is not None and (kind_key, "mig") not in seen:
            seen.add((kind_key, "mig"))
            profile = next(iter(mig_counts(sharing.mig, gpus.count)))
            found.append(Share(host, "mig", f"gpu:{profile}:1", profile=profile))
    return found


def judge(share: Share, stdout: str) -> list[str]:
    """What the job saw that it should not have (empty: it saw what Slurm gives such a job)."""
    tasks = task_lines(stdout)
    fields: dict[str, str] = {}
    for line in tasks.lines:
        fields.update(line)
    if share.node not in tasks.nodes:
        return ["the job printed nothing from the node"]
    problems: list[str] = []
    devices = [d for d in fields.get("cuda", "").split(",") if d]
    if len(devices) != 1:
        problems.append(f"CUDA_VISIBLE_DEVICES has {len(devices)} devices, not 1")
    checks: dict[str, Callable[[], str | None]] = {
        "shard": lambda: (
            None if fields.get("shards") == "1" else f"SLURM_SHARDS_ON_NODE={fields.get('shards') or 'unset'}"
        ),
        "mps": lambda: _mps(share, fields),
        "mig": lambda: (
            None
            if fields.get("mig", "1") == "1"
            else f"nvidia-smi -L lists {fields.get('mig')} MIG {share.profile} devices, not 1"
        ),
    }
    problem = checks[share.kind]()
    if problem:
        problems.append(problem)
    return problems


def _mps(share: Share, fields: dict[str, str]) -> str | None:
    if fields.get("mps") != str(share.percent):
        return f"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={fields.get('mps') or 'unset'}, not {share.percent}"
    if share.gpucluster_daemon and not fields.get("pipe", "").startswith(MPS_DIR):
        return f"CUDA_MPS_PIPE_DIRECTORY={fields.get('pipe') or 'unset'} (gpucluster-mps's TaskProlog did not run)"
    return None


def what_it_sees(share: Share) -> str:
    return {
        "shard": "SLURM_SHARDS_ON_NODE=1",
        "mps": f"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={share.percent}",
        "mig": f"one {share.profile} device",
    }[share.kind]
