"""`gpucluster import`: an existing cluster's Slurm files -> an inventory that renders the same
cluster, as compact as the model allows, and where every setting of the files went.

The files are read as the target release reads them (gpucluster.slurm.view: old keys mapped,
dropped or refused). Each setting then lands in the model (`native`, or `mapped` when its old
spelling was translated), in `cluster.slurm.extra` (a key of the release the model has no place
for), or nowhere: `default` (what Slurm does without it, and what the inventory renders),
`dropped` (a removed key, with the release and its replacement) or `refused` (no documented way
to carry it: the import stops, listing every such setting with its file and line). Where the
site leaves out a key gpucluster always writes, the inventory says Slurm's value, so that the
rendered file means the same. Nodes become node types (hosts sharing hardware), per-group
overrides (memory, features, weight, GPUs, state) and hosts.yml groups (gpucluster.slurm.grouping).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpucluster.errors import Problem
from gpucluster.model.spec import Daemons, SlurmSettings
from gpucluster.render.health import HEALTH_PROGRAM
from gpucluster.slurm.defaults import CGROUP_DEFAULTS, global_default, minutes
from gpucluster.slurm.settings import POWER_SAVE_KEYS, PRIORITY_KEYS, TIMEOUT_KEYS
from gpucluster.slurm.sharing import MPS_PROGRAM
from gpucluster.slurm.view import Setting, View, split_list
from gpucluster.slurm.written import FIXED, MODELLED
from gpucluster.slurm_import.compare import normal_global

MPS_PLACE = "cluster.node_types.<type>.gpus.sharing.mps"

NATIVE, EXTRA, MAPPED, DROPPED, DEFAULT, REFUSED = (
    "native",
    "extra",
    "mapped",
    "dropped",
    "default",
    "refused",
)
KINDS = (NATIVE, EXTRA, MAPPED, DROPPED, DEFAULT, REFUSED)
SLURM = "cluster.slurm"


@dataclass(frozen=True)
class Placement:
    """Where one setting of the site's files went."""

    where: str  # file:line
    written: str  # as the file wrote it
    kind: str
    target: str = ""  # the model setting (native, mapped) or the extra key
    reason: str = ""

    def __str__(self) -> str:
        target = f" -> {self.target}" if self.target else ""
        reason = f" ({self.reason})" if self.reason else ""
        return f"{self.where}: {self.written}: {self.kind}{target}{reason}"


def _where(setting: Setting | None) -> str:
    return str(setting.where) if setting is not None and setting.where is not None else ""


def _written(setting: Setting) -> str:
    return setting.written or f"{setting.key}={setting.value}"


def _int(text: str) -> int | str:
    return int(text) if text.strip().lstrip("-").isdigit() else text.strip()


def _strip(prefix: str, text: str) -> str:
    return text.split("/", 1)[1] if text.startswith(f"{prefix}/") else text


def _defaults(model: type[Any]) -> dict[str, Any]:
    """A model's field defaults (factories called)."""
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if info.default_factory is not None:
            out[name] = info.default_factory()  # type: ignore[call-arg,unused-ignore]
        elif not info.is_required():
            out[name] = info.default
    return out


@dataclass
class Globals:
    """cluster.slurm (and cluster.name) being filled from the site's global settings."""

    view: View
    slurm: dict[str, Any] = field(default_factory=dict)
    name: str | None = None
    placements: list[Placement] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    health_program: bool = False
    # Keys whose value the import changes on purpose (the placement says why): the comparison
    # lists them apart from the differences.
    adjusted: set[str] = field(default_factory=set)

    def place(
        self, setting: Setting | None, kind: str, target: str = "", reason: str = "", written: str = ""
    ) -> None:
        text = written or (_written(setting) if setting else "")
        if setting is not None and setting.translation is not None and kind in (NATIVE, EXTRA):
            kind, reason = MAPPED, setting.translation.reason
        elif setting is not None and setting.translation is not None and kind == DEFAULT:
            reason = f"{setting.translation.reason}: {reason}"
        self.placements.append(Placement(_where(setting), text, kind, target, reason))

    def refuse(self, setting: Setting | None, reason: str) -> None:
        self.place(setting, REFUSED, reason=reason)
        where = setting.where if setting is not None else None
        self.problems.append(
            Problem(
                where.file if where else "",
                setting.key if setting else "",
                f"refused: {reason}",
                where.line if where else None,
            )
        )

    def put(self, path: str, value: Any, setting: Setting | None, default: Any = ...) -> None:
        """Set cluster.slurm.<path> unless `value` is the model's default (the inventory then
        says nothing); place the setting as native either way."""
        parts = path.split(".")
        if default is ... or value != default:
            target = self.slurm
            for part in parts[:-1]:
                target = target.setdefault(part, {})
            target[parts[-1]] = value
        if setting is not None:
            self.place(setting, NATIVE, f"{SLURM}.{path}")


