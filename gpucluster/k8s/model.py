"""The `kubernetes:` section of the cluster file: which add-ons, their pinned charts, and how
GPUs are handed to pods. One model with the Slurm side: tenants, node types and fabric are shared.
(No `from __future__ import annotations`: see gpucluster/model/spec.py.)"""

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, StrictBool

from gpucluster.model.base import Strict, Update, spec

if TYPE_CHECKING:
    from gpucluster.model.cluster import Cluster

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
KUBE_VERSION_RE = r"^1\.\d{2}(\.\d+)?$"


class ChartPin(Strict):
    chart: str = spec(
        "Chart reference: `oci://registry/path/name`, or a chart name when `repo` is given.",
        Update.KUBERNETES,
    )
    repo: str | None = spec(
        "Helm repository URL for charts not published as OCI artifacts.", Update.KUBERNETES, default=None
    )
    version: Annotated[str, Field(min_length=1)] = spec("Chart version to install.", Update.KUBERNETES)


def _pin(chart: str, version: str, repo: str | None = None) -> ChartPin:
    return ChartPin(chart=chart, version=version, repo=repo)


NGC = "https://helm.ngc.nvidia.com/nvidia"
SOPERATOR_OCI = "oci://cr.eu-north1.nebius.cloud/soperator"
VOLCANO_CHARTS = "https://volcano-sh.github.io/helm-charts"


class Versions(Strict):
    """One table of every chart the layer installs; the defaults are the tested pins."""

    cert_manager: ChartPin = spec(
        "jetstack cert-manager.",
        Update.KUBERNETES,
        default_factory=lambda: _pin("cert-manager", "v1.21.1", "https://charts.jetstack.io"),
    )
    network_operator: ChartPin = spec(
        "NVIDIA Network Operator.",
        Update.KUBERNETES,
        default_factory=lambda: _pin("network-operator", "26.4.1", NGC),
    )
    gpu_operator: ChartPin = spec(
        "NVIDIA GPU Operator.",
        Update.KUBERNETES,
        default_factory=lambda: _pin("gpu-operator", "v26.7.0", NGC),
    )
    dra_driver: ChartPin = spec(
        "DRA driver for NVIDIA GPUs.",
        Update.KUBERNETES,
        default_factory=lambda: _pin(
            "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu", "0.4.1"
        ),
    )
    kueue: ChartPin = spec(
        "Kueue.",
        Update.KUBERNETES,
        default_factory=lambda: _pin("oci://registry.k8s.io/kueue/charts/kueue", "0.19.2"),
    )
    kai_scheduler: ChartPin = spec(
        "KAI Scheduler.",
        Update.KUBERNETES,
        default_factory=lambda: _pin("oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler", "v0.17.0"),
    )
    volcano: ChartPin = spec(
        "Volcano.",
        Update.KUBERNETES,
        default_factory=lambda: _pin("volcano", "1.15.1", VOLCANO_CHARTS),
    )
    slinky_crds: ChartPin = spec(
        "Slinky CRDs (keep equal to slinky_operator).",
        Update.KUBERNETES,
        default_factory=lambda: _pin("oci://ghcr.io/slinkyproject/charts/slurm-operator-crds", "1.2.1"),
    )
    slinky_operator: ChartPin = spec(
        "Slinky slurm-operator.",
        Update.KUBERNETES,
        default_factory=lambda: _pin("oci://ghcr.io/slinkyproject/charts/slurm-operator", "1.2.1"),
    )
    slinky_slurm: ChartPin = spec(
        "Slinky `slurm` chart (the Slurm cluster).",
        Update.KUBERNETES,
        default_factory=lambda: _pin("oci://ghcr.io/slinkyproject/charts/slurm", "1.2.1"),
    )
    soperator_crds: ChartPin = spec(
        "Soperator CRDs.",
        Update.KUBERNETES,
        default_factory=lambda: _pin(f"{SOPERATOR_OCI}/helm-soperator-crds", "4.1.7"),
    )
    soperator: ChartPin = spec(
        "Soperator operator.",
        Update.KUBERNETES,
        default_factory=lambda: _pin(f"{SOPERATOR_OCI}/helm-soperator", "4.1.7"),
    )
    soperator_cluster: ChartPin = spec(
        "Soperator `slurm-cluster` chart.",
        Update.KUBERNETES,
        default_factory=lambda: _pin(f"{SOPERATOR_OCI}/helm-slurm-cluster", "4.1.7"),
    )
    soperator_nodesets: ChartPin = spec(
        "Soperator `nodesets` chart.",
        Update.KUBERNETES,
        default_factory=lambda: _pin(f"{SOPERATOR_OCI}/helm-nodesets", "4.1.7"),
    )


