"""Pydantic's errors as problems that point at the mistake: one mistake, one problem.

A misspelt key (`cores_per_sockets`) gets "did you mean `cores_per_socket`?" and no second
"required key is missing" for the key it stands for; a key written one level too deep or too
shallow is reported once, as that, at the line where it was written; a value that is close to
one of the allowed words gets the word.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from gpucluster.errors import Problem, format_path

if typing.TYPE_CHECKING:
    from gpucluster.yamlfile import LoadedYaml

Loc = tuple[str | int, ...]

# How close a misspelling must be to a known word to be suggested (difflib's ratio).
CUTOFF = 0.75
SCHEMA_HINT = "`gpucluster schema --markdown` lists the keys"


def _clean(loc: Sequence[str | int], data: Any) -> Loc:
    """pydantic's location without its validator and union tags (`function-after[...]`,
    `list[str]`). A step the input has is kept whatever its name: a key of the inventory may hold a
    bracket (`gpu_operator[1:2]`, an Ansible range pasted where a key belongs)."""
    kept: list[str | int] = []
    node = data
    for part in loc:
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_list or (isinstance(node, dict) and part in node):
            node = node[part]
        elif isinstance(part, str) and (part.startswith("function-") or "[" in part):
            continue
        else:
            node = None
        kept.append(part)
    return tuple(kept)


def field_types(tp: Any) -> list[Any]:
    """The types a field may hold: Annotated unwrapped, unions split, None dropped."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return field_types(typing.get_args(tp)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [m for arg in typing.get_args(tp) for m in field_types(arg)]
    if tp is type(None):
        return []
    return [tp]


def _model(tp: Any) -> type[BaseModel] | None:
    return next((m for m in field_types(tp) if isinstance(m, type) and issubclass(m, BaseModel)), None)


def _step(tp: Any, part: str | int) -> Any:
    """The type found at `part` inside a value of type `tp`; None when it cannot be told."""
    for member in field_types(tp):
        origin = typing.get_origin(member)
        if isinstance(member, type) and issubclass(member, BaseModel):
            field = member.model_fields.get(str(part)) if isinstance(part, str) else None
            if field is not None:
                return field.annotation
        elif origin is list and isinstance(part, int):
            return typing.get_args(member)[0]
        elif origin is dict:
            return typing.get_args(member)[1]
    return None


def type_at(root: type[BaseModel], loc: Loc) -> Any:
    tp: Any = root
    for part in loc:
        tp = _step(tp, part)
        if tp is None:
            return None
    return tp


def model_at(root: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    tp = type_at(root, loc)
    return None if tp is None else _model(tp)


def is_dict_entry(root: type[BaseModel], loc: Loc) -> bool:
    """True when the last part of `loc` is a key of a free-form mapping (a node type's name...)."""
    parent = type_at(root, loc[:-1]) if loc else None
    return parent is not None and any(typing.get_origin(m) is dict for m in field_types(parent))


def closest(word: str, choices: Sequence[str]) -> str | None:
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=CUTOFF)
    if not found:
        # A case slip (`Cores_per_socket`) is still that key.
        lowered = {c.lower(): c for c in choices}
        return lowered.get(word.lower())
    return found[0]


@dataclass(frozen=True)
class _Error:
    kind: str
    loc: Loc
    message: str
    ctx: dict[str, Any]
    input: Any


def _message(error: _Error) -> str:
    if error.kind == "missing":
        return "required key is missing"
    text = error.message.removeprefix("Value error, ")
    if error.kind == "less_than_equal" and "le" in error.ctx:
        return f"{error.input} is more than {error.ctx['le']}, the most this key takes"
    if error.kind == "bool_type":
        # A quoted `"yes"`, `"true"` or a number: YAML reads only the bare words as booleans.
        return f"{error.input!r} is not true or false: write `true` or `false`, unquoted"
    if error.kind in ("enum", "literal_error") and isinstance(error.input, str):
        allowed = re.findall(r"'([^']*)'", str(error.ctx.get("expected", "")))
        guess = closest(error.input, allowed)
        if guess is not None:
            text += f"; did you mean `{guess}`?"
    return text


