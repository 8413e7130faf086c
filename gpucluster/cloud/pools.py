"""The inventory resolved to cloud node pools: what every stack builds, computed once.

A pool is the hosts of one node type, one owner and one fabric unit (leaf switch or NVLink block):
its size is the number of those hosts, its GPUs per node come from the node type, and its labels are
the fabric labels all its hosts share, so the Kubernetes layer sees the same topology the Slurm
configs use. A pool never mixes owners: it carries its owner's label, and a slurm-on-kubernetes pool
also the owner taint, so only the Slurm-on-Kubernetes pods land there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeVar

from gpucluster.cloud.catalog import GpuMachine, gpu_machine
from gpucluster.cloud.model import Capacity, CloudSpec, PoolSettings, Taint, cloud_of
from gpucluster.k8s.model import KubernetesSpec, kubernetes_of
from gpucluster.k8s.names import (
    GPU_TAINT_KEY,
    KAI_NODE_POOL_LABEL,
    KAI_UNSERVED_POOL,
    NODESET_LABEL,
    OWNER_LABEL,
    host_labels,
    k8s_name,
    nodeset_groups,
)
from gpucluster.k8s.owners import owner_taint
from gpucluster.model.base import Owner
from gpucluster.model.storage import SharedFilesystem

if TYPE_CHECKING:  # the cluster module runs the cloud checks; keep this import type-only
    from gpucluster.model.cluster import Cluster

GPU_TAINT = Taint(key=GPU_TAINT_KEY, value="present", effect="NoSchedule")
POOL_LABEL = "gpucluster.io/pool"
# Only Slurm on Kubernetes (Slinky/Soperator slurmd pods, which tolerate it) and the node daemons
# may run on its nodes: the Kubernetes layer's taint (and effect), so the NodeSets' toleration matches.
OWNER_TAINT = Taint(**owner_taint())
# Owners a cloud node pool may have: it is a Kubernetes node pool (kubelet on every node).
CLOUD_OWNERS = (Owner.KUBERNETES, Owner.SLURM_ON_KUBERNETES)
# Pool name part when a node type's hosts have several owners.
OWNER_NAME = {Owner.KUBERNETES: "k8s", Owner.SLURM_ON_KUBERNETES: "slurm", Owner.SLURM: "metal"}
# Taint effects as the GKE, EKS and Nebius mk8s APIs spell them.
TAINT_EFFECT_ENUM = {
    "NoSchedule": "NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
}
TaintArgs = TypeVar("TaintArgs")

DriverOwner = Literal["operator", "cloud"]


@dataclass(frozen=True)
class PoolPlan:
    """One cloud node pool."""

    name: str
    node_type: str
    key: str  # inventory key path of the pool's settings, for messages
    hosts: tuple[str, ...]
    owner: Owner | None  # None only in an inventory that failed to say (reported by the core checks)
    instance_type: str | None
    gpus: int  # per node, from the inventory node type
    gpu_model: str | None
    machine: GpuMachine | None  # catalog facts of instance_type
    settings: PoolSettings
    zone: str | None
    taints: tuple[Taint, ...]
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.hosts)

    @property
    def is_gpu(self) -> bool:
        return self.gpus > 0

    @property
    def capacity(self) -> Capacity:
        return self.settings.capacity

    def taint_args(self, make: Callable[..., TaintArgs]) -> list[TaintArgs]:
        """The pool's taints as a cloud SDK's taint args class `make`, effects in enum form."""
        return [make(key=t.key, value=t.value, effect=TAINT_EFFECT_ENUM[t.effect]) for t in self.taints]


@dataclass(frozen=True)
class CloudPlan:
    cluster_name: str
    cloud: CloudSpec
    kubernetes_version: str | None
    driver_owner: DriverOwner
    pools: tuple[PoolPlan, ...]
    # cluster.storage entries the stack creates as a managed service (their `cloud:` sub-key).
    filesystems: tuple[SharedFilesystem, ...] = ()

    @property
    def gpu_pools(self) -> tuple[PoolPlan, ...]:
        return tuple(p for p in self.pools if p.is_gpu)

    @property
    def provider(self) -> str:
        return self.cloud.provider


def cloud_name(*parts: str, limit: int = 63) -> str:
    """Lowercase, dash-separated resource name (every cloud accepts it), cut to `limit`."""
    text = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    return text[:limit].rstrip("-")


def shared_labels(cluster: Cluster, hosts: list[str]) -> dict[str, str]:
    """Labels every host of the list has with the same value (a pool can only carry those)."""
    common = host_labels(cluster, hosts[0])
    for host in hosts[1:]:
        theirs = host_labels(cluster, host)
        common = {k: v for k, v in common.items() if theirs.get(k) == v}
    return common


def kubernetes_section(cluster: Cluster) -> KubernetesSpec | None:
    """The `kubernetes:` section (owned by the Kubernetes layer), if the inventory has one."""
    return kubernetes_of(cluster)


def driver_owner(cluster: Cluster) -> DriverOwner:
    """Who installs the GPU driver on cloud nodes, as the Kubernetes layer's GPU Operator values say.

    `operator` only when the GPU Operator is installed with its driver container; otherwise (no
    Kubernetes layer, operator disabled, driver `host`/`cloud`) the cloud's node image must carry it.
    """
    k8s = kubernetes_of(cluster)
    if k8s is not None and k8s.gpu_operator.enabled and k8s.gpu_operator.driver == "operator":
        return "operator"
    return "cloud"


def fabric_units(cluster: Cluster, hosts: list[str], split_by: str) -> list[tuple[str | None, list[str]]]:
    """Hosts grouped by fabric unit (leaf switch or NVLink block), in host order."""
    units: dict[str | None, list[str]] = {}
    for host in hosts:
        unit: str | None = None
        if split_by == "leaf" and host in cluster.switch_path:
            unit = cluster.switch_path[host][-1]
        elif split_by == "block":
            unit = cluster.block_of.get(host)
        units.setdefault(unit, []).append(host)
    return list(units.items())


def owner_taints(owner: Owner | None) -> list[Taint]:
    """Taints a pool gets for its owner (besides the GPU taint)."""
    return [OWNER_TAINT] if owner == Owner.SLURM_ON_KUBERNETES else []


def nodesets(cluster: Cluster, k8s: KubernetesSpec | None) -> dict[str, str]:
    """Slurm-on-Kubernetes host -> its NodeSet, as the Kubernetes layer groups them (the NodeSet's
    pods select the owner label and `gpucluster.io/slurm-nodeset`, so a pool must carry both)."""
    if k8s is None or k8s.slurm is None:
        return {}
    view = cluster.owned_by(Owner.SLURM_ON_KUBERNETES)
    return {host: group.name for group in nodeset_groups(view) for host in group.hosts}


def schedulers(
    cluster: Cluster, hosts: list[str], nodeset_of: dict[str, str]
) -> list[tuple[Owner | None, str | None, list[str]]]:
    """Hosts grouped by owner and NodeSet, in host order: a pool never mixes either."""
    groups: dict[tuple[Owner | None, str | None], list[str]] = {}
    for host in hosts:
        groups.setdefault((cluster.owner_of.get(host), nodeset_of.get(host)), []).append(host)
    return [(owner, nodeset, members) for (owner, nodeset), members in groups.items()]


def owner_labels(owner: Owner | None, nodeset: str | None, k8s: KubernetesSpec | None) -> dict[str, str]:
    """The labels the Kubernetes layer gives a node of this owner: the owner label, and for Slurm on
    Kubernetes its NodeSet and (with KAI) a KAI node pool no scheduling shard serves."""
    labels = {OWNER_LABEL: owner.value} if owner is not None else {}
    if nodeset is not None:
        labels[NODESET_LABEL] = nodeset
    if owner == Owner.SLURM_ON_KUBERNETES and k8s is not None and k8s.kai.enabled:
        labels[KAI_NODE_POOL_LABEL] = KAI_UNSERVED_POOL
    return labels


def plan_cloud(cluster: Cluster) -> CloudPlan | None:
    """Pools of every node type, or None when the inventory has no `cloud:` section."""
    cloud = cloud_of(cluster)
    if cloud is None:
        return None
    k8s = kubernetes_of(cluster)
    version = cloud.kubernetes_version
    if version is None and k8s is not None:
        version = ".".join(k8s.version.split(".")[:2])
    nodeset_of = nodesets(cluster, k8s)
    pools: list[PoolPlan] = []
    for type_name, hosts in cluster.hosts_by_type.items():
        node_type = cluster.spec.node_types[type_name]
        settings = cloud.pool_settings(type_name)
        key = (
            f"cluster.cloud.pools.{type_name}"
            if type_name in cloud.pools
            else f"cluster.node_types.{type_name}"
        )
        instance_type = settings.instance_type or node_type.instance_type
        gpus = node_type.gpus.count if node_type.gpus else 0
        taints = settings.taints if settings.taints is not None else ([GPU_TAINT] if gpus else [])
        # Names keep their unit part when the node type spans several units, and gain an owner part
        # only when its hosts have several owners, a NodeSet part only when one owner's hosts form
        # several NodeSets (so a node type with one owner keeps its pool names).
        split = len(fabric_units(cluster, hosts, settings.split_by)) > 1
        groups = schedulers(cluster, hosts, nodeset_of)
        owner_count = len({owner for owner, _, _ in groups})
        for owner, nodeset, owned in groups:
            parts = [OWNER_NAME[owner] if owner else "unowned"] if owner_count > 1 else []
            if nodeset is not None and sum(1 for o, _, _ in groups if o == owner) > 1:
                parts.append(nodeset.removeprefix(k8s_name(type_name)).strip("-") or nodeset)
            for unit, members in fabric_units(cluster, owned, settings.split_by):
                name = cloud_name(cluster.name, type_name, *parts, *([unit] if unit and split else []))
                labels = {**shared_labels(cluster, members), **settings.labels}
                labels[POOL_LABEL] = name
                labels.update(owner_labels(owner, nodeset, k8s))
                pools.append(
                    PoolPlan(
                        name=name,
                        node_type=type_name,
                        key=key,
                        hosts=tuple(members),
                        owner=owner,
                        instance_type=instance_type,
                        gpus=gpus,
                        gpu_model=node_type.gpus.model if node_type.gpus else None,
                        machine=gpu_machine(cloud.provider, instance_type) if instance_type else None,
                        settings=settings,
                        zone=settings.zone or (cloud.zones[0] if cloud.zones else None),
                        taints=tuple(taints + [t for t in owner_taints(owner) if t not in taints]),
                        labels=labels,
                    )
                )
    return CloudPlan(
        cluster_name=cluster.name,
        cloud=cloud,
        kubernetes_version=version,
        driver_owner=driver_owner(cluster),
        pools=tuple(pools),
        filesystems=tuple(fs for fs in cluster.spec.storage if fs.cloud is not None),
    )
