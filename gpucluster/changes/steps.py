"""A plan's changes in the order they are carried out: each change in the step that carries it out,
each step with the policy it uses, the rendered files it installs and the procedure
(gpucluster.changes.playbooks) whose plays do it; a step that would change nothing is left out.

The phases, in order (PHASES): quotas that a move lowers come down; nodes leaving a scheduler stop
taking work and empty; the change classes' own procedures (partitions, controllers, accounting,
state); Unix accounts and shared storage; the GPU node software; the leaving nodes released; the
bare-metal Slurm files; the procedures' checks; Kubernetes; Slurm's accounts; monitoring; what is
left (a service, files only, a rebuild). Nodes that change scheduler get the move's steps
(gpucluster.changes.moves).
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gpucluster.changes.moves import (
    Action,
    Move,
    Step,
    claim_text,
    leave_texts,
    lowered_quotas,
    lowers,
    moves,
    partitions_of,
    quota_text,
    quotas_of,
    raises,
    wait_bound,
)
from gpucluster.changes.playbooks import PROCEDURES
from gpucluster.changes.procedures import Procedures
from gpucluster.changes.records import SEVERITY, Change, Plan, effective, meaning, required_action
from gpucluster.changes.upgrade import Upgrade
from gpucluster.hostlists import compress
from gpucluster.model.base import Owner, Update
from gpucluster.model.cluster import Cluster
from gpucluster.model.powered import cloud_hosts, power_timers, saved_hosts
from gpucluster.model.releases import Release, power_command
from gpucluster.model.spec import GpuQuota

UPGRADE_ACTIONS = {
    "prove": Action.VERIFY,
    "pre-checks": Action.VERIFY,
    "backup": Action.PREPARE,
    "verify": Action.VERIFY,
}

# Which procedure installs a rendered file (its route through the playbooks), most specific first.
ROUTES: tuple[tuple[str, str], ...] = (
    ("slurm/accounts.yaml", "accounts"),
    ("slurm/*", "slurm"),
    ("hosts/node_ssh.yaml", "slurm"),
    ("containers/*", "slurm"),
    ("hosts/users.yaml", "users"),
    ("hosts/*", "storage"),
    ("nodes/*", "node_software"),
    ("mig/*", "mig_layout"),
    ("kubernetes/*", "kubernetes"),
    ("helm/*", "kubernetes"),
    ("monitoring/*", "monitoring"),
    ("power/*", "power"),
)


def route(rel: str) -> str:
    return next(r for pattern, r in (*ROUTES, ("*", "files")) if fnmatch.fnmatchcase(rel, pattern))


def upgrade_steps(upgrade: Upgrade, carried: list[Change]) -> list[Step]:
    """The upgrade's steps as the plan's (each carries the version change: running jobs survive,
    the daemons restart with the new release)."""
    return [
        make_step(
            Owner.SLURM,
            UPGRADE_ACTIONS.get(s.name, Action.UPGRADE),
            Update.RESTART,
            f"{PROCEDURES[s.procedure].playbook} {s.text}",
            carried,
            s.hosts,
            procedure=s.procedure,
        )
        for s in upgrade.steps
    ]


def make_step(
    scheduler: Owner | str,
    action: Action,
    update: Update,
    text: str,
    changes: Iterable[Change] = (),
    hosts: Iterable[str] = (),
    files: Iterable[str] = (),
    quotas: dict[str, GpuQuota] | None = None,
    procedure: str | None = None,
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
        procedure=procedure,
    )


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


@dataclass
class Ordering:
    """What the phases share: the plan's changes, those already in a step, and the steps so far."""

    old: Cluster
    new: Cluster
    result: Plan
    found: Procedures
    files_by_route: dict[str, list[str]]
    moved: list[Move]
    involved: list[Owner]
    move_changes: list[Change]
    lowered: dict[Owner, dict[str, GpuQuota]]
    raising: set[Owner]
    # Each move with the changes it carries out.
    leaving: list[tuple[Move, list[Change]]]
    removed_slurm: list[str]
    removed_kube: list[str]
    done: set[str] = field(default_factory=set)
    steps: list[Step] = field(default_factory=list)
    # Each changed file's status (added, removed, changed).
    status: dict[str, str] = field(default_factory=dict)

    @classmethod
    def start(cls, old: Cluster, new: Cluster, result: Plan, found: Procedures) -> Ordering:
        changes = result.changes
        files_by_route: dict[str, list[str]] = {}
        for f in result.files:
            files_by_route.setdefault(route(f.path), []).append(f.path)
        moved = moves(old, new)
        involved = [o for o in Owner if any(o in (m.source, m.target) for m in moved)]
        move_changes = [c for c in changes if c.update == Update.MOVE]
        lowered = {o: lowered_quotas(quotas_of(old, o), quotas_of(new, o)) for o in involved}
        return cls(
            old=old,
            new=new,
            result=result,
            found=found,
            files_by_route=files_by_route,
            moved=moved,
            involved=involved,
            move_changes=move_changes,
            lowered=lowered,
            raising={o for o in involved if raises(lowered[o], quotas_of(new, o))},
            leaving=[(m, [c for c in move_changes if set(c.hosts) & set(m.hosts)]) for m in moved],
            removed_slurm=_hosts_of(changes, Owner.SLURM, added=False, cluster=old),
            removed_kube=_hosts_of(changes, Owner.KUBERNETES, added=False, cluster=old),
            done={c.path for c in move_changes},
            status={f.path: f.status for f in result.files},
        )

    @property
    def release(self) -> Release:
        return self.result.release

    @property
    def changes(self) -> list[Change]:
        return self.result.changes

    @property
    def node_changes(self) -> list[Change]:
        return [c for c in self.changes if c.path.startswith("hosts.") and c.update != Update.MOVE]

    def take(self, selected: Iterable[Change]) -> list[Change]:
        """The selected changes no earlier step carries out, now carried out by the caller's step."""
        chosen = [c for c in selected if c.path not in self.done]
        self.done.update(c.path for c in chosen)
        return chosen

    def files(self, procedure: str) -> list[str]:
        return self.files_by_route.get(procedure, [])


