"""The 2026 fleet of a newcomer (tests/fleet.py, issue 37) proven by real daemons: two partitions
limited to tenants (slurmctld looks their accounts up in slurmdbd), the partitions placing jobs by
different topologies (26.05), a site's power-saving programs and gpucluster's own health check. The
trial seeds its slurmdbd with the inventory's accounts, users and QOS as the slurm_accounts role
does, installs gpucluster's programs, stands in for the site's, and the daemons log no error, on
26.05 and on 24.11 (one topology plugin). Before, the trial failed every such inventory (13 error
lines: `accounts_list_build: No association for account research`, `power_save program ... not
found`)."""

from __future__ import annotations

import os

import pytest

from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from gpucluster.trial.slurmctld import expected_blocks, expected_topology, installed_version, run_trial
from tests.conftest import InventoryFactory
from tests.fleet import FLEET_2026_CLUSTER, FLEET_2026_HOSTS, FLEET_2026_ON_24_11, edit

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        (os.geteuid() != 0 or installed_version() is None) and not os.environ.get("CI"),
        reason="needs root and Debian slurm-wlm (CI has both)",
    ),
]

# The site's power saving (its programs, which no trial machine has) and gpucluster's health check.
SITE_PROGRAMS = {
    "    login: [login01, login02]\n": (
        "    login: [login01, login02]\n"
        "    power_save: {suspend_program: /opt/site/sbin/node-suspend, resume_program: /opt/site/sbin/node-resume,\n"
        "                 suspend_time: 1800}\n"
        "    health: {interval: 300}\n"
    )
}


@pytest.mark.parametrize("release", ["26.05", "24.11"])
def test_the_2026_fleet_passes_its_trial(release: str, inventories: InventoryFactory) -> None:
    edits = {**SITE_PROGRAMS, **(FLEET_2026_ON_24_11 if release == "24.11" else {})}
    cluster = load_cluster(
        inventories.make(FLEET_2026_HOSTS, edit(FLEET_2026_CLUSTER, edits), name="fleet26")
    )
    assert cluster.release.name == release
    result = run_trial(cluster, render_files(cluster, only=["slurm"]))
    assert result.started, "\n".join(result.log[-30:])
    assert result.bad_lines == [], "\n".join(result.bad_lines)
    assert result.topology == expected_topology(cluster) and result.topology
    assert result.blocks == expected_blocks(cluster)
    # The tenants' accounts and users were there for the partitions limited to them.
    seeded = "\n".join(line for line in result.log if line.startswith("sacctmgr:"))
    for name in ("research", "product", "serving", "alice", "bob", "carol", "interactive"):
        assert name in seeded, seeded
    assert "AllowAccounts=research,product" in result.partitions
    # The site's programs were stood in for, and said so.
    for program in ("SuspendProgram=/opt/site/sbin/node-suspend", "ResumeProgram=/opt/site/sbin/node-resume"):
        assert (
            f"trial: {program} is the site's program: an executable stand-in that only logs ran in its place"
            in (result.notes)
        ), result.notes
