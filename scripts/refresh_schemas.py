#!/usr/bin/env python3
"""Build the schema catalogue (schemas/<project>/<version>/) from upstream CRD files and Helm charts.

The catalogue keeps only what the tests under tests/k8s validate against:

  crds/<group>_<plural>.yaml   group, kind, plural, scope and, per served version, its openAPIV3Schema
                               with defaults, enums, patterns, x-kubernetes-* markers and
                               x-kubernetes-validations (CEL rules and their messages), but without
                               description/title/example/externalDocs
  charts/<name>/values.yaml    the chart's values.yaml re-dumped (no comments; keys, defaults, images)
  charts/<name>/values.schema.json  the chart's JSON Schema of its values, where upstream has one
                               (Helm validates values against it), re-dumped (sorted keys)
  charts/<name>/Chart.yaml     name, version, appVersion (and dependencies) of the chart
  SOURCE.yaml                  project, upstream repository, tag (and commit), SPDX license, and the
                               source file (with its sha256) of every file above

The files come from a folder laid out as described in --help, or straight from a git clone of the
upstream repository at the release tag (--git), read with `git show` at the paths of PROJECTS.

Output is deterministic (sorted keys, no anchors/aliases) and written atomically; files of the
project/version folder that are no longer generated are removed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpucluster.render.files import atomic_write

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "schemas"

# Known upstream projects. `paths` says where the files live in the upstream repository at the tag
# (informational, copied into SOURCE.yaml); `license` is the SPDX id of the repository's LICENSE.
PROJECTS: dict[str, dict[str, Any]] = {
    "kueue": {
        "repository": "https://github.com/kubernetes-sigs/kueue",
        "license": "Apache-2.0",
        "paths": {"crds": "config/components/crd/bases", "charts": {"kueue": "charts/kueue"}},
    },
    "kai-scheduler": {
        "repository": "https://github.com/kai-scheduler/KAI-Scheduler",
        "license": "Apache-2.0",
        "paths": {
            "crds": "deployments/kai-scheduler/crds",
            "charts": {"kai-scheduler": "deployments/kai-scheduler"},
        },
    },
    "slinky": {
        "repository": "https://github.com/SlinkyProject/slurm-operator",
        "license": "Apache-2.0",
        "paths": {
            "crds": "config/crd/bases",
            "charts": {
                "slurm": "helm/slurm",
                "slurm-operator": "helm/slurm-operator",
                "slurm-operator-crds": "helm/slurm-operator-crds",
            },
        },
    },
    "gpu-operator": {
        "repository": "https://github.com/NVIDIA/gpu-operator",
        "license": "Apache-2.0",
        "paths": {
            "crds": "deployments/gpu-operator/crds",
            "charts": {"gpu-operator": "deployments/gpu-operator"},
        },
    },
    "dra-driver-nvidia-gpu": {
        "repository": "https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu",
        "license": "Apache-2.0",
        "paths": {
            "crds": "deployments/helm/dra-driver-nvidia-gpu/crds",
            "charts": {"dra-driver-nvidia-gpu": "deployments/helm/dra-driver-nvidia-gpu"},
        },
    },
    "volcano": {
        "repository": "https://github.com/volcano-sh/volcano",
        "license": "Apache-2.0",
        "paths": {
            "crds": "config/crd/volcano/bases",
            "charts": {"volcano": "installer/helm/chart/volcano"},
        },
    },
    "network-operator": {
        "repository": "https://github.com/Mellanox/network-operator",
        "license": "Apache-2.0",
        "paths": {
            "crds": "deployment/network-operator/crds",
            "charts": {"network-operator": "deployment/network-operator"},
        },
    },
    # gpucluster renders no cert-manager object: only the chart (values and their JSON Schema).
    "cert-manager": {
        "repository": "https://github.com/cert-manager/cert-manager",
        "license": "Apache-2.0",
        "paths": {"charts": {"cert-manager": "deploy/charts/cert-manager"}},
    },
}

# Schema keywords that are prose only: the API server never validates with them.
PROSE = frozenset({"description", "title", "example", "externalDocs", "$comment"})
# Keywords whose value is a schema, a list of schemas, or a map of name -> schema.
SCHEMA_KEYS = ("items", "additionalProperties", "not")
SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")
SCHEMA_MAPS = ("properties", "patternProperties", "definitions")

HELP_LAYOUT = """\
SOURCE_DIR is one of:

  a folder of releases, laid out <project>/<version>/ (like a copy of the upstream files at their tags):
      <project>/<version>/crds/*.yaml         CRD files of the release
      <project>/<version>/<chart dir>/Chart.yaml, values.yaml   one folder per chart (any name)
  every <project>/<version> found is converted (or only those named with --only);

  a git clone of the upstream repository, given with --git REPO --project P --version V: the files
      are read at the release tag (--tag, default V with a leading v) from the paths of the project in
      this script's PROJECTS table (see SOURCE.yaml's upstream_paths), and SOURCE.yaml records the
      commit and each file's path in the repository; SOURCE_DIR is not given then;

  one release, given with --project and --version, e.g. after
      helm pull oci://registry.k8s.io/kueue/charts/kueue --version 0.19.2 --untar --untardir SRC
      (and the release's CRD files copied into SRC/crds/):
      SRC/crds/*.yaml                         CRD files (a bundle with other kinds of objects is fine)
      SRC/<chart>/Chart.yaml, values.yaml     charts as `helm pull --untar` leaves them
                                              (and values.schema.json where the chart has one)
                                              (CRDs in SRC/<chart>/crds/ are read too)

The chart version recorded is the release's version (the <version> folder name, or --version) when
Chart.yaml says otherwise (a development version in git): published charts carry the tag as version and
appVersion (helm package --version TAG --app-version TAG); Chart.yaml's own values are kept under in_git
(--keep-chart-versions turns this off). values.yaml is kept as found: a chart from git may name other
image registries than the packaged chart (see schemas/README.md).
"""


WIDTH = 110  # PyYAML folds long strings at spaces past this column; yamllint allows 160
UNBREAKABLE = re.compile(r"[!-~]{20,}")  # printable ASCII without spaces


class Dumper(yaml.SafeDumper):
    """Plain YAML: no anchors/aliases, block sequences indented under their key (yamllint's
    default), multi-line strings as literal blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)

    # A long string without spaces (a regex pattern deep in a schema) cannot be folded by PyYAML;
    # it is written double-quoted and broken with escaped line breaks (`\` at the end of a line),
    # so that no line passes yamllint's limit.
    def choose_scalar_style(self) -> str:
        style: str = super().choose_scalar_style()
        value = getattr(self.event, "value", "")
        if (
            style in ("", "'")
            and not self.simple_key_context
            and UNBREAKABLE.fullmatch(value)
            and self.column + len(value) + 4 > self.best_width
        ):
            return '"'
        return style

    def write_double_quoted(self, text: str, split: bool = True) -> None:
        if not (split and UNBREAKABLE.fullmatch(text)):
            super().write_double_quoted(text, split)
            return
        self.write_indicator('"', True)
        for char in text:
            data = "\\" + char if char in '"\\' else char
            if self.column + len(data) + 1 > self.best_width and self.column > (self.indent or 0) + 1:
                self.stream.write("\\")
                self.column += 1
                self.write_indent()
                self.whitespace = False
                self.indention = False
            self.stream.write(data)
            self.column += len(data)
        self.write_indicator('"', False)


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    # Multi-line strings (CEL rules, config files) as literal blocks, unless a line is too long
    # for one: then double-quoted, which PyYAML can fold.
    if "\n" in data and all(len(line) <= WIDTH for line in data.splitlines()):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    style = '"' if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


Dumper.add_representer(str, _represent_str)


def dump(data: Any) -> str:
    text: str = yaml.dump(
        data, Dumper=Dumper, sort_keys=True, default_flow_style=False, allow_unicode=True, width=WIDTH
    )
    return text


def strip_schema(schema: Any) -> Any:
    """An openAPIV3Schema without prose: description etc. dropped from every schema node, while
    property names (a property may be called `description`) and values under default, enum and
    x-kubernetes-validations are kept as they are."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in PROSE:
            continue
        if key in SCHEMA_KEYS and isinstance(value, dict):
            out[key] = strip_schema(value)
        elif key in (*SCHEMA_KEYS, *SCHEMA_LISTS) and isinstance(value, list):
            out[key] = [strip_schema(v) for v in value]
        elif key in SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: strip_schema(sub) for name, sub in value.items()}
        else:
            out[key] = value
    return out


def transform_crd(doc: dict[str, Any]) -> dict[str, Any]:
    """What validation needs of a CustomResourceDefinition: served versions and their schemas."""
    spec = doc["spec"]
    versions: dict[str, Any] = {}
    for version in spec["versions"]:
        if not version.get("served", True):
            continue
        entry: dict[str, Any] = {
            "openAPIV3Schema": strip_schema(version["schema"]["openAPIV3Schema"]),
            "storage": bool(version.get("storage", False)),
        }
        if version.get("deprecated"):
            entry["deprecated"] = True
        versions[version["name"]] = entry
    return {
        "group": spec["group"],
        "kind": spec["names"]["kind"],
        "plural": spec["names"]["plural"],
        "scope": spec["scope"],
        "versions": versions,
    }


def transform_chart(chart: dict[str, Any], published: str | None) -> dict[str, Any]:
    """name, version, appVersion (and dependencies) of a Chart.yaml; `published` replaces a
    version that is not the release's (Chart.yaml in git often says 0.0.0 or -devel)."""
    out: dict[str, Any] = {"name": chart["name"], "version": str(chart["version"])}
    if "appVersion" in chart:
        out["appVersion"] = str(chart["appVersion"])
    deps = [
        {k: str(d[k]) for k in ("name", "version", "condition") if k in d}
        for d in chart.get("dependencies") or []
    ]
    if deps:
        out["dependencies"] = sorted(deps, key=lambda d: d["name"])
    if published and out["version"] != published:
        out["in_git"] = {k: out[k] for k in ("version", "appVersion") if k in out}
        out["version"] = published
        out["appVersion"] = published
    return out


def transform_values(values: Any) -> Any:
    """values.yaml as data (comments dropped; anchors expanded by the dumper)."""
    return {} if values is None else values


def transform_values_schema(schema: Any) -> str:
    """values.schema.json as Helm reads it (JSON Schema, kept whole), dumped deterministically."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


@dataclass
class Release:
    project: str
    version: str
    root: Path
    tag: str
    repository: str
    license: str
    paths: dict[str, Any] = field(default_factory=dict)
    keep_chart_versions: bool = False
    commit: str | None = None  # set when read from a git clone at the tag
    # In a git clone, the release's files sit at their upstream paths (root/<paths>): only those
    # folders are read. Otherwise the folder layout of --help: root/crds and root/<chart dir>.
    upstream_layout: bool = False

    def crd_dirs(self) -> list[Path]:
        if self.upstream_layout:
            own = [self.root / self.paths["crds"]] if self.paths.get("crds") else []
        else:
            own = [self.root / "crds"]
        return own + [c.parent / "crds" for c in self.chart_files()]

    def chart_files(self) -> list[Path]:
        """Chart.yaml of every chart of the release (not subcharts)."""
        if self.upstream_layout:
            found = [self.root / d / "Chart.yaml" for d in self.paths.get("charts", {}).values()]
            return sorted(p for p in found if p.is_file())
        return _charts(self.root)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _yaml_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def build(release: Release) -> dict[str, str]:
    """Relative path (in the project/version folder) -> file text."""
    files: dict[str, str] = {}
    sources: dict[str, dict[str, str]] = {}
    for folder in release.crd_dirs():
        for path in _yaml_files(folder):
            for doc in _load_all(path):
                if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                    continue
                crd = transform_crd(doc)
                name = f"crds/{crd['group']}_{crd['plural']}.yaml"
                text = dump(crd)
                if name in files and files[name] != text:
                    raise SystemExit(
                        f"{path}: {crd['kind']} also in {sources[name]['from']}, with another schema"
                    )
                if name not in files:
                    files[name] = text
                    sources[name] = _source(release, path)
    for chart_file in release.chart_files():
        chart = _load_all(chart_file)[0]
        meta = transform_chart(chart, None if release.keep_chart_versions else release.version)
        name = meta["name"]
        if f"charts/{name}/Chart.yaml" in files:
            raise SystemExit(f"{chart_file}: a second chart named {name}")
        files[f"charts/{name}/Chart.yaml"] = dump(meta)
        sources[f"charts/{name}/Chart.yaml"] = _source(release, chart_file)
        values_file = chart_file.parent / "values.yaml"
        if values_file.exists():
            values = _load_all(values_file)
            files[f"charts/{name}/values.yaml"] = dump(transform_values(values[0] if values else None))
            sources[f"charts/{name}/values.yaml"] = _source(release, values_file)
        schema_file = chart_file.parent / "values.schema.json"
        if schema_file.exists():
            try:
                schema = json.loads(schema_file.read_text())
            except ValueError as error:
                raise SystemExit(f"{schema_file}: not JSON: {error}") from None
            files[f"charts/{name}/values.schema.json"] = transform_values_schema(schema)
            sources[f"charts/{name}/values.schema.json"] = _source(release, schema_file)
    if not files:
        raise SystemExit(f"{release.root}: no CRD and no chart found (see --help for the layout)")
    record: dict[str, Any] = {
        "project": release.project,
        "version": release.version,
        "repository": release.repository,
        "tag": release.tag,
        "license": release.license,
        "generated_by": "scripts/refresh_schemas.py",
        "files": sources,
    }
    if release.commit:
        record["commit"] = release.commit
    if release.paths:
        record["upstream_paths"] = release.paths
    files["SOURCE.yaml"] = dump(record)
    return files


def _load_all(path: Path) -> list[Any]:
    try:
        return list(yaml.safe_load_all(path.read_text()))
    except yaml.YAMLError as error:
        raise SystemExit(f"{path}: not plain YAML (a Helm template?): {error}") from None


def _source(release: Release, path: Path) -> dict[str, str]:
    return {"from": path.relative_to(release.root).as_posix(), "sha256": _sha256(path)}


def _charts(root: Path) -> list[Path]:
    """Chart.yaml of every chart folder directly under root (not subcharts)."""
    return sorted(p for p in root.glob("*/Chart.yaml") if p.is_file())


