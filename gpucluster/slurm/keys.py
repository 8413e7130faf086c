"""The one table of the Slurm keys gpucluster writes or reads: each slurm.conf, NodeName,
PartitionName, gres.conf and cgroup.conf key it knows has one entry here, saying where the model
holds it, what kind of value it takes (which decides how it is read, compared and quoted), Slurm's
value when a file leaves it out (per release where that changed), how older releases spelt it, and
whether a change to it needs the daemons restarted.

Everything else derives from this table: the renderer (gpucluster.slurm.render) writes a plain
model key from its entry, the importer (gpucluster.slurm_import) puts a site's value at the
entry's model path, the written-key check (gpucluster.slurm.written) refuses in `extra` a key the
model has a place for, the comparison reads values by kind (gpucluster.slurm.defaults), and plan's
update policy of an `extra` key comes from `needs_restart`. Adding a key the model holds is one
entry here (and its model field, in gpucluster/model/).

Which keys exist at each release is generated from Slurm's sources (gpucluster.slurm.conf_keys);
what a removed key becomes, with its values, is gpucluster.slurm.oldkeys.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gpucluster.model.releases import Release
from gpucluster.model.spec import NODE_ADDR, NODE_HOSTNAME
from gpucluster.slurm.sharing import uses_mps

# Files (and the record lines of slurm.conf).
SLURM_CONF, NODE, PARTITION, GRES, CGROUP = (
    "slurm.conf",
    "NodeName",
    "PartitionName",
    "gres.conf",
    "cgroup.conf",
)

# Kinds of value: how a value is read into the model, compared and written.
NUMBER = "number"  # an integer
TEXT = "text"  # a string taken as it is
PATH = "path"  # a file: /var/run is /run
TIME = "time"  # a Slurm time (minutes, [D-]H:M:S, UNLIMITED), compared as minutes
FLAG = "flag"  # YES/NO (the model: a bool)
UPPER = "upper"  # a word Slurm reads in any case
LEVEL = "level"  # a debug level (quiet ... debug5), any case
SET = "set"  # a comma list Slurm reads as a set (order and case aside)
LIST = "list"  # a comma list whose order matters
PLUGIN = "plugin"  # `<type>/<name>`: Slurm accepts the name without its type
PLUGINS = "plugins"  # a comma list of plugins of one type, read as a set

Default = str | Callable[[Release], str] | None


class Key:
    """One key of a Slurm file. `model`: the model setting holding it (`cluster.slurm...`;
    `cluster.partitions[].x` and `cluster.node_types.<type>.x` for options of those lines), ""
    where the model has no place for it (the key then goes to an `extra`). `written_by`: the
    setting that writes a key the model has no place for (with `when`, the condition under which
    it does). `old`: the names older releases gave it, which the target's parser still reads."""

    __slots__ = ("default", "file", "kind", "model", "name", "old", "plugin", "when", "written_by")

    def __init__(
        self,
        name: str,
        file: str,
        model: str = "",
        kind: str = TEXT,
        default: Default = None,
        plugin: str = "",
        old: tuple[str, ...] = (),
        written_by: str = "",
        when: Callable[[Any], bool] | None = None,
    ) -> None:
        self.name, self.file, self.model, self.kind = name, file, model, kind
        self.default, self.plugin, self.old = default, plugin, old
        self.written_by, self.when = written_by, when

    @property
    def field(self) -> str:
        """The model field's own name (the last part of `model`)."""
        return self.model.rsplit(".", 1)[-1]

    def default_at(self, release: Release) -> str | None:
        default = self.default
        return default(release) if callable(default) else default

    def __repr__(self) -> str:
        return f"Key({self.file}:{self.name} -> {self.model or '-'})"


S = "cluster.slurm"
P = "cluster.partitions[]"
T = "cluster.node_types.<type>"


def _g(name: str, model: str = "", kind: str = TEXT, default: Default = None, **more: Any) -> Key:
    return Key(name, SLURM_CONF, model, kind, default, **more)


def _select(release: Release) -> str:
    return "select/linear" if release.cons_res else "select/cons_tres"


def _priority(release: Release) -> str:
    return "priority/basic" if release.cons_res else "priority/multifactor"


def _tree_width(release: Release) -> str:
    return "50" if release.cons_res else "16"


def _flat(release: Release) -> str:
    return release.flat_topology_plugin


