"""Moving nodes between schedulers (day 2): the ordered steps, and the state they pass through.

A move never lets two schedulers hold a node and never leaves a scheduler promising tenants more
GPUs than it can place at that moment. So: first every scheduler involved lowers its quotas to
what both the old and the new inventory allow; then each moving node stops taking work in its old
scheduler, empties (jobs finish, pods are evicted with their PodDisruptionBudgets), is released,
and only then is claimed by the new one; last, the quotas rise to the new numbers.

`replay` applies the steps to a model of what each scheduler holds, so the order can be checked
(tests do) rather than trusted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from gpucluster.changes.playbooks import PROCEDURES
from gpucluster.hostlists import compress
from gpucluster.model.base import Owner, Update
from gpucluster.model.cluster import Cluster
from gpucluster.model.gate import KUBERNETES_TAINT
from gpucluster.model.spec import GpuQuota
from gpucluster.slurm.defaults import minutes

OWNER_LABEL = "gpucluster.io/owner"
MOVE_REASON = "gpucluster: moving to {target}"


class Action(StrEnum):
    LOWER_QUOTAS = "lower-quotas"
    STOP_PLACING = "stop-placing"  # no new work: drain (Slurm) / cordon (Kubernetes)
    WAIT_EMPTY = "wait-empty"  # running work ends on its own, or is evicted politely
    RELEASE = "release"  # the scheduler forgets the node
    CLAIM = "claim"  # the new scheduler takes it
    RAISE_QUOTAS = "raise-quotas"
    # The other steps of a plan (gpucluster.changes.plan): files and objects applied, a rebuild.
    APPLY = "apply"
    REBUILD = "rebuild"
    # The steps of a change's procedure (gpucluster.changes.procedures).
    PREPARE = "prepare"  # what the change needs in place first (a partition, a copy of the state)
    MOVE_JOBS = "move-jobs"  # pending jobs to where they can run
    TAKEOVER = "takeover"  # the controller that stays put in charge
    STOP_DAEMON = "stop-daemon"  # a daemon stopped (and disabled) where it no longer belongs
    DELETE = "delete"  # objects deleted (Kubernetes nodes)
    VERIFY = "verify"  # the result checked on the live cluster
    KEEP = "keep"  # what was done live written into the files, so that a restart keeps it
    UPGRADE = "upgrade"  # a daemon's packages upgraded to the target Slurm release, then waited for
    RESUME = "resume"  # nodes drained for the change take jobs again


@dataclass(frozen=True)
class Move:
    hosts: tuple[str, ...]
    source: Owner
    target: Owner


@dataclass(frozen=True)
class Step:
    scheduler: Owner | str  # a scheduler, or `hosts` / `cluster` for steps of no one scheduler
    action: Action
    hosts: tuple[str, ...] = ()
    quotas: dict[str, GpuQuota] = field(default_factory=dict)  # tenant -> numbers in force after
    text: str = ""
    # In a plan: the policy the step uses, the changes it carries out and the files it installs.
    update: Update | None = None
    changes: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    # The procedure whose plays carry it out (gpucluster.changes.playbooks); None: by hand or by
    # another tool (kubectl, the Pulumi stacks).
    procedure: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "scheduler": str(self.scheduler),
            "action": self.action.value,
            "update": self.update.name.lower() if self.update else None,
            "hosts": list(self.hosts),
            "quotas": {t: {"quota": q.quota, "limit": q.effective_limit} for t, q in self.quotas.items()},
            "text": self.text,
            "changes": list(self.changes),
            "files": list(self.files),
            "procedure": self.procedure,
        }


def moves(old: Cluster, new: Cluster) -> list[Move]:
    """Hosts of both inventories whose owner differs, grouped by (old owner, new owner)."""
    grouped: dict[tuple[Owner, Owner], list[str]] = {}
    for host in new.hosts:
        before, after = old.owner_of.get(host), new.owner_of.get(host)
        if before is not None and after is not None and before != after:
            grouped.setdefault((before, after), []).append(host)
    return [Move(tuple(hosts), source, target) for (source, target), hosts in sorted(grouped.items())]


def quotas_of(cluster: Cluster, owner: Owner) -> dict[str, GpuQuota]:
    return {name: gpus[owner] for name, gpus in sorted(cluster.tenant_gpus.items()) if owner in gpus}


def numbers(quotas: dict[str, GpuQuota]) -> dict[str, tuple[int, int]]:
    """Quotas as (quota, limit) pairs, to compare what they mean."""
    return {t: (q.quota, q.effective_limit) for t, q in quotas.items()}


def lowers(before: dict[str, GpuQuota], lowered: dict[str, GpuQuota]) -> bool:
    """Whether lowering to `lowered` takes anything away from a tenant that had numbers before."""
    had, then = numbers(before), numbers(lowered)
    return any(then[t] != had[t] for t in had if t in then)


def raises(lowered: dict[str, GpuQuota], target: dict[str, GpuQuota]) -> bool:
    """Whether the new numbers differ from those in force after lowering (a tenant at 0 everywhere
    is no tenant of the scheduler)."""
    then, wanted = numbers(lowered), numbers(target)
    return any(then.get(t, (0, 0)) != wanted.get(t, (0, 0)) for t in set(then) | set(wanted))


def lowered_quotas(old: dict[str, GpuQuota], new: dict[str, GpuQuota]) -> dict[str, GpuQuota]:
    """Per tenant, what both inventories allow (a tenant absent from one gets nothing)."""
    out = {}
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name, GpuQuota()), new.get(name, GpuQuota())
        out[name] = GpuQuota(quota=min(a.quota, b.quota), limit=min(a.effective_limit, b.effective_limit))
    return out


def quota_text(owner: Owner, quotas: dict[str, GpuQuota], lower: bool, cluster: Cluster | None = None) -> str:
    """The step that sets a scheduler's quotas. With `cluster` (the inventory the step's numbers
    belong to), Slurm's limits also in the shared units its GPUs make (GrpTRES): a node that
    moves takes its shards, MPS shares or MIG instances with it."""
    numbers = ", ".join(f"{t} {q.quota}/{q.effective_limit}" for t, q in quotas.items()) or "none"
    if owner == Owner.SLURM and cluster is not None and Owner.SLURM in cluster.owners:
        from gpucluster.slurm.sharing import quota_tres, shares_gpus

        view = cluster.owned_by(Owner.SLURM)
        if shares_gpus(view):
            tres = "; ".join(
                f"{t} " + ",".join(f"{k}={v}" for k, v in quota_tres(view, q).items())
                for t, q in quotas.items()
            )
            numbers += f" (GrpTRES in shared units: {tres})"
    verb = "lower" if lower else "raise"
    accounts, kube = PROCEDURES["accounts"], PROCEDURES["kubernetes"]
    if owner == Owner.SLURM:
        how = f"sacctmgr GrpTRES=gres/gpu ({accounts.playbook}, {', '.join(accounts.roles)} role)"
    elif owner == Owner.KUBERNETES:
        how = f"Kueue ClusterQueues and KAI queues ({kube.playbook}, gpu_workloads role)"
    else:
        how = f"the Slurm-on-Kubernetes accounts ({kube.playbook})"
    return f"{verb} {owner} quotas to (quota/limit GPUs) {numbers}: {how}"


def node_list_apply(new: Cluster) -> str:
    """How the target release learns a node list."""
    if new.release.reconfigure_node_changes:
        return f"scontrol reconfigure (Slurm {new.release.name} adds and removes nodes that way)"
    return (
        f"restart slurmctld, then slurmd on every node (Slurm {new.release.name} learns node lists only "
        "on restart; running jobs survive)"
    )


# The playbook's wait where a partition's jobs may run for ever (slurm_common_leave_timeout unset).
UNBOUNDED_WAIT = 3600
LEAVE_TIMEOUT = "slurm_common_leave_timeout"


def wait_bound(cluster: Cluster, partitions: Iterable[str]) -> str:
    """How long the playbook waits for the jobs of these partitions (of `cluster`, the inventory
    they run under): as long as they may run, the longest MaxTime, unless slurm_common_leave_timeout
    says otherwise; UNBOUNDED_WAIT where one has none."""
    wanted = set(partitions)
    limits = {p.name: p.max_time for p in cluster.spec.partitions if p.name in wanted}
    unlimited = [name for name, limit in limits.items() if minutes(limit) == "UNLIMITED"]
    if not limits or unlimited:
        which = ", ".join(unlimited) or "their partitions"
        return (
            f"{which}: MaxTime UNLIMITED, so its jobs may run for ever: the playbook waits {UNBOUNDED_WAIT} s, then "
            f"lists what still runs and stops before any file changes; -e {LEAVE_TIMEOUT}=<seconds> waits longer"
        )
    longest = max(limits, key=lambda name: int(minutes(limits[name])))
    return (
        f"bounded by the longest MaxTime, {limits[longest]} ({longest}): the playbook waits as long as its jobs "
        f"may run, then lists what still runs and stops before any file changes; -e {LEAVE_TIMEOUT}=<seconds> "
        "bounds it otherwise"
    )


def partitions_of(cluster: Cluster, hosts: Iterable[str]) -> list[str]:
    """The partitions holding any of these hosts."""
    chosen = set(hosts)
    return [name for name, members in cluster.partitions.items() if chosen & set(members)]


def leave_texts(
    move: Move, new: Cluster, reason: str | None = None, bound: str | None = None
) -> list[tuple[Action, str]]:
    """Stop placing, wait until empty, then release (one or more steps): what the old scheduler
    does with leaving nodes. Every command pastes as it is: Slurm's commands expand host ranges,
    kubectl and ssh get a loop over the hosts."""
    hosts = compress(move.hosts)
    reason = reason or MOVE_REASON.format(target=move.target)
    if move.source == Owner.SLURM:
        return [
            (Action.STOP_PLACING, f'scontrol update nodename={hosts} state=drain reason="{reason}"'),
            (
                Action.WAIT_EMPTY,
                f"wait until `squeue --noheader --nodelist={hosts}` prints nothing (running jobs finish, none is "
                f"killed; {bound or 'past the deadline, report what still runs and stop'})",
            ),
            (Action.RELEASE, f"render slurm.conf without {hosts}, stop slurmd there, {node_list_apply(new)}"),
        ]
    if move.source == Owner.KUBERNETES:
        steps = [
            (Action.STOP_PLACING, for_each(move.hosts, 'kubectl cordon "$node"')),
            (
                Action.WAIT_EMPTY,
                for_each(move.hosts, 'kubectl drain "$node" --ignore-daemonsets --delete-emptydir-data')
                + " (evictions respect PodDisruptionBudgets; past the deadline, report what still runs and stop)",
            ),
        ]
        if move.target == Owner.SLURM_ON_KUBERNETES:  # the node stays in Kubernetes, for Slurm's pods
            return [
                *steps,
                (
                    Action.RELEASE,
                    for_each(move.hosts, f'kubectl label node "$node" {OWNER_LABEL}-')
                    + " (Kueue flavors and KAI no longer select them)",
                ),
            ]
        # Leaving Kubernetes for good (to bare-metal Slurm, or out of the inventory): the kubelet
        # stopped and disabled first (a kubelet left enabled registers the node again at the next
        # boot, a running one at once), then the node objects deleted (their labels go with them).
        return [
            *steps,
            (
                Action.STOP_DAEMON,
                on_hosts(move.hosts, "systemctl disable --now kubelet")
                + " (the nodes leave Kubernetes: a kubelet left enabled would register them again)",
            ),
            (
                Action.DELETE,
                for_each(move.hosts, 'kubectl delete node "$node"')
                + f" (their {OWNER_LABEL} label goes with them)",
            ),
        ]
    return [
        (
            Action.STOP_PLACING,
            for_each(move.hosts, 'kubectl cordon "$node"')
            + "; scale their NodeSet down (Slinky drains the Slurm nodes)",
        ),
        (Action.WAIT_EMPTY, f"wait until the slurmd pods on {hosts} are gone (their Slurm jobs finished)"),
        (
            Action.RELEASE,
            for_each(
                move.hosts,
                f'kubectl label node "$node" {OWNER_LABEL}-; kubectl taint node "$node" {OWNER_LABEL}-',
            ),
        ),
    ]


def for_each(hosts: Iterable[str], command: str, var: str = "node") -> str:
    """A loop a shell runs as pasted, for commands that take one name and expand no host ranges."""
    names = list(hosts)
    if len(names) == 1:
        return command.replace(f'"${var}"', names[0])
    return f"for {var} in {' '.join(names)}; do {command}; done"


def on_hosts(hosts: Iterable[str], command: str) -> str:
    """A command run as root on each host, over ssh."""
    return for_each(hosts, f'ssh "$host" {command}', var="host")


def carried(move: Move, new: Cluster) -> str:
    """What the moving nodes' GPUs are in the scheduler they join, and who keeps a MIG layout."""
    from gpucluster.model.sharing import kubernetes_units

    parts: list[str] = []
    mig = False
    for host in move.hosts:
        gpus = new.node_type(host).gpus
        if gpus is None or gpus.sharing is None:
            continue
        mig = mig or gpus.sharing.mig is not None
        if move.target == Owner.SLURM:
            parts.append(f"{host} Gres={gpus.gres().text}")
        elif move.target == Owner.KUBERNETES:
            units = kubernetes_units(gpus.count, gpus.sharing, "mixed")
            parts.append(f"{host} " + ", ".join(f"{r}: {n}" for r, n in units.items()))
    if not parts:
        return ""
    text = f"; their shared GPUs: {'; '.join(parts)}"
    if mig and move.target == Owner.SLURM:
        text += (
            f"; their MIG layout stays ({PROCEDURES['mig_layout'].playbook} before: gpu_mig checks it and "
            "re-applies it where it differs, the node not yet in slurm.conf)"
        )
    elif mig and move.target == Owner.KUBERNETES:
        text += "; their MIG layout stays (the GPU Operator's MIG manager applies the same, nvidia.com/mig.config)"
    return text


