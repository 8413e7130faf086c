"""What keeps a tenant's Kubernetes work inside its numbers, whoever submits it and however:

- Kueue manages jobs without a queue name in the tenants' namespaces (and only there), and admits
  them in the namespace's `default` LocalQueue, on the tenant's ClusterQueue;
- each tenant namespace binds its users' group to the roles for submitting work, and holds a
  ResourceQuota of the tenant's Kubernetes GPU limit (a pod of another scheduler included);
- `gpu_taint` taints every GPU node of nodes.yaml, bare metal included, and what must run there
  tolerates it;
- Kueue's integrations cover serving (Deployments, StatefulSets, LeaderWorkerSets); without a
  Deployment integration while tenants have Kubernetes GPUs, the CLI warns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpucluster.k8s.names import GPU_TAINT_KEY, OWNER_LABEL, TENANT_LABEL
from gpucluster.layers import layer_warnings, load_cluster
from gpucluster.model.spec import Owner
from gpucluster.rendering import render_files
from tests.conftest import run_cli
from tests.k8s.conftest import (
    cluster_of,
    k8s_inventories,
    rendered,
    tenant_objects,
    variant_inventory,
)

Obj = dict[str, Any]
GPU_TAINT = {"key": GPU_TAINT_KEY, "value": "present", "effect": "NoSchedule"}


def _kinds(inventory: str, kind: str) -> list[Obj]:
    """The tenants' objects of a kind (the gate's namespace and its RBAC are no tenant's)."""
    return tenant_objects(inventory, kind)


def _kueue_config(files: dict[str, str]) -> Obj:
    values = yaml.safe_load(files["helm/values/kueue.yaml"])
    config: Obj = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    return config


