"""Fleet ownership as the Kubernetes layer applies it: which hosts are Kubernetes nodes, the view of
each Kubernetes-side scheduler, the owner taint and its toleration, and the tenants each serves.

Bare-metal `slurm` hosts are not Kubernetes nodes. `kubernetes` nodes are Kueue's and KAI's (flavors
select them by the owner label; quotas come from their GPUs). `slurm-on-kubernetes` nodes are the
Slinky/Soperator NodeSets' only: tainted, labelled out of every KAI shard, matched by no flavor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucluster.k8s.names import OWNER_LABEL, OWNER_TAINT_EFFECT, OWNER_TAINT_KEY
from gpucluster.model.base import Owner

if TYPE_CHECKING:
    from gpucluster.model.cluster import Cluster
    from gpucluster.model.spec import Tenant

KUBERNETES_OWNERS = (Owner.KUBERNETES, Owner.SLURM_ON_KUBERNETES)


def owner_taint() -> dict[str, Any]:
    return {"key": OWNER_TAINT_KEY, "value": Owner.SLURM_ON_KUBERNETES.value, "effect": OWNER_TAINT_EFFECT}


def owner_toleration() -> dict[str, Any]:
    """Tolerates exactly the Slurm-on-Kubernetes owner taint (no other owner's)."""
    return {
        "key": OWNER_TAINT_KEY,
        "operator": "Equal",
        "value": Owner.SLURM_ON_KUBERNETES.value,
        "effect": OWNER_TAINT_EFFECT,
    }


def owner_selector(owner: Owner) -> dict[str, str]:
    return {OWNER_LABEL: owner.value}


def kubernetes_hosts(cluster: Cluster) -> list[str]:
    """Hosts that are Kubernetes nodes (kubelet), naturally sorted: not the bare-metal Slurm ones."""
    return [h for h in cluster.hosts if cluster.owner_of.get(h) in KUBERNETES_OWNERS]


def pods_view(cluster: Cluster) -> Cluster:
    """What Kueue and KAI own: Kubernetes-owned hosts and the tenants' `kubernetes` numbers."""
    return cluster.owned_by(Owner.KUBERNETES)


def slurm_pods_view(cluster: Cluster) -> Cluster:
    """What Slinky/Soperator own: the slurm-on-kubernetes hosts, their partitions and fabric."""
    return cluster.owned_by(Owner.SLURM_ON_KUBERNETES)


def has_slurm_pods(cluster: Cluster) -> bool:
    return Owner.SLURM_ON_KUBERNETES in cluster.owner_of.values()


def scheduler_tenants(view: Cluster) -> list[Tenant]:
    """Tenants that have GPU numbers in the view's scheduler, with their ancestors (so the tree of
    cohorts or parent queues stays whole), in inventory order."""
    by_name = {t.name: t for t in view.spec.tenants}
    keep: set[str] = set()
    for name in view.tenant_gpus:
        current: str | None = name
        while current is not None and current in by_name and current not in keep:
            keep.add(current)
            current = by_name[current].parent
    return [t for t in view.spec.tenants if t.name in keep]
