"""gpucluster-power's cloud providers at the request level. No cloud is reachable from here: each
test drives the provider through the cloud's real SDK and checks what the SDK puts on the wire (or,
for AWS, what botocore's own Stubber validates against EC2's API model), and the provider's answer to
each of the cloud's error shapes (capacity, quota, throttling): a reason for the node and whether to
try again.

- AWS: boto3's EC2 client with botocore.stub.Stubber (params checked against the service model).
- GCP: google-cloud-compute's InstancesClient over its REST transport, HTTP answered by a requests
  adapter that records each request (URL, JSON body) and returns Compute Engine's JSON.
- Azure: azure-mgmt-compute's ComputeManagementClient over azure-core's RequestsTransport, the same
  way.
- Nebius: the SDK's own request messages (CreateInstanceRequest and its specs), built by the
  provider; its gRPC transport is not run.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any

import pytest
import requests
from requests.adapters import BaseAdapter

from gpucluster.render.power import program_path

if "gpucluster_power" not in sys.modules:
    spec = importlib.util.spec_from_file_location("gpucluster_power", program_path())
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpucluster_power"] = module
    spec.loader.exec_module(module)
power = sys.modules["gpucluster_power"]


def cloud_node(provider: str, **settings: Any) -> Any:
    base = {
        "provider": provider,
        "region": "us-east-1",
        "zone": None,
        "subnet": "subnet-0abc",
        "image": "ami-0123",
        "template": "lab-aws-burst",
        "instance_type": "p5.48xlarge",
        "capacity": "on-demand",
        "reservation": None,
        "on_suspend": "delete",
        "disk_gb": 200,
        "project": None,
    }
    return power.NodeConfig("aws-gpu01", "aws_burst", "cloud", 900, 600, {**base, **settings})


# --- AWS ------------------------------------------------------------------------------------


@pytest.fixture
def ec2() -> Any:
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


FIND = {
    "Filters": [
        {"Name": "tag:gpucluster-cluster", "Values": ["lab"]},
        {"Name": "tag:gpucluster-node", "Values": ["aws-gpu01"]},
        {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
    ]
}


def test_aws_creates_one_tagged_instance_from_the_launch_template_in_the_capacity_block(ec2: Any) -> None:
    client, stubber = ec2
    node = cloud_node("aws", capacity="capacity-block", reservation="cr-0123456789abcdef0")
    stubber.add_response("describe_instances", {"Reservations": []}, FIND)
    tags = [
        {"Key": "Name", "Value": "aws-gpu01"},
        {"Key": "gpucluster-cluster", "Value": "lab"},
        {"Key": "gpucluster-node", "Value": "aws-gpu01"},
        {"Key": "gpucluster-group", "Value": "aws_burst"},
    ]
    expected = {
        "MinCount": 1,
        "MaxCount": 1,
        "LaunchTemplate": {"LaunchTemplateName": "lab-aws-burst", "Version": "$Default"},
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": tags},
            {"ResourceType": "volume", "Tags": tags},
        ],
        "InstanceType": "p5.48xlarge",
        "InstanceMarketOptions": {"MarketType": "capacity-block"},
        "CapacityReservationSpecification": {
            "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}
        },
    }
    made = {
        "Instances": [{"InstanceId": "i-0aa", "InstanceType": "p5.48xlarge", "PrivateIpAddress": "10.20.0.7"}]
    }
    stubber.add_response("run_instances", made, expected)
    result = power.Aws("lab", client).on(node)
    assert result.done == "instance i-0aa (p5.48xlarge) created"
    assert result.address == "10.20.0.7"


def test_aws_does_not_make_a_second_instance_and_terminates_the_one_it_finds(ec2: Any) -> None:
    client, stubber = ec2
    running = {
        "Reservations": [
            {
                "Instances": [
                    {
                        "InstanceId": "i-0aa",
                        "State": {"Name": "running", "Code": 16},
                        "PrivateIpAddress": "10.20.0.7",
                    }
                ]
            }
        ]
    }
    stubber.add_response("describe_instances", running, FIND)
    stubber.add_response("describe_instances", running, FIND)
    stubber.add_response("terminate_instances", {"TerminatingInstances": []}, {"InstanceIds": ["i-0aa"]})
    provider = power.Aws("lab", client)
    assert provider.on(cloud_node("aws")).done == "instance i-0aa already running"
    assert provider.off(cloud_node("aws"), grace=60).done == "instance i-0aa terminated"


@pytest.mark.parametrize(
    ("code", "retry"),
    [
        ("InsufficientInstanceCapacity", True),
        ("RequestLimitExceeded", True),
        ("VcpuLimitExceeded", False),
        ("UnauthorizedOperation", False),
    ],
)
def test_aws_errors_become_the_node_s_reason_and_say_whether_to_try_again(
    ec2: Any, code: str, retry: bool
) -> None:
    client, stubber = ec2
    stubber.add_response("describe_instances", {"Reservations": []}, FIND)
    stubber.add_client_error(
        "run_instances",
        service_error_code=code,
        service_message=f"{code} in us-east-1a",
        http_status_code=400,
    )
    with pytest.raises(power.ProviderError) as caught:
        power.Aws("lab", client).on(cloud_node("aws"))
    assert caught.value.reason == f"aws {code}: {code} in us-east-1a"
    assert caught.value.retry is retry


def test_retries_follow_the_provider_and_stop_at_the_node_s_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(power.time, "sleep", lambda s: None)
    tries: list[int] = []

    def capacity() -> Any:
        tries.append(1)
        if len(tries) < 3:
            raise power.ProviderError("aws InsufficientInstanceCapacity: none", retry=True)
        return power.Result("created")

    assert (
        power.with_retries(capacity, deadline=power.time.monotonic() + 600, log=lambda m: None).done
        == "created"
    )
    assert len(tries) == 3
    with pytest.raises(power.ProviderError):
        power.with_retries(
            lambda: (_ for _ in ()).throw(power.ProviderError("quota", retry=False)),
            power.time.monotonic() + 600,
            lambda m: None,
        )


# --- HTTP recorders for the SDKs that speak REST through requests --------------------------


class Recorder(BaseAdapter):
    """A requests adapter: records each request, answers from `answers` (method, URL part)."""

    def __init__(self, answers: list[tuple[str, str, int, Any]]) -> None:
        super().__init__()
        self.answers = answers
        self.sent: list[requests.PreparedRequest] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        self.sent.append(request)
        for method, part, status, body in self.answers:
            if request.method == method and part in (request.url or ""):
                return respond(request, status, body)
        raise AssertionError(f"unexpected request {request.method} {request.url}")

    def close(self) -> None:
        pass


def respond(request: requests.PreparedRequest, status: int, body: Any) -> requests.Response:
    """A response as requests builds it from urllib3's (azure-core reads the raw stream)."""
    import io

    import urllib3

    content = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Content-Length": str(len(content))}
    raw = urllib3.HTTPResponse(
        body=io.BytesIO(content), headers=headers, status=status, preload_content=False
    )
    response = requests.adapters.HTTPAdapter().build_response(request, raw)
    return response


