"""The return-to-service gate (`cluster.gate`) and each node type's burn-in (`node_types.<t>.burn_in`).

No node comes back into service untested: a node the health check drained and that is healthy again,
a rebooted node, a node new to the cluster, a node upgraded in a batch, a node moved between
schedulers and a node an administrator declares repaired all wait behind the gate (in Slurm a
maintenance reservation of its own and a drain whose reason starts `[gate]`; in Kubernetes a taint
of gpucluster's) until a burn-in at the level of its way back passes. gpucluster-healthcheck runs
it on the node (gpucluster/programs/gpucluster_healthcheck.py says what each level runs).

No `from __future__ import annotations`: gpucluster.model.spec imports this at start-up (pydantic).
"""

from typing import Annotated, Literal, get_args

from pydantic import Field, field_validator

from gpucluster.model.base import Strict, Update, spec
from gpucluster.model.nodesoftware import DRIVER_VERSION_RE

Level = Literal["quick", "standard", "deep"]
LEVELS: tuple[str, ...] = get_args(Level)
# A way back may skip the gate (its level `none`).
TriggerLevel = Literal["none", "quick", "standard", "deep"]
# The ways back into service, in the order the gate's documentation lists them.
Trigger = Literal["health", "reboot", "new", "upgrade", "move", "repaired"]
TRIGGERS: tuple[str, ...] = get_args(Trigger)
# Levels of `dcgmi diag -r`; 0: no DCGM diagnostic at that burn-in level.
DcgmLevel = Literal[0, 1, 2, 3, 4]
# The taint a Kubernetes node in the gate carries (its value: the way back).
KUBERNETES_TAINT = "gpucluster.io/gate"


class GateLevels(Strict):
    """The burn-in level each way back into service takes (`none`: that way skips the gate)."""

    health: TriggerLevel = spec(
        "A node the health check drained (`[health]`) once every check passes again.",
        Update.RENDER_ONLY,
        default="quick",
    )
    reboot: TriggerLevel = spec(
        "A rebooted node: `scontrol reboot` (any nextstate; gpucluster's RebootProgram puts it in the "
        "gate before the reboot), or a host whose boot id changed since the last health check run.",
        Update.RENDER_ONLY,
        default="quick",
    )
    new: TriggerLevel = spec(
        "A node new to a running cluster (slurmctld did not know it when the playbook installed the "
        "health check there). A cluster's first deployment puts no node in the gate.",
        Update.RENDER_ONLY,
        default="deep",
    )
    upgrade: TriggerLevel = spec(
        "A node whose slurmd an upgrade batch replaced (playbooks/slurm-upgrade.yml): it stays out "
        "after the upgrade until the burn-in passes.",
        Update.RENDER_ONLY,
        default="quick",
    )
    move: TriggerLevel = spec(
        "A node moved from Kubernetes to Slurm or back (`gpucluster plan`'s claim step).",
        Update.RENDER_ONLY,
        default="standard",
    )
    repaired: TriggerLevel = spec(
        "A node an administrator declares repaired (`gpucluster node repaired INVENTORY HOST...`).",
        Update.RENDER_ONLY,
        default="deep",
    )

    def of(self, trigger: str) -> str:
        level: str = getattr(self, trigger)
        return level


class LevelSeconds(Strict):
    """How long a burn-in of each level may take before the node stays out ("burn-in timed out")."""

    quick: Annotated[int, Field(ge=30, le=86400)] = spec(
        "Seconds of a quick burn-in (inventory checks, no load).", Update.RENDER_ONLY, default=900
    )
    standard: Annotated[int, Field(ge=60, le=86400)] = spec(
        "Seconds of a standard burn-in (adds `dcgmi diag` at its level and NCCL inside the node).",
        Update.RENDER_ONLY,
        default=3600,
    )
    deep: Annotated[int, Field(ge=60, le=172800)] = spec(
        "Seconds of a deep burn-in (the longest DCGM diagnostic and NCCL with a neighbour).",
        Update.RENDER_ONLY,
        default=14400,
    )

    def of(self, level: str) -> int:
        seconds: int = getattr(self, level)
        return seconds


