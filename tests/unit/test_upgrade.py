"""A change of slurm.version (issue 22): refused when Slurm cannot make it (a downgrade, a jump past
the new release's window, naming the releases to step through), otherwise the upgrade's ordered
steps, each with what it waits for, on the fleet a newcomer writes first (tests/fleet.py)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from gpucluster.changes.moves import Action
from gpucluster.changes.plan import make_plan, plan_schema, text_lines
from gpucluster.changes.records import Plan
from gpucluster.changes.upgrade import batches
from gpucluster.layers import load_cluster
from gpucluster.model.base import Update
from gpucluster.model.releases import RELEASES, upgrade_refusal
from tests.conftest import InventoryFactory, run_cli
from tests.fleet import NEWCOMER_CLUSTER, NEWCOMER_HOSTS, edit
from tests.roles.conftest import load_module

VERSION_LINE = 4  # of cluster.yml in tests/fleet.py's NEWCOMER_CLUSTER


def fleet(inventories: InventoryFactory, name: str, version: str, more: dict[str, str] | None = None) -> Path:
    return inventories.make(
        NEWCOMER_HOSTS,
        edit(NEWCOMER_CLUSTER, {'version: "26.05"': f'version: "{version}"', **(more or {})}),
        name=f"{name}/acme",
    )


def plan_between(
    inventories: InventoryFactory, old: str, new: str, more: dict[str, str] | None = None
) -> Plan:
    result = make_plan(
        load_cluster(fleet(inventories, "old", old)), load_cluster(fleet(inventories, "new", new, more))
    )
    jsonschema.validate(result.as_dict(), plan_schema())
    return result


# --- refused -------------------------------------------------------------------------------------


def test_a_downgrade_is_refused_naming_the_line() -> None:
    assert upgrade_refusal("26.05", "24.11") == (
        "Slurm cannot go back from 26.05 to 24.11: slurmdbd converts the accounting database and "
        "slurmctld rewrites its state for 26.05, and no older release reads them; keep slurm.version "
        "at 26.05 (a backup taken before an upgrade restores only with every daemon stopped, losing "
        "what ran since)"
    )
    # A maintenance version back is a downgrade too.
    assert upgrade_refusal("24.11.6", "24.11.5") is not None


def test_a_jump_past_the_window_names_the_releases_to_step_through() -> None:
    assert upgrade_refusal("22.05", "24.11") == (
        "Slurm 24.11 reads the accounting database and the state of 23.02, 23.11 and 24.05 only, not "
        "22.05's (its slurmdbd stops: the database schema is too old): upgrade to 23.02 or 23.11 first "
        "(each reads 22.05's), then to 24.11"
    )
    # No release reads 22.05 and is read by 26.05: the chain of direct upgrades.
    assert upgrade_refusal("22.05", "26.05") == (
        "Slurm 26.05 reads the accounting database and the state of 24.11, 25.05 and 25.11 only, not "
        "22.05's (its slurmdbd stops: the database schema is too old): upgrade through 23.11, then 25.05 "
        "first (an inventory at each release, applied), then to 26.05"
    )
    assert upgrade_refusal(
        "23.02", "26.05"
    ) is not None and "upgrade to 24.11 first (it reads 23.02's)" in str(upgrade_refusal("23.02", "26.05"))


@pytest.mark.parametrize("old", sorted(RELEASES))
@pytest.mark.parametrize("new", sorted(RELEASES))
def test_every_pair_of_releases_is_an_upgrade_exactly_within_the_window(old: str, new: str) -> None:
    reason = upgrade_refusal(old, new)
    allowed = old == new or (
        RELEASES[new].version > RELEASES[old].version and old in RELEASES[new].upgrades_from
    )
    assert (reason is None) is allowed, (old, new, reason)


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("26.05", "24.11", "Slurm cannot go back from 26.05 to 24.11"),
        ("22.05", "26.05", "upgrade through 23.11, then 25.05 first"),
    ],
)
def test_plan_refuses_with_exit_2_and_the_inventory_line(
    inventories: InventoryFactory, old: str, new: str, words: str
) -> None:
    result = plan_between(inventories, old, new)
    [refused] = result.refused
    assert refused.endswith(f"cluster.yml:{VERSION_LINE}: cluster.slurm.version: {upgrade_refusal(old, new)}")
    assert words in refused
    assert result.upgrade is None
    assert text_lines(result)[0] == f"REFUSED: {refused}"
    proc = run_cli("plan", str(fleet(inventories, "old", old)), str(fleet(inventories, "new", new)))
    assert proc.returncode == 2
    assert words in proc.stderr and proc.stdout.startswith("REFUSED: ")
    doc = run_cli("plan", "--json", str(fleet(inventories, "old", old)), str(fleet(inventories, "new", new)))
    assert doc.returncode == 2 and words in json.loads(doc.stdout)["refused"][0]


# --- the steps -----------------------------------------------------------------------------------


def test_an_upgrade_in_the_window_is_planned_in_slurms_order(inventories: InventoryFactory) -> None:
    result = plan_between(
        inventories,
        "24.11",
        "26.05",
        {
            "    login: [login01]\n": "    login: [login01]\n    upgrade: {batch_size: 16, backup_dir: /srv/backups}\n"
        },
    )
    assert result.refused == [] and result.ends_jobs == []
    upgrade = result.upgrade
    assert upgrade is not None
    assert (str(upgrade.old), str(upgrade.new), upgrade.backup) == (
        "24.11",
        "26.05",
        "/srv/backups/24.11-to-26.05",
    )
    names = [(s.name, s.hosts) for s in upgrade.steps]
    assert [n for n, _ in names] == [
        "prove",
        "pre-checks",
        "backup",
        "slurmdbd",
        "slurmctld (backup)",
        "slurmctld (primary)",
        "slurmctld (backups started)",
        "slurmd batch 1/3",
        "slurmd batch 2/3",
        "slurmd batch 3/3",
        "login and clients",
        "verify",
    ]
    hosts = dict(names)
    assert hosts["backup"] == hosts["slurmdbd"] == ("dbd01",)
    assert hosts["slurmctld (backup)"] == hosts["slurmctld (backups started)"] == ("ctl02",)
    assert hosts["slurmctld (primary)"] == ("ctl01",)
    # Slurm's compute hosts only (rack 3 is Kubernetes'), 16 at once.
    assert hosts["slurmd batch 1/3"] == tuple(f"h200-r1-{i:02d}" for i in range(1, 17))
    assert hosts["slurmd batch 3/3"] == tuple(f"l40s-{i:02d}" for i in range(1, 9))
    assert hosts["login and clients"] == ("login01",)
    assert all(s.waits_for for s in upgrade.steps)
    by_name = {s.name: s for s in upgrade.steps}
    assert "no time limit" in by_name["slurmdbd"].waits_for
    assert "holding every job" in by_name["slurmctld (primary)"].waits_for
    assert (
        "copy StateSaveLocation (/shared/slurm/state) into /srv/backups/24.11-to-26.05"
        in by_name["slurmctld (primary)"].does
    )
    assert "gpucluster trial" in by_name["prove"].does


def test_the_upgrade_steps_come_first_and_carry_the_version_change(inventories: InventoryFactory) -> None:
    result = plan_between(inventories, "24.11", "26.05")
    assert result.upgrade is not None
    count = len(result.upgrade.steps)
    first = result.steps[:count]
    assert [s.action for s in first[:3]] == [Action.VERIFY, Action.VERIFY, Action.PREPARE]
    assert all(s.action == Action.UPGRADE for s in first[3:-1]) and first[-1].action == Action.VERIFY
    assert all(s.changes == ("cluster.slurm.version",) and s.update == Update.RESTART for s in first)
    assert all(s.text.startswith("playbooks/slurm-upgrade.yml ") and "; waits for " in s.text for s in first)
    [version] = [c for c in result.changes if c.path == "cluster.slurm.version"]
    assert (version.old, version.new, version.update) == ("24.11", "26.05", Update.RESTART)
    lines = text_lines(result)
    assert any(
        line.startswith("upgrade: Slurm 24.11 -> 26.05 by playbooks/slurm-upgrade.yml (steps 1-")
        for line in lines
    )
    doc = result.as_dict()["upgrade"]
    assert doc["from"] == "24.11" and doc["to"] == "26.05" and doc["steps"][0]["name"] == "prove"
    assert {"name", "hosts", "does", "waits_for"} == set(doc["steps"][3])


def test_the_same_release_is_no_upgrade(inventories: InventoryFactory) -> None:
    result = plan_between(inventories, "26.05", "26.05")
    assert result.upgrade is None and result.refused == []


def test_batches_keep_the_order_and_the_size() -> None:
    assert batches(["a", "b", "c", "d", "e"], 2) == [["a", "b"], ["c", "d"], ["e"]]
    assert batches([], 4) == []


def test_the_package_preflight_accepts_the_releases_being_upgraded_only() -> None:
    check = load_module("slurm_packages_check")
    installed = {"slurmctld": "24.11.5-4+deb13u1"}
    assert (
        check.problems("ctl01", "26.05", None, "26.05.5-1", installed, "forky", ("24.11", "25.05", "25.11"))
        == []
    )
    [refused] = check.problems(
        "ctl01", "26.05", None, "26.05.5-1", {"slurmctld": "22.05.8-4+deb12u3"}, "forky", ("24.11",)
    )
    assert "runs Slurm 22.05" in refused