def lower_quotas(o: Ordering) -> None:
    """Quotas come down where a move lowers them: no scheduler promises GPUs it is giving away."""
    for owner in o.involved:
        if not lowers(quotas_of(o.old, owner), o.lowered[owner]):
            continue
        quota_changes = [c for c in o.changes if _is_quota(c, owner)]
        files: list[str] = []
        if owner not in o.raising:  # the lowered numbers are the new ones: this step sets them
            o.take(quota_changes)
            if owner == Owner.SLURM and not any(
                c.update == Update.ACCOUNTS and c.path not in o.done for c in o.changes
            ):
                files = o.files_by_route.pop("accounts", [])
        update = Update.ACCOUNTS if owner == Owner.SLURM else Update.KUBERNETES
        text = quota_text(owner, o.lowered[owner], lower=True, cluster=o.new)
        procedure = "accounts" if owner == Owner.SLURM else "kubernetes"
        o.steps.append(
            make_step(owner, Action.LOWER_QUOTAS, update, text, quota_changes, files=files,
                      quotas=o.lowered[owner], procedure=procedure)
        )  # fmt: skip


def nodes_stop_and_empty(o: Ordering) -> None:
    """Nodes leaving a scheduler stop taking work and empty: moves, and nodes removed outright."""
    for move, carried in o.leaving:
        bound = wait_bound(o.old, partitions_of(o.old, move.hosts))
        by = "nodes_leaving" if move.source == Owner.SLURM else None
        for action, text in leave_texts(move, o.new, bound=bound)[:2]:
            o.steps.append(
                make_step(move.source, action, Update.MOVE, text, carried, move.hosts, procedure=by)
            )
    for owner, removed, update, reason in (
        (Owner.SLURM, o.removed_slurm, effective(Update.NODE_LIST, o.release), "gpucluster: removed from the inventory"),
        (Owner.KUBERNETES, o.removed_kube, Update.KUBERNETES, None),
    ):  # fmt: skip
        if removed:
            carried = [c for c in o.node_changes if set(c.hosts) & set(removed)]
            bound = wait_bound(o.old, partitions_of(o.old, removed))
            by = "nodes_leaving" if owner == Owner.SLURM else None
            for action, text in leave_texts(Move(tuple(removed), owner, owner), o.new, reason, bound)[:2]:
                o.steps.append(make_step(owner, action, update, text, carried, removed, procedure=by))


def procedures_before(o: Ordering) -> None:
    """The change classes' procedures: partitions closed and emptied, the controller that stays put
    in charge, daemons stopped where they move (and an upgrade's steps, first of all)."""
    o.steps += o.found.before


