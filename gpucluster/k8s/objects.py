"""Kubernetes objects that make the inventory true on a cluster: node labels, topologies, Kueue
flavors and queues, KAI queues, tenant namespaces, DRA examples, ComputeDomains, NicClusterPolicy.

Everything is plain data built in Python; render.py dumps it as YAML. Functions about Kueue, KAI,
tenants and DRA take the view of the Kubernetes-owned hosts (owners.pods_view): they never see a
host another scheduler owns, nor another scheduler's tenant numbers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpucluster.k8s.host_software import host_stacks, operator_labels
from gpucluster.k8s.model import KubernetesSpec
from gpucluster.k8s.names import (
    GPU_RESOURCE,
    GPU_TAINT_KEY,
    KAI_NODE_POOL_LABEL,
    KAI_UNSERVED_POOL,
    MANAGED_BY,
    NODE_TYPE_LABEL,
    NODESET_LABEL,
    OWNER_LABEL,
    SLINKY_TOPOLOGY_ANNOTATION,
    TENANT_LABEL,
    VOLCANO_QUEUE_ANNOTATION,
    host_labels,
    k8s_name,
    nodeset_groups,
    topology_levels,
)
from gpucluster.k8s.owners import (
    kubernetes_hosts,
    owner_taint,
    owner_toleration,
    scheduler_tenants,
    slurm_pods_view,
)
from gpucluster.k8s.sharing import (
    mig_class_expression,
    mig_device_classes,
    mig_resource,
    node_sharing_labels,
    units_of_type,
)
from gpucluster.model.cluster import Cluster, topology_of_block
from gpucluster.model.spec import TREE_TOPOLOGY, Owner, Tenant

Obj = dict[str, Any]

KUEUE_API = "kueue.x-k8s.io/v1beta2"
KAI_QUEUE_API = "scheduling.run.ai/v2"
KAI_TOPOLOGY_API = "kai.scheduler/v1alpha1"
RESOURCE_API = "resource.k8s.io/v1"
COMPUTE_DOMAIN_API = "resource.nvidia.com/v1beta1"
NIC_POLICY_API = "mellanox.com/v1alpha1"
GPU_DRIVER = "gpu.nvidia.com"

# Names the Slurm renderer gives its topologies in topology.yaml (gpucluster/templates/slurm/topology.yaml.j2).
SLURM_TREE_TOPOLOGY = TREE_TOPOLOGY


def _meta(name: str, namespace: str | None = None, **extra: Any) -> Obj:
    meta: Obj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    labels = dict(MANAGED_BY)
    labels.update(extra.pop("labels", {}))
    meta["labels"] = labels
    meta.update(extra)
    return meta


def _obj(api: str, kind: str, metadata: Obj, **body: Any) -> Obj:
    return {"apiVersion": api, "kind": kind, "metadata": metadata, **body}


def gpu_toleration() -> Obj:
    return {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}


def gpu_taint() -> Obj:
    """The taint of GPU nodes with `gpu_taint`, as the cloud pools carry it (cloud/plan.py GPU_TAINT)."""
    return {"key": GPU_TAINT_KEY, "value": "present", "effect": "NoSchedule"}


# DRA device classes the DRA driver creates that hand out GPUs. A tenant's GPUs are counted on the
# per-node-type classes gpucluster makes: these stay closed to tenants (quota 0), or a claim through
# one of them would escape the tenant's numbers.
DRA_DRIVER_GPU_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com")
# ClusterRoles the charts make for submitting their workloads: Kueue's `<fullname>-batch-user-role`
# (release `kueue`), Volcano's vcjob editor.
KUEUE_BATCH_USER_ROLE = "kueue-batch-user-role"
VOLCANO_JOB_EDITOR_ROLE = "vcjob-editor-role"
RBAC_API = "rbac.authorization.k8s.io"


def namespace_of(tenant: Tenant) -> str:
    return tenant.namespace or tenant.name


def leaf_tenants(view: Cluster) -> list[Tenant]:
    """Tenants of the view's scheduler with no child there: each gets a queue and a namespace."""
    tenants = scheduler_tenants(view)
    parents = {t.parent for t in tenants if t.parent}
    return sorted((t for t in tenants if t.name not in parents), key=lambda t: t.name)


