"""Every example with bare-metal Slurm starts a real slurmctld (and slurmdbd) of its own release
cleanly - the host's Slurm when it is that release, else the lab image of the release's Debian
suite - and the topology it reports equals the inventory's switch tree and NVLink blocks."""

from __future__ import annotations

import copy
import json
import os
import re
import textwrap

import pytest
import yaml
from jsonschema import Draft202012Validator

from gpucluster.layers import load_cluster
from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster
from gpucluster.rendering import render_files
from gpucluster.trial.slurmctld import (
    TrialResult,
    TrialUnavailable,
    expected_blocks,
    expected_topology,
    installed_version,
    run_trial,
)
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

RUNNABLE = [
    name for name in example_inventories() if load_cluster(INVENTORIES / name).hosts_owned_by(Owner.SLURM)
]


def test_the_examples_with_bare_metal_slurm_target_releases_with_real_daemons() -> None:
    assert set(RUNNABLE) == {"hybrid-aws", "lab", "lab-power", "nvl72", "shared-gpus", "superpod"}
    assert {load_cluster(INVENTORIES / name).release.name for name in RUNNABLE} == {"26.05"}


def _proven(cluster: Cluster) -> TrialResult:
    result = run_trial(cluster, render_files(cluster))
    assert result.started, "\n".join(result.log[-30:])
    assert result.bad_lines == [], "\n".join(result.bad_lines)
    assert result.topology == expected_topology(cluster)
    assert result.blocks == expected_blocks(cluster)
    # Slurm knows exactly the hosts it owns (superpod's SU4 belongs to Kubernetes).
    slurm = cluster.owned_by(Owner.SLURM)
    for partition in slurm.partitions:
        assert f"PartitionName={partition} " in result.partitions
    assert result.nodes.count("NodeName=") == len(slurm.hosts)
    return result


@pytest.mark.parametrize("example", RUNNABLE)
def test_example_starts_real_slurmctld_of_its_release_without_errors(example: str) -> None:
    cluster = load_cluster(INVENTORIES / example)
    result = _proven(cluster)
    if cluster.switches or cluster.blocks:
        assert result.topology or result.blocks, "scontrol show topology listed nothing"
    if example == "nvl72":
        # topology.yaml with both: the blocks (the default) and the switch tree, by name.
        assert len(result.blocks) == 4 and result.topology


@pytest.mark.parametrize("release", ["24.11", "22.05"])
def test_the_lab_inventory_at_the_older_releases_starts_their_slurmctld(
    release: str, inventories: InventoryFactory
) -> None:
    lab = (INVENTORIES / "lab" / "group_vars" / "all" / "cluster.yml").read_text()
    hosts = (INVENTORIES / "lab" / "hosts.yml").read_text()
    cluster = load_cluster(inventories.make(hosts, lab.replace('version: "26.05"', f'version: "{release}"')))
    assert cluster.release.name == release
    _proven(cluster)


@pytest.mark.parametrize("release", ["26.05", "24.11"])
def test_shared_gpus_start_slurmctld_with_their_shards_and_mig_instances(
    release: str, inventories: InventoryFactory
) -> None:
    """inventories/shared-gpus (L40S shards, H100 and H200 MIG instances) at each release that runs
    here with real daemons: slurmctld takes every node with its Gres as rendered."""
    text = (INVENTORIES / "shared-gpus" / "group_vars" / "all" / "cluster.yml").read_text()
    hosts = (INVENTORIES / "shared-gpus" / "hosts.yml").read_text()
    cluster = load_cluster(inventories.make(hosts, text.replace('version: "26.05"', f'version: "{release}"')))
    result = _proven(cluster)
    nodes = re.sub(r"\((S|IDX):[^)]*\)", "", result.nodes)  # sockets, where slurmctld knows them
    for gres in ("gpu:1g.10gb:56", "gpu:3g.71gb:8,gpu:1g.18gb:28", "gpu:l40s:8,shard:64"):
        assert f"Gres={gres} " in nodes, nodes[:2000]


# The lab's GPU nodes with NVIDIA's driver: the monitoring layer adds dcgm-exporter's job mapping
# to slurm.conf, a Prolog and an Epilog beside the health check's Prolog.
NVIDIA_DRIVER = (
    '      gpus: {model: h100, count: 8, devices: "/dev/nvidia[0-7]", memory_gb: 80}\n',
    '      gpus: {model: h100, count: 8, devices: "/dev/nvidia[0-7]", memory_gb: 80}\n'
    "      software:\n"
    '        driver: {source: nvidia, version: "580.95.05",\n'
    '                 repository: {url: "https://mirror.example/cuda/", key: nvidia.asc}}\n',
)


@pytest.mark.parametrize(
    ("release", "edits", "job_scripts"),
    [
        ("24.11", [NVIDIA_DRIVER, ("    dcgm_exporter: false\n", "")], 3),
        # One Prolog and one Epilog line only: the health check's Prolog gives way.
        (
            "22.05",
            [
                NVIDIA_DRIVER,
                ("    dcgm_exporter: false\n", "    dcgm_exporter: true\n"),
                ("    health: {interval: 10}\n", "    health: {interval: 10, prolog: false}\n"),
            ],
            2,
        ),
    ],
    ids=["24.11", "22.05"],
)
def test_dcgm_exporters_job_mapping_lines_start_the_releases_slurmctld(
    release: str, edits: list[tuple[str, str]], job_scripts: int, inventories: InventoryFactory
) -> None:
    lab = (INVENTORIES / "lab" / "group_vars" / "all" / "cluster.yml").read_text()
    lab = lab.replace('version: "26.05"', f'version: "{release}"')
    for old, new in edits:
        assert old in lab, old
        lab = lab.replace(old, new)
    cluster = load_cluster(inventories.make((INVENTORIES / "lab" / "hosts.yml").read_text(), lab))
    conf = render_files(cluster)["slurm/slurm.conf"]
    lines = [line for line in conf.splitlines() if line.startswith(("Prolog=", "Epilog="))]
    assert len(lines) == job_scripts and "Prolog=/usr/local/sbin/gpucluster-dcgm-job-prolog" in lines
    _proven(cluster)


def test_a_release_without_real_daemons_here_is_refused_not_passed(inventories: InventoryFactory) -> None:
    lab = (INVENTORIES / "lab" / "group_vars" / "all" / "cluster.yml").read_text()
    hosts = (INVENTORIES / "lab" / "hosts.yml").read_text()
    cluster = load_cluster(inventories.make(hosts, lab.replace('version: "26.05"', 'version: "25.11"')))
    with pytest.raises(TrialUnavailable, match=r"no real Slurm 25\.11 daemons here"):
        run_trial(cluster, render_files(cluster))


def test_an_inventory_without_bare_metal_slurm_is_refused_not_passed() -> None:
    proc = run_cli("trial", "inventories/azure-dev")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "bare-metal Slurm owns no host of this inventory" in proc.stderr


def test_trial_catches_a_config_slurm_rejects(inventories: InventoryFactory) -> None:
    data = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))
    bad = copy.deepcopy(data)
    # A select plugin parameter Slurm 22.05 does not know: the daemon must refuse it.
    bad["cluster"]["slurm"]["select_type_parameters"] = ["CR_Bogus"]
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
