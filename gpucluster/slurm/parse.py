"""Read Slurm's configuration files as Slurm reads them: slurm.conf with its `include`s, gres.conf,
topology.conf, topology.yaml and cgroup.conf, each setting with the file and line it came from.

The syntax is Slurm's own parser's (src/common/parse_config.c): `Key=Value` pairs separated by
blanks, keys in any case, a value in double quotes may hold blanks, `#` starts a comment (`\\#` is a
literal one), a line ending in `\\` continues on the next; a line whose first key is NodeName,
PartitionName, NodeSet, DownNodes or FrontendName (SwitchName, BlockName in topology.conf) is one
record of several options; `include FILE` reads another file there (relative names from the
including file's directory; `%c` is the cluster name).
Nothing here decides what a setting means: gpucluster.slurm_import.importer and .compare do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.errors import InventoryError, Problem

# Slurm's own pattern of one option (parse_config.c, keyvalue_pattern).
OPTION_RE = re.compile(r'\s*([A-Za-z0-9_.]+)\s*([-*+/]?)=\s*(?:"([^"]*)"|(\S+))(?=\s|$)')
SLURM_RECORDS = ("NodeName", "PartitionName", "NodeSet", "DownNodes", "FrontendName")
TOPOLOGY_RECORDS = ("SwitchName", "BlockName")
# gres.conf: each line is a record of its own, whatever its first key.
EVERY_LINE = ("*",)
INCLUDE_RE = re.compile(r"^\s*include\s+(\S.*?)\s*$", re.IGNORECASE)
# Includes nest at most this deep (Slurm's own limit is smaller), and one configuration reads at
# most this many files; a file that includes itself again (a loop) is refused at once.
MAX_INCLUDE_DEPTH = 16
MAX_FILES = 256


@dataclass(frozen=True)
class Where:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Option:
    key: str  # as written
    value: str
    where: Where
    operator: str = ""  # Slurm's `+=` `-=` forms keep theirs

    @property
    def lower(self) -> str:
        return self.key.lower()


@dataclass
class Record:
    """A line of several options that describes one thing: a node list, a partition, a switch."""

    kind: str  # Slurm's spelling of the first key, e.g. NodeName
    name: str
    options: list[Option]
    where: Where

    def get(self, key: str) -> Option | None:
        lower = key.lower()
        return next((o for o in reversed(self.options) if o.lower == lower), None)


@dataclass
class ConfFile:
    """A file as read: its global settings in order, its records, the files it took them from."""

    settings: list[Option] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def last(self, key: str) -> Option | None:
        lower = key.lower()
        return next((o for o in reversed(self.settings) if o.lower == lower), None)

    def all(self, key: str) -> list[Option]:
        lower = key.lower()
        return [o for o in self.settings if o.lower == lower]


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each line as Slurm's _get_next_line makes it: a `#` after an
    even number of backslashes ends each physical line, an odd number of backslashes at its end
    (blanks after them aside) joins it with the next one as it is, and then every `\\X` is X."""
    out: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw[: _comment_at(raw)] if "#" in raw else raw
        if not pending:
            start = number
        cut = _continuation_at(line)
        if cut is not None:
            pending += line[:cut]
            continue
        line = _unescaped(pending + line)
        pending = ""
        if line.strip():
            out.append((start, line))
    if pending.strip():
        out.append((start, _unescaped(pending)))
    return out


def _comment_at(line: str) -> int:
    """Where a comment starts: the first `#` after an even number of backslashes (the end if none)."""
    backslashes = 0
    for index, char in enumerate(line):
        if char == "#" and backslashes % 2 == 0:
            return index
        backslashes = backslashes + 1 if char == "\\" else 0
    return len(line)


def _continuation_at(line: str) -> int | None:
    """Where a line continued on the next one is cut (its last backslash), or None."""
    end = len(line.rstrip())
    count = end - len(line[:end].rstrip("\\"))
    return end - 1 if count % 2 == 1 else None


