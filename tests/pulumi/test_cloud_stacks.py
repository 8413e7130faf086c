"""Each stack program, run for its dev and prod config under Pulumi mocks: what it creates and exports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cloud_harness import REPO, StackRun, inventory_copy, run_stack, stack_config
from pulumi.runtime import rpc

from gpucluster.cloud.guardrails import aks_pool_name
from gpucluster.cloud.pools import CloudPlan, plan_cloud
from gpucluster.k8s.render import releases
from gpucluster.layers import load_cluster

CLOUDS = ["aws", "gcp", "azure", "nebius"]
POOL_TYPES = {
    "aws": "eks:index:ManagedNodeGroup",
    "gcp": "gcp:container/nodePool:NodePool",
    "azure": "azure-native:containerservice:AgentPool",
    "nebius": "nebius:index/mk8sV1NodeGroup:Mk8sV1NodeGroup",
}
COMPONENT = {
    "aws": "gpucluster:aws:GpuNodePool",
    "gcp": "gpucluster:gcp:GpuNodePool",
    "azure": "gpucluster:azure:GpuNodePool",
    "nebius": "gpucluster:nebius:GpuNodeGroup",
}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
OWNER_LABEL = "gpucluster.io/owner"
# NoExecute, as the Kubernetes layer taints its nodes and the NodeSets tolerate it.
OWNER_TAINT = {"key": "gpucluster.io/owner", "value": "slurm-on-kubernetes", "effect": "NoExecute"}
ENUM_EFFECT = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}


def plan_of(cloud: str, stack: str) -> CloudPlan:
    inventory = (
        REPO / "stacks" / cloud / stack_config(cloud, stack)[f"gpucluster-{cloud}:inventory"]
    ).resolve()
    plan = plan_cloud(load_cluster(inventory))
    assert plan is not None
    return plan


def pool_size(cloud: str, inputs: dict[str, Any]) -> int:
    if cloud == "aws":
        scaling = inputs["scalingConfig"]
        assert scaling["minSize"] == scaling["maxSize"] == scaling["desiredSize"]
        return int(scaling["desiredSize"])
    return int(inputs[{"gcp": "nodeCount", "azure": "count", "nebius": "fixedNodeCount"}[cloud]])


def pool_labels(cloud: str, inputs: dict[str, Any]) -> dict[str, str]:
    if cloud == "aws":
        return dict(inputs["labels"])
    if cloud == "gcp":
        return dict(inputs["nodeConfig"]["labels"])
    if cloud == "azure":
        return dict(inputs["nodeLabels"])
    return dict(inputs["template"]["metadata"]["labels"])


def pool_taints(cloud: str, inputs: dict[str, Any]) -> list[Any]:
    """The taints as the provider takes them: AKS `key=value:Effect` strings, the others
    {key, value, effect} with the effect in enum form (EKS taints, GKE node_config, mk8s template)."""
    return list(
        {
            "aws": lambda: inputs.get("taints", []),
            "gcp": lambda: inputs["nodeConfig"].get("taints", []),
            "azure": lambda: inputs.get("nodeTaints", []),
            "nebius": lambda: inputs["template"].get("taints", []),
        }[cloud]()
    )


def provider_taint(cloud: str, taint: dict[str, str]) -> Any:
    """A taint in the provider's own format."""
    if cloud == "azure":
        return f"{taint['key']}={taint['value']}:{taint['effect']}"
    return {**taint, "effect": ENUM_EFFECT[taint["effect"]]}


def has_gpu_taint(cloud: str, inputs: dict[str, Any]) -> bool:
    return provider_taint(cloud, GPU_TAINT) in pool_taints(cloud, inputs)


def has_owner_taint(cloud: str, inputs: dict[str, Any]) -> bool:
    return provider_taint(cloud, OWNER_TAINT) in pool_taints(cloud, inputs)


def pool_resource(cloud: str, run: StackRun, pool_name: str) -> dict[str, Any]:
    return run.one(POOL_TYPES[cloud], pool_name).inputs


@pytest.fixture(
    scope="module", params=[(c, s) for c in CLOUDS for s in ("dev", "prod")], ids=lambda p: f"{p[0]}-{p[1]}"
)
def stack_run(request: pytest.FixtureRequest) -> tuple[str, str, StackRun, CloudPlan]:
    cloud, stack = request.param
    return cloud, stack, run_stack(cloud, stack), plan_of(cloud, stack)


