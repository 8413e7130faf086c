"""Guardrails: checks of the cloud plan that must hold before a stack creates anything.

They run in `gpucluster validate` (through the cluster checker) and again in every stack program
before the first resource. Each problem names the inventory key to change.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpucluster.cloud.catalog import NEBIUS_CPU_PRESET_RE, known_gpu_machines, split_nebius
from gpucluster.cloud.model import LABEL_VALUE_RE
from gpucluster.cloud.pools import CLOUD_OWNERS, GPU_TAINT, CloudPlan, PoolPlan, plan_cloud
from gpucluster.errors import InventoryError, Problem, format_path
from gpucluster.hostlists import compress
from gpucluster.k8s.model import kubernetes_of
from gpucluster.k8s.names import OWNER_LABEL, OWNER_TAINT_KEY

if TYPE_CHECKING:  # the cluster module calls check_cloud; keep this import type-only
    from gpucluster.model.cluster import Cluster

NVIDIA_AMIS = ("AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA")
AKS_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
GKE_POOL_NAME_MAX = 40
PLATFORM_OF = {"aws": "eks", "gcp": "gke", "azure": "aks", "nebius": "generic"}
LABEL_VALUE = re.compile(LABEL_VALUE_RE)


def aks_pool_name(pool_name: str, cluster_name: str) -> str:
    """AKS agent pool names: lowercase letters and digits, at most 12, starting with a letter."""
    text = re.sub(r"[^a-z0-9]", "", pool_name.removeprefix(cluster_name).lower())
    return ("g" + text if not text[:1].isalpha() else text)[:12]


# Managed filesystem service -> the provider that offers it (what the stacks can create).
MANAGED_FILESYSTEMS = {"filestore": "gcp"}
FILESTORE_DEFAULT_TIER = "ZONAL"
# Smallest instance per Filestore tier, GB (the API refuses less).
FILESTORE_MIN_GB = {"BASIC_HDD": 1024, "BASIC_SSD": 2560, "ZONAL": 1024, "REGIONAL": 1024}


class _Guard:
    def __init__(self, cluster: Cluster, plan: CloudPlan) -> None:
        self.cluster = cluster
        self.plan = plan
        self.cloud = plan.cloud
        self.file = cluster.inventory.cluster_file
        self.problems: list[Problem] = []

    def fail(self, path: str | Sequence[str | int], message: str) -> None:
        text = path if isinstance(path, str) else format_path(["cluster", *path])
        self.problems.append(self.file.problem(text, message))

    def run(self) -> list[Problem]:
        self.check_section()
        self.check_versions()
        for type_name in self.cloud.pools:
            if type_name not in self.cluster.spec.node_types:
                known = ", ".join(sorted(self.cluster.spec.node_types))
                self.fail(["cloud", "pools", type_name], f"unknown node type `{type_name}` (known: {known})")
        seen: dict[str, str] = {}
        for pool in self.plan.pools:
            if pool.name in seen:
                self.fail(pool.key, f"pool name `{pool.name}` is also made by {seen[pool.name]}")
            seen[pool.name] = pool.key
            self.check_pool(pool)
        self.check_owners()
        self.check_driver()
        self.check_provider()
        self.check_filesystems()
        return self.problems

    def check_filesystems(self) -> None:
        """A managed filesystem of the stack's own cloud, with what its service needs."""
        index_of = {fs.name: i for i, fs in enumerate(self.cluster.spec.storage)}
        for fs in self.plan.filesystems:
            managed = fs.cloud
            assert managed is not None
            parts: list[str | int] = ["storage", index_of[fs.name], "cloud"]
            wanted = MANAGED_FILESYSTEMS[managed.service]
            if wanted != self.cloud.provider:
                self.fail(
                    [*parts, "service"],
                    f"{managed.service} is a service of {wanted}; this stack creates {self.cloud.provider} resources",
                )
                continue
            tier = managed.tier or FILESTORE_DEFAULT_TIER
            least = FILESTORE_MIN_GB[tier]
            if managed.size_gb is None or managed.size_gb < least:
                self.fail([*parts, "size_gb"], f"Filestore {tier} needs size_gb of at least {least}")

    def check_owners(self) -> None:
        """A cloud node pool is a Kubernetes node pool: its hosts are owned by kubernetes or
        slurm-on-kubernetes, never by bare-metal Slurm (slurmd beside kubelet: two schedulers)."""
        pool_of = {h: p.name for p in self.plan.pools for h in p.hosts}
        allowed = " or ".join(o.value for o in CLOUD_OWNERS)
        inv = self.cluster.inventory
        for index, entry in enumerate(self.cluster.spec.nodes):
            if entry.owner is None or entry.owner in CLOUD_OWNERS:
                continue  # a missing owner is reported by the core checks
            hosts = inv.members(entry.group) if entry.group in inv.groups else [entry.group]
            pooled = [h for h in hosts if h in pool_of]
            if not pooled:
                continue
            pools = ", ".join(f"`{p}`" for p in dict.fromkeys(pool_of[h] for h in pooled))
            self.fail(
                ["nodes", index, "owner"],
                f"hosts {compress(pooled)} are in cloud pool(s) {pools}, Kubernetes node pools: their "
                f"owner must be {allowed}, not {entry.owner} (bare-metal slurmd beside kubelet would be "
                "two schedulers)",
            )
        for type_name, settings in self.cloud.pools.items():
            if OWNER_LABEL in settings.labels:
                self.fail(
                    f"cluster.cloud.pools.{type_name}.labels",
                    f"{OWNER_LABEL} comes from cluster.nodes[].owner; do not set it here",
                )
            if any(t.key == OWNER_TAINT_KEY for t in settings.taints or []):
                self.fail(
                    f"cluster.cloud.pools.{type_name}.taints",
                    f"the {OWNER_TAINT_KEY} taint comes from cluster.nodes[].owner; do not set it here",
                )

    def check_aks_names(self) -> None:
        """AKS pool names are cut to 12 characters; two pools must not end up with the same one."""
        seen: dict[str, str] = {}
        for pool in self.plan.pools:
            short = aks_pool_name(pool.name, self.plan.cluster_name)
            if short in seen and seen[short] != pool.name:
                self.fail(
                    pool.key, f"pools `{seen[short]}` and `{pool.name}` both get the AKS name `{short}`"
                )
            seen.setdefault(short, pool.name)

    def check_section(self) -> None:
        provider = self.cloud.provider
        if getattr(self.cloud, provider) is None:
            self.fail(
                ["cloud", provider], f"provider is {provider} but the `{provider}` settings are missing"
            )
        for other in ("aws", "gcp", "azure", "nebius"):
            if other != provider and getattr(self.cloud, other) is not None:
                self.fail(["cloud", other], f"`{other}` settings given but the provider is {provider}")
        k8s = kubernetes_of(self.cluster)
        platform = k8s.platform if k8s is not None else None
        if platform not in (None, "generic", PLATFORM_OF[provider]):
            self.fail(
                ["kubernetes", "platform"],
                f"platform `{platform}` does not match cloud provider {provider} (use {PLATFORM_OF[provider]})",
            )

    def check_versions(self) -> None:
        if self.plan.kubernetes_version is None:
            self.fail(
                ["cloud", "kubernetes_version"], "no Kubernetes version: set it here or in kubernetes.version"
            )
            return
        k8s = kubernetes_of(self.cluster)
        wanted = k8s.version if k8s is not None else ""
        minor = ".".join(wanted.split(".")[:2])
        if minor and self.cloud.kubernetes_version and self.cloud.kubernetes_version != minor:
            self.fail(
                ["cloud", "kubernetes_version"],
                f"{self.cloud.kubernetes_version} differs from kubernetes.version {wanted}",
            )

    def check_pool(self, pool: PoolPlan) -> None:
        s = pool.settings
        provider = self.cloud.provider
        key = pool.key
        if pool.instance_type is None:
            self.fail(
                f"{key}.instance_type", "no instance type: set it here or in node_types.<type>.instance_type"
            )
        if pool.is_gpu:
            self.check_gpu_pool(pool)
        elif provider == "nebius" and pool.instance_type:
            parts = split_nebius(pool.instance_type)
            if parts is None or not NEBIUS_CPU_PRESET_RE.match(parts[1]):
                self.fail(f"{key}.instance_type", f"`{pool.instance_type}` is not `<platform>/<N>vcpu-<M>gb`")
        if s.capacity.type in ("reservation", "capacity_block") and not s.capacity.reservation:
            self.fail(f"{key}.capacity.reservation", f"capacity type {s.capacity.type} needs a reservation")
        if s.capacity.type == "capacity_block" and provider != "aws":
            self.fail(f"{key}.capacity.type", "Capacity Blocks are an AWS purchase option")
        if s.split_by == "block" and not self.cluster.blocks:
            self.fail(f"{key}.split_by", "split_by is `block` but fabric.blocks defines none")
        if pool.zone is not None and self.cloud.zones and pool.zone not in self.cloud.zones:
            self.fail(f"{key}.zone", f"zone {pool.zone} is not one of cloud.zones {self.cloud.zones}")
        for label, value in pool.labels.items():
            if not LABEL_VALUE.match(value):
                self.fail(key, f"label {label}={value!r} is not a valid Kubernetes label value")
        if provider == "gcp" and len(pool.name) > GKE_POOL_NAME_MAX:
            self.fail(key, f"GKE node pool name `{pool.name}` is longer than {GKE_POOL_NAME_MAX} characters")
        if provider == "azure" and not AKS_POOL_NAME.match(aks_pool_name(pool.name, self.plan.cluster_name)):
            self.fail(key, f"pool `{pool.name}` gives no valid AKS pool name")

    def check_gpu_pool(self, pool: PoolPlan) -> None:
        key = pool.key
        provider = self.cloud.provider
        type_key = f"cluster.node_types.{pool.node_type}.gpus"
        if GPU_TAINT not in pool.taints:
            self.fail(
                f"{key}.taints",
                f"GPU pools of node type `{pool.node_type}` lack the {GPU_TAINT.kubectl_form} taint",
            )
        k8s = kubernetes_of(self.cluster)
        if k8s is not None and not k8s.gpu_taint:
            self.fail(
                ["kubernetes", "gpu_taint"],
                "cloud GPU pools are tainted nvidia.com/gpu; set gpu_taint so the queues tolerate it",
            )
        if pool.settings.training and pool.settings.auto_upgrade:
            self.fail(
                f"{key}.auto_upgrade",
                "training pools must not auto-upgrade (an upgrade drains nodes under running jobs)",
            )
        if pool.instance_type is None:
            return
        machine = pool.machine
        if machine is None:
            known = ", ".join(known_gpu_machines(provider))
            self.fail(
                f"{key}.instance_type",
                f"`{pool.instance_type}` is not a known {provider} GPU machine type (known: {known})",
            )
            return
        if machine.gpus != pool.gpus:
            self.fail(
                f"{type_key}.count",
                f"node type has {pool.gpus} GPUs but {pool.instance_type} has {machine.gpus}",
            )
        if pool.gpu_model and machine.gpu_model not in pool.gpu_model.lower():
            self.fail(
                f"{type_key}.model",
                f"node type GPU `{pool.gpu_model}` but {pool.instance_type} has {machine.gpu_model}",
            )
        memory = self.cluster.spec.node_types[pool.node_type].gpus
        if memory and memory.memory_gb and memory.memory_gb != machine.memory_gb:
            self.fail(
                f"{type_key}.memory_gb",
                f"node type says {memory.memory_gb} GB per GPU but {pool.instance_type} has {machine.memory_gb}",
            )

    def check_driver(self) -> None:
        """The cloud image and the GPU Operator must not both (or neither) install the driver."""
        owner = self.plan.driver_owner
        has_k8s = kubernetes_of(self.cluster) is not None
        where = ["kubernetes", "gpu_operator", "driver"]
        aws, nebius = self.cloud.aws, self.cloud.nebius
        if not self.plan.gpu_pools:
            return
        if aws is not None:
            ships_driver = aws.ami_type in NVIDIA_AMIS
            if ships_driver and owner == "operator":
                self.fail(
                    where,
                    f"GPU Operator installs the driver but cloud.aws.ami_type {aws.ami_type} ships one "
                    "(use driver: host, or ami_type AL2023_x86_64_STANDARD)",
                )
            if not ships_driver and owner == "cloud":
                self.fail(
                    ["cloud", "aws", "ami_type"] if not has_k8s else where,
                    f"ami_type {aws.ami_type} has no GPU driver and the GPU Operator does not install one",
                )
            if ships_driver and aws.release_version is None:
                self.fail(
                    ["cloud", "aws", "release_version"],
                    "pin the AMI release version: unpinned GPU AMIs drift and replace nodes",
                )
        if nebius is not None:
            if owner == "operator" and nebius.drivers_preset:
                self.fail(
                    ["cloud", "nebius", "drivers_preset"],
                    f"drivers preset {nebius.drivers_preset} installs a driver but the GPU Operator owns it",
                )
            if owner == "cloud" and not nebius.drivers_preset:
                self.fail(
                    ["cloud", "nebius", "drivers_preset"],
                    "no drivers preset and the GPU Operator does not install the driver (set e.g. cuda12)",
                )

    def check_provider(self) -> None:
        cloud = self.cloud
        if cloud.provider == "aws" and len(cloud.zones) < 2:
            self.fail(["cloud", "zones"], "EKS needs subnets in at least two zones")
        if cloud.provider == "gcp" and not cloud.zones:
            self.fail(["cloud", "zones"], "GKE node pools need a zone")
        if cloud.provider == "nebius" and cloud.zones:
            self.fail(["cloud", "zones"], "Nebius has no zones; leave this empty")
        if cloud.provider == "nebius":
            parts = split_nebius(cloud.system_pool.instance_type)
            if parts is None:
                self.fail(
                    ["cloud", "system_pool", "instance_type"],
                    "Nebius machine types are `<platform>/<preset>`",
                )
        gcp = cloud.gcp
        if gcp is not None and gcp.release_channel != "UNSPECIFIED":
            for pool in self.plan.pools:
                if not pool.settings.auto_upgrade:
                    self.fail(
                        ["cloud", "gcp", "release_channel"],
                        f"pool `{pool.name}` has auto-upgrade off, which GKE release channels forbid "
                        "(use UNSPECIFIED)",
                    )
                    break
        if cloud.provider == "azure":
            self.check_aks_names()
            modes = {p.settings.auto_upgrade for p in self.plan.pools}
            if len(modes) > 1:
                self.fail(
                    ["cloud", "pools"], "AKS upgrades are cluster-wide: all pools must agree on auto_upgrade"
                )


def check_cloud(cluster: Cluster) -> list[Problem]:
    """Problems of the `cloud:` section and its pools (empty when there is none)."""
    plan = plan_cloud(cluster)
    return _Guard(cluster, plan).run() if plan is not None else []


def enforce(cluster: Cluster) -> CloudPlan:
    """The cloud plan of a valid inventory, or InventoryError naming every key to fix."""
    plan = plan_cloud(cluster)
    if plan is None:
        file = cluster.inventory.cluster_file
        raise InventoryError(
            [file.problem("cluster.cloud", "no `cloud:` section: the stack has nothing to build")]
        )
    problems = _Guard(cluster, plan).run()
    if problems:
        raise InventoryError(problems)
    return plan
