"""Checks of the shared pools (cluster.shared_pools): what cannot work is refused before anything
is rendered. A pool lends bare-metal Slurm's nodes to Kubernetes, so it needs both; each host is
Slurm's at home and in one pool only, never a host that serves the others or one another power
provider drives; both sides' minimums fit in the pool with a node left to move. Kueue's names are
checked by the Kubernetes layer (gpucluster.k8s.pools), which knows the objects it makes."""

from __future__ import annotations

from gpucluster.checks.power import serving_hosts
from gpucluster.model.base import Owner
from gpucluster.model.pooled import ResolvedPool, resolved_pools
from gpucluster.resolve import Resolution


def check_pools(r: Resolution) -> None:
    pools = r.spec.shared_pools
    if not pools:
        return
    _check_sides(r)
    taken: dict[str, str] = {}
    names: dict[str, int] = {}
    for index, pool in enumerate(pools):
        if pool.name in names:
            r.fail(
                ["shared_pools", index, "name"],
                f"pool `{pool.name}` is already cluster.shared_pools[{names[pool.name]}]: give each pool its own name",
            )
        names.setdefault(pool.name, index)
        queues = pool.kubernetes.cluster_queues
        for place, queue in enumerate(queues):
            if queue in queues[:place]:
                r.fail(
                    ["shared_pools", index, "kubernetes", "cluster_queues", place],
                    f"ClusterQueue `{queue}` is named twice: its quota would grow twice for one node; "
                    "name it once",
                )
        for place, name in enumerate(pool.hosts):
            for host in r.hosts_of(name, ["shared_pools", index, "hosts", place]) or []:
                first = taken.setdefault(host, pool.name)
                if first != pool.name:
                    r.fail(
                        ["shared_pools", index, "hosts", place],
                        f"host `{host}` is already in pool `{first}`: a node is lent by one pool only; "
                        "take it out of one of them",
                    )
    serving = serving_hosts(r)
    for resolved in resolved_pools(r.cluster):
        _check_hosts(r, resolved, serving)
        _check_bounds(r, resolved)
        _check_gate(r, resolved)


def _check_sides(r: Resolution) -> None:
    """A pool needs Kubernetes to lend to and gpucluster's power programs on Slurm's side."""
    if r.spec.kubernetes is None:
        r.fail(
            ["shared_pools"],
            "a shared pool lends Slurm's nodes to Kubernetes: add the `kubernetes:` section, or "
            "remove the pools (every node then keeps its group's owner)",
        )
    power = r.spec.slurm.power_save
    for field in ("suspend_program", "resume_program"):
        if power is not None and getattr(power, field) is not None:
            r.fail(
                ["slurm", "power_save", field],
                "cluster.shared_pools moves nodes through gpucluster's power programs (Slurm powers "
                "a pool node down to lend it, up to take it back): remove the site's program here",
            )


def _check_hosts(r: Resolution, resolved: ResolvedPool, serving: dict[str, str]) -> None:
    cluster = r.cluster
    where: list[str | int] = ["shared_pools", resolved.index, "hosts"]
    types: dict[str, str] = {}
    groups = _groups_of(r)
    for host in resolved.hosts:
        node_type = cluster.node_type_of.get(host)
        if node_type is None:
            r.fail(
                where,
                f"host `{host}` has no node type: add its group to cluster.nodes with `owner: slurm`",
            )
            continue
        types.setdefault(node_type, host)
        if host in serving:
            r.fail(
                where,
                f"host `{host}` is {serving[host]}: it must stay Slurm's and on; take it out of the pool",
            )
        owner = cluster.owner_of.get(host)
        group = groups.get(host)
        if owner is not None and owner != Owner.SLURM:
            r.fail(
                where,
                f"host `{host}` has the fixed owner `{owner}` from cluster.nodes[{group}]: a pool node "
                "is Slurm's at home and lent by the pool; set `owner: slurm` on that group, or take "
                "the host out of the pool",
            )
        entry = r.spec.nodes[group] if group is not None else None
        if entry is not None and entry.power is not None and entry.power.saved:
            r.fail(
                where,
                f"host `{host}` is powered by its BMC or cloud (cluster.nodes[{group}].power): a pool "
                "node's power-down is its loan to Kubernetes; remove `power` there or take the host "
                "out of the pool",
            )
    for node_type, host in types.items():
        known = r.spec.node_types.get(node_type)
        if known is not None and known.gpus is None:
            r.fail(
                where,
                f"host `{host}` is of node type `{node_type}`, which has no GPUs: a pool lends GPU "
                "nodes (Kueue admits their GPUs); take its hosts out of the pool",
            )
    if len(types) > 1:
        listed = ", ".join(f"`{t}` ({h})" for t, h in sorted(types.items()))
        r.fail(
            where,
            f"the pool mixes node types {listed}: a pool lends interchangeable nodes on one Kueue "
            "flavor; make one pool per node type",
        )


def _groups_of(r: Resolution) -> dict[str, int]:
    """Host -> the first cluster.nodes entry naming it (resolve_nodes refuses a second)."""
    found: dict[str, int] = {}
    for index, entry in enumerate(r.spec.nodes):
        hosts = r.inv.members(entry.group) if entry.group in r.group_names else [entry.group]
        for host in hosts:
            found.setdefault(host, index)
    return found


def _check_bounds(r: Resolution, resolved: ResolvedPool) -> None:
    pool = resolved.pool
    size = len(resolved.hosts)
    if not size:
        return
    kept = pool.slurm_min_nodes + pool.kubernetes_min_nodes
    where: list[str | int] = ["shared_pools", resolved.index, "slurm_min_nodes"]
    if kept > size:
        r.fail(
            where,
            f"slurm_min_nodes {pool.slurm_min_nodes} + kubernetes_min_nodes {pool.kubernetes_min_nodes} "
            f"= {kept} exceed the pool's {size} hosts: lower them to {size - 1} together at most",
        )
    elif kept == size:
        r.fail(
            where,
            f"slurm_min_nodes {pool.slurm_min_nodes} + kubernetes_min_nodes {pool.kubernetes_min_nodes} "
            f"keep all {size} hosts of the pool: no node could ever move; lower one of them, or give "
            "the hosts fixed owners in cluster.nodes instead of a pool",
        )


def _check_gate(r: Resolution, resolved: ResolvedPool) -> None:
    level = resolved.pool.gate_level
    if level is not None and level != "none" and r.spec.gate is None:
        r.fail(
            ["shared_pools", resolved.index, "gate_level"],
            f"`{level}` is a burn-in of the return-to-service gate: add `cluster.gate`, or remove "
            "gate_level (a node then changes side without a burn-in)",
        )
