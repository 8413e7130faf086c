"""Cloud bursting for bare-metal Slurm: for each cloud group of the inventory (cluster.nodes[].power
kind cloud) whose template gpucluster makes, the template gpucluster-power creates its nodes from,
and what the template needs: the image, the group's subnet and a firewall rule letting the
controllers in, the placement group or policy, the nodes' identity reading the munge key from the
cloud's secret store and nothing else, and the first-boot configuration that joins Slurm configless
(gpucluster.render.power.boot_config). Not a pool: no node exists until Slurm asks for one.

The controllers get the least privilege gpucluster-power needs: create instances from this
template (tagged with the cluster), and look up, stop, start and delete only instances so tagged.

AWS: launch template, cluster placement group, security group, Secrets Manager secret, the nodes'
instance profile, the controllers' role. GCP: instance template, COMPACT resource policy, firewall
rule, Secret Manager secret, the nodes' service account, the controllers' custom role and service
account. Azure and Nebius groups name a template of the site's (gpucluster.checks.power).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import pulumi

from gpucluster.model.cluster import Cluster
from gpucluster.model.powered import PowerGroup, power_groups, template_name
from gpucluster.render.power import boot_config, munge_secret_name

# slurmctld <-> slurmd, srun's steps (SrunPortRange unset: ephemeral ports): every TCP port from the
# controllers; the nodes among themselves for MPI/NCCL (EFA carries the rest).
SLURM_TRAFFIC = "tcp"


@dataclass(frozen=True)
class BurstConfig:
    controller_cidrs: list[str]
    controller_principal: str
    munge_key: pulumi.Output[str]


def stack_groups(cluster: Cluster, provider: str) -> list[PowerGroup]:
    """The cloud groups of `provider` whose template this stack makes."""
    return [
        g
        for g in power_groups(cluster)
        if g.hosts
        and g.power.cloud is not None
        and g.power.cloud.provider == provider
        and g.power.cloud.template is None
    ]


def build_aws(cluster: Cluster, config: BurstConfig) -> dict[str, Any]:
    import pulumi_aws as aws

    groups = stack_groups(cluster, "aws")
    if not groups:
        return {}
    secret = aws.secretsmanager.Secret(munge_secret_name(cluster), name=munge_secret_name(cluster),
                                       description=f"munge key of Slurm cluster {cluster.name} (base64)")  # fmt: skip
    aws.secretsmanager.SecretVersion(
        munge_secret_name(cluster), secret_id=secret.id, secret_string=config.munge_key
    )
    node_role = aws.iam.Role(
        f"{cluster.name}-burst-node",
        assume_role_policy=json.dumps(_assume("Service", "ec2.amazonaws.com")),
        inline_policies=[
            aws.iam.RoleInlinePolicyArgs(
                name="read-munge-key",
                policy=secret.arn.apply(
                    lambda arn: json.dumps(_allow(["secretsmanager:GetSecretValue"], [arn]))
                ),
            )
        ],
    )
    profile = aws.iam.InstanceProfile(f"{cluster.name}-burst-node", role=node_role.name)
    templates: dict[str, Any] = {}
    for group in groups:
        templates[group.group] = _aws_template(cluster, group, config, profile)
    controller = _aws_controller_role(cluster, config, node_role, templates)
    return {
        "templates": {name: t.id for name, t in templates.items()},
        "controllerRole": controller.arn,
        "mungeKeySecret": secret.arn,
    }


def _aws_template(cluster: Cluster, group: PowerGroup, config: BurstConfig, profile: Any) -> Any:
    import pulumi_aws as aws

    cloud = group.power.cloud
    assert cloud is not None
    name = template_name(cluster, group.group)
    subnet = aws.ec2.get_subnet(id=cloud.subnet)
    firewall = aws.ec2.SecurityGroup(
        name,
        vpc_id=subnet.vpc_id,
        description=f"Slurm nodes of {group.group}: from the controllers and each other",
        ingress=[
            aws.ec2.SecurityGroupIngressArgs(
                protocol=SLURM_TRAFFIC,
                from_port=0,
                to_port=65535,
                cidr_blocks=config.controller_cidrs,
                description="controllers, login nodes",
            ),
            aws.ec2.SecurityGroupIngressArgs(
                protocol="-1",
                from_port=0,
                to_port=0,
                self=True,
                description="the group's nodes (MPI, NCCL, EFA)",
            ),
        ],
        egress=[
            aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"])
        ],
        tags={"gpucluster-cluster": cluster.name},
    )
    placement = aws.ec2.PlacementGroup(name, strategy="cluster") if cloud.placement else None
    tags = {"gpucluster-cluster": cluster.name, "gpucluster-group": group.group}
    market: dict[str, Any] = {}
    if cloud.capacity == "capacity-block":
        market["instance_market_options"] = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(
            market_type="capacity-block"
        )
    elif cloud.capacity == "spot":
        market["instance_market_options"] = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(
            market_type="spot"
        )
    if cloud.reservation is not None:
        market["capacity_reservation_specification"] = (
            aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                    capacity_reservation_id=cloud.reservation
                )
            )
        )
    boot = base64.b64encode(boot_config(cluster, group).encode()).decode()
    return aws.ec2.LaunchTemplate(
        name,
        name=name,
        image_id=cloud.image,
        instance_type=cluster.node_type(group.hosts[0]).instance_type,
        iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(arn=profile.arn),
        network_interfaces=[
            aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                device_index=0, subnet_id=cloud.subnet, security_groups=[firewall.id], delete_on_termination="true"
            )
        ],
        placement=aws.ec2.LaunchTemplatePlacementArgs(
            group_name=placement.name if placement else None, availability_zone=cloud.zone
        ),
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/sda1",
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(volume_size=cloud.disk_gb, volume_type="gp3", delete_on_termination="true"),
            )
        ],
        # The first boot reads the node's name from its tags (gpucluster-power tags each instance).
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(http_tokens="required", instance_metadata_tags="enabled"),
        user_data=boot,
        tag_specifications=[aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type="instance", tags=tags)],
        tags=tags,
        **market,
    )  # fmt: skip


def _aws_controller_role(
    cluster: Cluster, config: BurstConfig, node_role: Any, templates: dict[str, Any]
) -> Any:
    """What gpucluster-power may do: run instances from the stack's templates only when they are
    tagged with the cluster, tag them as it runs them, stop, start and terminate only instances so
    tagged, describe instances (EC2 allows no narrower), and pass the nodes' role."""
    import pulumi_aws as aws

    tag = "aws:RequestTag/gpucluster-cluster"
    own = "ec2:ResourceTag/gpucluster-cluster"

    def policy(args: list[Any]) -> str:
        node_role_arn, *template_arns = args
        return json.dumps({
            "Version": "2012-10-17",
            "Statement": [
                {"Sid": "RunFromTheTemplates", "Effect": "Allow", "Action": "ec2:RunInstances",
                 "Resource": template_arns},
                {"Sid": "RunTaggedInstances", "Effect": "Allow", "Action": "ec2:RunInstances",
                 "Resource": ["arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:*:*:volume/*"],
                 "Condition": {"StringEquals": {tag: cluster.name}}},
                {"Sid": "RunInTheirNetwork", "Effect": "Allow", "Action": "ec2:RunInstances",
                 "Resource": ["arn:aws:ec2:*:*:subnet/*", "arn:aws:ec2:*:*:network-interface/*",
                              "arn:aws:ec2:*:*:security-group/*", "arn:aws:ec2:*::image/*",
                              "arn:aws:ec2:*:*:placement-group/*", "arn:aws:ec2:*:*:capacity-reservation/*"]},
                {"Sid": "TagAsTheyRun", "Effect": "Allow", "Action": "ec2:CreateTags",
                 "Resource": ["arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:*:*:volume/*"],
                 "Condition": {"StringEquals": {"ec2:CreateAction": "RunInstances"}}},
                {"Sid": "OnlyTheirInstances", "Effect": "Allow",
                 "Action": ["ec2:TerminateInstances", "ec2:StopInstances", "ec2:StartInstances"],
                 "Resource": "arn:aws:ec2:*:*:instance/*", "Condition": {"StringEquals": {own: cluster.name}}},
                {"Sid": "LookUp", "Effect": "Allow", "Action": ["ec2:DescribeInstances"], "Resource": "*"},
                {"Sid": "PassTheNodesRole", "Effect": "Allow", "Action": "iam:PassRole", "Resource": node_role_arn},
            ],
        })  # fmt: skip

    principal = config.controller_principal
    trust = _assume("AWS", principal) if principal else {"Version": "2012-10-17", "Statement": []}
    arns = pulumi.Output.all(node_role.arn, *(t.arn for t in templates.values()))
    return aws.iam.Role(
        f"{cluster.name}-burst-controller",
        assume_role_policy=json.dumps(trust),
        inline_policies=[aws.iam.RoleInlinePolicyArgs(name="gpucluster-power", policy=arns.apply(policy))],
    )


