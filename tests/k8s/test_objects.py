"""Every generated object is one the API server of the pinned versions would accept."""

from __future__ import annotations

import copy

import celpy
import kubernetes_validate
import pytest
from celpy import celtypes

from tests.k8s.conftest import documents, k8s_inventories
from tests.k8s.crd import crd_index, validate_custom_resource

KUBE_VERSION = "1.34.0"
CORE_APIS = {"v1", "apps/v1", "resource.k8s.io/v1", "rbac.authorization.k8s.io/v1"}
# Custom resources without a CRD in the schema catalogue (none: every one is validated).
WITHOUT_PINNED_CRD: set[str] = set()


def test_examples_have_kubernetes() -> None:
    assert {"superpod", "nvl72", "gke-prod"} <= set(k8s_inventories())


def test_custom_resources_match_pinned_crds(inventory: str) -> None:
    evaluated = 0
    unchecked = set()
    for path, doc in documents(inventory):
        if doc["apiVersion"] in CORE_APIS:
            continue
        key = f"{doc['apiVersion']}/{doc['kind']}"
        if key in WITHOUT_PINNED_CRD:
            unchecked.add(key)
            continue
        try:
            evaluated += validate_custom_resource(doc).evaluated
        except AssertionError as exc:
            pytest.fail(f"{inventory}/{path}: {doc['kind']} {doc['metadata']['name']}: {exc}")
    if any(doc["kind"] in ("ClusterQueue", "Topology", "ResourceFlavor") for _, doc in documents(inventory)):
        assert evaluated > 0, "no x-kubernetes-validations rule was evaluated"
    assert unchecked <= WITHOUT_PINNED_CRD


def test_no_custom_resource_uses_a_deprecated_version(inventory: str) -> None:
    """Every custom resource names a version its pinned CRD serves without deprecation: Kueue 0.19
    serves v1beta1 deprecated and 0.20 stops serving it, so v1beta2 objects need no change there."""
    index = crd_index()
    for path, doc in documents(inventory):
        if doc["apiVersion"] in CORE_APIS:
            continue
        crd = index[(doc["apiVersion"], doc["kind"])]
        assert not crd.deprecated, f"{inventory}/{path}: {doc['kind']} uses deprecated {doc['apiVersion']}"
    assert index[("kueue.x-k8s.io/v1beta1", "ClusterQueue")].deprecated


def test_core_objects_match_kubernetes_openapi(inventory: str) -> None:
    seen = 0
    for path, doc in documents(inventory):
        if doc["apiVersion"] not in CORE_APIS:
            continue
        seen += 1
        try:
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{inventory}/{path}: {doc['kind']} {doc['metadata']['name']}: {exc}")
    assert seen > 0


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda t: t["spec"]["levels"].reverse(), "hostname label can only be used at the lowest level"),
        (lambda t: t["spec"]["levels"].insert(0, dict(t["spec"]["levels"][0])), "must be unique"),
        (lambda t: t["spec"].update(levels=[]), "should be non-empty"),
        (lambda t: t["spec"].update(levelz=[]), "Additional properties"),
    ],
)
def test_validator_refuses_bad_topology(mutate: object, expected: str) -> None:
    topology = next(
        d for _, d in documents("gke-prod") if d["kind"] == "Topology" and "kueue" in d["apiVersion"]
    )
    bad = copy.deepcopy(topology)
    mutate(bad)  # type: ignore[operator]
    with pytest.raises(AssertionError, match=expected):
        validate_custom_resource(bad)


def test_validator_refuses_borrowing_without_cohort() -> None:
    queue = next(d for _, d in documents("superpod") if d["kind"] == "ClusterQueue")
    bad = copy.deepcopy(queue)
    del bad["spec"]["cohortName"]
    with pytest.raises(AssertionError, match="borrowingLimit must be nil when cohort is empty"):
        validate_custom_resource(bad)
    bad = copy.deepcopy(queue)
    bad["spec"]["queueingStrategy"] = "FIFO"
    with pytest.raises(AssertionError, match="is not one of"):
        validate_custom_resource(bad)


def test_validator_refuses_wrong_scope() -> None:
    queue = copy.deepcopy(next(d for _, d in documents("superpod") if d["kind"] == "LocalQueue"))
    del queue["metadata"]["namespace"]
    with pytest.raises(AssertionError, match="Namespaced"):
        validate_custom_resource(queue)


def _quantity(text: celtypes.StringType) -> celtypes.IntType:
    units = {
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "Ti": 2**40,
        "k": 10**3,
        "M": 10**6,
        "G": 10**9,
        "T": 10**12,
    }
    for unit in sorted(units, key=len, reverse=True):
        if str(text).endswith(unit):
            return celtypes.IntType(int(str(text)[: -len(unit)]) * units[unit])
    return celtypes.IntType(int(str(text)))


def _compare(left: celtypes.IntType, right: celtypes.IntType) -> celtypes.IntType:
    return celtypes.IntType((left > right) - (left < right))


def _device(memory_bytes: int) -> celtypes.Value:
    return celpy.json_to_cel(
        {
            "driver": "gpu.nvidia.com",
            "attributes": {"gpu.nvidia.com": {"type": "gpu", "productName": "NVIDIA H100 80GB HBM3"}},
            "capacity": {"gpu.nvidia.com": {"memory": memory_bytes}},
        }
    )


def test_device_class_selectors_pick_the_right_gpus() -> None:
    """The DeviceClass CEL (as the DRA scheduler runs it) takes the node type's GPUs, not smaller ones."""
    classes = [d for _, d in documents("nvl72") if d["kind"] == "DeviceClass"]
    assert classes
    env = celpy.Environment()
    for device_class in classes:
        expression = device_class["spec"]["selectors"][0]["cel"]["expression"]
        program = env.program(
            env.compile(expression), functions={"quantity": _quantity, "compareTo": _compare}
        )
        gb200 = 189471 * 2**20  # what the driver reports for a GB200 (MiB)
        assert bool(program.evaluate({"device": _device(gb200)})) is True
        assert bool(program.evaluate({"device": _device(80 * 2**30)})) is False


def test_nic_cluster_policy_shape() -> None:
    """Beyond its pinned CRD (test_custom_resources_match_pinned_crds): the one policy the operator
    reads is named nic-cluster-policy, and the RDMA plugin is fully set."""
    (policy,) = [d for _, d in documents("superpod") if d["kind"] == "NicClusterPolicy"]
    assert policy["metadata"]["name"] == "nic-cluster-policy"
    assert "namespace" not in policy["metadata"]
    plugin = policy["spec"]["rdmaSharedDevicePlugin"]
    assert {"image", "repository", "version", "config"} <= set(plugin)
