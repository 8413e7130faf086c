"""stacks/burst under Pulumi's mocks: the template of each cloud group (not a pool), what it needs
(network rule from the controllers, placement, the nodes' identity reading the munge key), and
the controllers' least privilege, for the example that bursts a bare-metal cluster into AWS
(inventories/hybrid-aws) and for the same cluster bursting into GCP."""

from __future__ import annotations

import base64
import json
from typing import Any

import cloud_harness
import pytest
import yaml
from cloud_harness import inventory_copy, run_stack

ARNS = {
    "aws:secretsmanager/secret:Secret": {
        "arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:hybrid-munge-key-Ab12"
    },
    "aws:iam/role:Role": {"arn": "arn:aws:iam::123456789012:role/hybrid-burst-node"},
    "aws:iam/instanceProfile:InstanceProfile": {
        "arn": "arn:aws:iam::123456789012:instance-profile/hybrid-burst-node"
    },
    "aws:ec2/launchTemplate:LaunchTemplate": {
        "arn": "arn:aws:ec2:us-east-1:123456789012:launch-template/lt-0abc"
    },
}
MUNGE = base64.b64encode(b"k" * 1024).decode()


@pytest.fixture(autouse=True)
def burst_harness(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cloud_harness.PROJECTS, "burst", "gpucluster-burst")
    for typ, state in ARNS.items():
        monkeypatch.setitem(cloud_harness.COMPUTED, typ, {**cloud_harness.COMPUTED.get(typ, {}), **state})
    monkeypatch.setitem(
        cloud_harness.CALLS,
        "aws:ec2/getSubnet:getSubnet",
        {"id": "subnet-0a1b2c3d4e5f60718", "vpcId": "vpc-0123"},
    )
    monkeypatch.setitem(
        cloud_harness.CALLS,
        "gcp:compute/getSubnetwork:getSubnetwork",
        {"network": "projects/gpu-burst-1234/global/networks/site"},
    )


def test_aws_gets_a_launch_template_not_a_pool() -> None:
    run = run_stack("burst", "hybrid", {"gpucluster-burst:mungeKey": MUNGE})
    template = run.one("aws:ec2/launchTemplate:LaunchTemplate", "hybrid-aws-burst").inputs
    assert template["name"] == "hybrid-aws-burst"  # what gpucluster-power.json names
    assert template["imageId"] == "ami-0fedcba9876543210" and template["instanceType"] == "p5.48xlarge"
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["capacityReservationSpecification"]["capacityReservationTarget"] == {
        "capacityReservationId": "cr-0123456789abcdef0"
    }
    assert template["metadataOptions"] == {"httpTokens": "required", "instanceMetadataTags": "enabled"}
    boot = yaml.safe_load(base64.b64decode(template["userData"]).decode())
    join = boot["write_files"][0]["content"]
    assert "meta-data/tags/instance/gpucluster-node" in join
    assert "secretsmanager get-secret-value --region us-east-1 --secret-id hybrid-munge-key" in join
    assert 'SLURMD_OPTIONS=\\"--conf-server ctl01 -N $NODE\\"' in join
    assert 'grep -q "^slurm 26.05\\."' in join
    assert (
        run.one("aws:ec2/placementGroup:PlacementGroup", "hybrid-aws-burst").inputs["strategy"] == "cluster"
    )
    firewall = run.one("aws:ec2/securityGroup:SecurityGroup", "hybrid-aws-burst").inputs
    assert firewall["vpcId"] == "vpc-0123"
    assert firewall["ingress"][0]["cidrBlocks"] == ["192.168.0.0/20"]
    assert not run.of_type("eks:index:ManagedNodeGroup") and not run.of_type("aws:ec2/instance:Instance")
    assert set(run.outputs) == {"awsTemplates", "awsControllerRole", "awsMungeKeySecret"}