def build_gcp(cluster: Cluster, config: BurstConfig) -> dict[str, Any]:
    import pulumi_gcp as gcp

    groups = stack_groups(cluster, "gcp")
    if not groups:
        return {}
    project = groups[0].power.cloud.project if groups[0].power.cloud else None
    secret_id = munge_secret_name(cluster)
    secret = gcp.secretmanager.Secret(secret_id, secret_id=secret_id, project=project,
                                      replication=gcp.secretmanager.SecretReplicationArgs(auto=gcp.secretmanager.SecretReplicationAutoArgs()))  # fmt: skip
    gcp.secretmanager.SecretVersion(secret_id, secret=secret.id, secret_data=config.munge_key)
    nodes = gcp.serviceaccount.Account(f"{cluster.name}-burst-node", account_id=f"{cluster.name}-burst-node"[:30],
                                       display_name=f"Slurm burst nodes of {cluster.name}", project=project)  # fmt: skip
    gcp.secretmanager.SecretIamMember(
        secret_id, secret_id=secret.id, role="roles/secretmanager.secretAccessor",
        member=nodes.email.apply(lambda email: f"serviceAccount:{email}"),
    )  # fmt: skip
    templates = {g.group: _gcp_template(cluster, g, config, nodes) for g in groups}
    controller = _gcp_controller(cluster, project, nodes)
    return {
        "templates": {name: t.self_link for name, t in templates.items()},
        "controllerServiceAccount": controller.email,
        "mungeKeySecret": secret.id,
    }


