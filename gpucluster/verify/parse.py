"""Parsers of what Slurm 22.05 and the hosts print, for the checks (formats read in Slurm's source:
src/api/node_info.c, src/api/topo_info.c, sacctmgr --parsable2)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpucluster.hostlists import expand

# A `Key=` at the start of a word: `OS=Linux 6.1.0 #1 SMP` and `Reason=Not responding [slurm@...]`
# keep their spaces; `CfgTRES=cpu=2,mem=1G` keeps its inner `=`.
_KEY = re.compile(r"\s+(?=[A-Za-z][A-Za-z0-9_]*=)")
VERSION = re.compile(r"\b(\d+\.\d+\.\d+[\w.-]*)")
NULL = "(null)"


def key_values(line: str) -> dict[str, str]:
    """One `scontrol --oneliner` record -> {key: value}."""
    fields: dict[str, str] = {}
    for word in _KEY.split(line.strip()):
        key, sep, value = word.partition("=")
        if sep:
            fields[key] = value.strip()
    return fields


def scontrol_records(text: str, key: str) -> dict[str, dict[str, str]]:
    """`scontrol --oneliner show node` (or topology) -> {NodeName: fields}."""
    records = {}
    for line in text.splitlines():
        fields = key_values(line)
        if key in fields:
            records[fields[key]] = fields
    return records


def names(value: str | None) -> set[str]:
    """A comma list as scontrol prints it (`(null)` or empty: none)."""
    if not value or value == NULL:
        return set()
    return {v for v in value.split(",") if v}


def gres(value: str | None) -> set[str]:
    """`gpu:h100:8(S:0-1),gpu:a100:2(IDX:0-1)` -> {"gpu:h100:8", "gpu:a100:2"}."""
    return {re.sub(r"\(.*?\)$", "", item) for item in names(value)}


@dataclass(frozen=True)
class NodeState:
    base: str  # IDLE, ALLOCATED, MIXED, DOWN, ...
    flags: tuple[str, ...]  # DRAIN, NOT_RESPONDING, COMPLETING, ...

    @classmethod
    def parse(cls, value: str) -> NodeState:
        base, *flags = value.split("+")
        return cls(base, tuple(flags))


# Node states in which a node takes jobs, and the flags that do not stop it.
USABLE_BASES = {"IDLE", "ALLOCATED", "MIXED"}
HARMLESS_FLAGS = {"COMPLETING", "PLANNED", "RESERVED", "PERFCTRS", "CLOUD", "DYNAMIC_NORM"}


# Slurm's power-saving flags, as a reader says them.
POWER_FLAGS = {
    "POWERED_DOWN": "powered down",
    "POWERING_UP": "powering up",
    "POWERING_DOWN": "powering down",
    "POWER_DOWN": "to be powered down",
}


def usable(state: NodeState) -> bool:
    return state.base in USABLE_BASES and not set(state.flags) - HARMLESS_FLAGS


@dataclass(frozen=True)
class TopoSwitch:
    name: str
    level: int
    nodes: tuple[str, ...]
    switches: tuple[str, ...]


def topology(text: str) -> dict[str, TopoSwitch]:
    """`scontrol show topology` (one line per switch) -> {name: switch}."""
    switches = {}
    for name, fields in scontrol_records(text, "SwitchName").items():
        switches[name] = TopoSwitch(
            name,
            int(fields.get("Level", "0") or 0),
            tuple(expand(fields["Nodes"])) if fields.get("Nodes") else (),
            tuple(expand(fields["Switches"])) if fields.get("Switches") else (),
        )
    return switches


def parsable_rows(text: str, fields: tuple[str, ...]) -> list[dict[str, str]]:
    """`sacctmgr --noheader --parsable2` output -> one dict per line, keyed by `fields`."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = line.split("|")
        values += [""] * (len(fields) - len(values))
        rows.append(dict(zip(fields, values, strict=False)))
    return rows


def passwd(text: str) -> dict[str, tuple[int, int]]:
    """`getent passwd ...` -> {user: (uid, gid)}."""
    users = {}
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) >= 4 and parts[2].isdigit() and parts[3].isdigit():
            users[parts[0]] = (int(parts[2]), int(parts[3]))
    return users


def versions(text: str) -> dict[str, str]:
    """`<program> <its -V output>` lines -> {program: version}. A program that printed no version
    is left out: Debian's `slurmdbd -V` only complains of a missing slurmdbd.conf on hosts that
    have the package but do not run slurmdbd."""
    found = {}
    for line in text.splitlines():
        program, _, rest = line.strip().partition(" ")
        match = VERSION.search(rest)
        if program and match:
            found[program] = match.group(1)
    return found


def slurm_minutes(text: str | None) -> int | None:
    """A Slurm time (min, min:sec, h:m:s, d-h, d-h:m, d-h:m:s) in whole minutes; None: no limit."""
    if text is None or not text.strip() or text.strip().upper() in ("UNLIMITED", "INFINITE", "-1"):
        return None
    days, _, clock = text.strip().rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if days:
        hours, minutes = parts[0], parts[1] if len(parts) > 1 else 0
        return int(days) * 1440 + hours * 60 + minutes
    if len(parts) <= 2:
        return parts[0]
    return parts[0] * 60 + parts[1]


def tres(text: str | None, key: str = "gres/gpu") -> str | None:
    """`cpu=4,gres/gpu=8` -> "8" for gres/gpu; None when the TRES is not limited."""
    for item in (text or "").split(","):
        name, sep, value = item.partition("=")
        if sep and name.strip() == key:
            return value.strip()
    return None


@dataclass(frozen=True)
class TaskLines:
    """`key=value` lines the job scripts print, per node."""

    jobs: set[str]
    nodes: list[str]
    lines: list[dict[str, str]]


def task_lines(text: str) -> TaskLines:
    jobs: set[str] = set()
    nodes: list[str] = []
    lines = []
    for line in text.splitlines():
        fields = key_values(line)
        if not fields:
            continue
        lines.append(fields)
        if "job" in fields and "node" in fields:
            jobs.add(fields["job"])
            nodes.append(fields["node"])
    return TaskLines(jobs, nodes, lines)


@dataclass(frozen=True)
class NcclRun:
    ranks: dict[int, str]  # rank -> host
    duplicate_ranks: bool
    bus_bandwidth: float | None  # GB/s, nccl-tests' "Avg bus bandwidth"
    wrong: int | None  # "Out of bounds values" (wrong results)
    network: str | None  # NCCL's network plugin ("IB", "Socket", ...)
    transports: tuple[str, ...]  # "via NET/IB/0" -> NET/IB, P2P/IPC, SHM, ...


_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device")
_BANDWIDTH = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([\d.]+)")
_WRONG = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)")
_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_VIA = re.compile(r"\bvia ((?:NET/[^/\s]+)|(?:P2P/\w+)|SHM|\w+/\w+)")


def nccl(text: str) -> NcclRun:
    ranks: dict[int, str] = {}
    duplicate = False
    for match in _RANK.finditer(text):
        rank = int(match.group(1))
        duplicate = duplicate or rank in ranks
        ranks[rank] = match.group(2)
    bandwidth = _BANDWIDTH.search(text)
    wrong = _WRONG.search(text)
    network = _NETWORK.search(text)
    transports = sorted({m.group(1) for m in _VIA.finditer(text)})
    return NcclRun(
        ranks,
        duplicate,
        float(bandwidth.group(1)) if bandwidth else None,
        int(wrong.group(1)) if wrong else None,
        network.group(1) if network else None,
        tuple(transports),
    )
