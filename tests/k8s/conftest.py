"""Rendered Kubernetes output of every example inventory that has a `kubernetes:` section."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.layers import load_cluster
from gpucluster.model.cluster import Cluster
from gpucluster.rendering import render_files

REPO = Path(__file__).resolve().parents[2]
INVENTORIES = REPO / "inventories"


def k8s_inventories() -> list[str]:
    """Example inventories whose cluster file has a `kubernetes:` section (a text check: collecting
    tests must not depend on every inventory loading)."""
    section = re.compile(r"^  kubernetes:", re.MULTILINE)
    return sorted(
        path.parent.parent.parent.name
        for path in INVENTORIES.glob("*/group_vars/all/cluster.yml")
        if section.search(path.read_text())
    )


@cache
def cluster_of(name: str) -> Cluster:
    return load_cluster(INVENTORIES / name)


@cache
def rendered(name: str) -> dict[str, str]:
    return render_files(cluster_of(name), only=["slurm", "kubernetes", "helm"])


def variant_inventory(tmp_path: Path, base: str, edit: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of an example inventory with its `cluster:` mapping changed by `edit`."""
    target = tmp_path / base
    shutil.copytree(INVENTORIES / base, target)
    path = target / "group_vars" / "all" / "cluster.yml"
    data = yaml.safe_load(path.read_text())
    edit(data["cluster"])
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return target


def without_slurm_pod_quotas(cluster: dict[str, Any]) -> None:
    """Drop the tenants' slurm-on-kubernetes numbers of a cluster.yml mapping: a variant where no
    Slurm would hold them (Soperator, Slinky without accounting) must not carry them."""
    for tenant in cluster.get("tenants", []):
        tenant.get("gpus", {}).pop("slurm-on-kubernetes", None)


def object_paths(files: dict[str, str], samples: bool = False) -> list[str]:
    """The object files to apply: those kubernetes/manifest.yaml lists (kubernetes/ holds other
    files too, such as the Slinky accounts); with samples, the sample workloads too."""
    if "kubernetes/manifest.yaml" not in files:
        return []
    manifest = yaml.safe_load(files["kubernetes/manifest.yaml"])
    entries = manifest["files"] + (manifest.get("samples", []) if samples else [])
    return [entry["file"] for entry in entries]


def documents(
    name: str, prefix: str = "kubernetes/", samples: bool = True
) -> list[tuple[str, dict[str, Any]]]:
    """Every object of the rendered files of an example (the samples included unless told)."""
    files = rendered(name)
    out = []
    for path in object_paths(files, samples):
        if path.startswith(prefix):
            out += [(path, doc) for doc in yaml.safe_load_all(files[path]) if doc is not None]
    return out


def tenant_objects(name: str, kind: str) -> list[dict[str, Any]]:
    """The objects of a kind that belong to the tenants: everything but the return-to-service
    gate's own (its namespace, which holds its DaemonSet, ServiceAccount and Role)."""
    from gpucluster.k8s.gate import NAMESPACE

    return [
        d
        for _, d in documents(name)
        if d["kind"] == kind and NAMESPACE not in (d["metadata"].get("name"), d["metadata"].get("namespace"))
    ]


@pytest.fixture(params=k8s_inventories())
def inventory(request: pytest.FixtureRequest) -> str:
    return str(request.param)
