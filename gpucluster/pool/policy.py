"""The balancer's policy: given Slurm's view of a pool's nodes and Kueue's pending demand on the
pool's flavor, which idle Slurm nodes to lend to Kubernetes early, and which lent nodes Slurm may
take back. Pure: the balancer reads the inputs (sinfo/squeue, Kueue's pending workloads), calls
`decide`, logs every decision with its reason and applies it.

How the two sides drive their moves:
- Slurm's own scheduler takes lent nodes back: a lent node is a powered-down Slurm node, and Slurm
  resumes it (the pool's ResumeProgram, gpucluster.pool.steps) when a job needs it, unless the
  balancer holds it (a drain on the powered-down node, its reason `[pool] held: ...`). The policy
  holds a lent node until it has been lent `min_lent_seconds` and while Kubernetes would fall
  below its minimum without it.
- Kubernetes' demand counts through the balancer: when workloads have pended on the flavor for
  `lend_after_seconds`, it asks Slurm to power down idle nodes early (`scontrol power down asap`),
  never a node with a job, never below Slurm's minimum, never one Slurm keeps idle for a pending
  job, and never more than the pending GPUs need (counting nodes already on their way).

Standard library only: shipped beside the programs (gpucluster/programs) to the controllers.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class SlurmState(StrEnum):
    """A pool node as Slurm and the pool's programs report it."""

    IDLE = "idle"  # Slurm's, no job
    ALLOCATED = "allocated"  # Slurm's, at least one job (mixed included)
    LENDING = "lending"  # powering down for Kubernetes (the lend's steps run, gate included)
    LENT = "lent"  # powered down: Kubernetes' node
    RETURNING = "returning"  # powering up for Slurm (the return's steps run, gate included)
    OUT = "out"  # down, drained by an administrator or the health check: nobody's to move


class Action(StrEnum):
    LEND = "lend"  # scontrol power down asap: hand the idle node to Kubernetes
    HOLD = "hold"  # keep a lent node from Slurm's resume (drain on the powered-down node)
    RELEASE = "release"  # Slurm may take the lent node back when a job needs it
    WAIT = "wait"  # nothing to do now; the reason says why (logged, no node)


@dataclass(frozen=True)
class PoolNode:
    name: str
    state: SlurmState
    since: float  # when the node entered `state` (seconds, the balancer's clock)
    held: bool = False  # a lent node the balancer holds now
    pods: int = 0  # GPU pods running on a lent node


@dataclass(frozen=True)
class Demand:
    """What waits on each side for the pool's nodes."""

    kubernetes_pending_gpus: int  # GPUs of Kueue's pending workloads on the pool's flavor
    kubernetes_pending_since: float | None  # when the oldest of them started pending
    slurm_pending_nodes: int  # nodes Slurm's pending jobs in the pool's partitions ask for


@dataclass(frozen=True)
class PoolSettings:
    """A pool's bounds and timers (from cluster.shared_pools[], gpucluster.model.pooled)."""

    gpus_per_node: int
    slurm_min_nodes: int = 0
    kubernetes_min_nodes: int = 0
    lend_after_seconds: int = 300
    min_idle_seconds: int = 300
    min_lent_seconds: int = 3600
    evict_pods: bool = False  # a return may evict the pods that outlast the drain bound


@dataclass(frozen=True)
class Decision:
    action: Action
    node: str | None
    reason: str


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def decide(nodes: list[PoolNode], demand: Demand, settings: PoolSettings, now: float) -> list[Decision]:
    """Every decision of this round, each with its reason: lends first, then holds and releases."""
    return _lends(nodes, demand, settings, now) + _holds(nodes, demand, settings, now)


def _slurm_side(nodes: list[PoolNode]) -> list[PoolNode]:
    return [n for n in nodes if n.state in (SlurmState.IDLE, SlurmState.ALLOCATED, SlurmState.RETURNING)]


def _idle_longest_first(nodes: list[PoolNode]) -> list[PoolNode]:
    return sorted((n for n in nodes if n.state == SlurmState.IDLE), key=lambda n: (n.since, n.name))


def _kubernetes_side(nodes: list[PoolNode]) -> int:
    return sum(1 for n in nodes if n.state in (SlurmState.LENT, SlurmState.LENDING))


