"""The schema catalogue (schemas/, made by scripts/refresh_schemas.py) holds what the validators of
tests/k8s read, with its provenance, and in the form the script writes; and the script's transform
does what schemas/README.md says (checked on small samples, so without any upstream checkout)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from gpucluster.k8s.model import Versions
from gpucluster.k8s.render import ADDONS
from tests.k8s.crd import CRD_DIRS, REPO, SCHEMAS
from tests.k8s.test_values import CHART_VALUES

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SPDX = {"Apache-2.0", "MIT", "BSD-3-Clause", "BSD-2-Clause", "MPL-2.0"}


def _script() -> ModuleType:
    name = "refresh_schemas"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "refresh_schemas.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is made
        spec.loader.exec_module(module)
    return sys.modules[name]


def _release_dir(relpath: str) -> Path:
    """schemas/<project>/<version> of a catalogue path."""
    project, version = relpath.split("/")[:2]
    return SCHEMAS / project / version


def _catalogue_files() -> list[Path]:
    return sorted(SCHEMAS.rglob("*.yaml"))


def _schema_nodes(schema: Any, path: str) -> Iterator[tuple[dict[str, Any], str]]:
    """Every schema node of an openAPIV3Schema (not the data under default/enum/validations)."""
    if not isinstance(schema, dict):
        return
    yield schema, path
    for key in ("items", "additionalProperties", "not"):
        if isinstance(schema.get(key), dict):
            yield from _schema_nodes(schema[key], f"{path}.{key}")
    for key in ("allOf", "anyOf", "oneOf"):
        for index, sub in enumerate(schema.get(key) or []):
            yield from _schema_nodes(sub, f"{path}.{key}[{index}]")
    for key in ("properties", "patternProperties"):
        for name, sub in (schema.get(key) or {}).items():
            yield from _schema_nodes(sub, f"{path}.{name}")


def _prose(crd: dict[str, Any]) -> list[str]:
    script = _script()
    return [
        f"{name}{path}.{key}"
        for name, version in crd["versions"].items()
        for node, path in _schema_nodes(version["openAPIV3Schema"], "")
        for key in node
        if key in script.PROSE
    ]


def _anchors(text: str) -> list[str]:
    return [
        f"{event.start_mark}: {type(event).__name__}"
        for event in yaml.parse(text, Loader=LOADER)
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None)
    ]


@pytest.mark.parametrize("relpath", sorted(set(CRD_DIRS) | set(CHART_VALUES.values())))
def test_validator_inputs_exist_with_source(relpath: str) -> None:
    path = SCHEMAS / relpath
    assert path.exists(), f"{path}: missing (scripts/refresh_schemas.py, see schemas/README.md)"
    if path.is_dir():
        assert sorted(path.glob("*.yaml")), f"{path}: no CRD"
    folder = _release_dir(relpath)
    source = yaml.safe_load((folder / "SOURCE.yaml").read_text())
    assert source["project"] == folder.parent.name
    assert source["version"] == folder.name
    assert source["license"] in SPDX
    assert source["repository"].startswith("https://github.com/")
    assert source["tag"]
    stored = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert set(source["files"]) == stored - {"SOURCE.yaml"}, "SOURCE.yaml lists other files than stored"
    for entry in source["files"].values():
        assert entry["from"] and len(entry["sha256"]) == 64


def test_catalogue_versions_are_the_pins() -> None:
    """The chart of each verified release is the version gpucluster installs (a pin raised without
    refreshing the catalogue fails here)."""
    versions = Versions()
    pins = {addon.name: getattr(versions, addon.version).version for addon in ADDONS}
    for release, relpath in CHART_VALUES.items():
        chart = yaml.safe_load((SCHEMAS / relpath).with_name("Chart.yaml").read_text())
        assert chart["version"] == pins[release], (
            f"{release}: catalogue {chart['version']}, pin {pins[release]}"
        )
        assert _release_dir(relpath).name in (pins[release], pins[release].removeprefix("v"))


def test_no_prose_in_stored_schemas() -> None:
    crds = sorted(SCHEMAS.glob("*/*/crds/*.yaml"))
    assert crds
    problems = []
    for path in crds:
        crd = yaml.load(path.read_text(), Loader=LOADER)
        assert set(crd) == {"group", "kind", "plural", "scope", "versions"}, path
        problems += [f"{path.relative_to(SCHEMAS)}: {p}" for p in _prose(crd)]
    assert not problems, problems[:20]


def test_catalogue_is_plain_yaml_as_the_script_writes_it() -> None:
    """No anchors or aliases, and every file byte-identical to the script's dump of its data (so
    nothing in schemas/ was edited by hand; run the script instead)."""
    script = _script()
    files = _catalogue_files()
    assert len(files) > 10
    for path in files:
        text = path.read_text()
        assert not _anchors(text), f"{path}: {_anchors(text)[:5]}"
        assert script.dump(yaml.load(text, Loader=LOADER)) == text, (
            f"{path}: not as refresh_schemas.py writes it"
        )


# A long pattern without spaces, deep in the schema: the dumper must fold it below yamllint's 160.
PATTERN = "^(" + "|".join(f"[a-z]{{{n}}}" for n in range(1, 40)) + ")$"
LEAF: dict[str, Any] = {"type": "string", "description": "A leaf.", "pattern": PATTERN}
STRIPPED_LEAF: dict[str, Any] = {"type": "string", "pattern": PATTERN}
for _ in range(12):
    LEAF = {"type": "object", "description": "Nested.", "properties": {"deeper": LEAF}}
    STRIPPED_LEAF = {"type": "object", "properties": {"deeper": STRIPPED_LEAF}}

SAMPLE_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {
        "name": "widgets.example.com",
        "annotations": {"controller-gen.kubebuilder.io/version": "v0"},
    },
    "spec": {
        "group": "example.com",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
        "scope": "Namespaced",
        "versions": [
            {"name": "v1alpha1", "served": False, "storage": False, "schema": {"openAPIV3Schema": {}}},
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size", "description": "Size."}
                ],
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "description": "Widget is a sample.",
                        "type": "object",
                        "properties": {
                            "spec": {
                                "description": "Spec.",
                                "type": "object",
                                "required": ["size"],
                                "x-kubernetes-validations": [
                                    {"rule": "self.size <= 10", "message": "size: at most 10"}
                                ],
                                "properties": {
                                    "size": {"type": "integer", "default": 1, "example": 3},
                                    "mode": {"type": "string", "enum": ["a", "b"], "title": "Mode"},
                                    "description": {"type": "string", "description": "A field named so."},
                                    "meta": {
                                        "type": "object",
                                        "default": {"description": "data, kept"},
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                    "ports": {
                                        "type": "array",
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["name"],
                                        "items": {
                                            "description": "A port.",
                                            "type": "object",
                                            "properties": {"name": {"type": "string"}},
                                        },
                                    },
                                    "either": {
                                        "anyOf": [
                                            {"type": "integer", "description": "a number"},
                                            {"type": "string"},
                                        ],
                                        "x-kubernetes-int-or-string": True,
                                    },
                                    "labels": {
                                        "type": "object",
                                        "additionalProperties": {"type": "string", "description": "value"},
                                    },
                                    "deep": LEAF,
                                },
                            }
                        },
                    }
                },
            },
        ],
    },
}

EXPECTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "x-kubernetes-validations": [{"rule": "self.size <= 10", "message": "size: at most 10"}],
            "properties": {
                "size": {"type": "integer", "default": 1},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "description": {"type": "string"},
                "meta": {
                    "type": "object",
                    "default": {"description": "data, kept"},
                    "x-kubernetes-preserve-unknown-fields": True,
                },
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                },
                "either": {
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                    "x-kubernetes-int-or-string": True,
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "deep": STRIPPED_LEAF,
            },
        }
    },
}

SAMPLE_VALUES = """\
# -- Image of the controller.
image: &image
  repository: registry.example.com/widget   # trailing comment
  tag: v1.2.3
