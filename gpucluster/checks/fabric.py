"""Checks of the fabric: one switch tree per Slurm cluster unless split on purpose, block sizes Slurm accepts."""

from __future__ import annotations

from gpucluster.errors import Problem
from gpucluster.hostlists import compress
from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster, sort_hosts
from gpucluster.resolve import Resolution

SPLIT_TREE_FIX = (
    "; put the roots under one switch (the one that joins them), or set `fabric.separate_trees: true` "
    "if they are apart on purpose"
)
# Slurm's schedulers that read the switch tree: a Kubernetes node is in neither.
SLURM_OWNERS = (Owner.SLURM, Owner.SLURM_ON_KUBERNETES)


def split_tree_messages(cluster: Cluster) -> list[str]:
    """Per Slurm cluster (bare metal, Slurm on Kubernetes) whose nodes hang under more than one
    root switch: which nodes the widest root leaves out. slurmctld then warns `TOPOLOGY: no switch
    can reach all nodes` and never places a job across the roots."""
    messages = []
    for owner in SLURM_OWNERS:
        under: dict[str, list[str]] = {}
        for host, path in cluster.switch_path.items():
            if cluster.owner_of.get(host, Owner.SLURM) == owner:
                under.setdefault(path[0], []).append(host)
        if len(under) < 2:
            continue
        widest = max(sorted(under), key=lambda root: len(under[root]))
        left_out = sort_hosts(h for root, hosts in under.items() if root != widest for h in hosts)
        others = ", ".join(f"`{root}`" for root in sorted(under) if root != widest)
        which = "Slurm's nodes" if owner == Owner.SLURM else f"the nodes of {owner}"
        messages.append(
            f"{which} hang under {len(under)} root switches, so no switch reaches them all (slurmctld: "
            f"`no switch can reach all nodes`; no job spans two roots): root `{widest}` leaves out "
            f"{compress(left_out)} (under {others})"
        )
    return messages


def core_warnings(cluster: Cluster) -> list[Problem]:
    """What the core finds valid but worth a word (printed as warnings, exit code 0)."""
    warnings = []
    fabric = cluster.spec.fabric
    file = cluster.inventory.cluster_file
    if fabric.separate_trees:
        for message in split_tree_messages(cluster):
            warnings.append(
                file.problem("cluster.fabric.separate_trees", message + " (separate on purpose, as set here)")
            )
    if fabric.placeholder_nodes:
        warnings.append(
            file.problem(
                "cluster.fabric.placeholder_nodes",
                f"topology.conf names {compress(list(fabric.placeholder_nodes))}, which are no Slurm node: "
                "slurmctld logs `Invalid hostnames in switch configuration` and ignores them",
            )
        )
    if fabric.tree and fabric.outside_tree:
        left = sort_hosts(h for h in cluster.node_type_of if h not in cluster.switch_path)
        if left:
            warnings.append(
                file.problem(
                    "cluster.fabric.outside_tree",
                    f"{compress(left)} are under no leaf switch: no job that spans switches runs there",
                )
            )
    return warnings


def check_split_tree(r: Resolution) -> None:
    """One root switch per Slurm cluster, unless the inventory says the trees are apart on purpose."""
    if not r.spec.fabric.separate_trees:
        for message in split_tree_messages(r.cluster):
            r.fail(["fabric", "tree"], message + SPLIT_TREE_FIX)


def check_topology_default(r: Resolution) -> None:
    """The default topology, and block sizes, name what the fabric defines."""
    fabric = r.spec.fabric
    if fabric.block_sizes and not fabric.blocks:
        r.fail(["fabric", "block_sizes"], "block_sizes given but no blocks are defined")
    if fabric.default == "block" and not fabric.blocks:
        r.fail(["fabric", "default"], "default topology is `block` but no blocks are defined")
    if fabric.default == "tree" and not fabric.tree:
        r.fail(["fabric", "default"], "default topology is `tree` but no switch tree is defined")


def check_block_sizes(r: Resolution) -> None:
    """Block sizes Slurm accepts: the base no larger than the smallest block, each next one the one
    before times a power of two."""
    fabric = r.spec.fabric
    cluster = r.cluster
    sizes = fabric.block_sizes
    if sizes and cluster.blocks:
        smallest = min(len(h) for h in cluster.blocks.values())
        if sizes[0] > smallest:
            r.fail(
                ["fabric", "block_sizes", 0],
                f"base block size {sizes[0]} exceeds the smallest block ({smallest} nodes)",
            )
        for i in range(1, len(sizes)):
            ratio, rest = divmod(sizes[i], sizes[i - 1])
            if rest or ratio < 2 or ratio & (ratio - 1):
                r.fail(
                    ["fabric", "block_sizes", i],
                    f"{sizes[i]} is not a power-of-two multiple of {sizes[i - 1]}",
                )
