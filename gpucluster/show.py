"""Human-readable summary tables of a cluster (`gpucluster show`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from gpucluster.cluster import Cluster
from gpucluster.hostlists import compress


def _gpus(cluster: Cluster, hosts: list[str]) -> int:
    return sum(g.count for h in hosts if (g := cluster.node_type(h).gpus))


def show(cluster: Cluster, console: Console) -> None:
    spec = cluster.spec
    console.print(
        f"[bold]{spec.name}[/bold]  Slurm {spec.slurm.version}  controllers: {', '.join(spec.slurm.controller)}"
        f"  accounting: {spec.slurm.accounting.host if spec.slurm.accounting else 'none'}"
    )
    types = Table(title="Node types")
    for col in ("type", "nodes", "hosts", "CPUs", "memory MiB", "GPUs/node"):
        types.add_column(col)
    for name, hosts in sorted(cluster.hosts_by_type.items()):
        t = spec.node_types[name]
        gpus = f"{t.gpus.count} x {t.gpus.model}" if t.gpus else "-"
        types.add_row(name, str(len(hosts)), compress(hosts), str(t.cpus), str(t.memory_mb), gpus)
    console.print(types)
    parts = Table(title="Partitions")
    for col in ("partition", "default", "nodes", "GPUs", "hosts", "max time"):
        parts.add_column(col)
    for p in spec.partitions:
        hosts = cluster.partitions[p.name]
        parts.add_row(
            p.name,
            "yes" if p.default else "",
            str(len(hosts)),
            str(_gpus(cluster, hosts)),
            compress(hosts),
            p.max_time,
        )
    console.print(parts)
    if cluster.switches:
        by_name = {s.name: s for s in cluster.switches}
        children = {c for s in cluster.switches for c in s.switches}
        fabric = Tree("[bold]Fabric tree[/bold]")

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
        console.print(fabric)
    if cluster.blocks:
        blocks = Table(title="NVLink blocks")
        for col in ("block", "nodes", "GPUs", "hosts"):
            blocks.add_column(col)
        for name, hosts in sorted(cluster.blocks.items()):
            blocks.add_row(name, str(len(hosts)), str(_gpus(cluster, hosts)), compress(hosts))
        console.print(blocks)
    if spec.tenants:
        tenants = Table(title=f"Tenants ({cluster.total_gpus} GPUs in the cluster)")
        for col in ("tenant", "parent", "fairshare", "GPU quota", "GPU limit", "users", "QOS"):
            tenants.add_column(col)
        for tenant in spec.tenants:
            tenants.add_row(
                tenant.name,
                tenant.parent or "",
                str(tenant.fairshare),
                str(tenant.gpu_quota),
                str(tenant.effective_limit),
                ", ".join(tenant.users),
                ", ".join(tenant.qos),
            )
        console.print(tenants)