def claim_text(move: Move, new: Cluster) -> str:
    hosts = compress(move.hosts)
    if move.target == Owner.SLURM:
        gate = new.spec.gate
        level = gate.levels.move if gate is not None and new.spec.slurm.health is not None else "none"
        back = (
            "the nodes come up idle"
            if level == "none"
            else f"the nodes come up in the return-to-service gate (slurmctld did not know them: a {level} "
            "burn-in, then they take jobs)"
        )
        return (
            f"{PROCEDURES['slurm'].playbook}: slurm.conf with {hosts}, slurmd started, then {node_list_apply(new)}; "
            + back
            + carried(move, new)
        )
    if move.target == Owner.KUBERNETES:
        gate = new.spec.gate
        if gate is not None and gate.levels.move != "none":
            taint = for_each(
                move.hosts, f'kubectl taint node "$node" {KUBERNETES_TAINT}=move:NoSchedule --overwrite'
            )
            return (
                f"apply kubernetes/nodes.yaml ({OWNER_LABEL}=kubernetes and fabric labels on {hosts}), {taint}, "
                + for_each(move.hosts, 'kubectl uncordon "$node"')
                + f" (the gate's pod on each lifts the taint after a {gate.levels.move} burn-in)"
            )
        return (
            f"apply kubernetes/nodes.yaml ({OWNER_LABEL}=kubernetes and fabric labels on {hosts}), "
            "then " + for_each(move.hosts, 'kubectl uncordon "$node"') + carried(move, new)
        )
    return (
        f"apply kubernetes/nodes.yaml ({OWNER_LABEL}=slurm-on-kubernetes, NodeSet label and taint on {hosts}), "
        + for_each(move.hosts, 'kubectl uncordon "$node"')
        + ", NodeSet replicas up (helm values)"
    )