def test_the_nodes_read_the_munge_key_and_nothing_else() -> None:
    run = run_stack("burst", "hybrid", {"gpucluster-burst:mungeKey": MUNGE})
    node = run.one("aws:iam/role:Role", "hybrid-burst-node").inputs
    policy = json.loads(node["inlinePolicies"][0]["policy"])
    assert policy["Statement"] == [
        {
            "Effect": "Allow",
            "Action": ["secretsmanager:GetSecretValue"],
            "Resource": [ARNS["aws:secretsmanager/secret:Secret"]["arn"]],
        }
    ]
    version = run.one("aws:secretsmanager/secretVersion:SecretVersion", "hybrid-munge-key").inputs
    # Kept secret in the stack's state (Pulumi's secret signature), as the mungeKey config is.
    assert version["secretString"] == {
        "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
        "value": MUNGE,
    }


def statements(run: Any) -> dict[str, dict[str, Any]]:
    role = run.one("aws:iam/role:Role", "hybrid-burst-controller").inputs
    return {s["Sid"]: s for s in json.loads(role["inlinePolicies"][0]["policy"])["Statement"]}


def test_the_controllers_may_touch_only_the_cluster_s_instances() -> None:
    run = run_stack("burst", "hybrid", {"gpucluster-burst:mungeKey": MUNGE})
    found = statements(run)
    assert found["RunFromTheTemplates"]["Resource"] == [ARNS["aws:ec2/launchTemplate:LaunchTemplate"]["arn"]]
    assert found["RunTaggedInstances"]["Condition"] == {
        "StringEquals": {"aws:RequestTag/gpucluster-cluster": "hybrid"}
    }
    assert found["OnlyTheirInstances"]["Action"] == [
        "ec2:TerminateInstances",
        "ec2:StopInstances",
        "ec2:StartInstances",
    ]
    assert found["OnlyTheirInstances"]["Condition"] == {
        "StringEquals": {"ec2:ResourceTag/gpucluster-cluster": "hybrid"}
    }
    assert found["TagAsTheyRun"]["Condition"] == {"StringEquals": {"ec2:CreateAction": "RunInstances"}}
    assert found["PassTheNodesRole"]["Resource"] == ARNS["aws:iam/role:Role"]["arn"]
    # Every action gpucluster-power calls is granted, and nothing more.
    granted = {
        a for s in found.values() for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert granted == {
        "ec2:RunInstances", "ec2:CreateTags", "ec2:TerminateInstances", "ec2:StopInstances",
        "ec2:StartInstances", "ec2:DescribeInstances", "iam:PassRole",
    }  # fmt: skip
    trust = json.loads(run.one("aws:iam/role:Role", "hybrid-burst-controller").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {
        "AWS": "arn:aws:iam::123456789012:role/onprem-slurm-controllers"
    }


def test_gcp_gets_an_instance_template_with_compact_placement(tmp_path: Any) -> None:
    def to_gcp(cluster: dict[str, Any]) -> None:
        group = cluster["nodes"][1]["power"]["cloud"]
        group.update(provider="gcp", region="us-central1", zone="us-central1-a", project="gpu-burst-1234",
                     subnet="slurm-burst", image="projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64",
                     capacity="reservation", reservation="a3-deadline")  # fmt: skip
        cluster["node_types"]["p5"]["instance_type"] = "a3-highgpu-8g"

    inventory = inventory_copy(tmp_path, "hybrid-aws", to_gcp)
    run = run_stack(
        "burst", "hybrid", {"gpucluster-burst:inventory": str(inventory), "gpucluster-burst:mungeKey": MUNGE}
    )
    template = run.one("gcp:compute/instanceTemplate:InstanceTemplate", "hybrid-aws-burst").inputs
    assert template["machineType"] == "a3-highgpu-8g"
    assert template["reservationAffinity"]["specificReservation"]["values"] == ["a3-deadline"]
    assert template["scheduling"]["onHostMaintenance"] == "TERMINATE"
    assert "instance/name" in template["metadata"]["user-data"]
    compact = run.one("gcp:compute/resourcePolicy:ResourcePolicy", "hybrid-aws-burst").inputs
    assert compact["groupPlacementPolicy"] == {"collocation": "COLLOCATED"}
    role = run.one("gcp:projects/iAMCustomRole:IAMCustomRole", "hybrid-burst-controller").inputs
    assert (
        "compute.instances.create" in role["permissions"]
        and "compute.instances.setIamPolicy" not in role["permissions"]
    )
    assert set(run.outputs) == {"gcpTemplates", "gcpControllerServiceAccount", "gcpMungeKeySecret"}
