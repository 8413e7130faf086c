"""Two Slurm configurations compared as the target release reads them (two gpucluster.slurm.view
Views): keys in any case, hostlists expanded, comma lists as sets, plugin names with or without
their type, /var/run as /run, times as minutes, and Slurm's value for every key a file leaves out.
`gpucluster import --check` prints the comparison of a site's files with what its imported
inventory renders; the round-trip tests hold it to no difference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpucluster.hostlists import compress, expand
from gpucluster.model.releases import Release
from gpucluster.slurm.defaults import (
    CGROUP_DEFAULTS,
    FLAG_KEYS,
    LEVEL_KEYS,
    NODE_DEFAULTS,
    PARTITION_DEFAULTS,
    PARTITION_SET_KEYS,
    PARTITION_TIME_KEYS,
    PATH_KEYS,
    PLUGIN_TYPES,
    SET_KEYS,
    TIME_KEYS,
    UPPER_KEYS,
    global_default,
    minutes,
)
from gpucluster.slurm.gpus import parse_cores
from gpucluster.slurm.view import GresDef, NodeDef, Setting, View, split_list


@dataclass(frozen=True)
class Difference:
    """One thing the two configurations say differently."""

    section: str  # setting, node, partition, gres, switch, block, topology, cgroup
    name: str  # the key, hosts, partition, switch or block
    key: str
    left: str  # the first configuration's (the site's), as the release reads it
    right: str  # the second's (the rendered one)

    def __str__(self) -> str:
        what = self.name if self.section == "setting" else f"{self.section} {self.name}"
        where = f"{what} {self.key}" if self.key else what
        return f"{where}: {self.left or '(none)'} -> {self.right or '(none)'}"


@dataclass(frozen=True)
class Comparison:
    differences: list[Difference]
    counts: dict[str, int]  # what was compared: settings, nodes, partitions, ...
    # Differences the import made on purpose (its placements say why), not counted as differences.
    adjusted: list[Difference] = field(default_factory=list)
    # What the first configuration lacks, so that it was not compared (a node's own gres.conf).
    not_compared: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not self.differences


def _path(text: str) -> str:
    return "/run/" + text[len("/var/run/") :] if text.startswith("/var/run/") else text


def _number(text: str) -> str:
    stripped = text.strip()
    return str(int(stripped)) if stripped.isdigit() else stripped


def _bool(text: str) -> str:
    lowered = text.strip().lower()
    if lowered in ("yes", "1", "true", "y"):
        return "yes"
    if lowered in ("no", "0", "false", "n"):
        return "no"
    return lowered


def normal_global(key: str, value: str | None, release: Release) -> Any:
    """A global setting's value as the release reads it (its default when left out)."""
    lower = key.lower()
    if value is None:
        value = global_default(key, release)
        if value is None:
            return None
    text = value.strip()
    plugin = PLUGIN_TYPES.get(lower)
    if plugin is not None:
        names = [p.lower() if "/" in p else f"{plugin}/{p.lower()}" for p in split_list(text)]
        # `<type>/none` is no plugin (23.11 removed the `none` plugins); the topology plugins
        # of no topology had three names.
        names = [n for n in names if not n.endswith("/none") and n not in _FLAT_TOPOLOGY]
        return frozenset(names) if lower in SET_KEYS else ",".join(names)
    if lower in LEVEL_KEYS or lower == "clustername":  # Slurm lowers ClusterName itself
        return text.lower()
    if lower in SET_KEYS:
        return frozenset(item.lower() for item in split_list(text))
    if lower in PATH_KEYS:
        return _path(text)
    if lower in TIME_KEYS:
        return minutes(text)
    if lower in FLAG_KEYS:
        return _bool(text).upper()
    if lower in UPPER_KEYS:
        return text.upper()
    return _number(text)


_FLAT_TOPOLOGY = {"topology/none", "topology/default", "topology/flat"}
_INHERITED_LOWER = {"defcpupergpu", "defmempergpu"}