def users_and_storage(o: Ordering) -> None:
    """Unix accounts and shared storage, which daemons and jobs rely on."""
    for key, update, prefixes in (
        ("users", Update.UNIX_ACCOUNTS, ("cluster.users", "cluster.groups")),
        ("storage", Update.STORAGE, ("cluster.storage",)),
    ):
        carried = o.take(
            c
            for c in o.changes
            if c.update == update or (c.update == Update.RENDER_ONLY and c.path.startswith(prefixes))
        )
        if carried or o.files(key):
            used = required_action(carried) or Update.RENDER_ONLY
            text = PROCEDURES[key].text()
            o.steps.append(
                make_step("hosts", Action.APPLY, used, text, carried, files=o.files(key), procedure=key)
            )


def node_software(o: Ordering) -> None:
    """The GPU node software (nodes/), before the daemons that need the driver: a changed stack on
    drained hosts, or only the hosts new to a node type with node software."""
    software = o.take(c for c in o.changes if c.update == Update.NODE_SOFTWARE)
    if not software and not o.files("node_software"):
        return
    procedure = PROCEDURES["node_software"]
    text = procedure.text(
        None if software else "the node software of nodes/ on the hosts new to a node type with one"
    )
    used = required_action(software) or Update.RENDER_ONLY
    o.steps.append(
        make_step(
            "hosts",
            Action.APPLY,
            used,
            text,
            software,
            files=o.files("node_software"),
            procedure=procedure.key,
        )
    )


def mig_layouts(o: Ordering) -> None:
    """MIG layouts of bare-metal Slurm's nodes (mig/), before the Slurm files that give them their
    new Gres: a batch at a time, each node whose layout changes drained, emptied, re-partitioned,
    its slurmd restarted with its new Gres, resumed. The changes stay for the Slurm files' step
    too (slurm.conf's Gres: a restart)."""
    files = o.files("mig_layout")
    if not files:
        return
    carried = [c for c in o.changes if c.update == Update.GPU_LAYOUT and c.path not in o.done]
    hosts = changed_mig_hosts(o.old, o.new)
    procedure = PROCEDURES["mig_layout"]
    update = Update.GPU_LAYOUT if carried else Update.RENDER_ONLY
    text = (
        procedure.text()
        if hosts
        else "playbooks install the changed layouts; no GPU changes (nodes' layouts unchanged)"
    )
    if hosts:
        text += f": {compress(hosts)}"
    o.steps.append(
        make_step(Owner.SLURM, Action.APPLY, update, text, carried, hosts, files, procedure=procedure.key)
    )


def changed_mig_hosts(old: Cluster, new: Cluster) -> list[str]:
    """Bare-metal Slurm's hosts whose MIG layout the new inventory changes (or gives them)."""

    def layouts(cluster: Cluster) -> dict[str, object]:
        view = cluster.owned_by(Owner.SLURM)
        found: dict[str, object] = {}
        for host in view.hosts:
            gpus = view.node_type(host).gpus
            if gpus is not None and gpus.sharing is not None and gpus.sharing.mig is not None:
                found[host] = gpus.sharing.mig.layouts(gpus.count)
        return found

    before, after = layouts(old), layouts(new)
    return [h for h in new.hosts if h in after and before.get(h) != after[h]]


def nodes_released(o: Ordering) -> None:
    """The leaving nodes are released by their schedulers (Slurm's by the next step's files); nodes
    removed from Kubernetes leave it (kubelet stopped and disabled, node objects deleted)."""
    for move, carried in o.leaving:
        for action, text in leave_texts(move, o.new)[2:]:
            by = None
            if move.source == Owner.SLURM:
                text = (
                    f"stop slurmd on {compress(move.hosts)}; the next step installs slurm.conf without them"
                )
                by = "nodes_leaving"
            o.steps.append(
                make_step(move.source, action, Update.MOVE, text, carried, move.hosts, procedure=by)
            )
    if o.removed_kube:
        removed = o.removed_kube
        carried = [c for c in o.node_changes if set(c.hosts) & set(removed)]
        for action, text in leave_texts(Move(tuple(removed), Owner.KUBERNETES, Owner.KUBERNETES), o.new)[2:]:
            o.steps.append(make_step(Owner.KUBERNETES, action, Update.KUBERNETES, text, carried, removed))


