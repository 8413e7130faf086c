"""A Slurm cluster's configuration as the target release reads it: the site's files (or rendered
ones) parsed, old keys and values mapped to the release's (gpucluster.slurm.oldkeys), keys spelt
as the release spells them, NodeName/PartitionName DEFAULT lines applied, NodeSets and hostlists
expanded, gres.conf per host, the switch tree and blocks of topology.conf or topology.yaml.

The importer turns a View into an inventory; the comparison (gpucluster.slurm_import.compare) holds two
Views side by side. Every setting keeps the file and line it came from, and what became of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpucluster.errors import InventoryError, Problem
from gpucluster.hostlists import expand, split_top_level
from gpucluster.model.releases import RELEASES, Release
from gpucluster.model.spec import FLAT_TOPOLOGY, TREE_TOPOLOGY
from gpucluster.slurm.conf_keys import CGROUP_KEYS, KEYS, NODE_KEYS, PARTITION_KEYS
from gpucluster.slurm.defaults import PLUGIN_TYPES
from gpucluster.slurm.oldkeys import (
    DEFAULT_STORAGE,
    Translation,
    translate,
    translate_cgroup,
    translate_node,
    translate_partition,
)
from gpucluster.slurm.parse import (
    EVERY_LINE,
    SLURM_RECORDS,
    TOPOLOGY_RECORDS,
    ConfFile,
    Option,
    Reader,
    Record,
    Where,
    read_plugstack,
    read_topology_yaml,
)

GRES_OPTIONS = (
    "name",
    "type",
    "file",
    "cores",
    "cpus",
    "count",
    "links",
    "flags",
    "multiplefiles",
    "autodetect",
)
# Global keys that may be given on several lines, each adding a value (the others: last wins).
MULTI_KEYS = ("SlurmctldHost",)
# Comma lists an old key maps into (FastSchedule=2, SallocDefaultCommand, cgroup.conf TaskAffinity):
# the mapped value joins the site's own.
MERGED_KEYS = ("SlurmdParameters", "LaunchParameters", "TaskPlugin")
SEVERAL_PROLOGS = ("Prolog", "Epilog")


@dataclass
class Setting:
    """One setting as the target release reads it."""

    key: str  # the release's spelling
    value: str
    where: Where | None
    written: str = ""  # `Key=Value` as the file wrote it, when that was other than this
    translation: Translation | None = None


@dataclass(frozen=True)
class Disposition:
    """What became of a setting of the files that the view does not keep as it was written."""

    where: Where | None
    written: str
    kind: str  # mapped, dropped, refused, default
    reason: str
    becomes: str = ""


@dataclass
class NodeDef:
    """The options of one NodeName line (DEFAULT lines applied), shared by its hosts."""

    options: dict[str, Setting]
    where: Where


@dataclass
class PartitionDef:
    name: str
    hosts: list[str]
    options: dict[str, Setting]
    where: Where
    nodes_written: str = ""


@dataclass
class GresDef:
    """One gres.conf line, for the hosts it applies to."""

    options: dict[str, str]  # lower-case key -> value
    where: Where


@dataclass
class SwitchDef:
    switches: list[str]
    nodes: list[str]
    where: Where | None


@dataclass
class View:
    release: Release
    settings: dict[str, list[Setting]] = field(default_factory=dict)
    hosts: dict[str, NodeDef] = field(default_factory=dict)
    nodesets: dict[str, list[str]] = field(default_factory=dict)
    partitions: list[PartitionDef] = field(default_factory=list)
    gres: dict[str, list[GresDef]] = field(default_factory=dict)
    autodetect: dict[str, str] = field(default_factory=dict)
    switches: dict[str, SwitchDef] = field(default_factory=dict)
    blocks: dict[str, list[str]] = field(default_factory=dict)
    block_sizes: list[int] = field(default_factory=list)
    topology_default: str | None = None  # tree or block
    # Switch or block -> the names its Nodes= lists that no NodeName defines (Slurm ignores them).
    unknown_in_topology: dict[str, list[str]] = field(default_factory=dict)
    # topology.yaml (25.05+): each block topology's blocks and sizes, in the file's order; the
    # default topology's name; and each topology's name -> the name gpucluster gives it (a
    # partition's Topology= is written with that).
    block_sets: dict[str, tuple[list[str], list[int]]] = field(default_factory=dict)
    default_name: str | None = None
    topology_renamed: dict[str, str] = field(default_factory=dict)
    cgroup: dict[str, Setting] = field(default_factory=dict)
    # plugstack.conf as slurmd reads it: each line (an `include` of files the input has replaced
    # by their lines; one of files it lacks kept as written).
    plugstack: list[tuple[str, Where]] = field(default_factory=list)
    # Other files Slurm reads that the input has (name -> path): the importer decides.
    other_files: dict[str, Path] = field(default_factory=dict)
    dispositions: list[Disposition] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    shown: dict[Path, str] = field(default_factory=dict)  # how each file read is named

    def value(self, key: str) -> str | None:
        found = self.settings.get(key)
        return found[-1].value if found else None


@dataclass(frozen=True)
class SiteFiles:
    """Where a cluster's configuration files are. gres: (hosts the copy is for, or None for the
    shared gres.conf; file)."""

    slurm_conf: Path
    gres: tuple[tuple[str | None, Path], ...] = ()
    topology: Path | None = None
    cgroup: Path | None = None
    plugstack: Path | None = None
    others: tuple[Path, ...] = ()  # other files of OTHER_FILES the directory has

    @classmethod
    def in_directory(cls, directory: Path, extra_gres: tuple[tuple[str | None, Path], ...] = ()) -> SiteFiles:
        """slurm.conf of a directory (or the file itself) with the files Slurm reads beside it."""
        conf = directory / "slurm.conf" if directory.is_dir() else directory
        base = conf.parent
        gres = ((None, base / "gres.conf"),) if (base / "gres.conf").is_file() else ()
        topology = next((base / n for n in ("topology.yaml", "topology.conf") if (base / n).is_file()), None)
        cgroup = base / "cgroup.conf" if (base / "cgroup.conf").is_file() else None
        plugstack = base / "plugstack.conf" if (base / "plugstack.conf").is_file() else None
        others = tuple(base / name for name in OTHER_FILES if (base / name).is_file())
        return cls(conf, gres + extra_gres, topology, cgroup, plugstack, others)


# Files beside slurm.conf that Slurm's daemons or commands read, other than slurm.conf, gres.conf,
# topology.conf/topology.yaml, cgroup.conf and plugstack.conf: file -> who reads it.
OTHER_FILES = {
    "acct_gather.conf": "the AcctGather plugins (energy, interconnect, filesystem, profile)",
    "job_container.conf": "JobContainerType=job_container/tmpfs",
    "oci.conf": "the OCI container runtime (scrun, srun --container)",
    "helpers.conf": "NodeFeaturesPlugins=node_features/helpers",
    "burst_buffer.conf": "BurstBufferType",
    "mpi.conf": "the MPI plugins' own settings",
    "ext_sensors.conf": "ExtSensorsType",
    "knl_cray.conf": "NodeFeaturesPlugins=knl_cray",
    "knl_generic.conf": "NodeFeaturesPlugins=knl_generic",
    "cli_filter.lua": "CliFilterPlugins=cli_filter/lua",
    "job_submit.lua": "JobSubmitPlugins=lua",
    "cgroup_allowed_devices_file.conf": "cgroup.conf AllowedDevicesFile (until 21.08)",
}


def _lower_map(names: frozenset[str]) -> dict[str, str]:
    return {name.lower(): name for name in names}


class ViewBuilder:
    """Builds a View, collecting every problem; raises InventoryError with all of them at the end."""

    def __init__(self, release: Release) -> None:
        self.release = release
        self.view = View(release)
        self.problems: list[Problem] = []
        self.keys = _lower_map(KEYS[release.name])
        self.node_keys = _lower_map(NODE_KEYS[release.name])
        self.partition_keys = _lower_map(PARTITION_KEYS[release.name])
        self.cgroup_keys = _lower_map(CGROUP_KEYS[release.name])
        self.default_storage: list[Option] = []
        self.any_keys: dict[str, list[str]] = {}
        for name, keys in KEYS.items():
            for key in keys:
                self.any_keys.setdefault(key.lower(), []).append(name)

    def fail(self, where: Where | None, path: str, message: str) -> None:
        if where is None:
            self.problems.append(Problem("", path, message))
        else:
            self.problems.append(Problem(where.file, path, message, where.line))

    def note(self, option: Option | None, kind: str, reason: str, becomes: str = "") -> None:
        written = f"{option.key}={option.value}" if option else ""
        self.view.dispositions.append(
            Disposition(option.where if option else None, written, kind, reason, becomes)
        )

    # --- slurm.conf ------------------------------------------------------------------------

    def first_without(self, lower: str) -> str | None:
        """The first release gpucluster knows without the key, when an older one had it."""
        had = self.any_keys.get(lower)
        if not had:
            return None
        ordered = sorted(RELEASES.values(), key=lambda r: r.version)
        last = max(RELEASES[name].version for name in had)
        return next((r.name for r in ordered if r.version > last), None)

    def add_global(self, option: Option) -> None:
        lower = option.lower
        if lower.startswith("defaultstorage") and lower[len("defaultstorage") :] in _DEFAULT_STORAGE:
            self.default_storage.append(option)  # decided once every key is read
            return
        if lower in ("controladdr", "backupaddr"):
            # Decided with the controller's name (what the importer makes of addresses).
            name = "ControlAddr" if lower == "controladdr" else "BackupAddr"
            self.view.settings[name] = [Setting(name, option.value, option.where)]
            return
        translation = translate(option.key, option.value, self.release, None)
        if translation is None and lower not in self.keys:
            if lower in self.any_keys:
                newer = [n for n in self.any_keys[lower] if RELEASES[n].version > self.release.version]
                if newer and not any(
                    RELEASES[n].version < self.release.version for n in self.any_keys[lower]
                ):
                    translation = Translation(
                        (),
                        f"Slurm {self.release.name} has no {option.key} (Slurm {newer[0]} added it)",
                        refused=True,
                    )
                else:
                    translation = translate(option.key, option.value, self.release, self.first_without(lower))
            if translation is None:
                self.fail(option.where, option.key, unknown_key(option.key, self.any_keys))
                return
        if translation is not None:
            if translation.kind != "mapped":
                # A mapped setting is placed where it lands (the importer), with this reason.
                self.note(option, translation.kind, translation.reason)
            for key, value in translation.settings:
                self.store(Option(key, value, option.where), translation, f"{option.key}={option.value}")
            return
        self.store(option, None, "")

    def settle_memory_enforcement(self) -> None:
        """MemLimitEnforce=yes (removed in 19.05) became JobAcctGatherParams=OverMemoryKill, which
        slurmctld refuses beside the cgroup's memory confinement (task/cgroup with ConstrainRAMSpace
        or ConstrainSwapSpace): where the cgroup confines memory, the mapped value is dropped, the
        cgroup enforcing the limit as it did beside MemLimitEnforce."""
        found = self.view.settings.get("JobAcctGatherParams")
        if not found or not found[-1].written.lower().startswith("memlimitenforce"):
            return
        setting = found[-1]
        cgroup = self.view.cgroup

        def on(name: str) -> bool:
            return name in cgroup and cgroup[name].value.strip().lower() in ("yes", "true", "1")

        confined = [name for name in ("ConstrainRAMSpace", "ConstrainSwapSpace") if on(name)]
        if "cgroup" not in (self.view.value("TaskPlugin") or "") or not confined:
            return
        rest = [v for v in split_list(setting.value) if v.lower() != "overmemorykill"]
        if rest:
            self.view.settings["JobAcctGatherParams"] = [
                Setting(setting.key, ",".join(rest), setting.where, "", None)
            ]
        else:
            del self.view.settings["JobAcctGatherParams"]
        key, _, value = setting.written.partition("=")
        if setting.where is not None:
            self.note(
                Option(key, value, setting.where),
                "dropped",
                "Slurm 19.05 removed MemLimitEnforce; its successor JobAcctGatherParams=OverMemoryKill "
                f"cannot stand beside task/cgroup with {confined[0]} (slurmctld refuses both), which "
                "enforces the memory limit here",
            )

    def apply_default_storage(self) -> None:
        """DefaultStorage{Type,Host,Port,User,Pass,Loc} (removed in 21.08): the AccountingStorage
        and JobComp keys of the same name the file leaves out took their value (read_config.c of
        20.11: JobComp only with a JobCompType, and never the type slurmdbd)."""
        settings = self.view.settings
        for option in self.default_storage:
            part = _DEFAULT_STORAGE[option.lower[len("defaultstorage") :]]
            value = option.value.strip()
            targets: list[tuple[str, str]] = []
            if part != "Loc" and f"AccountingStorage{part}" not in settings:
                targets.append(
                    (f"AccountingStorage{part}", f"accounting_storage/{value}" if part == "Type" else value)
                )
            job_comp = self.view.value("JobCompType") or ""
            if part == "Type":
                if "JobCompType" not in settings and value.lower() != "slurmdbd":
                    targets.append(("JobCompType", f"jobcomp/{value}"))
            elif f"JobComp{part}" not in settings and job_comp and not job_comp.endswith("/none"):
                targets.append((f"JobComp{part}", value))
            reason = (
                f"Slurm 21.08 removed {option.key}, the default of the AccountingStorage{part} and "
                f"JobComp{part} the file leaves out"
            )
            if not targets:
                self.note(option, "dropped", f"{reason}: the file sets both (or keeps no job completion)")
                continue
            translation = Translation(tuple(targets), reason)
            for key, target_value in targets:
                self.store(
                    Option(key, target_value, option.where), translation, f"{option.key}={option.value}"
                )

    def store(self, option: Option, translation: Translation | None, written: str) -> None:
        key = self.keys.get(option.lower, option.key)
        value = canonical_value(key, option.value, self.release)
        if (value != option.value or key != option.key) and not written:
            written = f"{option.key}={option.value}"  # as the file wrote it
        setting = Setting(key, value, option.where, written, translation)
        several = key in MULTI_KEYS or (key in SEVERAL_PROLOGS and self.release.several_prologs)
        earlier_setting = self.view.settings.get(key)
        if (
            key in MERGED_KEYS
            and earlier_setting
            and (translation is not None or earlier_setting[-1].translation is not None)
        ):
            # A mapped old key adds its value to the site's own line, whichever comes first.
            merged = earlier_setting[-1]
            values = list(dict.fromkeys([*split_list(merged.value), *split_list(value)]))
            kept = translation or merged.translation
            setting = Setting(key, ",".join(values), option.where, written or merged.written, kept)
            self.view.settings[key] = [setting]
            return
        if several:
            self.view.settings.setdefault(key, []).append(setting)
            return
        earlier = self.view.settings.get(key)
        if earlier:
            before = earlier[-1]
            self.view.dispositions.append(
                Disposition(
                    before.where,
                    before.written or f"{before.key}={before.value}",
                    "dropped",
                    f"{key} is set again at {option.where}: Slurm keeps the last line (and logs an error)",
                )
            )
        self.view.settings[key] = [setting]

    def read_slurm_conf(self, conf: ConfFile) -> None:
        self.view.files += conf.files
        for option in conf.settings:
            self.add_global(option)
        self.apply_default_storage()
        default_node: dict[str, Setting] = {}
        default_partition: dict[str, Setting] = {}
        for record in conf.records:
            if record.kind == "NodeName":
                default_node = self.add_nodes(record, default_node)
            elif record.kind == "NodeSet":
                self.add_nodeset(record)
        for record in conf.records:
            if record.kind == "PartitionName":
                default_partition = self.add_partition(record, default_partition)
            elif record.kind in ("DownNodes", "FrontendName"):
                self.fail(
                    record.where,
                    f"{record.kind}={record.name}",
                    f"{record.kind} lines are not carried: node states are set with scontrol; "
                    "front end nodes are for Cray systems only",
                )
        if not self.view.hosts:
            self.fail(
                Where(conf.files[0], 1) if conf.files else None,
                "",
                "not a slurm.conf: it defines no NodeName",
            )

    def node_options(self, record: Record) -> dict[str, Setting]:
        options: dict[str, Setting] = {}
        has_cpus = any(o.lower == "cpus" for o in record.options)
        for option in record.options:
            if option.lower == "procs" and has_cpus:
                # Slurm reads CPUs when a line gives both (read_config.c).
                self.note(option, "dropped", "the line gives CPUs=, which Slurm reads instead of Procs=")
                continue
            translation = translate_node(option.key, option.value)
            pairs = translation.settings if translation else ((option.key, option.value),)
            for key, value in pairs:
                lower = key.lower()
                name = "Feature" if lower == "features" else self.node_keys.get(lower)
                if name is None:
                    self.fail(
                        option.where, key, f"not an option of NodeName lines in Slurm {self.release.name}"
                    )
                    continue
                options[name] = Setting(
                    name, value, option.where, f"{option.key}={option.value}", translation
                )
        return options

    def add_nodes(self, record: Record, default: dict[str, Setting]) -> dict[str, Setting]:
        options = self.node_options(record)
        if record.name.upper() == "DEFAULT":
            self.note(
                Option("NodeName", record.name, record.where),
                "native",
                "",
                "the node types of the lines below",
            )
            return {**default, **options}
        self.note(
            Option("NodeName", record.name, record.where), "native", "", "hosts.yml groups and cluster.nodes"
        )
        try:
            names = expand(record.name)
        except Exception as exc:
            self.fail(record.where, "NodeName", f"`{record.name}` is not a Slurm hostlist ({exc})")
            return default
        definition = NodeDef({**default, **options}, record.where)
        for host in names:
            if host in self.view.hosts:
                self.fail(
                    record.where,
                    "NodeName",
                    f"node `{host}` is defined twice (also at {self.view.hosts[host].where})",
                )
                continue
            self.view.hosts[host] = definition
        return default

    def add_nodeset(self, record: Record) -> None:
        nodes = record.get("Nodes")
        feature = record.get("Feature")
        if nodes is not None:
            members = self.hosts_of(nodes.value, nodes.where, f"NodeSet={record.name}")
        elif feature is not None:
            wanted = feature.value
            members = [
                h
                for h, d in self.view.hosts.items()
                if wanted in (d.options.get("Feature") or _EMPTY).value.split(",")
            ]
        else:
            self.fail(record.where, f"NodeSet={record.name}", "a NodeSet needs Nodes= or Feature=")
            return
        self.view.nodesets[record.name] = members
        self.note(
            Option("NodeSet", record.name, record.where),
            "mapped",
            "a NodeSet is a group of hosts.yml, named where its hosts are used",
        )

    def hosts_of(self, text: str, where: Where, path: str) -> list[str]:
        """Hosts of a node list: hostlists, NodeSet names, ALL; every one a defined node."""
        hosts: list[str] = []
        for token in split_list(text):
            if token.upper() == "ALL":
                hosts += list(self.view.hosts)
                continue
            if token in self.view.nodesets:
                hosts += self.view.nodesets[token]
                continue
            try:
                names = expand(token)
            except Exception as exc:
                self.fail(where, path, f"`{token}` is not a Slurm hostlist ({exc})")
                continue
            unknown = [n for n in names if n not in self.view.hosts]
            if unknown:
                self.fail(
                    where,
                    path,
                    f"{', '.join(unknown[:3])}{' ...' if len(unknown) > 3 else ''}: no NodeName defines it",
                )
            hosts += [n for n in names if n in self.view.hosts]
        return list(dict.fromkeys(hosts))

    def add_partition(self, record: Record, default: dict[str, Setting]) -> dict[str, Setting]:
        options: dict[str, Setting] = {}
        for option in record.options:
            translation = translate_partition(option.key, option.value)
            pairs = translation.settings if translation else ((option.key, option.value),)
            for key, value in pairs:
                name = self.partition_keys.get(key.lower())
                if name is None:
                    self.fail(
                        option.where,
                        key,
                        f"not an option of PartitionName lines in Slurm {self.release.name}",
                    )
                    continue
                options[name] = Setting(
                    name, value, option.where, f"{option.key}={option.value}", translation
                )
        if record.name.upper() == "DEFAULT":
            return {**default, **options}
        merged = {**default, **options}
        nodes = merged.pop("Nodes", None)
        hosts = (
            self.hosts_of(nodes.value, nodes.where or record.where, f"PartitionName={record.name}")
            if nodes
            else []
        )
        if any(p.name == record.name for p in self.view.partitions):
            self.fail(record.where, f"PartitionName={record.name}", "partition defined twice")
            return default
        self.view.partitions.append(
            PartitionDef(record.name, hosts, merged, record.where, nodes.value if nodes else "")
        )
        return default

    # --- gres.conf ---------------------------------------------------------------------------

    def read_gres(self, conf: ConfFile, hosts: list[str] | None) -> None:
        """A gres.conf: shared (hosts None: a line without NodeName is every node's) or a host's
        copy (its lines are for those hosts only)."""
        self.view.files += conf.files
        restrict = set(hosts) if hosts is not None else None
        for record in conf.records:
            first = Option(record.kind, record.name, record.where)
            self.add_gres_line([first, *record.options], record.where, restrict)

    def add_gres_line(self, options_written: list[Option], where: Where, restrict: set[str] | None) -> None:
        options = {o.lower: o.value for o in options_written}
        node_names = options.pop("nodename", None)
        if node_names is not None:
            targets = self.hosts_of(node_names, where, "NodeName")
        else:
            targets = (
                list(self.view.hosts) if restrict is None else [h for h in self.view.hosts if h in restrict]
            )
        if restrict is not None:
            targets = [h for h in targets if h in restrict]
        for key in options:
            if key not in GRES_OPTIONS:
                self.fail(where, key, "not a gres.conf option")
        if "cpus" in options and "cores" not in options:
            options["cores"] = options.pop("cpus")
        auto = options.pop("autodetect", None)
        if auto is not None:
            self.note(Option("AutoDetect", auto, where), "native", "", "cluster.node_types[].gpus.autodetect")
            for host in targets:
                self.view.autodetect[host] = auto.lower()
        if "name" not in options:
            return
        definition = GresDef(options, where)
        for host in targets:
            self.view.gres.setdefault(host, []).append(definition)

    # --- topology ----------------------------------------------------------------------------

    def read_topology_conf(self, conf: ConfFile) -> None:
        """topology.conf as the plugin slurm.conf names reads it: SwitchName lines by
        topology/tree, BlockName lines and BlockSizes by topology/block; under another plugin (or
        none) Slurm reads none of it."""
        self.view.files += conf.files
        plugin = self.view.value("TopologyPlugin") or ""
        kind = "block" if plugin.endswith("/block") else "tree" if plugin.endswith("/tree") else None
        unread = (
            f"Slurm reads it only with TopologyPlugin=topology/{{}} (slurm.conf names {plugin or 'none'})"
        )
        for option in conf.settings:
            if option.lower != "blocksizes":
                self.fail(option.where, option.key, "not a topology.conf setting")
            elif kind != "block":
                self.note(option, "dropped", unread.format("block"))
            else:
                self.view.block_sizes = [int(v) for v in split_list(option.value) if v.isdigit()]
                self.note(option, "native", "", "cluster.fabric.block_sizes")
        for record in conf.records:
            wanted = "tree" if record.kind == "SwitchName" else "block"
            if kind != wanted:
                self.note(Option(record.kind, record.name, record.where), "dropped", unread.format(wanted))
                continue
            self.topology_record(record)
        # topology.conf is read only by the plugin slurm.conf names.
        self.view.topology_default = kind

    def topology_record(self, record: Record) -> None:
        path = f"{record.kind}={record.name}"
        nodes_option = record.get("Nodes")
        nodes = self.topology_hosts(nodes_option.value, record.where, path) if nodes_option else []
        for option in record.options:
            if option.lower not in ("nodes", "switches", "linkspeed"):
                self.fail(option.where, option.key, f"not an option of {record.kind} lines")
            elif option.lower == "linkspeed":
                self.note(option, "dropped", "LinkSpeed: topology.conf(5) says Slurm does not use it")
        if record.kind == "SwitchName":
            children = record.get("Switches")
            try:
                switches = expand(children.value) if children else []
            except Exception as exc:
                self.fail(
                    record.where,
                    path,
                    f"`{children.value if children else ''}` is not a Slurm hostlist ({exc})",
                )
                return
            self.view.switches[record.name] = SwitchDef(switches, nodes, record.where)
        else:
            self.view.blocks[record.name] = nodes
            self.note(
                Option(record.kind, record.name, record.where),
                "native",
                "",
                f"cluster.fabric.blocks.{record.name}",
            )

    def topology_hosts(self, text: str, where: Where, path: str) -> list[str]:
        """The nodes of a switch or block: Slurm's topology plugins take names no NodeName defines
        (logging them as invalid and leaving them out), which the switch keeps apart."""
        hosts: list[str] = []
        for token in split_list(text):
            try:
                names = expand(token)
            except Exception as exc:
                self.fail(where, path, f"`{token}` is not a Slurm hostlist ({exc})")
                continue
            for name in names:
                if name in self.view.hosts:
                    hosts.append(name)
                else:
                    self.view.unknown_in_topology.setdefault(path.split("=", 1)[1], []).append(name)
        return list(dict.fromkeys(hosts))

    def read_topology_yaml(self, path: Path, shown: str) -> None:
        self.view.files.append(shown)
        where = Where(shown, 1)
        trees = []
        for topology in read_topology_yaml(path, shown):
            name = str(topology.get("topology", ""))
            default = bool(topology.get("cluster_default"))
            if isinstance(topology.get("tree"), dict):
                trees.append(name)
                switches = topology["tree"].get("switches") or []
                for switch in switches:
                    nodes = (
                        self.hosts_of(str(switch.get("nodes", "")), where, f"{name}.{switch.get('switch')}")
                        if switch.get("nodes")
                        else []
                    )
                    children = expand(str(switch["children"])) if switch.get("children") else []
                    self.view.switches[str(switch.get("switch"))] = SwitchDef(children, nodes, where)
                self.view.topology_renamed[name] = TREE_TOPOLOGY
                if default:
                    self.view.topology_default = "tree"
                    self.view.default_name = TREE_TOPOLOGY
            elif isinstance(topology.get("block"), dict):
                block = topology["block"]
                for entry in block.get("blocks") or []:
                    nodes = (
                        self.hosts_of(str(entry.get("nodes", "")), where, f"{name}.{entry.get('block')}")
                        if entry.get("nodes")
                        else []
                    )
                    self.view.blocks[str(entry.get("block"))] = nodes
                    self.note(
                        Option("block", str(entry.get("block")), where),
                        "native",
                        "",
                        f"cluster.fabric.blocks.{entry.get('block')}",
                    )
                self.view.block_sizes = [int(v) for v in block.get("block_sizes") or []]
                names = [str(entry.get("block")) for entry in block.get("blocks") or []]
                self.view.block_sets[name] = (names, list(self.view.block_sizes))
                self.view.topology_renamed[name] = name
                if default:
                    self.view.topology_default = "block"
                    self.view.default_name = name
            elif "flat" in topology:
                self.view.topology_renamed[name] = FLAT_TOPOLOGY
                if default:
                    self.view.topology_default = None
                    self.view.default_name = FLAT_TOPOLOGY
            else:
                self.fail(
                    where, name, "a topology of a kind gpucluster does not model (tree, block and flat only)"
                )
        if len(trees) > 1:
            self.fail(where, trees[1], "more than one switch tree: gpucluster models one")

    # --- cgroup.conf -------------------------------------------------------------------------

    def read_cgroup(self, conf: ConfFile) -> None:
        self.view.files += conf.files
        for option in conf.settings:
            old = translate_cgroup(option.key, option.value, self.release)
            if old is not None:
                if old.kind != "mapped":  # a mapped one is placed where it lands
                    self.note(option, old.kind, old.reason)
                for key, value in old.settings:  # TaskAffinity=yes: task/affinity in slurm.conf
                    self.store(Option(key, value, option.where), old, f"{option.key}={option.value}")
                continue
            name = self.cgroup_keys.get(option.lower)
            if name is None:
                if any(option.lower in {k.lower() for k in keys} for keys in CGROUP_KEYS.values()):
                    self.note(
                        option,
                        "dropped",
                        f"Slurm {self.release.name} has no cgroup.conf {option.key} (cgroup.conf(5) of the release)",
                    )
                else:
                    self.fail(
                        option.where,
                        option.key,
                        "not a cgroup.conf key of any Slurm release gpucluster knows",
                    )
                continue
            if name.lower() == "cgroupmountpoint":
                name = "CgroupMountpoint"
            self.view.cgroup[name] = Setting(name, option.value, option.where)


_EMPTY = Setting("", "", None)
_DEFAULT_STORAGE = {part.lower(): part for part in DEFAULT_STORAGE}


def unknown_key(key: str, known: dict[str, list[str]]) -> str:
    """Why a key is refused: no release has it, with the closest one that does."""
    from gpucluster.keyhints import closest

    spelt = sorted({name for names in KEYS.values() for name in names if name.lower() in known})
    guess = closest(key, spelt)
    hint = f": did you mean `{guess}`?" if guess else ""
    return f"not a slurm.conf key of any Slurm release gpucluster knows{hint}"


def split_list(text: str) -> list[str]:
    """A comma list, commas inside brackets (hostlists) kept."""
    return [item.strip() for item in split_top_level(text) if item.strip()]


def canonical_value(key: str, value: str, release: Release) -> str:
    """A value in the spelling the release's own configuration shows: plugin types named in full,
    PrologFlags as slurm.conf(5) spells them."""
    lower = key.lower()
    text = value.strip()
    plugin = PLUGIN_TYPES.get(lower)
    if plugin is not None:
        parts = [p if "/" in p else f"{plugin}/{p}" for p in split_list(text)]
        return ",".join(parts)
    if lower == "prologflags":
        spelling = {flag.lower(): flag for flag in release.prolog_flags}
        return ",".join(spelling.get(flag.lower(), flag) for flag in split_list(text))
    return text


def build_view(files: SiteFiles, release: Release, shown: dict[Path, str] | None = None) -> View:
    """The View of a cluster's files; InventoryError with every problem found."""
    display = dict(shown or {})
    builder = ViewBuilder(release)
    problems = builder.problems
    reader = Reader(SLURM_RECORDS, problems, display)
    conf = reader.read(files.slurm_conf)
    if problems:
        raise InventoryError(problems)
    builder.read_slurm_conf(conf)
    for hosts, path in files.gres:
        gres = Reader(EVERY_LINE, problems, display).read(path)
        targets = None
        if hosts is not None:
            targets = [h for h in expand(hosts)]
            unknown = [h for h in targets if h not in builder.view.hosts]
            if unknown:
                builder.fail(
                    None,
                    display.get(path, str(path)),
                    f"a copy for {', '.join(unknown[:3])}: no NodeName defines it",
                )
        builder.read_gres(gres, targets)
    if files.topology is not None:
        name = display.get(files.topology, str(files.topology))
        if files.topology.suffix == ".yaml":
            builder.read_topology_yaml(files.topology, name)
        else:
            builder.read_topology_conf(Reader(TOPOLOGY_RECORDS, problems, display).read(files.topology))
    if files.cgroup is not None:
        builder.read_cgroup(Reader((), problems, display).read(files.cgroup))
    builder.settle_memory_enforcement()
    if files.plugstack is not None:
        builder.view.plugstack = read_plugstack(files.plugstack, problems, display)
        builder.view.files += list(dict.fromkeys(w.file for _, w in builder.view.plugstack)) or [
            display.get(files.plugstack, str(files.plugstack))
        ]
    for path in files.others:
        builder.view.other_files[path.name] = path
    if problems:
        raise InventoryError(problems)
    builder.view.shown = display
    return builder.view