def _global_values(view: View) -> dict[str, Any]:
    release = view.release
    values: dict[str, Any] = {}
    for key, settings in view.settings.items():
        lower = key.lower()
        if lower in ("slurmctldhost",):
            values[lower] = tuple(controllers(view))
        elif lower in ("controladdr", "backupaddr"):
            continue  # the controllers' addresses: controllers()
        elif lower in ("prolog", "epilog"):
            values[lower] = frozenset(_path(s.value) for s in settings)
        else:
            values[lower] = normal_global(key, settings[-1].value, release)
    return values


def controllers(view: View) -> list[str]:
    """The controllers as slurmd reaches them: `name`, or `name(address)` where an address that
    is not the name is given (SlurmctldHost=name(address), or the old ControlAddr/BackupAddr)."""
    out = []
    for index, setting in enumerate(view.settings.get("SlurmctldHost", [])):
        name, _, rest = setting.value.strip().partition("(")
        address = rest.rstrip(")").strip()
        old = view.settings.get(("ControlAddr", "BackupAddr")[index]) if index < 2 else None
        if old and not address:
            address = old[-1].value.strip()
        out.append(f"{name}({address})" if address and address != name else name)
    return out


def compare_settings(left: View, right: View) -> list[Difference]:
    release = right.release
    a, b = _global_values(left), _global_values(right)
    out: list[Difference] = []
    for key in sorted(set(a) | set(b)):
        if key == "topologyplugin":
            continue  # the topology in use: compare_topology (topology.yaml needs no plugin)
        if key in _INHERITED_LOWER:
            continue  # each partition's: compare_partitions
        first = a[key] if key in a else normal_global(key, None, release)
        second = b[key] if key in b else normal_global(key, None, release)
        if first != second:
            out.append(Difference("setting", _spelling(left, right, key), "", _show(first), _show(second)))
    return out


def _spelling(left: View, right: View, lower: str) -> str:
    for view in (right, left):
        for key in view.settings:
            if key.lower() == lower:
                return key
    return lower


def _show(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, frozenset):
        return ",".join(sorted(value))
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


# --- nodes ----------------------------------------------------------------------------------


