"""A week of synthetic, seeded demand on one fleet of GPU nodes, run through the shared pool's
policy (gpucluster.pool.policy, the code the balancer will run) and through static splits of the
same fleet: GPU-hours idle, GPU-hours spent moving, Slurm's queue wait, Kubernetes' pending time and
moves per day.

Demand (seeded): Slurm gets multi-node training jobs (2, 4 or 8 nodes, 2 to 12 hours; arrivals a
Poisson process, half as many at the weekend); Kubernetes gets serving that rises and falls daily
(replicas of one whole node each: a base, a daytime peak, noise, re-sized every 15 minutes; a
scale-down removes the newest replicas). Slurm schedules first-in first-out on whole nodes.

The pool, as gpucluster builds it: Slurm's power saving lends a node idle for SuspendTime to
Kubernetes (SuspendExcNodes keeping slurm_min_nodes); the balancer, every minute, lends idle nodes
early when Kubernetes has pended lend_after_seconds, holds lent nodes for min_lent_seconds and
Kubernetes' minimum, and releases what Slurm waits for; Slurm resumes released nodes for its
queue's head job. A return waits pod_drain_seconds for the node's replica (never evicted) and is
refused past it. A lend and a return take the gate's burn-in and the daemons' start (assumed
below, from gpucluster's defaults: a standard burn-in of a few minutes of DCGM level 2 and NCCL).

    python benchmarks/shared_pool_sim.py [--seed 42] [--nodes 32] [--days 7]

A model, not a measurement of a live cluster: its figures compare policies on the same demand.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpucluster.pool.policy import Action, Demand, PoolNode, PoolSettings, SlurmState, decide

TICK = 60  # seconds per simulation step (the balancer's period)
GPUS = 8
LEND_SECONDS = 20 * 60  # power down, stop slurmd, standard burn-in, untaint
RETURN_SECONDS = 25 * 60  # cordon, start slurmd, standard burn-in, resume
SUSPEND_TIME = 1800  # gpucluster's default SuspendTime for power-saved GPU nodes (--suspend-time)
POD_DRAIN = 600


@dataclass
class Job:
    submit: float
    nodes: int
    seconds: float
    start: float | None = None


@dataclass
class Node:
    name: str
    state: SlurmState
    since: float
    held: bool = False
    replica: bool = False  # a serving replica runs here (lent nodes only)
    cordoned_at: float | None = None  # a return waiting for the replica
    job_end: float = 0.0


@dataclass
class Totals:
    idle_gpu_hours: float = 0.0
    moving_gpu_hours: float = 0.0
    pending_replica_hours: float = 0.0
    moves: int = 0
    refused_returns: int = 0


def slurm_jobs(rng: random.Random, days: int) -> list[Job]:
    jobs, now = [], 0.0
    while now < days * 86400:
        weekend = int(now // 86400) % 7 >= 5
        now += rng.expovariate((0.4 if weekend else 0.8) / 3600)
        hours = rng.uniform(2, 12)
        jobs.append(Job(now, rng.choice([2, 2, 4, 4, 8]), hours * 3600))
    return jobs


def serving_replicas(rng: random.Random, days: int) -> list[int]:
    """Replicas wanted per 15 minutes: a base of 4, a daytime peak of 12 more, noise."""
    wanted = []
    for quarter in range(days * 96):
        hour = (quarter / 4) % 24
        day = max(0.0, math.sin((hour - 7) / 14 * math.pi)) if 7 <= hour <= 21 else 0.0
        wanted.append(max(0, round(4 + 12 * day + rng.gauss(0, 1))))
    return wanted


@dataclass
class Fleet:
    """Slurm's nodes, Kubernetes' nodes (static, or lent by the pool), the queue and the replicas."""

    nodes: list[Node]
    static_kubernetes: int  # nodes Kubernetes owns outright (a static split)
    pool: PoolSettings | None
    suspend_time: float = SUSPEND_TIME  # Slurm lends a pool node idle this long, demand or not
    queue: list[Job] = field(default_factory=list)
    done: list[Job] = field(default_factory=list)
    replicas: int = 0  # running on static Kubernetes nodes
    pending: list[float] = field(default_factory=list)  # since when each pending replica waits
    totals: Totals = field(default_factory=Totals)

    def kube_free(self) -> list[Node]:
        return [
            n for n in self.nodes if n.state == SlurmState.LENT and not n.replica and n.cordoned_at is None
        ]

    def lent_replicas(self) -> int:
        return sum(1 for n in self.nodes if n.replica)


def place_replicas(fleet: Fleet, wanted: int, now: float) -> None:
    running = fleet.replicas + fleet.lent_replicas() + len(fleet.pending)
    if wanted > running:
        fleet.pending += [now] * (wanted - running)
    while wanted < running:  # the newest first: pending, then lent nodes, then static nodes
        if fleet.pending:
            fleet.pending.pop()
        elif fleet.lent_replicas():
            node = max((n for n in fleet.nodes if n.replica), key=lambda n: n.since)
            node.replica = False
        else:
            fleet.replicas -= 1
        running -= 1
    while fleet.pending:
        if fleet.replicas < fleet.static_kubernetes:
            fleet.replicas += 1
        elif free := fleet.kube_free():
            free[0].replica = True
        else:
            break
        fleet.pending.pop(0)


def schedule_slurm(fleet: Fleet, now: float) -> None:
    for node in fleet.nodes:
        if node.state == SlurmState.ALLOCATED and node.job_end <= now:
            node.state, node.since = SlurmState.IDLE, now
    while fleet.queue:
        head = fleet.queue[0]
        idle = [n for n in fleet.nodes if n.state == SlurmState.IDLE]
        if len(idle) < head.nodes:
            resume_for(fleet, head.nodes - len(idle), now)
            return
        for node in idle[: head.nodes]:
            node.state, node.since, node.job_end = SlurmState.ALLOCATED, now, now + head.seconds
        head.start = now
        fleet.done.append(fleet.queue.pop(0))


def resume_for(fleet: Fleet, short: int, now: float) -> None:
    """Slurm resumes powered-down nodes it may take (not held) for its head job."""
    short -= sum(1 for n in fleet.nodes if n.state == SlurmState.RETURNING)
    for node in [
        n for n in fleet.nodes if n.state == SlurmState.LENT and not n.held and n.cordoned_at is None
    ][: max(short, 0)]:
        node.cordoned_at = now  # the ResumeProgram: quota lowered, cordoned, waiting for the replica


def advance_moves(fleet: Fleet, now: float) -> None:
    for node in fleet.nodes:
        if node.state == SlurmState.LENDING and now - node.since >= LEND_SECONDS:
            node.state, node.since, node.held = SlurmState.LENT, now, True
        elif node.state == SlurmState.RETURNING and now - node.since >= RETURN_SECONDS:
            node.state, node.since = SlurmState.IDLE, now
        elif node.cordoned_at is not None:
            if not node.replica:
                node.state, node.since, node.cordoned_at = SlurmState.RETURNING, now, None
                fleet.totals.moves += 1
            elif now - node.cordoned_at >= POD_DRAIN:
                node.cordoned_at = None  # refused: uncordoned, quota back, Slurm picks another
                fleet.totals.refused_returns += 1


def balance(fleet: Fleet, now: float) -> None:
    pool = fleet.pool
    if pool is None:
        return
    suspendable = (
        sum(1 for n in fleet.nodes if n.state in (SlurmState.IDLE, SlurmState.ALLOCATED))
        - pool.slurm_min_nodes
    )
    for node in fleet.nodes:  # Slurm's own power saving: SuspendTime idle -> lent
        if (
            suspendable > 0
            and node.state == SlurmState.IDLE
            and now - node.since >= fleet.suspend_time
            and not fleet.queue
        ):
            lend(fleet, node, now)
            suspendable -= 1
    views = [PoolNode(n.name, n.state, n.since, n.held, int(n.replica)) for n in fleet.nodes]
    pending_since = fleet.pending[0] if fleet.pending else None
    demand = Demand(len(fleet.pending) * GPUS, pending_since, sum(j.nodes for j in fleet.queue))
    by_name = {n.name: n for n in fleet.nodes}
    for decision in decide(views, demand, pool, now):
        target = by_name.get(decision.node or "")
        if target is None:
            continue
        if decision.action == Action.LEND:
            lend(fleet, target, now)
        elif decision.action in (Action.HOLD, Action.RELEASE):
            target.held = decision.action == Action.HOLD


def lend(fleet: Fleet, node: Node, now: float) -> None:
    node.state, node.since = SlurmState.LENDING, now
    fleet.totals.moves += 1


def account(fleet: Fleet) -> None:
    hours = TICK / 3600
    idle = sum(1 for n in fleet.nodes if n.state == SlurmState.IDLE) + len(fleet.kube_free())
    idle += fleet.static_kubernetes - fleet.replicas
    moving = sum(1 for n in fleet.nodes if n.state in (SlurmState.LENDING, SlurmState.RETURNING))
    moving += sum(1 for n in fleet.nodes if n.cordoned_at is not None and not n.replica)
    fleet.totals.idle_gpu_hours += idle * GPUS * hours
    fleet.totals.moving_gpu_hours += moving * GPUS * hours
    fleet.totals.pending_replica_hours += len(fleet.pending) * hours


def simulate(
    jobs: list[Job],
    replicas: list[int],
    slurm_nodes: int,
    kubernetes_nodes: int,
    pool: PoolSettings | None,
    days: int,
    suspend_time: float = SUSPEND_TIME,
) -> Fleet:
    nodes = [Node(f"n{i:03d}", SlurmState.IDLE, 0.0) for i in range(slurm_nodes)]
    fleet = Fleet(nodes, kubernetes_nodes, pool, suspend_time)
    arrivals = [Job(j.submit, j.nodes, j.seconds) for j in jobs]
    for step in range(days * 86400 // TICK):
        now = float(step * TICK)
        while arrivals and arrivals[0].submit <= now:
            fleet.queue.append(arrivals.pop(0))
        advance_moves(fleet, now)
        schedule_slurm(fleet, now)
        place_replicas(fleet, replicas[int(now // 900)], now)
        balance(fleet, now)
        account(fleet)
    return fleet


def row(name: str, fleet: Fleet, days: int) -> str:
    end = days * 86400.0
    # A job still queued at the end has waited until the end (counted, not dropped).
    jobs = fleet.done + fleet.queue
    waits = sorted((end if j.start is None else j.start) - j.submit for j in jobs)
    mean = sum(waits) / len(waits) / 3600 if waits else 0.0
    p95 = waits[int(0.95 * (len(waits) - 1))] / 3600 if waits else 0.0
    slurm_waited = (
        sum(j.nodes * GPUS * ((end if j.start is None else j.start) - j.submit) for j in jobs) / 3600
    )
    t = fleet.totals
    return (
        f"| {name} | {t.idle_gpu_hours:,.0f} | {t.moving_gpu_hours:,.0f} | {mean:.2f} | {p95:.2f} "
        f"| {len(fleet.queue)} | {slurm_waited:,.0f} | {t.pending_replica_hours * GPUS:,.0f} "
        f"| {t.moves / days:.1f} | {t.refused_returns} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument(
        "--suspend-time",
        type=int,
        default=SUSPEND_TIME,
        help="seconds idle before Slurm lends a pool node unasked",
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    jobs, replicas = slurm_jobs(rng, args.days), serving_replicas(rng, args.days)
    slurm_demand = sum(j.nodes * j.seconds for j in jobs) / (args.days * 86400)
    serving_mean, serving_peak = sum(replicas) / len(replicas), max(replicas)
    print(
        f"seed {args.seed}, {args.nodes} nodes of {GPUS} GPUs, {args.days} days: {len(jobs)} Slurm jobs "
        f"(mean demand {slurm_demand:.1f} nodes), serving replicas mean {serving_mean:.1f}, peak {serving_peak}"
    )
    by_mean = round(args.nodes * serving_mean / (serving_mean + slurm_demand))
    splits = sorted({by_mean, serving_peak})
    print(
        "\n| fleet | GPU-h idle | GPU-h moving | Slurm wait mean h | Slurm wait p95 h | jobs unstarted "
        "| Slurm GPU-h waited | Kubernetes GPU-h pending | moves/day | returns refused |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kube in splits:
        fleet = simulate(jobs, replicas, args.nodes - kube, kube, None, args.days)
        print(row(f"static {args.nodes - kube} Slurm / {kube} Kubernetes", fleet, args.days))
    for kube_min in (2, 8):
        pool = PoolSettings(gpus_per_node=GPUS, slurm_min_nodes=4, kubernetes_min_nodes=kube_min)
        fleet = simulate(jobs, replicas, args.nodes, 0, pool, args.days, args.suspend_time)
        name = (
            f"pool of {args.nodes} (mins 4 Slurm / {kube_min} Kubernetes, SuspendTime {args.suspend_time} s)"
        )
        print(row(name, fleet, args.days))


if __name__ == "__main__":
    main()