def write_release(out: Path, release: Release, files: dict[str, str]) -> list[str]:
    """Write a project/version folder; remove files in it that are no longer generated."""
    target = out / release.project / release.version
    for rel, text in sorted(files.items()):
        atomic_write(target / rel, text)
    removed = []
    for path in sorted(target.rglob("*")):
        rel = path.relative_to(target).as_posix()
        if path.is_file() and rel not in files:
            path.unlink()
            removed.append(rel)
    for path in sorted(target.rglob("*"), reverse=True):
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    return removed


def _is_release(folder: Path) -> bool:
    return (folder / "crds").is_dir() or bool(_charts(folder))


# --- a git clone of the upstream repository -------------------------------------------------------

# Files of a chart folder the catalogue reads (CRDs in its crds/ folder as well).
CHART_FILES = ("Chart.yaml", "values.yaml", "values.schema.json")


def _git(repo: Path, *args: str) -> bytes:
    result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{repo}: git {' '.join(args)}: {result.stderr.decode().strip()}")
    return result.stdout


def _git_files(repo: Path, commit: str, folder: str) -> dict[str, str]:
    """path -> mode of the files directly in a folder at the commit (empty when there is none)."""
    listing = _git(repo, "ls-tree", "-z", commit, "--", f"{folder}/")
    files = {}
    for item in listing.split(b"\0"):
        if item:
            meta, path = item.decode().split("\t", 1)
            mode, kind, _ = meta.split()
            if kind == "blob":
                files[path] = mode
    return files


