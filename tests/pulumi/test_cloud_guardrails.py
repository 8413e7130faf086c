"""Guardrails and pool planning as plain functions: each broken inventory names the key to fix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from cloud_harness import REPO, inventory_copy

from gpucluster.cloud.catalog import gpu_machine
from gpucluster.cloud.guardrails import aks_pool_name, enforce
from gpucluster.cloud.pools import GPU_TAINT, OWNER_TAINT, plan_cloud
from gpucluster.errors import InventoryError
from gpucluster.k8s.names import host_labels, topology_levels
from gpucluster.k8s.objects import node_objects
from gpucluster.layers import load_cluster

Edit = Callable[[dict[str, Any]], None]


def problems_of(tmp_path: Path, name: str, edit: Edit) -> list[str]:
    with pytest.raises(InventoryError) as caught:
        load_cluster(inventory_copy(tmp_path, name, edit))
    return [f"{p.path}: {p.message}" for p in caught.value.problems]


def only(problems: list[str], path: str) -> str:
    found = [p for p in problems if p.startswith(f"{path}: ")]
    assert len(found) == 1, problems
    return found[0]


def set_key(*path: str, value: Any) -> Edit:
    def edit(cluster: dict[str, Any]) -> None:
        node = cluster
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("inventory", "edit", "path", "text"),
    [
        (
            "aws-prod",
            set_key("cloud", "pools", "p5", "taints", value=[]),
            "cluster.cloud.pools.p5.taints",
            "node type `p5` lack the nvidia.com/gpu=present:NoSchedule taint",
        ),
        (
            "aws-prod",
            set_key("cloud", "pools", "p5", "auto_upgrade", value=True),
            "cluster.cloud.pools.p5.auto_upgrade",
            "training pools must not auto-upgrade",
        ),
        (
            "aws-prod",
            set_key("node_types", "p5", "gpus", "count", value=4),
            "cluster.node_types.p5.gpus.count",
            "node type has 4 GPUs but p5.48xlarge has 8",
        ),
        (
            "aws-dev",
            set_key("node_types", "p4d", "gpus", "model", value="h100"),
            "cluster.node_types.p4d.gpus.model",
            "node type GPU `h100` but p4d.24xlarge has a100",
        ),
        (
            "aws-dev",
            set_key("node_types", "p4d", "gpus", "memory_gb", value=80),
            "cluster.node_types.p4d.gpus.memory_gb",
            "node type says 80 GB per GPU but p4d.24xlarge has 40",
        ),
        (
            "gcp-dev",
            set_key("cloud", "pools", "a3", "instance_type", value="n2-standard-8"),
            "cluster.cloud.pools.a3.instance_type",
            "`n2-standard-8` is not a known gcp GPU machine type",
        ),
        (
            "aws-prod",
            set_key("kubernetes", "gpu_operator", "driver", value="operator"),
            "cluster.kubernetes.gpu_operator.driver",
            "GPU Operator installs the driver but cloud.aws.ami_type AL2023_x86_64_NVIDIA ships one",
        ),
        (
            "aws-prod",
            set_key("cloud", "aws", "ami_type", value="AL2023_x86_64_STANDARD"),
            "cluster.kubernetes.gpu_operator.driver",
            "has no GPU driver and the GPU Operator does not install one",
        ),
        (
            "aws-dev",
            set_key("cloud", "aws", "release_version", value=None),
            "cluster.cloud.aws.release_version",
            "pin the AMI release version",
        ),
        (
            "aws-prod",
            set_key("cloud", "pools", "p5", "capacity", value={"type": "capacity_block"}),
            "cluster.cloud.pools.p5.capacity.reservation",
            "capacity type capacity_block needs a reservation",
        ),
        (
            "gcp-prod",
            set_key("cloud", "gcp", "release_channel", value="REGULAR"),
            "cluster.cloud.gcp.release_channel",
            "auto-upgrade off, which GKE release channels forbid",
        ),
        (
            "gcp-prod",
            set_key("cloud", "pools", "a3", "split_by", value="block"),
            "cluster.cloud.pools.a3.split_by",
            "fabric.blocks defines none",
        ),
        (
            "nebius-prod",
            set_key("cloud", "nebius", "drivers_preset", value="cuda12"),
            "cluster.cloud.nebius.drivers_preset",
            "installs a driver but the GPU Operator owns it",
        ),
        (
            "nebius-dev",
            set_key("cloud", "nebius", "drivers_preset", value=None),
            "cluster.cloud.nebius.drivers_preset",
            "no drivers preset and the GPU Operator does not install the driver",
        ),
        (
            "azure-prod",
            set_key("kubernetes", "platform", value="eks"),
            "cluster.kubernetes.platform",
            "does not match cloud provider azure (use aks)",
        ),
        (
            "azure-prod",
            set_key("cloud", "kubernetes_version", value="1.32"),
            "cluster.cloud.kubernetes_version",
            "1.32 differs from kubernetes.version 1.33",
        ),
        (
            "azure-dev",
            set_key("cloud", "azure", value=None),
            "cluster.cloud.azure",
            "provider is azure but the `azure` settings are missing",
        ),
        (
            "aws-dev",
            set_key("cloud", "zones", value=["us-west-2a"]),
            "cluster.cloud.zones",
            "EKS needs subnets in at least two zones",
        ),
        (
            "aws-prod",
            set_key("kubernetes", "gpu_taint", value=False),
            "cluster.kubernetes.gpu_taint",
            "cloud GPU pools are tainted nvidia.com/gpu",
        ),
        (
            "aws-dev",
            set_key("cloud", "pools", "nope", value={}),
            "cluster.cloud.pools.nope",
            "unknown node type `nope` (known: p4d)",
        ),
        (
            "gcp-prod",
            set_key(
                "fabric",
                "tree",
                value={
                    "spine": ["a-very-long-leaf-switch-name-x", "rack2"],
                    "a-very-long-leaf-switch-name-x": ["gpu_block1"],
                    "rack2": ["gpu_block2"],
                },
            ),
            "cluster.cloud.pools.a3",
            "GKE node pool name `gcp-prod-a3-slurm-a-very-long-leaf-switch-name-x` is longer than 40",
        ),
        (
            "gcp-dev",
            set_key("cloud", "pools", "a3", "capacity", value={"type": "capacity_block", "reservation": "r"}),
            "cluster.cloud.pools.a3.capacity.type",
            "Capacity Blocks are an AWS purchase option",
        ),
        (
            "aws-dev",
            set_key("cloud", "pools", "p4d", "labels", value={"gpucluster.io/owner": "kubernetes"}),
            "cluster.cloud.pools.p4d.labels",
            "gpucluster.io/owner comes from cluster.nodes[].owner",
        ),
        (
            "gcp-prod",
            set_key(
                "cloud",
                "pools",
                "a3",
                "taints",
                value=[
                    {"key": "nvidia.com/gpu", "value": "present"},
                    {"key": "gpucluster.io/owner", "value": "kubernetes"},
                ],
            ),
            "cluster.cloud.pools.a3.taints",
            "the gpucluster.io/owner taint comes from cluster.nodes[].owner",
        ),
    ],
)
def test_guardrail_names_the_inventory_key(
    tmp_path: Path, inventory: str, edit: Edit, path: str, text: str
) -> None:
    assert text in only(problems_of(tmp_path, inventory, edit), path)


def test_problem_carries_file_and_line(tmp_path: Path) -> None:
    broken = inventory_copy(tmp_path, "aws-prod", set_key("cloud", "pools", "p5", "auto_upgrade", value=True))
    with pytest.raises(InventoryError) as caught:
        load_cluster(broken)
    (problem,) = caught.value.problems
    lines = (broken / "group_vars/all/cluster.yml").read_text().splitlines()
    assert problem.file.endswith("group_vars/all/cluster.yml")
    assert problem.line is not None and lines[problem.line - 1].strip() == "auto_upgrade: true"


def test_cloud_pool_hosts_must_not_be_owned_by_bare_metal_slurm(tmp_path: Path) -> None:
    def bare_metal_block(cluster: dict[str, Any]) -> None:
        # Block 2 handed to bare-metal Slurm, in a partition of its own: valid for the core model,
        # but its hosts would be nodes of a GKE pool (kubelet) running slurmd too.
        cluster["nodes"][1]["owner"] = "slurm"
        cluster["partitions"].append({"name": "metal", "nodes": ["gpu_block2"], "default": True})
        cluster["tenants"] = []
        cluster["kubernetes"]["kueue"] = {"enabled": False}  # no Kubernetes-owned nodes left for it
        # Its Filestore home has no backing for bare-metal hosts yet (`source` comes after `pulumi
        # up`): another problem, not this test's.
        cluster.pop("storage", None)
        for user in cluster.get("users", []):
            user.pop("home", None)

    broken = inventory_copy(tmp_path, "gcp-prod", bare_metal_block)
    with pytest.raises(InventoryError) as caught:
        load_cluster(broken)
    (problem,) = caught.value.problems
    assert problem.path == "cluster.nodes[1].owner"
    assert problem.message == (
        "hosts a3-[09-16] are in cloud pool(s) `gcp-prod-a3-metal-rack2`, Kubernetes node pools: their "
        "owner must be kubernetes or slurm-on-kubernetes, not slurm (bare-metal slurmd beside kubelet "
        "would be two schedulers)"
    )
    lines = (broken / "group_vars/all/cluster.yml").read_text().splitlines()
    assert problem.line is not None and lines[problem.line - 1].strip() == "owner: slurm"
    rendered = str(caught.value)
    assert "group_vars/all/cluster.yml:" in rendered and "cluster.nodes[1].owner: hosts" in rendered


def test_pools_never_mix_owners() -> None:
    cluster = load_cluster(REPO / "inventories" / "gcp-prod")
    plan = plan_cloud(cluster)
    assert plan is not None
    assert [(p.name, p.size, p.owner) for p in plan.pools] == [
        ("gcp-prod-a3-slurm-rack1", 8, "slurm-on-kubernetes"),
        ("gcp-prod-a3-k8s-rack2", 8, "kubernetes"),
    ]
    slinky, plain = plan.pools
    assert slinky.taints == (GPU_TAINT, OWNER_TAINT)
    assert OWNER_TAINT.kubectl_form == "gpucluster.io/owner=slurm-on-kubernetes:NoExecute"
    assert slinky.labels["gpucluster.io/slurm-nodeset"] == "a3"
    assert "gpucluster.io/slurm-nodeset" not in plain.labels
    assert plain.taints == (GPU_TAINT,)
    for pool in plan.pools:
        assert {cluster.owner_of[h] for h in pool.hosts} == {pool.owner}
        assert pool.labels["gpucluster.io/owner"] == pool.owner
    # A single-owner node type keeps its pool names (no owner part).
    aws = plan_cloud(load_cluster(REPO / "inventories" / "aws-prod"))
    assert aws is not None and [p.name for p in aws.pools] == ["aws-prod-p5-leaf-pg1", "aws-prod-p5-leaf-pg2"]


def test_owner_split_inside_one_fabric_unit(tmp_path: Path) -> None:
    """Two owners under the same leaf: two pools of that leaf, named by owner."""

    def split_leaf(cluster: dict[str, Any]) -> None:
        cluster["nodes"] = [
            {"group": "slinky", "type": "p5", "owner": "slurm-on-kubernetes"},
            {"group": "plain", "type": "p5", "owner": "kubernetes"},
        ]
        cluster["partitions"] = [{"name": "batch", "nodes": ["slinky"], "default": True}]
        cluster["kubernetes"]["slurm"] = {"operator": "slinky"}
        cluster["slurm"]["version"] = "25.11"  # the oldest Slurm the pinned Slinky runs

    inventory = inventory_copy(tmp_path, "aws-prod", split_leaf)
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    hosts["all"]["children"]["slinky"] = {"hosts": {"p5-[01:04]": None}}
    hosts["all"]["children"]["plain"] = {"hosts": {"p5-[05:16]": None}}
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    plan = plan_cloud(load_cluster(inventory))
    assert plan is not None
    assert [(p.name, p.size, p.owner) for p in plan.pools] == [
        ("aws-prod-p5-slurm-leaf-pg1", 4, "slurm-on-kubernetes"),
        ("aws-prod-p5-k8s-leaf-pg1", 4, "kubernetes"),
        ("aws-prod-p5-k8s-leaf-pg2", 8, "kubernetes"),
    ]


@pytest.mark.parametrize("kai", [False, True])
def test_pools_carry_the_owner_labels_and_taints_the_kubernetes_layer_gives_their_nodes(
    tmp_path: Path, kai: bool
) -> None:
    """Cloud nodes are not named like inventory hosts, so the Kubernetes layer's node patches do not
    reach them: the pool must carry what they would set (owner, NodeSet, KAI node pool, owner taint)."""
    inventory = inventory_copy(tmp_path, "gcp-prod", set_key("kubernetes", "kai", value={"enabled": kai}))
    cluster = load_cluster(inventory)
    assert cluster.spec.kubernetes is not None
    plan = plan_cloud(cluster)
    assert plan is not None
    nodes = {n["metadata"]["name"]: n for n in node_objects(cluster, cluster.spec.kubernetes)}
    owned = ("gpucluster.io/owner", "gpucluster.io/slurm-nodeset", "kai.scheduler/node-pool")
    for pool in plan.pools:
        taints = [t.model_dump() for t in pool.taints]
        for host in pool.hosts:
            labels = nodes[host]["metadata"]["labels"]
            assert {k: v for k, v in labels.items() if k in owned} == {
                k: v for k, v in pool.labels.items() if k in owned
            }
            assert all(t in taints for t in nodes[host].get("spec", {}).get("taints", []))
        assert ("kai.scheduler/node-pool" in pool.labels) == (kai and pool.owner == "slurm-on-kubernetes")


def test_slurm_on_kubernetes_pools_split_by_nodeset(tmp_path: Path) -> None:
    """Hosts of one type in different partitions are different NodeSets: one pool each."""

    def two_partitions(cluster: dict[str, Any]) -> None:
        for entry in cluster["nodes"]:
            entry["owner"] = "slurm-on-kubernetes"
        cluster["partitions"] = [
            {"name": "train", "nodes": ["gpu_block1"], "default": True},
            {"name": "debug", "nodes": ["gpu_block2"]},
        ]
        cluster["tenants"] = []
        cluster["kubernetes"]["kueue"] = {"enabled": False}  # no Kubernetes-owned nodes left for it

    plan = plan_cloud(load_cluster(inventory_copy(tmp_path, "gcp-prod", two_partitions)))
    assert plan is not None
    assert [(p.name, p.labels["gpucluster.io/slurm-nodeset"]) for p in plan.pools] == [
        ("gcp-prod-a3-train-rack1", "a3-train"),
        ("gcp-prod-a3-debug-rack2", "a3-debug"),
    ]


def test_unknown_key_in_cloud_section_is_refused(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, "aws-dev", set_key("cloud", "instance", value="p5"))
    assert "cluster.cloud.instance: unknown key" in problems[0]


def test_example_inventories_pass_every_guardrail() -> None:
    for name in ("aws", "gcp", "azure", "nebius"):
        for env in ("dev", "prod"):
            plan = enforce(load_cluster(REPO / "inventories" / f"{name}-{env}"))
            assert plan.provider == name and plan.gpu_pools


def test_enforce_needs_a_cloud_section() -> None:
    with pytest.raises(InventoryError, match="no `cloud:` section"):
        enforce(load_cluster(REPO / "inventories" / "superpod"))


def test_pools_split_by_leaf_switch_with_the_fabric_labels_of_their_hosts() -> None:
    cluster = load_cluster(REPO / "inventories" / "aws-prod")
    plan = plan_cloud(cluster)
    assert plan is not None
    assert [(p.name, p.size) for p in plan.pools] == [
        ("aws-prod-p5-leaf-pg1", 8),
        ("aws-prod-p5-leaf-pg2", 8),
    ]
    assert sorted(h for p in plan.pools for h in p.hosts) == sorted(cluster.hosts)
    for pool in plan.pools:
        assert pool.taints == (GPU_TAINT,)
        for host in pool.hosts:
            assert host_labels(cluster, host).items() <= pool.labels.items()
            assert pool.labels["gpucluster.io/fabric-leaf"] == cluster.switch_path[host][-1]
    # The labels the pools carry are the levels the Kubernetes layer's topologies use.
    levels = [level for level in topology_levels(cluster) if level != "kubernetes.io/hostname"]
    assert all(level in plan.pools[0].labels for level in levels)


def test_split_none_gives_one_pool_and_driver_owner_follows_the_kubernetes_layer() -> None:
    plan = plan_cloud(load_cluster(REPO / "inventories" / "gcp-dev"))
    assert plan is not None and [p.size for p in plan.pools] == [2] and plan.driver_owner == "cloud"
    prod = plan_cloud(load_cluster(REPO / "inventories" / "gcp-prod"))
    assert prod is not None and prod.driver_owner == "operator"


def test_catalog_and_names() -> None:
    h100 = gpu_machine("nebius", "gpu-h100-sxm/8gpu-128vcpu-1600gb")
    assert h100 is not None and (h100.gpu_model, h100.gpus) == ("h100", 8)
    assert gpu_machine("nebius", "gpu-h100-sxm/8vcpu-32gb") is None
    a3 = gpu_machine("gcp", "a3-highgpu-8g")
    assert a3 is not None and a3.accelerator == "nvidia-h100-80gb"
    assert aks_pool_name("azure-prod-nd-ib2", "azure-prod") == "ndib2"
    assert aks_pool_name("c-1-gpu", "c") == "g1gpu"


def test_every_cloud_field_documents_its_update_policy() -> None:
    from pydantic import BaseModel

    from gpucluster.cloud.model import CloudSpec

    seen: set[type[BaseModel]] = set()

    def walk(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, info in model.model_fields.items():
            extra = info.json_schema_extra
            assert info.description and isinstance(extra, dict) and "x-update" in extra, (
                f"{model.__name__}.{name}"
            )
            for arg in (*getattr(info.annotation, "__args__", ()), info.annotation):
                inner = getattr(arg, "__args__", (arg,))
                for candidate in (*inner, arg):
                    if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                        walk(candidate)

    walk(CloudSpec)
    assert len(seen) >= 8


def test_aks_pool_names_must_stay_distinct(tmp_path: Path) -> None:
    def long_leaf_names(cluster: dict[str, Any]) -> None:
        tree = cluster["fabric"]["tree"]
        tree["spine"] = ["infiniband-leaf-a1", "infiniband-leaf-a2"]
        tree["infiniband-leaf-a1"] = tree.pop("ib1")
        tree["infiniband-leaf-a2"] = tree.pop("ib2")

    problems = problems_of(tmp_path, "azure-prod", long_leaf_names)
    assert "both get the AKS name `ndinfiniband`" in only(problems, "cluster.node_types.nd")


def test_managed_filesystems_of_another_cloud_or_too_small_are_refused(tmp_path: Path) -> None:
    def small(cluster: dict[str, Any]) -> None:
        cluster["storage"][0]["cloud"]["size_gb"] = 100

    found = problems_of(tmp_path, "gcp-prod", small)
    assert only(found, "cluster.storage[0].cloud.size_gb") == (
        "cluster.storage[0].cloud.size_gb: Filestore ZONAL needs size_gb of at least 1024"
    )

    def elsewhere(cluster: dict[str, Any]) -> None:
        cluster["storage"] = [
            {
                "name": "home",
                "mount": "/home",
                "home": True,
                "kubernetes": {"claim": "home"},
                "cloud": {"service": "filestore", "size_gb": 1024},
            }
        ]

    found = problems_of(tmp_path / "aws", "aws-prod", elsewhere)
    assert only(found, "cluster.storage[0].cloud.service") == (
        "cluster.storage[0].cloud.service: filestore is a service of gcp; this stack creates aws resources"
    )
