"""The JSON Schema and the Markdown reference describe every key, and the committed reference is current."""

from __future__ import annotations

import json
from typing import Any

from gpucluster.reference import markdown
from tests.conftest import REPO, run_cli


def walk_properties(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for model_name, model in schema.get("$defs", {}).items():
        for key, prop in model.get("properties", {}).items():
            found.append((model_name, key, prop))
    return found


def test_schema_command_prints_a_json_schema_with_descriptions_and_update_policies() -> None:
    proc = run_cli("schema")
    assert proc.returncode == 0
    schema = json.loads(proc.stdout)
    assert schema["$schema"].startswith("https://json-schema.org/")
    for model_name, key, prop in walk_properties(schema):
        assert prop.get("description"), f"{model_name}.{key} has no description"
        assert prop.get("x-update"), f"{model_name}.{key} does not say what changing it requires"


def test_committed_reference_is_current() -> None:
    committed = (REPO / "docs" / "inventory-reference.md").read_text()
    assert committed == markdown(), "run: gpucluster schema --markdown > docs/inventory-reference.md"