def move_steps(old: Cluster, new: Cluster) -> list[Step]:
    """The ordered steps of the moves alone, from `old` to `new` ownership; [] when nothing moves.
    Quotas are lowered only where they come down, and raised only where they go up from there
    (gpucluster.changes.plan places these steps among the plan's others)."""
    found = moves(old, new)
    if not found:
        return []
    involved = [o for o in Owner if any(o in (m.source, m.target) for m in found)]
    steps = []
    for owner in involved:
        before = quotas_of(old, owner)
        lowered = lowered_quotas(before, quotas_of(new, owner))
        if lowers(before, lowered):
            steps.append(
                Step(owner, Action.LOWER_QUOTAS, quotas=lowered, text=quota_text(owner, lowered, True, new))
            )
    for move in found:
        for action, text in leave_texts(move, new):
            steps.append(Step(move.source, action, move.hosts, text=text))
        steps.append(Step(move.target, Action.CLAIM, move.hosts, text=claim_text(move, new)))
    for owner in involved:
        target = quotas_of(new, owner)
        if raises(lowered_quotas(quotas_of(old, owner), target), target):
            steps.append(
                Step(owner, Action.RAISE_QUOTAS, quotas=target, text=quota_text(owner, target, False, new))
            )
    return steps


@dataclass
class FleetState:
    """What each scheduler holds while the steps run."""

    held: dict[Owner, set[str]]  # hosts the scheduler considers its own
    placing: dict[Owner, set[str]]  # hosts it may start new work on
    quotas: dict[Owner, dict[str, GpuQuota]]


def initial_state(cluster: Cluster) -> FleetState:
    held = {o: set(cluster.hosts_owned_by(o)) for o in Owner}
    return FleetState(held, {o: set(h) for o, h in held.items()}, {o: quotas_of(cluster, o) for o in Owner})


def replay(state: FleetState, step: Step) -> None:
    if not isinstance(step.scheduler, Owner):
        return  # a step of the whole cluster: no scheduler's holdings change
    if step.action in (Action.LOWER_QUOTAS, Action.RAISE_QUOTAS):
        state.quotas[step.scheduler] = dict(step.quotas)
    elif step.action == Action.STOP_PLACING:
        state.placing[step.scheduler] -= set(step.hosts)
    elif step.action in (Action.RELEASE, Action.DELETE):  # a deleted Kubernetes node is released
        state.held[step.scheduler] -= set(step.hosts)
        state.placing[step.scheduler] -= set(step.hosts)
    elif step.action == Action.CLAIM:
        state.held[step.scheduler] |= set(step.hosts)
        state.placing[step.scheduler] |= set(step.hosts)
