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
    NODE_DEFAULTS,
    PARTITION_DEFAULTS,
    PARTITION_SET_KEYS,
    PARTITION_TIME_KEYS,
    PATH_KEYS,
    PLUGIN_TYPES,
    SET_KEYS,
    TIME_KEYS,
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
    if lower in ("slurmctlddebug", "slurmddebug"):
        return text.lower()
    if lower in SET_KEYS:
        return frozenset(item.lower() for item in split_list(text))
    if lower in PATH_KEYS:
        return _path(text)
    if lower in TIME_KEYS:
        return minutes(text)
    if lower in (
        "enforcepartlimits",
        "priorityfavorsmall",
        "disablerootjobs",
        "usepam",
        "priorityusageresetperiod",
    ):
        return text.upper()
    return _number(text)


_FLAT_TOPOLOGY = {"topology/none", "topology/default", "topology/flat"}


def _global_values(view: View) -> dict[str, Any]:
    release = view.release
    values: dict[str, Any] = {}
    for key, settings in view.settings.items():
        lower = key.lower()
        if lower in ("slurmctldhost",):
            values[lower] = tuple(s.value.split("(")[0] for s in settings)
        elif lower in ("prolog", "epilog"):
            values[lower] = frozenset(_path(s.value) for s in settings)
        else:
            values[lower] = normal_global(key, settings[-1].value, release)
    return values


def compare_settings(left: View, right: View) -> list[Difference]:
    release = right.release
    a, b = _global_values(left), _global_values(right)
    out: list[Difference] = []
    for key in sorted(set(a) | set(b)):
        if key == "topologyplugin":
            continue  # the topology in use: compare_topology (topology.yaml needs no plugin)
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
        out[key] = value
    return out


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
                if a.get(key) != b.get(key)
            ]
        for difference in pairs[pair]:
            grouped.setdefault(difference, []).append(host)
    for (key, first, second), hosts in grouped.items():
        out.append(Difference("node", compress(hosts), key, first, second))
    return out


# --- partitions -----------------------------------------------------------------------------


def normal_partition(options: dict[str, Setting], hosts: list[str]) -> dict[str, Any]:
    values = {key.lower(): setting.value.strip() for key, setting in options.items()}
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
        first = normal_partition(a[name].options, a[name].hosts)
        second = normal_partition(b[name].options, b[name].hosts)
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


def normal_gres(line: GresDef) -> tuple[str, str, int, frozenset[str], frozenset[int]]:
    options = line.options
    files = frozenset(expand(options["file"])) if "file" in options else frozenset()
    count = len(files) if files else int(options.get("count", "1") or 1)
    if options.get("name", "").lower() in ("shard", "mps"):
        count = int(options.get("count", "1") or 1)  # shares of the File= GPUs, not devices
    cores = frozenset(parse_cores(options["cores"])) if "cores" in options else frozenset()
    return (options.get("name", "").lower(), options.get("type", ""), count, files, cores)


def compare_gres(left: View, right: View) -> list[Difference]:
    grouped: dict[tuple[str, str, str], list[str]] = {}
    cache: dict[tuple[int, ...], Any] = {}

    def normal(lines: list[GresDef]) -> frozenset[Any]:
        key = tuple(id(line) for line in lines)
        if key not in cache:
            cache[key] = frozenset(normal_gres(line) for line in lines)
        return cache[key]  # type: ignore[no-any-return]

    for host in left.hosts:
        if host not in right.hosts:
            continue
        a, b = normal(left.gres.get(host, [])), normal(right.gres.get(host, []))
        if left.autodetect.get(host, "off") not in ("off", "no") and left.autodetect.get(
            host
        ) == right.autodetect.get(host):
            # The driver gives slurmd the GPUs: lines without File= only repeat slurm.conf's Gres.
            a, b = frozenset(e for e in a if e[3]), frozenset(e for e in b if e[3])
        if a != b:
            grouped.setdefault(("gres", _gres_text(a), _gres_text(b)), []).append(host)
        auto_a, auto_b = left.autodetect.get(host, "off"), right.autodetect.get(host, "off")
        if auto_a != auto_b:
            grouped.setdefault(("AutoDetect", auto_a, auto_b), []).append(host)
    return [Difference("gres", compress(hosts), key, a, b) for (key, a, b), hosts in grouped.items()]


def _gres_text(entries: frozenset[Any]) -> str:
    parts = []
    for name, kind, count, files, cores in sorted(entries, key=str):
        text = f"{name}:{kind}:{count}" if kind else f"{name}:{count}"
        if files:
            text += f" File={compress(files)}"
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
    ]
    counts = {
        "settings": len(set(_global_values(left)) | set(_global_values(right))),
        "nodes": len(set(left.hosts) | set(right.hosts)),
        "partitions": len({p.name for p in left.partitions} | {p.name for p in right.partitions}),
        "switches": len(set(left.switches) | set(right.switches)),
        "blocks": len(set(left.blocks) | set(right.blocks)),
    }
    on_purpose = [d for d in differences if d.section == "setting" and d.name in adjusted]
    return Comparison([d for d in differences if d not in on_purpose], counts, on_purpose)