def parent_tenants(view: Cluster) -> list[Tenant]:
    tenants = scheduler_tenants(view)
    parents = {t.parent for t in tenants if t.parent}
    return sorted((t for t in tenants if t.name in parents), key=lambda t: t.name)


def gpu_node_types(cluster: Cluster) -> list[str]:
    return [name for name in sorted(cluster.hosts_by_type) if cluster.spec.node_types[name].gpus is not None]


# --- nodes -----------------------------------------------------------------


def slinky_topology_spec(cluster: Cluster, host: str) -> str | None:
    """`nvlink-blocks:<block>,fabric-tree:<leaf>`: the host's unit in each topology of the Slinky
    topology.yaml (render_topology_yaml with dynamic_nodes), which names no node. Slinky copies it
    into the Topology= option of the slurmd pod running on the host: Slurm takes the first `:` as the
    end of the topology name, and the unit of a tree must be a leaf switch, of a block topology a
    block, both defined in topology.yaml (an unknown one is refused)."""
    parts = []
    if host in cluster.block_of:
        block = cluster.block_of[host]
        parts.append(f"{topology_of_block(cluster)[block]}:{block}")
    if host in cluster.switch_path:
        parts.append(f"{SLURM_TREE_TOPOLOGY}:{cluster.switch_path[host][-1]}")
    return ",".join(parts) or None


def node_objects(cluster: Cluster, k8s: KubernetesSpec) -> list[Obj]:
    """Label (and annotation, taint) patches for each Kubernetes node: every host owned by
    `kubernetes` or `slurm-on-kubernetes` (the inventory host name is the node name). Bare-metal
    Slurm hosts run no kubelet and get nothing.

    Every node carries its owner label, and every GPU node the GPU taint with `gpu_taint` (what cloud
    pools are created with; on bare metal nothing else applies it). Slurm-on-Kubernetes nodes also get
    their NodeSet label, the owner taint (names.OWNER_TAINT_EFFECT says why NoExecute), KAI's
    node-pool label with a value no SchedulingShard serves (when KAI is installed) and, with Slinky,
    their topology annotation.
    """
    slurm_pods = slurm_pods_view(cluster)
    nodeset_of = (
        {host: group.name for group in nodeset_groups(slurm_pods) for host in group.hosts}
        if k8s.slurm is not None
        else {}
    )
    nodes = []
    installed = host_stacks(cluster)
    for host in kubernetes_hosts(cluster):
        owner = cluster.owner_of[host]
        node_type = cluster.node_type(host)
        labels = host_labels(cluster, host)
        if host in installed:
            # The gpu_driver role installed these on the host: the GPU Operator keeps off them.
            labels.update(operator_labels(installed[host]))
        for feature in node_type.features:
            labels[f"gpucluster.io/feature-{k8s_name(feature)}"] = "true"
        labels[OWNER_LABEL] = owner.value
        labels.update(node_sharing_labels(cluster, host, k8s))
        slurm_pod_node = owner == Owner.SLURM_ON_KUBERNETES
        if slurm_pod_node and host in nodeset_of:
            labels[NODESET_LABEL] = nodeset_of[host]
        if slurm_pod_node and k8s.kai.enabled:
            labels[KAI_NODE_POOL_LABEL] = KAI_UNSERVED_POOL
        metadata: Obj = {"name": host, "labels": dict(sorted(labels.items()))}
        if slurm_pod_node and k8s.slurm is not None and k8s.slurm.operator == "slinky":
            topo = slinky_topology_spec(slurm_pods, host)
            if topo:
                metadata["annotations"] = {SLINKY_TOPOLOGY_ANNOTATION: topo}
        node: Obj = {"apiVersion": "v1", "kind": "Node", "metadata": metadata}
        taints = [owner_taint()] if slurm_pod_node else []
        if node_type.gpus and k8s.gpu_taint:
            taints.append(gpu_taint())
        if taints:
            node["spec"] = {"taints": taints}
        nodes.append(node)
    return nodes


