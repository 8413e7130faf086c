"""Volcano as the gang scheduler of the Kubernetes-owned GPU nodes: its chart values (scheduler and
admission configuration), the tenants' queues, the fabric as HyperNodes, and a sample gang Job.

Every function takes the view of the Kubernetes-owned hosts (owners.pods_view): Volcano never sees a
host another scheduler owns, nor another scheduler's tenant numbers. Facts are from Volcano 1.15.1
(the pinned chart): the capacity plugin (queues with `deserved`, `capability`, `guarantee`, a
hierarchy under the `root` queue, DRA device classes as `deviceclass/<class>` resources), HyperNodes
(`topology.volcano.sh/v1alpha1`, tier 1 the narrowest) and the network-topology-aware plugin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpucluster.k8s.model import KubernetesSpec
from gpucluster.k8s.names import (
    GPU_RESOURCE,
    MANAGED_BY,
    NODE_TYPE_LABEL,
    OWNER_LABEL,
    host_labels,
    hypernode_levels,
    hypernode_name,
    k8s_name,
    tier_name_of_label,
    topology_levels,
)
from gpucluster.k8s.objects import (
    DRA_DRIVER_GPU_CLASSES,
    Obj,
    device_class_name,
    flavor_shares,
    gpu_node_types,
    gpu_toleration,
    leaf_tenants,
    namespace_of,
)
from gpucluster.k8s.owners import scheduler_tenants
from gpucluster.model.cluster import Cluster
from gpucluster.model.spec import Owner, Tenant

SCHEDULER_NAME = "volcano"
QUEUE_API = "scheduling.volcano.sh/v1beta1"
HYPERNODE_API = "topology.volcano.sh/v1alpha1"
JOB_API = "batch.volcano.sh/v1alpha1"
ROOT_QUEUE = "root"
# Volcano's scheduler makes this queue for jobs naming none, without limits: gpucluster gives it no
# GPUs, so nothing bypasses the tenants' queues by naming no queue.
DEFAULT_QUEUE = "default"
# The chart's admission webhooks (values.yaml custom.enabled_admissions), plus two: pods/mutate puts
# every pod of a tenant namespace on Volcano (resource group below) and podgroups/mutate gives a
# PodGroup its namespace's queue.
CHART_ADMISSIONS = (
    "/jobs/mutate",
    "/jobs/validate",
    "/podgroups/validate",
    "/queues/mutate",
    "/queues/validate",
    "/hypernodes/validate",
    "/cronjobs/validate",
)
ADMISSIONS = (*CHART_ADMISSIONS, "/pods/mutate", "/podgroups/mutate")
TENANT_RESOURCE_GROUP = "gpucluster-tenants"
# A sample image whose tag the GPU Operator's own tests use: the job lists the GPUs each pod got.
SAMPLE_IMAGE = "nvcr.io/nvidia/cuda:12.6.0-base-ubuntu22.04"
SAMPLE_JOB = "gpucluster-gang-sample"

Resources = dict[str, Any]


# --- scheduler and admission configuration (chart values) ---------------------------------------


def uses_hypernodes(view: Cluster, k8s: KubernetesSpec) -> bool:
    return k8s.volcano.network_topology and len(topology_levels(view)) > 1


def scheduler_configuration(view: Cluster, k8s: KubernetesSpec) -> Obj:
    """volcano-scheduler.conf: gang all-or-nothing (with priority and conformance first), DRF
    fair share between jobs, the capacity plugin for the tenants' queues (hierarchical: the queues
    sit under gpucluster's parent queue), and network-topology-aware placement over HyperNodes."""
    placement: list[Obj] = [
        {"name": "drf", "enablePreemptable": False},
        {"name": "predicates"},
        {"name": "capacity", "enableHierarchy": True},
        {"name": "nodeorder"},
        {"name": "binpack"},
    ]
    if uses_hypernodes(view, k8s):
        placement.append({"name": "network-topology-aware", "arguments": {"weight": 10}})
    return {
        # reclaim takes back a tenant's deserved GPUs from queues over theirs; preempt works within a queue.
        "actions": "enqueue, allocate, preempt, reclaim, backfill",
        "tiers": [
            {
                "plugins": [
                    {"name": "priority"},
                    {"name": "gang", "enablePreemptable": False},
                    {"name": "conformance"},
                ]
            },
            {"plugins": placement},
        ],
    }


def admission_configuration(view: Cluster, k8s: KubernetesSpec) -> Obj:
    """volcano-admission.conf: every pod created in a tenant namespace is scheduled by Volcano, on
    the Kubernetes-owned nodes (node selector on the owner label), tolerating the GPU taint."""
    namespaces = [namespace_of(t) for t in leaf_tenants(view)]
    if not namespaces:
        return {}
    group: Obj = {
        "resourceGroup": TENANT_RESOURCE_GROUP,
        "object": {"key": "namespace", "value": namespaces},
        "schedulerName": SCHEDULER_NAME,
        "labels": {OWNER_LABEL: Owner.KUBERNETES.value},
    }
    if k8s.gpu_taint:
        group["tolerations"] = [gpu_toleration()]
    return {"resourceGroups": [group]}