def slurm_files(o: Ordering) -> None:
    """Bare-metal Slurm: its new files, then what the release needs to read them."""
    files = o.files("slurm")
    slurm_changes = o.take(
        c
        for c in o.changes
        if c.update not in (Update.MOVE, Update.REBUILD, Update.KUBERNETES)
        and any(route(f) == "slurm" for f in c.files)
    )
    claims = [m for m in o.moved if m.target == Owner.SLURM]
    added = _hosts_of(o.changes, Owner.SLURM, added=True, cluster=o.new)
    nodes_change = bool(o.removed_slurm or added or any(Owner.SLURM in (m.source, m.target) for m in o.moved))
    if not (slurm_changes or files or nodes_change):
        return
    if o.result.upgrade is not None and not nodes_change:
        _files_of_the_upgrade(o, files, slurm_changes)
        return
    update = required_action(slurm_changes) or Update.RENDER_ONLY
    if update == Update.GPU_LAYOUT:  # the layouts applied before (mig_layouts): the new Gres
        update = Update.RESTART
    if nodes_change:
        update = max(update, effective(Update.NODE_LIST, o.release), key=SEVERITY.index)
    text = slurm_apply_text(
        update,
        o.release,
        files,
        added,
        o.removed_slurm,
        o.found.apply_notes,
        bool(o.found.ends_jobs),
        o.status,
    )
    if claims:
        claimed = tuple(h for m in claims for h in m.hosts)
        carried = [*slurm_changes, *(c for c in o.move_changes if set(c.hosts) & set(claimed))]
        text += "; " + "; ".join(claim_text(m, o.new) for m in claims)
        o.steps.append(
            make_step(
                Owner.SLURM, Action.CLAIM, Update.MOVE, text, carried, claimed, files, procedure="slurm"
            )
        )
    else:
        hosts = [*added, *o.removed_slurm]
        o.steps.append(
            make_step(Owner.SLURM, Action.APPLY, update, text, slurm_changes, hosts, files, procedure="slurm")
        )


def _files_of_the_upgrade(o: Ordering, files: list[str], carried: list[Change]) -> None:
    """An upgrade installs the new release's files on every host at its step and restarts each daemon
    once: the changes they carry are applied there, by no second restart. The primary's step (the
    first to read them) carries them in the plan."""
    for index, step in enumerate(o.steps):
        if step.procedure == "upgrade:slurmctld":
            o.steps[index] = dataclasses.replace(
                step,
                text=f"{step.text} (the new files, on every host at its step: {files_text(files, o.status)})",
                changes=tuple(dict.fromkeys([*step.changes, *(c.path for c in carried)])),
                files=tuple(files),
            )
            return


def files_text(files: Iterable[str], status: dict[str, str]) -> str:
    """`installs a, b; removes c`: what a step does with each file, as the plan found it."""
    installs = [f for f in files if status.get(f) != "removed"]
    removes = [f for f in files if status.get(f) == "removed"]
    parts = [f"installs {', '.join(installs)}"] if installs else []
    parts += [f"removes {', '.join(removes)}"] if removes else []
    return "; ".join(parts) or "installs the Slurm configuration"


def power_saving(o: Ordering) -> None:
    """Power saving (cluster.nodes[].power): gpucluster-power and its settings on the controllers,
    before slurm.conf names them; what each power change needs of a live cluster, for its release."""
    files = o.files("power")
    texts = power_notes(o.old, o.new, o.release)
    if not (files or texts):
        return
    carried = o.take(c for c in o.changes if any(route(f) == "power" for f in c.files))
    does = "; ".join([PROCEDURES["power"].does, *texts])
    o.steps.append(
        make_step(Owner.SLURM, Action.APPLY, Update.RENDER_ONLY, PROCEDURES["power"].text(does), carried,
                  files=files, procedure="power")
    )  # fmt: skip


