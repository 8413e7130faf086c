"""Every Helm values key gpucluster sets exists in the upstream chart's values.yaml of the pinned
version (Helm ignores a misspelt key silently), with a compatible type. The values.yaml files are
the repository's schema catalogue copies (schemas/<project>/<version>/charts/<chart>/values.yaml)."""

from __future__ import annotations

import fnmatch
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gpucluster.k8s.mirror import IMAGE_KEYS
from gpucluster.k8s.model import KubernetesSpec, Versions
from gpucluster.k8s.render import ADDONS
from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from tests.k8s.conftest import INVENTORIES, k8s_inventories, rendered, without_slurm_pod_quotas
from tests.k8s.crd import catalogue

# values.yaml of each release's chart in the schema catalogue (schemas/README.md), pinned versions.
CHART_VALUES = {
    "cert-manager": "cert-manager/v1.21.1/charts/cert-manager/values.yaml",
    "network-operator": "network-operator/26.4.1/charts/network-operator/values.yaml",
    "gpu-operator": "gpu-operator/v26.7.0/charts/gpu-operator/values.yaml",
    "dra-driver-nvidia-gpu": "dra-driver-nvidia-gpu/0.4.1/charts/dra-driver-nvidia-gpu/values.yaml",
    "kueue": "kueue/0.19.2/charts/kueue/values.yaml",
    "kai-scheduler": "kai-scheduler/v0.17.0/charts/kai-scheduler/values.yaml",
    "volcano": "volcano/1.15.1/charts/volcano/values.yaml",
    "slurm-operator": "slinky/1.2.1/charts/slurm-operator/values.yaml",
    "slurm": "slinky/1.2.1/charts/slurm/values.yaml",
    "slurm-operator-crds": "slinky/1.2.1/charts/slurm-operator-crds/values.yaml",
}
# Releases whose chart values are not in the schema catalogue (docs/kubernetes.md).
UNVERIFIED = {"soperator", "slurm-cluster", "nodesets"}
# Charts without values of their own (CRDs only).
NO_VALUES = {"slurm-operator-crds", "soperator-crds"}

# Maps whose keys are names the user chooses: each entry is checked against the chart's example.
NAMED_ENTRIES: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {
    ("slurm", ("nodesets",)): ("nodesetDefaults",),
    ("slurm", ("loginsets",)): ("loginsetDefaults",),
    ("slurm", ("partitions",)): ("partitions", "all"),
}
# Maps of free-form entries whose upstream defaults show examples (Slurm options, node labels).
# A NodeSet's podSpec is one too: the chart copies it whole into the NodeSet's spec.template.spec
# (`slurm.format-podSpec`, toYaml), so any PodSpec field works (resourceClaims with DRA, which the
# defaults do not show); test_pod_fields_in_values_are_valid_pod_spec_fields validates it as a
# Kubernetes 1.34 PodSpec instead, unknown fields refused.
FREE_MAPS = {
    "slurm": [
        "nodesets.*.podSpec",
        "nodesets.*.podSpec.nodeSelector",
        "nodesets.*.extraConfMap",
        "partitions.*.configMap",
        "controller.extraConfMap",
        "configFiles",
    ],
}
# Keys of subcharts, documented in the subchart's own values.yaml.
SUBCHART_KEYS = {("gpu-operator", ("node-feature-discovery", "image", "repository"))}