# --- queues -------------------------------------------------------------------------------------


def _add(left: Resources, right: Resources) -> Resources:
    return {key: left.get(key, 0) + right.get(key, 0) for key in {*left, *right}}


def _max(left: Resources, right: Resources) -> Resources:
    return {key: max(left.get(key, 0), right.get(key, 0)) for key in {*left, *right}}


def _render(amounts: Resources) -> Resources:
    """Amounts as quantities: CPU in millicores, memory in MiB, devices counted."""
    units = {"cpu": "m", "memory": "Mi"}
    return {key: f"{amounts[key]}{units[key]}" if key in units else amounts[key] for key in sorted(amounts)}


def queue_resources(view: Cluster, k8s: KubernetesSpec, gpus: int) -> Resources:
    """What `gpus` GPUs of the view come with, as a Volcano ResourceList (unrendered amounts): the
    GPUs (`nvidia.com/gpu`, or per DRA device class of each node type), and the CPU and memory of
    their share of nodes. The same split over node types as Kueue's flavors."""
    shares = flavor_shares(view, gpus)
    amounts: Resources = {
        "cpu": sum(s.millicpu for s in shares),
        "memory": sum(s.memory_mib for s in shares),
    }
    if k8s.device_allocation == "dra":
        for share in shares:
            amounts[f"deviceclass/{share.flavor}.gpucluster.io"] = share.gpus
    else:
        amounts[GPU_RESOURCE] = gpus
    return amounts


@dataclass
class _Queue:
    name: str
    parent: str
    deserved: Resources
    capability: Resources
    children: list[str] = field(default_factory=list)


def _queue_tree(view: Cluster, k8s: KubernetesSpec) -> dict[str, _Queue]:
    """gpucluster's parent queue and a queue per tenant with Kubernetes numbers (and its ancestors),
    each holding at least the sum of its children's `deserved` and the largest of their `capability`
    (Volcano's webhook refuses a hierarchy where children exceed their parent; the CPU and memory
    that come with GPUs are rounded per tenant, so a sum can pass its parent's share by a little)."""
    top = k8s.volcano.parent_queue
    total = queue_resources(view, k8s, view.total_gpus)
    queues = {top: _Queue(top, ROOT_QUEUE, total, total)}
    tenants = sorted(scheduler_tenants(view), key=lambda t: t.name)
    for tenant in tenants:
        gpus = view.quota(tenant.name)
        queues[tenant.name] = _Queue(
            tenant.name,
            tenant.parent or top,
            queue_resources(view, k8s, gpus.quota),
            queue_resources(view, k8s, gpus.effective_limit),
        )
    for queue in queues.values():
        if queue.name != top:
            queues[queue.parent].children.append(queue.name)

    def settle(name: str) -> None:
        queue = queues[name]
        for child in queue.children:
            settle(child)
        if queue.children:
            summed: Resources = {}
            for child in queue.children:
                summed = _add(summed, queues[child].deserved)
            queue.deserved = _max(queue.deserved, summed)
            for child in queue.children:
                queue.capability = _max(queue.capability, queues[child].capability)

    settle(top)
    return queues


def _queue(name: str, spec: Obj) -> Obj:
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": _meta(name), "spec": spec}


def _meta(name: str, namespace: str | None = None) -> Obj:
    meta: Obj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(MANAGED_BY)
    return meta


def volcano_queues(view: Cluster, k8s: KubernetesSpec) -> list[Obj]:
    """The parent queue (the Kubernetes-owned GPUs) under `root`, a queue per parent tenant and per
    tenant: `deserved` = the quota (lent while idle, reclaimed when needed), `capability` = the limit,
    `guarantee` = the quota with `reserve_quota`; and Volcano's `default` queue with no GPUs."""
    queues = _queue_tree(view, k8s)
    objects = []
    for name in [k8s.volcano.parent_queue, *sorted(n for n in queues if n != k8s.volcano.parent_queue)]:
        queue = queues[name]
        spec: Obj = {
            "parent": queue.parent,
            "reclaimable": True,
            "deserved": _render(queue.deserved),
            "capability": _render(queue.capability),
        }
        if k8s.volcano.reserve_quota and name != k8s.volcano.parent_queue:
            spec["guarantee"] = {"resource": _render(queue.deserved)}
        objects.append(_queue(name, spec))
    no_gpus: Resources = {GPU_RESOURCE: 0}
    if k8s.device_allocation == "dra":
        # Claims through the driver's own classes would escape every tenant's per-type quota.
        driver_classes = {f"deviceclass/{c}": 0 for c in DRA_DRIVER_GPU_CLASSES}
        for queue_object in objects[1:]:
            queue_object["spec"]["capability"] = dict(
                sorted({**queue_object["spec"]["capability"], **driver_classes}.items())
            )
        no_gpus = {f"deviceclass/{device_class_name(t)}": 0 for t in gpu_node_types(view)} | driver_classes
    objects.append(
        _queue(
            DEFAULT_QUEUE,
            {"parent": ROOT_QUEUE, "reclaimable": True, "capability": dict(sorted(no_gpus.items()))},
        )
    )
    return objects