_ESCAPE = re.compile(r"\\(.?)", re.DOTALL)


def _unescaped(text: str) -> str:
    return _ESCAPE.sub(r"\1", text) if "\\" in text else text


def quote_value(value: object) -> str:
    """A value as a Slurm file must write it to be read back as it is: `\\` and `#` escaped, and in
    double quotes where it holds a blank (or is empty). ValueError where Slurm cannot read it back:
    a line break, or a double quote in a value that needs quoting."""
    text = value if isinstance(value, str) else str(value)
    if "\n" in text or "\r" in text:
        raise ValueError("a value of a Slurm file cannot hold a line break")
    if "\\" in text or "#" in text:
        text = text.replace("\\", "\\\\").replace("#", "\\#")
    if text and not _BLANK.search(text):
        if text[0] == '"' and text[-1] == '"' and len(text) > 1 and '"' not in text[1:-1]:
            raise ValueError("Slurm reads a value written in double quotes without them")
        return text
    if '"' in text:
        raise ValueError("Slurm cannot read a value holding both a blank and a double quote")
    return f'"{text}"'


def unreadable_value(value: object) -> str | None:
    """Why Slurm could not read `value` back from a file, or None."""
    try:
        quote_value(value)
    except ValueError as exc:
        return str(exc)
    return None


_BLANK = re.compile(r"\s")


def parse_options(text: str, where: Where) -> list[Option] | None:
    """The options of one line, or None when it is not a sequence of `Key=Value`."""
    options: list[Option] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = OPTION_RE.match(text, position)
        if match is None:
            return None
        key, operator, quoted, plain = match.groups()
        options.append(Option(key, quoted if quoted is not None else plain, where, operator))
        position = match.end()
        while position < len(text) and text[position].isspace():
            position += 1
    return options


def _spelt(key: str, kinds: tuple[str, ...]) -> str | None:
    return next((kind for kind in kinds if kind.lower() == key.lower()), None)


class Reader:
    """Reads one file (and what it includes) into a ConfFile, collecting problems."""

    def __init__(self, records: tuple[str, ...], problems: list[Problem], display: dict[Path, str]) -> None:
        self.records = records
        self.problems = problems
        self.display = display  # path -> how problems name it
        self.cluster_name = ""
        self.reading: list[Path] = []  # the chain of files being read (an include loop ends there)
        self.files_read = 0

    def name_of(self, path: Path) -> str:
        return self.display.get(path, str(path))

    def read(self, path: Path, conf: ConfFile | None = None, depth: int = 0) -> ConfFile:
        self.reading.append(path.resolve())
        self.files_read += 1
        try:
            return self._read(path, conf, depth)
        finally:
            self.reading.pop()

    def _read(self, path: Path, conf: ConfFile | None, depth: int) -> ConfFile:
        conf = conf if conf is not None else ConfFile()
        shown = self.name_of(path)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            self.problems.append(Problem(shown, "", f"cannot read it: {exc.strerror or exc}"))
            return conf
        conf.files.append(shown)
        for number, line in _logical_lines(text):
            where = Where(shown, number)
            include = INCLUDE_RE.match(line)
            if include:
                self.include(path, include.group(1).strip().strip('"'), where, conf, depth)
                continue
            options = parse_options(line, where)
            if options is None or not options:
                self.problems.append(
                    Problem(shown, "", f"not a `Key=Value` setting: {line.strip()[:60]!r}", number)
                )
                continue
            kind = options[0].key if self.records == EVERY_LINE else _spelt(options[0].key, self.records)
            if kind is not None:
                conf.records.append(Record(kind, options[0].value, options[1:], where))
                continue
            for option in options:
                if option.lower == "clustername":
                    self.cluster_name = option.value
            conf.settings.extend(options)
        return conf

    def include(self, path: Path, name: str, where: Where, conf: ConfFile, depth: int) -> None:
        if self.files_read >= MAX_FILES:
            self.problems.append(
                Problem(where.file, "include", f"more than {MAX_FILES} files included in all", where.line)
            )
            return
        if depth >= MAX_INCLUDE_DEPTH:
            self.problems.append(
                Problem(where.file, "include", f"includes nest deeper than {MAX_INCLUDE_DEPTH}", where.line)
            )
            return
        target = Path(name.replace("%c", self.cluster_name))
        candidates = [target] if target.is_absolute() else [path.parent / target]
        # A site's absolute path (/etc/slurm/x.conf) read from a copy elsewhere: the copy's own
        # directory holds the file.
        candidates.append(path.parent / target.name)
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            self.problems.append(
                Problem(
                    where.file,
                    "include",
                    f"`{name}` not found (looked for {', '.join(str(c) for c in dict.fromkeys(candidates))})",
                    where.line,
                )
            )
            return
        self.display.setdefault(found, str(found))
        if found.resolve() in self.reading:
            self.problems.append(
                Problem(
                    where.file, "include", f"`{name}` includes itself again (an include loop)", where.line
                )
            )
            return
        self.read(found, conf, depth + 1)