# --- topology ----------------------------------------------------------------


def has_topology(cluster: Cluster) -> bool:
    return bool(cluster.switch_path or cluster.blocks)


def kueue_places_pods(view: Cluster, k8s: KubernetesSpec) -> bool:
    """Kueue's Topology-Aware Scheduling: with a topology and no gang scheduler. TAS picks the nodes
    of each admitted pod itself (a scheduling gate, then node selectors), which would overrule the
    topology-aware placement of KAI or Volcano: with one of them, Kueue only admits (quota) and the
    gang scheduler places, over its own topology (KAI Topology, Volcano HyperNodes)."""
    return has_topology(view) and k8s.gang_scheduler is None


def kueue_topology(cluster: Cluster) -> Obj:
    levels = [{"nodeLabel": label} for label in topology_levels(cluster)]
    return _obj(KUEUE_API, "Topology", _meta(k8s_name(cluster.name)), spec={"levels": levels})


def kai_topology(cluster: Cluster) -> Obj:
    levels = [{"nodeLabel": label} for label in topology_levels(cluster)]
    return _obj(KAI_TOPOLOGY_API, "Topology", _meta(k8s_name(cluster.name)), spec={"levels": levels})


# --- tenants: namespaces and quotas ------------------------------------------------


def tenant_namespaces(cluster: Cluster, k8s: KubernetesSpec) -> list[Obj]:
    """A namespace per leaf tenant, with its PodSecurity level and tenant label; with Volcano, the
    annotation naming its tenant's queue (a PodGroup naming no queue lands there)."""
    level = k8s.pod_security
    objects = []
    for tenant in leaf_tenants(cluster):
        labels = {
            "pod-security.kubernetes.io/enforce": level,
            "pod-security.kubernetes.io/audit": "restricted",
            "pod-security.kubernetes.io/warn": "restricted",
            TENANT_LABEL: tenant.name,
        }
        extra: Obj = {"labels": labels}
        if k8s.volcano.enabled:
            extra["annotations"] = {VOLCANO_QUEUE_ANNOTATION: tenant.name}
        objects.append(_obj("v1", "Namespace", _meta(namespace_of(tenant), **extra)))
    return objects


@dataclass(frozen=True)
class FlavorShare:
    """A tenant's GPUs on one flavor, and the CPU/memory that come with them."""

    flavor: str
    gpus: int
    millicpu: int
    memory_mib: int
    # Extended resource -> how many of it these GPUs are (time-slicing replicas, MIG instances);
    # without sharing, {nvidia.com/gpu: gpus}.
    units: dict[str, int] = field(default_factory=dict)


