"""Azure building blocks: resource group, VNet, AKS with a system pool, and ND-series GPU agent pools.

The agent pool GPU profile decides who installs the driver: `None` when the GPU Operator owns it
(it can only be chosen when the pool is created), `Install` otherwise. Each GPU pool gets its own
proximity placement group so its VMs share a datacenter.
"""

from __future__ import annotations

import base64

import pulumi
import pulumi_azure_native as azure_native
from pulumi_azure_native import compute, containerservice, network, resources

from gpucluster.cloud.config import StackConfig
from gpucluster.cloud.guardrails import aks_pool_name
from gpucluster.cloud.model import AzureSettings
from gpucluster.cloud.outputs import Built, output_field
from gpucluster.cloud.pools import POOL_LABEL, CloudPlan, DriverOwner, PoolPlan


def aks_gpu_driver(owner: DriverOwner) -> containerservice.GPUDriver:
    """`gpu_profile.driver` of pulumi-azure-native 3.x (API 2025-09-01): None skips the AKS driver."""
    return containerservice.GPUDriver.NONE if owner == "operator" else containerservice.GPUDriver.INSTALL


class AksCluster(pulumi.ComponentResource):
    """Resource group, VNet and the AKS control plane with its system pool."""

    def __init__(
        self, name: str, plan: CloudPlan, settings: AzureSettings, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpucluster:azure:AksCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cloud = plan.cloud
        system = cloud.system_pool
        self.resource_group = resources.ResourceGroup(
            name, resource_group_name=settings.resource_group, location=cloud.region, opts=child
        )
        self.vnet = network.VirtualNetwork(
            name,
            resource_group_name=self.resource_group.name,
            location=cloud.region,
            address_space=network.AddressSpaceArgs(address_prefixes=[settings.vnet_cidr]),
            opts=child,
        )
        self.subnet = network.Subnet(
            f"{name}-nodes",
            resource_group_name=self.resource_group.name,
            virtual_network_name=self.vnet.name,
            address_prefix=settings.vnet_cidr,
            opts=child,
        )
        # AKS upgrades are cluster-wide; the guardrails make every pool agree on auto_upgrade.
        upgrades = any(p.settings.auto_upgrade for p in plan.pools)
        self.cluster = containerservice.ManagedCluster(
            name,
            resource_name_=name,
            resource_group_name=self.resource_group.name,
            location=cloud.region,
            dns_prefix=name,
            kubernetes_version=plan.kubernetes_version,
            identity=containerservice.ManagedClusterIdentityArgs(
                type=containerservice.ResourceIdentityType.SYSTEM_ASSIGNED
            ),
            auto_upgrade_profile=containerservice.ManagedClusterAutoUpgradeProfileArgs(
                upgrade_channel="stable" if upgrades else "none",
                node_os_upgrade_channel="NodeImage" if upgrades else "None",
            ),
            network_profile=containerservice.ContainerServiceNetworkProfileArgs(
                network_plugin="azure", network_plugin_mode="overlay"
            ),
            agent_pool_profiles=[
                containerservice.ManagedClusterAgentPoolProfileArgs(
                    name="system",
                    mode="System",
                    count=system.count,
                    vm_size=system.instance_type,
                    os_type="Linux",
                    os_disk_size_gb=system.disk_gb,
                    vnet_subnet_id=self.subnet.id,
                    availability_zones=cloud.zones or None,
                    node_labels={POOL_LABEL: f"{name}-system"},
                )
            ],
            opts=child,
        )
        self.register_outputs({"clusterName": name})

    def kubeconfig(self) -> pulumi.Output[str]:
        creds = containerservice.list_managed_cluster_user_credentials_output(
            resource_group_name=self.resource_group.name, resource_name=self.cluster.name
        )
        kubeconfig: pulumi.Output[str] = creds.kubeconfigs.apply(
            lambda k: base64.b64decode(output_field(k[0], "value")).decode()
        )
        return kubeconfig


class GpuNodePool(pulumi.ComponentResource):
    """One AKS user agent pool for one inventory pool, in its own proximity placement group."""

    def __init__(
        self, pool: PoolPlan, cluster: AksCluster, plan: CloudPlan, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpucluster:azure:GpuNodePool", pool.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        s = pool.settings
        self.placement_group: compute.ProximityPlacementGroup | None = None
        if s.placement:
            self.placement_group = compute.ProximityPlacementGroup(
                pool.name,
                resource_group_name=cluster.resource_group.name,
                location=plan.cloud.region,
                proximity_placement_group_type="Standard",
                intent=compute.ProximityPlacementGroupPropertiesIntentArgs(
                    vm_sizes=[str(pool.instance_type)]
                ),
                zones=[pool.zone] if pool.zone else None,
                opts=child,
            )
        self.agent_pool = containerservice.AgentPool(
            pool.name,
            agent_pool_name=aks_pool_name(pool.name, plan.cluster_name),
            resource_group_name=cluster.resource_group.name,
            resource_name_=cluster.cluster.name,
            mode="User",
            os_type="Linux",
            os_sku="Ubuntu",
            vm_size=pool.instance_type,
            count=pool.size,
            enable_auto_scaling=False,
            orchestrator_version=plan.kubernetes_version,
            os_disk_size_gb=s.disk_gb,
            vnet_subnet_id=cluster.subnet.id,
            availability_zones=[pool.zone] if pool.zone else None,
            proximity_placement_group_id=self.placement_group.id if self.placement_group else None,
            capacity_reservation_group_id=s.capacity.reservation
            if s.capacity.type == "reservation"
            else None,
            scale_set_priority="Spot" if s.capacity.type == "spot" else None,
            gpu_profile=containerservice.GPUProfileArgs(driver=aks_gpu_driver(plan.driver_owner))
            if pool.is_gpu
            else None,
            node_labels=dict(pool.labels),
            node_taints=[t.kubectl_form for t in pool.taints],
            opts=child,
        )
        self.register_outputs({"agentPool": pool.name})


def build(plan: CloudPlan, stack: StackConfig) -> Built:
    settings = plan.cloud.azure
    assert settings is not None  # guaranteed by the guardrails
    provider = azure_native.Provider("azure-native", location=plan.cloud.region)
    opts = pulumi.ResourceOptions(providers={"azure-native": provider})
    cluster = AksCluster(plan.cluster_name, plan, settings, opts=opts)
    pools: list[pulumi.Resource] = []
    for pool in plan.pools:
        pools.append(GpuNodePool(pool, cluster, plan, opts=opts))
    return Built(
        outputs={
            "clusterName": cluster.cluster.name,
            "resourceGroup": cluster.resource_group.name,
        },
        kubeconfig=cluster.kubeconfig(),
        node_pools=pools,
    )
