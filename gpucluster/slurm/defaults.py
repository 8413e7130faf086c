"""What Slurm assumes for a key a file leaves out, and how each key's values compare.

Defaults are those of src/common/read_config.h (DEFAULT_*) and slurm.conf(5) at each release (the
two changed in 23.11: SelectType select/linear -> select/cons_tres, PriorityType priority/basic ->
priority/multifactor, TreeWidth 50 -> 16, and the `none` plugins became no plugin at all). Only
keys whose default is certain are here: for any other, a file that leaves it out and one that sets
it differ.
"""

from __future__ import annotations

import re

from gpucluster.model.releases import Release

# Key (lower case) -> Slurm's value when the key is left out.
_GLOBAL = {
    "authtype": "auth/munge",
    "credtype": "cred/munge",
    "slurmuser": "root",
    "slurmduser": "root",
    "slurmctldport": "6817",
    "slurmdport": "6818",
    "statesavelocation": "/var/spool",
    "slurmdspooldir": "/var/spool/slurmd",
    "slurmctldpidfile": "/run/slurmctld.pid",
    "slurmdpidfile": "/run/slurmd.pid",
    "mpidefault": "none",
    "mailprog": "/bin/mail",
    "returntoservice": "0",
    "schedulertype": "sched/backfill",
    "selecttypeparameters": "CR_Core_Memory",
    "proctracktype": "proctrack/cgroup",
    "slurmctldtimeout": "120",
    "slurmdtimeout": "300",
    "messagetimeout": "10",
    "tcptimeout": "2",
    "batchstarttimeout": "10",
    "unkillablesteptimeout": "60",
    "killwait": "30",
    "minjobage": "300",
    "inactivelimit": "0",
    "waittime": "0",
    "overtimelimit": "0",
    "epilogmsgtime": "2000",
    "getenvtimeout": "120",
    "resvoverrun": "0",
    "slurmctlddebug": "info",
    "slurmddebug": "info",
    "enforcepartlimits": "NO",
    "suspendtimeout": "30",
    "resumetimeout": "60",
    "suspendrate": "60",
    "resumerate": "300",
    "prioritydecayhalflife": "7-0",
    "prioritycalcperiod": "5",
    "priorityweightage": "0",
    "priorityweightassoc": "0",
    "priorityweightfairshare": "0",
    "priorityweightjobsize": "0",
    "priorityweightpartition": "0",
    "priorityweightqos": "0",
    "prioritymaxage": "7-0",
    "priorityusageresetperiod": "NONE",
    "priorityfavorsmall": "NO",
    "maxjobcount": "10000",
    "maxarraysize": "1001",
    "maxstepcount": "40000",
    "firstjobid": "1",
    "propagateresourcelimits": "ALL",
    "propagatepriprocess": "0",
    "jobrequeue": "1",
    "killonbadexit": "0",
    "disablerootjobs": "NO",
    "healthcheckinterval": "0",
    "healthchecknodestate": "ANY",
    "jobacctgatherfrequency": "30",
    "groupupdatetime": "600",
    "groupupdateforce": "1",
    "tmpfs": "/tmp",
    "schedulertimeslice": "30",
    "completewait": "0",
    "vsizefactor": "0",
    "usepam": "0",
    "preempttype": "preempt/none",
    "preemptmode": "OFF",
    "preemptexempttime": "0",
    "accountingstoragetype": "accounting_storage/none",
    "accountingstorageport": "6819",
    "accountingstorageenforce": "",
    "jobcomptype": "jobcomp/none",
    "switchtype": "switch/none",
    "jobacctgathertype": "jobacct_gather/none",
    "taskplugin": "task/none",
    "topologyplugin": "topology/flat",
    "grestypes": "",
    "slurmctldparameters": "",
    "slurmdparameters": "",
    "schedulerparameters": "",
    "prologflags": "",
    "debugflags": "",
    "propagateresourcelimitsexcept": "",
    "communicationparameters": "",
    "launchparameters": "",
    "privatedata": "",
    "accountingstoretres": "",
    "accountingstoragetres": "",
    "suspendexcnodes": "",
    "suspendexcparts": "",
    "suspendexcstates": "",
    "priorityflags": "",
    "preemptparameters": "",
    "reconfigflags": "",
    "accountingstoreflags": "",
}