def split_by_capacity(total: int, capacities: list[int]) -> list[int]:
    """Split `total` across flavors in proportion to their GPU counts (largest remainder)."""
    whole = sum(capacities)
    if whole == 0:
        return [0 for _ in capacities]
    shares = [total * c // whole for c in capacities]
    rests = sorted(range(len(capacities)), key=lambda i: (-(total * capacities[i] % whole), i))
    for i in rests[: total - sum(shares)]:
        shares[i] += 1
    return shares


def flavor_shares(cluster: Cluster, gpus: int, k8s: KubernetesSpec | None = None) -> list[FlavorShare]:
    """The tenant's `gpus` split over the view's GPU node types by their GPUs; with `k8s`, each
    share also in the extended resources its nodes advertise (gpucluster.k8s.sharing)."""
    types = gpu_node_types(cluster)
    capacities = []
    for name in types:
        node_gpus = cluster.spec.node_types[name].gpus
        capacities.append(len(cluster.hosts_by_type[name]) * (node_gpus.count if node_gpus else 0))
    out = []
    for name, share in zip(types, split_by_capacity(gpus, capacities), strict=True):
        node_type = cluster.spec.node_types[name]
        per_node = node_type.gpus.count if node_type.gpus else 1
        advertised = units_of_type(cluster, k8s, name) if k8s is not None else {GPU_RESOURCE: per_node}
        out.append(
            FlavorShare(
                flavor=k8s_name(name),
                gpus=share,
                millicpu=node_type.total_cpus * 1000 * share // per_node,
                memory_mib=(node_type.memory_mb or 0) * share // per_node,
                units={resource: count * share // per_node for resource, count in advertised.items()},
            )
        )
    return out


def gpu_resources(cluster: Cluster, k8s: KubernetesSpec | None) -> list[str]:
    """The GPU resources Kueue covers for the view: nvidia.com/gpu, then each MIG profile's."""
    found = [GPU_RESOURCE]
    if k8s is not None:
        for name in gpu_node_types(cluster):
            found += [r for r in units_of_type(cluster, k8s, name) if r not in found]
    return [GPU_RESOURCE, *sorted(r for r in found if r != GPU_RESOURCE)]


def resource_groups(cluster: Cluster, quota: int, limit: int, k8s: KubernetesSpec | None = None) -> list[Obj]:
    """One resource group: GPUs (and the shared units they are: time-slicing replicas, MIG
    instances) with the CPU and memory of their share of nodes. Every flavor lists every covered
    resource (Kueue's rule), 0 where its nodes have none of it."""
    nominal = flavor_shares(cluster, quota, k8s)
    ceiling = flavor_shares(cluster, limit, k8s)
    gpu_kinds = gpu_resources(cluster, k8s)
    flavors = []
    for low, high in zip(nominal, ceiling, strict=True):
        resources: list[Obj] = [
            {
                "name": "cpu",
                "nominalQuota": f"{low.millicpu}m",
                "borrowingLimit": f"{high.millicpu - low.millicpu}m",
            },
            {
                "name": "memory",
                "nominalQuota": f"{low.memory_mib}Mi",
                "borrowingLimit": f"{high.memory_mib - low.memory_mib}Mi",
            },
        ]
        for kind in gpu_kinds:
            have, most = low.units.get(kind, 0), high.units.get(kind, 0)
            resources.append({"name": kind, "nominalQuota": have, "borrowingLimit": most - have})
        flavors.append({"name": low.flavor, "resources": resources})
    return [{"coveredResources": ["cpu", "memory", *gpu_kinds], "flavors": flavors}]


def resource_flavors(cluster: Cluster, k8s: KubernetesSpec) -> list[Obj]:
    """A flavor per GPU node type of the view; the owner label keeps every node another scheduler
    owns out of it (Kueue injects nodeLabels into the pods it admits)."""
    objects = []
    for name in gpu_node_types(cluster):
        spec: Obj = {"nodeLabels": {NODE_TYPE_LABEL: name, OWNER_LABEL: Owner.KUBERNETES.value}}
        if k8s.gpu_taint:
            spec["tolerations"] = [gpu_toleration()]
        if kueue_places_pods(cluster, k8s):
            spec["topologyName"] = k8s_name(cluster.name)
        objects.append(_obj(KUEUE_API, "ResourceFlavor", _meta(k8s_name(name)), spec=spec))
    return objects


def _cohort_of(tenant: Tenant, k8s: KubernetesSpec) -> str:
    return tenant.parent or k8s.kueue.cohort


def kueue_cohorts(cluster: Cluster, k8s: KubernetesSpec) -> list[Obj]:
    """The root cohort, and one per parent tenant holding what its children do not."""
    objects = [_obj(KUEUE_API, "Cohort", _meta(k8s.kueue.cohort), spec={})]
    for tenant in parent_tenants(cluster):
        children = [t for t in cluster.spec.tenants if t.parent == tenant.name]
        given = sum(cluster.quota(t.name).quota for t in children)
        own_quota = max(0, cluster.quota(tenant.name).quota - given)
        own_limit = max(own_quota, cluster.quota(tenant.name).effective_limit - given)
        spec = {
            "parentName": _cohort_of(tenant, k8s),
            "fairSharing": {"weight": tenant.fairshare},
            "resourceGroups": resource_groups(cluster, own_quota, own_limit, k8s),
        }
        objects.append(_obj(KUEUE_API, "Cohort", _meta(tenant.name), spec=spec))
    return objects


def cluster_queues(cluster: Cluster, k8s: KubernetesSpec) -> list[Obj]:
    objects = []
    for tenant in leaf_tenants(cluster):
        spec = {
            "cohortName": _cohort_of(tenant, k8s),
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace_of(tenant)}},
            "queueingStrategy": "BestEffortFIFO",
            "fairSharing": {"weight": tenant.fairshare},
            "preemption": {
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority"},
                "withinClusterQueue": "LowerPriority",
            },
            "resourceGroups": resource_groups(
                cluster, cluster.quota(tenant.name).quota, cluster.quota(tenant.name).effective_limit, k8s
            ),
        }
        objects.append(_obj(KUEUE_API, "ClusterQueue", _meta(tenant.name), spec=spec))
    return objects


