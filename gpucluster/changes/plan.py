"""What a change between two inventories does to a live cluster (`gpucluster plan OLD NEW`).

The plan compares what the two inventories resolve to (gpucluster.resolved: hosts with their node
type and owner, partitions' and switches' hosts, blocks, tenants per scheduler, users, every setting)
and what they render (file by file). Every
change carries the update policy of its key, made true for the target release and for the scheduler
that receives it (a node type only Kubernetes runs is a Kubernetes change), and the rendered files it
touches. The steps carry the changes out in order, each step with the policy it really uses, none
doing nothing; nodes that change scheduler get the move's steps (gpucluster.changes.moves).
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import re
import typing
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from gpucluster.changes.procedures import (
    CONFIRM,
    emptying_steps,
    host_change_class,
    procedures,
)
from gpucluster.changes.records import (
    SEVERITY,
    Change,
    FileChange,
    Plan,
    effective,
    required_action,
    under,
)
from gpucluster.changes.steps import plan_steps, upgrade_steps
from gpucluster.changes.upgrade import PLAYBOOK as PLAYBOOK_UPGRADE
from gpucluster.changes.upgrade import VERSION_PATH, refusal, upgrade_of
from gpucluster.hostlists import compress
from gpucluster.keyhints import field_types
from gpucluster.model.base import Owner, Update
from gpucluster.model.cluster import Cluster
from gpucluster.model.spec import ClusterSpec
from gpucluster.resolved import resolved_view
from gpucluster.slurm.keys import needs_restart

# What each part of the resolved model may change among the rendered files (fnmatch patterns; the
# first matching prefix wins). tests/unit/test_plan_pairs.py checks on thousands of random pairs
# that every file that differs is reached by a listed change.
KUBE = ("kubernetes/*", "helm/*")
# cluster.monitoring's files: the targets carry each node's type, partitions, switch, block, owner, tenant.
MON = ("monitoring/*",)
# IMEX's node lists are the NVLink blocks topology.yaml is written from.
# The gate's section of healthcheck.conf lists the nodes under each leaf switch (the pair test's).
TOPOLOGY = (
    "slurm/slurm.conf", "slurm/topology.conf", "slurm/topology.yaml", "slurm/healthcheck.conf", "nodes/imex/*",
    *KUBE, *MON,
)  # fmt: skip
REACH: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cluster.name", ("*",)),
    ("cluster.slurm.health", ("slurm/slurm.conf", "slurm/healthcheck.conf", *KUBE)),
    ("cluster.slurm.cgroup", ("slurm/cgroup.conf", *KUBE)),
    ("cluster.slurm.node_ssh", ("slurm/slurm.conf", "hosts/node_ssh.yaml")),
    # The Debian suite of the release decides the driver of source `debian`.
    ("cluster.slurm.version", ("slurm/*", "nodes/*", *KUBE, *MON)),
    # Controllers, login and accounting hosts also mount the shared filesystems by default.
    (
        "cluster.slurm",
        ("slurm/slurm.conf", "slurm/cgroup.conf", "hosts/storage.yaml", "hosts/nfs-exports/*", *KUBE, *MON),
    ),
    ("cluster.node_types", ("slurm/*", "nodes/*", *KUBE, *MON)),
    # The gate's burn-in slots are counted per partition.
    ("cluster.partitions", ("slurm/slurm.conf", "slurm/healthcheck.conf", *KUBE, *MON)),
    ("cluster.gate", ("slurm/slurm.conf", "slurm/healthcheck.conf", *KUBE, *MON)),
    ("cluster.fabric", TOPOLOGY),
    ("switches", TOPOLOGY),
    ("cluster.qos", ("slurm/accounts.yaml", *KUBE)),
    ("cluster.groups", ("hosts/users.yaml",)),
    ("cluster.users", ("hosts/users.yaml",)),
    ("cluster.storage", ("hosts/*", *KUBE)),
    ("cluster.kubernetes", KUBE),
    ("cluster.monitoring", ("slurm/slurm.conf", *MON)),
    ("cluster.cloud", ()),
    # Nothing is rendered for a pool yet (issue 42: its programs and balancer come next).
    ("cluster.shared_pools", ()),
    ("hosts", ("*",)),
    ("tenants.*.slurm.*", ("slurm/accounts.yaml",)),
    ("tenants.*.slurm", ("slurm/accounts.yaml",)),
    ("tenants", (*KUBE, *MON)),
)
MAX_DIFF_LINES = 20


# --- the resolved model, compared ----------------------------------------------------------------


def _diff(old: Any, new: Any, parts: list[str], out: list[tuple[list[str], Any, Any]]) -> None:
    if old == new:
        return
    if len(parts) == 2 and parts[0] == "tenants":
        # A tenant added or removed is a change per scheduler: each has its own policy and step.
        old, new = old or {}, new or {}
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            _diff(old.get(key), new.get(key), [*parts, str(key)], out)
        return
    out.append((parts, old, new))


def model_policy(spec: ClusterSpec, parts: list[str]) -> Update:
    """The x-update of the spec field at a path of the resolved model (named lists by name)."""
    update = Update.RESTART
    tp: Any = type(spec)
    layer = {"kubernetes": spec.kubernetes, "cloud": spec.cloud}
    for index, part in enumerate(parts):
        next_tp = None
        for member in field_types(tp):
            origin = typing.get_origin(member)
            if isinstance(member, type) and issubclass(member, BaseModel):
                info = member.model_fields.get(part)
                if info is None:
                    continue
                extra = info.json_schema_extra
                if isinstance(extra, dict) and isinstance(extra.get("x-update"), str):
                    update = Update(str(extra["x-update"]))
                next_tp = info.annotation
                if index == 0 and part in layer and layer[part] is not None:
                    next_tp = type(layer[part])
                break
            if origin in (list, dict):
                next_tp = typing.get_args(member)[-1]
                break
        if next_tp is None:
            break
        tp = next_tp
    return update


def _owners_of(cluster: Cluster, hosts: Iterable[str]) -> set[Owner]:
    return {o for h in hosts if (o := cluster.owner_of.get(h)) is not None}


def _below(cluster: Cluster, switch: str) -> list[str]:
    return [h for h, path in cluster.switch_path.items() if switch in path]


def _domain(old: Cluster, new: Cluster, parts: list[str]) -> set[Owner] | None:
    """The schedulers a change of node types, partitions, switches or blocks reaches (None: any)."""
    head = parts[:2]
    both = (old, new)
    if head == ["cluster", "node_types"] and len(parts) > 2:
        return set().union(*(_owners_of(c, c.hosts_by_type.get(parts[2], [])) for c in both))
    if head == ["cluster", "partitions"] and len(parts) > 2:
        return set().union(*(_owners_of(c, c.partitions.get(parts[2], [])) for c in both))
    if parts[:3] == ["cluster", "fabric", "blocks"] and len(parts) > 3:
        return set().union(*(_owners_of(c, c.blocks.get(parts[3], [])) for c in both))
    if parts[0] == "switches" and len(parts) > 1:
        return set().union(*(_owners_of(c, _below(c, parts[1])) for c in both))
    return None


def policy(old: Cluster, new: Cluster, parts: list[str], before: Any, after: Any) -> Update:
    """What a change of the resolved model needs, before the release decides (NODE_LIST)."""
    head = parts[0]
    if head == "hosts":
        host = parts[1]
        if parts[2:] == ["owner"] and before is not None and after is not None:
            return Update.MOVE
        owners = _owners_of(old, [host]) | _owners_of(new, [host])
        if Owner.SLURM not in owners:
            return Update.KUBERNETES
        return Update.RESTART if parts[2:] == ["type"] else Update.NODE_LIST
    if head == "tenants":
        return Update.ACCOUNTS if parts[2:3] == [Owner.SLURM.value] else Update.KUBERNETES
    if parts[:2] == ["cluster", "partitions"] and len(parts) == 3 and (before is None or after is None):
        # A partition added or removed: slurmctld rebuilds its partitions on reconfigure (a removed
        # one's jobs are first moved or waited for: gpucluster.changes.procedures).
        update = Update.RECONFIGURE
        domain = _domain(old, new, parts)
        if domain is not None and Owner.SLURM not in domain:
            return Update.KUBERNETES if domain else Update.RENDER_ONLY
        return update
    if parts[:3] == ["cluster", "slurm", "extra"] and len(parts) == 4 and needs_restart(parts[3]):
        return Update.RESTART  # the playbook restarts the daemons for these keys
    if parts[:2] == ["cluster", "storage"] and parts[3:] == ["hosts"]:
        # Hosts joining or leaving a filesystem: the new ones mount it, no mount changes elsewhere.
        return Update.RENDER_ONLY
    if head == "switches":
        update = model_policy(new.spec, ["fabric", "tree"])
    else:
        update = model_policy(new.spec, parts[1:])
    domain = _domain(old, new, parts)
    if domain is not None and Owner.SLURM not in domain and update not in (Update.MOVE, Update.REBUILD):
        # Only Kubernetes (or Slurm inside it) runs these: its objects and values are re-applied.
        return Update.KUBERNETES if domain else Update.RENDER_ONLY
    return update


def reach(path: str) -> tuple[str, ...]:
    for prefix, patterns in REACH:
        if under(path, prefix):
            return patterns
    return ("*",)


def _grouped(
    raw: list[tuple[list[str], Any, Any, Update]],
) -> list[tuple[str, Any, Any, Update, tuple[str, ...]]]:
    """Changes of hosts that say the same, grouped into one with a hostlist (`hosts.gpu[05-08]`)."""
    out: list[tuple[str, Any, Any, Update, tuple[str, ...]]] = []
    by_kind: dict[tuple[str, str, str, Update], list[str]] = {}
    for parts, old, new, update in raw:
        if parts[0] != "hosts":
            out.append((".".join(parts), old, new, update, ()))
            continue
        key = (".".join(parts[2:]), json.dumps(old, sort_keys=True), json.dumps(new, sort_keys=True), update)
        by_kind.setdefault(key, []).append(parts[1])
    for (rest, old, new, update), hosts in by_kind.items():
        path = f"hosts.{compress(hosts)}" + (f".{rest}" if rest else "")
        out.append((path, json.loads(old), json.loads(new), update, tuple(hosts)))
    return sorted(out, key=lambda c: (c[0].split(".")[0] != "cluster", c[0]))


def _same_node_type(old: Cluster, new: Cluster, path: str, before: Any, after: Any) -> bool:
    """A host's node type renamed to one defined alike (found by the random pairs)."""
    if not (path.startswith("hosts.") and path.endswith(".type")) or before is None or after is None:
        return False
    return old.spec.node_types.get(before) == new.spec.node_types.get(after)


