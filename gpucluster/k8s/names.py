"""Names shared by the Kubernetes renderers and checks: label keys, namespaces, topology levels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the cluster module imports our checks; keep this import type-only
    from gpucluster.model.cluster import Cluster

LABEL_PREFIX = "gpucluster.io"
NODE_TYPE_LABEL = f"{LABEL_PREFIX}/node-type"
NODESET_LABEL = f"{LABEL_PREFIX}/slurm-nodeset"
BLOCK_LABEL = f"{LABEL_PREFIX}/nvlink-block"
HOSTNAME_LABEL = "kubernetes.io/hostname"
SLINKY_TOPOLOGY_ANNOTATION = "topology.slinky.slurm.net/spec"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT_KEY = "nvidia.com/gpu"
# The one scheduler of a Kubernetes node (`kubernetes` or `slurm-on-kubernetes`): a label on every
# node, and a taint of the same key on Slurm-on-Kubernetes nodes that only NodeSet pods and the
# node daemons tolerate.
OWNER_LABEL = f"{LABEL_PREFIX}/owner"
OWNER_TAINT_KEY = OWNER_LABEL
# NoExecute rather than NoSchedule. NoSchedule only steers the scheduler: a pod already running
# when a node is handed over to Slurm on Kubernetes (a drain that left something behind, another
# add-on's DaemonSet) keeps running next to slurmd, and the kubelet still admits a pod bound with
# spec.nodeName. NoExecute closes both: the taint manager evicts what does not tolerate it and the
# kubelet refuses such pods, so at every moment the node runs only NodeSet pods and the node daemons
# that tolerate it (GPU Operator, NFD worker, DRA driver, Network Operator). That eviction ignores
# PodDisruptionBudgets, which is why the taint goes on as the last step of a hand-over, after the
# drain (tenant pods are gone by then). Slinky's documentation also taints its nodes NoExecute.
OWNER_TAINT_EFFECT = "NoExecute"
# KAI's node-pool label (`global.nodePoolLabelKey`; the operator's default since v0.10, set
# explicitly in the chart values). Its default SchedulingShard serves the nodes WITHOUT the label,
# so a node labelled with a value no shard serves is invisible to every KAI scheduler.
KAI_NODE_POOL_LABEL = "kai.scheduler/node-pool"
KAI_UNSERVED_POOL = "slurm-on-kubernetes"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpucluster"}
# Every tenant namespace carries its tenant's name (Kueue's managed-namespace selector uses it).
TENANT_LABEL = f"{LABEL_PREFIX}/tenant"
# Volcano: the queue of PodGroups created in a namespace without one (admission podgroups/mutate).
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"

# Names of switch tiers counted from the leaf up; deeper trees number the rest.
TIER_NAMES = ("leaf", "spine", "core")

ADDON_NAMESPACES = {
    "cert_manager": "cert-manager",
    "network_operator": "network-operator",
    "gpu_operator": "gpu-operator",
    "dra_driver": "dra-driver-nvidia-gpu",
    "kueue": "kueue-system",
    "kai_scheduler": "kai-scheduler",
    "volcano": "volcano-system",
    "slinky_operator": "slinky",
    "soperator": "soperator-system",
}


def tier_name(height: int) -> str:
    """Switch tier `height` levels above the hosts (0 = leaf)."""
    return TIER_NAMES[height] if height < len(TIER_NAMES) else f"tier{height + 1}"


def fabric_label(height: int) -> str:
    return f"{LABEL_PREFIX}/fabric-{tier_name(height)}"


def host_labels(cluster: Cluster, host: str) -> dict[str, str]:
    """Kubernetes node labels of a host from the inventory: node type, switch tiers, NVLink block."""
    labels = {NODE_TYPE_LABEL: cluster.node_type_of[host]}
    path = cluster.switch_path.get(host, ())
    for height, switch in enumerate(reversed(path)):
        labels[fabric_label(height)] = switch
    if host in cluster.block_of:
        labels[BLOCK_LABEL] = cluster.block_of[host]
    return labels


def tree_depth(cluster: Cluster) -> int:
    return max((len(path) for path in cluster.switch_path.values()), default=0)


def blocks_nest_in_leaves(cluster: Cluster) -> bool:
    """True when every NVLink block sits under one leaf switch (a block is then a finer level)."""
    for hosts in cluster.blocks.values():
        leaves = {cluster.switch_path[h][-1] for h in hosts if h in cluster.switch_path}
        if len(leaves) > 1:
            return False
    return True


def topology_levels(cluster: Cluster) -> list[str]:
    """Node labels from the widest level to the narrowest, hostname last (Kueue/KAI Topology levels).

    Switch tiers come first, then the NVLink block when blocks nest inside leaf switches and every
    node is in one. When they do not nest, only the kind Slurm uses by default is kept, so every level
    refines the one above.
    """
    depth = tree_depth(cluster)
    tree = [fabric_label(h) for h in reversed(range(depth))]
    # A level every node carries: a node without the block label (in no NVLink domain) would be
    # left out of the topology-aware placement of the whole scheduler.
    block = [BLOCK_LABEL] if cluster.blocks and set(cluster.node_type_of) <= set(cluster.block_of) else []
    if tree and block and not blocks_nest_in_leaves(cluster):
        prefers_tree = cluster.spec.fabric.default == "tree"
        levels = tree if prefers_tree else block
    else:
        levels = tree + block
    return [*levels, HOSTNAME_LABEL]


def hypernode_levels(cluster: Cluster) -> list[str]:
    """Node labels of Volcano's HyperNode tiers, narrowest (tier 1) first: the topology levels
    without the hostname."""
    return [label for label in reversed(topology_levels(cluster)) if label != HOSTNAME_LABEL]


def tier_name_of_label(label: str) -> str:
    """`gpucluster.io/fabric-leaf` -> `leaf`, `gpucluster.io/nvlink-block` -> `nvlink-block`."""
    return label.rsplit("/", 1)[-1].removeprefix("fabric-")


def hypernode_name(unit: str) -> str:
    """The HyperNode of a switch or NVLink block."""
    return k8s_name(unit)


def hypernode_domains(cluster: Cluster) -> dict[str, list[str]]:
    """HyperNode name -> the switches and blocks it would stand for, each as `<tier> <name>` (more
    than one is a collision)."""
    found: dict[str, list[str]] = {}
    labels = [host_labels(cluster, host) for host in cluster.hosts]
    for label in hypernode_levels(cluster):
        for unit in sorted({v[label] for v in labels if label in v}):
            found.setdefault(hypernode_name(unit), []).append(f"{tier_name_of_label(label)} `{unit}`")
    return found


def k8s_name(*parts: str) -> str:
    """A DNS-label-safe object name from parts (lowercase, '_' and '.' become '-')."""
    text = "-".join(parts).lower().replace("_", "-").replace(".", "-")
    return text.strip("-")


@dataclass(frozen=True)
class NodeSetGroup:
    """Hosts of one node type that belong to the same partitions: one Slurm NodeSet."""

    name: str
    node_type: str
    partitions: tuple[str, ...]
    hosts: tuple[str, ...]


def nodeset_groups(cluster: Cluster) -> list[NodeSetGroup]:
    membership: dict[str, list[str]] = {}
    for partition in cluster.spec.partitions:
        for host in cluster.partitions.get(partition.name, []):
            membership.setdefault(host, []).append(partition.name)
    grouped: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for host in cluster.hosts:
        key = (cluster.node_type_of[host], tuple(membership.get(host, [])))
        grouped.setdefault(key, []).append(host)
    per_type: dict[str, int] = {}
    for type_name, _ in grouped:
        per_type[type_name] = per_type.get(type_name, 0) + 1
    groups = []
    for index, ((type_name, partitions), hosts) in enumerate(sorted(grouped.items())):
        if per_type[type_name] == 1:
            name = k8s_name(type_name)
        else:
            name = k8s_name(type_name, *partitions)
            if len(name) > 40:
                name = k8s_name(type_name, f"g{index}")
        groups.append(NodeSetGroup(name, type_name, partitions, tuple(hosts)))
    return groups
