"""Checks of the partitions: every Slurm host in one, one default per Slurm cluster."""

from __future__ import annotations

from gpucluster.hostlists import compress
from gpucluster.model.base import Owner
from gpucluster.resolve import Resolution


def check_default_partition(r: Resolution) -> None:
    """Exactly one default partition per Slurm cluster (bare metal, and Slurm on Kubernetes):
    without one slurmctld logs `default partition not set` and refuses every job that names
    no partition; with two it keeps the last."""
    by_owner: dict[Owner, list[int]] = {}
    for index, part in enumerate(r.spec.partitions):
        owners = {o for h in r.cluster.partitions.get(part.name, []) if (o := r.cluster.owner_of.get(h))}
        for owner in owners or {Owner.SLURM}:
            by_owner.setdefault(owner, []).append(index)
    for owner, indexes in by_owner.items():
        names = [r.spec.partitions[i].name for i in indexes]
        defaults = [i for i in indexes if r.spec.partitions[i].default]
        which = "" if len(by_owner) == 1 else f" of {owner}"
        if not defaults:
            r.fail(
                ["partitions"],
                f"no partition{which} is the default: jobs that name no partition would be refused "
                f"(slurmctld: `default partition not set`); mark one `default: true` "
                f"(candidates: {', '.join(names)})",
            )
        for index in defaults[1:]:
            marked = ", ".join(r.spec.partitions[i].name for i in defaults)
            r.fail(
                ["partitions", index, "default"],
                f"{len(defaults)} partitions{which} are the default ({marked}): Slurm keeps only one; "
                "leave `default: true` on one of them",
            )


def check_partitioned(r: Resolution) -> None:
    """Every host a Slurm scheduler owns is in some partition (Kubernetes-owned hosts are in none;
    Kueue and KAI queues reach them)."""
    cluster = r.cluster
    in_partition = {h for hosts in cluster.partitions.values() for h in hosts}
    orphans = [
        h
        for h in cluster.node_type_of
        if h not in in_partition and cluster.owner_of.get(h) != Owner.KUBERNETES
    ]
    if orphans:
        r.fail(["partitions"], f"host(s) in no partition: {compress(orphans)}")
