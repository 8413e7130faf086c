"""GCP building blocks: VPC, GKE (static version, no default pool) and A3-style GPU node pools.

GPU pools declare their accelerators so the driver choice is explicit: `INSTALLATION_DISABLED` when
the GPU Operator owns the driver (on Ubuntu nodes, which its driver container supports), otherwise
GKE's own driver. The `nvidia.com/gpu` taint is declared although GKE adds it, so no permanent diff.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp

from gpucluster.cloud.config import StackConfig
from gpucluster.cloud.guardrails import FILESTORE_DEFAULT_TIER
from gpucluster.cloud.kubeconfig import ExecPlugin, exec_kubeconfig
from gpucluster.cloud.model import GcpSettings, SystemPool
from gpucluster.cloud.outputs import Built, output_field
from gpucluster.cloud.pools import POOL_LABEL, CloudPlan, DriverOwner, PoolPlan, cloud_name
from gpucluster.model.storage import SharedFilesystem

GKE_AUTH = ExecPlugin("gke-gcloud-auth-plugin", provide_cluster_info=True)


class GkeCluster(pulumi.ComponentResource):
    """Network, subnet and the GKE control plane with a system node pool."""

    def __init__(
        self,
        name: str,
        plan: CloudPlan,
        settings: GcpSettings,
        system: SystemPool,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpucluster:gcp:GkeCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cloud = plan.cloud
        self.network = gcp.compute.Network(name, auto_create_subnetworks=False, mtu=8896, opts=child)
        self.subnet = gcp.compute.Subnetwork(
            name, network=self.network.id, region=cloud.region, ip_cidr_range=settings.subnet_cidr, opts=child
        )
        self.cluster = gcp.container.Cluster(
            name,
            name=name,
            location=cloud.region,
            node_locations=cloud.zones,
            network=self.network.id,
            subnetwork=self.subnet.id,
            # A major.minor prefix: GKE picks the newest patch. Node pools omit `version` and so start at
            # the control plane's; with auto-upgrade off they stay there until the pool is upgraded by hand.
            min_master_version=plan.kubernetes_version,
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=settings.release_channel),
            remove_default_node_pool=True,
            initial_node_count=1,
            deletion_protection=True,
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(),
            opts=child,
        )
        # node_count is per zone: the system pool lives in the first zone only.
        self.system_pool = gcp.container.NodePool(
            f"{name}-system",
            cluster=self.cluster.id,
            location=cloud.region,
            node_locations=[cloud.zones[0]],
            node_count=system.count,
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=False),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=system.instance_type,
                disk_size_gb=system.disk_gb,
                labels={POOL_LABEL: f"{name}-system"},
                oauth_scopes=["https://www.googleapis.com/auth/cloud-platform"],
            ),
            opts=child,
        )
        self.register_outputs({"clusterName": name})

    def kubeconfig(self) -> pulumi.Output[str]:
        return pulumi.Output.all(self.cluster.name, self.cluster.endpoint, self.cluster.master_auth).apply(
            # The cluster reports a bare IP address as its endpoint.
            lambda v: exec_kubeconfig(
                v[0], f"https://{v[1]}", output_field(v[2], "cluster_ca_certificate"), GKE_AUTH
            )
        )


class GpuNodePool(pulumi.ComponentResource):
    """One GKE node pool for one inventory pool: accelerators, compact placement, no auto-upgrade."""

    def __init__(
        self,
        pool: PoolPlan,
        cluster: GkeCluster,
        plan: CloudPlan,
        settings: GcpSettings,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpucluster:gcp:GpuNodePool", pool.name, None, opts)
        s = pool.settings
        accelerators = []
        if pool.is_gpu and pool.machine is not None:
            accelerators.append(
                gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                    type=pool.machine.accelerator or "",
                    count=pool.machine.gpus,
                    gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                        gpu_driver_version=gke_driver_version(plan.driver_owner, settings)
                    ),
                )
            )
        reservation = None
        if s.capacity.type == "reservation":
            reservation = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="SPECIFIC_RESERVATION",
                key="compute.googleapis.com/reservation-name",
                values=[str(s.capacity.reservation)],
            )
        self.node_pool = gcp.container.NodePool(
            pool.name,
            name=pool.name,
            cluster=cluster.cluster.id,
            location=plan.cloud.region,
            node_locations=[str(pool.zone)],
            node_count=pool.size,
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=s.auto_upgrade),
            placement_policy=gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT")
            if s.placement
            else None,
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=pool.instance_type,
                disk_size_gb=s.disk_gb,
                disk_type="pd-ssd",
                image_type="UBUNTU_CONTAINERD" if plan.driver_owner == "operator" else "COS_CONTAINERD",
                spot=s.capacity.type == "spot",
                guest_accelerators=accelerators,
                reservation_affinity=reservation,
                gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
                labels=dict(pool.labels),
                taints=pool.taint_args(gcp.container.NodePoolNodeConfigTaintArgs),
                oauth_scopes=["https://www.googleapis.com/auth/cloud-platform"],
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"nodePool": pool.name})


class Filestore(pulumi.ComponentResource):
    """A Filestore instance for a cluster.storage entry (`cloud: {service: filestore}`) on the
    cluster's network, with one share named like the filesystem; `source` is what fstab or a
    PersistentVolume mounts (`<address>:/<share>`)."""

    def __init__(
        self,
        fs: SharedFilesystem,
        cluster: GkeCluster,
        plan: CloudPlan,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        name = cloud_name(plan.cluster_name, fs.name)
        super().__init__("gpucluster:gcp:Filestore", name, None, opts)
        managed = fs.cloud
        assert managed is not None and managed.size_gb is not None  # the guardrails saw to it
        tier = managed.tier or FILESTORE_DEFAULT_TIER
        # Share names: a letter, then letters, digits and underscores, at most 16 characters.
        share = fs.name.replace("-", "_")[:16]
        cloud = plan.cloud
        self.instance = gcp.filestore.Instance(
            name,
            name=name,
            # REGIONAL instances live in the region, the others in the zone of the GPU pools.
            location=cloud.region if tier == "REGIONAL" else cloud.zones[0],
            tier=tier,
            file_shares=gcp.filestore.InstanceFileSharesArgs(name=share, capacity_gb=managed.size_gb),
            networks=[gcp.filestore.InstanceNetworkArgs(network=cluster.network.name, modes=["MODE_IPV4"])],
            deletion_protection_enabled=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.source = self.instance.networks.apply(lambda networks: f"{filestore_address(networks)}:/{share}")
        self.register_outputs({"source": self.source})


def filestore_address(networks: Any) -> str:
    """The instance's address once GCP assigned it (unknown in a preview)."""
    try:
        addresses = output_field(networks[0], "ip_addresses")
    except (IndexError, KeyError, TypeError):
        addresses = None
    return str(addresses[0]) if addresses else "<address>"


