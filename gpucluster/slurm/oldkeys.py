"""Settings of Slurm releases gpucluster does not target, and what the target release makes of
them, each where Slurm documents it (its RELEASE_NOTES, slurm.conf(5), or the parser's own message):
renamed keys and values are mapped, removed ones dropped with the release that removed them and
its replacement, the rest refused with the reason. The importer and the comparison both use it,
so a site's old file and the rendered one are compared as the target release reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.model.releases import Release, SlurmVersion


@dataclass(frozen=True)
class Translation:
    """What an old setting becomes: `settings` (key, value) in the target's terms (empty: dropped),
    or refused (`refused` True) with `reason`."""

    settings: tuple[tuple[str, str], ...]
    reason: str
    refused: bool = False

    @property
    def kind(self) -> str:
        return "refused" if self.refused else "mapped" if self.settings else "dropped"


def _mapped(reason: str, *settings: tuple[str, str]) -> Translation:
    return Translation(settings, reason)


def _dropped(reason: str) -> Translation:
    return Translation((), reason)


def _refused(reason: str) -> Translation:
    return Translation((), reason, refused=True)


# Keys gone from every release gpucluster knows: key -> (release that removed it, what replaces it).
REMOVED = {
    "cachegroups": ("21.08", "nothing: Slurm looks groups up as it needs them"),
    "checkpointtype": ("21.08", "nothing: Slurm 20.11 removed checkpoint support"),
    "jobcheckpointdir": ("21.08", "nothing: Slurm 20.11 removed checkpoint support"),
    "schedulerport": ("21.08", "nothing (it served the removed wiki schedulers)"),
    "schedulerrootfilter": ("21.08", "nothing"),
    "jobcredentialprivatekey": (
        "23.11",
        "nothing: job credentials are signed by the CredType plugin (munge)",
    ),
    "jobcredentialpubliccertificate": (
        "23.11",
        "nothing: job credentials are signed by the CredType plugin (munge)",
    ),
    # 20.11's slurmctld stops on it: "It is safe to remove from your configuration."
    "accountingstorageloc": ("20.11", "nothing: the database is named in slurmdbd.conf (StorageLoc)"),
}

# slurm.conf keys of the DefaultStorage family (removed in 21.08): each was the default of the
# AccountingStorage and JobComp key of the same name where the file left that out (read_config.c
# of 20.11). DefaultStorageType names the plugin without its type.
DEFAULT_STORAGE = ("Type", "Host", "Port", "User", "Pass", "Loc")

# cgroup.conf keys some release removed (or made fatal while still parsing them), from the
# release on that did: key -> (release, what became of it). TaskAffinity is decided by value.
CGROUP_REMOVED = {
    "cgroupreleaseagentdir": (
        "22.05",
        'slurmd stops on it from 22.05 ("long obsolete"): the release agent is gone',
    ),
    "alloweddevicesfile": (
        "22.05",
        "Slurm 22.05 removed AllowedDevicesFile: every device is allowed but the GPUs gres.conf names",
    ),
    "cgroupautomount": (
        "23.11",
        "Slurm 23.11 removed CgroupAutomount: the kernel mounts the cgroup filesystem",
    ),
    "constrainkmemspace": ("23.11", "Slurm 23.11 removed the kernel memory limits"),
    "allowedkmemspace": ("23.11", "Slurm 23.11 removed the kernel memory limits"),
    "maxkmempercent": ("23.11", "Slurm 23.11 removed the kernel memory limits"),
    "minkmemspace": ("23.11", "Slurm 23.11 removed the kernel memory limits"),
    "taskaffinity": ("21.08", "Slurm 21.08 removed TaskAffinity; no was its default"),
}

DEBUG_LEVELS = ("quiet", "fatal", "error", "info", "verbose", "debug", "debug2", "debug3", "debug4", "debug5")


def translate(key: str, value: str, target: Release, first_without: str | None) -> Translation | None:
    """What the target release makes of a global slurm.conf setting that is not its own as
    written; None when it is (or is no old setting at all). `first_without`: the first release
    gpucluster knows that lacks the key, if some older one had it."""
    lower = key.lower()
    text = value.strip()
    if lower == "controlmachine":
        return _mapped(
            "ControlMachine is SlurmctldHost since Slurm 18.08 (25.05 reads only SlurmctldHost)",
            ("SlurmctldHost", text),
        )
    if lower == "backupcontroller":
        return _mapped(
            "BackupController is a second SlurmctldHost since Slurm 18.08 (25.05 reads only SlurmctldHost)",
            ("SlurmctldHost", text),
        )
    if lower in ("controladdr", "backupaddr"):
        return None  # decided with the controller's name (importer: controller addresses)
    if lower == "cryptotype":
        return _mapped(
            "CryptoType is CredType (Slurm reads crypto/<name> as cred/<name>)",
            ("CredType", text.replace("crypto/", "cred/", 1)),
        )
    if lower == "fastschedule":
        if text == "1":
            return _dropped("Slurm 20.02 removed FastSchedule; FastSchedule=1 is what it does anyway")
        if text == "2":
            return _mapped(
                "Slurm 20.02 removed FastSchedule; FastSchedule=2 is SlurmdParameters=config_overrides",
                ("SlurmdParameters", "config_overrides"),
            )
        return _refused(
            "Slurm 20.02 removed FastSchedule (slurmctld stops on the key) and has no replacement for "
            "FastSchedule=0: a node that registers fewer resources than configured is drained instead of "
            "used; delete the line if that suits the site"
        )
    if lower == "memlimitenforce":
        if text.lower() in ("yes", "1", "true"):
            return _mapped(
                "Slurm 19.05 removed MemLimitEnforce: JobAcctGatherParams=OverMemoryKill does it",
                ("JobAcctGatherParams", "OverMemoryKill"),
            )
        return _dropped("Slurm 19.05 removed MemLimitEnforce; off is the default")
    if lower == "accountingstorejobcomment":
        if text.lower() in ("yes", "1", "true"):
            return _mapped(
                "Slurm 21.08 removed AccountingStoreJobComment: AccountingStoreFlags=job_comment",
                ("AccountingStoreFlags", "job_comment"),
            )
        return _dropped("Slurm 21.08 removed AccountingStoreJobComment; off is the default")
    if lower == "sallocdefaultcommand":
        return _salloc_default(text)
    if lower == "taskpluginparam":
        return _task_plugin_param(text)
    if lower in REMOVED:
        removed_in, instead = REMOVED[lower]
        return _dropped(f"Slurm {removed_in} removed {key}; it is replaced by {instead}")
    if lower == "accountingstorageuser" and first_without is not None:
        return _dropped(f"Slurm {first_without} removed AccountingStorageUser (slurmdbd.conf's StorageUser)")
    if lower == "selecttype" and text.lower() in ("select/cons_res", "cons_res") and not target.cons_res:
        return _mapped(
            "Slurm 23.11 removed select/cons_res: select/cons_tres schedules the same and GPUs",
            ("SelectType", "select/cons_tres"),
        )
    if (
        lower in ("slurmctlddebug", "slurmddebug", "slurmctldsyslogdebug", "slurmdsyslogdebug")
        and text.isdigit()
    ):
        level = int(text)
        if level < len(DEBUG_LEVELS):
            return _mapped(
                f"{key}={text} is {DEBUG_LEVELS[level]} (Slurm's numbered levels)", (key, DEBUG_LEVELS[level])
            )
    if first_without is not None:
        return _dropped(f"Slurm {first_without} and later have no {key} (slurm.conf(5) of the release)")
    return None


def _task_plugin_param(text: str) -> Translation | None:
    """TaskPluginParam's Sched (task/affinity binding with sched_setaffinity rather than cpusets):
    the cpuset mode went in 20.11, and every release gpucluster targets stops on the value
    (`Bad TaskPluginParam: Sched`), binding with sched_setaffinity anyway."""
    values = [v for v in text.split(",") if v.strip()]
    kept = [v for v in values if v.strip().lower() != "sched"]
    if len(kept) == len(values):
        return None
    reason = "Slurm 22.05 and later have no TaskPluginParam=Sched: task/affinity binds with sched_setaffinity"
    if not kept:
        return _dropped(reason)
    return _mapped(reason, ("TaskPluginParam", ",".join(kept)))


def _salloc_default(command: str) -> Translation:
    """SallocDefaultCommand (removed in 20.11): salloc ran it in the allocation. Its successor, the
    interactive step (LaunchParameters=use_interactive_step), runs `srun InteractiveStepOptions`:
    the same srun with the same options where the command is srun."""
    words = command.split(None, 1)
    if not words or words[0].rsplit("/", 1)[-1] != "srun":
        return _refused(
            f"Slurm 20.11 removed SallocDefaultCommand; its successor, LaunchParameters=use_interactive_step, "
            f"runs srun only, not `{words[0] if words else command}`"
        )
    options = words[1] if len(words) > 1 else ""
    return _mapped(
        "Slurm 20.11 removed SallocDefaultCommand: salloc runs `srun InteractiveStepOptions` in the "
        "allocation with LaunchParameters=use_interactive_step",
        ("LaunchParameters", "use_interactive_step"),
        ("InteractiveStepOptions", options),
    )


def translate_cgroup(key: str, value: str, target: Release) -> Translation | None:
    """What the target makes of a cgroup.conf key some release removed; None when it still reads it."""
    lower = key.lower()
    removed = CGROUP_REMOVED.get(lower)
    if removed is None or target.version < SlurmVersion.parse(removed[0]):
        return None
    if lower == "taskaffinity" and value.strip().lower() in ("yes", "true", "1"):
        return _mapped(
            "Slurm 21.08 removed TaskAffinity=yes from cgroup.conf: task/affinity in slurm.conf's "
            "TaskPlugin does it",
            ("TaskPlugin", "task/affinity"),
        )
    return _dropped(removed[1])


def translate_partition(key: str, value: str) -> Translation | None:
    """Old partition options the parser still reads under another name."""
    lower = key.lower()
    if lower == "shared":
        return _mapped("Shared is OverSubscribe since Slurm 15.08", ("OverSubscribe", value))
    if lower == "priority":
        return _mapped(
            "a partition's Priority is PriorityJobFactor and PriorityTier since Slurm 16.05",
            ("PriorityJobFactor", value),
            ("PriorityTier", value),
        )
    return None


def translate_node(key: str, value: str) -> Translation | None:
    if key.lower() == "procs":
        return _mapped("Procs is CPUs", ("CPUs", value))
    return None
