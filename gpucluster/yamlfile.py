"""YAML loading that remembers where each key is and refuses duplicate keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpucluster.errors import InventoryError, Problem, format_path

# Ansible inventories may carry `!vault` tagged scalars; they are opaque to the model.
_VAULT_TAG = "!vault"


# libyaml's parser when PyYAML was built with it (Debian's and PyPI's wheels are): inventories
# of thousands of hosts parse several times faster.
_Base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):  # type: ignore[valid-type,misc]
    pass


def _vault(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return "<vaulted>"


_Loader.add_constructor(_VAULT_TAG, _vault)


class LoadedYaml:
    """Parsed data plus the line of every key path, for error messages."""

    def __init__(self, data: Any, lines: dict[str, int], file: str) -> None:
        self.data = data
        self.lines = lines
        self.file = file

    def line_of(self, path: str) -> int | None:
        """Line of the key path, or of its nearest ancestor that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return None

    def problem(self, path: str, message: str) -> Problem:
        return Problem(self.file, path, message, self.line_of(path))


class _RecursiveAlias(Exception):
    def __init__(self, line: int) -> None:
        self.line = line


def _walk(
    node: yaml.Node,
    parts: list[str | int],
    lines: dict[str, int],
    dups: list[tuple[str, int]],
    ancestors: frozenset[int] = frozenset(),
) -> None:
    if id(node) in ancestors:
        raise _RecursiveAlias(node.start_mark.line + 1)
    ancestors = ancestors | {id(node)}
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            child = [*parts, key]
            path = format_path(child)
            if key in seen:
                dups.append((path, key_node.start_mark.line + 1))
            seen.add(key)
            lines.setdefault(path, key_node.start_mark.line + 1)
            _walk(value_node, child, lines, dups, ancestors)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = [*parts, index]
            lines.setdefault(format_path(child), item.start_mark.line + 1)
            _walk(item, child, lines, dups, ancestors)


def load_yaml(path: Path, display: str) -> LoadedYaml:
    """Parse one YAML file; syntax errors and duplicate keys become Problems with line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError([Problem(display, "", f"cannot read file: {exc}")]) from None
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise InventoryError([Problem(display, "", f"YAML syntax error at {where}: {exc.problem}")]) from None
    except yaml.YAMLError as exc:
        raise InventoryError([Problem(display, "", f"YAML error: {exc}")]) from None
    lines: dict[str, int] = {}
    dups: list[tuple[str, int]] = []
    if node is not None:
        try:
            _walk(node, [], lines, dups)
        except _RecursiveAlias as exc:
            raise InventoryError(
                [Problem(display, "", "a YAML alias refers to itself (recursive anchor)", exc.line)]
            ) from None
    try:
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        raise InventoryError([Problem(display, "", f"YAML error: {exc}")]) from None
    finally:
        loader.dispose()
    if dups:
        raise InventoryError(
            [Problem(display, p, "duplicate key (the later one would silently win)", ln) for p, ln in dups]
        )
    return LoadedYaml(data, lines, display)