@cache
def chart_values(release: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(catalogue(CHART_VALUES[release]).read_text())
    return data


def _lookup(tree: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def unknown_keys(release: str, ours: Any, theirs: Any, path: tuple[str, ...] = ()) -> list[str]:
    """Keys of `ours` that the chart does not have, or whose type differs."""
    problems: list[str] = []
    if not isinstance(ours, dict):
        if isinstance(theirs, bool) and not isinstance(ours, bool):
            problems.append(f"{'.'.join(path)}: chart expects a boolean, got {ours!r}")
        if isinstance(theirs, list) and not isinstance(ours, list):
            problems.append(f"{'.'.join(path)}: chart expects a list, got {ours!r}")
        return problems
    if theirs is None or theirs == {}:
        return problems  # a free-form map (e.g. nodeSelector, configFiles)
    if any(fnmatch.fnmatchcase(".".join(path), pattern) for pattern in FREE_MAPS.get(release, [])):
        return problems
    if not isinstance(theirs, dict):
        return [f"{'.'.join(path)}: chart has a {type(theirs).__name__} here, not a map"]
    for key, value in ours.items():
        here = (*path, key)
        if (release, here) in SUBCHART_KEYS:
            continue
        if (release, here) in NAMED_ENTRIES:
            example = _lookup(chart_values(release), NAMED_ENTRIES[(release, here)])
            for name, entry in value.items():
                problems += unknown_keys(release, entry, example, (*here, name))
        elif key not in theirs:
            if any(rel == release and key_path[: len(here)] == here for rel, key_path in SUBCHART_KEYS):
                continue
            problems.append(f"{'.'.join(here)}: not a value of the chart")
        else:
            problems += unknown_keys(release, value, theirs[key], here)
    return problems


def releases_of(inventory: str) -> list[dict[str, Any]]:
    manifest = yaml.safe_load(rendered(inventory)["helm/releases.yaml"])
    releases: list[dict[str, Any]] = manifest["releases"]
    return releases


def test_values_keys_exist_upstream(inventory: str) -> None:
    files = rendered(inventory)
    for release in releases_of(inventory):
        name = release["name"]
        values = yaml.safe_load(files[release["values_file"]])
        if name in NO_VALUES:
            assert values == {}
            continue
        if name in UNVERIFIED:
            continue
        problems = unknown_keys(name, values, chart_values(name))
        assert not problems, f"{inventory} {name}: " + "; ".join(problems)


def test_key_checker_catches_typos() -> None:
    assert unknown_keys(
        "gpu-operator", {"devicePlugin": {"enable": False}}, chart_values("gpu-operator")
    ) == ["devicePlugin.enable: not a value of the chart"]
    assert unknown_keys("gpu-operator", {"driver": {"enabled": "no"}}, chart_values("gpu-operator"))
    nodeset = {"nodesets": {"gpu": {"slurmd": {"resource": {}}}}}
    assert unknown_keys("slurm", nodeset, chart_values("slurm")) == [
        "nodesets.gpu.slurmd.resource: not a value of the chart"
    ]


def test_verified_charts_cover_most_releases() -> None:
    names = {r["name"] for inv in k8s_inventories() for r in releases_of(inv)}
    assert set(CHART_VALUES) <= names
    assert names - set(CHART_VALUES) <= UNVERIFIED | NO_VALUES


# Keys naming the registry of every image of a chart (cert-manager since v1.20, Volcano): a host.
REGISTRY_KEYS = ("imageRegistry", "image_registry")


def _image_keys(tree: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], str]:
    found: dict[tuple[str, ...], str] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            found.update(_image_keys(value, (*path, str(key))))
    elif isinstance(tree, str) and (
        (path[-1] in ("repository", "registry") and "/" in tree) or (path[-1] in REGISTRY_KEYS and tree)
    ):
        found[path] = tree
    return found


# The catalogue keeps values.yaml as in git at the tag; the packaged charts point at release registries
# where git has staging/local ones (schemas/README.md).
PUBLISHED_OVERRIDES = {"kueue", "kai-scheduler"}


@pytest.mark.parametrize("release", sorted(CHART_VALUES))
def test_mirror_table_covers_every_upstream_image(release: str) -> None:
    upstream_images = _image_keys(chart_values(release))
    table = IMAGE_KEYS.get(release, {})
    missing = set(upstream_images) - set(table)
    assert not missing, f"{release}: image keys not rewritten for mirrors: {sorted(missing)}"
    for path, default in upstream_images.items():
        if release not in PUBLISHED_OVERRIDES:
            assert table[path] == default, (
                f"{release} {'.'.join(path)}: table {table[path]} != chart {default}"
            )
        else:
            assert table[path].rsplit("/", 1)[-1] == default.rsplit("/", 1)[-1]


PUBLIC_REGISTRIES = (
    "nvcr.io",
    "ghcr.io",
    "registry.k8s.io",
    "quay.io",
    "docker.io",
    "us-central1-docker.pkg.dev",
)


def _strings(tree: Any) -> list[str]:
    if isinstance(tree, dict):
        return [s for v in tree.values() for s in _strings(v)]
    if isinstance(tree, list):
        return [s for v in tree for s in _strings(v)]
    return [tree] if isinstance(tree, str) else []


def test_mirror_rewrites_every_image_and_chart() -> None:
    files = rendered("gke-prod")
    mirror = "europe-west4-docker.pkg.dev/acme-prod/mirror/"
    for release in releases_of("gke-prod"):
        assert release["chart"].startswith("oci://europe-west4-docker.pkg.dev/acme-prod/charts/")
        assert release["repo"] is None
        values = yaml.safe_load(files[release["values_file"]])
        for text in _strings(values):
            for registry in PUBLIC_REGISTRIES:
                if registry in text:
                    assert text.startswith(mirror), f"{release['name']}: {text} bypasses the mirror"
        for path in IMAGE_KEYS.get(release["name"], {}):
            assert _lookup(values, path).startswith(mirror)


def test_soperator_variant(tmp_path: Path) -> None:
    """Soperator instead of Slinky: same partitions and node groups, its own charts (their values
    are not in the schema catalogue, so the structure is checked against the model instead)."""
    target = tmp_path / "gke-prod"
    shutil.copytree(INVENTORIES / "gke-prod", target)
    path = target / "group_vars" / "all" / "cluster.yml"
    data = yaml.safe_load(path.read_text())
    data["cluster"]["kubernetes"]["slurm"] = {"operator": "soperator", "spool_storage_class": "premium-rwo"}
    without_slurm_pod_quotas(data["cluster"])
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    files = render_files(load_cluster(target), only=["helm"])
    names = [r["name"] for r in yaml.safe_load(files["helm/releases.yaml"])["releases"]]
    assert names[-4:] == ["soperator-crds", "soperator", "slurm-cluster", "nodesets"]
    cluster_values = yaml.safe_load(files["helm/values/slurm-cluster.yaml"])
    partitions = {p["name"]: p for p in cluster_values["partitionConfiguration"]["partitions"]}
    # Only sub-block A (16 nodes) is Slurm on Kubernetes; train and dev both cover it.
    assert partitions["dev"]["nodeSetRefs"] == ["a3-mega"]
    assert "Default=YES" in partitions["train"]["config"]
    nodesets = yaml.safe_load(files["helm/values/nodesets.yaml"])["nodesets"]
    assert sum(n["replicas"] for n in nodesets) == 16
    assert {n["slurmd"]["resources"]["gpu"] for n in nodesets} == {8}
    assert (
        nodesets[0]["slurmd"]["volumes"]["spool"]["volumeClaimTemplateSpec"]["storageClassName"]
        == "premium-rwo"
    )


def test_release_table_keys_name_pinned_charts_and_namespaces() -> None:
    """The release table names chart pins by field: each must exist, and each row resolves a namespace."""
    k8s = KubernetesSpec.model_validate({"version": "1.34", "slurm": {"operator": "slinky"}})
    assert len({addon.name for addon in ADDONS}) == len(ADDONS)
    for addon in ADDONS:
        assert addon.version in Versions.model_fields, addon.name
        assert addon.namespace(k8s), addon.name


def test_pod_fields_in_values_are_valid_pod_spec_fields(inventory: str) -> None:
    """Values the charts copy into pod specs (Slinky NodeSet podSpec, tolerations) are valid PodSpec
    fields for Kubernetes 1.34."""
    files = rendered(inventory)
    specs: list[dict[str, Any]] = []
    for release in releases_of(inventory):
        values = yaml.safe_load(files[release["values_file"]]) or {}
        for nodeset in (values.get("nodesets") or {}).values() if release["name"] == "slurm" else []:
            specs.append(nodeset.get("podSpec", {}))
        for path in (("daemonsets",), ("kubeletPlugin",)):
            if release["name"] in ("gpu-operator", "dra-driver-nvidia-gpu") and path[0] in values:
                specs.append({"tolerations": values[path[0]]["tolerations"]})
    for spec in specs:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "check"},
            "spec": {"containers": [{"name": "check", "image": "check"}], **spec},
        }
        kubernetes_validate.validate(pod, "1.34.0", strict=True)