class _Reporter:
    def __init__(self, root: type[BaseModel] | None, errors: list[_Error]) -> None:
        self.root = root
        self.errors = errors
        self.missing = {e.loc for e in errors if e.kind == "missing"}
        self.used: set[Loc] = set()  # missing keys another problem already explains
        self.out: list[tuple[Loc, str]] = []

    def missing_above(self, loc: Loc, key: str) -> Loc | None:
        """The nearest ancestor of `loc` that misses `key`."""
        for cut in range(len(loc) - 1, -1, -1):
            if (*loc[:cut], key) in self.missing:
                return loc[:cut]
        return None

    def unknown_key(self, loc: Loc) -> str:
        parent, key = loc[:-1], str(loc[-1])
        model = model_at(self.root, parent) if self.root else None
        if model is None:
            return f"unknown key (check the spelling; {SCHEMA_HINT})"
        known = list(model.model_fields)
        guess = closest(key, known)
        if guess is not None:
            self.used.add((*parent, guess))
            return f"unknown key: did you mean `{guess}`?"
        above = self.missing_above(parent, key)
        if above is not None:
            self.used.add((*above, key))
            return (
                f"`{key}` is a key of {format_path(above) or 'the top level'}, not of "
                f"{format_path(parent)}: check its indentation"
            )
        for name in known:
            child = model_at(self.root, (*parent, name)) if self.root else None
            if child is not None and key in child.model_fields:
                return f"`{key}` is a key of `{name}` ({format_path((*parent, name, key))}): check its indentation"
        listed = ", ".join(known)
        return f"unknown key (known here: {listed})" if len(known) <= 20 else f"unknown key ({SCHEMA_HINT})"

    def misplaced_entry(self, loc: Loc) -> tuple[Loc, str] | None:
        """An error inside a mapping entry whose name is a key missing further up: the key was
        indented into the mapping (`nodes:` under `node_types:`)."""
        if self.root is None:
            return None
        for cut in range(len(loc), 0, -1):
            prefix = loc[:cut]
            name = prefix[-1]
            if not isinstance(name, str) or not is_dict_entry(self.root, prefix):
                continue
            above = self.missing_above(prefix[:-1], name)
            if above is not None:
                self.used.add((*above, name))
                message = (
                    f"`{name}` is an entry of {format_path(prefix[:-1])}, but a key of "
                    f"{format_path(above) or 'the top level'}: check its indentation"
                )
                return prefix, message
        return None

    def run(self) -> list[tuple[Loc, str]]:
        reported: set[Loc] = set()
        for error in self.errors:
            if error.kind == "missing":
                continue
            misplaced = self.misplaced_entry(error.loc)
            if misplaced is not None:
                if misplaced[0] not in reported:
                    reported.add(misplaced[0])
                    self.out.append(misplaced)
                continue
            if error.kind == "extra_forbidden":
                self.out.append((error.loc, self.unknown_key(error.loc)))
            else:
                self.out.append((error.loc, _message(error)))
        for error in self.errors:
            if error.kind == "missing" and error.loc not in self.used:
                self.out.append((error.loc, _message(error)))
        return self.out


def model_problems(
    file: LoadedYaml,
    exc: ValidationError,
    root: type[BaseModel] | None = None,
    prefix: tuple[str, ...] = (),
) -> list[Problem]:
    """The problems of a validation of `root` (at `prefix` of the file, for a section validated alone)."""
    data: Any = file.data
    for part in prefix:
        data = data.get(part) if isinstance(data, dict) else None
    errors = [
        _Error(e["type"], _clean(e["loc"], data), e["msg"], dict(e.get("ctx") or {}), e.get("input"))
        for e in exc.errors()
    ]
    return [
        file.problem(format_path([*prefix, *loc]), message) for loc, message in _Reporter(root, errors).run()
    ]
