"""Checks of the partitions: every Slurm host in one, one default per Slurm cluster, unless the
inventory says the site does otherwise on purpose (cluster.slurm.no_default_partition,
several_default_partitions, hosts_in_no_partition: then a warning)."""

from __future__ import annotations

from gpucluster.errors import Problem
from gpucluster.hostlists import compress
from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster
from gpucluster.resolve import Resolution


def _defaults_by_owner(cluster: Cluster) -> dict[Owner, tuple[list[str], list[int]]]:
    """Per Slurm cluster (bare metal, Slurm on Kubernetes): its partitions' names and the indexes
    of those marked default."""
    partitions = cluster.spec.partitions
    by_owner: dict[Owner, tuple[list[str], list[int]]] = {}
    for index, part in enumerate(partitions):
        owners = {o for h in cluster.partitions.get(part.name, []) if (o := cluster.owner_of.get(h))}
        for owner in owners or {Owner.SLURM}:
            names, defaults = by_owner.setdefault(owner, ([], []))
            names.append(part.name)
            if part.default:
                defaults.append(index)
    return by_owner


def check_default_partition(r: Resolution) -> None:
    """Exactly one default partition per Slurm cluster (bare metal, and Slurm on Kubernetes):
    without one slurmctld logs `default partition not set` and refuses every job that names
    no partition; with two it keeps the last. Bare-metal Slurm may do either on purpose."""
    slurm = r.spec.slurm
    if not r.spec.partitions and Owner.SLURM in r.cluster.owner_of.values():
        r.fail(
            ["partitions"],
            "no partition: slurmctld stops without one (`No PartitionName information available!`); "
            "add one holding the Slurm nodes, e.g. `- {name: batch, nodes: [<group>], default: true}`",
        )
        return
    by_owner = _defaults_by_owner(r.cluster)
    for owner, (names, defaults) in by_owner.items():
        which = "" if len(by_owner) == 1 else f" of {owner}"
        bare_metal = owner == Owner.SLURM
        if not defaults and not (bare_metal and slurm.no_default_partition):
            on_purpose = (
                " (or set cluster.slurm.no_default_partition if jobs must name theirs)" if bare_metal else ""
            )
            r.fail(
                ["partitions"],
                f"no partition{which} is the default: jobs that name no partition would be refused "
                f"(slurmctld: `default partition not set`); mark one `default: true` "
                f"(candidates: {', '.join(names)}){on_purpose}",
            )
        if len(defaults) > 1 and not (bare_metal and slurm.several_default_partitions):
            marked = ", ".join(r.spec.partitions[i].name for i in defaults)
            on_purpose = (
                " (or set cluster.slurm.several_default_partitions: the last wins)" if bare_metal else ""
            )
            for index in defaults[1:]:
                r.fail(
                    ["partitions", index, "default"],
                    f"{len(defaults)} partitions{which} are the default ({marked}): Slurm keeps only one; "
                    f"leave `default: true` on one of them{on_purpose}",
                )
    bare = by_owner.get(Owner.SLURM, ([], []))[1]
    if slurm.no_default_partition and bare:
        r.fail(
            ["slurm", "no_default_partition"],
            f"partition `{r.spec.partitions[bare[0]].name}` is the default: remove one of the two",
        )
    if slurm.several_default_partitions and len(bare) < 2:
        r.fail(
            ["slurm", "several_default_partitions"], "fewer than two partitions are the default: remove it"
        )


def check_partitioned(r: Resolution) -> None:
    """Every host a Slurm scheduler owns is in some partition (Kubernetes-owned hosts are in none;
    Kueue and KAI queues reach them), unless cluster.slurm.hosts_in_no_partition names it."""
    cluster = r.cluster
    in_partition = {h for hosts in cluster.partitions.values() for h in hosts}
    allowed: set[str] = set()
    for index, name in enumerate(r.spec.slurm.hosts_in_no_partition):
        parts: list[str | int] = ["slurm", "hosts_in_no_partition", index]
        hosts = r.hosts_of(name, parts) or []
        placed = [h for h in hosts if h in in_partition]
        if placed:
            r.fail(parts, f"{compress(placed)} are in a partition: remove `{name}` here")
        allowed.update(hosts)
    orphans = [
        h
        for h in cluster.node_type_of
        if h not in in_partition and h not in allowed and cluster.owner_of.get(h) != Owner.KUBERNETES
    ]
    if orphans:
        r.fail(
            ["partitions"],
            f"host(s) in no partition: {compress(orphans)} (put them in one, or name them in "
            "cluster.slurm.hosts_in_no_partition if no job is to run there)",
        )


def partition_warnings(cluster: Cluster) -> list[Problem]:
    """What the settings above allow, said on every validation."""
    slurm = cluster.spec.slurm
    file = cluster.inventory.cluster_file
    warnings = []
    if slurm.no_default_partition:
        warnings.append(
            file.problem(
                "cluster.slurm.no_default_partition",
                "no partition is the default: a job that names no partition is refused "
                "(slurmctld logs `default partition not set`)",
            )
        )
    if slurm.several_default_partitions:
        marked = [p.name for p in cluster.spec.partitions if p.default]
        warnings.append(
            file.problem(
                "cluster.slurm.several_default_partitions",
                f"{len(marked)} partitions say Default=YES ({', '.join(marked)}): slurmctld keeps the last, "
                f"`{marked[-1]}`, as the default",
            )
        )
    if slurm.hosts_in_no_partition:
        in_partition = {h for hosts in cluster.partitions.values() for h in hosts}
        left = [h for h in cluster.node_type_of if h not in in_partition]
        if left:
            warnings.append(
                file.problem(
                    "cluster.slurm.hosts_in_no_partition",
                    f"{compress(left)} are Slurm nodes in no partition: no job runs there",
                )
            )
    return warnings