def _always(spec: Any) -> bool:
    return True


def _has_gpus(spec: Any) -> bool:
    return any(t.gpus for t in spec.node_types.values())


def _health(spec: Any) -> bool:
    return spec.slurm.health is not None


def _health_timeout(spec: Any) -> bool:
    return bool(spec.slurm.health is not None and spec.slurm.release.health_check_timeout)


def _rest_api(spec: Any) -> bool:
    return spec.slurm.rest_api is not None


def _old_release_cloud_nodes(spec: Any) -> bool:
    return spec.slurm.release.cloud_tree_width is not None and any(
        e.power is not None and e.power.kind == "cloud" for e in spec.nodes
    )


def _gate(spec: Any) -> bool:
    return spec.slurm.health is not None and spec.gate is not None


def _mps(spec: Any) -> bool:
    return uses_mps(spec)


CORE = "gpucluster's slurm.conf (always written)"
HEALTH = "cluster.slurm.health (gpucluster-healthcheck)"
PER_GPU = "each GPU partition (cluster.partitions[].cpus_per_gpu / memory_per_gpu_mb)"
REST_API = "cluster.slurm.rest_api (JWT for slurmrestd)"
MPS = "gpus.sharing.mps of a node type (gpucluster-mps)"
GATE = "cluster.gate (gpucluster-reboot puts the node in the gate, then reboots it)"
CLOUD_POWER = "cluster.nodes[].power cloud groups (before Slurm 23.11)"

