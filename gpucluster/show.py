"""Human-readable summary tables of a cluster (`gpucluster show`)."""

from __future__ import annotations

from typing import Any

from gpucluster.cluster import Cluster
from gpucluster.console import Tree, table
from gpucluster.hostlists import compress
from gpucluster.layers import layer_summaries, layer_tables
from gpucluster.modelbase import Owner


def _gpus(cluster: Cluster, hosts: list[str]) -> int:
    return sum(g.count for h in hosts if (g := cluster.node_type(h).gpus))


def show(cluster: Cluster) -> str:
    """The text `gpucluster show` prints."""
    spec = cluster.spec
    parts = [
        f"{spec.name}  Slurm {spec.slurm.version}  controllers: {', '.join(spec.slurm.controller)}"
        f"  accounting: {spec.slurm.accounting.host if spec.slurm.accounting else 'none'}"
    ]
    types = []
    for name, hosts in sorted(cluster.hosts_by_type.items()):
        t = spec.node_types[name]
        gpus = f"{t.gpus.count} x {t.gpus.model}" if t.gpus else "-"
        types.append([name, str(len(hosts)), compress(hosts), str(t.cpus), str(t.memory_mb), gpus])
    parts.append(table("Node types", ("type", "nodes", "hosts", "CPUs", "memory MiB", "GPUs/node"), types))
    partitions = []
    for p in spec.partitions:
        hosts = cluster.partitions.get(p.name, [])
        partitions.append(
            [
                p.name,
                "yes" if p.default else "",
                str(len(hosts)),
                str(_gpus(cluster, hosts)),
                compress(hosts),
                p.max_time,
            ]
        )
    columns = ("partition", "default", "nodes", "GPUs", "hosts", "max time")
    parts.append(table("Partitions", columns, partitions))
    if cluster.switches:
        by_name = {s.name: s for s in cluster.switches}
        children = {c for s in cluster.switches for c in s.switches}
        fabric = Tree("Fabric tree")

        def add(node: Tree, name: str) -> None:
            switch = by_name[name]
            branch = node.add(
                f"{name}"
                + (f"  ({len(switch.nodes)} nodes: {compress(switch.nodes)})" if switch.nodes else "")
            )
            for child in switch.switches:
                add(branch, child)

        for root in sorted(set(by_name) - children):
            add(fabric, root)
        parts.append(fabric.render())
    if cluster.blocks:
        blocks = [
            [name, str(len(hosts)), str(_gpus(cluster, hosts)), compress(hosts)]
            for name, hosts in sorted(cluster.blocks.items())
        ]
        parts.append(table("NVLink blocks", ("block", "nodes", "GPUs", "hosts"), blocks))
    parts.append(fleet_table(cluster))
    parts += layer_tables(cluster)
    if spec.tenants:
        parts.append(tenant_table(cluster))
    if spec.users:
        parts.append(user_table(cluster))
    return "\n".join(parts) + "\n"


def fleet(cluster: Cluster) -> dict[str, Any]:
    """Who owns what: per owner its nodes, GPUs, partitions or queues; per tenant its numbers."""
    owners = []
    for owner in cluster.owners:
        view = cluster.owned_by(owner)
        owners.append(
            {
                "owner": owner.value,
                "nodes": len(view.hosts),
                "hosts": compress(view.hosts),
                "gpus": view.total_gpus,
                "partitions": sorted(view.partitions) if owner != Owner.KUBERNETES else [],
                "queues": sorted(t.name for t in cluster.spec.tenants if view.quota(t.name).effective_limit),
            }
        )
    tenants = {
        tenant.name: {
            owner.value: {"quota": gpus.quota, "limit": gpus.effective_limit}
            for owner, gpus in sorted(cluster.tenant_gpus.get(tenant.name, {}).items())
        }
        for tenant in cluster.spec.tenants
    }
    return {
        "cluster": cluster.name,
        "gpus": cluster.total_gpus,
        "owners": owners,
        "tenants": tenants,
        **layer_summaries(cluster),
    }


def fleet_table(cluster: Cluster) -> str:
    rows = [
        [
            row["owner"],
            str(row["nodes"]),
            str(row["gpus"]),
            row["hosts"],
            ", ".join(row["partitions"]) or "-",
            ", ".join(row["queues"]) or "-",
        ]
        for row in fleet(cluster)["owners"]
    ]
    return table(
        f"Fleet: who schedules each node ({cluster.total_gpus} GPUs)",
        ("owner", "nodes", "GPUs", "hosts", "partitions", "tenants with GPUs there"),
        rows,
    )


def tenant_table(cluster: Cluster) -> str:
    owners = cluster.owners
    rows = []
    for tenant in cluster.spec.tenants:
        numbers = cluster.tenant_gpus.get(tenant.name, {})
        cells = [f"{g.quota} / {g.effective_limit}" if (g := numbers.get(o)) else "-" for o in owners]
        rows.append(
            [
                tenant.name,
                tenant.parent or "",
                str(tenant.fairshare),
                *cells,
                ", ".join(tenant.users),
                ", ".join(tenant.qos),
            ]
        )
    return table(
        "Tenants: GPU quota / limit per scheduler",
        ("tenant", "parent", "fairshare", *(o.value for o in owners), "users", "QOS"),
        rows,
    )


def user_table(cluster: Cluster) -> str:
    spec = cluster.spec
    gids = {g.name: g.gid for g in spec.groups} | {u.name: u.uid for u in spec.users if u.group is None}
    tenants_of: dict[str, list[str]] = {}
    for tenant in spec.tenants:
        for name in tenant.users:
            tenants_of.setdefault(name, []).append(tenant.name)
    rows = []
    for user in spec.users:
        tenants = tenants_of.get(user.name, [])
        gid = gids.get(user.primary_group)
        rows.append(
            [
                user.name,
                str(user.uid),
                f"{user.primary_group} ({gid})",
                ", ".join(user.groups) or "-",
                ", ".join(tenants) or "-",
                str(len(user.ssh_authorized_keys)),
            ]
        )
    return table(
        "Users: one uid and gid on every Slurm host",
        ("user", "uid", "group (gid)", "groups", "tenants", "SSH keys"),
        rows,
    )
