"""YAML for people to read and keep short: the top levels as blocks, deeper mappings and every
list on one line (`{sockets: 2, cores_per_socket: 56}`, `[a, b]`), a mapping whose values are all
null as Ansible's host lists (`{ctl01, "gpu[01:08]"}`). What gpucluster import writes."""

from __future__ import annotations

import json
import re
from typing import Any

_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./+@-]*$")
_WORDS = frozenset(("y", "n", "yes", "no", "on", "off", "true", "false", "null"))
# A mapping of `blocks` fits on one line up to this width; longer, it takes a line per key.
WIDTH = 110


def scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = str(value)
    # Plain when YAML reads it back as this string: it starts with a letter, `_` or `/` (so it is
    # no number or date) and is none of YAML 1.1's booleans and nulls.
    if _PLAIN.match(text) and text.lower() not in _WORDS:
        return text
    return json.dumps(text)


def flow(value: Any) -> str:
    if isinstance(value, dict):
        if value and all(v is None for v in value.values()):
            return "{" + ", ".join(scalar(k) for k in value) + "}"
        return "{" + ", ".join(f"{scalar(k)}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    return scalar(value)


def dump(
    data: dict[str, Any], flow_depth: int, header: str = "", blocks: tuple[tuple[str, ...], ...] = ()
) -> str:
    """`data` with mappings at depth `flow_depth` or deeper (the top is 0) on one line each, but
    for the mappings at the key paths of `blocks` longer than a line (e.g. a switch tree: a line
    per switch)."""
    lines = ["---"] + ([f"# {line}" if line else "#" for line in header.splitlines()] if header else [])

    def block(mapping: dict[str, Any], depth: int, path: tuple[str, ...] = ()) -> None:
        indent = "  " * depth
        for key, value in mapping.items():
            here = (*path, str(key))
            long = len(indent) + len(str(key)) + 2 + len(flow(value)) > WIDTH
            if isinstance(value, dict) and value and (depth + 1 < flow_depth or (here in blocks and long)):
                lines.append(f"{indent}{scalar(key)}:")
                block(value, depth + 1, here)
            elif isinstance(value, list) and value and any(isinstance(v, dict) for v in value):
                lines.append(f"{indent}{scalar(key)}:")
                lines.extend(f"{indent}  - {flow(item)}" for item in value)
            else:
                lines.append(f"{indent}{scalar(key)}: {flow(value)}")

    block(data, 0)
    return "\n".join(lines) + "\n"


def content_lines(text: str) -> int:
    """Lines that say something: not blank, not only a comment, not the document start."""
    return sum(
        1
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#") and line.strip() != "---"
    )