# slurm.conf, in the order gpucluster writes the keys it writes.
SLURM_CONF_KEYS = (
    _g("ClusterName", "cluster.name"),
    _g("SlurmctldHost", f"{S}.controller", old=("ControlMachine", "BackupController")),
    _g("AuthType", kind=PLUGIN, plugin="auth", default="auth/munge", written_by=CORE, when=_always),
    _g("CredType", kind=PLUGIN, plugin="cred", default="cred/munge", written_by=CORE, when=_always),
    _g("SlurmUser", f"{S}.slurm_user", default="root"),
    _g("SlurmctldPort", f"{S}.daemons.slurmctld_port", default="6817"),
    _g("SlurmdPort", f"{S}.daemons.slurmd_port", NUMBER, "6818"),
    _g("StateSaveLocation", f"{S}.state_save_location", PATH, "/var/spool"),
    _g("SlurmdSpoolDir", f"{S}.daemons.spool_dir", PATH, "/var/spool/slurmd"),
    _g("SlurmctldPidFile", f"{S}.daemons.slurmctld_pid_file", PATH, "/run/slurmctld.pid"),
    _g("SlurmdPidFile", f"{S}.daemons.slurmd_pid_file", PATH, "/run/slurmd.pid"),
    _g("SlurmctldLogFile", f"{S}.daemons.slurmctld_log_file", PATH),
    _g("SlurmdLogFile", f"{S}.daemons.slurmd_log_file", PATH),
    _g("SlurmctldDebug", f"{S}.daemons.slurmctld_debug", LEVEL, "info"),
    _g("SlurmdDebug", f"{S}.daemons.slurmd_debug", LEVEL, "info"),
    _g("DebugFlags", f"{S}.daemons.debug_flags", SET, ""),
    _g("MpiDefault", f"{S}.mpi_default", default="none"),
    _g("MailProg", f"{S}.mail_prog", PATH, "/bin/mail"),
    _g("ReturnToService", f"{S}.return_to_service", NUMBER, "0"),
    _g("SchedulerType", f"{S}.scheduler_type", PLUGIN, "sched/backfill", plugin="sched"),
    _g("SchedulerParameters", f"{S}.scheduler_parameters", SET, ""),
    _g("SelectType", f"{S}.select_type", PLUGIN, _select, plugin="select"),
    _g("SelectTypeParameters", f"{S}.select_type_parameters", SET, "CR_Core_Memory"),
    _g("PreemptType", f"{S}.preemption.type", PLUGIN, "preempt/none", plugin="preempt"),
    _g("PreemptMode", f"{S}.preemption.mode", SET, "OFF"),
    _g("PreemptExemptTime", f"{S}.preemption.exempt_time", TIME, "0"),
    _g("PreemptParameters", f"{S}.preemption.parameters", SET, ""),
    _g("ProctrackType", f"{S}.proctrack", PLUGIN, "proctrack/cgroup", plugin="proctrack"),
    _g("TaskPlugin", f"{S}.task_plugins", PLUGINS, "task/none", plugin="task"),
    _g(
        "JobAcctGatherType",
        f"{S}.job_acct_gather_type",
        PLUGIN,
        "jobacct_gather/none",
        plugin="jobacct_gather",
    ),
    _g("PropagateResourceLimits", f"{S}.propagate_resource_limits", SET, "ALL"),
    _g("PropagateResourceLimitsExcept", f"{S}.propagate_resource_limits_except", SET, ""),
    _g("PrologFlags", f"{S}.prolog_flags", SET, ""),
    _g("Prolog", f"{S}.prolog", PATH),
    _g("Epilog", f"{S}.epilog", PATH),
    _g("SlurmdParameters", f"{S}.slurmd_parameters", SET, ""),
    _g("SlurmctldParameters", f"{S}.slurmctld_parameters", SET, ""),
    _g("GresTypes", "the node types' gpus", SET, ""),
    _g("TopologyPlugin", "cluster.fabric", PLUGIN, _flat, plugin="topology"),
    _g(
        "AccountingStorageType",
        f"{S}.accounting",
        PLUGIN,
        "accounting_storage/none",
        plugin="accounting_storage",
    ),
    _g("AccountingStorageHost", f"{S}.accounting.host", default="localhost"),
    _g("AccountingStoragePort", f"{S}.accounting.port", NUMBER, "6819"),
    _g("AccountingStorageTRES", f"{S}.accounting.tres", SET, ""),
    _g("AccountingStorageEnforce", f"{S}.accounting.enforce", SET, ""),
    _g("PriorityType", f"{S}.priority.type", PLUGIN, _priority, plugin="priority"),
    _g("PriorityDecayHalfLife", f"{S}.priority.decay_half_life", TIME, "7-0"),
    _g("PriorityCalcPeriod", f"{S}.priority.calc_period", TIME, "5"),
    _g("PriorityWeightFairshare", f"{S}.priority.fairshare", NUMBER, "0"),
    _g("PriorityWeightQOS", f"{S}.priority.qos", NUMBER, "0"),
    _g("PriorityWeightAge", f"{S}.priority.age", NUMBER, "0"),
    _g("PriorityWeightJobSize", f"{S}.priority.job_size", NUMBER, "0"),
    _g("PriorityWeightPartition", f"{S}.priority.partition", NUMBER, "0"),
    _g("PriorityWeightAssoc", f"{S}.priority.assoc", NUMBER, "0"),
    _g("PriorityWeightTRES", f"{S}.priority.tres"),
    _g("PriorityMaxAge", f"{S}.priority.max_age", TIME, "7-0"),
    _g("PriorityUsageResetPeriod", f"{S}.priority.usage_reset_period", UPPER, "NONE"),
    _g("PriorityFavorSmall", f"{S}.priority.favor_small", FLAG, "NO"),
    _g("PriorityFlags", f"{S}.priority.flags", SET, ""),
    _g("HealthCheckProgram", kind=PATH, written_by=HEALTH, when=_health),
    _g("HealthCheckInterval", kind=NUMBER, default="0", written_by=HEALTH, when=_health),
    _g("HealthCheckNodeState", kind=SET, default="ANY", written_by=HEALTH, when=_health),
    _g("HealthCheckTimeout", kind=NUMBER, written_by=HEALTH, when=_health_timeout),
    _g("AuthAltTypes", kind=PLUGINS, plugin="auth", written_by=REST_API, when=_rest_api),
    _g("AuthAltParameters", kind=SET, written_by=REST_API, when=_rest_api),
    _g("SuspendProgram", f"{S}.power_save.suspend_program", PATH),
    _g("ResumeProgram", f"{S}.power_save.resume_program", PATH),
    _g("ResumeFailProgram", f"{S}.power_save.resume_fail_program", PATH),
    _g("SuspendTime", f"{S}.power_save.suspend_time", NUMBER),
    _g("SuspendTimeout", f"{S}.power_save.suspend_timeout", NUMBER, "30"),
    _g("ResumeTimeout", f"{S}.power_save.resume_timeout", NUMBER, "60"),
    _g("SuspendRate", f"{S}.power_save.suspend_rate", NUMBER, "60"),
    _g("ResumeRate", f"{S}.power_save.resume_rate", NUMBER, "300"),
    _g("SuspendExcNodes", f"{S}.power_save.exclude_nodes", default=""),
    _g("SuspendExcParts", f"{S}.power_save.exclude_partitions", SET, ""),
    _g("SuspendExcStates", f"{S}.power_save.exclude_states", SET, ""),
    _g("SlurmctldTimeout", f"{S}.timeouts.slurmctld", NUMBER, "120"),
    _g("SlurmdTimeout", f"{S}.timeouts.slurmd", NUMBER, "300"),
    _g("MessageTimeout", f"{S}.timeouts.message", NUMBER, "10"),
    _g("TCPTimeout", f"{S}.timeouts.tcp", NUMBER, "2"),
    _g("BatchStartTimeout", f"{S}.timeouts.batch_start", NUMBER, "10"),
    _g("PrologEpilogTimeout", f"{S}.timeouts.prolog_epilog", NUMBER),
    _g("UnkillableStepTimeout", f"{S}.timeouts.unkillable_step", NUMBER, "60"),
    _g("KillWait", f"{S}.timeouts.kill_wait", NUMBER, "30"),
    _g("MinJobAge", f"{S}.timeouts.min_job_age", NUMBER, "300"),
    _g("InactiveLimit", f"{S}.timeouts.inactive_limit", NUMBER, "0"),
    _g("WaitTime", f"{S}.timeouts.wait_time", NUMBER, "0"),
    _g("OverTimeLimit", f"{S}.timeouts.over_time_limit", NUMBER, "0"),
    _g("EpilogMsgTime", f"{S}.timeouts.epilog_msg_time", NUMBER, "2000"),
    _g("GetEnvTimeout", f"{S}.timeouts.get_env", NUMBER, "120"),
    _g("ResvOverRun", f"{S}.timeouts.resv_over_run", NUMBER, "0"),
    _g("CompleteWait", f"{S}.timeouts.complete_wait", NUMBER, "0"),
    # Written on each GPU partition's line: a global one would say something else than they do.
    _g("DefCpuPerGPU", kind=NUMBER, written_by=PER_GPU, when=_has_gpus),
    _g("DefMemPerGPU", kind=NUMBER, written_by=PER_GPU, when=_has_gpus),
    # Keys the model has no place for (a site's go to cluster.slurm.extra) whose default and kind
    # gpucluster knows: the import leaves out a site's value equal to the default, and the
    # comparison reads them as Slurm does.
    _g("SlurmdUser", default="root"),
    _g("EnforcePartLimits", kind=UPPER, default="NO"),
    _g("MaxJobCount", kind=NUMBER, default="10000"),
    _g("MaxArraySize", kind=NUMBER, default="1001"),
    _g("MaxStepCount", kind=NUMBER, default="40000"),
    _g("FirstJobId", kind=NUMBER, default="1"),
    _g("PropagatePrioProcess", kind=NUMBER, default="0"),
    _g("JobRequeue", kind=NUMBER, default="1"),
    _g("KillOnBadExit", kind=NUMBER, default="0"),
    _g("DisableRootJobs", kind=UPPER, default="NO"),
    _g("JobAcctGatherFrequency", default="30"),
    _g("JobAcctGatherParams", kind=SET),
    _g("GroupUpdateTime", kind=NUMBER, default="600"),
    _g("GroupUpdateForce", kind=NUMBER, default="1"),
    _g("TmpFS", kind=PATH, default="/tmp"),
    _g("SchedulerTimeSlice", kind=NUMBER, default="30"),
    _g("VSizeFactor", kind=NUMBER, default="0"),
    _g("UsePAM", kind=UPPER, default="0"),
    _g("JobCompType", kind=PLUGIN, plugin="jobcomp", default="jobcomp/none"),
    _g("JobCompLoc", kind=PATH),
    _g("SwitchType", kind=PLUGIN, plugin="switch", default="switch/none"),
    _g("JobContainerType", kind=PLUGIN, plugin="job_container"),
    _g("AcctGatherEnergyType", kind=PLUGIN, plugin="acct_gather_energy"),
    _g("AcctGatherInterconnectType", kind=PLUGIN, plugin="acct_gather_interconnect"),
    _g("AcctGatherFilesystemType", kind=PLUGIN, plugin="acct_gather_filesystem"),
    _g("AcctGatherProfileType", kind=PLUGIN, plugin="acct_gather_profile"),
    _g("MCSPlugin", kind=PLUGIN, plugin="mcs"),
    _g("RoutePlugin", kind=PLUGIN, plugin="route"),
    _g("TreeWidth", kind=NUMBER, default=_tree_width, written_by=CLOUD_POWER, when=_old_release_cloud_nodes),
    _g("CommunicationParameters", kind=SET, default=""),
    _g("LaunchParameters", kind=SET, default=""),
    _g("PrivateData", kind=SET, default=""),
    _g("AccountingStoreTRES", kind=SET, default=""),
    _g("ReconfigFlags", kind=SET, default=""),
    _g("AccountingStoreFlags", kind=SET, default=""),
    _g("TopologyParam", kind=SET),
    _g("TaskPluginParam", kind=SET),
    _g("JobSubmitPlugins", kind=SET),
    _g("CliFilterPlugins", kind=SET),
    _g("PrEpPlugins", kind=SET),
    _g("SrunPortRange", kind=SET),
    _g("ScronParameters", kind=SET),
    _g("AuthInfo", kind=SET),
    _g("MpiParams", kind=SET),
    _g("X11Parameters", kind=SET),
    _g("BcastParameters", kind=SET),
    _g("DependencyParameters", kind=SET),
    _g("SwitchParameters", kind=SET),
    _g("TLSParameters", kind=SET),
    _g("PrologSlurmctld", kind=PATH),
    _g("EpilogSlurmctld", kind=PATH),
    _g("TaskProlog", kind=PATH, written_by=MPS, when=_mps),
    _g("TaskEpilog", kind=PATH),
    _g("SrunProlog", kind=PATH),
    _g("SrunEpilog", kind=PATH),
    _g("RebootProgram", kind=PATH, written_by=GATE, when=_gate),
    _g("PluginDir", kind=PATH),
    _g("PlugStackConfig", kind=PATH),
    _g("UnkillableStepProgram", kind=PATH),
    _g("SlurmSchedLogFile", kind=PATH),
)