def test_every_inventory_pool_becomes_a_tainted_labelled_pool_of_its_size(stack_run: Any) -> None:
    cloud, _, run, plan = stack_run
    assert len(run.resources) > 5
    assert len(run.of_type(COMPONENT[cloud])) == len(plan.pools) > 0
    hosts = 0
    cluster = load_cluster(plan_inventory(cloud, stack_run[1]))
    for pool in plan.pools:
        inputs = pool_resource(cloud, run, pool.name)
        assert pool_size(cloud, inputs) == pool.size == len(pool.hosts)
        assert pool_labels(cloud, inputs) == pool.labels
        assert pool.labels["gpucluster.io/node-type"] == pool.node_type
        assert has_gpu_taint(cloud, inputs)
        hosts += pool.size
    assert hosts == len(cluster.hosts)


def test_every_pool_carries_its_one_owner_and_slurm_on_kubernetes_pools_are_tainted(
    stack_run: Any,
) -> None:
    cloud, stack, run, plan = stack_run
    cluster = load_cluster(plan_inventory(cloud, stack))
    for pool in plan.gpu_pools:
        inputs = pool_resource(cloud, run, pool.name)
        (owner,) = {cluster.owner_of[h] for h in pool.hosts}  # a pool never mixes owners
        assert owner in ("kubernetes", "slurm-on-kubernetes")
        assert pool_labels(cloud, inputs)[OWNER_LABEL] == owner
        assert has_owner_taint(cloud, inputs) == (owner == "slurm-on-kubernetes")
        taints = pool_taints(cloud, inputs)
        assert len(taints) == (2 if owner == "slurm-on-kubernetes" else 1)
        assert run.outputs["pools"][pool.name]["owner"] == owner