# --- HyperNodes ---------------------------------------------------------------------------------


def hypernodes(view: Cluster) -> list[Obj]:
    """The fabric of the Kubernetes-owned hosts as a HyperNode tree: tier 1 the narrowest level
    (NVLink blocks nested in leaf switches, else leaf switches), whose members are the nodes carrying
    that unit's label and the owner label `kubernetes` (labels gpu_workloads applies, so a node handed
    over to another scheduler leaves it); each higher tier holds the HyperNodes below it (and any node
    with no unit at the tier below)."""
    levels = hypernode_levels(view)
    labels = {host: host_labels(view, host) for host in view.hosts}
    objects = []
    for index, label in enumerate(levels):
        tier = index + 1
        for domain in sorted({v[label] for v in labels.values() if label in v}):
            hosts = [h for h in view.hosts if labels[h].get(label) == domain]
            members: list[Obj]
            if tier == 1:
                match = {label: domain, OWNER_LABEL: Owner.KUBERNETES.value}
                members = [{"type": "Node", "selector": {"labelMatch": {"matchLabels": match}}}]
            else:
                below = levels[index - 1]
                children = sorted({labels[h][below] for h in hosts if below in labels[h]})
                members = [
                    {"type": "HyperNode", "selector": {"exactMatch": {"name": hypernode_name(c)}}}
                    for c in children
                ]
                members += [
                    {"type": "Node", "selector": {"exactMatch": {"name": h}}}
                    for h in hosts
                    if below not in labels[h]
                ]
            spec = {"tier": tier, "tierName": tier_name_of_label(label), "members": members}
            objects.append(
                {
                    "apiVersion": HYPERNODE_API,
                    "kind": "HyperNode",
                    "metadata": _meta(hypernode_name(domain)),
                    "spec": spec,
                }
            )
    return objects


# --- a sample gang Job --------------------------------------------------------------------------


def _sample_target(view: Cluster) -> tuple[Tenant, str, int] | None:
    """(tenant, node type, GPUs per node) for a two-node job of whole nodes: the GPU node type with
    the most GPUs per node among those with two nodes or more, and the first tenant whose limit
    holds two such nodes."""
    per_node = {
        name: gpus.count
        for name in gpu_node_types(view)
        if (gpus := view.spec.node_types[name].gpus) is not None and len(view.hosts_by_type[name]) >= 2
    }
    if not per_node:
        return None
    best = max(per_node, key=lambda name: (per_node[name], name))
    count = per_node[best]
    for tenant in leaf_tenants(view):
        if view.quota(tenant.name).effective_limit >= 2 * count:
            return tenant, best, count
    return None


def sample_gang_job(view: Cluster, k8s: KubernetesSpec, image: str = SAMPLE_IMAGE) -> Obj | None:
    """A Volcano Job of two pods, each holding every GPU of a node, started all at once or not at all
    (`minAvailable` 2), in a tenant's namespace and queue, within one leaf switch (tier 1) when the
    fabric is known; each pod lists its GPUs. None when no tenant may hold two whole nodes."""
    target = _sample_target(view)
    if target is None:
        return None
    tenant, node_type, count = target
    namespace = namespace_of(tenant)
    container: Obj = {"name": "worker", "image": image, "command": ["nvidia-smi", "-L"]}
    pod: Obj = {
        "restartPolicy": "Never",
        "nodeSelector": {NODE_TYPE_LABEL: node_type, OWNER_LABEL: Owner.KUBERNETES.value},
        "containers": [container],
    }
    if k8s.gpu_taint:
        pod["tolerations"] = [gpu_toleration()]
    if k8s.device_allocation == "dra":
        template = k8s_name(node_type, f"{count}gpu")  # objects.resource_claim_templates
        pod["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": template}]
        container["resources"] = {"claims": [{"name": "gpus"}]}
    else:
        container["resources"] = {"limits": {GPU_RESOURCE: count}}
    spec: Obj = {
        "schedulerName": SCHEDULER_NAME,
        "queue": tenant.name,
        "minAvailable": 2,
        # svc: each pod resolves the others by name; env: VC_TASK_INDEX for a launcher's rank.
        "plugins": {"svc": [], "env": []},
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
        "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": pod}}],
    }
    if uses_hypernodes(view, k8s):
        spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    return {"apiVersion": JOB_API, "kind": "Job", "metadata": _meta(SAMPLE_JOB, namespace), "spec": spec}
