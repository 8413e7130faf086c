"""Validate custom resources the way the API server does with a CRD's structural schema:
defaults applied, then openAPIV3Schema (types, required, enums, unknown fields) and the
`x-kubernetes-validations` CEL rules (evaluated with cel-python; transition rules, which
compare with `oldSelf`, only run on updates and are skipped here).

The schemas come from the repository's catalogue, schemas/<project>/<version>/ (made from the
upstream release files by scripts/refresh_schemas.py; see schemas/README.md)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import yaml

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "schemas"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when there: the catalogue is ~1 MB

# CRD folders of the catalogue for the pinned versions (gpucluster/k8s/model.py Versions defaults).
CRD_DIRS = [
    "kueue/0.19.2/crds",
    "kai-scheduler/v0.17.0/crds",
    "slinky/1.2.1/crds",
    "gpu-operator/v26.7.0/crds",
    "dra-driver-nvidia-gpu/0.4.1/crds",
    "network-operator/26.4.1/crds",
    "volcano/1.15.1/crds",
]


def catalogue(relpath: str) -> Path:
    """A file or folder of the schema catalogue."""
    path = SCHEMAS / relpath
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing from the schema catalogue: add the version with "
            "scripts/refresh_schemas.py (see schemas/README.md)"
        )
    return path


@dataclass
class CrdVersion:
    group: str
    kind: str
    version: str
    scope: str
    schema: dict[str, Any]
    deprecated: bool = False


@cache
def crd_index() -> dict[tuple[str, str], CrdVersion]:
    """(apiVersion, kind) -> schema of every served version of every pinned CRD."""
    index: dict[tuple[str, str], CrdVersion] = {}
    for folder in CRD_DIRS:
        for path in sorted(catalogue(folder).glob("*.yaml")):
            crd = yaml.load(path.read_text(), Loader=LOADER)
            # The catalogue keeps served versions only.
            for name, version in crd["versions"].items():
                key = (f"{crd['group']}/{name}", crd["kind"])
                # Two charts ship the same CRD (ComputeDomain): the DRA driver's is the one installed.
                if key in index and "dra-driver" not in folder:
                    continue
                index[key] = CrdVersion(
                    crd["group"],
                    crd["kind"],
                    name,
                    crd["scope"],
                    version["openAPIV3Schema"],
                    bool(version.get("deprecated")),
                )
    return index


def _strict(schema: Any) -> Any:
    """JSON Schema of a structural schema, refusing unknown fields (the API server's strict field
    validation, which server-side apply uses)."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items() if k not in ("default", "example")}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    if schema.get("nullable") and "type" in schema:
        out["type"] = [schema["type"], "null"]
    return out


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Fill in `default`s as the API server does before validation."""
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key, sub in props.items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
        for key, item in value.items():
            if key in props:
                value[key] = apply_defaults(props[key], item)
            elif isinstance(schema.get("additionalProperties"), dict):
                value[key] = apply_defaults(schema["additionalProperties"], item)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], item) for item in value]
    return value


@cache
def _program(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule))


@dataclass
class CelResult:
    evaluated: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)


def _walk(schema: dict[str, Any], value: Any, path: str) -> Iterator[tuple[dict[str, Any], Any, str]]:
    yield schema, value, path
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key, item in value.items():
            if key in props:
                yield from _walk(props[key], item, f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                yield from _walk(schema["additionalProperties"], item, f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from _walk(schema["items"], item, f"{path}[{index}]")


def check_cel(schema: dict[str, Any], value: Any) -> CelResult:
    result = CelResult()
    for node_schema, node, path in _walk(schema, value, ""):
        for rule in node_schema.get("x-kubernetes-validations", []):
            text = rule["rule"]
            if "oldSelf" in text:
                result.skipped += 1
                continue
            outcome = _program(text).evaluate({"self": celpy.json_to_cel(node)})
            result.evaluated += 1
            if not (isinstance(outcome, celpy.celtypes.BoolType) and bool(outcome)):
                message = rule.get("message", text)
                result.errors.append(f"{path or '.'}: {message} (rule: {text}; got {outcome!r})")
        list_type = node_schema.get("x-kubernetes-list-type")
        if isinstance(node, list) and list_type in ("set", "map"):
            keys = node_schema.get("x-kubernetes-list-map-keys", [])
            seen = [tuple(item.get(k) for k in keys) if list_type == "map" else item for item in node]
            if len({yaml.safe_dump(s) for s in seen}) != len(seen):
                result.errors.append(f"{path}: duplicate entries in a list of type {list_type}")
    return result


def validate_custom_resource(obj: dict[str, Any]) -> CelResult:
    """Raise AssertionError listing what the API server would refuse; return CEL statistics."""
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    crd = crd_index().get(key)
    if crd is None:
        raise AssertionError(f"no pinned CRD serves {key[0]} {key[1]}")
    namespaced = "namespace" in obj.get("metadata", {})
    if namespaced != (crd.scope == "Namespaced"):
        raise AssertionError(
            f"{key[1]} is {crd.scope}, but metadata.namespace is {'set' if namespaced else 'missing'}"
        )
    value = apply_defaults(crd.schema, copy.deepcopy(obj))
    schema = _strict(crd.schema)
    # metadata is validated by the API server itself, not by the CRD schema.
    schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    errors = sorted(
        jsonschema.Draft7Validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path)
    )
    if errors:
        raise AssertionError(
            "; ".join(f"{'.'.join(map(str, e.absolute_path)) or '.'}: {e.message}" for e in errors)
        )
    result = check_cel(crd.schema, value)
    if result.errors:
        raise AssertionError("; ".join(result.errors))
    return result