# NodeName options, in the order gpucluster writes them.
NODE_KEYS = (
    Key("NodeName", NODE, "cluster.nodes (hosts.yml)"),
    Key("NodeAddr", NODE, f"hosts.yml {NODE_ADDR}"),
    Key("NodeHostname", NODE, f"hosts.yml {NODE_HOSTNAME}"),
    Key("CPUs", NODE, f"{T}.cpus", NUMBER, old=("Procs",)),
    Key("Sockets", NODE, f"{T}.sockets", NUMBER),
    Key("SocketsPerBoard", NODE, f"{T}.sockets", NUMBER),
    Key("CoresPerSocket", NODE, f"{T}.cores_per_socket", NUMBER, "1"),
    Key("ThreadsPerCore", NODE, f"{T}.threads_per_core", NUMBER, "1"),
    Key("RealMemory", NODE, f"{T}.memory_mb", NUMBER, "1"),
    Key("Gres", NODE, f"{T}.gpus", SET, ""),
    Key("Feature", NODE, f"{T}.features", SET, "", old=("Features",)),
    Key("Weight", NODE, f"{T}.weight", NUMBER, "1"),
    Key("TmpDisk", NODE, f"{T}.tmp_disk_mb", NUMBER, "0"),
    Key("MemSpecLimit", NODE, f"{T}.mem_spec_limit_mb", NUMBER),
    Key("CoreSpecCount", NODE, f"{T}.core_spec_count", NUMBER),
    Key("CpuSpecList", NODE, f"{T}.cpu_spec_list"),
    Key("State", NODE, "cluster.nodes[].state", UPPER, "UNKNOWN"),
)

