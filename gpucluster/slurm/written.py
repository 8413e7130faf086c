"""The slurm.conf keys gpucluster writes itself (gpucluster/slurm/render.py), and where the model
holds each. `cluster.slurm.extra` may not set them: a key the model has a place for belongs there
(MODELLED), and a key another setting writes (WRITTEN, when that setting is on) would be a second
line, of which Slurm keeps one, so that the other setting would silently lose. The lines a layer
adds (monitoring's MetricsType, Prolog, Epilog) are the layer's: gpucluster.layers checks those.

tests/unit/test_input_errors.py renders slurm.conf for every example and a maximal inventory and
checks that every key it finds is here, written exactly when `written_keys` says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpucluster.model.spec import ClusterSpec
from gpucluster.slurm.settings import PRIORITY_KEYS

SLURM = "cluster.slurm"

# slurm.conf key -> the model setting that holds it (the import puts a site's value there).
MODELLED: dict[str, str] = {
    "ClusterName": "cluster.name",
    "SlurmctldHost": f"{SLURM}.controller",
    "SlurmctldPort": f"{SLURM}.daemons.slurmctld_port",
    "SlurmdPort": f"{SLURM}.daemons.slurmd_port",
    "StateSaveLocation": f"{SLURM}.state_save_location",
    "SlurmdSpoolDir": f"{SLURM}.daemons.spool_dir",
    "SlurmctldPidFile": f"{SLURM}.daemons.slurmctld_pid_file",
    "SlurmdPidFile": f"{SLURM}.daemons.slurmd_pid_file",
    "SlurmctldLogFile": f"{SLURM}.daemons.slurmctld_log_file",
    "SlurmdLogFile": f"{SLURM}.daemons.slurmd_log_file",
    "SlurmctldDebug": f"{SLURM}.daemons.slurmctld_debug",
    "SlurmdDebug": f"{SLURM}.daemons.slurmd_debug",
    "DebugFlags": f"{SLURM}.daemons.debug_flags",
    "MpiDefault": f"{SLURM}.mpi_default",
    "MailProg": f"{SLURM}.mail_prog",
    "ReturnToService": f"{SLURM}.return_to_service",
    "SchedulerType": f"{SLURM}.scheduler_type",
    "SchedulerParameters": f"{SLURM}.scheduler_parameters",
    "SelectType": f"{SLURM}.select_type",
    "SelectTypeParameters": f"{SLURM}.select_type_parameters",
    "PreemptType": f"{SLURM}.preemption.type",
    "PreemptMode": f"{SLURM}.preemption.mode",
    "PreemptExemptTime": f"{SLURM}.preemption.exempt_time",
    "PreemptParameters": f"{SLURM}.preemption.parameters",
    "ProctrackType": f"{SLURM}.proctrack",
    "TaskPlugin": f"{SLURM}.task_plugins",
    "JobAcctGatherType": f"{SLURM}.job_acct_gather_type",
    "PropagateResourceLimits": f"{SLURM}.propagate_resource_limits",
    "PropagateResourceLimitsExcept": f"{SLURM}.propagate_resource_limits_except",
    "PrologFlags": f"{SLURM}.prolog_flags",
    "Prolog": f"{SLURM}.prolog",
    "Epilog": f"{SLURM}.epilog",
    "SlurmdParameters": f"{SLURM}.slurmd_parameters",
    "SlurmctldParameters": f"{SLURM}.slurmctld_parameters",
    "GresTypes": "the node types' gpus",
    "TopologyPlugin": "cluster.fabric",
    "AccountingStorageType": f"{SLURM}.accounting",
    "AccountingStorageHost": f"{SLURM}.accounting.host",
    "AccountingStoragePort": f"{SLURM}.accounting.port",
    "AccountingStorageTRES": f"{SLURM}.accounting.tres",
    "AccountingStorageEnforce": f"{SLURM}.accounting.enforce",
    "PriorityType": f"{SLURM}.priority.type",
    **{key: f"{SLURM}.priority.{field}" for field, key in PRIORITY_KEYS.items()},
    "SlurmctldTimeout": f"{SLURM}.timeouts.slurmctld",
    "SlurmdTimeout": f"{SLURM}.timeouts.slurmd",
    "MessageTimeout": f"{SLURM}.timeouts.message",
    "TCPTimeout": f"{SLURM}.timeouts.tcp",
    "BatchStartTimeout": f"{SLURM}.timeouts.batch_start",
    "PrologEpilogTimeout": f"{SLURM}.timeouts.prolog_epilog",
    "UnkillableStepTimeout": f"{SLURM}.timeouts.unkillable_step",
    "KillWait": f"{SLURM}.timeouts.kill_wait",
    "MinJobAge": f"{SLURM}.timeouts.min_job_age",
    "InactiveLimit": f"{SLURM}.timeouts.inactive_limit",
    "WaitTime": f"{SLURM}.timeouts.wait_time",
    "OverTimeLimit": f"{SLURM}.timeouts.over_time_limit",
    "EpilogMsgTime": f"{SLURM}.timeouts.epilog_msg_time",
    "GetEnvTimeout": f"{SLURM}.timeouts.get_env",
    "ResvOverRun": f"{SLURM}.timeouts.resv_over_run",
    "SuspendProgram": f"{SLURM}.power_save.suspend_program",
    "ResumeProgram": f"{SLURM}.power_save.resume_program",
    "ResumeFailProgram": f"{SLURM}.power_save.resume_fail_program",
    "SuspendTime": f"{SLURM}.power_save.suspend_time",
    "SuspendTimeout": f"{SLURM}.power_save.suspend_timeout",
    "ResumeTimeout": f"{SLURM}.power_save.resume_timeout",
    "SuspendRate": f"{SLURM}.power_save.suspend_rate",
    "ResumeRate": f"{SLURM}.power_save.resume_rate",
    "SuspendExcNodes": f"{SLURM}.power_save.exclude_nodes",
    "SuspendExcParts": f"{SLURM}.power_save.exclude_partitions",
    "SuspendExcStates": f"{SLURM}.power_save.exclude_states",
}

# Written with one value whatever the inventory: what the roles set up (munge on every host, the
# packages' slurm user). A site's other value cannot be carried.
FIXED: dict[str, str] = {"AuthType": "auth/munge", "CredType": "cred/munge", "SlurmUser": "slurm"}


@dataclass(frozen=True)
class Written:
    setting: str  # what writes it, for the message
    when: Callable[[ClusterSpec], bool]


def _always(spec: ClusterSpec) -> bool:
    return True


def _has_gpus(spec: ClusterSpec) -> bool:
    return any(t.gpus for t in spec.node_types.values())


def _health(spec: ClusterSpec) -> bool:
    return spec.slurm.health is not None


def _health_timeout(spec: ClusterSpec) -> bool:
    return spec.slurm.health is not None and spec.slurm.release.health_check_timeout


def _gate(spec: ClusterSpec) -> bool:
    return spec.slurm.health is not None and spec.gate is not None


def _rest_api(spec: ClusterSpec) -> bool:
    return spec.slurm.rest_api is not None


CORE = "gpucluster's slurm.conf (always written)"
HEALTH = "cluster.slurm.health (gpucluster-healthcheck)"
GATE = "cluster.gate (gpucluster-reboot puts the node in the gate, then reboots it)"
PER_GPU = "each GPU partition (cluster.partitions[].cpus_per_gpu / memory_per_gpu_mb)"
REST_API = "cluster.slurm.rest_api (JWT for slurmrestd)"

# Keys other settings write (no place of their own in the model), and when.
WRITTEN: dict[str, Written] = {
    **{key: Written(CORE, _always) for key in FIXED},
    "HealthCheckProgram": Written(HEALTH, _health),
    "HealthCheckInterval": Written(HEALTH, _health),
    "HealthCheckNodeState": Written(HEALTH, _health),
    "HealthCheckTimeout": Written(HEALTH, _health_timeout),
    "RebootProgram": Written(GATE, _gate),
    "AuthAltTypes": Written(REST_API, _rest_api),
    "AuthAltParameters": Written(REST_API, _rest_api),
    # Written on each GPU partition's line: a global one would say something else than they do.
    "DefCpuPerGPU": Written(PER_GPU, _has_gpus),
    "DefMemPerGPU": Written(PER_GPU, _has_gpus),
}

_MODELLED_LOWER = {key.lower(): key for key in MODELLED}


def modelled(key: str) -> tuple[str, str] | None:
    """(Slurm's spelling, model setting) of a key the model has a place for, in any spelling."""
    name = _MODELLED_LOWER.get(key.lower())
    return None if name is None else (name, MODELLED[name])


def written_keys(spec: ClusterSpec) -> dict[str, str]:
    """Key -> the setting writing it, for the keys without a place of their own in the model that
    slurm.conf of this spec gets from gpucluster."""
    return {key: w.setting for key, w in WRITTEN.items() if w.when(spec)}


# NodeName options -> the setting holding them (node type, or its cluster.nodes entry); the
# others of the release go to the node type's `extra`.
NODE_MODELLED: dict[str, str] = {
    "NodeName": "cluster.nodes (hosts.yml)",
    "CPUs": "cpus",
    "Procs": "cpus",
    "Sockets": "sockets",
    "SocketsPerBoard": "sockets",
    "CoresPerSocket": "cores_per_socket",
    "ThreadsPerCore": "threads_per_core",
    "RealMemory": "memory_mb",
    "Gres": "gpus",
    "Feature": "features",
    "Features": "features",
    "Weight": "weight",
    "State": "cluster.nodes[].state",
    "TmpDisk": "tmp_disk_mb",
    "MemSpecLimit": "mem_spec_limit_mb",
    "CoreSpecCount": "core_spec_count",
    "CpuSpecList": "cpu_spec_list",
}
# Options naming one value per host: a node type cannot hold them.
NODE_PER_HOST = ("NodeAddr", "NodeHostname", "BcastAddr")

# PartitionName options -> the partition setting holding them; the others of the release go to
# the partition's `extra`.
PARTITION_MODELLED: dict[str, str] = {
    "PartitionName": "name",
    "Nodes": "nodes",
    "Default": "default",
    "MaxTime": "max_time",
    "DefaultTime": "default_time",
    "AllowAccounts": "tenants / allow_accounts",
    "OverSubscribe": "over_subscribe / exclusive",
    "Shared": "over_subscribe / exclusive",
    "Exclusive": "exclusive",
    "PriorityTier": "priority_tier",
    "DefCpuPerGPU": "cpus_per_gpu",
    "DefMemPerGPU": "memory_per_gpu_mb",
    "DenyAccounts": "deny_accounts",
    "AllowGroups": "allow_groups",
    "AllowQos": "allow_qos",
    "DenyQos": "deny_qos",
    "QOS": "qos",
    "PreemptMode": "preempt_mode",
    "GraceTime": "grace_time",
    "DefMemPerCPU": "def_mem_per_cpu_mb",
    "MaxMemPerCPU": "max_mem_per_cpu_mb",
    "DefMemPerNode": "def_mem_per_node_mb",
    "MaxMemPerNode": "max_mem_per_node_mb",
    "MaxNodes": "max_nodes",
    "MinNodes": "min_nodes",
    "MaxCPUsPerNode": "max_cpus_per_node",
    "ExclusiveUser": "exclusive_user",
    "TRESBillingWeights": "tres_billing_weights",
    "Hidden": "hidden",
    "State": "state",
    "SuspendTime": "suspend_time",
    "SuspendTimeout": "suspend_timeout",
    "ResumeTimeout": "resume_timeout",
    "PowerDownOnIdle": "power_down_on_idle",
    "PriorityJobFactor": "priority_job_factor",
}

# cgroup.conf keys -> cluster.slurm.cgroup settings; the others of the release go to its `extra`.
CGROUP_MODELLED: dict[str, str] = {
    "CgroupPlugin": "plugin",
    "CgroupMountpoint": "mountpoint",
    "ConstrainCores": "constrain_cores",
    "ConstrainDevices": "constrain_devices",
    "ConstrainRAMSpace": "constrain_ram_space",
}


def option_problem(
    key: str, table: dict[str, str], known: frozenset[str], what: str, release: str
) -> str | None:
    """Why `key` may not be in the `extra` of a node type, partition or cgroup.conf, if it may not."""
    lower = key.lower()
    typed = next((field for name, field in table.items() if name.lower() == lower), None)
    if typed is not None:
        return f"{key} is `{typed}` here: set it there"
    spelt = next((name for name in known if name.lower() == lower), None)
    if spelt is None:
        return f"`{key}` is not an option of {what} in Slurm {release}"
    if spelt != key:
        return f"Slurm spells it `{spelt}`"
    return None
