"""AWS building blocks: VPC, EKS control plane with a system node group, and GPU managed node groups.

GPU pools use their own launch template so one path covers every purchase option: it carries the
instance type, one EFA interface per network card, the cluster placement group, and the capacity
reservation or Capacity Block target. The AMI comes from the node group (`ami_type` plus a pinned
`release_version`), so EKS keeps merging its bootstrap into the template.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from gpucluster.cloud.config import StackConfig
from gpucluster.cloud.model import AwsSettings, SystemPool
from gpucluster.cloud.outputs import Built, output_field
from gpucluster.cloud.pools import POOL_LABEL, CloudPlan, PoolPlan

NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
)
EKS_CAPACITY = {
    "on_demand": "ON_DEMAND",
    "spot": "SPOT",
    "reservation": "ON_DEMAND",
    "capacity_block": "CAPACITY_BLOCK",
}


class Network(pulumi.ComponentResource):
    """VPC with a public and a private subnet per zone; nodes live in the private ones behind one NAT."""

    def __init__(
        self, name: str, cidr: str, zones: list[str], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpucluster:aws:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        blocks = list(ipaddress.ip_network(cidr).subnets(new_prefix=ipaddress.ip_network(cidr).prefixlen + 4))
        self.vpc = aws.ec2.Vpc(
            name,
            cidr_block=cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={"Name": name},
            opts=child,
        )
        igw = aws.ec2.InternetGateway(name, vpc_id=self.vpc.id, tags={"Name": name}, opts=child)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public",
            vpc_id=self.vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            opts=child,
        )
        self.public_subnet_ids: list[pulumi.Output[str]] = []
        self.private_subnet_ids: dict[str, pulumi.Output[str]] = {}
        nat: aws.ec2.NatGateway | None = None
        for index, zone in enumerate(zones):
            public = aws.ec2.Subnet(
                f"{name}-public-{zone}",
                vpc_id=self.vpc.id,
                cidr_block=str(blocks[len(blocks) // 2 + index]),
                availability_zone=zone,
                map_public_ip_on_launch=True,
                tags={"Name": f"{name}-public-{zone}", "kubernetes.io/role/elb": "1"},
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{zone}", subnet_id=public.id, route_table_id=public_rt.id, opts=child
            )
            if nat is None:
                eip = aws.ec2.Eip(f"{name}-nat", domain="vpc", opts=child)
                nat = aws.ec2.NatGateway(f"{name}-nat", subnet_id=public.id, allocation_id=eip.id, opts=child)
            private_rt = aws.ec2.RouteTable(
                f"{name}-private-{zone}",
                vpc_id=self.vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                opts=child,
            )
            private = aws.ec2.Subnet(
                f"{name}-private-{zone}",
                vpc_id=self.vpc.id,
                cidr_block=str(blocks[index]),
                availability_zone=zone,
                tags={"Name": f"{name}-private-{zone}", "kubernetes.io/role/internal-elb": "1"},
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{zone}", subnet_id=private.id, route_table_id=private_rt.id, opts=child
            )
            self.public_subnet_ids.append(public.id)
            self.private_subnet_ids[zone] = private.id
        self.register_outputs({"vpcId": self.vpc.id})


class EksCluster(pulumi.ComponentResource):
    """EKS control plane (pulumi-eks), the node IAM role, the system node group and the EFA security group."""

    def __init__(
        self,
        name: str,
        version: str,
        network: Network,
        system: SystemPool,
        provider: aws.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpucluster:aws:EksCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.node_role = aws.iam.Role(
            f"{name}-node",
            assume_role_policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "ec2.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
            opts=child,
        )
        for index, policy in enumerate(NODE_POLICIES):
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{index}", role=self.node_role.name, policy_arn=policy, opts=child
            )
        self.cluster = eks.Cluster(
            name,
            name=name,
            version=version,
            vpc_id=network.vpc.id,
            public_subnet_ids=network.public_subnet_ids,
            private_subnet_ids=list(network.private_subnet_ids.values()),
            node_associate_public_ip_address=False,
            skip_default_node_group=True,
            authentication_mode=eks.AuthenticationMode.API,
            create_oidc_provider=True,
            # Managed node groups get their EKS access entries from the API; no aws-auth ConfigMap.
            opts=child,
        )
        # The security group EKS made for the control plane and managed nodes: nodes whose launch
        # template sets network interfaces must name it themselves, or they cannot reach the API
        # server and the system nodes (CoreDNS).
        control_plane = aws.eks.get_cluster_output(
            name=name, opts=pulumi.InvokeOutputOptions(provider=provider, depends_on=[self.cluster])
        )
        self.cluster_security_group_id: pulumi.Output[str] = control_plane.vpc_config.apply(
            lambda config: str(output_field(config, "cluster_security_group_id"))
        )
        # EFA traffic flows only between members of this group (all protocols, both ways).
        self.efa_security_group = aws.ec2.SecurityGroup(
            f"{name}-efa",
            vpc_id=network.vpc.id,
            description="EFA: all traffic between GPU nodes",
            ingress=[aws.ec2.SecurityGroupIngressArgs(protocol="-1", from_port=0, to_port=0, self=True)],
            egress=[
                aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, self=True),
                aws.ec2.SecurityGroupEgressArgs(
                    protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"]
                ),
            ],
            opts=child,
        )
        self.system_pool = eks.ManagedNodeGroup(
            f"{name}-system",
            cluster=self.cluster,
            node_group_name=f"{name}-system",
            node_role_arn=self.node_role.arn,
            ami_type="AL2023_x86_64_STANDARD",
            instance_types=[system.instance_type],
            disk_size=system.disk_gb,
            subnet_ids=list(network.private_subnet_ids.values()),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=system.count, desired_size=system.count, max_size=system.count
            ),
            labels={POOL_LABEL: f"{name}-system"},
            opts=child,
        )
        self.register_outputs({"clusterName": name})


def _efa_interfaces(cards: int, security_groups: list[str]) -> list[dict[str, Any]]:
    """One interface per network card: the first carries IP traffic, the others are EFA-only."""
    return [
        {
            "network_card_index": i,
            "device_index": 0 if i == 0 else 1,
            "interface_type": "efa" if i == 0 else "efa-only",
            "security_groups": security_groups,
            "delete_on_termination": "true",
        }
        for i in range(max(cards, 1))
    ]


class GpuNodePool(pulumi.ComponentResource):
    """One EKS managed node group for one inventory pool: launch template, placement group, EFA."""

    def __init__(
        self,
        pool: PoolPlan,
        cluster: EksCluster,
        subnet_id: pulumi.Input[str],
        settings: AwsSettings,
        provider: aws.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpucluster:aws:GpuNodePool", pool.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        s = pool.settings
        template: dict[str, Any] = {
            "instance_type": pool.instance_type,
            "block_device_mappings": [
                {
                    "device_name": "/dev/xvda",
                    "ebs": {"volume_size": s.disk_gb, "volume_type": "gp3", "delete_on_termination": "true"},
                }
            ],
            "metadata_options": {"http_tokens": "required", "http_put_response_hop_limit": 2},
            "tag_specifications": [
                {
                    "resource_type": "instance",
                    "tags": {"Name": pool.name, "gpucluster.io/node-type": pool.node_type},
                }
            ],
        }
        self.placement_group: aws.ec2.PlacementGroup | None = None
        if s.placement:
            self.placement_group = aws.ec2.PlacementGroup(pool.name, strategy="cluster", opts=child)
            template["placement"] = {"group_id": self.placement_group.id}
        if s.efa and pool.is_gpu:
            facts = aws.ec2.get_instance_type_output(
                instance_type=str(pool.instance_type), opts=pulumi.InvokeOutputOptions(provider=provider)
            )
            security_groups = [cluster.cluster_security_group_id, cluster.efa_security_group.id]
            template["network_interfaces"] = pulumi.Output.all(
                facts.efa_supported, facts.maximum_network_cards, *security_groups
            ).apply(lambda v: _checked_efa(pool, bool(v[0]), int(v[1]), [str(g) for g in v[2:]]))
        if s.capacity.type in ("reservation", "capacity_block"):
            template["capacity_reservation_specification"] = {
                "capacity_reservation_target": {"capacity_reservation_id": s.capacity.reservation}
            }
        if s.capacity.type == "capacity_block":
            template["instance_market_options"] = {"market_type": "capacity-block"}
        self.launch_template = aws.ec2.LaunchTemplate(pool.name, opts=child, **template)
        self.node_group = eks.ManagedNodeGroup(
            pool.name,
            cluster=cluster.cluster,
            node_group_name=pool.name,
            node_role_arn=cluster.node_role.arn,
            ami_type=settings.ami_type if pool.is_gpu else "AL2023_x86_64_STANDARD",
            release_version=settings.release_version,
            capacity_type=EKS_CAPACITY[s.capacity.type],
            subnet_ids=[subnet_id],
            # Training pools are sized by the inventory; nothing scales them behind the scheduler's back.
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=pool.size, desired_size=pool.size, max_size=pool.size
            ),
            labels=dict(pool.labels),
            taints=pool.taint_args(aws.eks.NodeGroupTaintArgs),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=self.launch_template.id, version=self.launch_template.latest_version.apply(str)
            ),
            opts=child,
        )
        self.register_outputs({"nodeGroup": pool.name})


def _checked_efa(
    pool: PoolPlan, supported: bool, cards: int, security_groups: list[str]
) -> list[dict[str, Any]]:
    if not supported:
        raise pulumi.RunError(f"{pool.key}.efa: {pool.instance_type} does not support EFA (set efa: false)")
    return _efa_interfaces(cards, security_groups)


def build(plan: CloudPlan, stack: StackConfig) -> Built:
    """Every AWS resource of the plan; returns the cloud-specific stack outputs."""
    cloud = plan.cloud
    settings = cloud.aws
    assert settings is not None and plan.kubernetes_version is not None  # guaranteed by the guardrails
    provider = aws.Provider("aws", region=cloud.region)
    opts = pulumi.ResourceOptions(providers={"aws": provider})
    name = plan.cluster_name
    network = Network(name, settings.vpc_cidr, cloud.zones, opts=opts)
    cluster = EksCluster(name, plan.kubernetes_version, network, cloud.system_pool, provider, opts=opts)
    pools: list[pulumi.Resource] = []
    for pool in plan.pools:
        zone = pool.zone or cloud.zones[0]
        pools.append(
            GpuNodePool(pool, cluster, network.private_subnet_ids[zone], settings, provider, opts=opts)
        )
    pools.append(cluster.system_pool)
    return Built(
        outputs={
            "clusterName": name,
            "vpcId": network.vpc.id,
        },
        kubeconfig=cluster.cluster.kubeconfig_json,
        node_pools=pools,
    )
