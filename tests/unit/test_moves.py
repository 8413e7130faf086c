"""Moving nodes between schedulers: the steps `gpucluster plan` prints, replayed one by one. At no
step does a node have two schedulers, and at no step does a scheduler promise more GPUs than it
can place at that moment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpucluster.changes.moves import Action, Step, initial_state, move_steps, raises, replay
from gpucluster.changes.plan import make_plan
from gpucluster.layers import load_cluster
from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster
from tests.conftest import InventoryFactory, run_cli
from tests.fleet import gpu04_to_kubernetes


def lab_pair(inventories: InventoryFactory) -> tuple[Path, Path]:
    old = inventories.copy_example("lab", name="old")
    new = inventories.copy_example("lab", name="new")
    cluster_file = new / "group_vars" / "all" / "cluster.yml"
    cluster_file.write_text(gpu04_to_kubernetes(cluster_file.read_text()))
    return old, new


def check_walk(old: Cluster, new: Cluster, steps: list[Step]) -> None:
    """Replay the steps; assert the invariants after each, and that they end in `new`."""
    state = initial_state(old)
    gpus = {h: old.gpus_of([h]) for h in old.hosts}
    for number, step in enumerate(steps, 1):
        replay(state, step)
        where = f"after step {number} ({step.scheduler} {step.action})"
        for host in gpus:
            holders = [o for o in Owner if host in state.held[o]]
            assert len(holders) <= 1, f"{where}: {host} is held by {holders}"
        for owner in Owner:
            capacity = sum(gpus[h] for h in state.placing[owner])
            quotas = state.quotas[owner]
            top = sum(q.quota for t, q in quotas.items() if new.tenants_by_name[t].parent is None)
            assert top <= capacity, f"{where}: {owner} guarantees {top} GPUs but can place {capacity}"
            for tenant, numbers in quotas.items():
                assert numbers.effective_limit <= capacity, f"{where}: {owner} limit of {tenant} > {capacity}"
    for owner in Owner:
        assert state.held[owner] == set(new.hosts_owned_by(owner)), owner
        # A tenant at 0 GPUs in a scheduler holds nothing there, listed or not.
        wanted = {t: g[owner] for t, g in new.tenant_gpus.items() if owner in g}
        assert not raises(state.quotas[owner], wanted), owner


def test_slurm_to_kubernetes_steps_keep_one_owner_and_quotas_within_capacity(
    inventories: InventoryFactory,
) -> None:
    old_dir, new_dir = lab_pair(inventories)
    old, new = load_cluster(old_dir), load_cluster(new_dir)
    steps = move_steps(old, new)
    check_walk(old, new, steps)
    actions = [(s.scheduler, s.action) for s in steps]
    # Quotas come down first and go up last; the node is emptied in Slurm before Kubernetes claims it.
    # Only steps that change something: Kubernetes has no quota to lower, and Slurm's lowered
    # numbers are already its new ones.
    assert actions == [
        (Owner.SLURM, Action.LOWER_QUOTAS),
        (Owner.SLURM, Action.STOP_PLACING),
        (Owner.SLURM, Action.WAIT_EMPTY),
        (Owner.SLURM, Action.RELEASE),
        (Owner.KUBERNETES, Action.CLAIM),
        (Owner.KUBERNETES, Action.RAISE_QUOTAS),
    ]
    assert steps[1].hosts == ("gpu04",)
    assert (
        'scontrol update nodename=gpu04 state=drain reason="gpucluster: moving to kubernetes"'
        in steps[1].text
    )
    # The lab's 26.05 takes a node list with `scontrol reconfigure` (a restart before 24.11).
    assert "scontrol reconfigure (Slurm 26.05 adds and removes nodes that way)" in steps[3].text


def test_kubernetes_to_slurm_lowers_quotas_then_cordons_and_evicts(inventories: InventoryFactory) -> None:
    new_dir, old_dir = lab_pair(inventories)
    old, new = load_cluster(old_dir), load_cluster(new_dir)
    steps = move_steps(old, new)
    check_walk(old, new, steps)
    kubernetes = [s for s in steps if s.scheduler == Owner.KUBERNETES]
    # Kubernetes keeps no GPUs: its quotas come down to nothing, and nothing raises them again.
    # Leaving Kubernetes for bare-metal Slurm: the kubelet stopped and disabled, then the node
    # deleted, each a step of its own (a kubelet left enabled registers the node again).
    assert [s.action for s in kubernetes] == [
        Action.LOWER_QUOTAS,
        Action.STOP_PLACING,
        Action.WAIT_EMPTY,
        Action.STOP_DAEMON,
        Action.DELETE,
    ]
    assert kubernetes[0].quotas["research"].quota == 0  # lowered before the node leaves
    assert kubernetes[1].text == "kubectl cordon gpu04"
    assert "PodDisruptionBudgets" in kubernetes[2].text
    assert kubernetes[3].text.startswith("ssh gpu04 systemctl disable --now kubelet")
    assert kubernetes[4].text.startswith("kubectl delete node gpu04")
    assert [s.action for s in steps if s.scheduler == Owner.SLURM] == [Action.CLAIM, Action.RAISE_QUOTAS]


def test_the_walk_check_catches_a_claim_before_the_release(inventories: InventoryFactory) -> None:
    old_dir, new_dir = lab_pair(inventories)
    old, new = load_cluster(old_dir), load_cluster(new_dir)
    steps = move_steps(old, new)
    claim = next(i for i, s in enumerate(steps) if s.action == Action.CLAIM)
    release = next(i for i, s in enumerate(steps) if s.action == Action.RELEASE)
    swapped = list(steps)
    swapped[claim], swapped[release] = swapped[release], swapped[claim]
    with pytest.raises(AssertionError, match="gpu04 is held by"):
        check_walk(old, new, swapped)
    # Raising Kubernetes quotas before it holds the node over-promises.
    early = [steps[-1], *steps[:-1]]
    with pytest.raises(AssertionError, match="kubernetes guarantees 8 GPUs but can place 0"):
        check_walk(old, new, early)
    # A walk that never lowers Slurm's quotas promises GPUs Slurm no longer has.
    with pytest.raises(AssertionError, match="slurm guarantees 32 GPUs but can place 24"):
        check_walk(old, new, steps[1:])


def test_example_moves_between_units(inventories: InventoryFactory) -> None:
    """superpod: SU3 goes from Slurm to Kubernetes, with tenants' numbers following."""
    old_dir = inventories.copy_example("superpod", name="before")
    new_dir = inventories.copy_example("superpod", name="after")
    path = new_dir / "group_vars" / "all" / "cluster.yml"
    text = path.read_text()
    for a, b in {
        "{group: dgx_su3, type: dgx-h100, owner: slurm}": "{group: dgx_su3, type: dgx-h100, owner: kubernetes}",
        "nodes: [dgx_su1, dgx_su2, dgx_su3], default: true": "nodes: [dgx_su1, dgx_su2], default: true",
        "{name: interactive, nodes: [dgx_su3]": "{name: interactive, nodes: [dgx_su2]",
        "slurm: {quota: 384, limit: 640}": "slurm: {quota: 256, limit: 512}",
        "kubernetes: {quota: 64, limit: 128}": "kubernetes: {quota: 192, limit: 256}",
        "gpus: {slurm: {quota: 256, limit: 512}}": "gpus: {slurm: {quota: 192, limit: 512}}",
    }.items():
        assert a in text, a
        text = text.replace(a, b)
    path.write_text(text)
    old, new = load_cluster(old_dir), load_cluster(new_dir)
    steps = move_steps(old, new)
    assert {s.hosts for s in steps if s.action == Action.CLAIM} == {
        tuple(f"dgx{i:03d}" for i in range(65, 97))
    }
    check_walk(old, new, steps)


