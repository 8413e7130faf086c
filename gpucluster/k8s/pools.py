"""The Kubernetes side of the shared pools (cluster.shared_pools[].kubernetes): where gpucluster
makes Kueue's objects (`kubernetes.kueue.enabled`), a pool may only name the ResourceFlavor of its
node type and ClusterQueues gpucluster makes (one per leaf tenant with a Kubernetes share). With
the site's own Kueue the names are the site's and are not checked here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucluster.errors import Problem, format_path
from gpucluster.k8s.model import kubernetes_of
from gpucluster.k8s.names import MANAGED_BY, k8s_name
from gpucluster.k8s.objects import leaf_tenants
from gpucluster.k8s.owners import pods_view
from gpucluster.model.pooled import resolved_pools

if TYPE_CHECKING:
    from gpucluster.model.cluster import Cluster


def pool_flavor(cluster: Cluster, index: int) -> str | None:
    """The ResourceFlavor pool `index` lends to: the inventory's, else its node type's (None: the
    pool has no host with a node type, which the core checks report)."""
    pool = cluster.spec.shared_pools[index]
    if pool.kubernetes.flavor is not None:
        return pool.kubernetes.flavor
    types = {
        cluster.node_type_of[h] for h in resolved_pools(cluster)[index].hosts if h in cluster.node_type_of
    }
    return k8s_name(min(types)) if types else None


def check_pool_kueue(cluster: Cluster) -> list[Problem]:
    k8s = kubernetes_of(cluster)
    if k8s is None or not k8s.kueue.enabled:
        return []
    file = cluster.inventory.cluster_file
    queues = [t.name for t in leaf_tenants(pods_view(cluster))]
    problems: list[Problem] = []
    for resolved in resolved_pools(cluster):
        where: list[str | int] = ["cluster", "shared_pools", resolved.index, "kubernetes"]
        types = sorted({cluster.node_type_of[h] for h in resolved.hosts if h in cluster.node_type_of})
        given = resolved.pool.kubernetes.flavor
        if given is not None and len(types) == 1 and given != k8s_name(types[0]):
            problems.append(
                file.problem(
                    format_path([*where, "flavor"]),
                    f"unknown flavor `{given}`: gpucluster's Kueue admits the pool's `{types[0]}` nodes on "
                    f"ResourceFlavor `{k8s_name(types[0])}`; name that one, or leave flavor out",
                )
            )
        for place, queue in enumerate(resolved.pool.kubernetes.cluster_queues):
            if queue not in queues:
                known = ", ".join(queues) or "none: no tenant has a Kubernetes share"
                problems.append(
                    file.problem(
                        format_path([*where, "cluster_queues", place]),
                        f"unknown ClusterQueue `{queue}`: gpucluster makes one per leaf tenant with a "
                        f"Kubernetes share ({known}); name one of those, or give tenant `{queue}` "
                        "GPUs in `kubernetes`",
                    )
                )
    return problems


POOLS_NAMESPACE = "gpucluster-pools"
RBAC_API = "rbac.authorization.k8s.io"


def pool_account(name: str) -> str:
    """The ServiceAccount (and ClusterRole) the moves of pool `name` act as."""
    return f"gpucluster-pool-{name}"


def pool_rules(cluster: Cluster, index: int) -> list[dict[str, Any]]:
    """What the moves of one pool may do (gpucluster/pool/kube.py and the balancer), and no more:
    read and patch its own nodes and ClusterQueues by name; list pods (a list cannot be limited
    by name: the moves ask for one node's); read Kueue's Workloads (the balancer's pending
    demand); evict pods only where the pool allows it."""
    resolved = resolved_pools(cluster)[index]
    pool = resolved.pool
    rules: list[dict[str, Any]] = [
        {
            "apiGroups": [""],
            "resources": ["nodes"],
            "resourceNames": list(resolved.hosts),
            "verbs": ["get", "patch"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["clusterqueues"],
            "resourceNames": list(pool.kubernetes.cluster_queues),
            "verbs": ["get", "patch"],
        },
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list", "watch"]},
    ]
    if pool.evict_pods:
        rules.append({"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]})
    return rules


def pool_objects(cluster: Cluster) -> list[dict[str, Any]]:
    """Per pool: a ServiceAccount, its ClusterRole and binding, and a token Secret the controllers'
    kubeconfig reads (the moves run there, outside the cluster). None without pools."""
    pools = resolved_pools(cluster)
    if not pools:
        return []
    labels = dict(MANAGED_BY)
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": POOLS_NAMESPACE, "labels": labels}}
    ]
    for resolved in pools:
        name = pool_account(resolved.pool.name)
        meta = {"name": name, "namespace": POOLS_NAMESPACE, "labels": labels}
        objects += [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/service-account-token",
                "metadata": {**meta, "annotations": {"kubernetes.io/service-account.name": name}},
            },
            {
                "apiVersion": f"{RBAC_API}/v1",
                "kind": "ClusterRole",
                "metadata": {"name": name, "labels": labels},
                "rules": pool_rules(cluster, resolved.index),
            },
            {
                "apiVersion": f"{RBAC_API}/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name, "labels": labels},
                "roleRef": {"apiGroup": RBAC_API, "kind": "ClusterRole", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": POOLS_NAMESPACE}],
            },
        ]
    return objects