def read_conf(path: Path, records: tuple[str, ...], shown: str | None = None) -> ConfFile:
    """One configuration file (and its includes); InventoryError with every problem."""
    problems: list[Problem] = []
    reader = Reader(records, problems, {path: shown or str(path)})
    conf = reader.read(path)
    if problems:
        raise InventoryError(problems)
    return conf


def read_topology_yaml(path: Path, shown: str | None = None) -> list[dict[str, Any]]:
    """topology.yaml (Slurm >= 25.05): a list of topologies, each a mapping."""
    import yaml

    name = shown or str(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InventoryError([Problem(name, "", f"not a topology.yaml: {exc}")]) from None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise InventoryError([Problem(name, "", "not a topology.yaml: expected a list of topologies")])
    return data


PLUGSTACK_WORDS = ("required", "optional", "include")


def read_plugstack(
    path: Path, problems: list[Problem], display: dict[Path, str], chain: tuple[Path, ...] = ()
) -> list[tuple[str, Where]]:
    """plugstack.conf as slurmd reads it (src/common/plugstack.c): `required|optional PLUGIN
    [ARGS]` lines, `#` comments, `include PATTERN` globs (relative to the including file). An
    include is read from the copy when the copy has its files (an absolute pattern's last two
    parts, e.g. plugstack.conf.d/*.conf beside it); otherwise it is kept as written."""
    shown = display.get(path, str(path))
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        problems.append(Problem(shown, "", f"cannot read it: {exc.strerror or exc}"))
        return []
    out: list[tuple[str, Where]] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        where = Where(shown, number)
        if words[0] not in PLUGSTACK_WORDS or len(words) < 2 or (words[0] == "include" and len(words) != 2):
            problems.append(Problem(shown, "", f"not a plugstack.conf line: {raw.strip()[:60]!r}", number))
            continue
        if words[0] != "include":
            out.append((" ".join(words), where))
            continue
        found = _plugstack_include(path, words[1])
        chain_here = (*chain, path.resolve())
        looping = [p for p in found if p.resolve() in chain_here]
        if looping or len(chain_here) > MAX_INCLUDE_DEPTH:
            problems.append(
                Problem(
                    shown, "include", f"`{words[1]}` includes a file being read (an include loop)", number
                )
            )
            continue
        if not found:
            out.append((" ".join(words), where))
            continue
        for included in found:
            display.setdefault(included, str(included))
            out += read_plugstack(included, problems, display, chain_here)
    return out


def _plugstack_include(path: Path, pattern: str) -> list[Path]:
    """The files of the copy an include of plugstack.conf names (sorted, as glob(3) gives them)."""
    relative = Path(pattern)
    if relative.is_absolute():
        relative = Path(*relative.parts[-2:]) if len(relative.parts) > 2 else Path(relative.name)
    return sorted(p for p in path.parent.glob(str(relative)) if p.is_file())