def _lends(nodes: list[PoolNode], demand: Demand, settings: PoolSettings, now: float) -> list[Decision]:
    above_min = len(_slurm_side(nodes)) - settings.slurm_min_nodes
    short = settings.kubernetes_min_nodes - _kubernetes_side(nodes)
    if short > 0:
        # Below Kubernetes' minimum (a new pool, a node taken out): lend idle nodes now, no wait.
        return [
            Decision(
                Action.LEND,
                node.name,
                f"Kubernetes keeps kubernetes_min_nodes {settings.kubernetes_min_nodes}",
            )
            for node in _idle_longest_first(nodes)[: max(0, min(short, above_min))]
        ]
    wanted = _ceil_div(max(demand.kubernetes_pending_gpus, 0), settings.gpus_per_node)
    if wanted == 0:
        return []
    since = demand.kubernetes_pending_since
    waited = 0.0 if since is None else now - since
    if waited < settings.lend_after_seconds:
        return [
            Decision(
                Action.WAIT,
                None,
                f"Kubernetes waits for {demand.kubernetes_pending_gpus} GPUs since {waited:.0f} s, "
                f"under lend_after_seconds {settings.lend_after_seconds}: no early lend yet",
            )
        ]
    on_the_way = sum(1 for n in nodes if n.state == SlurmState.LENDING)
    wanted -= on_the_way
    if wanted <= 0:
        return [Decision(Action.WAIT, None, f"{on_the_way} node(s) already on their way to Kubernetes")]
    idle = _idle_longest_first(nodes)
    rested = [n for n in idle if now - n.since >= settings.min_idle_seconds]
    # Idle nodes Slurm holds for its pending jobs (a job on many nodes gathers them) stay.
    spare = len(idle) - demand.slurm_pending_nodes
    count = min(wanted, len(rested), spare, above_min)
    decisions = [
        Decision(
            Action.LEND,
            node.name,
            f"Kubernetes has waited {waited:.0f} s for {demand.kubernetes_pending_gpus} GPUs; "
            f"idle {now - node.since:.0f} s, no job",
        )
        for node in rested[: max(count, 0)]
    ]
    if count < wanted:
        limits = {
            f"{len(rested)} idle for min_idle_seconds {settings.min_idle_seconds}": len(rested),
            f"{max(spare, 0)} idle beyond Slurm's pending jobs' {demand.slurm_pending_nodes} nodes": spare,
            f"{max(above_min, 0)} above slurm_min_nodes {settings.slurm_min_nodes}": above_min,
        }
        limit = min(limits, key=lambda text: limits[text])
        decisions.append(
            Decision(
                Action.WAIT, None, f"Kubernetes wants {wanted} more node(s); lent {max(count, 0)}: {limit}"
            )
        )
    return decisions


def _holds(nodes: list[PoolNode], demand: Demand, settings: PoolSettings, now: float) -> list[Decision]:
    """Which lent nodes Slurm may resume: at most those above Kubernetes' minimum, only after their
    minimum lent time; the emptiest and longest lent first. Others are held."""
    lent = [n for n in nodes if n.state == SlurmState.LENT]
    room = _kubernetes_side(nodes) - settings.kubernetes_min_nodes
    slurm_wants = demand.slurm_pending_nodes - sum(1 for n in nodes if n.state == SlurmState.IDLE)
    slurm_wants -= sum(1 for n in nodes if n.state == SlurmState.RETURNING)
    # Below Slurm's minimum (raised in the inventory): its nodes come back as soon as they may.
    slurm_wants = max(slurm_wants, settings.slurm_min_nodes - len(_slurm_side(nodes)))
    # A node whose pods may not be evicted returns only once empty: releasing it while they run
    # would only cordon it and have its return refused at the drain bound.
    ripe = sorted(
        (
            n
            for n in lent
            if now - n.since >= settings.min_lent_seconds and (n.pods == 0 or settings.evict_pods)
        ),
        key=lambda n: (n.pods, n.since, n.name),
    )
    # Release only what Slurm waits for: a released node is one Kueue's quota may lose at any time.
    free = {n.name for n in ripe[: max(0, min(room, slurm_wants))]}
    decisions = []
    for node in lent:
        if node.name in free and node.held:
            reason = f"lent {now - node.since:.0f} s (min_lent_seconds {settings.min_lent_seconds}); Slurm waits for {demand.slurm_pending_nodes} node(s)"
            decisions.append(Decision(Action.RELEASE, node.name, reason))
        elif node.name not in free and not node.held:
            decisions.append(
                Decision(Action.HOLD, node.name, _hold_reason(node, settings, now, room, slurm_wants))
            )
    return decisions


def _hold_reason(node: PoolNode, settings: PoolSettings, now: float, room: int, slurm_wants: int) -> str:
    lent_for = now - node.since
    if lent_for < settings.min_lent_seconds:
        return f"lent {lent_for:.0f} s, under min_lent_seconds {settings.min_lent_seconds}"
    if node.pods and not settings.evict_pods:
        return f"runs {node.pods} GPU pod(s), never evicted (evict_pods false)"
    if room <= 0:
        return f"Kubernetes keeps kubernetes_min_nodes {settings.kubernetes_min_nodes}"
    if slurm_wants <= 0:
        return "Slurm waits for no node"
    return "Slurm's wait is met by emptier or longer-lent nodes"
