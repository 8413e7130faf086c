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
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from gpucluster.changes.moves import (
    Action,
    Move,
    Step,
    claim_text,
    leave_texts,
    lowered_quotas,
    lowers,
    moves,
    quota_text,
    quotas_of,
    raises,
)
from gpucluster.changes.procedures import (
    CONFIRM,
    EndsJobs,
    Procedures,
    host_change_class,
    needs_restart,
    procedures,
)
from gpucluster.changes.upgrade import PLAYBOOK as PLAYBOOK_UPGRADE
from gpucluster.changes.upgrade import VERSION_PATH, Upgrade, refusal, upgrade_of
from gpucluster.hostlists import compress
from gpucluster.model.base import Owner, Update
from gpucluster.model.cluster import Cluster
from gpucluster.model.releases import Release
from gpucluster.model.spec import ClusterSpec, GpuQuota
from gpucluster.resolved import resolved_view

# Least to most disruptive.
SEVERITY = [
    Update.RENDER_ONLY,
    Update.SERVICE,
    Update.KUBERNETES,
    Update.UNIX_ACCOUNTS,
    Update.ACCOUNTS,
    Update.RECONFIGURE,
    Update.NODE_LIST,
    Update.STORAGE,
    Update.RESTART,
    Update.NODE_SOFTWARE,
    Update.MOVE,
    Update.REBUILD,
]

# What each part of the resolved model may change among the rendered files (fnmatch patterns; the
# first matching prefix wins). tests/unit/test_plan_pairs.py checks on thousands of random pairs
# that every file that differs is reached by a listed change.
KUBE = ("kubernetes/*", "helm/*")
# cluster.monitoring's files: the targets carry each node's type, partitions, switch, block, owner, tenant.
MON = ("monitoring/*",)
# IMEX's node lists are the NVLink blocks topology.yaml is written from.
TOPOLOGY = ("slurm/slurm.conf", "slurm/topology.conf", "slurm/topology.yaml", "nodes/imex/*", *KUBE, *MON)
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
    ("cluster.partitions", ("slurm/slurm.conf", *KUBE, *MON)),
    ("cluster.fabric", TOPOLOGY),
    ("switches", TOPOLOGY),
    ("cluster.qos", ("slurm/accounts.yaml", *KUBE)),
    ("cluster.groups", ("hosts/users.yaml",)),
    ("cluster.users", ("hosts/users.yaml",)),
    ("cluster.storage", ("hosts/*", *KUBE)),
    ("cluster.kubernetes", KUBE),
    ("cluster.monitoring", ("slurm/slurm.conf", *MON)),
    ("cluster.cloud", ()),
    ("hosts", ("*",)),
    ("tenants.*.slurm.*", ("slurm/accounts.yaml",)),
    ("tenants.*.slurm", ("slurm/accounts.yaml",)),
    ("tenants", (*KUBE, *MON)),
)
# Changes that act through what the roles or the stacks read from the model, not through a
# rendered file: who carries each out.
OUTSIDE_FILES: tuple[tuple[str, str], ...] = (
    ("cluster.slurm.packages", "the Slurm roles (package source and pin)"),
    ("cluster.slurm.upgrade", "playbooks/slurm-upgrade.yml (at the next change of slurm.version)"),
    ("cluster.slurm.rest_api", "the slurm_restd role"),
    ("cluster.slurm.login", "the slurm_login role (the login hosts)"),
    ("cluster.slurm.accounting", "the slurm_dbd role"),
    ("cluster.node_types.*.instance_type", "the Pulumi stacks"),
    ("cluster.node_types.*.gpus.memory_gb", "the Pulumi stacks' pool checks"),
    ("cluster.cloud", "the Pulumi stacks"),
    ("cluster.kubernetes", "playbooks/kubernetes.yml (the add-ons' roles)"),
)
MAX_DIFF_LINES = 20