class GateSettings(Strict):
    """The return-to-service gate: every way back into service passes a burn-in first."""

    levels: GateLevels = spec(
        "The burn-in level of each way back (quick, standard, deep, or none).",
        Update.RENDER_ONLY,
        default_factory=GateLevels,
    )
    time_limit: LevelSeconds = spec(
        "Seconds a burn-in of each level may take; past it the node stays out with "
        "`[gate] ... out: burn-in timed out`.",
        Update.RENDER_ONLY,
        default_factory=LevelSeconds,
    )
    max_in_burn_in: Annotated[int, Field(ge=1, le=1000)] = spec(
        "Nodes of one partition in burn-in at once. Never all of a partition: a partition of N > 1 "
        "nodes has at most N-1 in burn-in whatever this says. The others wait in the gate.",
        Update.RENDER_ONLY,
        default=1,
    )
    attempts: Annotated[int, Field(ge=1, le=5)] = spec(
        "Burn-ins a node may fail in a row before it stays out (drained with the failing check in "
        "its reason, and the GateNodeOut alert firing) until an administrator repairs it.",
        Update.RENDER_ONLY,
        default=2,
    )
    kubernetes_image: Annotated[
        str, Field(pattern=r"^[a-z0-9][a-z0-9.:/_-]*(:[A-Za-z0-9._-]+)?(@sha256:[a-f0-9]{64})?$")
    ] = spec(
        "Image of the gate's DaemonSet on Kubernetes' GPU nodes (Python 3; the NVIDIA container "
        "runtime adds nvidia-smi). Pulled through kubernetes.registry_mirror where one is set.",
        Update.KUBERNETES,
        default="docker.io/library/python:3.13-slim-bookworm",
    )
    reboot_command: Annotated[str, Field(pattern=r"^/\S+( \S+)*$")] = spec(
        "What gpucluster's RebootProgram runs once the node is in the gate: the host's reboot "
        "(an absolute command with its arguments, no shell).",
        Update.RECONFIGURE,
        default="/usr/bin/systemctl reboot",
    )


class DcgmDiag(Strict):
    """`dcgmi diag -r` level run at each burn-in level, where DCGM runs (0: none)."""

    quick: DcgmLevel = spec("At the quick level (1 takes about a minute).", Update.RENDER_ONLY, default=0)
    standard: DcgmLevel = spec("At the standard level (2: a few minutes).", Update.RENDER_ONLY, default=2)
    deep: DcgmLevel = spec(
        "At the deep level (3: about half an hour; 4: hours).", Update.RENDER_ONLY, default=3
    )


class BurnIn(Strict):
    """What the burn-in of this node type compares against (beyond its health checks' GPU count,
    ECC, InfiniBand ports and mounts). A check left undeclared is skipped with that reason, never
    counted as passed."""

    gpu_model: Annotated[str, Field(min_length=1, max_length=64)] | None = spec(
        "Text every GPU's name (nvidia-smi's `name`) must contain, e.g. `H100` or `H100 80GB HBM3`.",
        Update.RENDER_ONLY,
        default=None,
    )
    driver_version: Annotated[str, Field(pattern=DRIVER_VERSION_RE)] | None = spec(
        "The NVIDIA driver version every GPU must report (e.g. 580.95.05). Default: the node "
        "software's `driver.version` where declared.",
        Update.RENDER_ONLY,
        default=None,
    )
    pcie_width: Annotated[int, Field(ge=1, le=32)] | None = spec(
        "PCIe link width every GPU must run at (`pcie.link.width.current`), e.g. 16. Undeclared: "
        "each GPU's current width must equal its maximum (a link that trained narrower fails).",
        Update.RENDER_ONLY,
        default=None,
    )
    nvlink: bool | None = spec(
        "Every NVLink of every GPU up (`nvidia-smi nvlink --status`: no link inactive), and the "
        "GPU fabric state Completed where the GPUs report one (NVSwitch systems, NVL72). Default: "
        "on where the node software's `nvlink` is nvswitch or nvl72.",
        Update.RENDER_ONLY,
        default=None,
    )
    imex: bool | None = spec(
        "The node's IMEX daemon answers READY (`nvidia-imex-ctl -q`; GB200/GB300 NVL72, one IMEX "
        "domain per NVLink block). Default: on where the node software's `nvlink` is nvl72.",
        Update.RENDER_ONLY,
        default=None,
    )
    infiniband_rate_gbps: Annotated[int, Field(ge=1, le=3200)] | None = spec(
        "Rate in Gb/s every port of `health.infiniband` must run at "
        "(/sys/class/infiniband/<dev>/ports/<port>/rate), e.g. 400 for NDR.",
        Update.RENDER_ONLY,
        default=None,
    )
    dcgm_diag: DcgmDiag = spec(
        "`dcgmi diag -r` level per burn-in level (where DCGM's host engine runs).",
        Update.RENDER_ONLY,
        default_factory=DcgmDiag,
    )
    nccl_busbw_gbps: Annotated[float, Field(gt=0)] | None = spec(
        "Floor of nccl-tests' all_reduce_perf average bus bandwidth (GB/s) across the node's GPUs "
        "(standard and deep levels, where nccl-tests is installed). Undeclared: the run must "
        "succeed, its bandwidth is only recorded. Not for one GPU, where it is 0 by definition.",
        Update.RENDER_ONLY,
        default=None,
    )
    nccl_pair_busbw_gbps: Annotated[float, Field(gt=0)] | None = spec(
        "Floor of all_reduce_perf's bus bandwidth (GB/s) across this node and an idle node in "
        "service under the same leaf switch (deep level, where nccl-tests built with MPI and srun "
        "are installed).",
        Update.RENDER_ONLY,
        default=None,
    )

    @field_validator("gpu_model")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None and (value.strip() != value or "\n" in value or "=" in value):
            raise ValueError("one line without leading or trailing blanks and without `=`")
        return value
