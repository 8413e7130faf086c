"""The inventories `gpucluster import` makes of the site-shaped configurations (tests/import_sites)
render files the real daemons of their release accept: each starts a throwaway slurmctld (and
slurmdbd) of that release that logs no error and shows the imported switch tree and blocks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from gpucluster.slurm_import.adopt import import_cluster, write_inventory
from gpucluster.trial.slurmctld import (
    TrialUnavailable,
    expected_blocks,
    expected_topology,
    installed_version,
    run_trial,
)
from tests.unit.test_import_sites import SITES, site_files

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        (os.geteuid() != 0 or installed_version() is None) and not os.environ.get("CI"),
        reason="needs root and Debian slurm-wlm (CI has both)",
    ),
]


@pytest.mark.parametrize("name", sorted(SITES))
def test_an_imported_site_starts_a_real_slurmctld_of_its_release(name: str, tmp_path: Path) -> None:
    result = write_inventory(import_cluster(site_files(name), SITES[name].version), tmp_path / name)
    cluster = load_cluster(tmp_path / name)
    try:
        trial = run_trial(cluster, render_files(cluster, only=["slurm"]))
    except TrialUnavailable as exc:
        pytest.skip(f"Slurm {cluster.release.name} not here: {exc}")
    assert trial.started, "\n".join(trial.log[-30:])
    assert trial.bad_lines == [], "\n".join(trial.bad_lines)
    assert trial.topology == expected_topology(cluster)
    assert trial.blocks == expected_blocks(cluster)
    assert result.written_to is not None
