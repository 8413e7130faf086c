"""Nebius building blocks: Managed Kubernetes (mk8s v1), a system node group, and GPU node groups
on a GPU cluster (one InfiniBand partition per pool) from the pulumi-nebius SDK.

Driver ownership: a `drivers_preset` puts the driver into the node image (the cloud owns it);
without one the nodes come without a driver and the GPU Operator installs it.
"""

from __future__ import annotations

import pulumi
import pulumi_nebius as nebius

from gpucluster.cloud.catalog import split_nebius
from gpucluster.cloud.config import StackConfig
from gpucluster.cloud.kubeconfig import ExecPlugin, exec_kubeconfig
from gpucluster.cloud.model import NebiusSettings
from gpucluster.cloud.outputs import Built, output_field
from gpucluster.cloud.pools import POOL_LABEL, CloudPlan, PoolPlan

NEBIUS_AUTH = ExecPlugin("nebius", args=("mk8s", "v1", "cluster", "get-token", "--format", "json"))


def _resources(machine: str) -> nebius.Mk8sV1NodeGroupTemplateResourcesArgs:
    parts = split_nebius(machine)
    assert parts is not None  # guaranteed by the guardrails
    return nebius.Mk8sV1NodeGroupTemplateResourcesArgs(platform=parts[0], preset=parts[1])


class Mk8sCluster(pulumi.ComponentResource):
    """The managed Kubernetes control plane and its system node group."""

    def __init__(
        self, name: str, plan: CloudPlan, settings: NebiusSettings, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpucluster:nebius:Mk8sCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        system = plan.cloud.system_pool
        self.cluster = nebius.Mk8sV1Cluster(
            name,
            name=name,
            parent_id=settings.project_id,
            control_plane=nebius.Mk8sV1ClusterControlPlaneArgs(
                subnet_id=settings.subnet_id,
                version=plan.kubernetes_version,
                endpoints=nebius.Mk8sV1ClusterControlPlaneEndpointsArgs(
                    public_endpoint=nebius.Mk8sV1ClusterControlPlaneEndpointsPublicEndpointArgs()
                ),
            ),
            opts=child,
        )
        self.system_group = nebius.Mk8sV1NodeGroup(
            f"{name}-system",
            name=f"{name}-system",
            parent_id=self.cluster.id,
            version=plan.kubernetes_version,
            fixed_node_count=system.count,
            template=nebius.Mk8sV1NodeGroupTemplateArgs(
                resources=_resources(system.instance_type),
                boot_disk=nebius.Mk8sV1NodeGroupTemplateBootDiskArgs(
                    type="NETWORK_SSD", size_gibibytes=system.disk_gb
                ),
                network_interfaces=[
                    nebius.Mk8sV1NodeGroupTemplateNetworkInterfaceArgs(subnet_id=settings.subnet_id)
                ],
                metadata=nebius.Mk8sV1NodeGroupTemplateMetadataArgs(labels={POOL_LABEL: f"{name}-system"}),
            ),
            opts=child,
        )
        self.register_outputs({"clusterName": name})

    def kubeconfig(self) -> pulumi.Output[str]:
        return pulumi.Output.all(self.cluster.name, self.cluster.status).apply(
            # The public endpoint is already an https URL.
            lambda v: exec_kubeconfig(
                v[0],
                output_field(v[1], "control_plane", "endpoints", "public_endpoint"),
                output_field(v[1], "control_plane", "auth", "cluster_ca_certificate"),
                NEBIUS_AUTH,
            )
        )


class GpuNodeGroup(pulumi.ComponentResource):
    """One mk8s node group for one inventory pool, on its own GPU cluster (InfiniBand partition)."""

    def __init__(
        self,
        pool: PoolPlan,
        cluster: Mk8sCluster,
        plan: CloudPlan,
        settings: NebiusSettings,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpucluster:nebius:GpuNodeGroup", pool.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        s = pool.settings
        self.gpu_cluster: nebius.ComputeV1GpuCluster | None = None
        if pool.is_gpu and s.placement:
            self.gpu_cluster = nebius.ComputeV1GpuCluster(
                pool.name,
                name=pool.name,
                parent_id=settings.project_id,
                infiniband_fabric=settings.infiniband_fabric,
                opts=child,
            )
        template = nebius.Mk8sV1NodeGroupTemplateArgs(
            resources=_resources(str(pool.instance_type)),
            boot_disk=nebius.Mk8sV1NodeGroupTemplateBootDiskArgs(
                type="NETWORK_SSD", size_gibibytes=s.disk_gb
            ),
            network_interfaces=[
                nebius.Mk8sV1NodeGroupTemplateNetworkInterfaceArgs(subnet_id=settings.subnet_id)
            ],
            gpu_cluster=nebius.Mk8sV1NodeGroupTemplateGpuClusterArgs(id=self.gpu_cluster.id)
            if self.gpu_cluster
            else None,
            gpu_settings=nebius.Mk8sV1NodeGroupTemplateGpuSettingsArgs(drivers_preset=settings.drivers_preset)
            if pool.is_gpu and plan.driver_owner == "cloud"
            else None,
            preemptible=nebius.Mk8sV1NodeGroupTemplatePreemptibleArgs()
            if s.capacity.type == "spot"
            else None,
            reservation_policy=nebius.Mk8sV1NodeGroupTemplateReservationPolicyArgs(
                policy="STRICT", reservation_ids=[str(s.capacity.reservation)]
            )
            if s.capacity.type == "reservation"
            else None,
            metadata=nebius.Mk8sV1NodeGroupTemplateMetadataArgs(labels=dict(pool.labels)),
            taints=pool.taint_args(nebius.Mk8sV1NodeGroupTemplateTaintArgs),
        )
        self.node_group = nebius.Mk8sV1NodeGroup(
            pool.name,
            name=pool.name,
            parent_id=cluster.cluster.id,
            version=plan.kubernetes_version,
            fixed_node_count=pool.size,
            template=template,
            opts=child,
        )
        self.register_outputs({"nodeGroup": pool.name})


def build(plan: CloudPlan, stack: StackConfig) -> Built:
    settings = plan.cloud.nebius
    assert settings is not None  # guaranteed by the guardrails
    cluster = Mk8sCluster(plan.cluster_name, plan, settings)
    pools: list[pulumi.Resource] = []
    for pool in plan.pools:
        pools.append(GpuNodeGroup(pool, cluster, plan, settings))
    return Built(
        outputs={
            "clusterName": cluster.cluster.name,
            "clusterId": cluster.cluster.id,
        },
        kubeconfig=cluster.kubeconfig(),
        node_pools=pools,
    )