class RegistryMirror(Strict):
    """Air-gapped sites: every image and chart comes from the site's own registry."""

    images: Annotated[str, Field(pattern=r"^[a-z0-9.-]+(:\d+)?(/[a-z0-9._-]+)*$")] = spec(
        "Image registry prefix; `nvcr.io/nvidia/gpu-operator` becomes `<images>/nvcr.io/nvidia/gpu-operator`.",
        Update.KUBERNETES,
    )
    charts: Annotated[str, Field(pattern=r"^[a-z0-9.-]+(:\d+)?(/[a-z0-9._-]+)*$")] = spec(
        "OCI registry prefix for charts; every chart becomes `oci://<charts>/<chart name>`.",
        Update.KUBERNETES,
    )
    pull_secret: Annotated[str, Field(pattern=DNS_LABEL)] | None = spec(
        "Image pull secret (already present in each add-on namespace) for the mirror.",
        Update.KUBERNETES,
        default=None,
    )


class CertManagerSettings(Strict):
    enabled: StrictBool = spec(
        "Install cert-manager (Slinky and Soperator need it; skip if the cluster already runs one).",
        Update.KUBERNETES,
        default=True,
    )


class GpuOperatorSettings(Strict):
    enabled: StrictBool = spec("Install the NVIDIA GPU Operator.", Update.KUBERNETES, default=True)
    driver: Literal["operator", "host", "cloud"] = spec(
        "Who owns the GPU driver: the operator's driver container, the host image, or the cloud "
        "(GKE/managed pools); `host`/`cloud` set driver.enabled=false.",
        Update.KUBERNETES,
        default="operator",
    )
    driver_version: str | None = spec(
        "Driver container version when `driver: operator`; default: the chart's.",
        Update.KUBERNETES,
        default=None,
    )
    toolkit: StrictBool = spec(
        "Install the NVIDIA Container Toolkit (false where the node image ships it).",
        Update.KUBERNETES,
        default=True,
    )
    mig_strategy: Literal["none", "single", "mixed"] | None = spec(
        "How the device plugin exposes MIG instances: `mixed` (nvidia.com/mig-<profile>), `single` "
        "(nvidia.com/gpu; one profile on every GPU of a node), `none`. Default: mixed where "
        "Kubernetes owns nodes of a node type with gpus.sharing.mig, else none.",
        Update.KUBERNETES,
        default=None,
    )
    nfd: StrictBool = spec(
        "Deploy Node Feature Discovery with the GPU Operator (only one NFD per cluster).",
        Update.KUBERNETES,
        default=True,
    )
    dcgm_service_monitor: StrictBool = spec(
        "Create a Prometheus ServiceMonitor for dcgm-exporter (needs the Prometheus Operator CRDs).",
        Update.KUBERNETES,
        default=False,
    )


