"""The nodes of an imported cluster: node types from hosts that share hardware, per-group
overrides where some hosts differ (memory, features, weight, GPUs, state), the hosts.yml groups
that partitions, switches and blocks name, and the partitions and fabric themselves.

Hosts are grouped by everything that names them: their node type and overrides (a cluster.nodes
entry), their partitions, leaf switch and block. Each such set is one hosts.yml group (an "atom");
a cluster.nodes entry whose hosts span several atoms is a group of them. A partition, switch or
block is then the fewest groups whose hosts are exactly its own.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hostlist import numeric_sort_key

from gpucluster.hostlists import compress, expand, number_runs, split_top_level
from gpucluster.model.base import NAME_RE, SLURM_TIME_RE
from gpucluster.model.spec import BLOCK_TOPOLOGY, FLAT_TOPOLOGY, NODE_ADDR, NODE_HOSTNAME, NODE_STATES
from gpucluster.slurm import keys
from gpucluster.slurm.conf_keys import NODE_KEYS
from gpucluster.slurm.gpus import core_range, parse_cores
from gpucluster.slurm.view import NodeDef, PartitionDef, Setting, View, split_list
from gpucluster.slurm.written import NODE_PER_HOST
from gpucluster.slurm_import.importer import (
    ASSUMED,
    DEFAULT,
    DROPPED,
    EXTRA,
    MAPPED,
    NATIVE,
    Globals,
    Placement,
)

_NAME = re.compile(NAME_RE)
# NodeName options naming each host's address -> the hosts.yml variable holding it.
ADDRESS_VARS = {"NodeAddr": NODE_ADDR, "NodeHostname": NODE_HOSTNAME}
_GPU_FILE = re.compile(r"^/dev/nvidia(\d+)$")


# Gres= names gpucluster models besides gpu: gres/shard and gres/mps (gpus.sharing).
SHARED_GRES = ("shard", "mps")


@dataclass(frozen=True)
class Hardware:
    """What a NodeName line says of its hosts, in the model's terms."""

    layout: tuple[tuple[str, Any], ...]  # node type settings hosts of one type share
    memory: int | None
    features: tuple[str, ...]
    weight: int | None
    gres: tuple[str | None, int] | None  # (GPU type, count)
    state: str | None
    # Shared GPUs the Gres says besides: (("shard", node total), ("mps", node total)).
    shared: tuple[tuple[str, int], ...] = ()
    # GPUs of several types on the node: ((type, count), ...) in the Gres' order; gres their total.
    types: tuple[tuple[str, int], ...] = ()


