"""The release table: versions an inventory may target, what each release supports, and the
upgrade windows; and how a wrong `slurm.version` is reported."""

from __future__ import annotations

import re

import pytest

from gpucluster.layers import load_cluster
from gpucluster.model.releases import (
    PROVEN,
    RELEASES,
    SlurmVersion,
    configless_serves_topology_yaml,
    release,
    stepping_stones,
    upgrade_path,
)
from tests.conftest import SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory, run_cli

KNOWN = "22.05, 23.02, 23.11, 24.05, 24.11, 25.05, 25.11, 26.05"


def with_version(inventories: InventoryFactory, line: str) -> str:
    cluster = SMALL_CLUSTER.replace('version: "22.05"', line)
    return str(inventories.make(SMALL_HOSTS, cluster))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('version: "99.99"', f"Slurm 99.99 is not a release gpucluster knows ({KNOWN})"),
        ('version: "23.03"', f"Slurm 23.03 is not a release gpucluster knows ({KNOWN})"),
        ('version: "21.08"', f"Slurm 21.08 is not a release gpucluster knows ({KNOWN})"),
        ('version: "25.5"', "'25.5' is not a Slurm version (YY.MM or YY.MM.P"),
        # YAML reads these as numbers: 26.10 would even lose its zero.
        ("version: 25.11", 'YAML read 25.11 as a number, not a Slurm release; quote it: version: "25.11"'),
        ("version: 24.10", 'quote it: version: "24.10"'),
    ],
)
def test_a_version_gpucluster_does_not_know_is_refused_at_its_line(
    inventories: InventoryFactory, line: str, message: str
) -> None:
    directory = with_version(inventories, line)
    proc = run_cli("validate", directory)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert re.search(rf"cluster\.yml:4: cluster\.slurm\.version: .*{re.escape(message)}", proc.stderr), (
        proc.stderr
    )


def test_an_unquoted_known_release_gets_the_same_error_as_an_unknown_one(
    inventories: InventoryFactory,
) -> None:
    proc = run_cli("validate", with_version(inventories, "version: 26.05"))
    assert proc.returncode == 2
    assert 'quote it: version: "26.05"' in proc.stderr


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05", "25.05.2", "26.05.5"])
def test_known_releases_and_maintenance_versions_validate(
    inventories: InventoryFactory, version: str
) -> None:
    cluster = load_cluster(with_version(inventories, f'version: "{version}"'))
    assert str(cluster.version) == version
    assert cluster.release.name == version[:5]


def test_the_proven_releases_are_the_debian_ones() -> None:
    assert PROVEN == ("22.05", "24.11", "26.05")
    suites = {name: RELEASES[name].packaging.debian_suite for name in PROVEN}
    assert suites == {"22.05": "bookworm", "24.11": "trixie", "26.05": "forky"}
    assert all(RELEASES[name].packaging.debian_suite is None for name in RELEASES if name not in PROVEN)


def test_facts_that_change_what_is_rendered() -> None:
    assert release("22.05").rest_api.url_version == "v0.0.38"
    assert release("24.11").rest_api.data_parser == "data_parser/v0.0.42"
    assert release("26.05").rest_api.data_parser == "data_parser/v0.0.44"
    assert [r for r in RELEASES if RELEASES[r].reconfigure_node_changes] == [
        "24.11",
        "25.05",
        "25.11",
        "26.05",
    ]
    assert [r for r in RELEASES if RELEASES[r].exclusive_key] == ["26.05"]
    assert not release("22.05").packaging.daemons_run_as_slurm
    assert release("26.05").packaging.slurmctld_pid_file == "/run/slurmctld/slurmctld.pid"
    assert not release("26.05").packaging.pmix and release("24.11").packaging.pmix
    assert [r for r in RELEASES if not RELEASES[r].sackd] == ["22.05", "23.02"]


def test_configless_topology_yaml_needs_the_maintenance_release_that_serves_it() -> None:
    assert not configless_serves_topology_yaml(SlurmVersion.parse("25.05"))
    assert not configless_serves_topology_yaml(SlurmVersion.parse("25.05.1"))
    assert configless_serves_topology_yaml(SlurmVersion.parse("25.05.2"))
    assert configless_serves_topology_yaml(SlurmVersion.parse("26.05"))
    assert not configless_serves_topology_yaml(SlurmVersion.parse("24.11"))


def test_upgrade_windows() -> None:
    assert upgrade_path("24.11", "26.05") is None
    assert upgrade_path("22.05", "23.11") is None
    # 24.11 reads 23.02, 23.11 and 24.05: from 22.05 one release in between.
    assert upgrade_path("22.05", "24.11") == ("23.11",)
    assert stepping_stones("22.05", "24.11") == ("23.02", "23.11")
    assert upgrade_path("22.05", "26.05") == ("23.11", "25.05")
    with pytest.raises(ValueError, match=r"Slurm cannot go from 26\.05 back to 24\.11"):
        upgrade_path("26.05", "24.11")
    with pytest.raises(ValueError, match="back"):
        upgrade_path("24.11", "24.11")
