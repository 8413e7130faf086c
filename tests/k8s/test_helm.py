"""Every Helm values file gpucluster renders, read by the real Helm: Helm 4.1.4 (what users install
now) and Helm 3.17.2 must read each one as the same values.

Each release of each example is templated (`helm template`) and linted (`helm lint`) against a local
chart skeleton: the pinned chart's values.yaml and, where upstream has one, its values.schema.json
(from schemas/), and one template printing the values Helm computed. Those must equal the chart's
defaults merged with the file as Helm documents it (maps merged, anything else replaced, null
deleting a default), in both Helm versions. The binaries come from the wheels of the dev extras
(gpucluster.k8s.helm); nothing is downloaded.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.k8s.helm import WHEELS, HelmUnavailable, helm_binary, helm_version
from gpucluster.k8s.render import values_file
from tests.k8s.conftest import REPO, k8s_inventories, rendered
from tests.k8s.crd import catalogue
from tests.k8s.test_values import CHART_VALUES

MAJORS = (4, 3)
CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: computed-values
data:
  values.json: {{ toJson .Values | quote }}
"""


@cache
def helm(major: int) -> Path:
    return helm_binary(major)


@pytest.fixture(scope="module")
def helm_home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Helm's own directories in a temporary place (it writes nothing else)."""
    home = tmp_path_factory.mktemp("helm-home")
    return {
        "PATH": os.defpath,
        "HOME": str(home),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }


def skeleton(root: Path, release: str) -> Path:
    """A chart with the pinned chart's name, version, values.yaml and values.schema.json (the
    version without a leading `v`, which `helm lint --strict` calls no SemVer 2; the published
    charts carry it, and it changes nothing Helm does with values)."""
    values = catalogue(CHART_VALUES[release])
    folder = values.parent
    meta = yaml.safe_load((folder / "Chart.yaml").read_text())
    chart = root / meta["name"]
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v2",
                "name": meta["name"],
                "version": meta["version"].removeprefix("v"),
                "type": "application",
            }
        )
    )
    shutil.copy(values, chart / "values.yaml")
    if (folder / "values.schema.json").is_file():
        shutil.copy(folder / "values.schema.json", chart / "values.schema.json")
    (chart / "templates" / "computed-values.yaml").write_text(CONFIGMAP)
    return chart


def run_helm(major: int, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm(major)), *args], capture_output=True, text=True, env=env, check=False)


def computed_values(major: int, env: dict[str, str], chart: Path, values: Path, namespace: str) -> Any:
    result = run_helm(
        major, env, "template", "release", str(chart), "--namespace", namespace, "-f", str(values)
    )
    assert result.returncode == 0, f"Helm {major}: {result.stderr}"
    (configmap,) = [d for d in yaml.safe_load_all(result.stdout) if d]
    return json.loads(configmap["data"]["values.json"])


def helm_merge(defaults: Any, ours: Any) -> Any:
    """Helm's coalescing of a values file over the chart's values: maps merge key by key, a null
    deletes the default, anything else replaces it."""
    if not isinstance(ours, dict) or not isinstance(defaults, dict):
        return copy.deepcopy(ours)
    merged = copy.deepcopy(defaults)
    for key, value in ours.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = helm_merge(merged.get(key), value)
    return merged


def as_json(data: Any) -> Any:
    """Numbers as Helm hands them to templates (float64), for comparing with Python's reading."""
    if isinstance(data, dict):
        return {k: as_json(v) for k, v in data.items() if v is not None}
    if isinstance(data, list):
        return [as_json(v) for v in data]
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        return data
    return float(data)


def releases_of(inventory: str) -> list[dict[str, Any]]:
    releases: list[dict[str, Any]] = yaml.safe_load(rendered(inventory)["helm/releases.yaml"])["releases"]
    return releases


@pytest.mark.parametrize("inventory", k8s_inventories())
def test_helm_4_and_3_read_every_values_file_as_rendered(
    inventory: str, tmp_path: Path, helm_home: dict[str, str]
) -> None:
    files = rendered(inventory)
    for release in releases_of(inventory):
        name = release["name"]
        assert name in CHART_VALUES, f"{inventory}: {name} has no pinned chart in schemas/ to read it with"
        chart = skeleton(tmp_path / name, name)
        values = tmp_path / f"{name}.yaml"
        values.write_text(files[release["values_file"]])
        expected = as_json(
            helm_merge(
                yaml.safe_load(chart.joinpath("values.yaml").read_text()), yaml.safe_load(values.read_text())
            )
        )
        for major in MAJORS:
            got = computed_values(major, helm_home, chart, values, release["namespace"])
            assert as_json(got) == expected, f"{inventory} {name}: Helm {major} reads other values"
            lint = run_helm(major, helm_home, "lint", str(chart), "--strict", "-f", str(values))
            assert lint.returncode == 0, f"{inventory} {name}: helm {major} lint: {lint.stdout}{lint.stderr}"


