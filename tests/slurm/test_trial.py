"""Every example that targets the installed Slurm (22.05) starts a real slurmctld cleanly, and the
topology it reports equals the inventory's switch tree."""

from __future__ import annotations

import copy
import json
import os
import textwrap

import pytest
import yaml
from jsonschema import Draft202012Validator

from gpucluster.layers import load_cluster
from gpucluster.modelbase import Owner
from gpucluster.render import render_files
from gpucluster.trial.slurmctld import TrialUnavailable, expected_topology, installed_version, run_trial
from tests.conftest import (
    INVENTORIES,
    REPO,
    SMALL_CLUSTER,
    SMALL_HOSTS,
    InventoryFactory,
    example_inventories,
    run_cli,
)

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        (os.geteuid() != 0 or installed_version() is None) and not os.environ.get("CI"),
        reason="needs root and Debian slurm-wlm (CI has both)",
    ),
]

INSTALLED = installed_version()
TARGETS = {name: load_cluster(INVENTORIES / name).version for name in example_inventories()}
RUNNABLE = [name for name, version in TARGETS.items() if version == INSTALLED]


def test_the_examples_include_ones_the_installed_slurm_can_prove() -> None:
    assert {"lab", "superpod"} <= set(RUNNABLE)


@pytest.mark.parametrize("example", RUNNABLE)
def test_example_starts_real_slurmctld_without_errors(example: str) -> None:
    cluster = load_cluster(INVENTORIES / example)
    result = run_trial(cluster, render_files(cluster))
    assert result.started, "\n".join(result.log[-30:])
    assert result.bad_lines == [], "\n".join(result.bad_lines)
    assert result.topology == expected_topology(cluster)
    assert result.topology, "scontrol show topology listed no switches"
    # Slurm knows exactly the hosts it owns (superpod's SU4 belongs to Kubernetes).
    slurm = cluster.owned_by(Owner.SLURM)
    for partition in slurm.partitions:
        assert f"PartitionName={partition} " in result.partitions
    assert result.nodes.count("NodeName=") == len(slurm.hosts)


def test_other_targets_are_refused_not_passed() -> None:
    nvl72 = load_cluster(INVENTORIES / "nvl72")
    with pytest.raises(TrialUnavailable, match=r"target Slurm is 25\.05"):
        run_trial(nvl72, render_files(nvl72))


def test_an_inventory_without_bare_metal_slurm_is_refused_not_passed() -> None:
    proc = run_cli("trial", "inventories/azure-dev")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "bare-metal Slurm owns no host of this inventory" in proc.stderr


def test_trial_catches_a_config_slurm_rejects(inventories: InventoryFactory) -> None:
    data = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))
    bad = copy.deepcopy(data)
    # A select plugin parameter Slurm 22.05 does not know: the daemon must refuse it.
    bad["cluster"]["slurm"]["extra"] = {"SelectTypeParameters": "CR_Bogus"}
    cluster = load_cluster(inventories.make(SMALL_HOSTS, yaml.safe_dump(bad)))
    result = run_trial(cluster, render_files(cluster))
    assert not result.ok
    assert any("fatal" in line.lower() or "error" in line.lower() for line in result.bad_lines + result.log)


def test_cli_trial_reports_success_for_the_lab() -> None:
    proc = run_cli("trial", "inventories/lab")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "slurmctld started; 0 error line(s); topology matches the inventory" in proc.stdout


def test_cli_trial_json_matches_its_schema() -> None:
    proc = run_cli("trial", "--json", "inventories/lab")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    schema = json.loads((REPO / "gpucluster" / "output_schemas" / "trial.schema.json").read_text())
    Draft202012Validator(schema).validate(doc)
    assert doc["ok"] and doc["started"] and doc["topology"]["matches"] and doc["error_lines"] == []