sidecar:
  image: *image
enabled: true
nodeSelector: {}
tolerations: []
config: |
  line one
  line two
"""

SAMPLE_CHART = """\
# Licensed under the Apache License, Version 2.0
apiVersion: v2
name: widget
description: A chart.
version: 0.0.0
appVersion: 0.0.0-devel
dependencies:
  - name: helper
    version: 1.0.0
    repository: oci://registry.example.com/charts
    condition: helper.enabled
"""


def _sample_release(root: Path) -> Path:
    (root / "crds").mkdir(parents=True)
    bundle = yaml.safe_dump_all(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}, SAMPLE_CRD]
    )
    (root / "crds" / "bundle.yaml").write_text(bundle)
    (root / "widget").mkdir()
    (root / "widget" / "Chart.yaml").write_text(SAMPLE_CHART)
    (root / "widget" / "values.yaml").write_text(SAMPLE_VALUES)
    return root


def test_script_transform_of_a_sample_release(tmp_path: Path) -> None:
    script = _script()
    source = _sample_release(tmp_path / "src")
    out = tmp_path / "schemas"
    args = ["--project", "demo", "--version", "v1.2.3", "--repository", "https://github.com/example/demo"]
    assert script.main([str(source), "--out", str(out), *args, "--license", "MIT"]) == 0
    folder = out / "demo" / "v1.2.3"
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert names == [
        "SOURCE.yaml",
        "charts/widget/Chart.yaml",
        "charts/widget/values.yaml",
        "crds/example.com_widgets.yaml",
    ]
    texts = {name: (folder / name).read_text() for name in names}

    crd = yaml.safe_load(texts["crds/example.com_widgets.yaml"])
    assert crd == {
        "group": "example.com",
        "kind": "Widget",
        "plural": "widgets",
        "scope": "Namespaced",
        "versions": {"v1": {"storage": True, "openAPIV3Schema": EXPECTED_SCHEMA}},
    }
    assert not _prose(crd)
    assert "A leaf." not in texts["crds/example.com_widgets.yaml"]

    values = yaml.safe_load(texts["charts/widget/values.yaml"])
    assert values == yaml.safe_load(SAMPLE_VALUES)
    assert values["sidecar"]["image"] == {"repository": "registry.example.com/widget", "tag": "v1.2.3"}
    assert "#" not in texts["charts/widget/values.yaml"]
    assert "config: |" in texts["charts/widget/values.yaml"]

    assert yaml.safe_load(texts["charts/widget/Chart.yaml"]) == {
        "name": "widget",
        "version": "v1.2.3",
        "appVersion": "v1.2.3",
        "in_git": {"version": "0.0.0", "appVersion": "0.0.0-devel"},
        "dependencies": [{"name": "helper", "version": "1.0.0", "condition": "helper.enabled"}],
    }
    record = yaml.safe_load(texts["SOURCE.yaml"])
    assert {k: record[k] for k in ("project", "version", "tag", "license", "repository")} == {
        "project": "demo",
        "version": "v1.2.3",
        "tag": "v1.2.3",
        "license": "MIT",
        "repository": "https://github.com/example/demo",
    }
    assert {name: entry["from"] for name, entry in record["files"].items()} == {
        "charts/widget/Chart.yaml": "widget/Chart.yaml",
        "charts/widget/values.yaml": "widget/values.yaml",
        "crds/example.com_widgets.yaml": "crds/bundle.yaml",
    }

    for name, text in texts.items():
        assert not _anchors(text), name
        assert max(len(line) for line in text.splitlines()) <= 160, name
        assert not text.startswith("---") and "\t" not in text, name

    # Same input, same bytes; a file no longer generated is removed.
    (folder / "crds" / "stale.yaml").write_text("kind: Old\n")
    assert script.main([str(source), "--out", str(out), *args, "--license", "MIT"]) == 0
    assert {name: (folder / name).read_text() for name in names} == texts
    assert not (folder / "crds" / "stale.yaml").exists()
    assert not list(folder.rglob("*.tmp"))


def test_script_reads_a_folder_of_releases(tmp_path: Path) -> None:
    """The <project>/<version>/ layout (the one the catalogue was first made from): project facts
    come from the script's table, the version (and so the published chart version) from the folder."""
    script = _script()
    _sample_release(tmp_path / "src" / "kueue" / "9.9.9")
    out = tmp_path / "schemas"
    assert script.main([str(tmp_path / "src"), "--out", str(out)]) == 0
    record = yaml.safe_load((out / "kueue" / "9.9.9" / "SOURCE.yaml").read_text())
    assert record["repository"] == "https://github.com/kubernetes-sigs/kueue"
    assert record["tag"] == "v9.9.9"
    assert record["license"] == "Apache-2.0"
    chart = yaml.safe_load((out / "kueue" / "9.9.9" / "charts" / "widget" / "Chart.yaml").read_text())
    assert chart["version"] == "9.9.9"