# PartitionName options, in the order gpucluster writes them.
PARTITION_KEYS = (
    Key("PartitionName", PARTITION, f"{P}.name"),
    Key("Nodes", PARTITION, f"{P}.nodes"),
    Key("Default", PARTITION, f"{P}.default", FLAG, "NO"),
    Key("MaxTime", PARTITION, f"{P}.max_time", TIME, "UNLIMITED"),
    Key("DefaultTime", PARTITION, f"{P}.default_time", TIME),
    Key("AllowAccounts", PARTITION, f"{P}.allow_accounts", SET, "ALL"),
    Key("Exclusive", PARTITION, f"{P}.exclusive", UPPER),
    Key("OverSubscribe", PARTITION, f"{P}.over_subscribe", UPPER, "NO", old=("Shared",)),
    Key("PriorityTier", PARTITION, f"{P}.priority_tier", NUMBER, "1"),
    Key("DefCpuPerGPU", PARTITION, f"{P}.cpus_per_gpu", NUMBER),
    Key("DefMemPerGPU", PARTITION, f"{P}.memory_per_gpu_mb", NUMBER),
    Key("DenyAccounts", PARTITION, f"{P}.deny_accounts", SET),
    Key("AllowGroups", PARTITION, f"{P}.allow_groups", SET, "ALL"),
    Key("AllowQos", PARTITION, f"{P}.allow_qos", SET, "ALL"),
    Key("DenyQos", PARTITION, f"{P}.deny_qos", SET),
    Key("PreemptMode", PARTITION, f"{P}.preempt_mode", SET, ""),
    Key("QOS", PARTITION, f"{P}.qos"),
    Key("GraceTime", PARTITION, f"{P}.grace_time", NUMBER, "0"),
    Key("DefMemPerCPU", PARTITION, f"{P}.def_mem_per_cpu_mb", NUMBER),
    Key("MaxMemPerCPU", PARTITION, f"{P}.max_mem_per_cpu_mb", NUMBER),
    Key("DefMemPerNode", PARTITION, f"{P}.def_mem_per_node_mb", NUMBER),
    Key("MaxMemPerNode", PARTITION, f"{P}.max_mem_per_node_mb", NUMBER),
    Key("MaxNodes", PARTITION, f"{P}.max_nodes", NUMBER, "UNLIMITED"),
    Key("MinNodes", PARTITION, f"{P}.min_nodes", NUMBER, "0"),
    Key("MaxCPUsPerNode", PARTITION, f"{P}.max_cpus_per_node", NUMBER),
    Key("TRESBillingWeights", PARTITION, f"{P}.tres_billing_weights"),
    Key("SuspendTime", PARTITION, f"{P}.suspend_time", NUMBER),
    Key("SuspendTimeout", PARTITION, f"{P}.suspend_timeout", NUMBER),
    Key("ResumeTimeout", PARTITION, f"{P}.resume_timeout", NUMBER),
    Key("PriorityJobFactor", PARTITION, f"{P}.priority_job_factor", NUMBER, "1"),
    Key("Topology", PARTITION, f"{P}.topology"),
    Key("ExclusiveUser", PARTITION, f"{P}.exclusive_user", FLAG, "NO"),
    Key("Hidden", PARTITION, f"{P}.hidden", FLAG, "NO"),
    Key("PowerDownOnIdle", PARTITION, f"{P}.power_down_on_idle", FLAG, "NO"),
    Key("State", PARTITION, f"{P}.state", UPPER, "UP"),
    # Options the model has no place for (a site's go to the partition's extra) whose default
    # gpucluster knows.
    Key("LLN", PARTITION, kind=FLAG, default="NO"),
    Key("RootOnly", PARTITION, kind=FLAG, default="NO"),
    Key("ReqResv", PARTITION, kind=FLAG, default="NO"),
    Key("AllocNodes", PARTITION, kind=SET, default="ALL"),
)

