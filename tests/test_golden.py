"""Golden copies of everything rendered for each example inventory (tests/golden/<inventory>/).

A change to a template or the model shows up here as a reviewable diff. Regenerate with
`UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py` and review `git diff tests/golden`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from tests.conftest import INVENTORIES, example_inventories

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("example", example_inventories())
def test_rendered_files_match_golden_copies(example: str) -> None:
    files = render_files(load_cluster(INVENTORIES / example))
    directory = GOLDEN / example
    if os.environ.get("UPDATE_GOLDEN"):
        shutil.rmtree(directory, ignore_errors=True)
        for rel, content in files.items():
            (directory / rel).parent.mkdir(parents=True, exist_ok=True)
            (directory / rel).write_text(content)
    stored = {
        str(p.relative_to(directory)): p.read_text() for p in sorted(directory.rglob("*")) if p.is_file()
    }
    assert sorted(stored) == sorted(files), "files added or missing: run with UPDATE_GOLDEN=1 and review"
    for rel, content in files.items():
        assert content == stored[rel], f"{example}/{rel} differs from its golden copy"