def normal_node(definition: NodeDef) -> dict[str, Any]:
    """A NodeName line's settings as Slurm works them out (CPU layout, defaults)."""
    options = {key.lower(): setting.value for key, setting in definition.options.items()}
    out: dict[str, Any] = {}
    boards = int(options.pop("boards", "1") or 1)
    cores = int(options.pop("corespersocket", "1") or 1)
    threads = int(options.pop("threadspercore", "1") or 1)
    per_board = options.pop("socketsperboard", None)
    total = options.pop("sockets", None)
    cpus = options.pop("cpus", None)
    if per_board is not None:
        sockets = int(per_board) * boards
    elif total is not None:
        sockets = int(total)
    elif cpus is not None:
        sockets = max(1, int(cpus) // (cores * threads))
    else:
        sockets = boards
    out["cpus"] = int(cpus) if cpus is not None else sockets * cores * threads
    out["sockets"], out["corespersocket"], out["threadspercore"] = sockets, cores, threads
    for key, default in NODE_DEFAULTS.items():
        out[key] = options.pop(key, default)
    out["state"] = out["state"].upper()
    out["feature"] = frozenset(split_list(out["feature"]))
    out["gres"] = frozenset(_gres_item(item) for item in split_list(out["gres"]))
    out["realmemory"], out["weight"], out["tmpdisk"] = (
        _number(out["realmemory"]),
        _number(out["weight"]),
        _number(out["tmpdisk"]),
    )
    for key, value in options.items():
        if key not in ("nodeaddr", "nodehostname"):  # each host's: node_addresses
            out[key] = value
    return out


def node_addresses(view: View) -> dict[str, dict[str, str]]:
    """Host -> its NodeAddr and NodeHostname where they are not its name (Slurm pairs the
    line's hostlists name by name)."""
    hosts_of: dict[int, list[str]] = {}
    for host, definition in view.hosts.items():
        hosts_of.setdefault(id(definition), []).append(host)
    out: dict[str, dict[str, str]] = {}
    for definition in {id(d): d for d in view.hosts.values()}.values():
        for key in ("NodeAddr", "NodeHostname"):
            setting = definition.options.get(key)
            if setting is None:
                continue
            try:
                values = expand(setting.value)
            except Exception:
                values = [setting.value]
            for host, value in zip(hosts_of[id(definition)], values, strict=False):
                if value != host:
                    out.setdefault(host, {})[key.lower()] = value
    for found in out.values():
        # slurm.conf(5): NodeAddr is NodeHostname where only that is given.
        if "nodehostname" in found:
            found.setdefault("nodeaddr", found["nodehostname"])
    return out


def effective_gres(view: View, host: str, gres: frozenset[str]) -> frozenset[str]:
    """A node's Gres as slurmctld holds it once slurmd registers: an untyped `gpu:N` takes the
    type of the host's gres.conf lines when they give its N devices one type (gres.c: "the GRES
    specification in gres.conf having a Type option, while the GRES specification in slurm.conf
    does not")."""
    untyped = [item for item in gres if item.startswith("gpu:") and item.count(":") == 1]
    if len(untyped) != 1:
        return gres
    devices = [e for e in normal_gres(view.gres.get(host, [])) if e[0] == "gpu"]
    if view.autodetect.get(host, "off") not in ("off", "no"):
        devices = [e for e in devices if e[2]]  # the lines that check what the driver finds
    types = {e[1] for e in devices}
    count = sum(e[3] for e in devices)
    if len(types) != 1 or "" in types or f"gpu:{count}" != untyped[0]:
        return gres
    return (gres - {untyped[0]}) | {f"gpu:{types.pop()}:{count}"}


def _gres_item(item: str) -> str:
    parts = item.split(":")
    parts[0] = parts[0].lower()
    if len(parts) == 2 and not parts[1].isdigit():
        parts.append("1")
    return ":".join(parts)


def compare_nodes(left: View, right: View) -> list[Difference]:
    out: list[Difference] = []
    only_left = [h for h in left.hosts if h not in right.hosts]
    only_right = [h for h in right.hosts if h not in left.hosts]
    if only_left:
        out.append(Difference("node", compress(only_left), "", "defined", ""))
    if only_right:
        out.append(Difference("node", compress(only_right), "", "", "defined"))
    cache: dict[int, dict[str, Any]] = {}

    def normal(definition: NodeDef) -> dict[str, Any]:
        key = id(definition)
        if key not in cache:
            cache[key] = normal_node(definition)
        return cache[key]

    grouped: dict[tuple[str, str, str], list[str]] = {}
    pairs: dict[tuple[int, int], list[tuple[str, str, str]]] = {}
    addresses = (node_addresses(left), node_addresses(right))
    for host, definition in left.hosts.items():
        other = right.hosts.get(host)
        if other is None:
            continue
        pair = (id(definition), id(other))
        if pair not in pairs:
            a, b = normal(definition), normal(other)
            pairs[pair] = [
                (key, _show(a.get(key)), _show(b.get(key)))
                for key in sorted(set(a) | set(b))
                if a.get(key) != b.get(key) and key != "gres"
            ]
            if a["gres"] != b["gres"]:
                pairs[pair].append(("gres", "", ""))  # decided host by host: effective_gres
        for difference in pairs[pair]:
            if difference[0] == "gres":
                mine_gres = effective_gres(left, host, normal(definition)["gres"])
                their_gres = effective_gres(right, host, normal(other)["gres"])
                if mine_gres != their_gres:
                    grouped.setdefault(("gres", _show(mine_gres), _show(their_gres)), []).append(host)
                continue
            grouped.setdefault(difference, []).append(host)
        mine, theirs = addresses[0].get(host, {}), addresses[1].get(host, {})
        for key in ("nodeaddr", "nodehostname"):
            if mine.get(key) != theirs.get(key):
                grouped.setdefault((key, mine.get(key, host), theirs.get(key, host)), []).append(host)
    for (key, first, second), hosts in grouped.items():
        out.append(Difference("node", compress(hosts), key, first, second))
    return out


# --- partitions -----------------------------------------------------------------------------


# slurm.conf's global values a partition takes where its line gives none.
INHERITED = ("DefCpuPerGPU", "DefMemPerGPU")


def normal_partition(
    options: dict[str, Setting], hosts: list[str], inherited: dict[str, str] | None = None
) -> dict[str, Any]:
    values = {key.lower(): value for key, value in (inherited or {}).items()}
    values.update({key.lower(): setting.value.strip() for key, setting in options.items()})
    exclusive = values.pop("exclusive", None)
    if exclusive is not None and exclusive.upper() == "NODE":
        values["oversubscribe"] = "EXCLUSIVE"
    elif exclusive is not None and exclusive.upper() not in ("NO",):
        values["exclusive"] = exclusive.upper()
    out: dict[str, Any] = {"nodes": frozenset(hosts)}
    for key in set(values) | set(PARTITION_DEFAULTS):
        value = values.get(key, PARTITION_DEFAULTS.get(key))
        if value is None:
            continue
        if key in PARTITION_SET_KEYS:
            items = frozenset(item.upper() if key == "preemptmode" else item for item in split_list(value))
            out[key] = frozenset() if items == {"ALL"} else items
        elif key in PARTITION_TIME_KEYS:
            out[key] = minutes(value)
        elif value.upper() in ("YES", "NO") or key in ("oversubscribe", "state"):
            out[key] = value.upper()
        else:
            out[key] = _number(value)
    return out


def _inherited(view: View) -> dict[str, str]:
    return {key: value for key in INHERITED if (value := view.value(key)) is not None}


def compare_partitions(left: View, right: View) -> list[Difference]:
    out: list[Difference] = []
    a = {p.name: p for p in left.partitions}
    b = {p.name: p for p in right.partitions}
    for name in [*a, *(n for n in b if n not in a)]:
        if name not in b:
            out.append(Difference("partition", name, "", "defined", ""))
            continue
        if name not in a:
            out.append(Difference("partition", name, "", "", "defined"))
            continue
        gpus = any(_has_gpus(left.hosts.get(h)) for h in a[name].hosts)
        first = normal_partition(a[name].options, a[name].hosts, _inherited(left) if gpus else None)
        second = normal_partition(b[name].options, b[name].hosts, _inherited(right) if gpus else None)
        for key in sorted(set(first) | set(second)):
            if first.get(key) != second.get(key):
                if key == "nodes":
                    out.append(
                        Difference(
                            "partition",
                            name,
                            "Nodes",
                            compress(first.get(key) or []),
                            compress(second.get(key) or []),
                        )
                    )
                else:
                    out.append(
                        Difference("partition", name, key, _show(first.get(key)), _show(second.get(key)))
                    )
    return out


# --- gres.conf ------------------------------------------------------------------------------


GresEntry = tuple[str, str, str, int, frozenset[int]]  # name, type, device file ("" none), count, cores


def normal_gres(lines: list[GresDef], cores_of_node: int | None = None) -> frozenset[GresEntry]:
    """A host's gres.conf lines as slurmd reads them: one entry per device file (a `File=` range
    or one line per device alike), the counts of lines without a file added up per name and type;
    a Cores= list naming a core beyond the node's (`cores_of_node`) left out, as slurmctld does."""
    entries: set[GresEntry] = set()
    counts: dict[tuple[str, str], int] = {}
    for line in lines:
        options = line.options
        name, kind = options.get("name", "").lower(), options.get("type", "")
        cores = frozenset(parse_cores(options["cores"])) if "cores" in options else frozenset()
        if cores and cores_of_node is not None and max(cores) >= cores_of_node:
            cores = frozenset()
        if "file" in options and name in ("shard", "mps"):
            # Shares of the File= GPUs: their count, not one per device.
            files = ",".join(sorted(expand(options["file"])))
            entries.add((name, kind, files, _count(options.get("count", "1")), cores))
        elif "file" in options:
            entries.update((name, kind, device, 1, cores) for device in expand(options["file"]))
        else:
            counts[(name, kind)] = counts.get((name, kind), 0) + _count(options.get("count", "1"))
    entries.update((name, kind, "", count, frozenset()) for (name, kind), count in counts.items())
    return frozenset(entries)


def _count(text: str) -> int:
    """A gres.conf Count= (Slurm takes a K, M or G suffix)."""
    text = text.strip().upper() or "1"
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1], 1)
    digits = text[:-1] if scale != 1 else text
    return int(digits) * scale if digits.isdigit() else 0


