"""The shared pools, resolved: each pool's hosts (its hosts.yml names expanded, in name order) and
what a node passes when it changes side. Everything that treats pool nodes differently (the
checks, the balancer's settings, later the renderers and `show`) asks here."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.model.cluster import Cluster, sort_hosts
from gpucluster.model.pools import SharedPool
from gpucluster.pool.policy import PoolSettings


@dataclass(frozen=True)
class ResolvedPool:
    index: int  # in cluster.shared_pools
    pool: SharedPool
    hosts: tuple[str, ...]  # in name order, each once

    @property
    def movable(self) -> int:
        """Nodes that may change side: the pool less both sides' minimums."""
        return len(self.hosts) - self.pool.slurm_min_nodes - self.pool.kubernetes_min_nodes


def names_to_hosts(cluster: Cluster, names: list[str]) -> list[str]:
    """Hosts of hosts.yml groups or hosts (unknown names give none: the checks report them)."""
    inv = cluster.inventory
    found: set[str] = set()
    for name in names:
        if name in inv.groups:
            found.update(inv.members(name))
        elif name in inv.hostvars:
            found.add(name)
    return sort_hosts(found)


def resolved_pools(cluster: Cluster) -> list[ResolvedPool]:
    return [
        ResolvedPool(index, pool, tuple(names_to_hosts(cluster, pool.hosts)))
        for index, pool in enumerate(cluster.spec.shared_pools)
    ]


def pool_of(cluster: Cluster) -> dict[str, str]:
    """Host -> the name of its pool (the first that names it: the checks refuse a second)."""
    found: dict[str, str] = {}
    for resolved in resolved_pools(cluster):
        for host in resolved.hosts:
            found.setdefault(host, resolved.pool.name)
    return found


def move_gate_level(cluster: Cluster, pool: SharedPool) -> str:
    """The burn-in level a node of `pool` passes on changing side (`none` without a gate)."""
    if pool.gate_level is not None:
        return pool.gate_level
    gate = cluster.spec.gate
    return "none" if gate is None else gate.levels.move


def policy_settings(cluster: Cluster, resolved: ResolvedPool) -> PoolSettings:
    """What the balancer's policy decides with for one pool (its GPUs per node from the node type
    of its hosts, which the checks require to be one)."""
    pool = resolved.pool
    types = [cluster.node_type_of[h] for h in resolved.hosts if h in cluster.node_type_of]
    gpus = cluster.spec.node_types[types[0]].gpus if types else None
    return PoolSettings(
        gpus_per_node=gpus.count if gpus is not None else 0,
        slurm_min_nodes=pool.slurm_min_nodes,
        kubernetes_min_nodes=pool.kubernetes_min_nodes,
        lend_after_seconds=pool.lend_after_seconds,
        min_idle_seconds=pool.min_idle_seconds,
        min_lent_seconds=pool.min_lent_seconds,
        evict_pods=pool.evict_pods,
    )