# Keys whose value is a comma-separated list that Slurm reads as a set (order and case aside).
SET_KEYS = frozenset(
    key.lower()
    for key in (
        "SchedulerParameters", "SlurmctldParameters", "SlurmdParameters", "PrologFlags", "DebugFlags",
        "TaskPlugin", "AccountingStorageEnforce", "AccountingStorageTRES", "PropagateResourceLimits",
        "PropagateResourceLimitsExcept", "PreemptMode", "PreemptParameters", "LaunchParameters",
        "CommunicationParameters", "PrivateData", "SuspendExcStates", "SuspendExcParts", "PriorityFlags",
        "AuthAltTypes", "SelectTypeParameters", "GresTypes", "TopologyParam", "ReconfigFlags",
        "AccountingStoreFlags", "HealthCheckNodeState", "JobAcctGatherParams", "TaskPluginParam",
        "JobSubmitPlugins", "CliFilterPlugins", "PrEpPlugins", "SrunPortRange", "ScronParameters",
        "AuthAltParameters", "AuthInfo", "CredType", "MpiParams", "X11Parameters", "BcastParameters",
        "DependencyParameters", "SwitchParameters", "TLSParameters",
    )
)  # fmt: skip
# Keys naming a plugin `<type>/<name>`: Slurm accepts the name without its type.
PLUGIN_TYPES = {
    "schedulertype": "sched",
    "selecttype": "select",
    "proctracktype": "proctrack",
    "taskplugin": "task",
    "jobacctgathertype": "jobacct_gather",
    "prioritytype": "priority",
    "preempttype": "preempt",
    "authtype": "auth",
    "credtype": "cred",
    "accountingstoragetype": "accounting_storage",
    "jobcomptype": "jobcomp",
    "switchtype": "switch",
    "topologyplugin": "topology",
    "jobcontainertype": "job_container",
    "acctgatherenergytype": "acct_gather_energy",
    "acctgatherinterconnecttype": "acct_gather_interconnect",
    "acctgatherfilesystemtype": "acct_gather_filesystem",
    "acctgatherprofiletype": "acct_gather_profile",
    "mcsplugin": "mcs",
    "routeplugin": "route",
}
# Keys whose value is a file: /var/run is /run on every system gpucluster targets.
PATH_KEYS = frozenset(
    key.lower()
    for key in (
        "SlurmctldPidFile", "SlurmdPidFile", "SlurmctldLogFile", "SlurmdLogFile", "StateSaveLocation",
        "SlurmdSpoolDir", "MailProg", "Prolog", "Epilog", "PrologSlurmctld", "EpilogSlurmctld",
        "TaskProlog", "TaskEpilog", "SrunProlog", "SrunEpilog", "HealthCheckProgram", "SuspendProgram",
        "ResumeProgram", "ResumeFailProgram", "RebootProgram", "PluginDir", "PlugStackConfig",
        "UnkillableStepProgram", "SlurmSchedLogFile", "JobCompLoc", "TmpFS",
    )
)  # fmt: skip
# Time values (minutes, [days-]hours:minutes:seconds, UNLIMITED) compared as minutes.
TIME_KEYS = frozenset(("prioritydecayhalflife", "prioritymaxage"))

# Partition options: Slurm's value when a line leaves the option out.
PARTITION_DEFAULTS = {
    "default": "NO",
    "maxtime": "UNLIMITED",
    "state": "UP",
    "oversubscribe": "NO",
    "hidden": "NO",
    "exclusiveuser": "NO",
    "powerdownonidle": "NO",
    "lln": "NO",
    "rootonly": "NO",
    "reqresv": "NO",
    "prioritytier": "1",
    "priorityjobfactor": "1",
    "maxnodes": "UNLIMITED",
    "minnodes": "0",
    "gracetime": "0",
    "allocnodes": "ALL",
    "allowaccounts": "ALL",
    "allowgroups": "ALL",
    "allowqos": "ALL",
    "preemptmode": "",
}
PARTITION_SET_KEYS = frozenset(
    ("allowaccounts", "allowgroups", "allowqos", "denyaccounts", "denyqos", "preemptmode", "allocnodes")
)
PARTITION_TIME_KEYS = frozenset(("maxtime", "defaulttime"))

# Node options: Slurm's value when a line leaves the option out (the CPU layout is worked out
# from what is given: gpucluster.slurm.view).
NODE_DEFAULTS = {
    "realmemory": "1",
    "weight": "1",
    "tmpdisk": "0",
    "state": "UNKNOWN",
    "feature": "",
    "gres": "",
}

# cgroup.conf keys -> Slurm's value when left out (cgroup.conf(5)).
CGROUP_DEFAULTS = {
    "cgroupplugin": "autodetect",
    "cgroupmountpoint": "/sys/fs/cgroup",
    "constraincores": "no",
    "constraindevices": "no",
    "constrainramspace": "no",
    "constrainswapspace": "no",
    "allowedramspace": "100",
    "allowedswapspace": "0",
    "maxrampercent": "100",
    "maxswappercent": "100",
    "minramspace": "30",
    "ignoresystemd": "no",
    "ignoresystemdonfailure": "no",
    "memorylimitenforcement": "no",
    "signalchildrenprocesses": "no",
    "enablecontrollers": "no",
    "cgroupjobidpaths": "no",
}


def global_default(key: str, release: Release) -> str | None:
    """Slurm's value of a slurm.conf key the file leaves out, at the target release."""
    lower = key.lower()
    if lower == "selecttype":
        return "select/linear" if release.cons_res else "select/cons_tres"
    if lower == "prioritytype":
        return "priority/basic" if release.cons_res else "priority/multifactor"
    if lower == "treewidth":
        return "50" if release.cons_res else "16"
    if lower == "topologyplugin":
        return release.flat_topology_plugin
    return _GLOBAL.get(lower)


TIME_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def minutes(text: str) -> str:
    """A Slurm time as minutes (`7-0` -> 10080, `1:30:00` -> 90); UNLIMITED and INFINITE alike.
    Slurm reads `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`."""
    value = text.strip().upper()
    if value in ("UNLIMITED", "INFINITE", "-1"):
        return "UNLIMITED"
    match = TIME_RE.match(value)
    if match is None:
        return value
    days, first, second, third = match.groups()
    if days is not None:
        hours, mins, secs = int(first), int(second or 0), int(third or 0)
        return str(int(days) * 1440 + hours * 60 + mins + (secs + 59) // 60)
    if third is not None:
        return str(int(first) * 60 + int(second) + (int(third) + 59) // 60)
    if second is not None:
        return str(int(first) + (int(second) + 59) // 60)
    return str(int(first))