def _has_gpus(definition: NodeDef | None) -> bool:
    gres = definition.options.get("Gres") if definition is not None else None
    return gres is not None and any(item.split(":")[0].lower() == "gpu" for item in split_list(gres.value))


def compare_gres(left: View, right: View) -> list[Difference]:
    """gres.conf as each GPU node's slurmd reads it. A host without GPUs in slurm.conf on either
    side is left out: slurmd's GPUs count only where slurm.conf gives the node some, so a line that
    reaches it (or AutoDetect) changes nothing."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    cache: dict[tuple[int, ...], frozenset[GresEntry]] = {}
    unread = set(unread_gres(left))

    def normal(lines: list[GresDef], definition: NodeDef) -> frozenset[GresEntry]:
        key = (id(definition), *(id(line) for line in lines))
        if key not in cache:
            layout = normal_node(definition)
            cache[key] = normal_gres(lines, layout["sockets"] * layout["corespersocket"])
        return cache[key]

    for host, definition in left.hosts.items():
        other = right.hosts.get(host)
        if other is None or not (_has_gpus(definition) or _has_gpus(other)) or host in unread:
            continue
        a = _shares_as_slurm_reads(normal(left.gres.get(host, []), definition), definition)
        b = _shares_as_slurm_reads(normal(right.gres.get(host, []), other), other)
        auto_a, auto_b = left.autodetect.get(host, "off"), right.autodetect.get(host, "off")
        if auto_a not in ("off", "no") and auto_a == auto_b:
            # The driver gives slurmd the GPUs and their type: lines without File= only repeat
            # slurm.conf's Gres, and a line's files are checked against what it finds.
            a = frozenset((e[0], "", e[2], e[3], e[4]) for e in a if e[2])
            b = frozenset((e[0], "", e[2], e[3], e[4]) for e in b if e[2])
        if a != b:
            grouped.setdefault(("gres", _gres_text(a), _gres_text(b)), []).append(host)
        if auto_a != auto_b:
            grouped.setdefault(("AutoDetect", auto_a, auto_b), []).append(host)
    return [Difference("gres", compress(hosts), key, a, b) for (key, a, b), hosts in grouped.items()]


SHARED_GRES = ("shard", "mps")


def _shares_as_slurm_reads(entries: frozenset[GresEntry], definition: NodeDef) -> frozenset[GresEntry]:
    """Shards and MPS shares as a node's total: slurmd spreads slurm.conf's count evenly over the
    GPUs where gres.conf has no line for them, as it does one line's count over its File= GPUs."""
    kept = {e for e in entries if e[0] not in SHARED_GRES}
    gres = definition.options.get("Gres")
    for name in SHARED_GRES:
        mine = [e for e in entries if e[0] == name]
        total = sum(e[3] for e in mine)
        if not mine and gres is not None:
            for item in split_list(gres.value):
                parts = item.split(":")
                if parts[0].lower() == name and parts[-1].isdigit():
                    total += int(parts[-1])
        if total:
            kept.add((name, "", "", total, frozenset()))
    return frozenset(kept)