def power_notes(old: Cluster, new: Cluster, release: Release) -> list[str]:
    """What a live cluster needs for each power change: a power-saved group added (power saving
    turned on takes a slurmctld restart) or removed (its instances deleted first), nodes moved
    between always-on and power-saved (one powered down is powered up first), timers changed."""
    notes: list[str] = []
    saved_old, saved_new = set(saved_hosts(old)), set(saved_hosts(new))
    if saved_new and not saved_old:
        start = (
            f"scontrol reconfigure re-executes slurmctld (Slurm {release.name}), which starts it"
            if release.reconfigure_reexec
            else f"after the Slurm step, restart slurmctld on each controller (Slurm {release.name}'s reconfigure "
            "does not start it; running jobs survive)"
        )
        notes.append(
            f"power saving starts with slurmctld (power_save.shtml): {start}; the power-saved nodes are powered "
            "off once idle for SuspendTime"
        )
    leaving = sorted((saved_old - saved_new) & set(new.hosts), key=lambda h: (len(h), h))
    if leaving:
        command = " ".join(power_command(release, "up", compress(leaving)))
        notes.append(
            f"{compress(leaving)} become always on: before this, power up those Slurm keeps off (`{command}`); "
            "SuspendExcNodes then keeps them on"
        )
    joining = sorted(saved_new & set(old.hosts) - saved_old, key=lambda h: (len(h), h))
    if joining:
        notes.append(
            f"{compress(joining)} become power-saved: nothing happens to them until they are idle for SuspendTime; "
            "then gpucluster-power powers them off, and a job powers them on again (their software is what their "
            "disk or image holds when they boot: run the playbooks while they are up)"
        )
    gone = sorted(saved_old - set(new.hosts), key=lambda h: (len(h), h))
    instances = [h for h in gone if h in cloud_hosts(old)]
    if instances:
        notes.append(
            f"{compress(instances)} leave with their cloud group: before this, `gpucluster-power-suspend "
            f"{compress(instances)}` on the primary controller (as slurm) deletes any instance still running"
        )
    before, after = power_timers(old), power_timers(new)
    if saved_new and saved_old and before != after:
        notes.append(
            "the new power-saving timers take effect with scontrol reconfigure; jobs and nodes are not touched"
        )
    return notes


def procedures_after(o: Ordering) -> None:
    """What the procedures check once the files are applied (the controllers, a takeover)."""
    o.steps += o.found.after


def kubernetes(o: Ordering) -> None:
    """Kubernetes: nodes claimed, then its objects and values (with the raised quotas)."""
    for move in o.moved:
        if move.target != Owner.SLURM:
            carried = [c for c in o.move_changes if set(c.hosts) & set(move.hosts)]
            o.steps.append(
                make_step(
                    move.target, Action.CLAIM, Update.MOVE, claim_text(move, o.new), carried, move.hosts
                )
            )
    files = o.files("kubernetes")
    kube_changes = o.take(
        c
        for c in o.changes
        if c.update == Update.KUBERNETES
        # A MIG layout only Kubernetes' nodes have: the MIG manager's ConfigMap re-partitions them.
        or (c.update == Update.GPU_LAYOUT and any(route(f) == "kubernetes" for f in c.files))
    )
    added = _hosts_of(o.changes, Owner.KUBERNETES, added=True, cluster=o.new)
    raising = [w for w in (Owner.KUBERNETES, Owner.SLURM_ON_KUBERNETES) if w in o.raising]
    if not (kube_changes or files or raising):
        return
    text = "; ".join([kubernetes_apply_text(files, added), *o.found.kube_notes])
    owner = raising[0] if raising else Owner.KUBERNETES
    if raising:
        text = (
            "; ".join(quota_text(w, quotas_of(o.new, w), lower=False, cluster=o.new) for w in raising)
            + "; "
            + text
        )
    o.steps.append(
        make_step(owner, Action.RAISE_QUOTAS if raising else Action.APPLY, Update.KUBERNETES, text,
                  kube_changes, [*added, *o.removed_kube], files,
                  quotas_of(o.new, owner) if raising else None, procedure="kubernetes")
    )  # fmt: skip
    for other in raising[1:]:  # replayed per scheduler; applied by the step above
        o.steps.append(make_step(other, Action.RAISE_QUOTAS, Update.KUBERNETES, "(applied with the step above)",
                                 quotas=quotas_of(o.new, other), procedure="kubernetes"))  # fmt: skip