def test_script_refuses_what_it_cannot_convert(tmp_path: Path) -> None:
    script = _script()
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="no <project>/<version>/ release folder"):
        script.main([str(tmp_path / "empty"), "--out", str(tmp_path / "out")])
    templated = _sample_release(tmp_path / "templated")
    (templated / "crds" / "bundle.yaml").write_text("{{- if .Values.crds.enabled }}\nkind: [\n")
    with pytest.raises(SystemExit, match="not plain YAML"):
        script.main(
            [str(templated), "--out", str(tmp_path / "out"), "--project", "kueue", "--version", "1.0.0"]
        )
    assert not (tmp_path / "out").exists()


def test_values_schemas_are_json_as_the_script_writes_them() -> None:
    """values.schema.json (kept where upstream has one, for Helm's own validation) is JSON, dumped
    the way the script dumps it."""
    script = _script()
    schemas = sorted(SCHEMAS.glob("*/*/charts/*/values.schema.json"))
    assert schemas, "no chart of the catalogue has a values.schema.json (cert-manager's has)"
    for path in schemas:
        text = path.read_text()
        assert script.transform_values_schema(json.loads(text)) == text, path


def _git(repo: Path, *args: str) -> None:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def test_script_reads_a_release_from_git_at_its_tag(tmp_path: Path) -> None:
    """--git: the files come from the clone at the tag (not the work tree, not later commits), from
    the project's upstream paths only, with the commit and each file's repository path recorded;
    a chart's symbolic link to a CRD folder is skipped, its values.schema.json kept."""
    script = _script()
    repo = tmp_path / "volcano"
    chart = repo / "installer" / "helm" / "chart" / "volcano"
    crds = repo / "config" / "crd" / "volcano" / "bases"
    (chart / "templates").mkdir(parents=True)
    crds.mkdir(parents=True)
    (crds / "widgets.yaml").write_text(yaml.safe_dump(SAMPLE_CRD))
    (crds / "README.md").write_text("not a CRD\n")
    (chart / "Chart.yaml").write_text(SAMPLE_CHART)
    (chart / "values.yaml").write_text(SAMPLE_VALUES)
    (chart / "values.schema.json").write_text(
        '{"type": "object", "properties": {"enabled": {"type": "boolean"}}}'
    )
    (chart / "templates" / "x.yaml").write_text("{{ .Values.enabled }}\n")
    (chart / "crds").symlink_to("../../../../config/crd/volcano/bases")
    (repo / "other").mkdir()
    (repo / "other" / "stray.yaml").write_text(yaml.safe_dump(SAMPLE_CRD))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "release")
    _git(repo, "tag", "v1.2.3")
    (chart / "values.yaml").write_text("later: true\n")
    _git(repo, "commit", "-q", "-am", "after the release")
    out = tmp_path / "schemas"
    assert (
        script.main(["--git", str(repo), "--project", "volcano", "--version", "1.2.3", "--out", str(out)])
        == 0
    )
    folder = out / "volcano" / "1.2.3"
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert names == [
        "SOURCE.yaml",
        "charts/widget/Chart.yaml",
        "charts/widget/values.schema.json",
        "charts/widget/values.yaml",
        "crds/example.com_widgets.yaml",
    ]
    assert yaml.safe_load((folder / "charts/widget/values.yaml").read_text()) == yaml.safe_load(SAMPLE_VALUES)
    assert json.loads((folder / "charts/widget/values.schema.json").read_text())["type"] == "object"
    record = yaml.safe_load((folder / "SOURCE.yaml").read_text())
    assert record["tag"] == "v1.2.3" and len(record["commit"]) == 40
    assert record["repository"] == "https://github.com/volcano-sh/volcano"
    assert {name: entry["from"] for name, entry in record["files"].items()} == {
        "charts/widget/Chart.yaml": "installer/helm/chart/volcano/Chart.yaml",
        "charts/widget/values.schema.json": "installer/helm/chart/volcano/values.schema.json",
        "charts/widget/values.yaml": "installer/helm/chart/volcano/values.yaml",
        "crds/example.com_widgets.yaml": "config/crd/volcano/bases/widgets.yaml",
    }
    with pytest.raises(SystemExit, match=r"v9\.9\.9"):
        script.main(["--git", str(repo), "--project", "volcano", "--version", "9.9.9", "--out", str(out)])


def test_role_scenarios_expect_the_pinned_versions() -> None:
    """Each Kubernetes role's Molecule verify checks that the plan installs the pinned version."""
    versions = Versions()
    pins = {addon.name: getattr(versions, addon.version).version for addon in ADDONS}
    checked = set()
    for verify in sorted(REPO.glob("roles/*/molecule/default/verify.yml")):
        text = verify.read_text()
        release = re.search(r"/helm-([a-z0-9-]+)\.yaml", text)
        for expected in re.findall(r"release\.chart_version == '([^']+)'", text):
            assert release, verify
            assert expected == pins[release.group(1)], f"{verify}: {expected}, pin {pins[release.group(1)]}"
            checked.add(release.group(1))
    assert len(checked) >= 6, checked