def unread_gres(view: View) -> list[str]:
    """GPU nodes whose gres.conf the configuration does not hold: no line names them and no
    AutoDetect reaches them (each node reads its own copy, which the input lacks)."""
    return [
        host
        for host, definition in view.hosts.items()
        if _has_gpus(definition)
        and not view.gres.get(host)
        and view.autodetect.get(host, "off") in ("off", "no")
    ]


def _gres_text(entries: frozenset[GresEntry]) -> str:
    """Entries of one name, type and cores together: `gpu:a100:2 File=/dev/nvidia[0-1] Cores=0-7`."""
    together: dict[tuple[str, str, frozenset[int]], tuple[list[str], int]] = {}
    for name, kind, device, count, cores in entries:
        devices, total = together.get((name, kind, cores), ([], 0))
        together[(name, kind, cores)] = ([*devices, device] if device else devices, total + count)
    parts = []
    for (name, kind, cores), (devices, count) in sorted(together.items(), key=str):
        text = f"{name}:{kind}:{count}" if kind else f"{name}:{count}"
        if devices:
            text += f" File={compress(devices)}"
        if cores:
            text += f" Cores={','.join(str(c) for c in sorted(cores))}"
        parts.append(text)
    return "; ".join(parts)


# --- topology and cgroup.conf ---------------------------------------------------------------


