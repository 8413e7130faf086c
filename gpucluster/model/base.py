"""Building blocks of every inventory model: strict frozen models whose fields carry a
description and an update policy (what changing them on a live cluster requires)."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

NAME_RE = r"^[A-Za-z][A-Za-z0-9_.-]*$"
# A time as Slurm reads it (parse_time.c time_str2secs): minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S
# (fields of any number of digits), or UNLIMITED, INFINITE, -1, in any case.
SLURM_TIME_RE = re.compile(r"^(UNLIMITED|INFINITE|-1|\d+(:\d+){0,2}|\d+-\d+(:\d+){0,2})$", re.IGNORECASE)
# The largest numbers Slurm's parser keeps for its integer types (the two above are its NO_VAL and
# INFINITE): a number past them would be read as another value, or refused, by the daemons.
UINT16_MAX = 0xFFFF - 2
UINT32_MAX = 0xFFFFFFFF - 2
# Memory in MiB: 1 EiB, above any node and far below the 64 bits where Slurm keeps it.
MEMORY_MB_MAX = 2**40


class Owner(StrEnum):
    """The one scheduler that allocates a node's GPUs (never two, at any moment)."""

    SLURM = "slurm"  # bare-metal Slurm: slurmd on the host
    KUBERNETES = "kubernetes"  # kubelet; pods admitted by Kueue / scheduled by KAI
    SLURM_ON_KUBERNETES = "slurm-on-kubernetes"  # kubelet, dedicated to Slinky/Soperator slurmd pods


class Update(StrEnum):
    """What applying a change to a field needs on a live cluster."""

    RENDER_ONLY = "files re-rendered; no daemon action"
    SERVICE = (
        "the playbook restarts the one service concerned (e.g. slurmrestd); slurmctld and slurmd untouched"
    )
    RECONFIGURE = "scontrol reconfigure (running jobs unaffected)"
    RESTART = "restart slurmctld, then slurmd on every node (running jobs survive)"
    # Which of the two depends on the target release (Release.reconfigure_node_changes): the key
    # reference says so, `gpucluster plan` names the one of the release.
    NODE_LIST = (
        "nodes added or removed: scontrol reconfigure from Slurm 24.11 on; before, restart "
        "slurmctld, then slurmd on every node (running jobs survive)"
    )
    ACCOUNTS = "sacctmgr changes only; no daemon restart"
    UNIX_ACCOUNTS = "Unix users and groups changed by the users role on every host; no daemon action"
    STORAGE = (
        "exports and mounts changed by the nfs_server and shared_storage roles on the hosts that serve "
        "or mount it; a changed mount is remounted (drain its hosts first: jobs lose their files meanwhile)"
    )
    NODE_SOFTWARE = (
        "the gpu_driver role on the node type's hosts: drain them, install the new packages, reboot "
        "where the kernel module changed, resume (running jobs finish first)"
    )
    GPU_LAYOUT = (
        "the GPUs re-partitioned (MIG), a batch of nodes at a time: each drained, emptied (its jobs "
        "end), the layout applied, slurmd restarted, resumed (role gpu_mig); then slurm.conf's new "
        "Gres (restart slurmctld, then slurmd); Kubernetes' nodes by the GPU Operator's MIG manager"
    )
    REBUILD = "cluster rebuild: drain and reinstall the affected hosts"
    KUBERNETES = "objects re-applied to the Kubernetes API; no Slurm action"
    MOVE = (
        "nodes change scheduler: drained and emptied in the old one, handed over, quotas follow "
        "(the steps `gpucluster plan` lists)"
    )


def _listed(value: object) -> object:
    return [value] if isinstance(value, str) else value


# A list of names that the inventory may also write as one name (`controller: ctl01`).
NameList = Annotated[list[str], BeforeValidator(_listed)]


def _empty_list() -> list[Any]:
    return []


def _empty_dict() -> dict[Any, Any]:
    return {}


# pydantic reads the signature of every default_factory (does it take the validated data?). For a
# builtin like `list` that means parsing its text signature: a sixth of the time of building the
# models. The signature of a Python function making the same empty container is read at once.
_PLAIN_FACTORIES: dict[Any, Any] = {list: _empty_list, dict: _empty_dict}


def spec(description: str, update: Update, **kwargs: Any) -> Any:
    """A Field carrying its description and update policy into the JSON Schema."""
    if "default_factory" in kwargs:
        kwargs["default_factory"] = _PLAIN_FACTORIES.get(kwargs["default_factory"], kwargs["default_factory"])
    return Field(description=description, json_schema_extra={"x-update": update.value}, **kwargs)


class Strict(BaseModel):
    # defer_build: a model's validator is built when it is first used, not when its class is. A
    # command validates one inventory from the top: building the validator of every nested model
    # first (each holding its children's) cost a fifth of its start-up.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