# Kueue gives a job of a managed namespace without a queue name this LocalQueue (LocalQueueDefaulting).
DEFAULT_LOCAL_QUEUE = "default"


def local_queues(cluster: Cluster) -> list[Obj]:
    """In each tenant namespace, a LocalQueue of the tenant's name and the namespace's `default`
    one, both on the tenant's ClusterQueue: Kueue manages jobs without a queue name there too
    (kueue_configuration), and admits them against the tenant's quota."""
    objects = []
    for tenant in leaf_tenants(cluster):
        for name in dict.fromkeys((tenant.name, DEFAULT_LOCAL_QUEUE)):
            meta = _meta(name, namespace_of(tenant))
            objects.append(_obj(KUEUE_API, "LocalQueue", meta, spec={"clusterQueue": tenant.name}))
    return objects


def tenant_quotas(cluster: Cluster, k8s: KubernetesSpec) -> list[Obj]:
    """A ResourceQuota per tenant namespace: at most the tenant's Kubernetes limit of GPUs requested
    at once there, whoever schedules the pods (a pod naming no queue or another scheduler included),
    in the units the nodes advertise (time-slicing replicas, MIG instances; a unit the tenant
    numbers itself, `units`, keeps its number). With DRA, per device class of each node type (the
    tenant's limit split as for Kueue's flavors), and none through the driver's own GPU classes."""
    objects = []
    types = gpu_node_types(cluster)
    for tenant in leaf_tenants(cluster):
        quota = cluster.quota(tenant.name)
        limit = quota.effective_limit
        hard: Obj
        if k8s.device_allocation == "dra":
            shares = flavor_shares(cluster, limit)
            hard = {}
            mig_classes = mig_device_classes(cluster)
            for name, share in zip(types, shares, strict=True):
                mine = [(profile, c) for t, profile, c in mig_classes if t == name]
                if not mine:
                    hard[f"{device_class_name(name)}.deviceclass.resource.k8s.io/devices"] = str(share.gpus)
                    continue
                per_node = units_of_type(cluster, k8s, name)
                count = cluster.spec.node_types[name].gpus.count  # type: ignore[union-attr]
                for profile, class_name in mine:
                    number = per_node.get(mig_resource(profile), 0) * share.gpus // count
                    number = quota.units.get(profile, number)
                    hard[f"{class_name}.deviceclass.resource.k8s.io/devices"] = str(number)
            hard.update({f"{c}.deviceclass.resource.k8s.io/devices": "0" for c in DRA_DRIVER_GPU_CLASSES})
        else:
            totals: dict[str, int] = {}
            for share in flavor_shares(cluster, limit, k8s):
                for resource, number in share.units.items():
                    totals[resource] = totals.get(resource, 0) + number
            for unit, number in quota.units.items():
                totals[mig_resource(unit)] = number
            hard = {f"requests.{resource}": str(number) for resource, number in totals.items()}
        meta = _meta("gpucluster-gpus", namespace_of(tenant))
        objects.append(_obj("v1", "ResourceQuota", meta, spec={"hard": dict(sorted(hard.items()))}))
    return objects


