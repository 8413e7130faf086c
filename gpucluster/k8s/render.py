"""The `kubernetes/` and `helm/` output folders: objects to apply, Helm values per chart, and
manifests (releases and object files in install order) that the roles read."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from gpucluster import yamlout
from gpucluster.k8s import objects as obj
from gpucluster.k8s import values as val
from gpucluster.k8s import volcano
from gpucluster.k8s.gate import gate_objects
from gpucluster.k8s.mirror import chart_source, mirror_image
from gpucluster.k8s.model import ChartPin, KubernetesSpec, kubernetes_of
from gpucluster.k8s.names import ADDON_NAMESPACES
from gpucluster.k8s.owners import has_slurm_pods, pods_view, slurm_pods_view
from gpucluster.k8s.pools import pool_objects
from gpucluster.model.cluster import Cluster


def dump(documents: Iterable[Any], comment: str) -> str:
    """Deterministic YAML: one document per object, insertion order kept, header first."""
    return f"{comment}\n{yamlout.dump_all(documents)}"


@dataclass(frozen=True)
class Release:
    name: str
    role: str
    pin: ChartPin
    namespace: str
    values: dict[str, Any]
    wait_for: str | None = None  # what the role waits on after install, beyond helm --wait


def _slinky(k8s: KubernetesSpec) -> bool:
    return k8s.slurm is not None and k8s.slurm.operator == "slinky"


def _soperator(k8s: KubernetesSpec) -> bool:
    return k8s.slurm is not None and k8s.slurm.operator == "soperator"


def _addon_namespace(key: str) -> Callable[[KubernetesSpec], str]:
    return lambda k8s: ADDON_NAMESPACES[key]


def _slurm_namespace(k8s: KubernetesSpec) -> str:
    assert k8s.slurm is not None  # only rows enabled by _slinky or _soperator use it
    return k8s.slurm.namespace


def _no_values(cluster: Cluster, k8s: KubernetesSpec) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Addon:
    """One Helm release of the layer and when it is installed."""

    enabled: Callable[[KubernetesSpec], bool]
    name: str
    role: str
    version: str  # field of `KubernetesSpec.versions`
    namespace: Callable[[KubernetesSpec], str]
    values: Callable[[Cluster, KubernetesSpec], dict[str, Any]]
    wait_for: str | None = None


# In install order: each release needs the ones before it.
ADDONS: tuple[Addon, ...] = (
    Addon(
        lambda k: k.cert_manager.enabled,
        "cert-manager",
        "cert_manager",
        "cert_manager",
        _addon_namespace("cert_manager"),
        lambda c, k: val.cert_manager_values(k),
        "webhook",
    ),
    Addon(
        lambda k: k.network_operator.enabled,
        "network-operator",
        "network_operator",
        "network_operator",
        _addon_namespace("network_operator"),
        lambda c, k: val.network_operator_values(k),
        "webhook",
    ),
    Addon(
        lambda k: k.gpu_operator.enabled,
        "gpu-operator",
        "gpu_operator",
        "gpu_operator",
        _addon_namespace("gpu_operator"),
        val.gpu_operator_values,
        "clusterpolicy-ready",
    ),
    Addon(
        lambda k: k.dra.enabled,
        "dra-driver-nvidia-gpu",
        "dra_driver",
        "dra_driver",
        _addon_namespace("dra_driver"),
        val.dra_driver_values,
    ),
    Addon(
        lambda k: k.kueue.enabled,
        "kueue",
        "kueue",
        "kueue",
        _addon_namespace("kueue"),
        val.kueue_values,
        "webhook",
    ),
    Addon(
        lambda k: k.kai.enabled,
        "kai-scheduler",
        "kai_scheduler",
        "kai_scheduler",
        _addon_namespace("kai_scheduler"),
        val.kai_values,
        "webhook",
    ),
    Addon(
        lambda k: k.volcano.enabled,
        "volcano",
        "volcano",
        "volcano",
        _addon_namespace("volcano"),
        val.volcano_values,
        "webhook",
    ),
    Addon(
        _slinky,
        "slurm-operator-crds",
        "slurm_on_k8s",
        "slinky_crds",
        _addon_namespace("slinky_operator"),
        _no_values,
    ),
    Addon(
        _slinky,
        "slurm-operator",
        "slurm_on_k8s",
        "slinky_operator",
        _addon_namespace("slinky_operator"),
        lambda c, k: val.slinky_operator_values(k),
        "webhook",
    ),
    Addon(_slinky, "slurm", "slurm_on_k8s", "slinky_slurm", _slurm_namespace, val.slinky_slurm_values),
    Addon(
        _soperator,
        "soperator-crds",
        "slurm_on_k8s",
        "soperator_crds",
        _addon_namespace("soperator"),
        _no_values,
    ),
    Addon(
        _soperator,
        "soperator",
        "slurm_on_k8s",
        "soperator",
        _addon_namespace("soperator"),
        _no_values,
        "webhook",
    ),
    Addon(
        _soperator,
        "slurm-cluster",
        "slurm_on_k8s",
        "soperator_cluster",
        _slurm_namespace,
        val.soperator_cluster_values,
    ),
    Addon(
        _soperator,
        "nodesets",
        "slurm_on_k8s",
        "soperator_nodesets",
        _slurm_namespace,
        val.soperator_nodesets_values,
    ),
)


def releases(cluster: Cluster, k8s: KubernetesSpec) -> list[Release]:
    """Every Helm release, in install order (each needs the ones before it)."""
    return [
        Release(
            addon.name,
            addon.role,
            getattr(k8s.versions, addon.version),
            addon.namespace(k8s),
            addon.values(cluster, k8s),
            addon.wait_for,
        )
        for addon in ADDONS
        if addon.enabled(k8s)
    ]


# The accounts of the Slurm that runs in Kubernetes (Slinky with accounting): the tenants'
# `slurm-on-kubernetes` numbers, in the format of slurm/accounts.yaml.
SLINKY_ACCOUNTS_FILE = "kubernetes/slinky/accounts.yaml"
SLINKY_RELEASE = "slurm"


def has_slinky_accounts(k8s: KubernetesSpec) -> bool:
    return _slinky(k8s) and k8s.slurm is not None and k8s.slurm.accounting


def slinky_accounts(cluster: Cluster) -> str:
    """desired_associations of the Slurm-on-Kubernetes view: every tenant, with its
    `slurm-on-kubernetes` numbers (zero where it has none there, as Cluster.quota says)."""
    from gpucluster.slurm.render import render_accounts

    return render_accounts(slurm_pods_view(cluster))


def slinky_accounts_target(release: Release) -> dict[str, Any]:
    """Where the slurm_on_k8s role applies SLINKY_ACCOUNTS_FILE once the `slurm` release is up: in the
    slurmctld container (its image has sacctmgr and python3), after slurmdbd is ready. The chart names
    the Controller and Accounting objects after the release (`slurm.fullname`), and the operator
    labels their pods `app.kubernetes.io/name: slurmctld|slurmdbd`, `app.kubernetes.io/instance: <name>`.
    """
    instance = f"app.kubernetes.io/instance={release.name}"
    return {
        "file": SLINKY_ACCOUNTS_FILE,
        "namespace": release.namespace,
        "controller_selector": ["app.kubernetes.io/name=slurmctld", instance],
        "container": "slurmctld",
        "accounting_selector": ["app.kubernetes.io/name=slurmdbd", instance],
    }


def release_manifest(cluster: Cluster, k8s: KubernetesSpec) -> dict[str, Any]:
    entries = []
    for release in releases(cluster, k8s):
        chart, repo = chart_source(release.pin, k8s.registry_mirror)
        entry: dict[str, Any] = {
            "name": release.name,
            "role": release.role,
            "chart": chart,
            "repo": repo,
            "version": release.pin.version,
            "namespace": release.namespace,
            "values_file": f"helm/values/{release.name}.yaml",
        }
        if release.wait_for:
            entry["wait_for"] = release.wait_for
        if release.name == SLINKY_RELEASE and has_slinky_accounts(k8s):
            entry["accounts"] = slinky_accounts_target(release)
        entries.append(entry)
    return {"cluster": cluster.name, "kubernetes_version": k8s.version, "releases": entries}


@dataclass(frozen=True)
class ObjectFile:
    path: str
    role: str
    documents: list[dict[str, Any]]
    retry: bool = False  # served by a webhook that can refuse calls right after install


def object_files(cluster: Cluster, k8s: KubernetesSpec) -> list[ObjectFile]:
    """Object files in apply order (namespaces before what lives in them).

    Node patches cover every Kubernetes node; everything about Kueue, KAI, tenants and DRA is made
    from the view of the Kubernetes-owned hosts (owners.pods_view): their GPUs, fabric and node types,
    and the tenants' `kubernetes` numbers. Slurm on Kubernetes is in the Helm values (values.py).
    """
    files: list[ObjectFile] = []
    pods = pods_view(cluster)
    if k8s.network_operator.enabled:
        policy = obj.nic_cluster_policy(
            k8s, partial(mirror_image, k8s.registry_mirror), slurm_pods=has_slurm_pods(cluster)
        )
        files.append(ObjectFile("kubernetes/network/nic-cluster-policy.yaml", "network_operator", [policy]))
    files.append(ObjectFile("kubernetes/nodes.yaml", "gpu_workloads", obj.node_objects(cluster, k8s)))
    gate = gate_objects(cluster, k8s)
    if gate:
        files.append(ObjectFile("kubernetes/gate.yaml", "gpu_workloads", gate))
    pools = pool_objects(cluster)
    if pools:
        files.append(ObjectFile("kubernetes/pools/rbac.yaml", "gpu_workloads", pools))
    namespaces = obj.tenant_namespaces(pods, k8s)
    if namespaces:
        files.append(ObjectFile("kubernetes/namespaces.yaml", "gpu_workloads", namespaces))
        files.append(
            ObjectFile("kubernetes/tenants/rbac.yaml", "gpu_workloads", obj.tenant_role_bindings(pods, k8s))
        )
        files.append(
            ObjectFile("kubernetes/tenants/quotas.yaml", "gpu_workloads", obj.tenant_quotas(pods, k8s))
        )
    if k8s.dra.enabled:
        files.append(
            ObjectFile("kubernetes/dra/device-classes.yaml", "gpu_workloads", obj.device_classes(pods))
        )
        files.append(
            ObjectFile(
                "kubernetes/dra/resource-claim-templates.yaml",
                "gpu_workloads",
                obj.resource_claim_templates(pods),
            )
        )
        if k8s.dra.compute_domains and pods.blocks:
            files.append(
                ObjectFile("kubernetes/dra/compute-domains.yaml", "gpu_workloads", obj.compute_domains(pods))
            )
    if k8s.kueue.enabled:
        if obj.kueue_places_pods(pods, k8s):
            files.append(
                ObjectFile(
                    "kubernetes/kueue/topology.yaml", "gpu_workloads", [obj.kueue_topology(pods)], True
                )
            )
        files.append(
            ObjectFile(
                "kubernetes/kueue/resource-flavors.yaml",
                "gpu_workloads",
                obj.resource_flavors(pods, k8s),
                True,
            )
        )
        if obj.leaf_tenants(pods):
            files.append(
                ObjectFile(
                    "kubernetes/kueue/cohorts.yaml", "gpu_workloads", obj.kueue_cohorts(pods, k8s), True
                )
            )
            files.append(
                ObjectFile(
                    "kubernetes/kueue/cluster-queues.yaml",
                    "gpu_workloads",
                    obj.cluster_queues(pods, k8s),
                    True,
                )
            )
            files.append(
                ObjectFile(
                    "kubernetes/kueue/local-queues.yaml", "gpu_workloads", obj.local_queues(pods), True
                )
            )
    if k8s.volcano.enabled and obj.leaf_tenants(pods):
        files.append(
            ObjectFile(
                "kubernetes/volcano/queues.yaml", "gpu_workloads", volcano.volcano_queues(pods, k8s), True
            )
        )
    if k8s.volcano.enabled and volcano.uses_hypernodes(pods, k8s):
        files.append(
            ObjectFile("kubernetes/volcano/hypernodes.yaml", "gpu_workloads", volcano.hypernodes(pods), True)
        )
    if k8s.kai.enabled:
        if obj.has_topology(pods):
            files.append(
                ObjectFile("kubernetes/kai/topology.yaml", "gpu_workloads", [obj.kai_topology(pods)], True)
            )
        if obj.leaf_tenants(pods):
            files.append(
                ObjectFile("kubernetes/kai/queues.yaml", "gpu_workloads", obj.kai_queues(pods, k8s), True)
            )
    return [f for f in files if f.documents]


def sample_files(cluster: Cluster, k8s: KubernetesSpec) -> list[ObjectFile]:
    """Workloads that show the layer working, created only on request (gpu_workloads_samples): with
    Volcano, a gang Job of two whole GPU nodes in a tenant's namespace and queue."""
    files = []
    if k8s.volcano.enabled:
        image = mirror_image(k8s.registry_mirror, volcano.SAMPLE_IMAGE)
        job = volcano.sample_gang_job(pods_view(cluster), k8s, image)
        if job is not None:
            files.append(ObjectFile("kubernetes/samples/volcano-gang-job.yaml", "gpu_workloads", [job]))
    return files