class DraSettings(Strict):
    enabled: StrictBool = spec("Install the DRA driver for NVIDIA GPUs.", Update.KUBERNETES, default=False)
    compute_domains: StrictBool = spec(
        "Enable ComputeDomains (multi-node NVLink, IMEX) and create one per NVLink block.",
        Update.KUBERNETES,
        default=False,
    )
    driver_root: str | None = spec(
        "nvidiaDriverRoot; default from gpu_operator.driver and platform (`/run/nvidia/driver`, `/`, "
        "`/home/kubernetes/bin/nvidia` on GKE).",
        Update.KUBERNETES,
        default=None,
    )


class KueueSettings(Strict):
    enabled: StrictBool = spec(
        "Install Kueue and create flavors/queues from node types and tenants.",
        Update.KUBERNETES,
        default=True,
    )
    cohort: Annotated[str, Field(pattern=DNS_LABEL)] = spec(
        "Root Cohort that top-level tenants' ClusterQueues share.", Update.KUBERNETES, default="gpucluster"
    )
    wait_for_pods_ready: StrictBool = spec(
        "All-or-nothing admission (waitForPodsReady) for gang workloads.", Update.KUBERNETES, default=True
    )
    integrations: list[
        Literal[
            "batch/job",
            "jobset.x-k8s.io/jobset",
            "kubeflow.org/pytorchjob",
            "kubeflow.org/mpijob",
            "ray.io/rayjob",
            "ray.io/raycluster",
            "leaderworkerset.x-k8s.io/leaderworkerset",
            "pod",
            "deployment",
            "statefulset",
        ]
    ] = spec(
        "Job frameworks Kueue manages: batch jobs, and serving (`deployment`, `statefulset`, "
        "LeaderWorkerSets) so that a tenant's servers pass through its quota too. A framework whose CRD "
        "is not installed is skipped by Kueue.",
        Update.KUBERNETES,
        default_factory=lambda: [
            "batch/job",
            "jobset.x-k8s.io/jobset",
            "kubeflow.org/pytorchjob",
            "deployment",
            "statefulset",
            "leaderworkerset.x-k8s.io/leaderworkerset",
        ],
    )


class KaiSettings(Strict):
    enabled: StrictBool = spec(
        "Install the KAI Scheduler as the gang scheduler of the Kubernetes-owned GPU nodes and create "
        "its queues from tenants (not with Volcano: one gang scheduler).",
        Update.KUBERNETES,
        default=False,
    )
    parent_queue: Annotated[str, Field(pattern=DNS_LABEL)] = spec(
        "Parent queue for top-level tenants' leaf queues.", Update.KUBERNETES, default="gpucluster"
    )


class VolcanoSettings(Strict):
    enabled: StrictBool = spec(
        "Install Volcano as the gang scheduler of the Kubernetes-owned GPU nodes: tenants' queues, the "
        "fabric as HyperNodes, every pod of a tenant namespace scheduled by Volcano (not with KAI: one "
        "gang scheduler).",
        Update.KUBERNETES,
        default=False,
    )
    parent_queue: Annotated[str, Field(pattern=DNS_LABEL)] = spec(
        "Queue (under Volcano's `root`) holding the Kubernetes-owned GPUs, parent of the top-level "
        "tenants' queues.",
        Update.KUBERNETES,
        default="gpucluster",
    )
    reserve_quota: StrictBool = spec(
        "Each tenant's quota is also its queue's `guarantee`: reserved, never lent to another tenant "
        "even while idle (a limit above the quota then borrows only GPUs no tenant is guaranteed). "
        "false: the quota is `deserved` only, lent while idle and reclaimed, as with Kueue and KAI.",
        Update.KUBERNETES,
        default=False,
    )
    network_topology: StrictBool = spec(
        "Network-topology-aware placement: the fabric tree and NVLink blocks of the Kubernetes-owned "
        "nodes as HyperNodes, and the scheduler's network-topology-aware plugin.",
        Update.KUBERNETES,
        default=True,
    )


