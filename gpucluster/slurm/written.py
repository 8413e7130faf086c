"""The slurm.conf keys gpucluster writes itself (templates/slurm/slurm.conf.j2), with the setting
that writes each and whether this inventory makes it write it. `cluster.slurm.extra` may not set
them: Slurm keeps one of two lines of a key, so the other setting would silently lose.

tests/unit/test_slurm_extra.py renders slurm.conf for every example and a maximal inventory and
checks that every key it finds is here, written exactly when `written_keys` says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpucluster.model import ClusterSpec


@dataclass(frozen=True)
class Written:
    setting: str  # what writes it, for the message
    when: Callable[[ClusterSpec], bool]


def _always(spec: ClusterSpec) -> bool:
    return True


def _has_gpus(spec: ClusterSpec) -> bool:
    return any(t.gpus for t in spec.node_types.values())


def _topology(spec: ClusterSpec) -> bool:
    return bool(spec.fabric.tree or spec.fabric.blocks) and not spec.slurm.release.topology_yaml


def _accounting(spec: ClusterSpec) -> bool:
    return spec.slurm.accounting is not None


def _health(spec: ClusterSpec) -> bool:
    return spec.slurm.health is not None


def _health_timeout(spec: ClusterSpec) -> bool:
    return spec.slurm.health is not None and spec.slurm.release.health_check_timeout


def _health_prolog(spec: ClusterSpec) -> bool:
    return spec.slurm.health is not None and spec.slurm.health.prolog


CORE = "gpucluster's slurm.conf (always written)"
ACCOUNTING = "cluster.slurm.accounting and cluster.slurm.priority"
HEALTH = "cluster.slurm.health (gpucluster-healthcheck)"
PER_GPU = "each GPU partition (cluster.partitions[].cpus_per_gpu / memory_per_gpu_mb)"

ALWAYS = (
    "ClusterName", "SlurmctldHost", "AuthType", "CredType", "SlurmUser", "SlurmctldPort", "SlurmdPort",
    "StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile", "SlurmctldLogFile",
    "SlurmdLogFile", "MpiDefault", "MailProg", "ReturnToService", "SchedulerType", "SelectType",
    "SelectTypeParameters", "ProctrackType", "TaskPlugin", "JobAcctGatherType",
)  # fmt: skip
ACCOUNTING_KEYS = (
    "AccountingStorageType", "AccountingStorageHost", "AccountingStoragePort", "AccountingStorageTRES",
    "AccountingStorageEnforce", "PriorityType", "PriorityDecayHalfLife", "PriorityCalcPeriod",
    "PriorityWeightFairshare", "PriorityWeightQOS", "PriorityWeightAge", "PriorityWeightJobSize",
    "PriorityWeightPartition",
)  # fmt: skip
REST_API = "cluster.slurm.rest_api (JWT for slurmrestd)"


def _rest_api(spec: ClusterSpec) -> bool:
    return spec.slurm.rest_api is not None


WRITTEN: dict[str, Written] = {
    **{key: Written(CORE, _always) for key in ALWAYS},
    "PrologFlags": Written(
        "cluster.slurm.node_ssh (Contain, for pam_slurm_adopt)", lambda s: s.slurm.node_ssh is not None
    ),
    "SlurmdParameters": Written("cluster.slurm.config_overrides", lambda s: s.slurm.config_overrides),
    "GresTypes": Written("the node types' gpus", _has_gpus),
    "TopologyPlugin": Written("cluster.fabric (topology.conf)", _topology),
    **{key: Written(ACCOUNTING, _accounting) for key in ACCOUNTING_KEYS},
    "HealthCheckProgram": Written(HEALTH, _health),
    "HealthCheckInterval": Written(HEALTH, _health),
    "HealthCheckNodeState": Written(HEALTH, _health),
    "HealthCheckTimeout": Written(HEALTH, _health_timeout),
    "Prolog": Written(HEALTH, _health_prolog),
    "AuthAltTypes": Written(REST_API, _rest_api),
    "AuthAltParameters": Written(REST_API, _rest_api),
    # Written on each GPU partition's line: a global one would say something else than they do.
    "DefCpuPerGPU": Written(PER_GPU, _has_gpus),
    "DefMemPerGPU": Written(PER_GPU, _has_gpus),
}

# Keys gpucluster writes and `extra` may add to (merged into one line).
MERGED = ("SlurmctldParameters",)


def written_keys(spec: ClusterSpec) -> dict[str, str]:
    """Key -> the setting writing it, for the keys slurm.conf of this spec gets from gpucluster."""
    return {key: w.setting for key, w in WRITTEN.items() if w.when(spec)}
