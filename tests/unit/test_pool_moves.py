"""A lend and a return run by gpucluster/pool/moves.py as the steps table says, with the real
Kubernetes calls (kube.py, the official client against test_pool_kube's loopback API server) and a
Slurm whose jobs and slurmd are recorded here. At the instant each side is given the node, the
other has no work there and may place none; a return whose pods outlast the bound is undone (node
lent again, quota back) unless the pool evicts, and then evicts through the Eviction API until the
disruption budget lets it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from gpucluster.pool.kube import GATE_TAINT_KEY, POOL_TAINT_KEY, PoolQueues
from gpucluster.pool.moves import Move, MoveRefused, PoolActions, action_name, missing_actions
from gpucluster.pool.steps import STEPS, UNDO, Procedure
from tests.unit.test_pool_kube import ApiServer, _gpu_quota, _node, _pod, _pool, _rendered_queues, api

__all__ = ["api"]  # the fixture, used by name

NODE = "gpu05"
FLAVOR_INDEX = 0


@dataclass
class Slurm:
    """The node's jobs (ending at given times), slurmd's state, and the commands seen."""

    api: ApiServer
    clock: list[float]
    job_ends: list[float] = field(default_factory=list)
    slurmd: bool = True
    calls: list[str] = field(default_factory=list)

    def run(self, argv: list[str]) -> str:
        self.calls.append(" ".join(argv))
        if argv[0] == "squeue":
            return "\n".join(str(100 + i) for i, end in enumerate(self.job_ends) if end > self.clock[0])
        return ""

    def control(self, node: str, action: str) -> None:
        self.calls.append(f"slurmd {action} {node}")
        taints = {t["key"] for t in self.api.nodes[node]["spec"].get("taints") or []}
        if action == "start":
            # Slurm gets the node: Kubernetes may place nothing there and runs no GPU pod there.
            assert POOL_TAINT_KEY in taints and self.api.nodes[node]["spec"]["unschedulable"] is True
            assert not [p for p in self.api.pods if p["spec"]["nodeName"] == node]
            self.slurmd = True
        else:
            assert all(end <= self.clock[0] for end in self.job_ends), "slurmd stopped with a job running"
            self.slurmd = False


def _setup(api: ApiServer, lent: bool) -> tuple[str, str, int]:
    api.queues = _rendered_queues()
    queue = sorted(api.queues)[0]
    flavor = api.queues[queue]["spec"]["resourceGroups"][0]["flavors"][FLAVOR_INDEX]["name"]
    taints = [] if lent else [{"key": POOL_TAINT_KEY, "value": "slurm", "effect": "NoSchedule"}]
    api.nodes = {NODE: _node(NODE, taints)}
    if not lent:
        api.nodes[NODE]["spec"]["unschedulable"] = True
    return queue, flavor, int(_gpu_quota(api.queues[queue], flavor))


def _move(api: ApiServer, procedure: Procedure, slurm: Slurm, queue: str, flavor: str, **kw: Any) -> Move:
    kube = _pool(api, PoolQueues(flavor=flavor, weights={queue: 1}))
    actions = PoolActions(kube, slurm.run, slurm.control, lambda node: 8, gate=kw.pop("gate", True))

    def sleep(seconds: float) -> None:
        slurm.clock[0] += seconds
        # Pods end at the times their names say (`...@<seconds>`).
        api.pods = [
            p
            for p in api.pods
            if float(p["metadata"].get("annotations", {}).get("ends", "inf")) > slurm.clock[0]
        ]

    return Move(NODE, procedure, actions, clock=lambda: slurm.clock[0], sleep=sleep, **kw)


def _ending_pod(name: str, at: float) -> dict[str, Any]:
    pod = _pod(name, NODE, 8)
    pod["metadata"]["annotations"] = {"ends": str(at)}
    return pod


def test_every_step_of_the_table_has_its_action_and_a_missing_one_stops_before_any_change(
    api: ApiServer,
) -> None:
    actions = PoolActions(object(), lambda argv: "", lambda n, a: None, lambda n: 8, gate=True)  # type: ignore[arg-type]
    for procedure in Procedure:
        assert missing_actions(actions, procedure) == []
    named = {action_name(s) for s in STEPS} | {action_name(s, undo=True) for p in Procedure for s in UNDO[p]}
    defined = {n for n in dir(PoolActions) if n.startswith(("lend_", "return_"))}
    assert named == defined  # no action without its step either

    class Partial(PoolActions):
        return_cordon = None  # type: ignore[assignment]

    partial = Partial(object(), lambda argv: "", lambda n, a: None, lambda n: 8, gate=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no action for the return steps return_cordon"):
        Move(NODE, Procedure.RETURN, partial, bound=60).run()
    assert api.requests == []


def test_a_lend_waits_for_the_last_job_then_hands_the_node_to_kubernetes_through_the_gate(
    api: ApiServer,
) -> None:
    queue, flavor, quota = _setup(api, lent=False)
    slurm = Slurm(api, [0.0], job_ends=[10.0])
    done = _move(api, Procedure.LEND, slurm, queue, flavor, bound=600).run(start="stop-slurmd")
    assert done == ["stop-slurmd", "gate", "untaint", "raise-quota"]
    # Stopped once the job had ended (the stop itself asserts no job runs).
    assert f"slurmd stop {NODE}" in slurm.calls and not slurm.slurmd and slurm.clock[0] >= 10
    node = api.nodes[NODE]["spec"]
    assert node["unschedulable"] is False
    assert [t["key"] for t in node["taints"]] == [GATE_TAINT_KEY]  # the gate's pod lifts it on a pass
    assert int(_gpu_quota(api.queues[queue], flavor)) == quota + 8


def test_a_lend_without_the_gate_leaves_no_taint(api: ApiServer) -> None:
    queue, flavor, _ = _setup(api, lent=False)
    slurm = Slurm(api, [0.0])
    _move(api, Procedure.LEND, slurm, queue, flavor, bound=600, gate=False).run(start="stop-slurmd")
    assert api.nodes[NODE]["spec"]["taints"] == []


def test_a_return_lowers_the_quota_first_and_starts_slurmd_once_the_pods_ended(api: ApiServer) -> None:
    queue, flavor, quota = _setup(api, lent=True)
    api.pods = [_ending_pod("train-0", 30.0)]
    slurm = Slurm(api, [0.0], slurmd=False)
    done = _move(api, Procedure.RETURN, slurm, queue, flavor, bound=600).run()
    assert done == ["lower-quota", "cordon", "wait-pods", "start-slurmd", "gate", "resume"]
    patches = [r["path"] for r in api.requests if r["method"] == "PATCH"]
    assert "clusterqueues" in patches[0] and "nodes" in patches[1]  # no pod admitted on GPUs leaving
    assert slurm.slurmd and slurm.clock[0] >= 30
    assert int(_gpu_quota(api.queues[queue], flavor)) == quota - 8


def test_a_return_whose_pods_outlast_the_bound_is_undone_and_the_node_stays_lent(api: ApiServer) -> None:
    queue, flavor, quota = _setup(api, lent=True)
    api.pods = [_ending_pod("serve-0", 10_000.0)]
    slurm = Slurm(api, [0.0], slurmd=False)
    move = _move(api, Procedure.RETURN, slurm, queue, flavor, bound=60)
    with pytest.raises(MoveRefused, match="evict_pods"):
        move.run()
    assert move.done == ["lower-quota", "cordon", "undo:uncordon", "undo:restore-quota"]
    assert not slurm.slurmd and not any(c.startswith("slurmd") for c in slurm.calls)
    assert api.nodes[NODE]["spec"]["unschedulable"] is False and api.nodes[NODE]["spec"]["taints"] == []
    assert int(_gpu_quota(api.queues[queue], flavor)) == quota
    assert not [r for r in api.requests if r["path"].endswith("/eviction")]


def test_a_pool_that_evicts_retries_until_the_disruption_budget_allows(api: ApiServer) -> None:
    queue, flavor, _ = _setup(api, lent=True)
    api.pods = [_ending_pod("serve-0", 10_000.0)]
    api.budget_blocks = {"serve-0"}
    slurm = Slurm(api, [0.0], slurmd=False)
    move = _move(api, Procedure.RETURN, slurm, queue, flavor, bound=60, evict=True)
    tries: list[float] = []
    real_sleep = move.sleep

    def sleep(seconds: float) -> None:
        real_sleep(seconds)
        evictions = [r for r in api.requests if r["path"].endswith("/eviction")]
        tries.append(len(evictions))
        if len(evictions) >= 3:
            api.budget_blocks = set()  # another replica became ready

    move.sleep = sleep
    assert move.run()[-3:] == ["start-slurmd", "gate", "resume"]
    evictions = [r for r in api.requests if r["path"].endswith("/eviction")]
    assert len(evictions) == 4 and slurm.slurmd
    assert slurm.clock[0] >= 60  # not before the bound
