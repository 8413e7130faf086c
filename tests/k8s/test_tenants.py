"""Each scheduler receives only its own tenant numbers: Slurm's accounts (slurm/accounts.yaml) the
inventory's `slurm` numbers, Kueue's ClusterQueues and KAI's queues the `kubernetes` ones. Read from
the rendered files, compared with the inventory's numbers."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpucluster.k8s.objects import split_by_capacity
from gpucluster.model.spec import GpuQuota, Owner
from tests.k8s.conftest import cluster_of, documents, rendered, tenant_objects


def _units_per_gpu(inventory: str, flavor: str) -> dict[str, float]:
    """Extended resource -> how many of it one GPU of the flavor's node type is, from the inventory:
    the time-slicing replicas, or the MIG instances of each profile (every GPU alike here)."""
    node_type = cluster_of(inventory).spec.node_types[flavor]
    gpus = node_type.gpus
    assert gpus is not None
    sharing = gpus.sharing
    if sharing is not None and sharing.mig is not None:
        layout = sharing.mig.layouts(gpus.count)
        return {f"nvidia.com/mig-{p}": sum(g.get(p, 0) for g in layout) / gpus.count for p in layout[0]}
    return {"nvidia.com/gpu": float(sharing.time_slicing if sharing and sharing.time_slicing else 1)}


def _quantity_sum(queue: dict[str, Any], field: str, inventory: str) -> int:
    """GPUs a queue's quota holds: each flavor's GPU resources back in GPUs (time-slicing
    replicas and MIG instances divided by what one GPU makes)."""
    total = 0.0
    for group in queue["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            per_gpu = _units_per_gpu(inventory, flavor["name"])
            gpus = {
                r["name"]: int(r.get(field, 0)) / per_gpu[r["name"]]
                for r in flavor["resources"]
                if r["name"] in per_gpu
            }
            assert len(set(gpus.values())) <= 1, (flavor, gpus)  # every unit the same GPUs
            total += next(iter(gpus.values()), 0)
            others = [
                r
                for r in flavor["resources"]
                if r["name"].startswith("nvidia.com/") and r["name"] not in per_gpu
            ]
            assert all(int(r.get(field, 0)) == 0 for r in others), flavor
    return round(total)


def _numbers(inventory: str, owner: Owner) -> dict[str, GpuQuota]:
    """Tenant -> its numbers in `owner`'s scheduler, as the inventory gives them."""
    cluster = cluster_of(inventory)
    return {name: per[owner] for name, per in cluster.tenant_gpus.items() if owner in per}


def _objects(inventory: str, kind: str, group: str | None = None) -> dict[str, dict[str, Any]]:
    """Objects of a kind by name (of an API group: KAI and Volcano both have a Queue)."""
    return {
        d["metadata"]["name"]: d
        for _, d in documents(inventory)
        if d["kind"] == kind and (group is None or d["apiVersion"].startswith(f"{group}/"))
    }


def test_slurm_accounts_carry_the_slurm_numbers(inventory: str) -> None:
    cluster = cluster_of(inventory)
    files = rendered(inventory)
    if "slurm/accounts.yaml" not in files:
        assert not cluster.hosts_owned_by(Owner.SLURM)
        return
    slurm = _numbers(inventory, Owner.SLURM)
    accounts = yaml.safe_load(files["slurm/accounts.yaml"])["accounts"]
    assert {a["name"] for a in accounts} == {t.name for t in cluster.spec.tenants}
    for account in accounts:
        numbers = slurm.get(account["name"], GpuQuota())
        assert (account["gpu_quota"], account["gpu_limit"]) == (numbers.quota, numbers.effective_limit)
        assert account["grp_tres"] == SHARED_GRP_TRES.get(inventory, {}).get(
            account["name"], f"gres/gpu={numbers.effective_limit}"
        )


