"""Stack outputs shared by every cloud: per-pool facts and an Ansible inventory for the Kubernetes layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi

from gpucluster.cloud.pools import CloudPlan, PoolPlan
from gpucluster.hostlists import compress


@dataclass
class Built:
    """What a cloud's `build` made: stack outputs, the kubeconfig, and the node pool components."""

    outputs: dict[str, Any]
    kubeconfig: pulumi.Output[str]
    node_pools: list[pulumi.Resource] = field(default_factory=list)


def output_field(value: Any, *keys: str) -> Any:
    """A nested field of a resource output: typed output objects or plain mappings, as the SDK gives them."""
    for key in keys:
        value = getattr(value, key) if hasattr(value, key) else value[key]
    return value


PLATFORM = {"aws": "eks", "gcp": "gke", "azure": "aks", "nebius": "generic"}


def pool_facts(pool: PoolPlan) -> dict[str, Any]:
    """What a pool is, as plain data (inventory hosts it stands for, its one scheduler, GPUs,
    placement, scheduling)."""
    return {
        "node_type": pool.node_type,
        "size": pool.size,
        "hosts": compress(list(pool.hosts)),
        "owner": pool.owner.value if pool.owner else None,
        "instance_type": pool.instance_type,
        "gpus_per_node": pool.gpus,
        "gpus": pool.gpus * pool.size,
        "zone": pool.zone,
        "capacity": pool.capacity.type,
        "placement": pool.settings.placement,
        "auto_upgrade": pool.settings.auto_upgrade,
        "labels": dict(pool.labels),
        "taints": [t.kubectl_form for t in pool.taints],
    }


def ansible_inventory(plan: CloudPlan, inventory: Path) -> dict[str, Any]:
    """Inventory for the Kubernetes layer's playbooks: they run on the controller against the API.

    The kubeconfig is not in it (it is a secret output): write it with
    `pulumi stack output kubeconfig --show-secrets > kubeconfig` and point `K8S_AUTH_KUBECONFIG` at it.
    """
    return {
        "all": {
            "children": {
                "kubernetes_api": {
                    "hosts": {"localhost": {"ansible_connection": "local"}},
                    "vars": {
                        "gpucluster_inventory": str(inventory),
                        "gpucluster_cluster_name": plan.cluster_name,
                        "gpucluster_kubernetes_platform": PLATFORM[plan.provider],
                        "gpucluster_kubernetes_version": plan.kubernetes_version,
                        "gpucluster_gpu_driver_owner": plan.driver_owner,
                        "gpucluster_node_pools": {p.name: pool_facts(p) for p in plan.pools},
                    },
                }
            }
        }
    }