@dataclass(frozen=True)
class Change:
    """One thing that differs between what the two inventories resolve to."""

    path: str  # e.g. cluster.partitions.gpu.max_time, hosts.gpu[05-06], switches.leaf1.nodes
    old: Any  # a JSON value of the model; None: absent
    new: Any
    update: Update
    files: tuple[str, ...] = ()  # the rendered files it touches
    hosts: tuple[str, ...] = ()  # for changes of hosts: which
    needs: Update | None = None  # what it needs alone, where its step does more (None: the same)
    procedure: str | None = None  # its change class, where it has a procedure of its own

    @property
    def applied_by(self) -> str | None:
        """Who carries out a change that touches no rendered file."""
        if self.files:
            return None
        return next((who for prefix, who in OUTSIDE_FILES if _under(self.path, prefix)), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "old": self.old,
            "new": self.new,
            "update": self.update.name.lower(),
            "needs": (self.needs or self.update).name.lower(),
            "files": list(self.files),
            "hosts": list(self.hosts),
            "procedure": self.procedure,
        }


@dataclass(frozen=True)
class FileChange:
    path: str  # relative to the render directory
    status: str  # added | removed | changed
    diff: tuple[str, ...]  # the changed lines (`-old`, `+new`), at most MAX_DIFF_LINES and a count
    because: tuple[str, ...]  # the changes that touch it
    update: Update  # the most disruptive of theirs

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "status": self.status,
            "diff": list(self.diff),
            "because": list(self.because),
            "update": self.update.name.lower(),
        }


@dataclass
class Plan:
    release: Release  # of the new inventory: what the changes are applied with
    changes: list[Change]
    files: list[FileChange]
    steps: list[Step] = field(default_factory=list)
    # Changes Slurm cannot make without ending jobs: the first lines of the plan, and what
    # playbooks/slurm.yml refuses without -e gpucluster_end_jobs=true.
    ends_jobs: list[EndsJobs] = field(default_factory=list)
    # cluster.monitoring: Prometheus' targets added, removed, relabelled (None: no monitoring).
    monitoring_targets: dict[str, list[str]] | None = None
    # Changes Slurm cannot make at all (a downgrade, a jump past the new release's window): the
    # inventory line and why; `gpucluster plan` exits 2.
    refused: list[str] = field(default_factory=list)
    # A change of slurm.version Slurm can make: its own steps (playbooks/slurm-upgrade.yml).
    upgrade: Upgrade | None = None

    @property
    def overall(self) -> Update | None:
        return required_action(self.changes)

    def as_dict(self) -> dict[str, Any]:
        overall = self.overall
        return {
            "release": self.release.name,
            "refused": list(self.refused),
            "upgrade": None if self.upgrade is None else self.upgrade.as_dict(),
            "ends_jobs": [e.as_dict() for e in self.ends_jobs],
            "changes": [c.as_dict() for c in self.changes],
            "files": [f.as_dict() for f in self.files],
            "steps": [s.as_dict() for s in self.steps],
            "monitoring_targets": self.monitoring_targets,
            "overall": None
            if overall is None
            else {"update": overall.name.lower(), "means": meaning(overall, self.release)},
        }


def required_action(changes: Iterable[Change]) -> Update | None:
    found = [c.update for c in changes]
    return max(found, key=SEVERITY.index) if found else None


def effective(update: Update, release: Release) -> Update:
    """The policy a release really needs: node-list changes reconfigure from 24.11 on."""
    if update == Update.NODE_LIST:
        return Update.RECONFIGURE if release.reconfigure_node_changes else Update.RESTART
    return update


def meaning(update: Update, release: Release) -> str:
    """What applying a policy means on the target release."""
    if update == Update.RECONFIGURE:
        how = (
            "slurmctld re-executes itself and keeps running on the old files if the new ones are bad"
            if release.reconfigure_reexec
            else "a file slurmctld cannot read makes the daemons exit: prove it with `gpucluster trial` first"
        )
        return f"scontrol reconfigure (running jobs unaffected; Slurm {release.name}: {how})"
    return str(effective(update, release).value)


# --- the resolved model, compared ----------------------------------------------------------------


def _under(path: str, prefix: str) -> bool:
    return fnmatch.fnmatchcase(path, prefix) or fnmatch.fnmatchcase(path, prefix + ".*")


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


