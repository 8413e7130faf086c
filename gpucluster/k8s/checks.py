"""Cross-checks of the `kubernetes:` section: the constraints the charts and APIs impose, caught
before anything reaches a cluster (each one names the inventory key to change)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpucluster.errors import Problem, format_path
from gpucluster.k8s.host_software import host_stacks
from gpucluster.k8s.model import KubernetesSpec, kubernetes_of
from gpucluster.k8s.names import ADDON_NAMESPACES, hypernode_domains, topology_levels
from gpucluster.k8s.owners import pods_view
from gpucluster.model.base import Owner

if TYPE_CHECKING:  # the cluster module calls check_kubernetes; keep this import type-only
    from gpucluster.model.cluster import Cluster

K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# Oldest Kubernetes each part accepts, and why.
MIN_KUBE_DRA = (1, 34)  # resource.k8s.io/v1 (DeviceClass, ResourceClaimTemplate) is GA in 1.34
MIN_KUBE_CHARTS = (1, 29)  # kubeVersion of the Kueue and Slinky charts
COMPUTE_DOMAIN_MIN_DRIVER = (570, 158, 1)
MAX_TOPOLOGY_LEVELS = 16  # Kueue Topology.spec.levels maxItems
# Oldest Slurm each Slinky minor release runs, and the Slurm of the images its `slurm` chart ships:
# the compatibility matrix of slurm-operator's README (1.0-1.2: Slurm 25.11, data parser v0.0.44;
# the charts' images: 1.0.5 and 1.1.2 25.11, 1.2.1 26.05), and the 1.3 release candidates' notes
# (Slurm 26.05). Every row is past what GPU NodeSets need besides (gres.conf AutoDetect=nvidia: 24.11).
SLINKY_SLURM = {
    (1, 0): ((25, 11), "25.11"),
    (1, 1): ((25, 11), "25.11"),
    (1, 2): ((25, 11), "26.05"),
    (1, 3): ((26, 5), "26.05"),
}


def slinky_slurm_range(pin: str) -> tuple[tuple[int, int], str]:
    """(oldest Slurm, Slurm of the images) of a Slinky chart version; a release newer than the
    table is held to its newest row."""
    parts = _version(pin.removeprefix("v").split("-")[0]) or (0, 0)
    release = (parts[0], parts[1] if len(parts) > 1 else 0)
    known = [key for key in sorted(SLINKY_SLURM) if key <= release]
    return SLINKY_SLURM[known[-1] if known else min(SLINKY_SLURM)]


def _dotted(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]:02d}"


def _version(text: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in text.split("."))
    except ValueError:
        return None


class _KubernetesChecker:
    def __init__(self, cluster: Cluster, k8s: KubernetesSpec) -> None:
        self.cluster = cluster
        self.k8s = k8s
        self.file = cluster.inventory.cluster_file
        self.problems: list[Problem] = []

    def fail(self, parts: Sequence[str | int], message: str) -> None:
        self.problems.append(self.file.problem(format_path(["cluster", "kubernetes", *parts]), message))

    def fail_outside(self, parts: Sequence[str | int], message: str) -> None:
        self.problems.append(self.file.problem(format_path(["cluster", *parts]), message))

    def run(self) -> list[Problem]:
        self.check_gang_scheduler()
        self.check_versions()
        self.check_allocation()
        self.check_nfd()
        self.check_driver()
        self.check_compute_domains()
        self.check_slurm()
        self.check_owners()
        self.check_names()
        self.check_topology()
        self.check_storage()
        self.check_sharing()
        return self.problems

    def check_sharing(self) -> None:
        """Shared GPUs of the Kubernetes-owned nodes (gpucluster.k8s.sharing)."""
        from gpucluster.k8s.sharing import sharing_problems

        for parts, message in sharing_problems(pods_view(self.cluster), self.k8s):
            self.fail_outside(parts, message)

    def check_gang_scheduler(self) -> None:
        """One gang scheduler binds the pods of the Kubernetes-owned GPU nodes: KAI and Volcano would
        both place pods on the same GPUs, each counting only its own (the double scheduling that one
        owner per node exists to prevent)."""
        k8s = self.k8s
        if k8s.kai.enabled and k8s.volcano.enabled:
            self.fail(
                ["volcano", "enabled"],
                "KAI (kubernetes.kai.enabled) and Volcano are both enabled: two schedulers would bind "
                "pods on the same GPUs; choose one gang scheduler for the Kubernetes-owned nodes "
                "(Kueue may admit in front of either)",
            )
        if not k8s.volcano.enabled:
            return
        reserved = {"root", "default"} | {t.name for t in self.cluster.spec.tenants}
        if k8s.volcano.parent_queue in reserved:
            self.fail(
                ["volcano", "parent_queue"],
                f"queue `{k8s.volcano.parent_queue}` is Volcano's own (root, default) or a tenant's",
            )
        for index, tenant in enumerate(self.cluster.spec.tenants):
            if tenant.name in ("root", "default"):
                self.fail_outside(
                    ["tenants", index, "name"],
                    f"`{tenant.name}` is a queue Volcano makes itself; give the tenant another name",
                )
        if k8s.volcano.network_topology:
            for name, units in sorted(hypernode_domains(pods_view(self.cluster)).items()):
                if len(units) > 1:
                    self.fail_outside(
                        ["fabric"],
                        f"{' and '.join(units)} would both be the Volcano HyperNode `{name}`: rename "
                        "one, or set kubernetes.volcano.network_topology: false",
                    )

    def check_storage(self) -> None:
        """A filesystem's Kubernetes volume needs Slurm on Kubernetes to mount it; Soperator's charts
        take no extra objects, so there the claim must exist already."""
        slurm = self.k8s.slurm
        for index, fs in enumerate(self.cluster.spec.storage):
            volume = fs.kubernetes
            if volume is None:
                continue
            parts: list[str | int] = ["storage", index, "kubernetes"]
            if slurm is None:
                self.fail_outside(
                    parts, "no Slurm on Kubernetes (`kubernetes.slurm`) mounts it: omit it or add one"
                )
            elif slurm.operator == "soperator" and volume.claim is None:
                self.fail_outside(
                    [*parts, "storage_class"],
                    "Soperator: name an existing claim in its namespace (`claim`); gpucluster renders "
                    "claims through Slinky's chart only",
                )

    def check_versions(self) -> None:
        k8s = self.k8s
        kube = k8s.version_tuple[:2]
        if kube < MIN_KUBE_CHARTS:
            self.fail(
                ["version"],
                f"Kubernetes {k8s.version} is older than 1.29, the oldest the Kueue and Slinky charts accept",
            )
        if k8s.dra.enabled and kube < MIN_KUBE_DRA:
            self.fail(
                ["version"],
                f"the DRA driver and resource.k8s.io/v1 objects need Kubernetes >= 1.34 (this cluster: {k8s.version})",
            )
        crds, operator = k8s.versions.slinky_crds, k8s.versions.slinky_operator
        if k8s.slurm and k8s.slurm.operator == "slinky" and crds.version != operator.version:
            self.fail(
                ["versions", "slinky_crds", "version"],
                f"Slinky CRD chart {crds.version} differs from the operator chart {operator.version}; keep them equal",
            )

    def check_allocation(self) -> None:
        k8s = self.k8s
        if k8s.device_allocation == "dra":
            if not k8s.dra.enabled:
                self.fail(["dra", "enabled"], "device_allocation is `dra` but the DRA driver is not enabled")
            if k8s.gpu_operator.mig_strategy not in (None, "none"):
                self.fail(
                    ["gpu_operator", "mig_strategy"],
                    "mig_strategy applies to the device plugin, which is off with device_allocation `dra` "
                    "(DRA hands out MIG devices through the mig.nvidia.com DeviceClass); use `none`",
                )
        elif not k8s.gpu_operator.enabled and k8s.platform != "gke":
            self.fail(
                ["gpu_operator", "enabled"],
                "device_allocation `device-plugin` needs the GPU Operator's device plugin "
                "(or set device_allocation: dra)",
            )

    def check_nfd(self) -> None:
        gpu, net = self.k8s.gpu_operator, self.k8s.network_operator
        if gpu.enabled and gpu.nfd and net.enabled and net.nfd:
            self.fail(
                ["network_operator", "nfd"],
                "only one Node Feature Discovery per cluster: the GPU Operator already deploys it (set nfd: false here)",
            )
        if net.enabled and not net.rdma_shared_device_plugin_version:
            self.fail(
                ["network_operator", "rdma_shared_device_plugin_version"],
                "the NicClusterPolicy needs the RDMA shared device plugin version of the pinned Network Operator",
            )
        if net.enabled and not net.rdma_interfaces:
            self.fail(
                ["network_operator", "rdma_interfaces"], "name the RDMA netdevices to share (e.g. [ibp12s0])"
            )
        if net.enabled and not net.nfd and not (gpu.enabled and gpu.nfd):
            self.fail(
                ["network_operator", "nfd"],
                "the Network Operator needs NFD labels: enable nfd here or in gpu_operator",
            )

    def check_driver(self) -> None:
        gpu = self.k8s.gpu_operator
        if gpu.driver_version is not None and gpu.driver != "operator":
            self.fail(
                ["gpu_operator", "driver_version"],
                f"driver_version is set but the driver is owned by the {gpu.driver} (driver: {gpu.driver})",
            )
        if gpu.driver_version is not None and _version(gpu.driver_version) is None:
            self.fail(
                ["gpu_operator", "driver_version"],
                f"{gpu.driver_version!r} is not a driver version like 580.95.05",
            )

    def check_compute_domains(self) -> None:
        dra = self.k8s.dra
        if not dra.compute_domains:
            return
        if not dra.enabled:
            self.fail(
                ["dra", "compute_domains"], "ComputeDomains come from the DRA driver, which is not enabled"
            )
        if not self.cluster.spec.fabric.blocks:
            self.fail(
                ["dra", "compute_domains"],
                "ComputeDomains are made per NVLink block, but cluster.fabric.blocks is empty",
            )
        version = self.k8s.gpu_operator.driver_version
        parsed = _version(version) if version else None
        if parsed is not None and parsed < COMPUTE_DOMAIN_MIN_DRIVER:
            self.fail(
                ["gpu_operator", "driver_version"],
                f"ComputeDomains need driver >= 570.158.01 (driver_version is {version})",
            )
        # Where the gpu_driver role installs the driver, its version is the node type's.
        for stack in {s.node_type: s for s in host_stacks(self.cluster).values()}.values():
            parsed = _version(stack.version) if stack.version else None
            if parsed is not None and parsed < COMPUTE_DOMAIN_MIN_DRIVER:
                self.fail(
                    ["dra", "compute_domains"],
                    f"ComputeDomains need driver >= 570.158.01; node type {stack.node_type} gets {stack.version}",
                )

    def check_slurm(self) -> None:
        slurm = self.k8s.slurm
        if slurm is None:
            return
        if slurm.accounting and not slurm.database_host:
            self.fail(
                ["slurm", "database_host"], "accounting is on but no database_host is given for slurmdbd"
            )
        if slurm.namespace in ADDON_NAMESPACES.values():
            self.fail(["slurm", "namespace"], f"namespace `{slurm.namespace}` belongs to an add-on")
        # Slurm enforces a tenant's GPU numbers as association limits (GrpTRES), which need slurmdbd;
        # the accounts are made only for Slinky (roles/slurm_on_k8s; Soperator has no way to).
        if slurm.operator == "slinky" and slurm.accounting:
            return
        why = (
            "Slurm on Kubernetes runs without accounting (kubernetes.slurm.accounting), so no Slurm limit holds it"
            if slurm.operator == "slinky"
            else "gpucluster makes no Slurm accounts in Soperator, so no Slurm limit holds it"
        )
        for index, tenant in enumerate(self.cluster.spec.tenants):
            if Owner.SLURM_ON_KUBERNETES in tenant.gpus:
                self.fail_outside(
                    ["tenants", index, "gpus", Owner.SLURM_ON_KUBERNETES.value],
                    f"tenant {tenant.name} has slurm-on-kubernetes GPU numbers, but {why}",
                )

    def check_owners(self) -> None:
        """Every scheduler the section installs has nodes to schedule, and every node owned on the
        Kubernetes side has its scheduler."""
        cluster, k8s = self.cluster, self.k8s
        if len(cluster.owner_of) < len(cluster.node_type_of):
            return  # some nodes have no owner: the core checks said so, guessing here would only add noise
        pod_gpus = cluster.gpus_of(cluster.hosts_owned_by(Owner.KUBERNETES))
        schedulers = (
            ("kueue", "Kueue", k8s.kueue.enabled),
            ("kai", "KAI", k8s.kai.enabled),
            ("volcano", "Volcano", k8s.volcano.enabled),
        )
        for key, name, enabled in schedulers:
            if enabled and not pod_gpus:
                self.fail(
                    [key, "enabled"],
                    f"{name} is enabled but no GPU node is owned by kubernetes (cluster.nodes[].owner): "
                    "its queues would admit work to nodes it does not own; disable it or give it nodes",
                )
        slurm_pod_hosts = cluster.hosts_owned_by(Owner.SLURM_ON_KUBERNETES)
        slurm = k8s.slurm
        if slurm is not None and not slurm_pod_hosts:
            self.fail(
                ["slurm"],
                f"Slurm on Kubernetes ({slurm.operator}) is configured but no node is owned by "
                "slurm-on-kubernetes (cluster.nodes[].owner): its NodeSets would select no node",
            )
        if slurm is None:
            for index, entry in enumerate(cluster.spec.nodes):
                if entry.owner == Owner.SLURM_ON_KUBERNETES:
                    self.fail_outside(
                        ["nodes", index, "owner"],
                        "slurm-on-kubernetes nodes run only Slurm's slurmd pods, but kubernetes.slurm "
                        "(Slinky or Soperator) is not configured",
                    )
        if slurm is not None and slurm.operator == "slinky" and slurm_pod_hosts:
            self.check_slinky_slurm_version()

    def check_slinky_slurm_version(self) -> None:
        """The Slurm release the inventory targets is one the pinned Slinky charts run: their images
        and data parser are of a given Slurm (README compatibility matrix). One problem, at the key
        to change."""
        pin = self.k8s.versions.slinky_slurm.version
        needed, images = slinky_slurm_range(pin)
        target = self.cluster.version
        if (target.year, target.month) < needed:
            self.fail_outside(
                ["slurm", "version"],
                f"Slinky {pin} (kubernetes.versions.slinky_slurm) runs Slurm {_dotted(needed)} and newer "
                f"(its images ship Slurm {images}); this inventory targets {self.cluster.spec.slurm.version}: "
                f"set cluster.slurm.version to {_dotted(needed)} or newer",
            )

    def check_names(self) -> None:
        """Node types and tenants become Kubernetes object names and namespaces."""
        in_kubernetes = {
            t
            for h, t in self.cluster.node_type_of.items()
            if self.cluster.owner_of.get(h) not in (None, Owner.SLURM)
        }
        for type_name, node_type in self.cluster.spec.node_types.items():
            if type_name in in_kubernetes and (node_type.memory_mb is None or not node_type.layout):
                self.fail_outside(
                    ["node_types", type_name],
                    "Kubernetes runs hosts of this node type: give memory_mb, sockets and cores_per_socket "
                    "(pod resources and Slurm node settings in Kubernetes are made from them)",
                )
            if node_type.gpus and not K8S_NAME.match(type_name):
                self.fail_outside(
                    ["node_types", type_name],
                    "node type names become Kueue ResourceFlavor and DeviceClass names: use lowercase letters, digits, '-' and '.'",
                )
        taken = set(ADDON_NAMESPACES.values()) | {"default", "kube-system", "kube-public", "kube-node-lease"}
        if self.k8s.slurm:
            taken.add(self.k8s.slurm.namespace)
        seen: dict[str, str] = {}
        for index, tenant in enumerate(self.cluster.spec.tenants):
            namespace = tenant.namespace or tenant.name
            if not DNS_LABEL.match(namespace) or len(namespace) > 63:
                self.fail_outside(
                    ["tenants", index, "namespace"],
                    f"`{namespace}` is not a valid namespace name (DNS label)",
                )
            elif namespace in taken:
                self.fail_outside(
                    ["tenants", index, "namespace"],
                    f"namespace `{namespace}` is reserved for the system or an add-on",
                )
            elif namespace in seen:
                self.fail_outside(
                    ["tenants", index, "namespace"],
                    f"namespace `{namespace}` is already used by tenant `{seen[namespace]}`",
                )
            seen[namespace] = tenant.name
        if self.k8s.kai.enabled and self.k8s.kai.parent_queue in {t.name for t in self.cluster.spec.tenants}:
            self.fail(
                ["kai", "parent_queue"], f"parent queue `{self.k8s.kai.parent_queue}` has a tenant's name"
            )
        if self.k8s.kueue.enabled and self.k8s.kueue.cohort in {t.name for t in self.cluster.spec.tenants}:
            self.fail(["kueue", "cohort"], f"cohort `{self.k8s.kueue.cohort}` has a tenant's name")

    def check_topology(self) -> None:
        levels = topology_levels(self.cluster)
        if len(levels) > MAX_TOPOLOGY_LEVELS:
            self.fail_outside(
                ["fabric", "tree"],
                f"the switch tree gives {len(levels)} topology levels; Kueue accepts at most {MAX_TOPOLOGY_LEVELS}",
            )


def check_kubernetes(cluster: Cluster) -> list[Problem]:
    """Problems of the `kubernetes:` section (none when the section is absent)."""
    k8s = kubernetes_of(cluster)
    if k8s is None:
        return []
    return _KubernetesChecker(cluster, k8s).run()


def kubernetes_warnings(cluster: Cluster) -> list[Problem]:
    """What a valid `kubernetes:` section may not mean to do (printed as warnings, exit code 0)."""
    k8s = kubernetes_of(cluster)
    if k8s is None:
        return []
    file = cluster.inventory.cluster_file
    warnings: list[Problem] = []
    served = "deployment" in k8s.kueue.integrations
    if k8s.kueue.enabled and not served:
        tenants = [t for t in cluster.spec.tenants if pods_view(cluster).quota(t.name).effective_limit]
        if tenants:
            names = ", ".join(t.name for t in tenants)
            warnings.append(
                file.problem(
                    "cluster.kubernetes.kueue.integrations",
                    f"no integration covers Deployments: the servers of {names} (tenants with Kubernetes "
                    "GPUs) bypass their quotas in Kueue; add `deployment` (and `statefulset`, "
                    "`leaderworkerset.x-k8s.io/leaderworkerset` for serving)",
                )
            )
    return warnings