# gres.conf options (gpucluster writes NodeName, Name, Type, File, Cores, Count and AutoDetect).
GRES_KEYS = (
    Key("NodeName", GRES, "cluster.nodes (hosts.yml)"),
    Key("AutoDetect", GRES, f"{T}.gpus.autodetect", UPPER, "off"),
    Key("Name", GRES, f"{T}.gpus"),
    Key("Type", GRES, f"{T}.gpus.model"),
    Key("File", GRES, f"{T}.gpus.devices"),
    Key("Cores", GRES, f"{T}.gpus.affinity", old=("CPUs",)),
    Key("Count", GRES, f"{T}.gpus.count", NUMBER),
    Key("Links", GRES),
    Key("Flags", GRES, kind=SET),
    Key("MultipleFiles", GRES),
)

# cgroup.conf, in the order gpucluster writes the keys it writes.
CGROUP_KEYS = (
    Key("CgroupPlugin", CGROUP, f"{S}.cgroup.plugin", default="autodetect"),
    Key("CgroupMountpoint", CGROUP, f"{S}.cgroup.mountpoint", PATH, "/sys/fs/cgroup"),
    Key("ConstrainCores", CGROUP, f"{S}.cgroup.constrain_cores", FLAG, "no"),
    Key("ConstrainDevices", CGROUP, f"{S}.cgroup.constrain_devices", FLAG, "no"),
    Key("ConstrainRAMSpace", CGROUP, f"{S}.cgroup.constrain_ram_space", FLAG, "no"),
    Key("ConstrainSwapSpace", CGROUP, kind=FLAG, default="no"),
    Key("AllowedRAMSpace", CGROUP, kind=NUMBER, default="100"),
    Key("AllowedSwapSpace", CGROUP, kind=NUMBER, default="0"),
    Key("MaxRAMPercent", CGROUP, kind=NUMBER, default="100"),
    Key("MaxSwapPercent", CGROUP, kind=NUMBER, default="100"),
    Key("MinRAMSpace", CGROUP, kind=NUMBER, default="30"),
    Key("IgnoreSystemd", CGROUP, kind=FLAG, default="no"),
    Key("IgnoreSystemdOnFailure", CGROUP, kind=FLAG, default="no"),
    Key("MemoryLimitEnforcement", CGROUP, kind=FLAG, default="no"),
    Key("SignalChildrenProcesses", CGROUP, kind=FLAG, default="no"),
    Key("EnableControllers", CGROUP, kind=FLAG, default="no"),
    Key("CgroupJobIdPaths", CGROUP, kind=FLAG, default="no"),
)