@dataclass
class NodeImport:
    view: View
    g: Globals
    node_types: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    partitions: list[dict[str, Any]] = field(default_factory=list)
    fabric: dict[str, Any] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)  # hosts.yml all.children
    type_of: dict[str, str] = field(default_factory=dict)
    hardware_of: dict[int, Hardware] = field(default_factory=dict)
    gpus_of: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    atom_of: dict[str, str] = field(default_factory=dict)
    members: dict[str, list[str]] = field(default_factory=dict)  # group -> hosts
    entry_groups: list[str] = field(default_factory=list)
    entry_of_host: dict[str, dict[str, Any]] = field(default_factory=dict)
    refused_nodes: bool = False
    assumed_hosts: list[str] = field(default_factory=list)
    records_gpus: dict[str, bool] = field(default_factory=dict)  # host -> whether it has GPUs
    ignored_cores: set[Any] = field(default_factory=set)
    # Placements made for a NodeName line before the node types had names: (first, last, a host).
    line_placements: list[tuple[int, int, str]] = field(default_factory=list)

    @property
    def release(self) -> str:
        return self.view.release.name

    def place(
        self, setting: Setting | None, kind: str, target: str = "", reason: str = "", written: str = ""
    ) -> None:
        self.g.place(setting, kind, target, reason, written)

    # --- NodeName lines -------------------------------------------------------------------------

    def hardware(self, definition: NodeDef) -> Hardware | None:
        key = id(definition)
        if key in self.hardware_of:
            return self.hardware_of[key]
        options = dict(definition.options)
        layout = self._cpu_layout(options)
        memory = options.pop("RealMemory", None)
        gres = options.pop("Gres", None)
        feature = options.pop("Feature", None)
        weight = options.pop("Weight", None)
        state = options.pop("State", None)
        gres_value: tuple[str | None, int] | None = None
        shared: tuple[tuple[str, int], ...] = ()
        types: tuple[tuple[str, int], ...] = ()
        if gres is not None:
            gres_value, shared, types = self.gres(gres)
        features = self._features(feature) if feature is not None else ()
        weight_value = self._weight(weight) if weight is not None else None
        state_value = self._state(state) if state is not None else None
        self._reserved_resources(options, layout)
        extra = self._extra_settings(options)
        if extra:
            layout["extra"] = tuple(sorted(extra.items()))  # hashable, as all of the layout
        result = Hardware(
            tuple(sorted(layout.items(), key=lambda kv: kv[0])),
            int(memory.value) if memory is not None else None,
            features,
            weight_value,
            gres_value,
            state_value,
            shared,
            types,
        )
        if memory is not None:
            self.place(memory, NATIVE, "cluster.node_types.<type>.memory_mb")
        self.hardware_of[key] = result
        return result

    def _cpu_layout(self, options: dict[str, Setting]) -> dict[str, Any]:
        """The node type's CPU settings from a NodeName line's CPUs, Boards, Sockets(PerBoard),
        CoresPerSocket and ThreadsPerCore (taken out of `options`)."""
        layout: dict[str, Any] = {}
        cpus, boards = options.pop("CPUs", None), options.pop("Boards", None)
        per_board, total = options.pop("SocketsPerBoard", None), options.pop("Sockets", None)
        cores, threads = options.pop("CoresPerSocket", None), options.pop("ThreadsPerCore", None)
        board_count = int(boards.value) if boards else 1
        thread_count = int(threads.value) if threads else 1
        sockets: int | None = None
        if per_board is not None:
            sockets = int(per_board.value) * board_count
        elif total is not None:
            sockets = int(total.value)
        core_count = int(cores.value) if cores else None
        if sockets is None and core_count is not None:
            sockets = max(1, int(cpus.value) // (core_count * thread_count)) if cpus else board_count
        if sockets is not None and core_count is None:
            core_count = 1
        if sockets is not None:
            layout["sockets"], layout["cores_per_socket"] = sockets, core_count
            if thread_count != 1:
                layout["threads_per_core"] = thread_count
            if cpus is not None and int(cpus.value) != sockets * (core_count or 1) * thread_count:
                layout["cpus"] = int(cpus.value)
        else:
            layout["cpus"] = int(cpus.value) if cpus else 1
            if thread_count != 1:
                layout["threads_per_core"] = thread_count
        for setting in (cpus, per_board, total, cores, threads):
            if setting is not None:
                self.place(
                    setting,
                    NATIVE,
                    "cluster.node_types.<type>.(cpus, sockets, cores_per_socket, threads_per_core)",
                )
        if boards is not None:
            kind = NATIVE if board_count == 1 else MAPPED
            self.place(
                boards,
                kind,
                "cluster.node_types.<type>.sockets",
                "sockets of all boards: Slurm schedules them alike",
            )
        return layout

    def _features(self, feature: Setting) -> tuple[str, ...]:
        features = tuple(split_list(feature.value.strip('"')))
        bad = [f for f in features if not _NAME.match(f)]
        if bad:
            self.refuse(feature, f"features {', '.join(bad)}: gpucluster's feature names start with a letter")
        else:
            self.place(feature, NATIVE, "cluster.node_types.<type>.features")
        return features

    def _weight(self, weight: Setting) -> int | None:
        """The weight, None for Slurm's default (1)."""
        value = int(weight.value)
        self.place(weight, NATIVE if value != 1 else DEFAULT, "cluster.node_types.<type>.weight")
        return None if value == 1 else value

    def _state(self, state: Setting) -> str | None:
        """The states the model carries (cluster.nodes[].state; IDLE with a warning on validation);
        UNKNOWN is what gpucluster writes."""
        lowered = state.value.lower()
        if lowered in NODE_STATES:
            self.place(state, NATIVE, "cluster.nodes[].state")
            return lowered
        if lowered == "unknown":
            self.place(state, DEFAULT, reason="what gpucluster writes")
        else:
            self.refuse(
                state,
                f"State={state.value}: slurm.conf's node states are "
                f"{', '.join(s.upper() for s in (*NODE_STATES, 'unknown'))}; set the others with scontrol",
            )
        return None

    def _reserved_resources(self, options: dict[str, Setting], layout: dict[str, Any]) -> None:
        """TmpDisk and what is kept from jobs (MemSpecLimit, CoreSpecCount, CpuSpecList), taken out
        of `options` into the node type's `layout`."""
        for name, path in (
            ("TmpDisk", "tmp_disk_mb"),
            ("MemSpecLimit", "mem_spec_limit_mb"),
            ("CoreSpecCount", "core_spec_count"),
        ):
            setting = options.pop(name, None)
            if setting is not None:
                layout[path] = int(setting.value)
                self.place(setting, NATIVE, f"cluster.node_types.<type>.{path}")
        spec_list = options.pop("CpuSpecList", None)
        if spec_list is not None:
            layout["cpu_spec_list"] = spec_list.value
            self.place(spec_list, NATIVE, "cluster.node_types.<type>.cpu_spec_list")

    def _extra_settings(self, options: dict[str, Setting]) -> dict[str, Any]:
        """The NodeName options the model has no key for -> their values (the node type's `extra`);
        a per-host address refused, a Reason dropped."""
        known = {k.lower(): k for k in NODE_KEYS[self.release]}
        extra: dict[str, Any] = {}
        for name, setting in options.items():
            if name in ADDRESS_VARS:
                continue  # each host's (addresses)
            if name in NODE_PER_HOST:
                self.refuse(
                    setting, f"{name} gives each host a value of its own: gpucluster does not carry it"
                )
                continue
            if name.lower() == "reason":
                self.place(setting, DEFAULT, reason="a reason goes with a state set by scontrol")
                continue
            extra[known.get(name.lower(), name)] = (
                int(setting.value) if setting.value.isdigit() else setting.value
            )
            self.place(setting, EXTRA, f"cluster.node_types.<type>.extra.{name}")
        return extra

    def gres(
        self, setting: Setting
    ) -> tuple[tuple[str | None, int] | None, tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]:
        """(GPU type, count) of a NodeName line's Gres, its shards or MPS shares (node totals:
        gpus.sharing.shard and .mps per GPU), and its GPU types when it has several (the first
        then (None, their total))."""
        found: list[tuple[str | None, int]] = []
        shared: list[tuple[str, int]] = []
        for item in split_list(setting.value):
            parts = item.split(":")
            name = parts[0].lower()
            if name in SHARED_GRES and len(parts) == 2 and parts[1].isdigit() and "(" not in item:
                shared.append((name, int(parts[1])))
                continue
            if name != "gpu" or "(" in item:
                self.refuse(
                    setting,
                    f"Gres {item}: gpucluster models GPUs (gpu:<type>:<count> or gpu:<count>), shards and MPS only",
                )
                return None, (), ()
            if len(parts) == 2:
                found.append((None, int(parts[1])) if parts[1].isdigit() else (parts[1], 1))
            elif len(parts) == 3 and parts[2].isdigit():
                found.append((parts[1], int(parts[2])))
            else:
                self.refuse(setting, f"Gres {item}: not gpu:<type>:<count>")
                return None, (), ()
        if len(found) > 1:
            return self.several_types(setting, found, shared)
        if len({name for name, _ in shared}) > 1 or len(shared) != len({n for n, _ in shared}):
            self.refuse(
                setting, "shard and mps on one node: gpucluster shares a node type's GPUs one way in Slurm"
            )
            return None, (), ()
        if shared and not found:
            self.refuse(setting, f"Gres {setting.value}: shards or MPS without GPUs to share")
            return None, (), ()
        if not found:
            return None, (), ()
        self.place(setting, NATIVE, "cluster.node_types.<type>.gpus")
        return found[0], tuple(shared), ()

    def several_types(
        self, setting: Setting, found: list[tuple[str | None, int]], shared: list[tuple[str, int]]
    ) -> tuple[tuple[str | None, int] | None, tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]:
        """A Gres of GPUs of several types (gpu:titanx:3,gpu:gtx1080:1): gpus.types."""
        names = [name for name, _ in found]
        if None in names:
            self.refuse(
                setting,
                f"Gres {setting.value}: typed and untyped GPUs on one node: give every GPU its type",
            )
            return None, (), ()
        twice = sorted({n for n in names if n is not None and names.count(n) > 1})
        if twice:
            self.refuse(setting, f"Gres {setting.value}: gpu:{twice[0]} is given twice: give it one count")
            return None, (), ()
        if shared:
            self.refuse(
                setting,
                f"Gres {setting.value}: shards or MPS on a node of several GPU types: gpucluster shares "
                "GPUs of one type",
            )
            return None, (), ()
        self.place(setting, NATIVE, "cluster.node_types.<type>.gpus.types")
        types = tuple((name or "", count) for name, count in found)
        return (None, sum(count for _, count in types)), (), types

    def shared_gpus(self, host: str, hardware: Hardware, spec: dict[str, Any]) -> None:
        """gpus.sharing from the Gres' shard or MPS total, per GPU; gres.conf's lines of them must
        give every GPU the same count (File= per GPU), or one total spread evenly (no File=)."""
        assert hardware.gres is not None
        count = hardware.gres[1]
        for name, total in hardware.shared:
            if total % count:
                self.g.problems.append(
                    _problem(
                        None,
                        host,
                        f"refused: {name}:{total} over {count} GPUs: gpucluster gives each GPU the same count",
                    )
                )
                self.refused_nodes = True
                continue
            lines = [g for g in self.view.gres.get(host, []) if g.options.get("name", "").lower() == name]
            # A line's Count is spread over its File= devices (every GPU when it names none).
            totals = sum(int(g.options.get("count", "1") or 1) for g in lines)
            per_gpu = {
                int(g.options.get("count", "1") or 1) / len(expand(g.options["file"]))
                for g in lines
                if "file" in g.options
            }
            if len(per_gpu) > 1 or (lines and totals != total):
                self.g.problems.append(
                    _problem(
                        lines[0].where if lines else None,
                        name,
                        f"refused: gres.conf's {name} lines ({totals} in all) differ from slurm.conf's {name}:{total} "
                        "or give GPUs different counts: gpucluster gives each GPU of a node the same",
                    )
                )
                self.refused_nodes = True
                continue
            spec.setdefault("sharing", {})[name] = total // count

    def refuse(self, setting: Setting | None, reason: str) -> None:
        self.g.refuse(setting, reason)
        self.refused_nodes = True

    # --- gres.conf ------------------------------------------------------------------------------

    def gpu_spec(self, host: str, hardware: Hardware, layout: dict[str, Any]) -> dict[str, Any] | None:
        """The host's GPUs as the model says them: type and count from slurm.conf, device files,
        cores and autodetection from gres.conf."""
        if hardware.gres is None:
            return None
        if hardware.types:
            return self.typed_gpu_spec(host, hardware, layout)
        model, count = hardware.gres
        spec: dict[str, Any] = {"model": model, "count": count} if model else {"count": count}
        self.shared_gpus(host, hardware, spec)
        auto = self.view.autodetect.get(host, "off")
        lines = self.gpu_lines(host)
        typed = {line.options.get("type") for line in lines}
        if model is None and len(typed) == 1 and None not in typed and _device_count(lines) == count:
            # slurmctld takes the type of gres.conf for an untyped Gres= (gres.c, once slurmd registers).
            model = typed.pop()
            spec = {"model": model, "count": count}
            self.g.placements.append(
                Placement(
                    str(lines[0].where),
                    f"Type={model}",
                    NATIVE,
                    "cluster.node_types.<type>.gpus.model",
                    f"slurm.conf's Gres=gpu:{count} takes gres.conf's type once slurmd registers",
                )
            )
            self.line_placements.append((len(self.g.placements) - 1, len(self.g.placements), host))
        detected = auto in ("nvml", "nvidia")
        for line in lines:
            kind = line.options.get("type")
            # Under AutoDetect the driver names the type; a line without one only checks files.
            if detected and kind is None:
                continue
            if kind != model and not (kind is None and model is None):
                self.g.problems.append(
                    _problem(
                        line.where,
                        "Type",
                        f"refused: gres.conf says Type={kind} where slurm.conf's Gres says {model}",
                    )
                )
                self.refused_nodes = True
        if detected:
            spec["autodetect"] = auto
            if not any("file" in line.options for line in lines):
                return spec
        if not detected and auto not in ("off", "", "no"):
            self.g.problems.append(
                _problem(None, "AutoDetect", f"refused: AutoDetect={auto} (gpucluster knows nvml and nvidia)")
            )
            self.refused_nodes = True
            return spec
        files: list[tuple[int, str | None]] = []
        for line in lines:
            if "file" not in line.options:
                continue
            numbers = self.line_devices(line)
            if numbers is None:
                return spec
            files += [(n, line.options.get("cores")) for n in numbers]
        if not files and not lines:
            return self.assumed_devices(host, spec, count, layout)
        if not files:
            self.g.problems.append(
                _problem(
                    lines[0].where,
                    "File",
                    f"refused: {host}'s gres.conf lines give its {count} GPUs no File= (gpucluster writes "
                    "each GPU's device file)",
                )
            )
            self.refused_nodes = True
            return spec
        files.sort()
        numbers = [n for n, _ in files]
        spec["devices"] = compress(f"/dev/nvidia{n}" for n in numbers)
        if numbers != list(range(count)):
            why = (
                f"slurm.conf gives {host} {count} GPUs and gres.conf {len(numbers)} device files "
                f"({spec['devices']}): slurmd would report {len(numbers)} and slurmctld drain the node"
                if len(numbers) != count
                else f"{host}'s GPU device files are {spec['devices']}; gpucluster's are /dev/nvidia0 to "
                f"/dev/nvidia{count - 1}"
            )
            self.g.problems.append(_problem(lines[0].where if lines else None, "File", f"refused: {why}"))
            self.refused_nodes = True
        self.affinity(spec, host, [c for _, c in files], layout, lines[0].where if lines else None, detected)
        return spec

    def refuse_at(self, where: Any, key: str, message: str) -> None:
        """A refusal at a gres.conf line (or a host's key), and the nodes refused with it."""
        self.g.problems.append(_problem(where, key, f"refused: {message}"))
        self.refused_nodes = True

    def affinity(
        self,
        spec: dict[str, Any],
        host: str,
        cores_of: list[str | None],
        layout: dict[str, Any],
        where: Any,
        detected: bool,
    ) -> None:
        """gpus.affinity from the Cores= of each GPU in device order: none given, `none` (on a
        node whose sockets are known); the default's, nothing; else the list."""
        cores_of = self.known_cores(cores_of, layout, where)
        if all(c is None for c in cores_of):
            if "sockets" in layout and not detected:
                spec["affinity"] = "none"
        elif any(c is None for c in cores_of):
            self.refuse_at(where, "Cores", f"{host}'s gres.conf gives Cores= for some GPUs and not others")
        else:
            listed = [core_text(c or "") for c in cores_of]
            if listed != default_affinity(layout, len(cores_of)):
                spec["affinity"] = listed

    def line_devices(self, line: Any) -> list[int] | None:
        """The GPU numbers of a gres.conf line's File= (/dev/nvidia<N>); None, refused, for any
        other file."""
        numbers = []
        for name in expand(line.options["file"]):
            match = _GPU_FILE.match(name)
            if match is None:
                self.refuse_at(line.where, "File", f"{name} is not a GPU device file /dev/nvidia<N>")
                return None
            numbers.append(int(match.group(1)))
        return numbers

    def gpu_lines(self, host: str) -> list[Any]:
        """The host's gres.conf lines of GPUs; options gpucluster does not carry refused."""
        lines = [
            line for line in self.view.gres.get(host, []) if line.options.get("name", "").lower() == "gpu"
        ]
        for line in lines:
            for option in ("links", "flags", "multiplefiles"):
                if option in line.options:
                    self.refuse_at(
                        line.where,
                        option,
                        f"gres.conf {option.capitalize()}= is not carried (gpucluster writes File= and Cores=)",
                    )
        return lines

    def typed_gpu_spec(self, host: str, hardware: Hardware, layout: dict[str, Any]) -> dict[str, Any]:
        """A node of several GPU types: each type's count from the Gres, its device files from
        gres.conf's lines of that type, the cores of every GPU in device order (gpus.affinity)."""
        count = sum(n for _, n in hardware.types)
        models = [m for m, _ in hardware.types]
        types: list[dict[str, Any]] = [{"model": m, "count": n} for m, n in hardware.types]
        spec: dict[str, Any] = {"types": types}
        auto = self.view.autodetect.get(host, "off")
        detected = auto in ("nvml", "nvidia")
        lines = self.gpu_lines(host)
        if not detected and auto not in ("off", "", "no"):
            self.refuse_at(None, "AutoDetect", f"AutoDetect={auto} (gpucluster knows nvml and nvidia)")
            return spec
        if detected:
            spec["autodetect"] = auto
        files: list[tuple[int, str | None]] = []
        of_type: dict[str, list[int]] = {m: [] for m in models}
        for line in lines:
            kind = line.options.get("type")
            if "file" not in line.options or kind is None:
                if detected:
                    continue  # the driver names each GPU's type and file
                self.refuse_at(
                    line.where,
                    "File" if kind is not None else "Type",
                    f"{host} has GPUs of several types: each gres.conf line names its Type= and File=",
                )
                return spec
            if kind not in of_type:
                self.refuse_at(
                    line.where,
                    "Type",
                    f"gres.conf says Type={kind} where slurm.conf's Gres says {', '.join(models)}",
                )
                return spec
            numbers = self.line_devices(line)
            if numbers is None:
                return spec
            files += [(n, line.options.get("cores")) for n in numbers]
            of_type[kind] += numbers
        if not files:
            if detected:
                return spec
            return self.assumed_typed_devices(host, spec, layout)
        for entry, (model, number) in zip(types, hardware.types, strict=True):
            entry["devices"] = compress(f"/dev/nvidia{n}" for n in of_type[model])
            if len(of_type[model]) != number:
                self.refuse_at(
                    lines[0].where,
                    "File",
                    f"slurm.conf gives {host} {number} GPUs of type {model} and gres.conf {len(of_type[model])} device files ({entry['devices'] or 'none'}): slurmd would report the difference and slurmctld drain the node",
                )
                return spec
        files.sort()
        if [n for n, _ in files] != list(range(count)):
            devices = compress(f"/dev/nvidia{n}" for n, _ in files)
            self.refuse_at(
                lines[0].where,
                "File",
                f"{host}'s GPU device files are {devices}; gpucluster's are /dev/nvidia0 to /dev/nvidia{count - 1}",
            )
            return spec
        self.affinity(spec, host, [c for _, c in files], layout, lines[0].where if lines else None, detected)
        return spec

    def assumed_typed_devices(
        self, host: str, spec: dict[str, Any], layout: dict[str, Any]
    ) -> dict[str, Any]:
        """A node of several GPU types whose gres.conf the input lacks: the driver's device files
        are assumed in the Gres' order (its first type /dev/nvidia0...), said as for one type."""
        first = 0
        for entry in spec["types"]:
            entry["devices"] = compress(f"/dev/nvidia{n}" for n in range(first, first + entry["count"]))
            first += entry["count"]
        if "sockets" in layout:
            spec["affinity"] = "none"
        self.assumed_hosts.append(host)
        return spec

    def known_cores(self, cores_of: list[str | None], layout: dict[str, Any], where: Any) -> list[str | None]:
        """Each GPU's Cores= as slurmctld keeps them: a list naming a core the node does not have
        (CPU ids for cores, as the old CPUs= were often written) is left out, as slurmctld does
        (`invalid GRES core specification`)."""
        total = _core_count(layout)
        if total is None:
            return cores_of
        kept: list[str | None] = []
        for cores in cores_of:
            if cores is not None and max(parse_cores(cores)) >= total:
                if where is not None and where not in self.ignored_cores:
                    self.ignored_cores.add(where)
                    self.g.placements.append(
                        Placement(
                            str(where), f"Cores={cores}", DROPPED,
                            reason=f"the node has {total} cores (0-{total - 1}): slurmctld ignores the list "
                            "(`invalid GRES core specification`)",
                        )
                    )  # fmt: skip
                cores = None
            kept.append(cores)
        return kept

    def assumed_devices(
        self, host: str, spec: dict[str, Any], count: int, layout: dict[str, Any]
    ) -> dict[str, Any]:
        """A GPU node whose gres.conf the input lacks (each node reads its own copy): the NVIDIA
        driver's device files are assumed, with no cores near them, and said so."""
        spec["devices"] = compress(f"/dev/nvidia{n}" for n in range(count))
        if "sockets" in layout:
            spec["affinity"] = "none"
        self.assumed_hosts.append(host)
        return spec

    def place_assumed(self) -> None:
        if not self.assumed_hosts:
            return
        hosts = compress(self.assumed_hosts)
        self.g.placements.append(
            Placement(
                "",
                f"gres.conf of {hosts} (not in the input)",
                ASSUMED,
                "cluster.node_types.<type>.gpus.devices",
                "each node reads its own gres.conf: the NVIDIA driver's files /dev/nvidia0... are assumed, "
                "without Cores=; give the nodes' copies (--gres-conf HOSTS=FILE) to carry theirs",
            )
        )
        self.g.not_compared.append(f"gres.conf of {hosts}: not in the input")

    # --- grouping -------------------------------------------------------------------------------

    def addresses(self) -> None:
        """NodeAddr and NodeHostname of each host (a hostlist of as many names as the line's, in
        the same order): hosts.yml variables where they differ from the host's name, Slurm's
        default; nothing where they are the name."""
        hosts_of: dict[int, list[str]] = {}
        for host, definition in self.view.hosts.items():
            hosts_of.setdefault(id(definition), []).append(host)
        seen: set[int] = set()
        for definition in self.view.hosts.values():
            if id(definition) in seen:
                continue
            seen.add(id(definition))
            for name, var in ADDRESS_VARS.items():
                setting = definition.options.get(name)
                if setting is not None:
                    self.host_addresses(setting, var, hosts_of[id(definition)])

    def host_addresses(self, setting: Setting, var: str, hosts: list[str]) -> None:
        try:
            values = expand(setting.value)
        except Exception as exc:
            self.refuse(setting, f"`{setting.value}` is not a Slurm hostlist ({exc})")
            return
        if len(values) < len(hosts):
            self.refuse(
                setting,
                f"{len(values)} names for {len(hosts)} nodes: slurmctld needs as many {setting.key} as NodeName",
            )
            return
        differ = {host: value for host, value in zip(hosts, values, strict=False) if value != host}
        for host, value in differ.items():
            self.g.addresses.setdefault(host, {})[var] = value
        if differ:
            self.place(setting, NATIVE, f"hosts.yml {var} of {compress(list(differ))}")
        else:
            self.place(setting, DEFAULT, reason="each node's own name: Slurm's default")

    def run(self) -> None:
        view = self.view
        self.addresses()
        records: dict[str, tuple[Hardware, dict[str, Any], dict[str, Any] | None]] = {}
        spec_cache: dict[tuple[Any, ...], dict[str, Any] | None] = {}
        for host, definition in view.hosts.items():
            first = len(self.g.placements)
            hardware = self.hardware(definition)
            if len(self.g.placements) > first:
                self.line_placements.append((first, len(self.g.placements), host))
            if hardware is None:
                continue
            layout = dict(hardware.layout)
            gres_key = (
                id(definition),
                tuple(id(line) for line in view.gres.get(host, [])),
                view.autodetect.get(host),
            )
            if gres_key not in spec_cache:
                spec_cache[gres_key] = self.gpu_spec(host, hardware, layout)
            records[host] = (hardware, layout, spec_cache[gres_key])
            self.records_gpus[host] = spec_cache[gres_key] is not None
        if self.refused_nodes:
            return
        self.place_assumed()
        self.place_gres_lines()
        self.make_types(records)
        for first, last, host in self.line_placements:
            name = self.type_of.get(host)
            for index in range(first, last):
                placement = self.g.placements[index]
                if name is not None and "<type>" in placement.target:
                    target = placement.target.replace("<type>", name)
                    self.g.placements[index] = Placement(
                        placement.where, placement.written, placement.kind, target, placement.reason
                    )

    def place_gres_lines(self) -> None:
        seen: set[int] = set()
        for host, lines in self.view.gres.items():
            for line in lines:
                if id(line) not in seen:
                    seen.add(id(line))
                    text = " ".join(f"{k.capitalize()}={v}" for k, v in line.options.items())
                    first = len(self.g.placements)
                    self.g.placements.append(
                        Placement(str(line.where), text, NATIVE, "cluster.node_types.<type>.gpus")
                    )
                    self.line_placements.append((first, first + 1, host))

    def make_types(self, records: dict[str, tuple[Hardware, dict[str, Any], dict[str, Any] | None]]) -> None:
        """Node types (one per hardware, GPU type included), their usual memory, features, weight
        and GPUs, and each host's differences from them."""
        by_type: dict[tuple[Any, ...], list[str]] = {}
        frozen: dict[int, Any] = {}  # the GPUs of many hosts are one object: freeze each once
        for host, (hardware, _, gpus) in records.items():
            model = (
                None
                if gpus is None
                else "+".join(t["model"] for t in gpus["types"])
                if "types" in gpus
                else gpus.get("model", "")
            )
            by_type.setdefault((hardware.layout, model, gpus is None), []).append(host)
            if id(gpus) not in frozen:
                frozen[id(gpus)] = _frozen(gpus)
        names = self.type_names(by_type)
        entry_of: dict[str, tuple[Any, ...]] = {}
        for key, hosts in by_type.items():
            name = names[key]
            layout = dict(key[0])
            usual = {
                "memory_mb": _most_common(records[h][0].memory for h in hosts),
                "features": _most_common(records[h][0].features for h in hosts),
                "weight": _most_common(records[h][0].weight for h in hosts),
                "gpus": _most_common(frozen[id(records[h][2])] for h in hosts),
            }
            node_type: dict[str, Any] = dict(layout)
            if "extra" in node_type:
                node_type["extra"] = dict(node_type["extra"])
            if usual["memory_mb"] is not None:
                node_type["memory_mb"] = usual["memory_mb"]
            if usual["gpus"] is not None:
                node_type["gpus"] = _thawed(usual["gpus"])
            if usual["features"]:
                node_type["features"] = list(usual["features"])
            if usual["weight"] is not None:
                node_type["weight"] = usual["weight"]
            self.node_types[name] = _ordered_type(node_type)
            for host in hosts:
                hardware, _, gpus = records[host]
                overrides: list[tuple[str, Any]] = []
                if hardware.memory != usual["memory_mb"]:
                    overrides.append(("memory_mb", hardware.memory))
                if hardware.features != usual["features"]:
                    overrides.append(("features", hardware.features))
                if hardware.weight != usual["weight"]:
                    overrides.append(("weight", hardware.weight if hardware.weight is not None else 1))
                if frozen[id(gpus)] != usual["gpus"]:
                    overrides.append(("gpus", frozen[id(gpus)]))
                if hardware.state is not None:
                    overrides.append(("state", hardware.state))
                self.type_of[host] = name
                entry_of[host] = (name, tuple(overrides))
        unset_memory = [h for h, (t, o) in entry_of.items() if ("memory_mb", None) in o]
        if unset_memory:
            self.g.problems.append(
                _problem(
                    self.view.hosts[unset_memory[0]].where,
                    "RealMemory",
                    f"refused: {compress(unset_memory)} leave RealMemory unset where other hosts of their hardware set it: "
                    "give them all a RealMemory, or none",
                )
            )
            self.refused_nodes = True
            return
        self.group_hosts(entry_of)

    def type_names(self, by_type: dict[tuple[Any, ...], list[str]]) -> dict[tuple[Any, ...], str]:
        names: dict[tuple[Any, ...], str] = {}
        used: set[str] = set()
        for key, hosts in by_type.items():
            base = _prefix(hosts[0])
            model = key[1]
            if model and sum(1 for k, h in by_type.items() if _prefix(h[0]) == base) > 1:
                base = f"{base}-{_safe(model).lower()}"
            name = base
            number = 2
            while name in used:
                name = f"{base}-{number}"
                number += 1
            used.add(name)
            names[key] = name
        return names

    def group_hosts(self, entry_of: dict[str, tuple[Any, ...]]) -> None:
        """hosts.yml groups: one per set of hosts that everything names alike."""
        view = self.view
        partitions_of: dict[str, list[int]] = {}
        for index, partition in enumerate(view.partitions):
            for host in partition.hosts:
                partitions_of.setdefault(host, []).append(index)
        leaf_of: dict[str, str] = {}
        for name, switch in view.switches.items():
            for host in switch.nodes:
                leaf_of[host] = name
        block_of = {host: name for name, hosts in view.blocks.items() for host in hosts}
        excluded = set()
        exclude = self.g.slurm.get("power_save", {}).get("exclude_nodes")
        if isinstance(exclude, str):
            excluded = set(expand(exclude))
        atoms: dict[tuple[Any, ...], list[str]] = {}
        for host in view.hosts:
            signature = (
                entry_of[host],
                tuple(partitions_of.get(host, [])),
                leaf_of.get(host),
                block_of.get(host),
                host in excluded,
            )
            atoms.setdefault(signature, []).append(host)
        entries: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for signature in atoms:
            entries.setdefault(signature[0], []).append(signature)
        taken = set(view.hosts) | set(view.switches) | set(view.blocks) | self.other_hosts()
        entry_names = self.entry_names(entries, atoms, taken)
        for entry, signatures in entries.items():
            entry_name = entry_names[entry]
            if len(signatures) == 1:
                atom_names = {signatures[0]: entry_name}
            else:
                atom_names = self.atom_names(entry_name, signatures, taken)
            for signature, name in atom_names.items():
                hosts = atoms[signature]
                self.groups[name] = {"hosts": {pattern: None for pattern in ansible_patterns(hosts)}}
                self.members[name] = hosts
                for host in hosts:
                    self.atom_of[host] = name
            if len(signatures) > 1:
                self.groups[entry_name] = {"children": {name: None for name in atom_names.values()}}
                self.members[entry_name] = [h for s in signatures for h in atoms[s]]
            self.entry_groups.append(entry_name)
            type_name, overrides = entry
            node_entry: dict[str, Any] = {"group": entry_name, "type": type_name}
            for key, value in overrides:
                node_entry[key] = (
                    _thawed(value) if key == "gpus" else list(value) if key == "features" else value
                )
            self.nodes.append(node_entry)
            for signature in signatures:
                for host in atoms[signature]:
                    self.entry_of_host[host] = node_entry

    def other_hosts(self) -> set[str]:
        hosts = set(self.g.slurm.get("controller", []))
        accounting = self.g.slurm.get("accounting", {})
        if accounting.get("host"):
            hosts.add(accounting["host"])
        return hosts

    def entry_names(
        self,
        entries: dict[tuple[Any, ...], list[tuple[Any, ...]]],
        atoms: dict[tuple[Any, ...], list[str]],
        taken: set[str],
    ) -> dict[tuple[Any, ...], str]:
        """A cluster.nodes entry's group: its node type's name for the entry without overrides,
        else the name its first host has without its number (both made unique)."""
        names: dict[tuple[Any, ...], str] = {}
        for entry, signatures in entries.items():
            first = atoms[signatures[0]][0]
            base = _group(entry[0]) if not entry[1] else _group(_prefix(first))
            names[entry] = _unique(base, taken)
        return names

    def atom_names(
        self, entry_name: str, signatures: list[tuple[Any, ...]], taken: set[str]
    ) -> dict[tuple[Any, ...], str]:
        """Names of a cluster.nodes entry's atoms after what sets them apart: their leaf switch,
        block, or the partitions only some of them are in."""
        leaves = {s[2] for s in signatures}
        blocks = {s[3] for s in signatures}
        common = set.intersection(*(set(s[1]) for s in signatures))
        own_sets = {tuple(sorted(set(s[1]) - common)) for s in signatures}
        by_partitions = len(own_sets) == len(signatures) and not any(s[4] for s in signatures)
        names: dict[tuple[Any, ...], str] = {}
        for number, signature in enumerate(signatures, start=1):
            leaf, block = signature[2], signature[3]
            own = [self.view.partitions[i].name for i in signature[1] if i not in common]
            if leaf is not None and len(leaves) == len(signatures):
                base = f"{entry_name}_{_group(leaf)}"
            elif block is not None and len(blocks) == len(signatures):
                base = f"{entry_name}_{_group(block)}"
            elif by_partitions:
                base = f"{entry_name}_{_group('_'.join(own) or 'main')}"
            else:
                base = f"{entry_name}_{number}"
            names[signature] = _unique(base, taken)
        return names

    def cover(self, hosts: list[str]) -> list[str]:
        """The fewest groups (cluster.nodes entries first, then atoms) holding exactly `hosts`."""
        wanted = set(hosts)
        names: list[str] = []
        covered: set[str] = set()
        for name in self.entry_groups:
            members = self.members[name]
            # An entry larger than the set, or not starting in it, cannot be in it.
            if not members or len(members) > len(wanted) or members[0] not in wanted:
                continue
            group = set(members)
            if group <= wanted and not covered & group:
                names.append(name)
                covered.update(group)
        for host in hosts:
            if host in covered:
                continue
            atom = self.atom_of[host]
            names.append(atom)
            covered.update(self.members[atom])
        return names

    # --- partitions and fabric ------------------------------------------------------------------

    def make_partitions(self) -> None:
        for partition in self.view.partitions:
            self.partitions.append(self.partition(partition))
        self.partitions_as_published()

    def partitions_as_published(self) -> None:
        """What the site's partitions do that gpucluster's first-inventory checks advise against,
        said as cluster.slurm settings (each a warning of validate): no default partition,
        several, Slurm nodes in no partition."""
        defaults = [p["name"] for p in self.partitions if p.get("default")]
        if self.partitions and not defaults:
            self.g.slurm["no_default_partition"] = True
            self.g.placements.append(
                Placement(
                    "", "no PartitionName says Default=YES", NATIVE, f"{keys.S}.no_default_partition",
                    "jobs must name their partition, as on the site",
                )
            )  # fmt: skip
        if len(defaults) > 1:
            self.g.slurm["several_default_partitions"] = True
            self.g.placements.append(
                Placement(
                    "", f"Default=YES on {', '.join(defaults)}", NATIVE, f"{keys.S}.several_default_partitions",
                    f"slurmctld keeps the last, {defaults[-1]}, as the default",
                )
            )  # fmt: skip
        placed = {h for p in self.view.partitions for h in p.hosts}
        orphans = [h for h in self.view.hosts if h not in placed]
        if orphans:
            self.g.slurm["hosts_in_no_partition"] = self.cover(orphans)
            self.g.placements.append(
                Placement(
                    "", f"{compress(orphans)} in no partition", NATIVE, f"{keys.S}.hosts_in_no_partition",
                    "no job runs there, as on the site",
                )
            )  # fmt: skip

    def partition(self, p: PartitionDef) -> dict[str, Any]:
        out: dict[str, Any] = {"name": p.name, "nodes": self.cover(p.hosts)}
        path = f"cluster.partitions[{p.name}]"
        self.g.placements.append(
            Placement(
                str(p.where), f"PartitionName={p.name} Nodes={p.nodes_written}", NATIVE, f"{path}.nodes"
            )
        )
        if not p.hosts:
            self.g.problems.append(
                _problem(
                    p.where,
                    f"PartitionName={p.name}",
                    "refused: a partition without nodes (gpucluster's partitions have nodes)",
                )
            )
        for key, setting in p.options.items():
            self.partition_option(out, key, setting, path)
        gpu_partition = any(self.records_gpus.get(h) for h in p.hosts)
        for key, field_name in PER_GPU_GLOBALS.items():
            value = self.view.value(key)
            if gpu_partition and value is not None and value.strip().isdigit() and key not in p.options:
                # slurm.conf's global value is the default of every partition that gives none.
                out[field_name] = int(value)
        self.per_gpu_defaults(out, p)
        return out

    def partition_option(self, out: dict[str, Any], key: str, setting: Setting, path: str) -> None:
        """One option of a PartitionName line: where the table of keys gives the partition a
        setting for it, there (as its kind reads it; a flag only where on, a list of ALL as none);
        the few whose value means something else in the model as PARTITION_OPTIONS says; the
        others in the partition's `extra`."""
        value = setting.value.strip()
        entry = keys.entry(keys.PARTITION, key)
        special = PARTITION_OPTIONS.get(key)
        if special is not None:
            kind = special(self, out, setting, value)
            if kind is not None:
                self.place(
                    setting, kind, f"{path}.{key}" if kind == NATIVE else "", _DEFAULT_REASON.get(kind, "")
                )
            return
        if entry is not None and entry.model.startswith(keys.P + "."):
            field_name = entry.field
            if entry.kind == keys.FLAG:
                if value.upper() in ("YES", "1"):
                    out[field_name] = True
            elif entry.kind == keys.SET:
                if value.upper() != "ALL":
                    out[field_name] = split_list(value)
            elif entry.kind == keys.NUMBER:
                if not value.lstrip("-").isdigit():
                    self.g.refuse(setting, f"{key}={value}: a number")
                    return
                out[field_name] = int(value)
            else:
                out[field_name] = value
            self.place(setting, NATIVE, f"{path}.{key}")
            return
        out.setdefault("extra", {})[key] = int(value) if value.isdigit() else value
        self.place(setting, EXTRA, f"{path}.extra.{key}")

    def per_gpu_defaults(self, out: dict[str, Any], p: PartitionDef) -> None:
        """What gpucluster would derive for DefCpuPerGPU and DefMemPerGPU; where the site's value
        differs (or it has none), the partition says it (0: none)."""
        shares = []
        for host in p.hosts:
            node_type = self.node_types[self.type_of[host]]
            entry = self.entry_of_host[host]
            gpus = entry.get("gpus", node_type.get("gpus"))
            if not gpus:
                continue
            memory = entry.get("memory_mb", node_type.get("memory_mb"))
            count = _gpu_total(gpus)
            shares.append((_cpus(node_type) // count, None if memory is None else memory // count))
        if not shares:
            return
        derived_cpus = min(c for c, _ in shares) or None
        memory_default = "def_mem_per_cpu_mb" in out or "def_mem_per_node_mb" in out
        derived_memory = None
        if not memory_default and all(m is not None for _, m in shares):
            derived_memory = min(m for _, m in shares if m is not None) or None
        for name, derived in (("cpus_per_gpu", derived_cpus), ("memory_per_gpu_mb", derived_memory)):
            given = out.get(name)
            if given == derived:
                out.pop(name, None)
            elif given is None and derived is not None:
                out[name] = 0

    def make_fabric(self) -> None:
        view = self.view
        tree: dict[str, list[str]] = {}
        for name, switch in view.switches.items():
            placeholders = view.unknown_in_topology.get(name, [])
            if switch.switches and (switch.nodes or placeholders):
                self.g.problems.append(
                    _problem(
                        switch.where,
                        f"SwitchName={name}",
                        "refused: a switch with both switches and nodes (gpucluster's switches have one or the other)",
                    )
                )
                continue
            tree[name] = (
                list(switch.switches) if switch.switches else [*self.cover(switch.nodes), *placeholders]
            )
            self.g.placements.append(
                Placement(
                    str(switch.where) if switch.where else "",
                    f"SwitchName={name}",
                    NATIVE,
                    f"cluster.fabric.tree.{name}",
                )
            )
        if tree:
            self.fabric["tree"] = tree
            self.tree_as_published(tree)
        self.make_blocks()

    def tree_as_published(self, tree: dict[str, list[str]]) -> None:
        """What the site's switch tree does that gpucluster's first-inventory checks advise
        against, said as the fabric's settings: names no NodeName defines, nodes under no leaf
        switch, roots that no switch joins."""
        view = self.view
        placeholders = sorted({n for name in view.switches for n in view.unknown_in_topology.get(name, [])})
        if placeholders:
            self.fabric["placeholder_nodes"] = placeholders
            self.g.placements.append(
                Placement(
                    "",
                    f"topology.conf names {compress(placeholders)}",
                    NATIVE,
                    "cluster.fabric.placeholder_nodes",
                    "no NodeName defines them: slurmctld ignores them (kept as the site wrote them)",
                )
            )
        under = {h for s in view.switches.values() for h in s.nodes}
        missing = [h for h in view.hosts if h not in under]
        if missing:
            self.fabric["outside_tree"] = self.cover(missing)
            self.g.placements.append(
                Placement(
                    "", f"{compress(missing)} under no leaf switch", NATIVE, "cluster.fabric.outside_tree"
                )
            )
        children = {c for kids in tree.values() for c in kids if c in tree}
        roots = [name for name in tree if name not in children and self.hosts_under(name)]
        if len(roots) > 1:
            self.fabric["separate_trees"] = True
            self.g.placements.append(
                Placement(
                    "",
                    f"{len(roots)} root switches ({', '.join(roots)})",
                    NATIVE,
                    "cluster.fabric.separate_trees",
                    "no switch joins them: no job spans two",
                )
            )

    def hosts_under(self, name: str, depth: int = 0) -> bool:
        switch = self.view.switches.get(name)
        if switch is None or depth > len(self.view.switches):
            return False
        return bool(switch.nodes) or any(self.hosts_under(child, depth + 1) for child in switch.switches)

    def make_blocks(self) -> None:
        view = self.view
        for name in view.blocks:
            unknown = view.unknown_in_topology.get(name, [])
            if unknown:
                self.g.placements.append(
                    Placement(
                        "",
                        f"BlockName={name} Nodes={compress(unknown)}",
                        DROPPED,
                        reason="no NodeName defines them: slurmctld leaves them out of the block",
                    )
                )
        if view.blocks:
            self.fabric["blocks"] = {name: self.cover(hosts) for name, hosts in view.blocks.items()}
            self.block_sets()
        if self.fabric.get("tree") and view.blocks:
            self.fabric["default"] = view.topology_default or "tree"
            if self.fabric.get("block_sets") and view.default_name in self.fabric["block_sets"]:
                self.fabric["default"] = view.default_name
        elif view.default_name == FLAT_TOPOLOGY:
            self.fabric["default"] = FLAT_TOPOLOGY

    def block_sets(self) -> None:
        """Block topologies as fabric.block_sizes (one named nvlink-blocks, or from topology.conf), or
        as fabric.block_sets (several, or one of another name: the partitions name it)."""
        view = self.view
        sets = view.block_sets
        if not sets or list(sets) == [BLOCK_TOPOLOGY]:
            smallest = min((len(h) for h in view.blocks.values()), default=0)
            if view.block_sizes and view.block_sizes != [smallest]:
                self.fabric["block_sizes"] = list(view.block_sizes)
            return
        found: dict[str, Any] = {}
        for name, (blocks, sizes) in sets.items():
            entry: dict[str, Any] = {"blocks": blocks}
            smallest = min((len(view.blocks.get(b, [])) for b in blocks), default=0)
            if sizes and sizes != [smallest]:
                entry["block_sizes"] = list(sizes)
            found[name] = entry
        self.fabric["block_sets"] = found

    def power_exclusions(self) -> None:
        power = self.g.slurm.get("power_save")
        if power and isinstance(power.get("exclude_nodes"), str):
            power["exclude_nodes"] = self.cover(expand(power["exclude_nodes"]))

    def hosts_yml(self) -> dict[str, Any]:
        """hosts.yml: the controllers and the accounting host that are no node, then the groups;
        a host with addresses of its own (hosts.yml variables) listed by itself with them."""
        children: dict[str, Any] = {}
        addresses = self.g.addresses
        controllers = [h for h in self.g.slurm.get("controller", []) if h not in self.view.hosts]
        if controllers:
            children[_unique("controllers", set(self.groups))] = {
                "hosts": {h: addresses.get(h) for h in controllers}
            }
        accounting = self.g.slurm.get("accounting", {}).get("host")
        if accounting and accounting not in controllers and accounting not in self.view.hosts:
            children[_unique("accounting", set(self.groups) | set(children))] = {
                "hosts": {accounting: addresses.get(accounting)}
            }
        for name, group in self.groups.items():
            if "hosts" in group and any(h in addresses for h in self.members[name]):
                group = {"hosts": _with_vars(group["hosts"], self.members[name], addresses)}
            children[name] = group
        return {"all": {"children": children}}


def _default(imp: NodeImport, out: dict[str, Any], setting: Setting, value: str) -> str:
    if value.upper() in ("YES", "1"):
        out["default"] = True
    return NATIVE


def _time(imp: NodeImport, out: dict[str, Any], setting: Setting, value: str) -> str | None:
    if not SLURM_TIME_RE.match(value):
        imp.g.refuse(setting, f"{value} is not a Slurm time")
        return None
    if not (setting.key == "MaxTime" and value.upper() == "UNLIMITED"):
        out["max_time" if setting.key == "MaxTime" else "default_time"] = value
    return NATIVE


def _sharing(imp: NodeImport, out: dict[str, Any], setting: Setting, value: str) -> str | None:
    """OverSubscribe (Shared before 15.08) and Exclusive (26.05): whole nodes are `exclusive`."""
    upper = value.upper()
    if upper in ("EXCLUSIVE", "NODE"):
        out["exclusive"] = True
    elif upper != "NO":
        if setting.key == "Exclusive" or not re.fullmatch(r"(YES|FORCE)(:\d+)?", upper):
            imp.g.refuse(
                setting,
                f"{setting.key}={value}: gpucluster writes OverSubscribe NO, YES[:n], FORCE[:n] or exclusive nodes",
            )
            return None
        out["over_subscribe"] = upper
    return NATIVE


def _preempt_mode(imp: NodeImport, out: dict[str, Any], setting: Setting, value: str) -> str:
    out["preempt_mode"] = [m.upper() for m in split_list(value)]
    return NATIVE


def _max_nodes(imp: NodeImport, out: dict[str, Any], setting: Setting, value: str) -> str | None:
    if value.upper() in ("UNLIMITED", "INFINITE"):
        return DEFAULT
    if not value.isdigit():
        imp.g.refuse(setting, f"MaxNodes={value}: a number or UNLIMITED")
        return None
    out["max_nodes"] = int(value)
    return NATIVE


def _suspend_time(imp: NodeImport, out: dict[str, Any], setting: Setting, value: str) -> str:
    out["suspend_time"] = -1 if value.upper() in ("NONE", "INFINITE", "-1") else int(value)
    return NATIVE


def _state(imp: NodeImport, out: dict[str, Any], setting: Setting, value: str) -> str:
    if value.upper() != "UP":
        out["state"] = value.upper()
    return NATIVE


def _topology(imp: NodeImport, out: dict[str, Any], setting: Setting, value: str) -> str:
    """Topology= (25.05+) names a topology of topology.yaml, by the name gpucluster gives it."""
    out["topology"] = imp.view.topology_renamed.get(value, value)
    return NATIVE


# slurm.conf's global per-GPU defaults: what each partition that gives none of its own takes.
PER_GPU_GLOBALS = {"DefCpuPerGPU": "cpus_per_gpu", "DefMemPerGPU": "memory_per_gpu_mb"}
# PartitionName options whose value the model holds in other terms than the table's kind.
PARTITION_OPTIONS: dict[str, Any] = {
    "Default": _default,
    "MaxTime": _time,
    "DefaultTime": _time,
    "OverSubscribe": _sharing,
    "Exclusive": _sharing,
    "PreemptMode": _preempt_mode,
    "MaxNodes": _max_nodes,
    "SuspendTime": _suspend_time,
    "State": _state,
    "Topology": _topology,
}
_DEFAULT_REASON = {DEFAULT: "Slurm's default (UNLIMITED)"}


def _core_count(layout: dict[str, Any]) -> int | None:
    if "sockets" in layout:
        return int(layout["sockets"]) * int(layout.get("cores_per_socket") or 1)
    if "cpus" in layout:
        return int(layout["cpus"]) // int(layout.get("threads_per_core", 1))
    return None


def _device_count(lines: list[Any]) -> int:
    """The GPUs gres.conf lines give: their device files, or their Count= where they name none."""
    total = 0
    for line in lines:
        if "file" in line.options:
            total += len(expand(line.options["file"]))
        else:
            count = line.options.get("count", "1")
            total += int(count) if count.isdigit() else 0
    return total


def _with_vars(
    patterns: dict[str, Any], members: list[str], addresses: dict[str, dict[str, str]]
) -> dict[str, Any]:
    """A group's hosts.yml patterns, those of the hosts with variables split out: host by host
    for those, the others folded again."""
    plain = [h for h in members if h not in addresses]
    out: dict[str, Any] = {pattern: None for pattern in ansible_patterns(plain)} if plain else {}
    out.update({h: dict(addresses[h]) for h in members if h in addresses})
    return out


def _problem(where: Any, path: str, message: str) -> Any:
    from gpucluster.errors import Problem

    if where is None:
        return Problem("", path, message)
    return Problem(where.file, path, message, where.line)


def core_text(cores: str) -> str:
    return ",".join(core_range(low, high) for low, high in number_runs(parse_cores(cores)))


def default_affinity(layout: dict[str, Any], count: int) -> list[str] | None:
    """The Cores= of each GPU gpucluster writes by default (GPUs split evenly over sockets)."""
    sockets, cores = layout.get("sockets"), layout.get("cores_per_socket")
    if sockets is None or cores is None or count % sockets:
        return None
    per_socket = count // sockets
    return [core_range(s * cores, s * cores + cores - 1) for s in range(sockets) for _ in range(per_socket)]


def ansible_patterns(hosts: list[str]) -> list[str]:
    """hosts.yml patterns (`gpu[01:04]`) for a list of hosts, Slurm's hostlist folding them."""
    patterns: list[str] = []
    for token in _tokens(compress(hosts)):
        match = re.fullmatch(r"([^\[\]]*)\[([^\]]+)\]([^\[\]]*)", token)
        if match is None:
            patterns.append(token)
            continue
        head, body, tail = match.groups()
        for run in body.split(","):
            first, _, last = run.partition("-")
            patterns.append(f"{head}{first}{tail}" if not last else f"{head}[{first}:{last}]{tail}")
    return patterns


def _tokens(text: str) -> list[str]:
    out = split_top_level(text)
    # A token of several bracket groups (r[1-2]n[1-3]) is listed host by host.
    result: list[str] = []
    for token in out:
        if token.count("[") > 1:
            result += expand(token)
        else:
            result.append(token)
    return result


def _most_common(values: Any) -> Any:
    counts = Counter(values)
    return max(counts, key=lambda value: counts[value]) if counts else None


def _frozen(gpus: dict[str, Any] | None) -> Any:
    """gpus as a hashable value (its dicts, sharing and each of types, as ("dict", items))."""
    if gpus is None:
        return None
    return tuple((k, _freeze(dict(sorted(v.items())) if k == "sharing" else v)) for k, v in gpus.items())


def _freeze(value: Any) -> Any:
    # A dict keeps its order (each of types: model, count, devices).
    if isinstance(value, dict):
        return ("dict", tuple((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", tuple(_freeze(v) for v in value))
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "dict":
        return {k: _thaw(v) for k, v in value[1]}
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "list":
        return [_thaw(v) for v in value[1]]
    return value


def _thawed(frozen: Any) -> dict[str, Any] | None:
    if frozen is None:
        return None
    return {k: _thaw(v) for k, v in frozen}


_TYPE_ORDER = (
    "sockets", "cores_per_socket", "threads_per_core", "cpus", "memory_mb", "tmp_disk_mb", "mem_spec_limit_mb",
    "core_spec_count", "cpu_spec_list", "gpus", "features", "weight", "extra",
)  # fmt: skip


def _ordered_type(node_type: dict[str, Any]) -> dict[str, Any]:
    return {key: node_type[key] for key in _TYPE_ORDER if key in node_type}


def _gpu_total(gpus: dict[str, Any]) -> int:
    """A node's GPUs: gpus.count, or its types' total."""
    if "count" in gpus:
        return int(gpus["count"])
    return sum(int(t["count"]) for t in gpus.get("types", []))


def _cpus(node_type: dict[str, Any]) -> int:
    if "cpus" in node_type:
        return int(node_type["cpus"])
    return int(node_type["sockets"] * node_type["cores_per_socket"] * node_type.get("threads_per_core", 1))


def _prefix(host: str) -> str:
    """A node type's name from one of its hosts: the name without its number."""
    base = re.sub(r"[-_.]*\d+$", "", host) or host
    base = re.sub(r"[^A-Za-z0-9-]", "-", base).strip("-") or "node"
    return base if base[0].isalpha() else f"n-{base}"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", text).strip("-")


def _group(name: str) -> str:
    """An Ansible group name (letters, digits, underscores)."""
    group = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return group if group[:1].isalpha() else f"g_{group}"


def _unique(base: str, taken: set[str]) -> str:
    name, number = base, 2
    while name in taken:
        name = f"{base}_{number}"
        number += 1
    taken.add(name)
    return name


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def sort_hosts(hosts: list[str]) -> list[str]:
    return sorted(hosts, key=numeric_sort_key)
