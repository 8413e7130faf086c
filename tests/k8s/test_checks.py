"""The chart and API constraints are refused by the model, naming the inventory file and key."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.errors import InventoryError
from gpucluster.layers import load_cluster
from tests.conftest import run_cli
from tests.k8s.conftest import INVENTORIES


def _inventory(
    tmp_path: Path, base: str, edit: dict[str, Any], cluster_edit: dict[str, Any] | None = None
) -> Path:
    target = tmp_path / base
    shutil.copytree(INVENTORIES / base, target)
    path = target / "group_vars" / "all" / "cluster.yml"
    data = yaml.safe_load(path.read_text())
    kubernetes = data["cluster"].setdefault("kubernetes", {"version": "1.34"})
    for key, value in edit.items():
        if isinstance(value, dict) and isinstance(kubernetes.get(key), dict):
            kubernetes[key] = {**kubernetes[key], **value}
        else:
            kubernetes[key] = value
    data["cluster"].update(cluster_edit or {})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return target


def _problems(directory: Path) -> list[str]:
    with pytest.raises(InventoryError) as info:
        load_cluster(directory)
    return [str(p) for p in info.value.problems]


CASES = [
    (
        "superpod",
        {"device_allocation": "dra"},
        "cluster.kubernetes.dra.enabled: device_allocation is `dra` but the DRA driver is not enabled",
    ),
    (
        "nvl72",
        {"version": "1.33"},
        "cluster.kubernetes.version: the DRA driver and resource.k8s.io/v1 objects need Kubernetes >= 1.34",
    ),
    (
        "superpod",
        {"network_operator": {"nfd": True}},
        "cluster.kubernetes.network_operator.nfd: only one Node Feature Discovery per cluster",
    ),
    (
        "superpod",
        {"gpu_operator": {"nfd": False}},
        "cluster.kubernetes.network_operator.nfd: the Network Operator needs NFD labels",
    ),
    (
        "nvl72",
        {"gpu_operator": {"mig_strategy": "mixed"}},
        "cluster.kubernetes.gpu_operator.mig_strategy: mig_strategy applies to the device plugin",
    ),
    (
        "nvl72",
        {"gpu_operator": {"driver_version": "565.57.01"}},
        "cluster.kubernetes.gpu_operator.driver_version: ComputeDomains need driver >= 570.158.01",
    ),
    (
        "superpod",
        {"gpu_operator": {"driver_version": "580.95.05"}},
        "cluster.kubernetes.gpu_operator.driver_version: driver_version is set but the driver is owned by the host",
    ),
    (
        "superpod",
        {"dra": {"compute_domains": True, "enabled": True}, "version": "1.34"},
        "cluster.kubernetes.dra.compute_domains: ComputeDomains are made per NVLink block",
    ),
    (
        "gke-prod",
        {"slurm": {"accounting": True, "database_host": None}},
        "cluster.kubernetes.slurm.database_host: accounting is on but no database_host",
    ),
    (
        "gke-prod",
        {
            "versions": {
                "slinky_crds": {
                    "chart": "oci://ghcr.io/slinkyproject/charts/slurm-operator-crds",
                    "version": "1.1.0",
                }
            }
        },
        "cluster.kubernetes.versions.slinky_crds.version: Slinky CRD chart 1.1.0 differs from the operator chart 1.2.1",
    ),
    (
        "superpod",
        {"gpu_operator": {"enabled": False}},
        "cluster.kubernetes.gpu_operator.enabled: device_allocation `device-plugin` needs the GPU Operator",
    ),
    (
        "superpod",
        {"kueue": {"cohort": "research"}},
        "cluster.kubernetes.kueue.cohort: cohort `research` has a tenant's name",
    ),
    (
        "superpod",
        {"version": "1.28"},
        "cluster.kubernetes.version: Kubernetes 1.28 is older than 1.29",
    ),
    (
        "superpod",
        {"device_allocation": "both"},
        "cluster.kubernetes.device_allocation: Input should be 'device-plugin' or 'dra'",
    ),
    (
        "superpod",
        {"gpu_operator": {"mig_stratgy": "single"}},
        "cluster.kubernetes.gpu_operator.mig_stratgy: unknown key",
    ),
]


@pytest.mark.parametrize(("base", "edit", "expected"), CASES)
def test_bad_kubernetes_settings_are_refused(
    tmp_path: Path, base: str, edit: dict[str, Any], expected: str
) -> None:
    problems = _problems(_inventory(tmp_path, base, edit))
    matching = [p for p in problems if expected in p]
    assert matching, f"expected {expected!r} in {problems}"
    assert all(
        p.startswith(f"{base}/group_vars/all/cluster.yml") or "cluster.yml" in p.split(":")[0]
        for p in matching
    )


def test_tenant_namespace_clash(tmp_path: Path) -> None:
    tenants = yaml.safe_load((INVENTORIES / "superpod/group_vars/all/cluster.yml").read_text())["cluster"][
        "tenants"
    ]
    tenants[1]["namespace"] = "research"
    tenants[2]["namespace"] = "kueue-system"
    problems = _problems(_inventory(tmp_path, "superpod", {}, {"tenants": tenants}))
    assert any(
        "tenants[1].namespace: namespace `research` is already used by tenant `research`" in p
        for p in problems
    )
    assert any("tenants[2].namespace: namespace `kueue-system` is reserved" in p for p in problems)


def test_cli_exits_2_with_the_key_path(tmp_path: Path) -> None:
    directory = _inventory(tmp_path, "superpod", {"device_allocation": "dra"})
    result = run_cli("render", str(directory), "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stderr
    assert "cluster.kubernetes.dra.enabled: device_allocation is `dra`" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_no_kubernetes_section_renders_nothing() -> None:
    from gpucluster.render import render_files

    files = render_files(load_cluster(INVENTORIES / "lab"))
    assert not [p for p in files if p.startswith(("kubernetes/", "helm/"))]