def tenant_role_bindings(cluster: Cluster, k8s: KubernetesSpec) -> list[Obj]:
    """In each tenant namespace, the tenant's users' group (and with bind_users each user) may use
    it: `tenant_rbac.cluster_role`, and the roles Kueue and Volcano make for submitting their jobs."""
    rbac = k8s.tenant_rbac
    roles = [("gpucluster-tenant", rbac.cluster_role)]
    if k8s.kueue.enabled:
        roles.append(("gpucluster-tenant-kueue", KUEUE_BATCH_USER_ROLE))
    if k8s.volcano.enabled:
        roles.append(("gpucluster-tenant-volcano", VOLCANO_JOB_EDITOR_ROLE))
    objects = []
    for tenant in leaf_tenants(cluster):
        subjects = [{"kind": "Group", "apiGroup": RBAC_API, "name": f"{rbac.group_prefix}{tenant.name}"}]
        if rbac.bind_users:
            subjects += [
                {"kind": "User", "apiGroup": RBAC_API, "name": f"{rbac.user_prefix}{user}"}
                for user in tenant.users
            ]
        for name, role in roles:
            objects.append(
                _obj(
                    f"{RBAC_API}/v1",
                    "RoleBinding",
                    _meta(name, namespace_of(tenant)),
                    roleRef={"apiGroup": RBAC_API, "kind": "ClusterRole", "name": role},
                    subjects=subjects,
                )
            )
    return objects


def kai_queues(cluster: Cluster, k8s: KubernetesSpec) -> list[Obj]:
    """A parent queue over everything, a queue per parent tenant, a leaf queue per tenant.

    GPU quota/limit are tenant numbers; CPU and memory are left unlimited (-1) so GPUs decide.
    """
    root = k8s.kai.parent_queue
    total = cluster.total_gpus  # of the view: the GPUs Kubernetes owns

    def queue(name: str, parent: str | None, quota: int, limit: int, weight: int) -> Obj:
        unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": weight}
        spec: Obj = {
            "displayName": name,
            "resources": {
                "gpu": {"quota": quota, "limit": limit, "overQuotaWeight": weight},
                "cpu": unlimited,
                "memory": unlimited,
            },
        }
        if parent is not None:
            spec["parentQueue"] = parent
        return _obj(KAI_QUEUE_API, "Queue", _meta(name), spec=spec)

    objects = [queue(root, None, total, total, 1)]
    for tenant in sorted(scheduler_tenants(cluster), key=lambda t: t.name):
        parent = tenant.parent or root
        gpus = cluster.quota(tenant.name)
        objects.append(queue(tenant.name, parent, gpus.quota, gpus.effective_limit, tenant.fairshare))
    return objects


# --- DRA -------------------------------------------------------------------


def device_class_name(type_name: str) -> str:
    return f"{k8s_name(type_name)}.gpucluster.io"


def device_classes(cluster: Cluster) -> list[Obj]:
    """A DeviceClass per GPU node type: whole GPUs of that kind (by memory size when known); for a
    MIG node type, one per MIG profile its layout makes, selecting the driver's MIG devices of
    that profile."""
    objects = []
    migs = mig_device_classes(cluster)
    for name in gpu_node_types(cluster):
        gpus = cluster.spec.node_types[name].gpus
        assert gpus is not None
        mine = [(profile, c) for t, profile, c in migs if t == name]
        for profile, class_name in mine:
            spec = {"selectors": [{"cel": {"expression": mig_class_expression(profile)}}]}
            objects.append(_obj(RESOURCE_API, "DeviceClass", _meta(class_name), spec=spec))
        if mine:
            continue
        expression = f"device.driver == '{GPU_DRIVER}' && device.attributes['{GPU_DRIVER}'].type == 'gpu'"
        if gpus.memory_gb:
            expression += (
                f" && device.capacity['{GPU_DRIVER}'].memory.compareTo(quantity('{gpus.memory_gb}G')) >= 0"
            )
        spec = {"selectors": [{"cel": {"expression": expression}}]}
        objects.append(_obj(RESOURCE_API, "DeviceClass", _meta(device_class_name(name)), spec=spec))
    return objects