def accounts(o: Ordering) -> None:
    """Slurm's accounts (sacctmgr), with the quotas a move raises."""
    carried = o.take(c for c in o.changes if c.update == Update.ACCOUNTS)
    files = o.files("accounts")
    raise_slurm = Owner.SLURM in o.raising
    if not (carried or files or raise_slurm):
        return
    text = "; ".join([PROCEDURES["accounts"].text(), *o.found.account_notes])
    if raise_slurm:
        text = (
            quota_text(Owner.SLURM, quotas_of(o.new, Owner.SLURM), lower=False, cluster=o.new) + "; " + text
        )
    o.steps.append(
        make_step(Owner.SLURM, Action.RAISE_QUOTAS if raise_slurm else Action.APPLY, Update.ACCOUNTS, text, carried,
                  files=files, quotas=quotas_of(o.new, Owner.SLURM) if raise_slurm else None, procedure="accounts")
    )  # fmt: skip


def monitoring(o: Ordering) -> None:
    """Monitoring: its files, whatever changed them (a node's labels, a new target)."""
    carried = o.take(c for c in o.changes if c.path.startswith("cluster.monitoring"))
    if not carried and not o.files("monitoring"):
        return
    text = PROCEDURES["monitoring"].text()
    if o.result.upgrade is not None:
        # The release decides where Slurm's metrics come from: the upgrade play ends with it.
        text = f"{PROCEDURES['upgrade:verify'].playbook} runs {text}"
    o.steps.append(
        make_step(
            "cluster",
            Action.APPLY,
            Update.SERVICE,
            text,
            carried,
            files=o.files("monitoring"),
            procedure="monitoring",
        )
    )


def the_rest(o: Ordering) -> None:
    """What is left: a service restarted, files only, rebuilds."""
    slurm = PROCEDURES["slurm"].playbook
    for update, action, text, procedure in (
        (Update.SERVICE, Action.APPLY, f"{slurm} restarts the one service concerned; slurmctld and slurmd untouched", "slurm"),
        (Update.RENDER_ONLY, Action.APPLY, "the playbooks install the changed files; no daemon action", None),
        (Update.RECONFIGURE, Action.APPLY, f"{slurm}, then " + meaning(Update.RECONFIGURE, o.release), "slurm"),
        (Update.RESTART, Action.APPLY, f"{slurm}, then " + meaning(Update.RESTART, o.release), "slurm"),
        (Update.REBUILD, Action.REBUILD, "rebuild: drain the hosts concerned and reinstall them (the Pulumi stacks for cloud pools), then run the playbooks", None),
    ):  # fmt: skip
        carried = o.take(c for c in o.changes if c.update == update)
        if carried:
            who = sorted({c.applied_by for c in carried if c.applied_by})
            text += f" (by {'; '.join(who)})" if who else ""
            o.steps.append(make_step("cluster", action, update, text, carried, procedure=procedure))


PHASES: tuple[Callable[[Ordering], None], ...] = (
    lower_quotas,
    nodes_stop_and_empty,
    procedures_before,
    users_and_storage,
    node_software,
    nodes_released,
    # After the nodes leaving Kubernetes are released (gpu_mig refuses a node whose kubelet runs).
    mig_layouts,
    power_saving,
    slurm_files,
    procedures_after,
    kubernetes,
    accounts,
    monitoring,
    the_rest,
)


def plan_steps(old: Cluster, new: Cluster, result: Plan, found: Procedures | None = None) -> list[Step]:
    """The changes in the order they are carried out, phase by phase (PHASES)."""
    ordering = Ordering.start(old, new, result, found or Procedures())
    for phase in PHASES:
        phase(ordering)
    return ordering.steps


def slurm_apply_text(
    update: Update,
    release: Release,
    files: list[str],
    added: list[str],
    removed: list[str],
    notes: Iterable[str] = (),
    ends_jobs: bool = False,
    status: dict[str, str] | None = None,
) -> str:
    playbook = PROCEDURES["slurm"].playbook
    parts = [f"{playbook} {files_text(files, status or {})}"]
    if removed:
        parts.append(f"stops slurmd on {compress(removed)} (no longer in slurm.conf)")
    if added:
        parts.append(f"installs and starts slurmd on {compress(added)} (they come up idle)")
    parts += notes
    parts.append("then " + meaning(update, release, ends_jobs))
    return "; ".join(parts)


def kubernetes_apply_text(files: list[str], added: list[str]) -> str:
    parts = []
    if added:
        parts.append(f"join {compress(added)} to the Kubernetes cluster first (the cloud pool or kubeadm)")
    playbook = PROCEDURES["kubernetes"].playbook
    parts.append(f"{playbook} applies {', '.join(files) if files else 'the Kubernetes objects'}")
    return "; ".join(parts)