def _selects(selector: Obj, labels: dict[str, str]) -> bool:
    """A LabelSelector of matchLabels and In/NotIn/Exists/DoesNotExist expressions."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        if not {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels[key] not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]:
            return False
    return True


def _tenant_limits(inventory: str) -> dict[str, int]:
    """Namespace -> the Kubernetes limit of its tenant."""
    cluster = cluster_of(inventory)
    namespaces = {
        d["metadata"]["labels"][TENANT_LABEL]: d["metadata"]["name"] for d in _kinds(inventory, "Namespace")
    }
    return {
        namespaces[t]: per[Owner.KUBERNETES].effective_limit
        for t, per in cluster.tenant_gpus.items()
        if t in namespaces and Owner.KUBERNETES in per
    }


def test_kueue_manages_jobs_without_a_queue_name_in_tenant_namespaces_only() -> None:
    for inventory in k8s_inventories():
        k8s = cluster_of(inventory).spec.kubernetes
        assert k8s is not None
        if not k8s.kueue.enabled:
            continue
        config = _kueue_config(rendered(inventory))
        assert config["manageJobsWithoutQueueName"] is True
        selector = config["managedJobsNamespaceSelector"]
        namespaces = _kinds(inventory, "Namespace")
        for namespace in namespaces:
            assert _selects(
                selector,
                {
                    "kubernetes.io/metadata.name": namespace["metadata"]["name"],
                    **namespace["metadata"]["labels"],
                },
            )
        # The system, the add-ons, Slurm on Kubernetes: never managed (the pod-based integrations
        # would otherwise hold their Deployments and StatefulSets).
        for other in ("kube-system", "kueue-system", "gpu-operator", "slurm", "default"):
            assert not _selects(selector, {"kubernetes.io/metadata.name": other}), (inventory, other)
        local = {
            (d["metadata"]["namespace"], d["metadata"]["name"]): d for d in _kinds(inventory, "LocalQueue")
        }
        for namespace in namespaces:
            name = namespace["metadata"]["name"]
            tenant = namespace["metadata"]["labels"][TENANT_LABEL]
            assert local[(name, "default")]["spec"]["clusterQueue"] == tenant


def test_examples_with_tenant_namespaces() -> None:
    assert {"superpod", "nvl72", "gke-prod"} <= {i for i in k8s_inventories() if _kinds(i, "Namespace")}


def test_tenant_namespaces_bind_their_users_group() -> None:
    """superpod (Kueue in front of Volcano): the tenant's group may edit its namespace, use Kueue's
    queues and create Volcano Jobs; nothing binds outside the tenant namespaces."""
    bindings = _kinds("superpod", "RoleBinding")
    namespaces = {d["metadata"]["name"] for d in _kinds("superpod", "Namespace")}
    roles: dict[str, set[str]] = {}
    for binding in bindings:
        namespace = binding["metadata"]["namespace"]
        assert namespace in namespaces
        assert binding["subjects"] == [
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": namespace}
        ]
        roles.setdefault(namespace, set()).add(binding["roleRef"]["name"])
    assert roles == {ns: {"edit", "kueue-batch-user-role", "vcjob-editor-role"} for ns in namespaces}
    # KAI has no role of its own; Kueue alone: edit and Kueue's.
    assert {b["roleRef"]["name"] for b in _kinds("nvl72", "RoleBinding")} == {"edit", "kueue-batch-user-role"}


def test_users_and_prefixes_as_the_authenticator_names_them(tmp_path: Path) -> None:
    def edit(cluster: dict[str, Any]) -> None:
        cluster["kubernetes"]["tenant_rbac"] = {
            "cluster_role": "admin",
            "group_prefix": "oidc:",
            "bind_users": True,
            "user_prefix": "oidc:",
        }

    files = render_files(load_cluster(variant_inventory(tmp_path, "superpod", edit)), only=["kubernetes"])
    bindings = [d for d in yaml.safe_load_all(files["kubernetes/tenants/rbac.yaml"]) if d]
    research = next(
        b
        for b in bindings
        if b["metadata"]["namespace"] == "research" and b["metadata"]["name"] == "gpucluster-tenant"
    )
    assert research["roleRef"]["name"] == "admin"
    assert [s["name"] for s in research["subjects"]] == ["oidc:research", "oidc:alice", "oidc:bob"]
    assert [s["kind"] for s in research["subjects"]] == ["Group", "User", "User"]


def test_resource_quotas_hold_each_tenant_to_its_kubernetes_limit() -> None:
    for inventory in k8s_inventories():
        quotas = {d["metadata"]["namespace"]: d["spec"]["hard"] for d in _kinds(inventory, "ResourceQuota")}
        limits = _tenant_limits(inventory)
        assert set(quotas) == {d["metadata"]["name"] for d in _kinds(inventory, "Namespace")}
        k8s = cluster_of(inventory).spec.kubernetes
        assert k8s is not None
        for namespace, hard in quotas.items():
            if k8s.device_allocation == "dra":
                per_class = {
                    k: int(v)
                    for k, v in hard.items()
                    if k.endswith(".gpucluster.io.deviceclass.resource.k8s.io/devices")
                }
                assert sum(per_class.values()) == limits[namespace], (inventory, namespace)
                closed = {k: v for k, v in hard.items() if k not in per_class}
                assert closed and set(closed.values()) == {"0"}
            elif inventory in SHARED_UNITS:
                assert hard == SHARED_UNITS[inventory][namespace], (inventory, namespace)
            else:
                assert hard == {"requests.nvidia.com/gpu": str(limits[namespace])}, (inventory, namespace)


# Quotas in the units the nodes advertise. shared-gpus: each tenant's Kubernetes limit split over
# the 16 L40S (time-sliced x4) and the 16 H100 (7 x 1g.10gb each) by their GPUs: interns 8 ->
# 4 L40S = 16 replicas and 4 H100 = 28 instances; research 24 -> 12 = 48 and 12 = 84.
SHARED_UNITS = {
    "shared-gpus": {
        "interns": {"requests.nvidia.com/gpu": "16", "requests.nvidia.com/mig-1g.10gb": "28"},
        "research": {"requests.nvidia.com/gpu": "48", "requests.nvidia.com/mig-1g.10gb": "84"},
    }
}


def test_gpu_taint_on_every_gpu_node_bare_metal_included() -> None:
    """superpod's and nvl72's Kubernetes nodes are bare metal: nothing but the rendered node patches
    taints them. Every GPU node carries the GPU taint; a Slurm-on-Kubernetes node also its owner's."""
    for inventory in k8s_inventories():
        cluster = cluster_of(inventory)
        k8s = cluster.spec.kubernetes
        assert k8s is not None
        for node in _kinds(inventory, "Node"):
            taints = node.get("spec", {}).get("taints", [])
            has_gpus = cluster.node_type(node["metadata"]["name"]).gpus is not None
            assert (GPU_TAINT in taints) == (has_gpus and k8s.gpu_taint), (
                inventory,
                node["metadata"]["name"],
            )
    assert len(_kinds("superpod", "Node")) == 32 and cluster_of("superpod").spec.cloud is None