def _claim_template(namespace: str, name: str, class_name: str, count: int) -> Obj:
    request = {
        "name": "gpus",
        "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount", "count": count},
    }
    spec = {"spec": {"devices": {"requests": [request]}}}
    return _obj(RESOURCE_API, "ResourceClaimTemplate", _meta(name, namespace), spec=spec)


def resource_claim_templates(cluster: Cluster) -> list[Obj]:
    """Per tenant namespace and GPU node type: one GPU, and all GPUs of a node; for a MIG node
    type, one instance of each of its profiles."""
    objects = []
    namespaces = [namespace_of(t) for t in leaf_tenants(cluster)] or ["default"]
    migs = mig_device_classes(cluster)
    for namespace in namespaces:
        for name in gpu_node_types(cluster):
            gpus = cluster.spec.node_types[name].gpus
            assert gpus is not None
            mine = [(profile, c) for t, profile, c in migs if t == name]
            for profile, class_name in mine:
                objects.append(_claim_template(namespace, k8s_name(name, profile), class_name, 1))
            if mine:
                continue
            for count in sorted({1, gpus.count}):
                objects.append(
                    _claim_template(namespace, k8s_name(name, f"{count}gpu"), device_class_name(name), count)
                )
    return objects


def compute_domains(cluster: Cluster) -> list[Obj]:
    """A ComputeDomain per NVLink block in each tenant namespace (multi-node NVLink via IMEX)."""
    objects = []
    namespaces = [namespace_of(t) for t in leaf_tenants(cluster)] or ["default"]
    for namespace in namespaces:
        for block, hosts in sorted(cluster.blocks.items()):
            name = k8s_name(block)
            spec = {
                "numNodes": len(hosts),
                "channel": {"resourceClaimTemplate": {"name": f"{name}-channel"}},
            }
            objects.append(_obj(COMPUTE_DOMAIN_API, "ComputeDomain", _meta(name, namespace), spec=spec))
    return objects


# --- Network Operator ----------------------------------------------------------------


def nic_cluster_policy(
    k8s: KubernetesSpec, mirror_image: Callable[[str], str], slurm_pods: bool = False
) -> Obj:
    """The one NicClusterPolicy (the chart does not create it). Its `tolerations` go to the
    operator's node daemonsets, which must run on Slurm-on-Kubernetes nodes too."""
    net = k8s.network_operator
    spec: Obj = {}
    if slurm_pods:
        spec["tolerations"] = [owner_toleration()]
    if net.doca_driver_version:
        spec["ofedDriver"] = {
            "image": "doca-driver",
            "repository": mirror_image("nvcr.io/nvidia/mellanox"),
            "version": net.doca_driver_version,
        }
    resources = [
        {
            "resourceName": "rdma_shared_device_a",
            "rdmaHcaMax": 63,
            "selectors": {"ifNames": list(net.rdma_interfaces)},
        }
    ]
    spec["rdmaSharedDevicePlugin"] = {
        "image": "k8s-rdma-shared-dev-plugin",
        "repository": mirror_image("nvcr.io/nvidia/mellanox"),
        "version": net.rdma_shared_device_plugin_version,
        "config": json.dumps({"configList": resources}, sort_keys=True),
    }
    return _obj(NIC_POLICY_API, "NicClusterPolicy", _meta("nic-cluster-policy"), spec=spec)