def test_plan_prints_the_steps_and_json(inventories: InventoryFactory) -> None:
    old_dir, new_dir = lab_pair(inventories)
    proc = run_cli("plan", str(old_dir), str(new_dir))
    assert proc.returncode == 0, proc.stderr
    assert (
        "hosts.gpu04.owner: slurm -> kubernetes  [move; nodes moved from slurm to kubernetes]" in proc.stdout
    )
    assert "   2. [slurm] stop-placing (move): scontrol update nodename=gpu04 state=drain" in proc.stdout
    assert "overall: move:" in proc.stdout
    doc = json.loads(run_cli("plan", "--json", str(old_dir), str(new_dir)).stdout)
    assert doc["overall"]["update"] == "move"
    actions = [s["action"] for s in doc["steps"]]
    assert actions == [
        "lower-quotas", "stop-placing", "wait-empty", "apply", "apply", "release", "apply", "claim", "raise-quotas",
        "apply",
    ]  # fmt: skip
    # Last, Prometheus takes gpu04's target relabelled (owner kubernetes).
    assert doc["steps"][-1]["text"].startswith("playbooks/monitoring.yml")
    assert doc["steps"][7] == {**doc["steps"][7], "scheduler": "kubernetes", "hosts": ["gpu04"]}
    # The plan's own walk keeps the move's promises too.
    old, new = load_cluster(old_dir), load_cluster(new_dir)
    check_walk(old, new, make_plan(old, new).steps)
