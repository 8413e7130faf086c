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
from gpucluster.model.releases import SlurmVersion
from gpucluster.model.spec import CONTROLLER_ADDR, DBD_ADDR, Daemons, SlurmSettings
from gpucluster.render.health import HEALTH_PROGRAM
from gpucluster.slurm import keys
from gpucluster.slurm.defaults import CGROUP_DEFAULTS, global_default, minutes
from gpucluster.slurm.settings import POWER_SAVE_KEYS, PRIORITY_KEYS, TIMEOUT_KEYS
from gpucluster.slurm.sharing import MPS_PROGRAM
from gpucluster.slurm.view import Setting, View, split_list
from gpucluster.slurm.written import FIXED
from gpucluster.slurm_import.compare import normal_global

MPS_PLACE = "cluster.node_types.<type>.gpus.sharing.mps"

NATIVE, EXTRA, MAPPED, DROPPED, DEFAULT, ASSUMED, REFUSED = (
    "native",
    "extra",
    "mapped",
    "dropped",
    "default",
    "assumed",
    "refused",
)
KINDS = (NATIVE, EXTRA, MAPPED, DROPPED, DEFAULT, ASSUMED, REFUSED)
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
    # Host -> hosts.yml variables naming its addresses (model.spec.SLURM_ADDRESS_VARS).
    addresses: dict[str, dict[str, str]] = field(default_factory=dict)
    # What the input lacks, so that --check cannot compare it (a node's gres.conf, a directory).
    not_compared: list[str] = field(default_factory=list)

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
            entry = keys.entry(keys.SLURM_CONF, key)
            if handler is not None:
                handler(settings)
            elif entry is not None and entry.model.startswith(f"{SLURM}.") and key in PLAIN:
                self.plain(entry, settings[-1])
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
        self.plugstack()
        self.other_files()
        self.accounting_address()
        return g

    def plugstack(self) -> None:
        """plugstack.conf's plugins, in order, as cluster.slurm.plugstack (an include of files the
        input has is their lines; one of files it lacks stays an include of the hosts' own)."""
        lines = self.view.plugstack
        if not lines:
            return
        self.g.slurm["plugstack"] = [line for line, _ in lines]
        for line, where in lines:
            kept = line.startswith("include ")
            reason = "the hosts' own files (not in the input): kept as an include" if kept else ""
            self.g.placements.append(Placement(str(where), line, NATIVE, f"{SLURM}.plugstack", reason))

    def accounting_address(self) -> None:
        """The accounting host as an inventory host: AccountingStorageHost where it names one;
        where it is `localhost` (Slurm's default when left out) or a controller's address, that
        controller, with the address slurmctld uses as its hosts.yml slurm_dbd_addr (no host
        `localhost` for Ansible to configure)."""
        accounting = self.g.slurm.get("accounting")
        if accounting is None:
            return
        controllers = list(self.g.slurm.get("controller", []))
        given = accounting.get("host")
        written = f"AccountingStorageHost={given}"
        if given is None:
            given = "localhost"
            written = "AccountingStorageHost (left out: Slurm's default, localhost)"
        by_address = {self.g.addresses.get(c, {}).get(CONTROLLER_ADDR): c for c in controllers}
        virtual = self.value("SlurmctldAddr")
        if virtual and controllers:
            by_address.setdefault(virtual, controllers[0])
        if given in ("localhost", "127.0.0.1", "::1") and controllers:
            host = controllers[0]
        elif given in by_address:
            host = by_address[given]
        else:
            return
        accounting["host"] = host
        self.g.addresses.setdefault(host, {})[DBD_ADDR] = given
        self.g.placements.append(
            Placement(
                "",
                written,
                NATIVE,
                f"{SLURM}.accounting.host {host} and hosts.yml {host}: {DBD_ADDR}",
                f"slurmdbd runs on the controller {host}, which slurmctld reaches as {given}",
            )
        )

    def other_files(self) -> None:
        """Files beside slurm.conf that Slurm reads and gpucluster does not write: refused (the
        site's settings there would be lost), or dropped where the target release reads none."""
        from gpucluster.slurm.view import OTHER_FILES

        for name, path in sorted(self.view.other_files.items()):
            where = f"{self.view.shown.get(path, path)}:1"
            if name == "cgroup_allowed_devices_file.conf" and self.release.version >= SlurmVersion.parse(
                "22.05"
            ):
                self.g.placements.append(
                    Placement(
                        where, name, DROPPED, reason="Slurm 22.05 removed cgroup_allowed_devices_file.conf"
                    )
                )
                continue
            self.g.placements.append(Placement(where, name, REFUSED))
            self.g.problems.append(
                Problem(
                    where.rsplit(":", 1)[0],
                    name,
                    f"refused: {OTHER_FILES[name]} reads it, and gpucluster does not write it: its "
                    "settings would be lost (remove it, or keep the site's copy out of gpucluster's hands)",
                    1,
                )
            )

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
                f"gpucluster writes {setting.key}={wanted}: its roles set up munge on every host; "
                "change the site to that first",
            )

    def simple(self, path: str, value: Any, setting: Setting, default: Any) -> None:
        self.g.put(path, value, setting, default)

    def plain(self, key: keys.Key, setting: Setting) -> None:
        """A key the model holds as it is (the table of keys says where and of what kind): its
        value in the model's terms, left out where it is the model's default; where the model
        leaves the key to Slurm (no default of its own), Slurm's default is placed as such."""
        path = key.model[len(SLURM) + 1 :]
        default = model_default(path)
        slurm_default = key.default_at(self.release)
        if (
            default is None
            and slurm_default is not None
            and _same(key.name, setting.value, slurm_default, self.release)
        ):
            self.g.place(setting, DEFAULT, reason=f"Slurm's default ({slurm_default or 'none'})")
            return
        self.g.put(path, model_value(key, setting.value), setting, default)

    # --- keys ----------------------------------------------------------------------------------

    def key_clustername(self, settings: list[Setting]) -> None:
        """cluster.name; a name Slurm takes that gpucluster's names do not (dots, capitals, a
        leading digit) is kept as cluster.slurm.cluster_name, with cluster.name made from it."""
        setting = settings[-1]
        written = setting.value.strip()
        name = written.lower()
        if re.fullmatch(r"[a-z][a-z0-9_-]{0,39}", name):
            self.g.name = name
            self.g.place(
                setting, NATIVE, "cluster.name", "Slurm reads it in lower case" if name != written else ""
            )
            return
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", written):
            self.g.refuse(
                setting, f"ClusterName `{written}`: gpucluster takes letters, digits, '.', '-' and '_'"
            )
            return
        base = re.sub(r"[^a-z0-9_-]+", "-", name).strip("-")[:40].rstrip("-")
        self.g.name = base if base[:1].isalpha() else f"c-{base}"[:40]
        self.g.slurm["cluster_name"] = written
        self.g.place(
            setting,
            NATIVE,
            f"{SLURM}.cluster_name",
            f"written as it is; cluster.name `{self.g.name}` (gpucluster's names: letters, digits, '-', '_')",
        )

    def key_slurmuser(self, settings: list[Setting]) -> None:
        setting = settings[-1]
        user = setting.value.strip()
        if not re.fullmatch(r"[a-z_][a-z0-9_.-]{0,31}", user):
            self.g.refuse(setting, f"SlurmUser `{user}` is not a Unix user name")
            return
        self.g.put("slurm_user", user, setting, "slurm")

    def key_slurmctldhost(self, settings: list[Setting]) -> None:
        """The controllers in order; `name(address)` gives the address slurmd and the commands
        reach it at (hosts.yml slurm_controller_addr, dropped where it is the name itself)."""
        hosts: list[str] = []
        for setting in settings:
            name, _, rest = setting.value.strip().partition("(")
            address = rest.rstrip(")").strip()
            hosts.append(name)
            if address and address != name:
                self.g.addresses.setdefault(name, {})[CONTROLLER_ADDR] = address
                self.g.place(setting, NATIVE, f"{SLURM}.controller and hosts.yml {name}: {CONTROLLER_ADDR}")
            else:
                self.g.place(setting, NATIVE, f"{SLURM}.controller")
        self.g.slurm["controller"] = hosts

    def key_controladdr(self, settings: list[Setting]) -> None:
        self.address(settings[-1], 0)

    def key_backupaddr(self, settings: list[Setting]) -> None:
        self.address(settings[-1], 1)

    def address(self, setting: Setting, index: int) -> None:
        """ControlAddr/BackupAddr: the address of the first/second controller, which Slurm 18.08
        and later write SlurmctldHost=name(address) (25.05 reads only that)."""
        hosts = [s.value.split("(")[0] for s in self.view.settings.get("SlurmctldHost", [])]
        address = setting.value.strip()
        if index >= len(hosts):
            self.g.refuse(setting, f"{setting.key} without a controller {index + 1} to be the address of")
            return
        if address == hosts[index]:
            self.g.place(setting, DROPPED, reason="the controller's own name: nothing to say")
            return
        self.g.addresses.setdefault(hosts[index], {})[CONTROLLER_ADDR] = address
        self.g.place(
            setting,
            MAPPED,
            f"hosts.yml {hosts[index]}: {CONTROLLER_ADDR}",
            f"{setting.key} is SlurmctldHost={hosts[index]}({address}) since Slurm 18.08 (25.05 reads only that)",
        )

    def key_statesavelocation(self, settings: list[Setting]) -> None:
        self.simple("state_save_location", settings[-1].value, settings[-1], "/var/lib/slurm/slurmctld")

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
            # The site's file name, in the one directory the packaged unit lets slurmctld write.
            moved = f"{directory}/{setting.value.rsplit('/', 1)[-1]}"
            if moved != packaged:
                self.g.slurm.setdefault("daemons", {})["slurmctld_pid_file"] = moved
            self.g.place(
                setting,
                MAPPED,
                f"{SLURM}.daemons.slurmctld_pid_file",
                f"{moved}: the packages of Slurm {self.release.name} run slurmctld as SlurmUser with only {directory} writable",
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

    def key_defcpupergpu(self, settings: list[Setting]) -> None:
        self.per_gpu(settings[-1])

    def key_defmempergpu(self, settings: list[Setting]) -> None:
        self.per_gpu(settings[-1])

    def per_gpu(self, setting: Setting) -> None:
        """A global DefCpuPerGPU/DefMemPerGPU: the default of every partition that gives none,
        written on their lines (gpucluster writes these per partition)."""
        if not setting.value.strip().isdigit():
            self.g.refuse(setting, f"{setting.key}={setting.value}: a number")
            return
        if not self.view.partitions:
            self.g.place(setting, DROPPED, reason="no partition takes it: slurm.conf defines none")
            return
        self.g.place(
            setting,
            MAPPED,
            "cluster.partitions[].cpus_per_gpu"
            if setting.key == "DefCpuPerGPU"
            else "cluster.partitions[].memory_per_gpu_mb",
            "slurm.conf's default of every partition that gives none: written on their lines",
        )

    def key_plugindir(self, settings: list[Setting]) -> None:
        """PluginDir names where the site's own build keeps its plugins; the packages gpucluster
        installs look where they were built to (Debian's: /usr/lib/<multiarch>/slurm-wlm), and
        hold no plugin at the site's path. Left out on purpose, and said so."""
        setting = settings[-1]
        self.g.place(
            setting,
            MAPPED,
            "the packages' own PluginDir",
            f"left out: the Slurm packages of {self.release.name} that gpucluster installs keep their plugins "
            "where their build looks (Debian: /usr/lib/<multiarch>/slurm-wlm)",
        )
        self.g.adjusted.add("PluginDir")

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
            self.g.slurm.setdefault("accounting", {})
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

        if absent("SlurmUser"):
            s["slurm_user"] = "root"  # Slurm's default
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


def model_default(path: str) -> Any:
    """The default of a setting of cluster.slurm (`daemons.spool_dir`); None where it has none."""
    model: Any = SlurmSettings
    info = None
    for part in path.split("."):
        fields = getattr(model, "model_fields", None)
        if fields is None or part not in fields:
            return None
        info = fields[part]
        model = next(
            (
                a
                for a in getattr(info.annotation, "__args__", (info.annotation,))
                if hasattr(a, "model_fields")
            ),
            info.annotation,
        )
    if info is None:
        return None
    if info.default_factory is not None:
        return info.default_factory()  # type: ignore[call-arg,unused-ignore]
    return None if info.is_required() else info.default


def model_value(key: keys.Key, text: str) -> Any:
    """A value of a Slurm file in the model's terms, as the key's kind says."""
    if key.kind in (keys.SET, keys.LIST, keys.PLUGINS):
        items = split_list(text)
        return [_strip(key.plugin, item) for item in items] if key.plugin else items
    if key.kind == keys.PLUGIN:
        return _strip(key.plugin, text.strip())
    if key.kind == keys.LEVEL:
        return text.strip().lower()
    if key.kind == keys.FLAG:
        return text.strip().lower() in ("yes", "1", "true", "y")
    if key.kind in (keys.TIME, keys.PATH):
        return text.strip()
    return _int(text)


TIMEOUT_BY_KEY = {key: name for name, key in TIMEOUT_KEYS.items()}
POWER_BY_KEY = {
    **{key: name for name, key in POWER_SAVE_KEYS.items()},
    "SuspendExcNodes": "exclude_nodes",
    "SuspendExcParts": "exclude_partitions",
    "SuspendExcStates": "exclude_states",
}
PRIORITY_BY_KEY = {key: name for name, key in PRIORITY_KEYS.items()}

# Sanity: every key the model holds has its handler above.
# Keys the model holds as they are (the generic path of the import, GlobalImport.plain): every
# key of the table of keys with a place in cluster.slurm that no handler above reads in other terms.
PLAIN = frozenset(
    key.name
    for key in keys.SLURM_CONF_KEYS
    if key.model.startswith(f"{SLURM}.")
    and not hasattr(GlobalImport, f"key_{key.name.lower()}")
    and key.name not in POWER_BY_KEY
    and key.name not in PRIORITY_BY_KEY
    and key.name != "PriorityType"
    and key.name not in FIXED
)
