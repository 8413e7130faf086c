"""What the plan modules of roles that keep a record on the host share (shared_mounts_plan,
unix_accounts_plan): the JSON record of what the role made there, read or the module failed naming
the host, and a plan's notes, errors and record before and after its changes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# The options of every such module beside its own (each module documents them in its own words).
RECORD_OPTIONS: dict[str, dict[str, Any]] = {
    "record": {"type": "path", "required": True},
    "remove_absent": {"type": "bool", "default": False},
    "host": {"type": "str", "required": True},
}


@dataclass
class RecordPlan:
    """The part of a plan every such module returns; each module adds its own lists."""

    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    record_before: dict[str, list[str]] = field(default_factory=dict)
    record_after: dict[str, list[str]] = field(default_factory=dict)


def read_record(path: str, keys: Sequence[str]) -> dict[str, list[str]]:
    """{key: [names]} of the record at `path` (every key empty where there is no record yet)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return {key: [] for key in keys}
    return {key: [str(name) for name in data.get(key, [])] for key in keys}


def load_record(module: Any, keys: Sequence[str]) -> dict[str, list[str]]:
    """The record the module's `record` option names; an unreadable one fails the module."""
    params = module.params
    try:
        return read_record(params["record"], keys)
    except (OSError, ValueError, AttributeError) as exc:
        module.fail_json(msg=f"{params['host']}: cannot read the record {params['record']}: {exc}")
        raise  # not reached: fail_json exits


def fail_on_errors(module: Any, plan: RecordPlan) -> None:
    if plan.errors:
        module.fail_json(msg="; ".join(plan.errors), errors=plan.errors)