def _members(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _members(typing.get_args(tp)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [m for arg in typing.get_args(tp) for m in _members(arg)]
    return [] if tp is type(None) else [tp]


def model_policy(spec: ClusterSpec, parts: list[str]) -> Update:
    """The x-update of the spec field at a path of the resolved model (named lists by name)."""
    update = Update.RESTART
    tp: Any = type(spec)
    layer = {"kubernetes": spec.kubernetes, "cloud": spec.cloud}
    for index, part in enumerate(parts):
        next_tp = None
        for member in _members(tp):
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
        if _under(path, prefix):
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
    result.upgrade = upgrade_of(old, new)
    if result.upgrade is not None:
        # The upgrade goes first: every other change is applied by the new release's daemons.
        found.before[:0] = upgrade_steps(result.upgrade, [c for c in changes if c.path == VERSION_PATH])
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


# --- steps -----------------------------------------------------------------------------------------

UPGRADE_ACTIONS = {
    "prove": Action.VERIFY,
    "pre-checks": Action.VERIFY,
    "backup": Action.PREPARE,
    "verify": Action.VERIFY,
}


def upgrade_steps(upgrade: Upgrade, carried: list[Change]) -> list[Step]:
    """The upgrade's steps as the plan's (each carries the version change: running jobs survive,
    the daemons restart with the new release)."""
    return [
        _step(
            Owner.SLURM,
            UPGRADE_ACTIONS.get(s.name, Action.UPGRADE),
            Update.RESTART,
            f"{PLAYBOOK_UPGRADE} {s.text}",
            carried,
            s.hosts,
        )
        for s in upgrade.steps
    ]


def _is_quota(change: Change, owner: Owner) -> bool:
    parts = change.path.split(".")
    return (
        parts[0] == "tenants"
        and parts[2:3] == [owner.value]
        and (len(parts) == 3 or parts[3] in ("quota", "limit", "shares"))
    )


def _hosts_of(changes: Iterable[Change], owner: Owner, added: bool, cluster: Cluster) -> list[str]:
    """Hosts of `owner` in `cluster` added (or removed) by host changes that are no move."""
    found: list[str] = []
    for change in changes:
        if not change.path.startswith("hosts.") or change.update == Update.MOVE:
            continue
        if (change.old is None) is added and (change.new is None) is not added:
            found += [h for h in change.hosts if cluster.owner_of.get(h) == owner]
    return found


def _step(
    scheduler: Owner | str,
    action: Action,
    update: Update,
    text: str,
    changes: Iterable[Change] = (),
    hosts: Iterable[str] = (),
    files: Iterable[str] = (),
    quotas: dict[str, GpuQuota] | None = None,
) -> Step:
    return Step(
        scheduler=scheduler,
        action=action,
        hosts=tuple(hosts),
        quotas=dict(quotas or {}),
        text=text,
        update=update,
        changes=tuple(dict.fromkeys(c.path for c in changes)),
        files=tuple(files),
    )


def _files_of(changes: Iterable[Change], patterns: tuple[str, ...]) -> list[str]:
    return sorted({f for c in changes for f in c.files if any(fnmatch.fnmatchcase(f, p) for p in patterns)})


# Which step installs a rendered file (its route through the playbooks), most specific first.
ROUTES: tuple[tuple[str, str], ...] = (
    ("slurm/accounts.yaml", "accounts"),
    ("slurm/*", "slurm"),
    ("hosts/node_ssh.yaml", "slurm"),
    ("containers/*", "slurm"),
    ("hosts/users.yaml", "users"),
    ("hosts/*", "storage"),
    ("nodes/*", "gpu_nodes"),
    ("kubernetes/*", "kubernetes"),
    ("helm/*", "kubernetes"),
    ("monitoring/*", "monitoring"),
)


def route(rel: str) -> str:
    return next(r for pattern, r in (*ROUTES, ("*", "files")) if fnmatch.fnmatchcase(rel, pattern))


def plan_steps(old: Cluster, new: Cluster, result: Plan, found: Procedures | None = None) -> list[Step]:
    """The changes in the order they are carried out. Each change is in the step that carries it
    out, each step with the policy it uses and the rendered files it installs; a step that would
    change nothing is left out. The procedures of the change classes (`found`) go in before the
    shared storage and the Slurm files, and their checks after them."""
    found = found or Procedures()
    release = result.release
    changes = result.changes
    files_by_route: dict[str, list[str]] = {}
    for f in result.files:
        files_by_route.setdefault(route(f.path), []).append(f.path)
    moved = moves(old, new)
    involved = [o for o in Owner if any(o in (m.source, m.target) for m in moved)]
    done: set[str] = set()
    steps: list[Step] = []

    def take(selected: Iterable[Change]) -> list[Change]:
        chosen = [c for c in selected if c.path not in done]
        done.update(c.path for c in chosen)
        return chosen

    move_changes = [c for c in changes if c.update == Update.MOVE]
    done.update(c.path for c in move_changes)
    lowered = {o: lowered_quotas(quotas_of(old, o), quotas_of(new, o)) for o in involved}
    raising = {o for o in involved if raises(lowered[o], quotas_of(new, o))}

    # 1. Quotas come down where a move lowers them: no scheduler promises GPUs it is giving away.
    for owner in involved:
        if lowers(quotas_of(old, owner), lowered[owner]):
            quota_changes = [c for c in changes if _is_quota(c, owner)]
            files: list[str] = []
            if owner not in raising:  # the lowered numbers are the new ones: this step sets them
                take(quota_changes)
                if owner == Owner.SLURM and not any(
                    c.update == Update.ACCOUNTS and c.path not in done for c in changes
                ):
                    files = files_by_route.pop("accounts", [])
            update = Update.ACCOUNTS if owner == Owner.SLURM else Update.KUBERNETES
            text = quota_text(owner, lowered[owner], lower=True)
            steps.append(
                _step(
                    owner,
                    Action.LOWER_QUOTAS,
                    update,
                    text,
                    quota_changes,
                    files=files,
                    quotas=lowered[owner],
                )
            )
    # 2. Nodes leaving a scheduler stop taking work and empty: moves, and nodes removed outright.
    leaving = [(m, [c for c in move_changes if set(c.hosts) & set(m.hosts)]) for m in moved]
    node_changes = [c for c in changes if c.path.startswith("hosts.") and c.update != Update.MOVE]
    removed_slurm = _hosts_of(changes, Owner.SLURM, added=False, cluster=old)
    removed_kube = _hosts_of(changes, Owner.KUBERNETES, added=False, cluster=old)
    for move, carried in leaving:
        for action, text in leave_texts(move, new)[:2]:
            steps.append(_step(move.source, action, Update.MOVE, text, carried, move.hosts))
    for owner, removed, update, reason in (
        (Owner.SLURM, removed_slurm, effective(Update.NODE_LIST, release), "gpucluster: removed from the inventory"),
        (Owner.KUBERNETES, removed_kube, Update.KUBERNETES, None),
    ):  # fmt: skip
        if removed:
            carried = [c for c in node_changes if set(c.hosts) & set(removed)]
            for action, text in leave_texts(Move(tuple(removed), owner, owner), new, reason)[:2]:
                steps.append(_step(owner, action, update, text, carried, removed))
    # 2b. The procedures of partitions, controllers, the accounting host and the state: partitions
    # closed and emptied, the controller that stays put in charge, daemons stopped where they move.
    steps += found.before
    # 3. Unix accounts and shared storage, which daemons and jobs rely on.
    for kind, update, prefixes, text in (
        ("users", Update.UNIX_ACCOUNTS, ("cluster.users", "cluster.groups"), "playbooks/slurm.yml (users role): the Unix groups and users of hosts/users.yaml on every Slurm host"),
        ("storage", Update.STORAGE, ("cluster.storage",), "playbooks/slurm.yml (nfs_server, shared_storage): the exports and mounts of hosts/storage.yaml (a changed mount is remounted: drain its hosts first)"),
    ):  # fmt: skip
        carried = take(
            c
            for c in changes
            if c.update == update or (c.update == Update.RENDER_ONLY and c.path.startswith(prefixes))
        )
        if carried or files_by_route.get(kind):
            used = required_action(carried) or Update.RENDER_ONLY
            steps.append(
                _step("hosts", Action.APPLY, used, text, carried, files=files_by_route.get(kind, []))
            )
    # 3b. The GPU node software (nodes/), before the daemons that need the driver: a changed stack
    # on drained hosts, or only the hosts new to a node type with node software.
    software = take(c for c in changes if c.update == Update.NODE_SOFTWARE)
    if software or files_by_route.get("gpu_nodes"):
        text = "playbooks/gpu_nodes.yml (gpu_driver): " + (
            "the node software of nodes/ on the hosts of its node types (drain them first; reboot "
            "where the kernel module changed)"
            if software
            else "the node software of nodes/ on the hosts new to a node type with one"
        )
        used = required_action(software) or Update.RENDER_ONLY
        steps.append(
            _step("hosts", Action.APPLY, used, text, software, files=files_by_route.get("gpu_nodes", []))
        )
    # 4. The leaving nodes are released by their schedulers (Slurm's by the next step's files);
    # nodes removed from Kubernetes leave it (kubelet stopped and disabled, node objects deleted).
    for move, carried in leaving:
        for action, text in leave_texts(move, new)[2:]:
            if move.source == Owner.SLURM:
                text = (
                    f"stop slurmd on {compress(move.hosts)}; the next step installs slurm.conf without them"
                )
            steps.append(_step(move.source, action, Update.MOVE, text, carried, move.hosts))
    if removed_kube:
        carried = [c for c in node_changes if set(c.hosts) & set(removed_kube)]
        for action, text in leave_texts(Move(tuple(removed_kube), Owner.KUBERNETES, Owner.KUBERNETES), new)[
            2:
        ]:
            steps.append(_step(Owner.KUBERNETES, action, Update.KUBERNETES, text, carried, removed_kube))
    # 5. Bare-metal Slurm: its new files, then what the release needs to read them.
    slurm_files = files_by_route.get("slurm", [])
    slurm_changes = take(
        c
        for c in changes
        if c.update not in (Update.MOVE, Update.REBUILD, Update.KUBERNETES)
        and any(route(f) == "slurm" for f in c.files)
    )
    claims_slurm = [m for m in moved if m.target == Owner.SLURM]
    added_slurm = _hosts_of(changes, Owner.SLURM, added=True, cluster=new)
    nodes_change = bool(
        removed_slurm or added_slurm or any(Owner.SLURM in (m.source, m.target) for m in moved)
    )
    if slurm_changes or slurm_files or nodes_change:
        update = required_action(slurm_changes) or Update.RENDER_ONLY
        if nodes_change:
            update = max(update, effective(Update.NODE_LIST, release), key=SEVERITY.index)
        text = slurm_apply_text(update, release, slurm_files, added_slurm, removed_slurm, found.apply_notes)
        if claims_slurm:
            claimed = tuple(h for m in claims_slurm for h in m.hosts)
            carried = [*slurm_changes, *(c for c in move_changes if set(c.hosts) & set(claimed))]
            text += "; " + "; ".join(claim_text(m, new) for m in claims_slurm)
            steps.append(_step(Owner.SLURM, Action.CLAIM, Update.MOVE, text, carried, claimed, slurm_files))
        else:
            hosts = [*added_slurm, *removed_slurm]
            steps.append(_step(Owner.SLURM, Action.APPLY, update, text, slurm_changes, hosts, slurm_files))
    # 5b. What the procedures check once the files are applied (the controllers, a takeover).
    steps += found.after
    # 6. Kubernetes: nodes claimed, then its objects and values (with the raised quotas).
    for move in moved:
        if move.target != Owner.SLURM:
            carried = [c for c in move_changes if set(c.hosts) & set(move.hosts)]
            steps.append(
                _step(move.target, Action.CLAIM, Update.MOVE, claim_text(move, new), carried, move.hosts)
            )
    kube_files = files_by_route.get("kubernetes", [])
    kube_changes = take(c for c in changes if c.update == Update.KUBERNETES)
    added_kube = _hosts_of(changes, Owner.KUBERNETES, added=True, cluster=new)
    kube_raising = [o for o in (Owner.KUBERNETES, Owner.SLURM_ON_KUBERNETES) if o in raising]
    if kube_changes or kube_files or kube_raising:
        text = "; ".join([kubernetes_apply_text(kube_files, added_kube), *found.kube_notes])
        owner = kube_raising[0] if kube_raising else Owner.KUBERNETES
        if kube_raising:
            text = (
                "; ".join(quota_text(o, quotas_of(new, o), lower=False) for o in kube_raising) + "; " + text
            )
        steps.append(
            _step(owner, Action.RAISE_QUOTAS if kube_raising else Action.APPLY, Update.KUBERNETES, text,
                  kube_changes, [*added_kube, *removed_kube], kube_files,
                  quotas_of(new, owner) if kube_raising else None)
        )  # fmt: skip
        for other in kube_raising[1:]:  # replayed per scheduler; applied by the step above
            steps.append(_step(other, Action.RAISE_QUOTAS, Update.KUBERNETES, "(applied with the step above)",
                               quotas=quotas_of(new, other)))  # fmt: skip
    # 7. Slurm's accounts (sacctmgr), with the quotas a move raises.
    accounts = take(c for c in changes if c.update == Update.ACCOUNTS)
    account_files = files_by_route.get("accounts", [])
    if accounts or account_files or Owner.SLURM in raising:
        raise_slurm = Owner.SLURM in raising
        text = "; ".join(
            [
                "playbooks/slurm.yml (slurm_accounts): sacctmgr makes the accounts, users and QOS of slurm/accounts.yaml",
                *found.account_notes,
            ]
        )
        if raise_slurm:
            text = quota_text(Owner.SLURM, quotas_of(new, Owner.SLURM), lower=False) + "; " + text
        steps.append(
            _step(Owner.SLURM, Action.RAISE_QUOTAS if raise_slurm else Action.APPLY, Update.ACCOUNTS, text, accounts,
                  files=account_files, quotas=quotas_of(new, Owner.SLURM) if raise_slurm else None)
        )  # fmt: skip
    # 8. Monitoring: its files, whatever changed them (a node's labels, a new target).
    monitoring = take(c for c in changes if c.path.startswith("cluster.monitoring"))
    if monitoring or files_by_route.get("monitoring"):
        text = "playbooks/monitoring.yml: promtool and amtool check the files on the monitoring host, Prometheus and Alertmanager reload"
        if result.upgrade is not None:
            # The release decides where Slurm's metrics come from: the upgrade play ends with it.
            text = f"{PLAYBOOK_UPGRADE} runs {text}"
        steps.append(
            _step(
                "cluster",
                Action.APPLY,
                Update.SERVICE,
                text,
                monitoring,
                files=files_by_route.get("monitoring", []),
            )
        )
    # 9. What is left: a service restarted, files only, rebuilds.
    for update, action, text in (
        (Update.SERVICE, Action.APPLY, "playbooks/slurm.yml restarts the one service concerned; slurmctld and slurmd untouched"),
        (Update.RENDER_ONLY, Action.APPLY, "the playbooks install the changed files; no daemon action"),
        (Update.RECONFIGURE, Action.APPLY, "playbooks/slurm.yml, then " + meaning(Update.RECONFIGURE, release)),
        (Update.RESTART, Action.APPLY, "playbooks/slurm.yml, then " + meaning(Update.RESTART, release)),
        (Update.REBUILD, Action.REBUILD, "rebuild: drain the hosts concerned and reinstall them (the Pulumi stacks for cloud pools), then run the playbooks"),
    ):  # fmt: skip
        carried = take(c for c in changes if c.update == update)
        if carried:
            who = sorted({c.applied_by for c in carried if c.applied_by})
            steps.append(
                _step("cluster", action, update, text + (f" (by {'; '.join(who)})" if who else ""), carried)
            )
    return steps


def slurm_apply_text(
    update: Update,
    release: Release,
    files: list[str],
    added: list[str],
    removed: list[str],
    notes: Iterable[str] = (),
) -> str:
    parts = [f"playbooks/slurm.yml installs {', '.join(files) if files else 'the Slurm configuration'}"]
    if removed:
        parts.append(f"stops slurmd on {compress(removed)} (no longer in slurm.conf)")
    if added:
        parts.append(f"installs and starts slurmd on {compress(added)} (they come up idle)")
    parts += notes
    parts.append("then " + meaning(update, release))
    return "; ".join(parts)


def kubernetes_apply_text(files: list[str], added: list[str]) -> str:
    parts = []
    if added:
        parts.append(f"join {compress(added)} to the Kubernetes cluster first (the cloud pool or kubeadm)")
    parts.append(
        f"playbooks/kubernetes.yml applies {', '.join(files) if files else 'the Kubernetes objects'}"
    )
    return "; ".join(parts)


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
    # What is refused, then what ends jobs, comes first: whoever reads one line reads this.
    lines = [f"REFUSED: {reason}" for reason in result.refused]
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
        lines.append(f"overall: {overall.name.lower()}: {meaning(overall, result.release)}")
    return lines