def compare_topology(left: View, right: View) -> list[Difference]:
    out: list[Difference] = []
    for name in sorted(set(left.switches) | set(right.switches)):
        a, b = left.switches.get(name), right.switches.get(name)
        first = (frozenset(a.switches), frozenset(a.nodes)) if a else None
        second = (frozenset(b.switches), frozenset(b.nodes)) if b else None
        if first != second:
            out.append(Difference("switch", name, "", _switch_text(first), _switch_text(second)))
    for name in sorted(set(left.blocks) | set(right.blocks)):
        a_nodes, b_nodes = set(left.blocks.get(name, [])), set(right.blocks.get(name, []))
        if a_nodes != b_nodes or (name in left.blocks) != (name in right.blocks):
            out.append(Difference("block", name, "", compress(a_nodes), compress(b_nodes)))
    if left.blocks and right.blocks and left.block_sizes and left.block_sizes != right.block_sizes:
        out.append(
            Difference(
                "topology",
                "BlockSizes",
                "",
                ",".join(map(str, left.block_sizes)),
                ",".join(map(str, right.block_sizes)),
            )
        )
    if left.topology_default != right.topology_default:
        out.append(
            Difference("topology", "default", "", left.topology_default or "", right.topology_default or "")
        )
    return out


def _switch_text(value: tuple[frozenset[str], frozenset[str]] | None) -> str:
    if value is None:
        return ""
    switches, nodes = value
    parts = ([f"Switches={compress(switches)}"] if switches else []) + (
        [f"Nodes={compress(nodes)}"] if nodes else []
    )
    return " ".join(parts)


def normal_cgroup(view: View) -> dict[str, str]:
    values = {key.lower(): setting.value.strip() for key, setting in view.cgroup.items()}
    out = dict(CGROUP_DEFAULTS)
    for key, value in values.items():
        out[key] = _bool(value) if value.lower() in ("yes", "no", "true", "false") else _path(value)
    return out


def compare_cgroup(left: View, right: View) -> list[Difference]:
    a, b = normal_cgroup(left), normal_cgroup(right)
    return [
        Difference("cgroup", "cgroup.conf", key, a.get(key, ""), b.get(key, ""))
        for key in sorted(set(a) | set(b))
        if a.get(key) != b.get(key)
    ]


def compare_plugstack(left: View, right: View) -> list[Difference]:
    """plugstack.conf as slurmd loads it: the plugin lines in order (blanks aside)."""
    a = [" ".join(line.split()) for line, _ in left.plugstack]
    b = [" ".join(line.split()) for line, _ in right.plugstack]
    if a == b:
        return []
    return [Difference("plugstack", "plugstack.conf", "", "; ".join(a), "; ".join(b))]


def unread_includes(view: View) -> list[str]:
    return [line.split(None, 1)[1] for line, _ in view.plugstack if line.split(None, 1)[0] == "include"]


def compare(left: View, right: View, adjusted: set[str] | frozenset[str] = frozenset()) -> Comparison:
    """Every difference between two configurations, as the release of `right` reads both; those
    of the keys in `adjusted` (changed on purpose) apart."""
    differences = [
        *compare_settings(left, right),
        *compare_nodes(left, right),
        *compare_partitions(left, right),
        *compare_gres(left, right),
        *compare_topology(left, right),
        *compare_cgroup(left, right),
        *compare_plugstack(left, right),
    ]
    counts = {
        "settings": len(set(_global_values(left)) | set(_global_values(right))),
        "nodes": len(set(left.hosts) | set(right.hosts)),
        "partitions": len({p.name for p in left.partitions} | {p.name for p in right.partitions}),
        "switches": len(set(left.switches) | set(right.switches)),
        "blocks": len(set(left.blocks) | set(right.blocks)),
    }
    on_purpose = [d for d in differences if d.section == "setting" and d.name in adjusted]
    unread = unread_gres(left)
    not_compared = [f"gres.conf of {compress(unread)}: not in the input"] if unread else []
    not_compared += [
        f"plugstack.conf include {pattern}: not in the input" for pattern in unread_includes(left)
    ]
    return Comparison([d for d in differences if d not in on_purpose], counts, on_purpose, not_compared)