def export_from_git(repo: Path, tag: str, paths: dict[str, Any], target: Path) -> str:
    """Copy the release's files from the clone at the tag into target, at their upstream paths:
    the CRD folder of `paths`, and of each chart folder its CHART_FILES and crds/*.yaml. Returns the
    commit. Symbolic links are skipped (a chart's link to a CRD folder elsewhere in the repository:
    that folder is read itself, as `crds`)."""
    commit = _git(repo, "rev-parse", "--verify", f"{tag}^{{commit}}").decode().strip()
    crd_folders = [paths["crds"]] if paths.get("crds") else []
    crd_folders += [f"{chart}/crds" for chart in paths.get("charts", {}).values()]
    wanted: dict[str, str] = {}
    for folder in crd_folders:
        wanted.update(
            {p: m for p, m in _git_files(repo, commit, folder).items() if p.endswith((".yaml", ".yml"))}
        )
    for chart in paths.get("charts", {}).values():
        present = _git_files(repo, commit, chart)
        wanted.update({p: present[p] for p in (f"{chart}/{name}" for name in CHART_FILES) if p in present})
    for path, mode in sorted(wanted.items()):
        if mode == "120000":
            continue
        destination = target / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(_git(repo, "show", f"{commit}:{path}"))
    return commit


def find_releases(source: Path | None, args: argparse.Namespace) -> list[Release]:
    def make(project: str, version: str, root: Path) -> Release:
        known = PROJECTS.get(project, {})
        repository = args.repository or known.get("repository")
        license_id = args.license or known.get("license")
        if not repository or not license_id:
            raise SystemExit(f"{project}: unknown project: give --repository and --license")
        tag = args.tag or (version if version.startswith("v") else f"v{version}")
        paths = known.get("paths", {})
        return Release(project, version, root, tag, repository, license_id, paths, args.keep_chart_versions)

    if args.git:
        if source is not None:
            raise SystemExit("give SOURCE_DIR or --git, not both")
        if not (args.project and args.version):
            raise SystemExit("--git needs --project and --version")
        if not PROJECTS.get(args.project, {}).get("paths"):
            raise SystemExit(f"{args.project}: not in PROJECTS: its upstream paths are unknown")
        return [make(args.project, args.version, Path())]
    if source is None:
        raise SystemExit("give SOURCE_DIR (or --git REPO); see --help")
    if args.project or args.version:
        if not (args.project and args.version):
            raise SystemExit("--project and --version go together")
        if not _is_release(source):
            raise SystemExit(f"{source}: no crds/ folder and no <chart>/Chart.yaml (see --help)")
        return [make(args.project, args.version, source)]
    releases = [
        make(version_dir.parent.name, version_dir.name, version_dir)
        for version_dir in sorted(source.glob("*/*"))
        if version_dir.is_dir() and _is_release(version_dir)
        if not args.only or version_dir.parent.name in args.only
    ]
    if not releases:
        raise SystemExit(f"{source}: no <project>/<version>/ release folder found (see --help)")
    if args.tag or args.repository or args.license:
        raise SystemExit("--tag, --repository and --license need --project and --version")
    return releases