class NetworkOperatorSettings(Strict):
    enabled: StrictBool = spec(
        "Install the NVIDIA Network Operator and a NicClusterPolicy (InfiniBand/RoCE RDMA).",
        Update.KUBERNETES,
        default=False,
    )
    nfd: StrictBool = spec(
        "Deploy NFD with the Network Operator (only one NFD per cluster; the GPU Operator's is the usual one).",
        Update.KUBERNETES,
        default=False,
    )
    doca_driver_version: str | None = spec(
        "DOCA-OFED driver container version for NicClusterPolicy.ofedDriver; omit to keep the host's driver.",
        Update.KUBERNETES,
        default=None,
    )
    rdma_shared_device_plugin_version: str | None = spec(
        "k8s-rdma-shared-dev-plugin image version for NicClusterPolicy (required when enabled; from the "
        "Network Operator release notes of the pinned chart).",
        Update.KUBERNETES,
        default=None,
    )
    rdma_interfaces: list[Annotated[str, Field(pattern=r"^[a-z0-9_.-]+$")]] = spec(
        "Netdevices shared as the `rdma/rdma_shared_device_a` resource (e.g. ibp12s0).",
        Update.KUBERNETES,
        default_factory=list,
    )


class TenantRbac(Strict):
    """RoleBindings of each tenant namespace: the tenant's users' group (as the API server's
    authenticator names groups) gets `cluster_role`, plus the roles Kueue and Volcano ship for
    submitting their workloads."""

    cluster_role: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?$")] = spec(
        "ClusterRole bound in each tenant namespace (Kubernetes' `edit`: workloads, no RBAC or quota).",
        Update.KUBERNETES,
        default="edit",
    )
    group_prefix: str = spec(
        "Prefix of group names in the cluster's authentication (e.g. `oidc:`): a tenant's users are the "
        "group `<group_prefix><tenant name>`.",
        Update.KUBERNETES,
        default="",
    )
    bind_users: StrictBool = spec(
        "Also bind each of the tenant's `users` by name (`<user_prefix><user>`), for clusters whose "
        "authentication gives no group per tenant.",
        Update.KUBERNETES,
        default=False,
    )
    user_prefix: str = spec(
        "Prefix of user names in the cluster's authentication (e.g. `oidc:`), with bind_users.",
        Update.KUBERNETES,
        default="",
    )


class SlurmOnKubernetes(Strict):
    operator: Literal["slinky", "soperator"] = spec(
        "Slurm-on-Kubernetes implementation.", Update.KUBERNETES, default="slinky"
    )
    namespace: Annotated[str, Field(pattern=DNS_LABEL)] = spec(
        "Namespace of the Slurm cluster.", Update.KUBERNETES, default="slurm"
    )
    accounting: StrictBool = spec(
        "Run slurmdbd (Slinky needs a MariaDB reachable at `database_host`).",
        Update.KUBERNETES,
        default=False,
    )
    database_host: str | None = spec(
        "MariaDB/MySQL host for slurmdbd when accounting is on.", Update.KUBERNETES, default=None
    )
    database_password_secret: Annotated[str, Field(pattern=DNS_LABEL)] = spec(
        "Secret (key `password`) holding the slurmdbd database password.",
        Update.KUBERNETES,
        default="slurm-db-password",
    )
    login_replicas: Annotated[int, Field(ge=0, le=16)] = spec(
        "Login pods (sackd + sshd).", Update.KUBERNETES, default=1
    )
    jail_pvc: Annotated[str, Field(pattern=DNS_LABEL)] = spec(
        "Soperator: PersistentVolumeClaim of the shared jail (root file system of the workers).",
        Update.KUBERNETES,
        default="jail-pvc",
    )
    spool_storage_class: str | None = spec(
        "Soperator: StorageClass of each worker's spool volume; default: the cluster's default class.",
        Update.KUBERNETES,
        default=None,
    )