# Slurm limits in shared units (shared-gpus, the Slurm GPUs by node type: 32 H100 in 7 x 1g.10gb,
# 16 H200 in 2 x 3g.71gb or 7 x 1g.18gb, 48 L40S in 8 shards). research's limit of 40 GPUs split
# by their GPUs: 13 H100 (91 instances), 7 H200 (7 x 3g.71gb, 24 x 1g.18gb: 31), 20 L40S (160
# shards); gres/gpu counts whole GPUs and instances: 91 + 31 + 20. interns' 16: 5 H100 (35), 3 H200
# (3 + 10: 13), 8 L40S, and its own 16 shards.
SHARED_GRP_TRES = {
    "shared-gpus": {
        "research": "gres/gpu=142,gres/gpu:1g.10gb=91,gres/gpu:1g.18gb=24,gres/gpu:3g.71gb=7,gres/shard=160",
        "interns": "gres/gpu=56,gres/gpu:1g.10gb=35,gres/gpu:1g.18gb=10,gres/gpu:3g.71gb=3,gres/shard=16",
    }
}


def _in_kubernetes(inventory: str) -> tuple[set[str], set[str]]:
    """Tenants with `kubernetes` numbers plus their ancestors, and the leaves among them."""
    cluster = cluster_of(inventory)
    parent_of = {t.name: t.parent for t in cluster.spec.tenants}
    present: set[str] = set()
    for name in _numbers(inventory, Owner.KUBERNETES):
        current: str | None = name
        while current is not None:
            present.add(current)
            current = parent_of.get(current)
    parents = {parent_of[t] for t in present if parent_of[t]}
    return present, present - parents


def test_kueue_queues_carry_the_kubernetes_numbers(inventory: str) -> None:
    k8s = cluster_of(inventory).spec.kubernetes
    assert k8s is not None
    if not k8s.kueue.enabled:
        return
    numbers = _numbers(inventory, Owner.KUBERNETES)
    present, leaves = _in_kubernetes(inventory)
    queues = _objects(inventory, "ClusterQueue")
    # Per tenant namespace: a LocalQueue of the tenant's name and `default` (jobs naming no queue).
    local = {
        (d["metadata"]["namespace"], d["metadata"]["name"]): d["spec"]["clusterQueue"]
        for _, d in documents(inventory)
        if d["kind"] == "LocalQueue"
    }
    namespace_of = {name: tenants_ns(inventory, name) for name in leaves}
    assert set(queues) == leaves
    assert set(local) == {(namespace_of[n], q) for n in leaves for q in (n, "default")}
    tenants = cluster_of(inventory).tenants_by_name
    for name in leaves:
        gpus = numbers.get(name, GpuQuota())
        queue = queues[name]
        assert _quantity_sum(queue, "nominalQuota", inventory) == gpus.quota
        assert _quantity_sum(queue, "borrowingLimit", inventory) == gpus.effective_limit - gpus.quota
        assert queue["spec"]["fairSharing"]["weight"] == tenants[name].fairshare
        assert queue["spec"]["cohortName"] == (tenants[name].parent or k8s.kueue.cohort)
        assert local[(namespace_of[name], name)] == local[(namespace_of[name], "default")] == name
    cohorts = _objects(inventory, "Cohort")
    assert set(cohorts) == ({k8s.kueue.cohort} | (present - leaves) if present else set())


def tenants_ns(inventory: str, name: str) -> str:
    tenant = cluster_of(inventory).tenants_by_name[name]
    return tenant.namespace or tenant.name


