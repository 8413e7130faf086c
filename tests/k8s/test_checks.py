"""The chart and API constraints are refused by the model, naming the inventory file and key."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.errors import InventoryError
from gpucluster.k8s.checks import slinky_slurm_range
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
        {"slurm": {"accounting": False, "database_host": None}},
        "cluster.tenants[0].gpus.slurm-on-kubernetes: tenant pretraining has slurm-on-kubernetes GPU numbers, "
        "but Slurm on Kubernetes runs without accounting",
    ),
    (
        "gke-prod",
        {"slurm": {"operator": "soperator", "accounting": False, "database_host": None}},
        "cluster.tenants[0].gpus.slurm-on-kubernetes: tenant pretraining has slurm-on-kubernetes GPU numbers, "
        "but gpucluster makes no Slurm accounts in Soperator",
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
    from gpucluster.rendering import render_files

    files = render_files(load_cluster(INVENTORIES / "lab"))
    assert not [p for p in files if p.startswith(("kubernetes/", "helm/"))]


# Ownership: every scheduler the section installs has nodes, every Kubernetes-side node has its scheduler.
SLURM_PODS_ONLY = {
    "nodes": [{"group": "a3mega", "type": "a3-mega", "owner": "slurm-on-kubernetes"}],
    "partitions": [{"name": "train", "nodes": ["a3mega"], "default": True, "max_time": "1-00:00:00"}],
    "tenants": [{"name": "pretraining", "fairshare": 1, "gpu_quota": 64}],
}
OWNER_CASES = [
    (
        "gke-prod",
        {},
        SLURM_PODS_ONLY,
        "cluster.kubernetes.kueue.enabled: Kueue is enabled but no GPU node is owned by kubernetes",
    ),
    (
        "gke-prod",
        {"kueue": {"enabled": False}, "kai": {"enabled": True}},
        SLURM_PODS_ONLY,
        "cluster.kubernetes.kai.enabled: KAI is enabled but no GPU node is owned by kubernetes",
    ),
    (
        "superpod",
        {"slurm": {"operator": "slinky"}},
        {},
        "cluster.kubernetes.slurm: Slurm on Kubernetes (slinky) is configured but no node is owned by "
        "slurm-on-kubernetes",
    ),
    (
        "gke-prod",
        {"slurm": None},
        {},
        "cluster.nodes[0].owner: slurm-on-kubernetes nodes run only Slurm's slurmd pods, but kubernetes.slurm "
        "(Slinky or Soperator) is not configured",
    ),
    (
        "gke-prod",
        {},
        {"slurm": {"version": "24.05", "controller": "slurmctld"}},
        "cluster.slurm.version: Slinky 1.2.1 (kubernetes.versions.slinky_slurm) runs Slurm 25.11 and newer "
        "(its images ship Slurm 26.05); this inventory targets 24.05: set cluster.slurm.version to 25.11 or newer",
    ),
    (
        "gke-prod",
        {},
        {"slurm": {"version": "25.05", "controller": "slurmctld"}},
        "cluster.slurm.version: Slinky 1.2.1 (kubernetes.versions.slinky_slurm) runs Slurm 25.11 and newer",
    ),
]


@pytest.mark.parametrize(("base", "edit", "cluster_edit", "expected"), OWNER_CASES)
def test_ownership_is_checked(
    tmp_path: Path, base: str, edit: dict[str, Any], cluster_edit: dict[str, Any], expected: str
) -> None:
    problems = _problems(_inventory(tmp_path, base, edit, cluster_edit))
    # The one problem of the edit, with the file and line of the key to change.
    assert len(problems) == 1, problems
    file, line, rest = problems[0].split(":", 2)
    assert file.endswith(f"{base}/group_vars/all/cluster.yml")
    assert int(line) > 0
    assert rest.strip().startswith(expected), problems


def test_ownership_problem_exits_2(tmp_path: Path) -> None:
    directory = _inventory(tmp_path, "superpod", {"slurm": {"operator": "slinky"}})
    result = run_cli("validate", str(directory))
    assert result.returncode == 2, result.stderr
    assert "cluster.kubernetes.slurm: Slurm on Kubernetes (slinky) is configured" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_owners_are_not_guessed_at(tmp_path: Path) -> None:
    """Without owners the core reports them; the layer adds no problem about schedulers without nodes."""
    data = yaml.safe_load((INVENTORIES / "gke-prod/group_vars/all/cluster.yml").read_text())
    nodes = [{k: v for k, v in entry.items() if k != "owner"} for entry in data["cluster"]["nodes"]]
    problems = _problems(_inventory(tmp_path, "gke-prod", {}, {"nodes": nodes}))
    assert any("cluster.nodes[0].owner: required" in p for p in problems)
    assert not [p for p in problems if "cluster.kubernetes." in p]


@pytest.mark.parametrize("version", ["25.11", "26.05"])
def test_slinky_runs_the_slurm_releases_of_its_charts(tmp_path: Path, version: str) -> None:
    """gke-prod (Slinky 1.2.1) with a Slurm its charts run: valid (the example's own release is
    left as the inventory says; these are variants)."""
    load_cluster(
        _inventory(tmp_path, "gke-prod", {}, {"slurm": {"version": version, "controller": "slurmctld"}})
    )


def test_slinky_slurm_version_exits_2_at_the_key(tmp_path: Path) -> None:
    directory = _inventory(
        tmp_path, "gke-prod", {}, {"slurm": {"version": "25.05", "controller": "slurmctld"}}
    )
    result = run_cli("validate", str(directory))
    assert result.returncode == 2, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "cluster.slurm.version" in x]
    assert line.startswith(f"{directory}/group_vars/all/cluster.yml:")
    assert "Slinky 1.2.1 (kubernetes.versions.slinky_slurm) runs Slurm 25.11 and newer" in line
    assert "Traceback" not in result.stderr


def test_a_newer_slinky_pin_needs_its_own_slurm(tmp_path: Path) -> None:
    """Slinky 1.3 (release candidates: Slurm 26.05) pinned over a 25.11 inventory is refused."""
    charts = "oci://ghcr.io/slinkyproject/charts"
    versions = {
        key: {"chart": f"{charts}/{name}", "version": "1.3.0"}
        for key, name in (
            ("slinky_crds", "slurm-operator-crds"),
            ("slinky_operator", "slurm-operator"),
            ("slinky_slurm", "slurm"),
        )
    }
    problems = _problems(
        _inventory(
            tmp_path,
            "gke-prod",
            {"versions": versions},
            {"slurm": {"version": "25.11", "controller": "slurmctld"}},
        )
    )
    assert [
        p
        for p in problems
        if "cluster.slurm.version: Slinky 1.3.0" in p and "runs Slurm 26.05 and newer" in p
    ], problems


@pytest.mark.parametrize(
    ("pin", "expected"),
    [
        ("1.2.1", ((25, 11), "26.05")),
        ("1.1.2", ((25, 11), "25.11")),
        ("v1.3.0-rc1", ((26, 5), "26.05")),
        ("1.9.0", ((26, 5), "26.05")),
        ("0.4.0", ((25, 11), "25.11")),
    ],
)
def test_slinky_slurm_range(pin: str, expected: tuple[tuple[int, int], str]) -> None:
    assert slinky_slurm_range(pin) == expected
