"""The `cloud:` section of the cluster file: where the Pulumi stacks create the cluster.

Pool sizes, GPU counts and fabric labels are not set here: they come from the inventory (the hosts
of each node type, the node type's GPUs, the fabric tree and blocks). This section only says which
cloud, which machine types, and how the pools are bought, placed and upgraded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, StrictBool

from gpucluster.model.base import NAME_RE, Strict, Update, spec

if TYPE_CHECKING:
    from gpucluster.model.cluster import Cluster

KUBE_MINOR_RE = r"^1\.\d{2}$"
LABEL_KEY_RE = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
LABEL_VALUE_RE = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"
CIDR_RE = r"^\d{1,3}(\.\d{1,3}){3}/\d{1,2}$"

Provider = Literal["aws", "gcp", "azure", "nebius"]


class Taint(Strict):
    key: Annotated[str, Field(pattern=LABEL_KEY_RE)] = spec("Taint key.", Update.REBUILD)
    value: Annotated[str, Field(pattern=LABEL_VALUE_RE)] = spec("Taint value.", Update.REBUILD, default="")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = spec(
        "Taint effect.", Update.REBUILD, default="NoSchedule"
    )

    @property
    def kubectl_form(self) -> str:
        """`key=value:Effect`, as kubectl and AKS write a taint."""
        return f"{self.key}={self.value}:{self.effect}"


class Capacity(Strict):
    type: Literal["on_demand", "spot", "reservation", "capacity_block"] = spec(
        "How the pool's machines are bought: on demand, spot/preemptible, from a capacity reservation, "
        "or from an AWS EC2 Capacity Block for ML.",
        Update.REBUILD,
        default="on_demand",
    )
    reservation: str | None = spec(
        "Reservation to draw from (AWS capacity reservation id `cr-...`, GCP reservation name, Azure "
        "capacity reservation group resource id, Nebius capacity reservation id). Required for "
        "`reservation` and `capacity_block`.",
        Update.REBUILD,
        default=None,
    )


class PoolSettings(Strict):
    """How the pools of one node type are built (one pool per fabric unit of that node type)."""

    instance_type: str | None = spec(
        "Instance/machine/VM type of the pools; Nebius: `<platform>/<preset>`. Supersedes "
        "node_types.<type>.instance_type, which is the default.",
        Update.REBUILD,
        default=None,
    )
    split_by: Literal["leaf", "block", "none"] = spec(
        "One pool per leaf switch of the fabric tree, per NVLink block, or one pool for all hosts of the "
        "node type. `leaf` without a fabric tree gives one pool.",
        Update.REBUILD,
        default="leaf",
    )
    zone: str | None = spec(
        "Zone of the pools; default: the first of cloud.zones.", Update.REBUILD, default=None
    )
    capacity: Capacity = spec("Capacity type and reservation.", Update.REBUILD, default_factory=Capacity)
    placement: StrictBool = spec(
        "Pack each pool close together: AWS cluster placement group, GCP COMPACT placement policy, "
        "Azure proximity placement group, Nebius GPU cluster on the InfiniBand fabric.",
        Update.REBUILD,
        default=True,
    )
    efa: StrictBool = spec(
        "AWS: attach every EFA network card of the instance (ignored on other clouds).",
        Update.REBUILD,
        default=True,
    )
    training: StrictBool = spec(
        "Pools run long training jobs: the guardrails then refuse cloud-driven auto-upgrades.",
        Update.RENDER_ONLY,
        default=True,
    )
    auto_upgrade: StrictBool = spec(
        "Let the cloud upgrade/replace nodes of these pools on its own schedule.",
        Update.REBUILD,
        default=False,
    )
    taints: list[Taint] | None = spec(
        "Node taints; default: `nvidia.com/gpu=present:NoSchedule` for GPU node types, none otherwise.",
        Update.REBUILD,
        default=None,
    )
    labels: dict[
        Annotated[str, Field(pattern=LABEL_KEY_RE)], Annotated[str, Field(pattern=LABEL_VALUE_RE)]
    ] = spec(
        "Extra Kubernetes node labels (node-type and fabric labels are added from the inventory).",
        Update.REBUILD,
        default_factory=dict,
    )
    disk_gb: Annotated[int, Field(ge=20, le=65536)] = spec(
        "Boot disk size in GB.", Update.REBUILD, default=512
    )


class SystemPool(Strict):
    instance_type: str = spec(
        "Instance/machine/VM type of the system pool (Nebius: `<platform>/<preset>`).", Update.REBUILD
    )
    count: Annotated[int, Field(ge=1, le=100)] = spec(
        "Nodes of the system pool (controllers, operators, CoreDNS).", Update.REBUILD, default=2
    )
    disk_gb: Annotated[int, Field(ge=20, le=65536)] = spec(
        "Boot disk size in GB.", Update.REBUILD, default=100
    )


class AwsSettings(Strict):
    ami_type: Literal["AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA", "AL2023_x86_64_STANDARD"] = spec(
        "EKS AMI type of GPU pools. The NVIDIA types ship the driver (GPU Operator driver off); "
        "STANDARD leaves the driver to the GPU Operator.",
        Update.REBUILD,
        default="AL2023_x86_64_NVIDIA",
    )
    release_version: Annotated[str, Field(pattern=r"^\d+\.\d+\.\d+-\d{8}$")] | None = spec(
        "Pinned EKS AMI release version (e.g. 1.33.5-20251120) so nodes are not replaced by AMI drift.",
        Update.REBUILD,
        default=None,
    )
    vpc_cidr: Annotated[str, Field(pattern=CIDR_RE)] = spec(
        "VPC CIDR; split into a public and a private subnet per zone.", Update.REBUILD, default="10.0.0.0/16"
    )


class GcpSettings(Strict):
    project: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")] = spec(
        "GCP project id.", Update.REBUILD
    )
    gpu_driver_version: Literal["DEFAULT", "LATEST"] = spec(
        "GKE-installed driver version when the cloud owns the GPU driver (ignored when the GPU Operator does).",
        Update.REBUILD,
        default="DEFAULT",
    )
    release_channel: Literal["UNSPECIFIED", "RAPID", "REGULAR", "STABLE", "EXTENDED"] = spec(
        "GKE release channel. Pools without auto-upgrade need UNSPECIFIED (channels force auto-upgrade).",
        Update.REBUILD,
        default="UNSPECIFIED",
    )
    subnet_cidr: Annotated[str, Field(pattern=CIDR_RE)] = spec(
        "Primary range of the cluster subnet.", Update.REBUILD, default="10.0.0.0/20"
    )


class AzureSettings(Strict):
    resource_group: Annotated[str, Field(pattern=r"^[-\w._()]{1,90}$")] = spec(
        "Resource group created for the cluster.", Update.REBUILD
    )
    vnet_cidr: Annotated[str, Field(pattern=CIDR_RE)] = spec(
        "Virtual network CIDR (the node subnet takes all of it).", Update.REBUILD, default="10.224.0.0/16"
    )


class NebiusSettings(Strict):
    project_id: Annotated[str, Field(pattern=r"^project-[a-z0-9]+$")] = spec(
        "Nebius project (parent id of every resource).", Update.REBUILD
    )
    subnet_id: Annotated[str, Field(pattern=r"^vpcsubnet-[a-z0-9]+$")] = spec(
        "Existing VPC subnet of the project for the control plane and nodes.", Update.REBUILD
    )
    infiniband_fabric: Annotated[str, Field(pattern=r"^[a-z0-9-]+$")] = spec(
        "Physical InfiniBand fabric of the GPU clusters (e.g. fabric-3).", Update.REBUILD
    )
    drivers_preset: str | None = spec(
        "Node image driver preset (e.g. cuda12) when the cloud owns the GPU driver; omit when the GPU "
        "Operator installs it.",
        Update.REBUILD,
        default=None,
    )


class CloudSpec(Strict):
    provider: Provider = spec("Cloud the Pulumi stack creates the cluster in.", Update.REBUILD)
    region: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]+[0-9a-z]$")] = spec(
        "Region (AWS/GCP/Nebius) or location (Azure).", Update.REBUILD
    )
    zones: list[Annotated[str, Field(pattern=r"^[a-z0-9-]+$")]] = spec(
        "Zones for the network and pools; the first holds the GPU pools unless a pool names its own. "
        "EKS needs two; Nebius takes none.",
        Update.REBUILD,
        default_factory=list,
    )
    kubernetes_version: Annotated[str, Field(pattern=KUBE_MINOR_RE)] | None = spec(
        "Control plane version (major.minor); default: kubernetes.version of the `kubernetes:` section.",
        Update.REBUILD,
        default=None,
    )
    system_pool: SystemPool = spec("Pool for system workloads (untainted).", Update.REBUILD)
    pools: dict[Annotated[str, Field(pattern=NAME_RE)], PoolSettings] = spec(
        "Pool settings per node type (key of node_types); node types not listed use the defaults.",
        Update.REBUILD,
        default_factory=dict,
    )
    aws: AwsSettings | None = spec("AWS settings (provider aws).", Update.REBUILD, default=None)
    gcp: GcpSettings | None = spec("GCP settings (provider gcp).", Update.REBUILD, default=None)
    azure: AzureSettings | None = spec("Azure settings (provider azure).", Update.REBUILD, default=None)
    nebius: NebiusSettings | None = spec("Nebius settings (provider nebius).", Update.REBUILD, default=None)

    def pool_settings(self, node_type: str) -> PoolSettings:
        return self.pools.get(node_type) or PoolSettings()


def cloud_of(cluster: Cluster) -> CloudSpec | None:
    """The cluster's `cloud:` section as this layer's model (gpucluster.layers validated it)."""
    section = cluster.spec.cloud
    assert section is None or isinstance(section, CloudSpec)
    return section