def test_values_files_are_one_document_without_markers() -> None:
    """What both Helms read alike: one YAML document, no `---`/`...` line (Helm 4 reads a stream)."""
    for inventory in k8s_inventories():
        for path, text in rendered(inventory).items():
            if not path.startswith("helm/values/"):
                continue
            assert len(list(yaml.compose_all(text))) == 1, path
            assert not [line for line in text.splitlines() if line.startswith(("---", "..."))], (
                inventory,
                path,
            )


def test_the_old_crds_values_file_is_refused_by_helm_4(tmp_path: Path, helm_home: dict[str, str]) -> None:
    """What gcp-prod and gke-prod rendered before (the header, then `--- {}`) is refused by Helm 4,
    so the Slinky CRDs never installed; Helm 3 took it. The file rendered now is read by both."""
    chart = skeleton(tmp_path, "slurm-operator-crds")
    header = rendered("gcp-prod")["helm/values/slurm-operator-crds.yaml"].splitlines()[0]
    old = tmp_path / "old.yaml"
    old.write_text(f"{header}\n--- {{}}\n")
    refused = run_helm(4, helm_home, "template", "crds", str(chart), "-f", str(old))
    assert refused.returncode != 0 and "invalid Yaml document separator" in refused.stderr
    assert run_helm(3, helm_home, "template", "crds", str(chart), "-f", str(old)).returncode == 0
    now = tmp_path / "now.yaml"
    now.write_text(values_file({}, header))
    for major in MAJORS:
        assert computed_values(major, helm_home, chart, now, "slinky") == {}


def test_a_stream_of_documents_reads_differently(tmp_path: Path, helm_home: dict[str, str]) -> None:
    """Why one document: Helm 4 merges every document of a values file, Helm 3 reads the first."""
    chart = skeleton(tmp_path, "slurm-operator-crds")
    stream = tmp_path / "stream.yaml"
    stream.write_text("---\na: 1\n---\nb: 2\n")
    assert computed_values(4, helm_home, chart, stream, "x") == {"a": 1, "b": 2}
    assert computed_values(3, helm_home, chart, stream, "x") == {"a": 1}


def test_the_chart_schema_is_applied(tmp_path: Path, helm_home: dict[str, str]) -> None:
    """cert-manager ships a values.schema.json: Helm refuses a value of the wrong type."""
    chart = skeleton(tmp_path, "cert-manager")
    assert (chart / "values.schema.json").is_file()
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("crds:\n  enabled: 'yes'\n")
    for major in MAJORS:
        result = run_helm(major, helm_home, "template", "cm", str(chart), "-f", str(wrong))
        assert result.returncode != 0 and "crds" in result.stderr, result.stderr


def test_helm_binaries_come_from_the_wheels_into_a_cache(tmp_path: Path) -> None:
    for major, wheel in WHEELS.items():
        binary = helm_binary(major, cache=tmp_path)
        assert binary.is_relative_to(tmp_path) and os.access(binary, os.X_OK)
        assert helm_version(binary) == wheel.helm_version
        before = binary.stat().st_mtime_ns
        assert helm_binary(major, cache=tmp_path) == binary and binary.stat().st_mtime_ns == before
    with pytest.raises(HelmUnavailable, match="no Helm 2 wheel"):
        helm_binary(2, cache=tmp_path)


def test_roles_give_helm_only_the_rendered_values_files() -> None:
    """Each role installs its releases with the values file rendered for it (the files read above),
    and nothing else: no inline values, no --set, no second file."""
    from gpucluster.k8s.render import ADDONS

    # One shared role installs every release (roles/helm_release), each role passing its own render dir.
    tasks = yaml.safe_load((REPO / "roles" / "helm_release" / "tasks" / "release.yml").read_text())
    (install,) = [t for t in tasks if "kubernetes.core.helm" in t]
    module = install["kubernetes.core.helm"]
    assert module["values_files"] == ["{{ helm_release_render_dir }}/{{ helm_release_entry.values_file }}"]
    assert not {"values", "set_values", "values_file"} & set(module)
    roles = sorted({addon.role for addon in ADDONS})
    for role in roles:
        main = yaml.safe_load((REPO / "roles" / role / "tasks" / "main.yml").read_text())
        # A call names its variables, or takes them from its block (dra_driver's two halves).
        given = [
            outer.get("vars", {}) | task.get("vars", {})
            for outer in main
            for task in outer.get("block", [outer])
            if task.get("ansible.builtin.include_role", {}).get("name") == "gpucluster.cluster.helm_release"
        ]
        assert given, role
        for names in given:
            assert names["helm_release_role"] == role, role
            assert names["helm_release_render_dir"] == f"{{{{ {role}_render_dir }}}}", role
    for inventory in k8s_inventories():
        for release in releases_of(inventory):
            assert release["values_file"] == f"helm/values/{release['name']}.yaml"
