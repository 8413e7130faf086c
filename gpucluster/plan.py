"""What a change between two inventories requires on a live cluster (`gpucluster plan`).

Every model field carries an update policy; the plan lists each changed key with its policy and
names the most disruptive one, so an operator knows before applying whether files alone, an
`scontrol reconfigure`, a daemon restart, accounts only, or a rebuild is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from gpucluster.cluster import Cluster
from gpucluster.errors import format_path
from gpucluster.hostlists import compress
from gpucluster.modelbase import Update
from gpucluster.moves import moves

# Least to most disruptive.
SEVERITY = [
    Update.RENDER_ONLY,
    Update.SERVICE,
    Update.KUBERNETES,
    Update.UNIX_ACCOUNTS,
    Update.ACCOUNTS,
    Update.RECONFIGURE,
    Update.STORAGE,
    Update.RESTART,
    Update.MOVE,
    Update.REBUILD,
]


@dataclass(frozen=True)
class Change:
    path: str
    old: str
    new: str
    update: Update


def _policy(model: type[BaseModel], field: str, inherited: Update) -> Update:
    info = model.model_fields.get(field)
    extra = info.json_schema_extra if info else None
    if isinstance(extra, dict) and isinstance(extra.get("x-update"), str):
        return Update(str(extra["x-update"]))
    return inherited


def _show(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_defaults=True)
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _diff(old: Any, new: Any, parts: list[str | int], update: Update, out: list[Change]) -> None:
    if old == new:
        return
    if isinstance(old, BaseModel) and isinstance(new, BaseModel) and type(old) is type(new):
        for field in type(old).model_fields:
            _diff(
                getattr(old, field),
                getattr(new, field),
                [*parts, field],
                _policy(type(old), field, update),
                out,
            )
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            _diff(old.get(key), new.get(key), [*parts, str(key)], update, out)
        return
    key = _list_key(old, new)
    if key is not None:
        # Lists of named things (partitions, tenants, QOS; node groups by group) compare by name.
        olds, news = {getattr(i, key): i for i in old}, {getattr(i, key): i for i in new}
        for key in sorted(set(olds) | set(news)):
            _diff(olds.get(key), news.get(key), [*parts, key], update, out)
        return
    out.append(Change(format_path(parts), _show(old), _show(new), update))


def _list_key(old: Any, new: Any) -> str | None:
    if not (isinstance(old, list) and isinstance(new, list) and old and new):
        return None
    for key in ("name", "group"):
        values = [getattr(item, key, None) for item in [*old, *new]]
        if all(isinstance(v, str) for v in values) and len(set(values[: len(old)])) == len(old):
            return key
    return None


def plan(old: Cluster, new: Cluster) -> list[Change]:
    """Every changed key between two clusters with what applying it needs."""
    changes: list[Change] = []
    _diff(old.spec, new.spec, ["cluster"], Update.RESTART, changes)
    added = sorted(set(new.node_type_of) - set(old.node_type_of))
    removed = sorted(set(old.node_type_of) - set(new.node_type_of))
    if added or removed:
        # The node list itself lives in hosts.yml: Slurm 22.05 only learns it on restart.
        changes.append(
            Change(
                "hosts",
                f"-{compress(removed)}" if removed else "",
                f"+{compress(added)}" if added else "",
                Update.RESTART,
            )
        )
    # Ownership is resolved per host: a regrouped inventory may move hosts without any one key
    # saying so, and a move is what the operator must see first.
    for move in moves(old, new):
        changes.append(Change(f"hosts.{compress(move.hosts)}.owner", move.source, move.target, Update.MOVE))
    return changes


def required_action(changes: list[Change]) -> Update | None:
    if not changes:
        return None
    return max((c.update for c in changes), key=SEVERITY.index)