def _same(key: str, value: str | None, model_value: str | None, release: Any) -> bool:
    return bool(normal_global(key, value, release) == normal_global(key, model_value, release))


class GlobalImport:
    """The global slurm.conf settings (and cgroup.conf) into cluster.slurm."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.release = view.release
        self.g = Globals(view)
        self.slurm_defaults = _defaults(SlurmSettings)
        self.daemon_defaults = _defaults(Daemons)

    def value(self, key: str) -> str | None:
        return self.view.value(key)

    def setting(self, key: str) -> Setting | None:
        found = self.view.settings.get(key)
        return found[-1] if found else None

    def run(self) -> Globals:
        g = self.g
        handled: set[str] = set()
        for key, settings in self.view.settings.items():
            handled.add(key)
            handler = getattr(self, f"key_{key.lower()}", None)
            if handler is not None:
                handler(settings)
            elif key in TIMEOUT_BY_KEY:
                self.timeout(settings[-1])
            elif key in POWER_BY_KEY:
                self.power(settings[-1])
            elif key in PRIORITY_BY_KEY or key == "PriorityType":
                self.priority(settings[-1])
            elif key in FIXED:
                self.fixed(settings[-1])
            else:
                self.other(settings[-1])
        self.omitted(handled)
        self.cgroup()
        return g

    def cgroup(self) -> None:
        """cgroup.conf: its keys (Slurm's defaults for those it leaves out) into cluster.slurm.cgroup."""
        cgroup: dict[str, Any] = {}
        typed = {"CgroupPlugin": "plugin", "CgroupMountpoint": "mountpoint"}
        flags = {
            "ConstrainCores": "constrain_cores",
            "ConstrainDevices": "constrain_devices",
            "ConstrainRAMSpace": "constrain_ram_space",
        }
        for key, setting in self.view.cgroup.items():
            value = setting.value.strip()
            lower = key.lower()
            if key in typed:
                if key == "CgroupPlugin" and value not in ("autodetect", "cgroup/v1", "cgroup/v2"):
                    self.g.refuse(
                        setting, f"CgroupPlugin {value}: gpucluster knows autodetect, cgroup/v1 and cgroup/v2"
                    )
                    continue
                default = CGROUP_DEFAULTS[lower]
                if value != default:
                    cgroup[typed[key]] = value
                self.g.place(setting, NATIVE, f"{SLURM}.cgroup.{typed[key]}")
            elif key in flags:
                self.g.place(setting, NATIVE, f"{SLURM}.cgroup.{flags[key]}")
            elif CGROUP_DEFAULTS.get(lower) == value.lower():
                self.g.place(setting, DEFAULT, reason=f"Slurm's default ({value})")
            else:
                cgroup.setdefault("extra", {})[key] = _int(value)
                self.g.place(setting, EXTRA, f"{SLURM}.cgroup.extra.{key}")
        for key, name in flags.items():
            given = self.view.cgroup.get(key)
            on = given is not None and given.value.strip().lower() in ("yes", "true", "1")
            if not on:
                cgroup[name] = False  # gpucluster's default is yes; Slurm's, when left out, no
        if "extra" in cgroup:
            cgroup["extra"] = dict(sorted(cgroup["extra"].items()))
        if cgroup:
            self.g.slurm["cgroup"] = cgroup

    # --- generic -------------------------------------------------------------------------------

    def other(self, setting: Setting) -> None:
        """A key of the release the model has no place for: extra, unless Slurm's default."""
        key = setting.key
        default = global_default(key, self.release)
        if default is not None and _same(key, setting.value, default, self.release):
            self.g.place(setting, DEFAULT, reason=f"Slurm's default ({default or 'none'})")
            return
        if (
            key in ("HealthCheckProgram", "HealthCheckInterval", "HealthCheckNodeState", "HealthCheckTimeout")
            and self.g.health_program
        ):
            return  # gpucluster's own health check: placed by key_healthcheckprogram
        self.g.extra[key] = _int(setting.value)
        self.g.place(setting, EXTRA, f"{SLURM}.extra.{key}")

    def fixed(self, setting: Setting) -> None:
        wanted = FIXED[setting.key]
        if setting.value == wanted:
            self.g.place(setting, NATIVE, reason="what gpucluster always writes")
        else:
            self.g.refuse(
                setting,
                f"gpucluster writes {setting.key}={wanted}: its roles set up munge on every host and run "
                "slurmctld as the packages' user slurm; change the site to that first",
            )

    def simple(self, path: str, value: Any, setting: Setting, default: Any) -> None:
        self.g.put(path, value, setting, default)

    # --- keys ----------------------------------------------------------------------------------

    def key_clustername(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        name = setting.value.lower()
        if not re.fullmatch(r"[a-z][a-z0-9_-]{0,39}", name):
            self.g.refuse(
                setting,
                "gpucluster's cluster names start with a letter and hold letters, digits, '-' and '_' "
                "(up to 40): rename the cluster first (sacctmgr and StateSaveLocation know it)",
            )
            return
        self.g.name = name
        self.g.place(setting, NATIVE, "cluster.name")

    def key_slurmctldhost(self, settings: list[Setting]) -> None:
        hosts: list[str] = []
        for setting in settings:
            name, _, address = setting.value.partition("(")
            if address and address.rstrip(")") != name:
                self.g.refuse(
                    setting,
                    f"the address {address.rstrip(')')} of {name}: gpucluster names controllers by host name "
                    "(give the address in DNS or /etc/hosts)",
                )
                continue
            hosts.append(name)
            self.g.place(setting, NATIVE, f"{SLURM}.controller")
        self.g.slurm["controller"] = hosts

    def key_controladdr(self, settings: list[Setting]) -> None:
        self.address(settings[-1], 0)

    def key_backupaddr(self, settings: list[Setting]) -> None:
        self.address(settings[-1], 1)

    def address(self, setting: Setting, index: int) -> None:
        hosts = [s.value.split("(")[0] for s in self.view.settings.get("SlurmctldHost", [])]
        if index < len(hosts) and setting.value == hosts[index]:
            self.g.place(setting, DROPPED, reason="the controller's own name: nothing to say")
            return
        self.g.refuse(
            setting,
            f"{setting.key} gives the address of a controller: gpucluster names controllers by host name "
            "(give the address in DNS or /etc/hosts); ControlAddr/BackupAddr are SlurmctldHost=name(address) "
            "since 18.08 and gone from 25.05",
        )

    def key_slurmctldport(self, settings: list[Setting]) -> None:
        self.simple("daemons.slurmctld_port", _int(settings[-1].value), settings[-1], 6817)

    def key_slurmdport(self, settings: list[Setting]) -> None:
        self.simple("daemons.slurmd_port", _int(settings[-1].value), settings[-1], 6818)

    def key_statesavelocation(self, settings: list[Setting]) -> None:
        self.simple("state_save_location", settings[-1].value, settings[-1], "/var/lib/slurm/slurmctld")

    def key_slurmdspooldir(self, settings: list[Setting]) -> None:
        self.simple("daemons.spool_dir", settings[-1].value, settings[-1], self.daemon_defaults["spool_dir"])

    def key_slurmctldpidfile(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        packaged = self.release.packaging.slurmctld_pid_file
        if _same("SlurmctldPidFile", setting.value, packaged, self.release):
            self.g.place(
                setting, NATIVE, f"{SLURM}.daemons.slurmctld_pid_file", "where the release's packages put it"
            )
            return
        directory = packaged.rsplit("/", 1)[0]
        if (
            self.release.packaging.daemons_run_as_slurm
            and not setting.value.startswith(directory + "/")
            and not setting.value.startswith("/var" + directory + "/")
        ):
            self.g.place(
                setting,
                MAPPED,
                f"{SLURM}.daemons.slurmctld_pid_file",
                f"{packaged}: the packages of Slurm {self.release.name} run slurmctld as SlurmUser with only {directory} writable",
            )
            self.g.adjusted.add("SlurmctldPidFile")
            return
        self.simple("daemons.slurmctld_pid_file", setting.value, setting, None)

    def key_slurmdpidfile(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        if _same("SlurmdPidFile", setting.value, self.daemon_defaults["slurmd_pid_file"], self.release):
            self.g.place(setting, NATIVE, f"{SLURM}.daemons.slurmd_pid_file")
        else:
            self.simple("daemons.slurmd_pid_file", setting.value, setting, None)

    def key_slurmctldlogfile(self, settings: list[Setting]) -> None:
        self.simple(
            "daemons.slurmctld_log_file",
            settings[-1].value,
            settings[-1],
            self.daemon_defaults["slurmctld_log_file"],
        )

    def key_slurmdlogfile(self, settings: list[Setting]) -> None:
        self.simple(
            "daemons.slurmd_log_file",
            settings[-1].value,
            settings[-1],
            self.daemon_defaults["slurmd_log_file"],
        )

    def key_slurmctlddebug(self, settings: list[Setting]) -> None:
        self.debug("slurmctld_debug", settings[-1])

    def key_slurmddebug(self, settings: list[Setting]) -> None:
        self.debug("slurmd_debug", settings[-1])

    def debug(self, field_name: str, setting: Setting) -> None:
        level = setting.value.lower()
        if level == "info":
            self.g.place(setting, DEFAULT, reason="Slurm's default (info)")
            return
        self.simple(f"daemons.{field_name}", level, setting, None)

    def key_debugflags(self, settings: list[Setting]) -> None:
        self.simple("daemons.debug_flags", split_list(settings[-1].value), settings[-1], [])

    def key_mpidefault(self, settings: list[Setting]) -> None:
        self.simple("mpi_default", settings[-1].value, settings[-1], "none")

    def key_mailprog(self, settings: list[Setting]) -> None:
        self.simple("mail_prog", settings[-1].value, settings[-1], self.slurm_defaults["mail_prog"])

    def key_returntoservice(self, settings: list[Setting]) -> None:
        self.simple("return_to_service", _int(settings[-1].value), settings[-1], 2)

    def key_schedulertype(self, settings: list[Setting]) -> None:
        self.simple("scheduler_type", _strip("sched", settings[-1].value), settings[-1], "backfill")

    def key_schedulerparameters(self, settings: list[Setting]) -> None:
        self.simple("scheduler_parameters", split_list(settings[-1].value), settings[-1], [])

    def key_selecttype(self, settings: list[Setting]) -> None:
        self.simple("select_type", _strip("select", settings[-1].value), settings[-1], "cons_tres")

    def key_selecttypeparameters(self, settings: list[Setting]) -> None:
        self.simple(
            "select_type_parameters", split_list(settings[-1].value), settings[-1], ["CR_Core_Memory"]
        )

    def key_preempttype(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        kind = _strip("preempt", setting.value)
        if kind == "none" and not self.value("PreemptMode"):
            self.g.place(setting, DEFAULT, reason="Slurm's default (no preemption)")
            return
        self.g.slurm.setdefault("preemption", {})["type"] = kind
        self.g.place(setting, NATIVE, f"{SLURM}.preemption.type")

    def key_preemptmode(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        modes = [m.upper() for m in split_list(setting.value)]
        if modes == ["OFF"] and not self.value("PreemptType"):
            self.g.place(setting, DEFAULT, reason="Slurm's default (OFF)")
            return
        self.g.slurm.setdefault("preemption", {})["mode"] = modes
        self.g.place(setting, NATIVE, f"{SLURM}.preemption.mode")

    def key_preemptexempttime(self, settings: list[Setting]) -> None:
        self.g.slurm.setdefault("preemption", {})["exempt_time"] = settings[-1].value
        self.g.place(settings[-1], NATIVE, f"{SLURM}.preemption.exempt_time")

    def key_preemptparameters(self, settings: list[Setting]) -> None:
        self.g.slurm.setdefault("preemption", {})["parameters"] = split_list(settings[-1].value)
        self.g.place(settings[-1], NATIVE, f"{SLURM}.preemption.parameters")

    def key_proctracktype(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        kind = _strip("proctrack", setting.value)
        if kind not in ("cgroup", "linuxproc", "pgid"):
            self.g.refuse(setting, f"gpucluster knows proctrack cgroup, linuxproc and pgid, not {kind}")
            return
        self.simple("proctrack", kind, setting, "cgroup")

    def key_taskplugin(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        names = [_strip("task", n) for n in split_list(setting.value)]
        unknown = [n for n in names if n not in ("cgroup", "affinity", "none")]
        if unknown:
            self.g.refuse(
                setting,
                f"gpucluster knows the task plugins cgroup, affinity and none, not {', '.join(unknown)}",
            )
            return
        if names == ["none"]:
            names = []
        self.simple("task_plugins", names, setting, ["cgroup", "affinity"])

    def key_jobacctgathertype(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        kind = _strip("jobacct_gather", setting.value)
        proctrack = _strip("proctrack", self.value("ProctrackType") or "proctrack/cgroup")
        derived = "cgroup" if proctrack == "cgroup" else "linux"
        self.simple("job_acct_gather_type", kind, setting, derived)

    def key_propagateresourcelimits(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        if setting.value.upper() == "ALL":
            self.g.place(setting, DEFAULT, reason="Slurm's default (ALL)")
            return
        self.simple("propagate_resource_limits", split_list(setting.value), setting, None)

    def key_propagateresourcelimitsexcept(self, settings: list[Setting]) -> None:
        self.simple("propagate_resource_limits_except", split_list(settings[-1].value), settings[-1], [])

    def key_prologflags(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        flags = split_list(setting.value)
        unknown = [f for f in flags if f not in self.release.prolog_flags]
        if unknown:
            self.g.refuse(setting, f"Slurm {self.release.name} knows no PrologFlags {', '.join(unknown)}")
            return
        self.simple("prolog_flags", flags, setting, [])

    def key_prolog(self, settings: list[Setting]) -> None:
        programs = []
        for setting in settings:
            if setting.value == HEALTH_PROGRAM and self.value("HealthCheckProgram") == HEALTH_PROGRAM:
                self.g.place(setting, NATIVE, f"{SLURM}.health.prolog")
                continue
            if setting.value == MPS_PROGRAM:
                self.g.place(
                    setting, NATIVE, MPS_PLACE, "gpucluster-mps, written where GPUs are shared by MPS"
                )
                continue
            programs.append(setting.value)
            self.g.place(setting, NATIVE, f"{SLURM}.prolog")
        if programs:
            self.g.slurm["prolog"] = programs

    def key_epilog(self, settings: list[Setting]) -> None:
        programs = []
        for setting in settings:
            if setting.value == MPS_PROGRAM:
                self.g.place(
                    setting, NATIVE, MPS_PLACE, "gpucluster-mps, written where GPUs are shared by MPS"
                )
                continue
            programs.append(setting.value)
            self.g.place(setting, NATIVE, f"{SLURM}.epilog")
        if programs:
            self.g.slurm["epilog"] = programs

    def key_taskprolog(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        if setting.value == MPS_PROGRAM:
            self.g.place(setting, NATIVE, MPS_PLACE, "gpucluster-mps, written where GPUs are shared by MPS")
            return
        self.other(setting)

    def key_slurmdparameters(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        values = split_list(setting.value)
        if "config_overrides" in values:
            self.g.slurm["config_overrides"] = True
            values = [v for v in values if v != "config_overrides"]
        self.simple("slurmd_parameters", values, setting, [])

    def key_slurmctldparameters(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        values = split_list(setting.value)
        if "enable_configless" in values:
            self.g.slurm["configless"] = True
            values = [v for v in values if v != "enable_configless"]
        self.simple("slurmctld_parameters", values, setting, [])

    def key_grestypes(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        types = [t.lower() for t in split_list(setting.value)]
        others = [t for t in types if t not in ("gpu", "shard", "mps")]
        if others:
            self.g.refuse(
                setting, f"gpucluster models GPUs (gres/gpu), shards and MPS only, not {', '.join(others)}"
            )
            return
        self.g.place(
            setting,
            NATIVE,
            "the node types' gpus",
            "written where nodes have GPUs (with their shards and MPS)",
        )

    def key_topologyplugin(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        kind = _strip("topology", setting.value)
        if kind in ("none", "default", "flat"):
            self.g.place(setting, DEFAULT, reason="no topology: Slurm's default")
        elif kind in ("tree", "block"):
            if not (self.view.switches or self.view.blocks):
                self.g.refuse(
                    setting, f"topology/{kind} without its switches: give topology.conf (or topology.yaml)"
                )
                return
            self.g.place(
                setting,
                NATIVE,
                "cluster.fabric",
                f"topology/{kind} with the topology file's switches and blocks",
            )
        else:
            self.g.refuse(
                setting, f"gpucluster renders topology/tree and topology/block, not topology/{kind}"
            )

    def key_accountingstoragetype(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        kind = _strip("accounting_storage", setting.value)
        if kind == "slurmdbd":
            self.g.place(setting, NATIVE, f"{SLURM}.accounting")
        elif kind == "none":
            self.g.place(setting, DEFAULT, reason="Slurm's default (no accounting)")
        else:
            self.g.refuse(
                setting, f"gpucluster's accounting is slurmdbd; accounting_storage/{kind} is not carried"
            )

    def accounting(self) -> dict[str, Any] | None:
        kind = self.value("AccountingStorageType") or ""
        return self.g.slurm.setdefault("accounting", {}) if kind.endswith("slurmdbd") else None

    def key_accountingstoragehost(self, settings: list[Setting]) -> None:
        self.accounting_key("host", settings[-1], settings[-1].value, None)

    def key_accountingstorageport(self, settings: list[Setting]) -> None:
        self.accounting_key("port", settings[-1], _int(settings[-1].value), 6819)

    def key_accountingstoragetres(self, settings: list[Setting]) -> None:
        self.accounting_key("tres", settings[-1], split_list(settings[-1].value), ...)

    def key_accountingstorageenforce(self, settings: list[Setting]) -> None:
        values = [v.lower() for v in split_list(settings[-1].value)]
        self.accounting_key("enforce", settings[-1], values, ["associations", "limits", "qos"])

    def accounting_key(self, name: str, setting: Setting, value: Any, default: Any) -> None:
        accounting = self.accounting()
        if accounting is None:
            self.other(setting)
            return
        if default is ... or value != default:
            accounting[name] = value
        self.g.place(setting, NATIVE, f"{SLURM}.accounting.{name}")

    def key_healthcheckprogram(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        if setting.value != HEALTH_PROGRAM:
            self.other(setting)
            return
        self.g.health_program = True
        health: dict[str, Any] = {}
        self.g.place(setting, NATIVE, f"{SLURM}.health")
        interval = self.setting("HealthCheckInterval")
        if interval is not None:
            if int(interval.value) != 300:
                health["interval"] = int(interval.value)
            self.g.place(interval, NATIVE, f"{SLURM}.health.interval")
        state = self.setting("HealthCheckNodeState")
        if state is not None:
            states = [s.upper() for s in split_list(state.value)]
            if states != ["ANY"]:
                health["node_state"] = states
            self.g.place(state, NATIVE, f"{SLURM}.health.node_state")
        timeout = self.setting("HealthCheckTimeout")
        if timeout is not None:
            effective = min(60, health.get("interval", 300) - 1)
            if int(timeout.value) != effective:
                health["timeout"] = int(timeout.value)
            self.g.place(timeout, NATIVE, f"{SLURM}.health.timeout")
        if HEALTH_PROGRAM not in [s.value for s in self.view.settings.get("Prolog", [])]:
            health["prolog"] = False
        self.g.slurm["health"] = health

    def timeout(self, setting: Setting) -> None:
        field_name = TIMEOUT_BY_KEY[setting.key]
        default = global_default(setting.key, self.release)
        if default is not None and _same(setting.key, setting.value, default, self.release):
            self.g.place(setting, DEFAULT, reason=f"Slurm's default ({default})")
            return
        self.g.slurm.setdefault("timeouts", {})[field_name] = _int(setting.value)
        self.g.place(setting, NATIVE, f"{SLURM}.timeouts.{field_name}")

    def power(self, setting: Setting) -> None:
        field_name = POWER_BY_KEY[setting.key]
        power = self.g.slurm.setdefault("power_save", {})
        value: Any = setting.value
        if setting.key == "SuspendTime":
            value = -1 if value.upper() in ("NONE", "INFINITE", "-1") else _int(value)
        elif setting.key in ("SuspendTimeout", "ResumeTimeout", "SuspendRate", "ResumeRate"):
            value = _int(value)
        elif setting.key == "SuspendExcNodes":
            if ":" in value:
                self.g.refuse(
                    setting, "SuspendExcNodes with a node count (`:N`) is not carried: list the nodes"
                )
                return
            value = value  # turned into inventory names by the node import
        elif setting.key in ("SuspendExcParts", "SuspendExcStates"):
            value = (
                split_list(value)
                if setting.key == "SuspendExcParts"
                else [v.upper() for v in split_list(value)]
            )
        power[field_name] = value
        self.g.place(setting, NATIVE, f"{SLURM}.power_save.{field_name}")

    def priority(self, setting: Setting) -> None:
        priority = self.g.slurm.setdefault("priority", {})
        if setting.key == "PriorityType":
            kind = _strip("priority", setting.value)
            if kind not in ("multifactor", "basic"):
                self.g.refuse(
                    setting, f"gpucluster knows priority/multifactor and priority/basic, not {kind}"
                )
                return
            if kind != "multifactor":
                priority["type"] = kind
            self.g.place(setting, NATIVE, f"{SLURM}.priority.type")
            return
        field_name = PRIORITY_BY_KEY[setting.key]
        value: Any = setting.value
        if field_name == "calc_period":
            value = int(minutes(value)) if minutes(value).isdigit() else value
        elif field_name == "favor_small":
            value = value.strip().upper() in ("YES", "1", "TRUE")
        elif field_name == "flags":
            value = split_list(value)
        elif field_name in ("fairshare", "qos", "age", "job_size", "partition", "assoc"):
            value = _int(value)
        priority[field_name] = value
        self.g.place(setting, NATIVE, f"{SLURM}.priority.{field_name}")

    # --- keys the site leaves out --------------------------------------------------------------

    def omitted(self, present: set[str]) -> None:
        """Keys gpucluster always writes that the site leaves out: the inventory says Slurm's value."""
        s = self.g.slurm
        release = self.release

        def absent(key: str) -> bool:
            return key not in present

        if absent("StateSaveLocation"):
            s["state_save_location"] = "/var/spool"
        if absent("SlurmdSpoolDir"):
            s.setdefault("daemons", {})["spool_dir"] = "/var/spool/slurmd"
        packaged = release.packaging.slurmctld_pid_file
        if absent("SlurmctldPidFile") and not _same("SlurmctldPidFile", None, packaged, release):
            if release.packaging.daemons_run_as_slurm:
                self.g.placements.append(
                    Placement(
                        "",
                        "SlurmctldPidFile (left out: /var/run/slurmctld.pid)",
                        MAPPED,
                        f"{SLURM}.daemons.slurmctld_pid_file",
                        f"{packaged}: the packages of Slurm {release.name} run slurmctld as SlurmUser "
                        f"with only {packaged.rsplit('/', 1)[0]} writable",
                    )
                )
                self.g.adjusted.add("SlurmctldPidFile")
            else:
                s.setdefault("daemons", {})["slurmctld_pid_file"] = "/run/slurmctld.pid"
        for key, name in (("SlurmctldLogFile", "slurmctld_log_file"), ("SlurmdLogFile", "slurmd_log_file")):
            if absent(key):
                s.setdefault("daemons", {})[name] = None
        if absent("MailProg"):
            s["mail_prog"] = "/bin/mail"
        if absent("ReturnToService"):
            s["return_to_service"] = 0
        if absent("SelectType") and release.cons_res:
            s["select_type"] = "linear"
        select = s.get("select_type", "cons_tres")
        if absent("SelectTypeParameters") and select == "linear":
            s["select_type_parameters"] = []
        if absent("TaskPlugin"):
            s["task_plugins"] = []
        if absent("JobAcctGatherType"):
            s["job_acct_gather_type"] = "none"
        accounting = s.get("accounting")
        if accounting is not None:
            if absent("AccountingStorageTRES"):
                accounting["tres"] = []
            if absent("AccountingStorageEnforce"):
                accounting["enforce"] = []
        priority = s.get("priority")
        if priority is not None and absent("PriorityType"):
            default = _strip("priority", global_default("PriorityType", release) or "")
            if default != "multifactor":
                priority["type"] = default


TIMEOUT_BY_KEY = {key: name for name, key in TIMEOUT_KEYS.items()}
POWER_BY_KEY = {
    **{key: name for name, key in POWER_SAVE_KEYS.items()},
    "SuspendExcNodes": "exclude_nodes",
    "SuspendExcParts": "exclude_partitions",
    "SuspendExcStates": "exclude_states",
}
PRIORITY_BY_KEY = {key: name for name, key in PRIORITY_KEYS.items()}

# Sanity: every key the model holds has its handler above.
_HANDLED = {*TIMEOUT_BY_KEY, *POWER_BY_KEY, *PRIORITY_BY_KEY, "PriorityType"}
assert all(key in _HANDLED or hasattr(GlobalImport, f"key_{key.lower()}") for key in MODELLED), [
    key for key in MODELLED if key not in _HANDLED and not hasattr(GlobalImport, f"key_{key.lower()}")
]
