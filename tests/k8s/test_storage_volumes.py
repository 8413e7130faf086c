"""cluster.storage in Slurm on Kubernetes: each filesystem with a `kubernetes:` volume is mounted at
its mount point in every Slinky NodeSet's slurmd container and in the login pods, from the claim
gpucluster renders (or the one named); the pod fields are valid Kubernetes and the claim passes the
Kubernetes 1.34 schema. Chart keys themselves are checked by test_values.py for every example."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from gpucluster.errors import InventoryError
from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from tests.k8s.conftest import rendered, variant_inventory

MOUNT = {"name": "shared-home", "mountPath": "/home"}
# gke-prod with homes on a claim gpucluster renders (GKE's Filestore CSI driver provisions it).
HOME = {
    "name": "home",
    "mount": "/home",
    "home": True,
    "kubernetes": {"storage_class": "enterprise-rwx", "size": "1Ti"},
}


def with_home(cluster: dict[str, Any]) -> None:
    cluster["storage"] = [dict(HOME)]


def gke_with_home(tmp_path: Path) -> dict[str, str]:
    return render_files(load_cluster(variant_inventory(tmp_path, "gke-prod", with_home)), only=["helm"])


def slinky_values(files: dict[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load(files["helm/values/slurm.yaml"])
    return values


def test_every_nodeset_and_the_login_pods_mount_the_home(tmp_path: Path) -> None:
    values = slinky_values(gke_with_home(tmp_path))
    for name, nodeset in values["nodesets"].items():
        assert MOUNT in nodeset["slurmd"]["volumeMounts"], name
        assert {"name": "shared-home", "persistentVolumeClaim": {"claimName": "shared-home"}} in nodeset[
            "podSpec"
        ]["volumes"], name
    login = values["loginsets"]["login"]
    assert login["login"]["volumeMounts"] == [MOUNT]
    assert login["podSpec"]["volumes"] == [
        {"name": "shared-home", "persistentVolumeClaim": {"claimName": "shared-home"}}
    ]


def test_the_rendered_claim_is_a_valid_read_write_many_claim(tmp_path: Path) -> None:
    values = slinky_values(gke_with_home(tmp_path))
    claims = [o for o in values["extraObjects"] if o["kind"] == "PersistentVolumeClaim"]
    assert [c["metadata"]["name"] for c in claims] == ["shared-home"]
    claim = claims[0]
    assert claim["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "enterprise-rwx",
        "resources": {"requests": {"storage": "1Ti"}},
    }
    kubernetes_validate.validate(claim, "1.34", strict=True)


def test_an_existing_claim_is_named_not_rendered() -> None:
    values = slinky_values(rendered("gcp-prod"))
    assert not any(o["kind"] == "PersistentVolumeClaim" for o in values.get("extraObjects", []))
    nodeset = next(iter(values["nodesets"].values()))
    assert {"name": "shared-home", "persistentVolumeClaim": {"claimName": "home"}} in nodeset["podSpec"][
        "volumes"
    ]


def problems(directory: Path) -> list[str]:
    try:
        load_cluster(directory)
    except InventoryError as exc:
        return [str(p) for p in exc.problems]
    return []


def test_storage_volume_without_slurm_on_kubernetes_is_refused(tmp_path: Path) -> None:
    def no_slurm(cluster: dict[str, Any]) -> None:
        with_home(cluster)
        cluster["kubernetes"]["slurm"] = None
        cluster["nodes"] = [{**n, "owner": "kubernetes"} for n in cluster["nodes"]]
        cluster["partitions"] = []
        for tenant in cluster["tenants"]:
            tenant.get("gpus", {}).pop("slurm-on-kubernetes", None)

    found = problems(variant_inventory(tmp_path, "gke-prod", no_slurm))
    assert any(
        "cluster.storage[0].kubernetes: no Slurm on Kubernetes (`kubernetes.slurm`) mounts it" in p
        for p in found
    ), found


def test_storage_volume_rendered_for_soperator_is_refused(tmp_path: Path) -> None:
    def soperator(cluster: dict[str, Any]) -> None:
        with_home(cluster)
        cluster["kubernetes"]["slurm"] = {"operator": "soperator"}
        for tenant in cluster["tenants"]:
            tenant.get("gpus", {}).pop("slurm-on-kubernetes", None)

    found = problems(variant_inventory(tmp_path, "gke-prod", soperator))
    assert any(
        "cluster.storage[0].kubernetes.storage_class: Soperator: name an existing claim" in p for p in found
    ), found


def test_no_volume_no_change() -> None:
    values = slinky_values(rendered("gke-prod"))
    assert "extraObjects" not in values and "podSpec" not in values["loginsets"]["login"]


def test_soperator_workers_get_the_claim_as_a_jail_submount(tmp_path: Path) -> None:
    def soperator(cluster: dict[str, Any]) -> None:
        cluster["storage"] = [{**HOME, "kubernetes": {"claim": "home"}}]
        cluster["kubernetes"]["slurm"] = {"operator": "soperator"}
        for tenant in cluster["tenants"]:
            tenant.get("gpus", {}).pop("slurm-on-kubernetes", None)

    files = render_files(load_cluster(variant_inventory(tmp_path, "gke-prod", soperator)), only=["helm"])
    for nodeset in yaml.safe_load(files["helm/values/nodesets.yaml"])["nodesets"]:
        assert nodeset["slurmd"]["volumes"]["jailSubMounts"] == [
            {
                "name": "shared-home",
                "mountPath": "/home",
                "volumeSource": {"persistentVolumeClaim": {"claimName": "home"}},
            }
        ]
