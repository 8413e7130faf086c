"""The whole resolved model as JSON values: what an inventory resolves to, as the schedulers receive it.

Inventory names are replaced by the hosts they stand for: node groups by `hosts` (each host's node
type and owner), partitions' and filesystems' members by host lists, the switch tree by `switches`
(each with its child switches and hosts), blocks by their hosts. Tenants appear once per scheduler
with the numbers that scheduler gets (`tenants.<name>.<scheduler>`). Named lists (partitions, QOS,
groups, users, filesystems) become mappings by name. `gpucluster show --json` prints it, and
`gpucluster plan` compares two of them, so that a change made in hosts.yml is seen as what it does.
"""

from __future__ import annotations

from typing import Any

from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster, block_topologies, default_topology
from gpucluster.model.pooled import resolved_pools
from gpucluster.model.spec import FLAT_TOPOLOGY, TREE_TOPOLOGY
from gpucluster.slurm.accounts import fair_shares

# Lists of the spec compared by name, and the key of each entry's name.
NAMED = ("partitions", "qos", "groups", "users", "storage", "shared_pools")


def _by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["name"]: {k: v for k, v in item.items() if k != "name"} for item in items}


def tenant_views(cluster: Cluster) -> dict[str, dict[str, Any]]:
    """Per tenant, per scheduler that has hosts, what it receives: Slurm's account (every tenant, its
    shares, GPU quota and limit, users and QOS), Kubernetes' queues (tenants with Kubernetes GPUs:
    namespace, cohort parent, weight, quota, limit)."""
    views: dict[str, dict[str, Any]] = {}
    owners = cluster.owners
    domains = {owner: cluster.owned_by(owner) for owner in owners}
    for tenant in cluster.spec.tenants:
        entry: dict[str, Any] = {}
        for owner, domain in domains.items():
            numbers = domain.quota(tenant.name)
            if owner == Owner.KUBERNETES:
                if owner not in cluster.tenant_gpus.get(tenant.name, {}):
                    continue
                entry[owner.value] = {
                    "namespace": tenant.namespace or tenant.name,
                    "parent": tenant.parent,
                    "weight": tenant.fairshare,
                    "quota": numbers.quota,
                    "limit": numbers.effective_limit,
                }
                continue
            entry[owner.value] = {
                "parent": tenant.parent,
                "shares": fair_shares(domain, tenant),
                "quota": numbers.quota,
                "limit": numbers.effective_limit,
                "users": sorted(tenant.users),
                "qos": sorted(tenant.qos),
                "default_qos": tenant.default_qos,
            }
        views[tenant.name] = entry
    return views


def slurm_topologies(cluster: Cluster) -> dict[str, Any]:
    """The topologies bare-metal Slurm gets, as it gets them: each with its blocks' sizes (given, or
    worked out from its smallest block) and whether jobs of partitions naming none go by it. A
    change of any (a node moved makes a smaller smallest block) is a change of the plan."""
    from gpucluster.slurm.render import block_sizes, flat_used

    slurm = cluster.owned_by(Owner.SLURM)
    default = default_topology(slurm)
    found: dict[str, Any] = {
        name: {"kind": "block", "block_sizes": block_sizes(slurm, name), "default": name == default}
        for name in block_topologies(slurm)
    }
    if slurm.switches:
        found[TREE_TOPOLOGY] = {"kind": "tree", "default": default == TREE_TOPOLOGY}
    if flat_used(slurm):
        found[FLAT_TOPOLOGY] = {"kind": "flat", "default": default == FLAT_TOPOLOGY}
    return found


def resolved_view(cluster: Cluster) -> dict[str, Any]:
    spec = cluster.spec
    data = spec.model_dump(mode="json", exclude={"nodes", "tenants"})
    for key in NAMED:
        data[key] = _by_name(data[key])
    for name, partition in data["partitions"].items():
        partition["nodes"] = list(cluster.partitions.get(name, []))
    for name, fs in data["storage"].items():
        fs["hosts"] = list(cluster.storage_hosts.get(name, []))
    for resolved in resolved_pools(cluster):  # as hosts: a group renamed is no change
        data["shared_pools"][resolved.pool.name]["hosts"] = list(resolved.hosts)
    fabric = data["fabric"]
    del fabric["tree"]  # as `switches`
    fabric["blocks"] = {name: list(hosts) for name, hosts in sorted(cluster.blocks.items())}
    fabric["topologies"] = slurm_topologies(cluster)
    return {
        "cluster": data,
        "hosts": {
            host: {
                "type": cluster.node_type_of[host],
                "owner": owner.value if (owner := cluster.owner_of.get(host)) else None,
            }
            for host in cluster.hosts
        },
        "switches": {
            s.name: {"switches": list(s.switches), "nodes": list(s.nodes)} for s in cluster.switches
        },
        "tenants": tenant_views(cluster),
    }