def test_what_runs_on_gpu_nodes_tolerates_the_gpu_taint() -> None:
    """Pods admitted by Kueue (flavor tolerations), every pod of a Volcano tenant namespace (the
    admission resource group), the NodeSets, and the GPU Operator's and DRA driver's node daemons."""

    def tolerates(tolerations: list[Obj]) -> bool:
        return any(t["key"] == GPU_TAINT_KEY and t["effect"] == "NoSchedule" for t in tolerations)

    for inventory in k8s_inventories():
        files = rendered(inventory)
        for flavor in _kinds(inventory, "ResourceFlavor"):
            assert tolerates(flavor["spec"]["tolerations"])
        if "helm/values/volcano.yaml" in files:
            custom = yaml.safe_load(files["helm/values/volcano.yaml"])["custom"]
            (group,) = yaml.safe_load(custom["admission_config_override"])["resourceGroups"]
            assert tolerates(group["tolerations"]) and group["labels"] == {OWNER_LABEL: "kubernetes"}
        if "helm/values/slurm.yaml" in files:
            for nodeset in yaml.safe_load(files["helm/values/slurm.yaml"])["nodesets"].values():
                assert tolerates(nodeset["podSpec"]["tolerations"])
        if "helm/values/gpu-operator.yaml" in files:
            assert tolerates(
                yaml.safe_load(files["helm/values/gpu-operator.yaml"])["daemonsets"]["tolerations"]
            )


def test_no_gpu_taint_when_the_inventory_says_so(tmp_path: Path) -> None:
    def edit(cluster: dict[str, Any]) -> None:
        cluster["kubernetes"]["gpu_taint"] = False

    files = render_files(load_cluster(variant_inventory(tmp_path, "superpod", edit)), only=["kubernetes"])
    nodes = [d for d in yaml.safe_load_all(files["kubernetes/nodes.yaml"]) if d]
    assert nodes and not [n for n in nodes if "spec" in n]


def test_default_integrations_cover_serving() -> None:
    frameworks = _kueue_config(rendered("superpod"))["integrations"]["frameworks"]
    assert {"deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset", "batch/job"} <= set(
        frameworks
    )
    assert not layer_warnings(cluster_of("superpod"))


def test_warning_when_no_integration_covers_deployments(tmp_path: Path) -> None:
    """Valid (exit 0), but said on stderr with the file, line and key path: the tenants with
    Kubernetes GPUs whose servers would bypass their quotas."""

    def edit(cluster: dict[str, Any]) -> None:
        cluster["kubernetes"]["kueue"] = {
            "enabled": True,
            "integrations": ["batch/job", "jobset.x-k8s.io/jobset"],
        }

    directory = variant_inventory(tmp_path, "superpod", edit)
    result = run_cli("validate", str(directory))
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("warning: ")]
    where, path, reason = line.removeprefix("warning: ").split(": ", 2)
    assert where.startswith(f"{directory}/group_vars/all/cluster.yml:") and int(where.rsplit(":", 1)[1]) > 0
    assert path == "cluster.kubernetes.kueue.integrations"
    assert "no integration covers Deployments" in reason and "research, inference" in reason

    # Not without Kueue, nor without tenants that have Kubernetes GPUs.
    def no_kueue(cluster: dict[str, Any]) -> None:
        edit(cluster)
        cluster["kubernetes"]["kueue"]["enabled"] = False

    assert not layer_warnings(load_cluster(variant_inventory(tmp_path / "b", "superpod", no_kueue)))