def gke_driver_version(owner: DriverOwner, settings: GcpSettings) -> str:
    """GKE driver installation: disabled when the GPU Operator installs the driver."""
    return "INSTALLATION_DISABLED" if owner == "operator" else settings.gpu_driver_version


def build(plan: CloudPlan, stack: StackConfig) -> Built:
    cloud = plan.cloud
    settings = cloud.gcp
    assert settings is not None  # guaranteed by the guardrails
    provider = gcp.Provider("gcp", project=settings.project, region=cloud.region)
    opts = pulumi.ResourceOptions(providers={"gcp": provider})
    cluster = GkeCluster(plan.cluster_name, plan, settings, cloud.system_pool, opts=opts)
    pools: list[pulumi.Resource] = []
    for pool in plan.pools:
        pools.append(GpuNodePool(pool, cluster, plan, settings, opts=opts))
    outputs: dict[str, Any] = {"clusterName": cluster.cluster.name, "network": cluster.network.name}
    if plan.filesystems:
        # Name -> `<address>:/<share>`: the `source` of the inventory entry, or a PersistentVolume's.
        outputs["filesystems"] = {
            fs.name: Filestore(fs, cluster, plan, opts=opts).source for fs in plan.filesystems
        }
    return Built(
        outputs=outputs,
        kubeconfig=cluster.kubeconfig(),
        node_pools=pools,
    )