def file_diff(old: str | None, new: str | None) -> tuple[str, ...]:
    """The changed lines of a file, at most MAX_DIFF_LINES; a new or removed file in one line."""
    if old is None or new is None:
        text = new if old is None else old
        return (f"({'new' if old is None else 'removed'} file of {len((text or '').splitlines())} lines)",)
    lines = [
        line
        for line in difflib.unified_diff((old or "").splitlines(), (new or "").splitlines(), n=0, lineterm="")
        if not line.startswith(("---", "+++", "@@"))
    ]
    if len(lines) > MAX_DIFF_LINES:
        return (*lines[:MAX_DIFF_LINES], f"... {len(lines) - MAX_DIFF_LINES} more changed lines")
    return tuple(lines)


def plan(old: Cluster, new: Cluster) -> list[Change]:
    """Every change between two clusters, with what applying it needs (without rendered files)."""
    return make_plan(old, new, {}, {}).changes


def make_plan(
    old: Cluster,
    new: Cluster,
    old_files: dict[str, str] | None = None,
    new_files: dict[str, str] | None = None,
) -> Plan:
    """The whole plan: changes, the rendered files they change, and the steps. Files are rendered
    here unless given ({} for none)."""
    if old_files is None or new_files is None:
        from gpucluster.rendering import render_files

        old_files, new_files = render_files(old), render_files(new)
    release = new.release
    raw: list[tuple[list[str], Any, Any]] = []
    _diff(resolved_view(old), resolved_view(new), [], raw)
    # A node type no host has, in either inventory, is no change to the cluster.
    with_policy = [
        (parts, a, b, effective(policy(old, new, parts, a, b), release))
        for parts, a, b in raw
        if _domain(old, new, parts) != set() or parts[:2] != ["cluster", "node_types"]
    ]
    before, after = old_files, new_files
    differing = sorted(rel for rel in set(before) | set(after) if before.get(rel) != after.get(rel))
    changes = []
    for path, a, b, update, hosts in _grouped(with_policy):
        patterns = reach(path)
        touched = tuple(rel for rel in differing if any(fnmatch.fnmatchcase(rel, p) for p in patterns))
        if not touched and _same_node_type(old, new, path, a, b):
            continue  # hosts given another name of the same hardware, which nothing renders
        changes.append(Change(path, a, b, update, touched, hosts))
    files = []
    for rel in differing:
        because = [c for c in changes if rel in c.files]
        status = "added" if rel not in before else "removed" if rel not in after else "changed"
        files.append(
            FileChange(
                rel,
                status,
                file_diff(before.get(rel), after.get(rel)),
                tuple(c.path for c in because),
                required_action(because) or Update.RENDER_ONLY,
            )
        )
    result = Plan(release, changes, files)
    if getattr(old.spec, "monitoring", None) is not None or getattr(new.spec, "monitoring", None) is not None:
        from gpucluster.monitoring.target_changes import target_changes

        result.monitoring_targets = target_changes(old, new)
    found = procedures(old, new, {c.path for c in changes}, new_files.get("slurm/slurm.conf"))
    result.ends_jobs = found.ends_jobs
    refused = refusal(old, new)
    result.refused = [str(refused)] if refused else []
    if result.refused:
        # Nothing of it can be applied: no step, no overall policy (the refusal is the plan).
        return result
    result.upgrade = upgrade_of(old, new)
    if result.upgrade is not None:
        # The upgrade goes first: every other change is applied by the new release's daemons.
        found.before[:0] = upgrade_steps(result.upgrade, [c for c in changes if c.path == VERSION_PATH])
    ending = {e.path for e in found.ends_jobs}
    emptied, resumed = emptying_steps(
        old, found.ends_jobs, required_action(c for c in changes if c.path in ending) or Update.RESTART
    )
    # The cluster empties before anything else changes, and takes jobs again once all is applied.
    found.before[:0] = emptied
    found.after += resumed
    result.steps = plan_steps(old, new, result, found)
    # Each change carries the policy of the step that carries it out (a partition's MaxTime in the
    # step that restarts the daemons for a new node is applied by that restart); `needs` keeps its own.
    used: dict[str, Update] = {}
    for step in result.steps:
        for path in step.changes:
            if step.update is not None:
                used[path] = max(used.get(path, step.update), step.update, key=SEVERITY.index)
    reconfigures = release.reconfigure_node_changes
    result.changes = [
        Change(
            c.path,
            c.old,
            c.new,
            used.get(c.path, c.update),
            c.files,
            c.hosts,
            c.update,
            found.classes.get(c.path) or host_change_class(c.path, c.old, c.new, reconfigures),
        )
        for c in changes
    ]
    installed = {rel: step.update for step in result.steps for rel in step.files if step.update}
    result.files = [
        FileChange(f.path, f.status, f.diff, f.because, installed.get(f.path, f.update)) for f in result.files
    ]
    return result


