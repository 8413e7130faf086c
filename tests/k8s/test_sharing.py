"""Shared GPUs on Kubernetes (gpucluster.k8s.sharing), from the same declaration as Slurm's: the GPU
Operator's MIG manager configuration holds the layout Slurm's gpu_mig role applies, the node labels
pick each node's configurations, the device plugin time-slices, DRA offers MIG instances by profile;
and what Kubernetes cannot do is refused. Every object and values file here is also validated with
the other examples' (test_objects.py, test_values.py, test_helm.py: shared-gpus is one of them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.errors import InventoryError
from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from tests.k8s.conftest import cluster_of, rendered, variant_inventory

GPU_OPERATOR = "helm/values/gpu-operator.yaml"


def values() -> dict[str, Any]:
    return yaml.safe_load(rendered("shared-gpus")[GPU_OPERATOR])


def test_the_mig_manager_gets_the_layout_slurm_applies() -> None:
    operator = values()
    assert operator["mig"]["strategy"] == "mixed"
    manager = operator["migManager"]
    assert manager["config"]["create"] and manager["config"]["default"] == "all-disabled"
    configs = yaml.safe_load(manager["config"]["data"]["config.yaml"])["mig-configs"]
    assert configs["gpucluster-h100-mig"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}
    ]
    slurm_layout = yaml.safe_load(render_files(cluster_of("shared-gpus"), only=["mig"])["mig/h100-mig.json"])[
        "gpus"
    ]
    assert all(layout == {"1g.10gb": 7} for layout in slurm_layout.values())
    # H200 nodes are Slurm's only: the MIG manager has nothing of theirs.
    assert "gpucluster-h200-mig" not in configs


def test_time_slicing_per_node_type() -> None:
    plugin = values()["devicePlugin"]["config"]
    assert (plugin["name"], plugin["default"]) == ("gpucluster-device-plugin", "default")
    config = yaml.safe_load(plugin["data"]["gpucluster-l40s"])
    assert config["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]


def test_node_labels_pick_the_configurations() -> None:
    nodes = {
        d["metadata"]["name"]: d["metadata"]["labels"]
        for d in yaml.safe_load_all(rendered("shared-gpus")["kubernetes/nodes.yaml"])
        if d
    }
    assert nodes["h100-05"]["nvidia.com/mig.config"] == "gpucluster-h100-mig"
    assert nodes["l40s-07"]["nvidia.com/device-plugin.config"] == "gpucluster-l40s"
    assert "nvidia.com/mig.config" not in nodes["l40s-07"]


def _dra(cluster: dict[str, Any]) -> None:
    cluster["kubernetes"]["device_allocation"] = "dra"
    cluster["kubernetes"]["dra"] = {"enabled": True}
    cluster["node_types"]["l40s"]["gpus"]["sharing"].pop("time_slicing")


def test_dra_offers_mig_instances_by_profile(tmp_path: Path) -> None:
    files = render_files(load_cluster(variant_inventory(tmp_path, "shared-gpus", _dra)))
    classes = {
        d["metadata"]["name"]: d["spec"]["selectors"][0]["cel"]["expression"]
        for d in yaml.safe_load_all(files["kubernetes/dra/device-classes.yaml"])
        if d
    }
    assert classes["h100-mig-1g-10gb.gpucluster.io"] == (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' && "
        "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
    )
    assert "h100-mig.gpucluster.io" not in classes  # no whole-GPU class for a MIG node type
    kueue = yaml.safe_load(
        yaml.safe_load(files["helm/values/kueue.yaml"])["managerConfig"]["controllerManagerConfigYaml"]
    )
    mappings = {m["name"]: m["deviceClassNames"] for m in kueue["resources"]["deviceClassMappings"]}
    assert mappings["nvidia.com/mig-1g.10gb"] == ["h100-mig-1g-10gb.gpucluster.io"]
    quotas = [d for d in yaml.safe_load_all(files["kubernetes/tenants/quotas.yaml"]) if d]
    research = next(q for q in quotas if q["metadata"]["namespace"] == "research")["spec"]["hard"]
    # research's 24 GPUs split 12 / 12: 12 L40S, 12 H100 = 84 instances.
    assert research["h100-mig-1g-10gb.gpucluster.io.deviceclass.resource.k8s.io/devices"] == "84"
    assert research["l40s.gpucluster.io.deviceclass.resource.k8s.io/devices"] == "12"
    assert yaml.safe_load(files[GPU_OPERATOR])["mig"]["strategy"] == "none"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda c: c["kubernetes"].update({"device_allocation": "dra", "dra": {"enabled": True}}),
            "cluster.node_types.l40s.gpus.sharing.time_slicing: time-slicing replicas are the device plugin's",
        ),
        (
            lambda c: c["kubernetes"]["gpu_operator"].update({"mig_strategy": "none"}),
            "cluster.kubernetes.gpu_operator.mig_strategy: node type h100-mig has MIG instances",
        ),
        (
            lambda c: (
                c["kubernetes"]["gpu_operator"].update({"mig_strategy": "single"}),
                c["node_types"]["h100-mig"]["gpus"]["sharing"]["mig"].update(
                    {"layout": {"3g.40gb": 1, "1g.10gb": 3}}
                ),
            ),
            "mig_strategy single needs one profile on every GPU of a node",
        ),
    ],
)
def test_what_kubernetes_cannot_do_is_refused(tmp_path: Path, edit: Any, expected: str) -> None:
    with pytest.raises(InventoryError) as info:
        load_cluster(variant_inventory(tmp_path, "shared-gpus", edit))
    found = [f"{p.path}: {p.message}" for p in info.value.problems]
    assert any(expected in p for p in found), found


def test_slurm_on_kubernetes_nodesets_carry_their_shards(tmp_path: Path) -> None:
    def shards(cluster: dict[str, Any]) -> None:
        cluster["node_types"]["a3-mega"]["gpus"]["sharing"] = {"shard": 4, "time_slicing": 2}

    files = render_files(load_cluster(variant_inventory(tmp_path, "gke-prod", shards)))
    slurm = yaml.safe_load(files["helm/values/slurm.yaml"])
    assert slurm["controller"]["extraConfMap"]["GresTypes"] == "gpu,shard"
    assert {tuple(n["extraConfMap"]["Gres"]) for n in slurm["nodesets"].values()} == {
        ("gpu:h100:8", "shard:32")
    }


def test_mps_and_mig_stay_off_slurm_on_kubernetes(tmp_path: Path) -> None:
    def mps(cluster: dict[str, Any]) -> None:
        cluster["node_types"]["a3-mega"]["gpus"]["sharing"] = {"mps": 100}

    with pytest.raises(InventoryError) as info:
        load_cluster(variant_inventory(tmp_path, "gke-prod", mps))
    assert any("Slurm on Kubernetes runs no gpucluster-mps" in p.message for p in info.value.problems)