TABLE: dict[str, tuple[Key, ...]] = {
    SLURM_CONF: SLURM_CONF_KEYS,
    NODE: NODE_KEYS,
    PARTITION: PARTITION_KEYS,
    GRES: GRES_KEYS,
    CGROUP: CGROUP_KEYS,
}
_BY_LOWER: dict[str, dict[str, Key]] = {
    file: {spelling.lower(): key for key in keys for spelling in (key.name, *key.old)}
    for file, keys in TABLE.items()
}


def entry(file: str, name: str) -> Key | None:
    """The entry of a key of `file` in any case, or of an older spelling of it."""
    return _BY_LOWER[file].get(name.lower())


def modelled(file: str) -> dict[str, str]:
    """Key -> the model setting holding it, for the keys of `file` the model has a place for."""
    return {key.name: key.model for key in TABLE[file] if key.model}


def under(prefix: str) -> dict[str, str]:
    """Model field -> slurm.conf key, for the keys held under one model setting (in table order),
    e.g. under("cluster.slurm.timeouts")."""
    start = prefix + "."
    return {
        key.model[len(start) :]: key.name
        for key in SLURM_CONF_KEYS
        if key.model.startswith(start) and "." not in key.model[len(start) :]
    }


def of_kind(file: str, *kinds: str) -> frozenset[str]:
    """The keys of `file` (lower case) whose values are of one of `kinds`."""
    return frozenset(key.name.lower() for key in TABLE[file] if key.kind in kinds)


def defaults(file: str) -> dict[str, str]:
    """Key (lower case) -> Slurm's value where a line of `file` leaves it out, for the keys whose
    default does not depend on the release."""
    return {
        key.name.lower(): key.default
        for key in TABLE[file]
        if isinstance(key.default, str) and key.name not in ("NodeName", "PartitionName")
    }


# slurm.conf keys whose change the playbook applies by restarting slurmctld and every slurmd on
# every release (roles/slurm_common/defaults/main.yml, slurm_common_restart_keys: the same list,
# which tests/roles/test_procedure_modules.py holds them to): a `slurm.extra` key among them needs a
# restart, not the reconfigure of the other extra keys. Patterns, so that they cover families.
RESTART_KEYS = (
    "SlurmctldHost",
    "AccountingStorageHost",
    "ControlMachine",
    "BackupController",
    r"\w+Type",
    "TaskPlugin",
    "GresTypes",
    r"\w+Port",
    "SelectTypeParameters",
    "SlurmdParameters",
    "SlurmctldParameters",
    "PrologFlags",
    "SlurmUser",
    "StateSaveLocation",
    "SlurmdSpoolDir",
    r"AuthAlt\w+",
)
_RESTART = re.compile("|".join(f"(?:{pattern})" for pattern in RESTART_KEYS))


def needs_restart(key: str) -> bool:
    """Whether a change to a slurm.conf key needs the daemons restarted (else a reconfigure)."""
    return _RESTART.fullmatch(key) is not None
