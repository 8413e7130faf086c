"""The Molecule scenarios' inventories are valid: a model change that refuses one is found here,
in seconds, rather than by its scenario minutes into the suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.layers import load_cluster
from tests.conftest import REPO

MOLECULE_INVENTORIES = sorted(p for p in (REPO / "molecule" / "inventory").iterdir() if p.is_dir())


@pytest.mark.parametrize("inventory", MOLECULE_INVENTORIES, ids=[p.name for p in MOLECULE_INVENTORIES])
def test_a_scenario_inventory_is_valid(inventory: Path) -> None:
    load_cluster(inventory)