# --- JSON --------------------------------------------------------------------------------------


# The document `gpucluster plan --json` prints (README, "gpucluster plan"): one schema, package
# data like the other commands' (gpucluster/output_schemas/plan.schema.json).
def plan_schema() -> dict[str, Any]:
    import json

    from gpucluster.packagedata import data_path

    schema: dict[str, Any] = json.loads(
        data_path("output_schemas", "plan.schema.json").read_text(encoding="utf-8")
    )
    return schema


# --- text --------------------------------------------------------------------------------------


def shown(value: Any, limit: int = 100) -> str:
    """A JSON value as the plan prints it: hosts as a hostlist, `-` for absent."""
    if value is None:
        return "-"
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        text = compress(value) if all(re.search(r"\d$", v) for v in value) else ", ".join(value)
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def text_lines(result: Plan) -> list[str]:
    if not result.changes and not result.files:
        return ["no changes"]
    if result.refused:
        # Only the refusal: nothing below it could be applied.
        return [
            *(f"REFUSED: {reason}" for reason in result.refused),
            f"nothing to apply: Slurm cannot make this change ({len(result.changes)} change(s), "
            f"{len(result.files)} file(s) differ; `--json` lists them); change the inventory as said above, "
            "then plan again",
        ]
    # What ends jobs comes first: whoever reads one line reads this.
    lines: list[str] = []
    lines += [
        f"ENDS JOBS: {e.path}: {e.reason}; playbooks/slurm.yml refuses it unless run with -e {CONFIRM}=true"
        for e in result.ends_jobs
    ]
    for change in result.changes:
        tag = change.update.name.lower()
        if change.needs is not None and change.needs != change.update:
            tag += f"; alone: {change.needs.name.lower()}"
        if change.procedure:
            tag += f"; {change.procedure}"
        line = f"{change.path}: {shown(change.old)} -> {shown(change.new)}  [{tag}]"
        if not change.files:
            line += (
                f"  (no rendered file; {change.applied_by})" if change.applied_by else "  (no rendered file)"
            )
        lines.append(line)
    if result.files:
        lines.append(f"files ({len(result.files)}):")
        for f in result.files:
            lines.append(f"  {f.path} ({f.status}) [{f.update.name.lower()}]")
            lines += [f"    {line}" for line in f.diff]
    targets = result.monitoring_targets or {}
    for kind in ("added", "removed", "relabelled"):
        if targets.get(kind):
            lines.append(f"monitoring targets {kind} ({len(targets[kind])}):")
            lines += [f"  {target}" for target in targets[kind]]
    if result.upgrade is not None:
        up = result.upgrade
        lines.append(
            f"upgrade: Slurm {up.old} -> {up.new} by {PLAYBOOK_UPGRADE} (steps 1-{len(up.steps)}; backups in "
            f"{up.backup}; a second run continues where one stopped)"
        )
    if result.steps:
        lines.append(f"steps (Slurm {result.release.name}):")
        for number, step in enumerate(result.steps, 1):
            lines.append(
                f"  {number:2d}. [{step.scheduler}] {step.action} ({step.update.name.lower() if step.update else '-'}): {step.text}"
            )
    overall = result.overall
    if overall is not None:
        lines.append(f"overall: {overall.name.lower()}: {result.overall_means}")
    return lines
