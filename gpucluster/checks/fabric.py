"""Checks of the fabric: one switch tree per Slurm cluster unless split on purpose, block sizes Slurm
accepts, the topologies the release can say and each partition's jobs placed by one that holds its
nodes, NVLink domains the GPUs can form."""

from __future__ import annotations

from gpucluster.errors import Problem
from gpucluster.hostlists import compress
from gpucluster.keyhints import closest
from gpucluster.model.base import Owner
from gpucluster.model.cluster import (
    Cluster,
    default_topology,
    sort_hosts,
    topology_hosts,
    topology_names,
)
from gpucluster.model.nodesoftware import NVL72_GPU_MODEL, NVL72_GPUS_PER_TRAY, NVL72_TRAYS
from gpucluster.model.spec import FLAT_TOPOLOGY, RESERVED_TOPOLOGIES, TREE_TOPOLOGY, NodeType
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
    one = one_topology_note(cluster)
    if one:
        warnings.append(file.problem("cluster.fabric.default", one))
    return warnings


def one_topology_note(cluster: Cluster) -> str | None:
    """Before 25.05 Slurm reads one topology plugin: with a switch tree and blocks, which one Slurm
    gets and what to set for the other (said, never dropped without a word)."""
    slurm = cluster.owned_by(Owner.SLURM)
    if cluster.release.topology_yaml or not (slurm.switches and slurm.blocks):
        return None
    chosen = default_topology(slurm)
    given, left = (
        ("its NVLink blocks", "switch tree (fabric.tree)")
        if chosen != TREE_TOPOLOGY
        else (
            "the switch tree",
            "NVLink blocks (fabric.blocks)",
        )
    )
    other = "tree" if chosen != TREE_TOPOLOGY else "block"
    return (
        f"Slurm {cluster.release.name} reads one topology (topology.conf): it gets {given}, and the {left} "
        f"is left out of Slurm (Kubernetes, monitoring and IMEX still use it); set fabric.default: {other} to "
        "give Slurm that one instead, or target Slurm 25.05 or later, where both are topologies of "
        "topology.yaml and each partition names its own (`topology`)"
    )


def check_split_tree(r: Resolution) -> None:
    """One root switch per Slurm cluster, unless the inventory says the trees are apart on purpose."""
    if not r.spec.fabric.separate_trees:
        for message in split_tree_messages(r.cluster):
            r.fail(["fabric", "tree"], message + SPLIT_TREE_FIX)


DEFAULT_WORDS = ("auto", "tree", "block", FLAT_TOPOLOGY)


def check_topology_default(r: Resolution) -> None:
    """The default topology, and block sizes, name what the fabric defines."""
    fabric = r.spec.fabric
    release = r.spec.slurm.release
    if fabric.block_sizes and not fabric.blocks:
        r.fail(["fabric", "block_sizes"], "block_sizes given but no blocks are defined")
    known = [*DEFAULT_WORDS, *fabric.block_sets]
    if fabric.default not in known:
        guess = closest(fabric.default, known)
        hint = f"; did you mean `{guess}`?" if guess else ""
        r.fail(
            ["fabric", "default"],
            f"`{fabric.default}` is no topology here: auto, tree, block, flat or a name of fabric.block_sets{hint}",
        )
    elif fabric.default == "block" and not fabric.blocks:
        r.fail(["fabric", "default"], "default topology is `block` but no blocks are defined")
    elif fabric.default == "block" and fabric.block_sets:
        r.fail(
            ["fabric", "default"],
            f"with block_sets, name the one set jobs go to by default ({', '.join(fabric.block_sets)})",
        )
    elif fabric.default == "tree" and not fabric.tree:
        r.fail(["fabric", "default"], "default topology is `tree` but no switch tree is defined")
    elif fabric.default == FLAT_TOPOLOGY and not release.topology_yaml:
        r.fail(
            ["fabric", "default"],
            f"Slurm {release.name} has no `flat` topology to name (topology.yaml, 25.05+): leave the fabric "
            "out of Slurm by leaving fabric out, or target 25.05 or later",
        )


def check_block_sets(r: Resolution) -> None:
    """Block sets: each a block topology of topology.yaml (25.05+), every block in one of them."""
    fabric = r.spec.fabric
    if not fabric.block_sets:
        return
    release = r.spec.slurm.release
    if not release.topology_yaml:
        r.fail(
            ["fabric", "block_sets"],
            f"Slurm {release.name} reads one topology plugin (topology.conf), so one set of blocks with one "
            "BlockSizes: block sets need Slurm 25.05 or later (topology.yaml); give every block the "
            "sizes of fabric.block_sizes instead",
        )
    if fabric.block_sizes:
        r.fail(
            ["fabric", "block_sizes"], "with block_sets, each set gives its own block_sizes: move them there"
        )
    seen: dict[str, str] = {}
    for name, block_set in fabric.block_sets.items():
        if name in RESERVED_TOPOLOGIES:
            r.fail(["fabric", "block_sets", name], f"`{name}` names another topology: choose another name")
        for n, block in enumerate(block_set.blocks):
            path: list[str | int] = ["fabric", "block_sets", name, "blocks", n]
            if block not in fabric.blocks:
                r.fail(path, f"`{block}` is no block of fabric.blocks")
            elif block in seen:
                r.fail(path, f"block `{block}` is already in the set `{seen[block]}`")
            else:
                seen[block] = name
    left = [block for block in fabric.blocks if block not in seen]
    if left:
        r.fail(
            ["fabric", "block_sets"],
            f"block(s) in no set: {', '.join(left)} (with block_sets, each block is in one)",
        )


