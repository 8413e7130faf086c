"""The tenants have the same numbers in Slurm (slurm/accounts.yaml) and in Kueue and KAI."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpucluster.k8s.objects import split_by_capacity
from tests.k8s.conftest import cluster_of, documents, rendered


def _quantity_sum(queue: dict[str, Any], field: str) -> int:
    total = 0
    for group in queue["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for resource in flavor["resources"]:
                if resource["name"] == "nvidia.com/gpu":
                    total += int(resource.get(field, 0))
    return total


def test_slurm_kueue_and_kai_agree(inventory: str) -> None:
    accounts = yaml.safe_load(rendered(inventory)["slurm/accounts.yaml"])["accounts"]
    objects = [doc for _, doc in documents(inventory)]
    kueue = {d["metadata"]["name"]: d for d in objects if d["kind"] == "ClusterQueue"}
    kai = {d["metadata"]["name"]: d for d in objects if d["kind"] == "Queue"}
    local = {d["metadata"]["name"]: d for d in objects if d["kind"] == "LocalQueue"}
    k8s = cluster_of(inventory).spec.kubernetes
    assert k8s is not None
    if not accounts:
        assert not kueue and not local
        assert [d["metadata"]["name"] for d in kai.values()] in ([], [k8s.kai.parent_queue])
        return
    for account in accounts:
        name = account["name"]
        if k8s.kueue.enabled:
            queue = kueue[name]
            assert _quantity_sum(queue, "nominalQuota") == account["gpu_quota"]
            assert _quantity_sum(queue, "borrowingLimit") == account["gpu_limit"] - account["gpu_quota"]
            assert queue["spec"]["fairSharing"]["weight"] == account["fairshare"]
            expected_cohort = k8s.kueue.cohort if account["parent"] == "root" else account["parent"]
            assert queue["spec"]["cohortName"] == expected_cohort
            assert local[name]["spec"]["clusterQueue"] == name
        if k8s.kai.enabled:
            gpu = kai[name]["spec"]["resources"]["gpu"]
            assert (gpu["quota"], gpu["limit"], gpu["overQuotaWeight"]) == (
                account["gpu_quota"],
                account["gpu_limit"],
                account["fairshare"],
            )
            parent = k8s.kai.parent_queue if account["parent"] == "root" else account["parent"]
            assert kai[name]["spec"]["parentQueue"] == parent
    if k8s.kueue.enabled:
        assert set(kueue) == {a["name"] for a in accounts}


def test_namespaces_follow_tenants() -> None:
    namespaces = {d["metadata"]["name"]: d for _, d in documents("gke-prod") if d["kind"] == "Namespace"}
    assert set(namespaces) == {"pretraining", "ft", "evals"}
    assert namespaces["ft"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    local = [
        d
        for _, d in documents("gke-prod")
        if d["kind"] == "LocalQueue" and d["metadata"]["name"] == "finetuning"
    ]
    assert local[0]["metadata"]["namespace"] == "ft"


@pytest.mark.parametrize(
    ("total", "capacities", "expected"),
    [
        (10, [8, 8], [5, 5]),
        (7, [16, 8], [5, 2]),
        (0, [8], [0]),
        (3, [1, 1, 1], [1, 1, 1]),
        (5, [0, 8], [0, 5]),
    ],
)
def test_split_by_capacity_keeps_the_total(total: int, capacities: list[int], expected: list[int]) -> None:
    shares = split_by_capacity(total, capacities)
    assert shares == expected
    assert sum(shares) == total