def convert(release: Release, out: Path) -> None:
    files = build(release)
    removed = write_release(out, release, files)
    size = sum(len(text.encode()) for text in files.values())
    print(f"{release.project}/{release.version}: {len(files)} files, {size} bytes", end="")
    print(f" (removed {', '.join(removed)})" if removed else "")


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="refresh_schemas.py",
        description=__doc__.split("\n\n")[0],
        epilog=HELP_LAYOUT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("source", type=Path, metavar="SOURCE_DIR", nargs="?")
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="catalogue folder (default: schemas/ of this repository)",
    )
    parser.add_argument("--only", action="append", metavar="PROJECT", help="convert only this project")
    parser.add_argument(
        "--git", type=Path, metavar="REPO", help="read the release from this git clone at its tag"
    )
    parser.add_argument("--project", help="SOURCE_DIR is one release of this project (e.g. kueue)")
    parser.add_argument("--version", help="that release's version, the catalogue folder name (e.g. 0.19.2)")
    parser.add_argument("--tag", help="upstream git tag (default: the version, with a leading v)")
    parser.add_argument("--repository", help="upstream repository URL (known projects have one)")
    parser.add_argument("--license", help="SPDX license id (known projects have one)")
    parser.add_argument(
        "--keep-chart-versions",
        action="store_true",
        help="record Chart.yaml's version/appVersion as they are, even if not the release's version",
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.source is not None and not args.source.is_dir():
        parser.error(f"{args.source} is not a folder")
    if args.git is not None and not args.git.is_dir():
        parser.error(f"{args.git} is not a folder")
    for release in find_releases(args.source, args):
        if args.git is None:
            convert(release, args.out)
            continue
        with tempfile.TemporaryDirectory(prefix="refresh-schemas-") as tmp:
            release.root = Path(tmp)
            release.upstream_layout = True
            release.commit = export_from_git(args.git, release.tag, release.paths, release.root)
            convert(release, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
