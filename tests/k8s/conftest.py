"""Rendered Kubernetes output of every example inventory that has a `kubernetes:` section."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.cluster import Cluster, load_cluster
from gpucluster.render import render_files

REPO = Path(__file__).resolve().parents[2]
INVENTORIES = REPO / "inventories"


def k8s_inventories() -> list[str]:
    names = []
    for path in sorted(INVENTORIES.iterdir()):
        cluster_file = path / "group_vars" / "all" / "cluster.yml"
        if cluster_file.exists() and "kubernetes" in (yaml.safe_load(cluster_file.read_text()) or {}).get(
            "cluster", {}
        ):
            names.append(path.name)
    return names


@cache
def cluster_of(name: str) -> Cluster:
    return load_cluster(INVENTORIES / name)


@cache
def rendered(name: str) -> dict[str, str]:
    return render_files(cluster_of(name), only=["slurm", "kubernetes", "helm"])


def documents(name: str, prefix: str = "kubernetes/") -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path, text in rendered(name).items():
        if path.startswith(prefix) and path != "kubernetes/manifest.yaml":
            out += [(path, doc) for doc in yaml.safe_load_all(text) if doc is not None]
    return out


@pytest.fixture(params=k8s_inventories())
def inventory(request: pytest.FixtureRequest) -> str:
    return str(request.param)
