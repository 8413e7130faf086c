"""The balancer's policy (gpucluster.pool.policy): what it decides on given states, and over any
pool, demand and clock (hypothesis) the bounds it never crosses: no lend of a node with a job or
of one idle too briefly, never below either side's minimum, never a release before the minimum
lent time, never more lent than the pending GPUs need, every decision with its reason."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gpucluster.pool.policy import Action, Decision, Demand, PoolNode, PoolSettings, SlurmState, decide

POOL = PoolSettings(gpus_per_node=8, slurm_min_nodes=1, kubernetes_min_nodes=1, lend_after_seconds=300,
                    min_idle_seconds=300, min_lent_seconds=3600)  # fmt: skip
NOW = 100_000.0


def node(name: str, state: SlurmState, ago: float, held: bool = False, pods: int = 0) -> PoolNode:
    return PoolNode(name, state, NOW - ago, held, pods)


def acted(decisions: list[Decision], action: Action) -> list[str | None]:
    return [d.node for d in decisions if d.action == action]


def test_kubernetes_waiting_long_enough_gets_the_longest_idle_nodes() -> None:
    nodes = [
        node("n1", SlurmState.IDLE, 900),
        node("n2", SlurmState.IDLE, 4000),
        node("n3", SlurmState.ALLOCATED, 9000),
        node("n4", SlurmState.LENT, 100, held=True),
        node("n5", SlurmState.IDLE, 60),  # idle one minute: its job just ended
    ]
    decisions = decide(nodes, Demand(16, NOW - 600, 0), POOL, NOW)
    assert acted(decisions, Action.LEND) == ["n2", "n1"]
    assert all(d.reason for d in decisions)


def test_a_burst_shorter_than_the_hysteresis_moves_nothing() -> None:
    nodes = [
        node("n1", SlurmState.IDLE, 9000),
        node("n2", SlurmState.IDLE, 9000),
        node("n3", SlurmState.LENT, 10, held=True),
    ]
    decisions = decide(nodes, Demand(8, NOW - 120, 0), POOL, NOW)
    assert acted(decisions, Action.LEND) == []
    assert "under lend_after_seconds 300" in decisions[0].reason


def test_idle_nodes_slurm_gathers_for_a_pending_job_stay() -> None:
    nodes = [node(f"n{i}", SlurmState.IDLE, 9000) for i in range(3)] + [
        node("n9", SlurmState.LENT, 10, held=True)
    ]
    decisions = decide(nodes, Demand(24, NOW - 900, 2), POOL, NOW)
    assert len(acted(decisions, Action.LEND)) == 1
    assert any("beyond Slurm's pending jobs' 2 nodes" in d.reason for d in decisions)


def test_a_lent_node_is_held_until_its_minimum_time_and_released_when_slurm_waits() -> None:
    nodes = [
        node("n1", SlurmState.ALLOCATED, 9000),
        node("n2", SlurmState.LENT, 600),
        node("n3", SlurmState.LENT, 7200, held=True, pods=1),
        node("n4", SlurmState.LENT, 5000, held=True),
    ]
    decisions = decide(nodes, Demand(0, None, 1), POOL, NOW)
    assert acted(decisions, Action.HOLD) == ["n2"]
    # Slurm waits for one node: of the two ripe ones the empty one goes first.
    assert acted(decisions, Action.RELEASE) == ["n4"]
    hold = next(d for d in decisions if d.action == Action.HOLD)
    assert hold.reason == "lent 600 s, under min_lent_seconds 3600"
    # Slurm waiting for three: n3 runs a pod that may not be evicted; where it may, both ripe ones.
    decisions = decide(nodes, Demand(0, None, 3), POOL, NOW)
    assert acted(decisions, Action.RELEASE) == ["n4"]
    unheld = [replace(n, held=False) for n in nodes]
    reasons = {d.node: d.reason for d in decide(unheld, Demand(0, None, 3), POOL, NOW)}
    assert reasons["n3"] == "runs 1 GPU pod(s), never evicted (evict_pods false)"
    evicting = replace(POOL, evict_pods=True)
    assert acted(decide(nodes, Demand(0, None, 3), evicting, NOW), Action.RELEASE) == ["n3", "n4"]
    keeps_two = replace(evicting, kubernetes_min_nodes=2)
    assert acted(decide(nodes, Demand(0, None, 3), keeps_two, NOW), Action.RELEASE) == ["n4"]


def test_a_pool_below_kubernetes_minimum_lends_idle_nodes_at_once() -> None:
    nodes = [
        node("n1", SlurmState.IDLE, 10),
        node("n2", SlurmState.ALLOCATED, 10),
        node("n3", SlurmState.IDLE, 20),
    ]
    decisions = decide(nodes, Demand(0, None, 0), POOL, NOW)
    assert acted(decisions, Action.LEND) == ["n3"]


STATES = st.sampled_from(list(SlurmState))


@st.composite
def pools(draw: st.DrawFn) -> tuple[list[PoolNode], Demand, PoolSettings]:
    count = draw(st.integers(1, 12))
    nodes = [
        PoolNode(
            f"n{i:02d}",
            draw(STATES),
            NOW - draw(st.integers(0, 20000)),
            draw(st.booleans()),
            draw(st.integers(0, 3)),
        )
        for i in range(count)
    ]
    slurm_min = draw(st.integers(0, count))
    pool = PoolSettings(
        gpus_per_node=draw(st.sampled_from([1, 4, 8])),
        slurm_min_nodes=slurm_min,
        kubernetes_min_nodes=draw(st.integers(0, count - slurm_min)),
        lend_after_seconds=draw(st.integers(0, 3600)),
        min_idle_seconds=draw(st.integers(0, 3600)),
        min_lent_seconds=draw(st.integers(0, 14400)),
        evict_pods=draw(st.booleans()),
    )
    pending = draw(st.integers(0, 200))
    since = draw(st.none() | st.floats(NOW - 20000, NOW))
    return nodes, Demand(pending, since, draw(st.integers(0, 12))), pool


SLURM_SIDE = (SlurmState.IDLE, SlurmState.ALLOCATED, SlurmState.RETURNING)


@settings(max_examples=500, deadline=None)
@given(pools())
def test_decisions_never_cross_the_pool_s_bounds(case: tuple[list[PoolNode], Demand, PoolSettings]) -> None:
    nodes, demand, pool = case
    decisions = decide(nodes, demand, pool, NOW)
    by_name = {n.name: n for n in nodes}
    lent = acted(decisions, Action.LEND)
    assert len(lent) == len(set(lent))
    for name in lent:
        assert name is not None and by_name[name].state == SlurmState.IDLE  # never a node with a job
    slurm_side = sum(1 for n in nodes if n.state in SLURM_SIDE)
    if lent:
        assert slurm_side - len(lent) >= pool.slurm_min_nodes
    kubernetes_side = sum(1 for n in nodes if n.state in (SlurmState.LENT, SlurmState.LENDING))
    below_min = kubernetes_side < pool.kubernetes_min_nodes
    if not below_min:
        # Demand-driven lends: only after the hysteresis, of rested nodes, no more than needed.
        if lent:  # pending with no start known counts as pending since now
            since = demand.kubernetes_pending_since
            assert (0 if since is None else NOW - since) >= pool.lend_after_seconds
        for name in lent:
            assert name is not None and NOW - by_name[name].since >= pool.min_idle_seconds
        needed = -(-demand.kubernetes_pending_gpus // pool.gpus_per_node)
        on_the_way = sum(1 for n in nodes if n.state == SlurmState.LENDING)
        assert len(lent) <= max(0, needed - on_the_way)
    released = acted(decisions, Action.RELEASE)
    for name in released:
        assert name is not None and by_name[name].state == SlurmState.LENT
        assert NOW - by_name[name].since >= pool.min_lent_seconds
        assert by_name[name].pods == 0 or pool.evict_pods  # else its return would be refused
    free_after = {n.name for n in nodes if n.state == SlurmState.LENT and not n.held} | set(released)
    free_after -= {d.node for d in decisions if d.action == Action.HOLD}
    if free_after:
        assert kubernetes_side - len(free_after) >= pool.kubernetes_min_nodes
    for decision in decisions:
        assert decision.reason
        assert (decision.node is None) == (decision.action == Action.WAIT)