def check_block_sizes(r: Resolution) -> None:
    """Block sizes Slurm accepts, per block topology: the base no larger than the smallest block
    Slurm gets (its own hosts of it), each next one the one before times a power of two."""
    fabric = r.spec.fabric
    slurm = r.cluster.owned_by(Owner.SLURM)
    blocks = slurm.blocks if slurm.blocks else r.cluster.blocks
    if fabric.block_sets:
        sets = [
            (["fabric", "block_sets", name, "block_sizes"], s.block_sizes, s.blocks)
            for name, s in fabric.block_sets.items()
        ]
    else:
        sets = [(["fabric", "block_sizes"], fabric.block_sizes, list(fabric.blocks))]
    for path, sizes, names in sets:
        members = [len(blocks[name]) for name in names if blocks.get(name)]
        if sizes and members and sizes[0] > min(members):
            r.fail(
                [*path, 0], f"base block size {sizes[0]} exceeds the smallest block ({min(members)} nodes)"
            )
        for i in range(1, len(sizes)):
            ratio, rest = divmod(sizes[i], sizes[i - 1])
            if rest or ratio < 2 or ratio & (ratio - 1):
                r.fail([*path, i], f"{sizes[i]} is not a power-of-two multiple of {sizes[i - 1]}")


def check_partition_topologies(r: Resolution) -> None:
    """Each partition names a topology the fabric defines, where the release lets it choose, and the
    one its jobs are placed by holds every node of it: a node in no block of a block topology gets
    no job of that partition (slurmctld: `blocks lack access to N nodes`)."""
    release = r.spec.slurm.release
    names = topology_names(r.cluster)
    slurm = r.cluster.owned_by(Owner.SLURM)
    default = default_topology(slurm)
    for index, partition in enumerate(r.spec.partitions):
        path: list[str | int] = ["partitions", index, "topology"]
        if partition.topology is not None and not release.topology_yaml:
            r.fail(
                path,
                f"Slurm {release.name} reads one topology plugin (topology.conf): a partition cannot choose "
                "one (Topology= is 25.05's); remove it, or target Slurm 25.05 or later",
            )
            continue
        if partition.topology is not None and partition.topology not in names:
            guess = closest(partition.topology, names)
            r.fail(
                path,
                f"`{partition.topology}` is no topology of this fabric (it has {', '.join(names)})"
                + (f"; did you mean `{guess}`?" if guess else ""),
            )
            continue
        chosen = partition.topology or default
        hosts = slurm.partitions.get(partition.name, [])
        # The switch tree holds every host but those fabric.outside_tree names (warned of apart).
        covered = topology_hosts(slurm, chosen) if chosen and chosen != TREE_TOPOLOGY else None
        missing = [h for h in hosts if covered is not None and h not in covered]
        if missing:
            r.fail(
                path if partition.topology else ["partitions", index], _uncovered(r, chosen or "", missing)
            )


def _uncovered(r: Resolution, topology: str, missing: list[str]) -> str:
    release = r.spec.slurm.release
    where = f"{compress(missing)} are in no block of `{topology}`, the topology this partition's jobs are placed by"
    if not release.topology_yaml:
        return (
            f"{where}: Slurm {release.name} reads one topology plugin (topology/block here), and a node "
            "in no block gets no job (slurmctld: `blocks lack access to` them); put them in blocks, set "
            "fabric.default: tree (the switch tree for every job), or target Slurm 25.05 or later, where "
            "each partition names its topology"
        )
    return (
        f"{where}: give the partition `topology: {TREE_TOPOLOGY}` (or `{FLAT_TOPOLOGY}`), set fabric.default "
        "to one that holds them, or put them in blocks"
    )


def _nvl72_tray(node_type: NodeType) -> bool:
    """A compute tray of an NVL72 rack: its node software says so, or its GPUs are Grace-Blackwell."""
    software = node_type.software
    model = node_type.gpus.model if node_type.gpus else None
    return (software is not None and software.nvlink == "nvl72") or bool(
        model and NVL72_GPU_MODEL.match(model)
    )


def check_nvlink_domains(r: Resolution) -> None:
    """NVLink domains the GPUs can form: an NVL72 compute tray has 4 GPUs (a Grace-Blackwell node at
    most 4: NVL2 has 2), and one NVL72 domain (a block) is at most 18 trays, 72 GPUs."""
    cluster = r.cluster
    for name, node_type in r.spec.node_types.items():
        gpus = node_type.gpus
        if gpus is None or not _nvl72_tray(node_type):
            continue
        nvl72 = node_type.software is not None and node_type.software.nvlink == "nvl72"
        if gpus.count > NVL72_GPUS_PER_TRAY or (nvl72 and gpus.count != NVL72_GPUS_PER_TRAY):
            r.fail(
                ["node_types", name, "gpus", "count"],
                f"an NVL72 compute tray has {NVL72_GPUS_PER_TRAY} GPUs (NVL72: {NVL72_TRAYS} trays x "
                f"{NVL72_GPUS_PER_TRAY} GPUs), not {gpus.count}: each tray is one node of {NVL72_GPUS_PER_TRAY}",
            )
    for block, hosts in cluster.blocks.items():
        trays = [h for h in hosts if _nvl72_tray(cluster.node_type(h))]
        if len(trays) > NVL72_TRAYS:
            r.fail(
                ["fabric", "blocks", block],
                f"{len(trays)} NVL72 trays ({cluster.gpus_of(trays)} GPUs) in one block: an NVL72 NVLink domain "
                f"is at most {NVL72_TRAYS} trays of {NVL72_GPUS_PER_TRAY} GPUs ({NVL72_TRAYS * NVL72_GPUS_PER_TRAY} "
                "GPUs, one rack): one block per rack",
            )