def test_kai_queues_carry_the_kubernetes_numbers(inventory: str) -> None:
    cluster = cluster_of(inventory)
    k8s = cluster.spec.kubernetes
    assert k8s is not None
    if not k8s.kai.enabled:
        return
    numbers = _numbers(inventory, Owner.KUBERNETES)
    present, _ = _in_kubernetes(inventory)
    queues = _objects(inventory, "Queue", "scheduling.run.ai")
    root = k8s.kai.parent_queue
    if not present:
        assert not queues
        return
    assert set(queues) == present | {root}
    owned = cluster.gpus_of(cluster.hosts_owned_by(Owner.KUBERNETES))
    assert queues[root]["spec"]["resources"]["gpu"]["quota"] == owned
    assert "parentQueue" not in queues[root]["spec"]
    for name in present:
        gpus = numbers.get(name, GpuQuota())
        tenant = cluster.tenants_by_name[name]
        spec = queues[name]["spec"]
        assert (spec["resources"]["gpu"]["quota"], spec["resources"]["gpu"]["limit"]) == (
            gpus.quota,
            gpus.effective_limit,
        )
        assert spec["resources"]["gpu"]["overQuotaWeight"] == tenant.fairshare
        assert spec["parentQueue"] == (tenant.parent or root)


def test_volcano_queues_carry_the_kubernetes_numbers(inventory: str) -> None:
    """Volcano: a queue per tenant with Kubernetes numbers (and its ancestors) under gpucluster's
    parent queue: `deserved` the quota, `capability` the limit, no `guarantee` unless reserve_quota."""
    cluster = cluster_of(inventory)
    k8s = cluster.spec.kubernetes
    assert k8s is not None
    queues = _objects(inventory, "Queue", "scheduling.volcano.sh")
    if not k8s.volcano.enabled:
        assert not queues
        return
    numbers = _numbers(inventory, Owner.KUBERNETES)
    present, _ = _in_kubernetes(inventory)
    top = k8s.volcano.parent_queue
    assert set(queues) == present | {top, "default"}
    owned = cluster.gpus_of(cluster.hosts_owned_by(Owner.KUBERNETES))
    assert queues[top]["spec"]["capability"]["nvidia.com/gpu"] == owned
    assert queues[top]["spec"]["parent"] == "root"
    for name in present:
        gpus = numbers.get(name, GpuQuota())
        spec = queues[name]["spec"]
        assert spec["deserved"]["nvidia.com/gpu"] == gpus.quota
        assert spec["capability"]["nvidia.com/gpu"] == gpus.effective_limit
        assert ("guarantee" in spec) == k8s.volcano.reserve_quota
        assert spec["parent"] == (cluster.tenants_by_name[name].parent or top)


def test_superpod_schedulers_get_different_numbers() -> None:
    """research has 384/640 GPUs in Slurm and 64/128 in Kubernetes; product only Slurm ones."""
    accounts = {a["name"]: a for a in yaml.safe_load(rendered("superpod")["slurm/accounts.yaml"])["accounts"]}
    assert (accounts["research"]["gpu_quota"], accounts["research"]["gpu_limit"]) == (384, 640)
    assert (accounts["inference"]["gpu_quota"], accounts["inference"]["gpu_limit"]) == (0, 0)
    queues = _objects("superpod", "ClusterQueue")
    assert set(queues) == {"research", "inference"}
    assert _quantity_sum(queues["research"], "nominalQuota", "superpod") == 64
    assert _quantity_sum(queues["research"], "borrowingLimit", "superpod") == 64
    volcano = _objects("superpod", "Queue", "scheduling.volcano.sh")
    assert volcano["research"]["spec"]["deserved"]["nvidia.com/gpu"] == 64
    assert volcano["research"]["spec"]["capability"]["nvidia.com/gpu"] == 128
    assert volcano["gpucluster"]["spec"]["deserved"]["nvidia.com/gpu"] == 256
    namespaces = {d["metadata"]["name"] for d in tenant_objects("superpod", "Namespace")}
    assert namespaces == {"research", "inference"}


def test_namespaces_follow_tenants() -> None:
    """Namespaces for the tenants Kubernetes serves: pretraining has GPUs only in Slurm on Kubernetes."""
    namespaces = {d["metadata"]["name"]: d for d in tenant_objects("gke-prod", "Namespace")}
    assert set(namespaces) == {"ft", "evals"}
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