class KubernetesSpec(Strict):
    version: Annotated[str, Field(pattern=KUBE_VERSION_RE)] = spec(
        "Kubernetes version of the target cluster (e.g. 1.34); checked against chart requirements.",
        Update.KUBERNETES,
    )
    platform: Literal["generic", "gke", "eks", "aks"] = spec(
        "Where the cluster runs; decides driver paths and defaults.", Update.KUBERNETES, default="generic"
    )
    versions: Versions = spec("Chart references and versions.", Update.KUBERNETES, default_factory=Versions)
    registry_mirror: RegistryMirror | None = spec(
        "Registry mirror for air-gapped sites.", Update.KUBERNETES, default=None
    )
    prometheus_operator: StrictBool = spec(
        "A Prometheus Operator runs in the cluster (its ServiceMonitor CRD exists): the GPU Operator's "
        "dcgm-exporter and Kueue's metrics get their ServiceMonitors.",
        Update.KUBERNETES,
        default=False,
    )
    device_allocation: Literal["device-plugin", "dra"] = spec(
        "How pods get GPUs: the GPU Operator's device plugin (nvidia.com/gpu) or DRA ResourceClaims. Never both.",
        Update.KUBERNETES,
        default="device-plugin",
    )
    gpu_taint: StrictBool = spec(
        "GPU nodes carry the `nvidia.com/gpu=present:NoSchedule` taint: cloud pools are created with it, "
        "and gpu_workloads puts it on every GPU node of the inventory (bare metal too), so only pods that "
        "tolerate it land there (Kueue flavors, Volcano's tenant resource group, NodeSets and the node "
        "daemons add the toleration).",
        Update.KUBERNETES,
        default=True,
    )
    pod_security: Literal["privileged", "baseline", "restricted"] = spec(
        "PodSecurity level enforced in tenant namespaces.", Update.KUBERNETES, default="baseline"
    )
    tenant_rbac: TenantRbac = spec(
        "Who may use each tenant namespace.", Update.KUBERNETES, default_factory=lambda: TenantRbac()
    )
    cert_manager: CertManagerSettings = spec(
        "cert-manager.", Update.KUBERNETES, default_factory=CertManagerSettings
    )
    network_operator: NetworkOperatorSettings = spec(
        "NVIDIA Network Operator (optional).", Update.KUBERNETES, default_factory=NetworkOperatorSettings
    )
    gpu_operator: GpuOperatorSettings = spec(
        "NVIDIA GPU Operator.", Update.KUBERNETES, default_factory=GpuOperatorSettings
    )
    dra: DraSettings = spec("DRA driver for NVIDIA GPUs.", Update.KUBERNETES, default_factory=DraSettings)
    kueue: KueueSettings = spec("Kueue.", Update.KUBERNETES, default_factory=KueueSettings)
    kai: KaiSettings = spec("KAI Scheduler.", Update.KUBERNETES, default_factory=KaiSettings)
    volcano: VolcanoSettings = spec("Volcano.", Update.KUBERNETES, default_factory=VolcanoSettings)
    slurm: SlurmOnKubernetes | None = spec(
        "Slurm on Kubernetes (Slinky or Soperator); omit for none.", Update.KUBERNETES, default=None
    )

    @property
    def gang_scheduler(self) -> Literal["kai", "volcano"] | None:
        """The one scheduler binding the pods of the Kubernetes-owned GPU nodes, besides kube-scheduler
        (checks refuse both)."""
        if self.volcano.enabled:
            return "volcano"
        return "kai" if self.kai.enabled else None

    @property
    def version_tuple(self) -> tuple[int, int, int]:
        parts = [int(p) for p in self.version.split(".")]
        return (parts[0], parts[1], parts[2] if len(parts) > 2 else 0)


def kubernetes_of(cluster: "Cluster") -> KubernetesSpec | None:
    """The cluster's `kubernetes:` section as this layer's model (gpucluster.layers validated it)."""
    section = cluster.spec.kubernetes
    assert section is None or isinstance(section, KubernetesSpec)
    return section
