"""Markdown reference of every inventory key, generated from the model (`gpucluster schema --markdown`)."""

from __future__ import annotations

from typing import Any

from gpucluster.layers import full_model


def _type_of(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in prop:
        return " or ".join(_type_of(p, defs) for p in prop["anyOf"])
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type_of(prop.get('items', {}), defs)}"
    if kind == "object" and "additionalProperties" in prop and isinstance(prop["additionalProperties"], dict):
        return f"map of name -> {_type_of(prop['additionalProperties'], defs)}"
    return str(kind)


def _default(prop: dict[str, Any], required: bool) -> str:
    if required:
        return "required"
    if "default" in prop:
        value = prop["default"]
        return f"`{value}`" if value not in (None, [], {}) else "none"
    return "optional"


def markdown() -> str:
    schema = full_model().model_json_schema()
    defs: dict[str, Any] = schema.get("$defs", {})
    lines = [
        "# Inventory reference (`group_vars/all/cluster.yml`)",
        "",
        "Generated from the model by `gpucluster schema --markdown`; do not edit by hand.",
        "Each key says what changing it on a running cluster requires.",
        "",
    ]
    order = ["ClusterSpec", *sorted(name for name in defs if name != "ClusterSpec")]
    for name in order:
        model = defs[name]
        lines += [f"## {name}", ""]
        if model.get("description"):
            lines += [model["description"].strip(), ""]
        lines += ["| key | type | default | meaning | changing it needs |", "|---|---|---|---|---|"]
        required = set(model.get("required", []))
        for key, prop in model.get("properties", {}).items():
            meaning = (prop.get("description") or "").replace("|", "\\|").replace("\n", " ")
            update = prop.get("x-update", "")
            lines.append(
                f"| `{key}` | {_type_of(prop, defs)} | {_default(prop, key in required)} | {meaning} | {update} |"
            )
        lines.append("")
    return "\n".join(lines)