def _entry(f: ObjectFile) -> dict[str, Any]:
    return {
        "file": f.path,
        "role": f.role,
        "retry": f.retry,
        "kinds": sorted({d["kind"] for d in f.documents}),
    }


def object_manifest(cluster: Cluster, k8s: KubernetesSpec) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "cluster": cluster.name,
        "files": [_entry(f) for f in object_files(cluster, k8s)],
    }
    samples = sample_files(cluster, k8s)
    if samples:
        manifest["samples"] = [_entry(f) for f in samples]
    return manifest


def _header(cluster: Cluster) -> str:
    # Imported here: gpucluster.render imports this module to register its renderers.
    from gpucluster.render.templating import header

    return header(cluster.name)


def render_kubernetes(cluster: Cluster) -> dict[str, str]:
    k8s = kubernetes_of(cluster)
    if k8s is None:
        return {}
    comment = _header(cluster)
    files = {
        f.path: dump(f.documents, comment) for f in [*object_files(cluster, k8s), *sample_files(cluster, k8s)]
    }
    files["kubernetes/manifest.yaml"] = dump([object_manifest(cluster, k8s)], comment)
    if has_slinky_accounts(k8s):
        files[SLINKY_ACCOUNTS_FILE] = slinky_accounts(cluster)
    return files


def render_helm(cluster: Cluster) -> dict[str, str]:
    k8s = kubernetes_of(cluster)
    if k8s is None:
        return {}
    comment = _header(cluster)
    files = {"helm/releases.yaml": dump([release_manifest(cluster, k8s)], comment)}
    for release in releases(cluster, k8s):
        files[f"helm/values/{release.name}.yaml"] = values_file(release.values, comment)
    return files


def values_file(values: dict[str, Any], comment: str) -> str:
    """A Helm values file both Helm 3 and Helm 4 read as the same values: exactly one YAML document
    and no document marker. Helm 4 reads a values file as a stream of documents (it merges them, and
    refuses `--- {}`: "invalid Yaml document separator"), Helm 3 only its first document."""
    return f"{comment}\n{yamlout.dump(values)}"