def _gcp_template(cluster: Cluster, group: PowerGroup, config: BurstConfig, nodes: Any) -> Any:
    import pulumi_gcp as gcp

    cloud = group.power.cloud
    assert cloud is not None and cloud.zone is not None
    name = template_name(cluster, group.group)
    region = cloud.zone.rsplit("-", 1)[0]
    gcp.compute.Firewall(
        name,
        network=gcp.compute.get_subnetwork(name=cloud.subnet, region=region, project=cloud.project).network,
        project=cloud.project,
        allows=[gcp.compute.FirewallAllowArgs(protocol=SLURM_TRAFFIC)],
        source_ranges=config.controller_cidrs,
        target_tags=[name],
    )
    policy: Any = None
    if cloud.placement:
        compact = gcp.compute.ResourcePolicy(
            name, region=region, project=cloud.project,
            group_placement_policy=gcp.compute.ResourcePolicyGroupPlacementPolicyArgs(collocation="COLLOCATED"),
        )  # fmt: skip
        policy = compact.self_link
    scheduling: dict[str, Any] = {"on_host_maintenance": "TERMINATE", "automatic_restart": False}
    if cloud.capacity == "spot":
        scheduling.update(provisioning_model="SPOT", preemptible=True, instance_termination_action="DELETE")
    reservation = None
    if cloud.reservation is not None:
        reservation = gcp.compute.InstanceTemplateReservationAffinityArgs(
            type="SPECIFIC_RESERVATION",
            specific_reservation=gcp.compute.InstanceTemplateReservationAffinitySpecificReservationArgs(
                key="compute.googleapis.com/reservation-name", values=[cloud.reservation]
            ),
        )
    return gcp.compute.InstanceTemplate(
        name,
        name=name,
        project=cloud.project,
        machine_type=cluster.node_type(group.hosts[0]).instance_type,
        disks=[gcp.compute.InstanceTemplateDiskArgs(source_image=cloud.image, disk_size_gb=cloud.disk_gb, boot=True, auto_delete=True)],
        network_interfaces=[gcp.compute.InstanceTemplateNetworkInterfaceArgs(subnetwork=cloud.subnet, subnetwork_project=cloud.project)],
        service_account=gcp.compute.InstanceTemplateServiceAccountArgs(email=nodes.email, scopes=["cloud-platform"]),
        metadata={"user-data": boot_config(cluster, group)},
        labels={"gpucluster-cluster": cluster.name, "gpucluster-group": group.group.replace("_", "-")},
        tags=[name],
        scheduling=gcp.compute.InstanceTemplateSchedulingArgs(**scheduling),
        reservation_affinity=reservation,
        resource_policies=policy,
    )  # fmt: skip


# What gpucluster-power calls on GCP (instances.bulkInsert/get/start/stop/delete and their operations).
GCP_CONTROLLER_PERMISSIONS = (
    "compute.instances.create", "compute.instances.get", "compute.instances.delete",
    "compute.instances.start", "compute.instances.stop", "compute.instances.setLabels",
    "compute.instances.setMetadata", "compute.instances.setServiceAccount",
    "compute.instanceTemplates.useReadOnly", "compute.disks.create", "compute.subnetworks.use",
    "compute.zoneOperations.get", "compute.resourcePolicies.use", "compute.reservations.get",
)  # fmt: skip


def _gcp_controller(cluster: Cluster, project: str | None, nodes: Any) -> Any:
    import pulumi_gcp as gcp

    role = gcp.projects.IAMCustomRole(
        f"{cluster.name}-burst-controller",
        role_id=f"{cluster.name}BurstController".replace("-", "_"),
        title=f"gpucluster-power of {cluster.name}",
        permissions=list(GCP_CONTROLLER_PERMISSIONS),
        project=project,
    )
    account = gcp.serviceaccount.Account(f"{cluster.name}-burst-ctl", account_id=f"{cluster.name}-burst-ctl"[:30],
                                         display_name=f"gpucluster-power of {cluster.name}", project=project)  # fmt: skip
    member = account.email.apply(lambda email: f"serviceAccount:{email}")
    gcp.projects.IAMMember(
        f"{cluster.name}-burst-controller", project=project or "", role=role.name, member=member
    )
    # The nodes run as their own account: the controllers may hand them that one, no other.
    gcp.serviceaccount.IAMMember(f"{cluster.name}-burst-act-as", service_account_id=nodes.name,
                                 role="roles/iam.serviceAccountUser", member=member)  # fmt: skip
    return account


def _assume(kind: str, principal: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {kind: principal}, "Action": "sts:AssumeRole"}],
    }


def _allow(actions: list[str], resources: list[str]) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": actions, "Resource": resources}],
    }
