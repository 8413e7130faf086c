"""Everything gpucluster writes as YAML is plain: no anchors, no aliases (people and GitOps tools
read and diff these files; an alias hides a value from whoever reads its second place)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpucluster import yamlout
from gpucluster.lab.inventory import write_inventory
from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from tests.conftest import INVENTORIES, example_inventories


def anchors_and_aliases(text: str) -> list[str]:
    found = []
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            found.append(f"alias *{event.anchor} at line {event.start_mark.line + 1}")
        elif getattr(event, "anchor", None):
            found.append(f"anchor &{event.anchor} at line {event.start_mark.line + 1}")
    return found


def yaml_texts(files: dict[str, str]) -> dict[str, str]:
    texts = {path: text for path, text in files.items() if path.endswith((".yaml", ".yml"))}
    # YAML embedded in Helm values (Kueue's controller configuration) is YAML we write too.
    for path, text in list(texts.items()):
        for doc in yaml.safe_load_all(text):
            texts.update(_embedded(path, doc))
    return texts


def _embedded(path: str, node: object, where: str = "") -> dict[str, str]:
    found: dict[str, str] = {}
    if isinstance(node, dict):
        for key, value in node.items():
            found.update(_embedded(path, value, f"{where}.{key}"))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.update(_embedded(path, value, f"{where}[{index}]"))
    elif isinstance(node, str) and "\n" in node and where.endswith(("Yaml", ".yaml")):
        found[f"{path}:{where}"] = node
    return found


@pytest.mark.parametrize("example", example_inventories())
def test_rendered_yaml_has_no_anchors_or_aliases(example: str) -> None:
    files = render_files(load_cluster(INVENTORIES / example))
    texts = yaml_texts(files)
    assert texts, "every example renders YAML (accounts.yaml at least)"
    problems = {path: found for path, text in texts.items() if (found := anchors_and_aliases(text))}
    assert not problems, problems


def test_lab_inventory_files_are_plain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCLUSTER_LAB_DIR", str(tmp_path / "state"))
    target = write_inventory(INVENTORIES / "lab", load_cluster(INVENTORIES / "lab"))
    for path in target.rglob("*.yml"):
        assert not anchors_and_aliases(path.read_text()), path


def test_the_writer_expands_repeated_objects() -> None:
    shared = {"quota": -1, "limit": -1}
    text = yamlout.dump({"cpu": shared, "memory": shared})
    assert not anchors_and_aliases(text)
    assert yaml.safe_load(text) == {"cpu": shared, "memory": shared}
    # The check itself sees what PyYAML's default dumper would have written.
    assert anchors_and_aliases(yaml.safe_dump({"cpu": shared, "memory": shared}))