def test_gcp_prod_slinky_pool_next_to_a_kubernetes_pool() -> None:
    run = run_stack("gcp", "prod")
    slinky = pool_resource("gcp", run, "gcp-prod-a3-slurm-rack1")["nodeConfig"]
    plain = pool_resource("gcp", run, "gcp-prod-a3-k8s-rack2")["nodeConfig"]
    assert slinky["labels"][OWNER_LABEL] == "slurm-on-kubernetes"
    assert slinky["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"},
        {"key": "gpucluster.io/owner", "value": "slurm-on-kubernetes", "effect": "NO_EXECUTE"},
    ]
    assert plain["labels"][OWNER_LABEL] == "kubernetes"
    assert plain["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
    facts = run.outputs["pools"]
    assert facts["gcp-prod-a3-slurm-rack1"]["hosts"] == "a3-[01-08]"
    assert facts["gcp-prod-a3-slurm-rack1"]["taints"] == [
        "nvidia.com/gpu=present:NoSchedule",
        "gpucluster.io/owner=slurm-on-kubernetes:NoExecute",
    ]
    assert facts["gcp-prod-a3-k8s-rack2"]["hosts"] == "a3-[09-16]"


@pytest.mark.parametrize("cloud", CLOUDS)
def test_slurm_on_kubernetes_pool_has_the_owner_taint_in_the_providers_format(
    tmp_path: Path, cloud: str
) -> None:
    """Each provider's taint format, for a pool owned by Slurm on Kubernetes (the prod inventory,
    made wholly slurm-on-kubernetes)."""
    inventory = inventory_copy(tmp_path, f"{cloud}-prod", slinky_everywhere)
    run = run_stack(cloud, "prod", {f"gpucluster-{cloud}:inventory": str(inventory)})
    plan = plan_cloud(load_cluster(inventory))
    assert plan is not None and plan.pools
    for pool in plan.pools:
        inputs = pool_resource(cloud, run, pool.name)
        assert pool_labels(cloud, inputs)[OWNER_LABEL] == "slurm-on-kubernetes"
        expected = [provider_taint(cloud, GPU_TAINT), provider_taint(cloud, OWNER_TAINT)]
        assert pool_taints(cloud, inputs) == expected


def slinky_everywhere(cluster: dict[str, Any]) -> None:
    """Every GPU group owned by Slurm on Kubernetes (Slinky), in one partition."""
    groups = [entry["group"] for entry in cluster["nodes"]]
    for entry in cluster["nodes"]:
        entry["owner"] = "slurm-on-kubernetes"
    cluster["partitions"] = [{"name": "batch", "nodes": groups, "default": True}]
    cluster["tenants"] = []
    cluster["kubernetes"]["slurm"] = {"operator": "slinky"}
    cluster["kubernetes"]["kueue"] = {"enabled": False}  # no Kubernetes-owned nodes left for it
    cluster["slurm"]["version"] = "25.11"  # the oldest Slurm the pinned Slinky runs


def plan_inventory(cloud: str, stack: str) -> Path:
    return (REPO / "stacks" / cloud / stack_config(cloud, stack)[f"gpucluster-{cloud}:inventory"]).resolve()


def test_outputs_kubeconfig_secret_pool_facts_and_ansible_inventory(stack_run: Any) -> None:
    cloud, stack, run, plan = stack_run
    assert "kubeconfig" in run.secret_outputs
    assert "apiVersion" in run.outputs["kubeconfig"]
    assert {"pools", "ansibleInventory", "clusterName"} <= set(run.outputs)
    facts = run.outputs["pools"]
    assert set(facts) == {p.name for p in plan.pools}
    for pool in plan.pools:
        assert facts[pool.name]["gpus"] == pool.size * pool.gpus
        assert facts[pool.name]["taints"][0] == "nvidia.com/gpu=present:NoSchedule"
        assert facts[pool.name]["taints"] == [t.kubectl_form for t in pool.taints]
    inventory = yaml.safe_load(run.outputs["ansibleInventory"])
    api = inventory["all"]["children"]["kubernetes_api"]
    assert api["hosts"] == {"localhost": {"ansible_connection": "local"}}
    assert api["vars"]["gpucluster_inventory"] == str(plan_inventory(cloud, stack))
    assert api["vars"]["gpucluster_node_pools"] == json.loads(json.dumps(facts))
    assert run.outputs["kubeconfig"] not in run.outputs["ansibleInventory"]  # the secret stays out


def test_aws_prod_capacity_block_efa_placement_and_pinned_ami() -> None:
    run = run_stack("aws", "prod")
    plan = plan_of("aws", "prod")
    assert run.one("pulumi:providers:aws", "aws").inputs["region"] == "us-east-1"
    cluster = run.one("eks:index:Cluster", "aws-prod").inputs
    assert cluster["version"] == "1.33" and cluster["skipDefaultNodeGroup"] is True
    assert cluster["authenticationMode"] == "API"
    assert len(run.of_type("aws:ec2/subnet:Subnet")) == 4
    system = run.one("eks:index:ManagedNodeGroup", "aws-prod-system").inputs
    assert system["instanceTypes"] == ["m7i.2xlarge"] and "taints" not in system
    for pool in plan.pools:
        group = run.one("eks:index:ManagedNodeGroup", pool.name).inputs
        assert group["amiType"] == "AL2023_x86_64_NVIDIA"
        assert group["releaseVersion"] == "1.33.5-20251120"
        assert group["capacityType"] == "CAPACITY_BLOCK"
        assert "instanceTypes" not in group  # the launch template carries it
        assert group["subnetIds"] == ["aws-prod-private-us-east-1a-id"]
        assert group["launchTemplate"] == {"id": f"{pool.name}-id", "version": "1"}
        template = run.one("aws:ec2/launchTemplate:LaunchTemplate", pool.name).inputs
        assert template["instanceType"] == "p5.48xlarge"
        assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
        target = template["capacityReservationSpecification"]["capacityReservationTarget"]
        assert target == {"capacityReservationId": "cr-0123456789abcdef0"}
        assert template["placement"] == {"groupId": f"{pool.name}-id"}
        assert run.one("aws:ec2/placementGroup:PlacementGroup", pool.name).inputs["strategy"] == "cluster"
        nics = template["networkInterfaces"]
        assert len(nics) == 32
        assert [n["interfaceType"] for n in nics] == ["efa"] + ["efa-only"] * 31
        assert [n["networkCardIndex"] for n in nics] == list(range(32))
        assert [n["deviceIndex"] for n in nics] == [0] + [1] * 31
        assert all(n["securityGroups"] == ["sg-eks-cluster", "aws-prod-efa-id"] for n in nics)
    assert sorted(run.calls, key=str) == [
        ("aws:ec2/getInstanceType:getInstanceType", {"instanceType": "p5.48xlarge"}),
        ("aws:ec2/getInstanceType:getInstanceType", {"instanceType": "p5.48xlarge"}),
        ("aws:eks/getCluster:getCluster", {"name": "aws-prod"}),
    ]
    efa = run.one("aws:ec2/securityGroup:SecurityGroup", "aws-prod-efa").inputs
    assert efa["ingress"][0]["self"] is True and efa["ingress"][0]["protocol"] == "-1"


def test_aws_dev_on_demand_pool_has_no_reservation() -> None:
    run = run_stack("aws", "dev")
    group = run.one("eks:index:ManagedNodeGroup", "aws-dev-p4d").inputs
    assert group["capacityType"] == "ON_DEMAND"
    template = run.one("aws:ec2/launchTemplate:LaunchTemplate", "aws-dev-p4d").inputs
    assert template["instanceType"] == "p4d.24xlarge"
    assert "instanceMarketOptions" not in template and "capacityReservationSpecification" not in template
    assert run.one("pulumi:providers:aws", "aws").inputs["region"] == "us-west-2"


def test_gcp_prod_driver_left_to_the_gpu_operator_compact_no_auto_upgrade() -> None:
    run = run_stack("gcp", "prod")
    cluster = run.one("gcp:container/cluster:Cluster", "gcp-prod").inputs
    assert cluster["releaseChannel"] == {"channel": "UNSPECIFIED"}
    assert cluster["removeDefaultNodePool"] is True and cluster["minMasterVersion"] == "1.34"
    for pool in plan_of("gcp", "prod").pools:
        inputs = pool_resource("gcp", run, pool.name)
        assert inputs["management"] == {"autoRepair": True, "autoUpgrade": False}
        assert inputs["placementPolicy"] == {"type": "COMPACT"}
        node = inputs["nodeConfig"]
        assert node["machineType"] == "a3-highgpu-8g"
        assert node["imageType"] == "UBUNTU_CONTAINERD"
        assert node["guestAccelerators"] == [
            {
                "type": "nvidia-h100-80gb",
                "count": 8,
                "gpuDriverInstallationConfig": {"gpuDriverVersion": "INSTALLATION_DISABLED"},
            }
        ]
        assert node["reservationAffinity"]["values"] == ["a3-prod-reservation"]
        assert node["spot"] is False
    assert run.one("pulumi:providers:gcp", "gcp").inputs["project"] == "gpucluster-prod"


def test_gcp_dev_gke_installs_the_driver_on_spot_nodes() -> None:
    run = run_stack("gcp", "dev")
    node = run.one("gcp:container/nodePool:NodePool", "gcp-dev-a3").inputs["nodeConfig"]
    assert node["guestAccelerators"][0]["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "LATEST"}
    assert node["imageType"] == "COS_CONTAINERD" and node["spot"] is True
    assert "kubeconfig" in run.secret_outputs and "gke-gcloud-auth-plugin" in run.outputs["kubeconfig"]


def test_azure_prod_pools_skip_the_driver_and_use_proximity_placement() -> None:
    run = run_stack("azure", "prod")
    cluster = run.one("azure-native:containerservice:ManagedCluster", "azure-prod").inputs
    assert cluster["autoUpgradeProfile"] == {"upgradeChannel": "none", "nodeOSUpgradeChannel": "None"}
    assert cluster["agentPoolProfiles"][0]["mode"] == "System"
    for pool in plan_of("azure", "prod").pools:
        inputs = pool_resource("azure", run, pool.name)
        assert inputs["gpuProfile"] == {"driver": "None"}
        assert inputs["vmSize"] == "Standard_ND96isr_H100_v5"
        assert inputs["mode"] == "User" and inputs["enableAutoScaling"] is False
        assert inputs["agentPoolName"] == aks_pool_name(pool.name, "azure-prod")
        assert inputs["proximityPlacementGroupID"] == f"{pool.name}-id"
        group = run.one("azure-native:compute:ProximityPlacementGroup", pool.name).inputs
        assert group["intent"] == {"vmSizes": ["Standard_ND96isr_H100_v5"]}
    assert [c[0] for c in run.calls] == ["azure-native:containerservice:listManagedClusterUserCredentials"]
    assert run.outputs["kubeconfig"].startswith("apiVersion: v1")


def test_azure_dev_gpu_operator_leaves_the_driver_to_aks() -> None:
    run = run_stack("azure", "dev")
    assert run.one("azure-native:containerservice:AgentPool", "azure-dev-nd").inputs["gpuProfile"] == {
        "driver": "Install"
    }


def test_nebius_prod_gpu_clusters_on_the_fabric_and_no_driver_preset() -> None:
    run = run_stack("nebius", "prod")
    for pool in plan_of("nebius", "prod").pools:
        gpu_cluster = run.one("nebius:index/computeV1GpuCluster:ComputeV1GpuCluster", pool.name).inputs
        assert gpu_cluster["infinibandFabric"] == "fabric-3"
        template = pool_resource("nebius", run, pool.name)["template"]
        assert template["gpuCluster"] == {"id": f"{pool.name}-id"}
        assert template["resources"] == {"platform": "gpu-h100-sxm", "preset": "8gpu-128vcpu-1600gb"}
        assert "gpuSettings" not in template
    control = run.one("nebius:index/mk8sV1Cluster:Mk8sV1Cluster", "nebius-prod").inputs["controlPlane"]
    assert control["version"] == "1.32" and control["subnetId"] == "vpcsubnet-e00prod000000000000"
    assert "https://203.0.113.20" in run.outputs["kubeconfig"]


def test_nebius_dev_driver_from_the_image_preset() -> None:
    run = run_stack("nebius", "dev")
    template = run.one("nebius:index/mk8sV1NodeGroup:Mk8sV1NodeGroup", "nebius-dev-h100").inputs["template"]
    assert template["gpuSettings"] == {"driversPreset": "cuda12"}


def test_install_kubernetes_uses_exactly_the_rendered_releases() -> None:
    run = run_stack("aws", "prod", {"gpucluster-aws:installKubernetes": True})
    cluster = load_cluster(REPO / "inventories" / "aws-prod")
    assert cluster.spec.kubernetes is not None
    expected = releases(cluster, cluster.spec.kubernetes)
    created = run.of_type("kubernetes:helm.sh/v3:Release")
    assert [r.name for r in created] == [r.name for r in expected] != []
    for release, made in zip(expected, created, strict=True):
        assert made.inputs["values"] == json.loads(json.dumps(release.values))
        assert made.inputs["version"] == release.pin.version
        assert made.inputs["namespace"] == release.namespace
    assert run.outputs["helmReleases"] == [r.name for r in expected]
    kubeconfig = run.one("pulumi:providers:kubernetes", "aws-prod").inputs["kubeconfig"]
    # The provider gets the kubeconfig as a secret (Pulumi's wire form: signature key + value).
    assert kubeconfig == {rpc._special_sig_key: rpc._special_secret_sig, "value": '{"apiVersion": "v1"}'}


def test_without_install_kubernetes_no_release_is_created() -> None:
    assert run_stack("aws", "prod").of_type("kubernetes:helm.sh/v3:Release") == []


# --- guardrails stop the program before the first resource -----------------------------------


def stopped(cloud: str, stack: str, config: dict[str, Any]) -> tuple[str, StackRun]:
    import pulumi

    run = StackRun()
    with pytest.raises(pulumi.RunError) as caught:
        run_stack(cloud, stack, config, run=run)
    assert run.resources == [], "the program created resources before the guardrails stopped it"
    return str(caught.value), run


def test_region_in_stack_config_must_match_inventory() -> None:
    message, _ = stopped("aws", "prod", {"aws:region": "eu-west-1"})
    assert (
        "stacks/aws/Pulumi.prod.yaml: aws:region: eu-west-1 differs from cluster.cloud.region us-east-1"
        in message
    )


def test_inventory_of_another_cloud_is_refused() -> None:
    message, _ = stopped("gcp", "prod", {"gpucluster-gcp:inventory": "../../inventories/aws-prod"})
    assert "is for cloud.provider aws, but this is the gcp stack" in message


def test_bad_inventory_stops_the_stack_naming_the_key(tmp_path: Path) -> None:
    def enable_upgrades(cluster: dict[str, Any]) -> None:
        cluster["cloud"]["pools"]["p5"]["auto_upgrade"] = True

    broken = inventory_copy(tmp_path, "aws-prod", enable_upgrades)
    message, _ = stopped("aws", "prod", {"gpucluster-aws:inventory": str(broken)})
    assert "group_vars/all/cluster.yml:" in message
    assert "cluster.cloud.pools.p5.auto_upgrade: training pools must not auto-upgrade" in message


def test_missing_inventory_stops_the_stack(tmp_path: Path) -> None:
    message, _ = stopped("nebius", "dev", {"gpucluster-nebius:inventory": str(tmp_path / "nowhere")})
    assert "stopped by the guardrails" in message and "nowhere" in message


def test_cpu_node_type_gets_an_untainted_pool_without_efa(tmp_path: Path) -> None:
    def add_cpu_nodes(cluster: dict[str, Any]) -> None:
        cluster["node_types"]["cpu"] = {
            "sockets": 1,
            "cores_per_socket": 32,
            "memory_mb": 250000,
            "instance_type": "m7i.16xlarge",
        }
        cluster["nodes"].append({"group": "cpu", "type": "cpu", "owner": "kubernetes"})

    inventory = inventory_copy(tmp_path, "aws-dev", add_cpu_nodes)
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    hosts["all"]["children"]["cpu"] = {"hosts": {"cpu-[01:02]": None}}
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    run = run_stack("aws", "dev", {"gpucluster-aws:inventory": str(inventory)})
    group = run.one("eks:index:ManagedNodeGroup", "aws-dev-cpu").inputs
    assert group["amiType"] == "AL2023_x86_64_STANDARD"
    assert group.get("taints", []) == []
    assert group["labels"][OWNER_LABEL] == "kubernetes"
    assert group["scalingConfig"]["desiredSize"] == 2
    template = run.one("aws:ec2/launchTemplate:LaunchTemplate", "aws-dev-cpu").inputs
    assert template["instanceType"] == "m7i.16xlarge" and "networkInterfaces" not in template
    assert run.outputs["pools"]["aws-dev-cpu"]["gpus"] == 0
    # Only the GPU pool asked EC2 for its network cards.
    assert [c for c in run.calls if c[0].endswith("getInstanceType")] == [
        ("aws:ec2/getInstanceType:getInstanceType", {"instanceType": "p4d.24xlarge"})
    ]


def test_install_kubernetes_without_a_kubernetes_section_stops_first(tmp_path: Path) -> None:
    def without_kubernetes(cluster: dict[str, Any]) -> None:
        del cluster["kubernetes"]
        cluster["cloud"]["kubernetes_version"] = "1.32"

    inventory = inventory_copy(tmp_path, "nebius-dev", without_kubernetes)
    message, _ = stopped(
        "nebius",
        "dev",
        {"gpucluster-nebius:installKubernetes": True, "gpucluster-nebius:inventory": str(inventory)},
    )
    assert (
        "stacks/nebius/Pulumi.dev.yaml: gpucluster-nebius:installKubernetes: the inventory nebius-dev"
        in message
    )


def test_gcp_prod_creates_the_homes_filestore_and_exports_its_source() -> None:
    run = run_stack("gcp", "prod")
    (instance,) = run.of_type("gcp:filestore/instance:Instance")
    inputs = instance.inputs
    assert instance.name == inputs["name"] == "gcp-prod-home"
    assert inputs["tier"] == "ZONAL" and inputs["location"] == "us-central1-a"
    assert inputs["fileShares"] == {"name": "home", "capacityGb": 1024}
    # On the cluster's network (its name is computed, so unknown under mocks).
    assert [n["modes"] for n in inputs["networks"]] == [["MODE_IPV4"]]
    assert inputs["deletionProtectionEnabled"] is True
    # Under mocks GCP assigns no address: the source names where it goes.
    assert run.outputs["filesystems"] == {"home": "<address>:/home"}


def test_stacks_without_managed_storage_create_none() -> None:
    run = run_stack("gcp", "dev")
    assert run.of_type("gcp:filestore/instance:Instance") == [] and "filesystems" not in run.outputs