def body_of(request: requests.PreparedRequest) -> Any:
    raw = request.body or b"{}"
    return json.loads(raw.decode() if isinstance(raw, bytes) else raw)


# --- GCP ------------------------------------------------------------------------------------


def gcp_client(recorder: Recorder) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1
    from google.cloud.compute_v1.services.instances.transports.rest import InstancesRestTransport

    transport = InstancesRestTransport(credentials=AnonymousCredentials())
    transport._session.mount("https://", recorder)
    return compute_v1.InstancesClient(transport=transport)


def gcp_node(**settings: Any) -> Any:
    return cloud_node(
        "gcp",
        project="gpu-lab-1234",
        zone="us-central1-a",
        template="lab-gcp-burst",
        region="us-central1",
        **settings,
    )


NOT_FOUND = {
    "error": {
        "code": 404,
        "message": "The resource 'aws-gpu01' was not found",
        "errors": [{"reason": "notFound"}],
    }
}
DONE = {"name": "operation-1", "status": "DONE", "kind": "compute#operation"}
RUNNING = {"name": "aws-gpu01", "status": "RUNNING", "networkInterfaces": [{"networkIP": "10.30.0.9"}]}


def test_gcp_bulk_inserts_the_node_by_name_from_the_instance_template() -> None:
    recorder = Recorder([])
    gets = iter([(404, NOT_FOUND), (200, RUNNING)])

    def send(request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        recorder.sent.append(request)
        if request.method == "GET" and "/operations/" not in (request.url or ""):
            status, body = next(gets)
        else:
            status, body = 200, DONE
        return respond(request, status, body)

    recorder.send = send  # type: ignore[method-assign]
    result = power.Gcp("lab", gcp_client(recorder)).on(gcp_node())
    bulk = next(r for r in recorder.sent if r.method == "POST")
    assert (
        bulk.url
        == "https://compute.googleapis.com/compute/v1/projects/gpu-lab-1234/zones/us-central1-a/instances/bulkInsert"
    )
    assert body_of(bulk) == {
        "count": "1",
        "minCount": "1",
        "perInstanceProperties": {"aws-gpu01": {"name": "aws-gpu01"}},
        "sourceInstanceTemplate": "projects/gpu-lab-1234/global/instanceTemplates/lab-gcp-burst",
    }
    assert result.done == "instance aws-gpu01 created (bulkInsert)" and result.address == "10.30.0.9"


@pytest.mark.parametrize(
    ("status", "reason", "retry"),
    [(429, "rateLimitExceeded", True), (403, "quotaExceeded", False), (503, "backendError", True)],
)
def test_gcp_errors_become_the_node_s_reason(status: int, reason: str, retry: bool) -> None:
    error = {
        "error": {"code": status, "message": f"{reason} for a3-highgpu-8g", "errors": [{"reason": reason}]}
    }
    recorder = Recorder([("GET", "/instances/aws-gpu01", status, error)])
    with pytest.raises(power.ProviderError) as caught:
        power.Gcp("lab", gcp_client(recorder)).state(gcp_node())
    assert caught.value.reason == f"gcp {status}: {reason} for a3-highgpu-8g"
    assert caught.value.retry is retry


# --- Azure ----------------------------------------------------------------------------------


class Token:
    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken("token", 2**40)


def azure_client(recorder: Recorder) -> Any:
    from azure.core.pipeline.transport import RequestsTransport
    from azure.mgmt.compute import ComputeManagementClient

    session = requests.Session()
    session.mount("https://", recorder)
    return ComputeManagementClient(
        Token(), "sub-1", transport=RequestsTransport(session=session), polling_interval=0
    )


def azure_node(tmp_path: Any, **settings: Any) -> Any:
    boot = tmp_path / "boot.yaml"
    boot.write_text("#cloud-config\nruncmd: [systemctl start slurmd]\n")
    return cloud_node(
        "azure",
        region="eastus",
        zone="1",
        project="rg-gpu",
        image="microsoft-dsvm:ubuntu-hpc:2204:latest",
        subnet="/subscriptions/sub-1/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/v/subnets/gpu",
        instance_type="Standard_ND96isr_H100_v5",
        template=str(boot),
        **settings,
    )


VM = "/subscriptions/sub-1/resourceGroups/rg-gpu/providers/Microsoft.Compute/virtualMachines/aws-gpu01"


def test_azure_creates_the_vm_with_its_nic_and_the_boot_config(tmp_path: Any) -> None:
    missing = {"error": {"code": "ResourceNotFound", "message": "The Resource 'aws-gpu01' was not found."}}
    recorder = Recorder(
        [
            ("GET", f"{VM}/instanceView", 404, missing),
            (
                "PUT",
                VM,
                200,
                {"name": "aws-gpu01", "location": "eastus", "properties": {"provisioningState": "Succeeded"}},
            ),
        ]
    )
    provider = power.Azure("lab", azure_client(recorder), {"admin_ssh_public_key": "ssh-ed25519 AAAA lab"})
    result = provider.on(azure_node(tmp_path, capacity="spot"))
    put = next(r for r in recorder.sent if r.method == "PUT")
    body = body_of(put)
    assert body["location"] == "eastus" and body["zones"] == ["1"]
    assert body["tags"]["gpucluster-node"] == "aws-gpu01"
    props = body["properties"]
    assert props["hardwareProfile"] == {"vmSize": "Standard_ND96isr_H100_v5"}
    assert props["storageProfile"]["imageReference"] == {
        "publisher": "microsoft-dsvm",
        "offer": "ubuntu-hpc",
        "sku": "2204",
        "version": "latest",
    }
    assert (
        props["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]["deleteOption"] == "Delete"
    )
    assert props["priority"] == "Spot" and props["evictionPolicy"] == "Delete"
    assert "runcmd" in __import__("base64").b64decode(props["osProfile"]["customData"]).decode()
    assert result.done == "VM aws-gpu01 (Standard_ND96isr_H100_v5) created"


def test_azure_allocation_failures_are_tried_again_and_quota_is_not(tmp_path: Any) -> None:
    def failing(code: str, status: int) -> Any:
        error = {"error": {"code": code, "message": f"{code}: Standard_ND96isr_H100_v5 in eastus"}}
        return Recorder(
            [
                ("GET", f"{VM}/instanceView", 404, {"error": {"code": "ResourceNotFound", "message": "no"}}),
                ("PUT", VM, status, error),
            ]
        )

    settings = {"admin_ssh_public_key": "ssh-ed25519 AAAA lab"}
    with pytest.raises(power.ProviderError) as caught:
        power.Azure("lab", azure_client(failing("ZonalAllocationFailed", 409)), settings).on(
            azure_node(tmp_path)
        )
    assert caught.value.retry and caught.value.reason.startswith("azure ZonalAllocationFailed:")
    with pytest.raises(power.ProviderError) as caught:
        power.Azure("lab", azure_client(failing("OperationNotAllowed", 409)), settings).on(
            azure_node(tmp_path)
        )
    assert not caught.value.retry and "OperationNotAllowed" in caught.value.reason


# --- Nebius ---------------------------------------------------------------------------------


def test_nebius_builds_the_instance_request_from_the_group(tmp_path: Any) -> None:
    boot = tmp_path / "boot.yaml"
    boot.write_text("#cloud-config\n")
    node = cloud_node(
        "nebius",
        project="project-e00abc",
        subnet="vpcsubnet-e00def",
        image="computeimage-e00ghi",
        instance_type="gpu-h100-sxm/8gpu-128vcpu-1600gb",
        template=str(boot),
        capacity="spot",
    )
    request = power.Nebius("lab", client=None).create_request(node)
    assert request.metadata.parent_id == "project-e00abc" and request.metadata.name == "aws-gpu01"
    assert dict(request.metadata.labels)["gpucluster-cluster"] == "lab"
    spec = request.spec
    assert (spec.resources.platform, spec.resources.preset) == ("gpu-h100-sxm", "8gpu-128vcpu-1600gb")
    assert spec.boot_disk.managed_disk.spec.source_image_id == "computeimage-e00ghi"
    assert spec.network_interfaces[0].subnet_id == "vpcsubnet-e00def"
    assert spec.cloud_init_user_data == "#cloud-config\n"
    assert spec.hostname == "aws-gpu01"
