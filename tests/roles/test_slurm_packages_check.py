"""slurm_packages_check: the release a host's sources offer and the one it runs, against the target."""

from __future__ import annotations

from .conftest import load_module

check = load_module("slurm_packages_check")


def test_the_target_release_offered_and_nothing_installed_passes() -> None:
    assert check.problems("gpu01", "26.05", None, "26.05.5-1", {}, "forky") == []
    assert check.problems("gpu01", "26.05", None, "26.05.5-1", {"slurmd": "26.05.5-1"}, "forky") == []


def test_sources_offering_another_release_are_refused_naming_host_wanted_and_offered() -> None:
    [problem] = check.problems("gpu01", "26.05", None, "22.05.8-4+deb12u3", {}, "forky")
    assert problem == (
        "gpu01: its package sources offer Slurm 22.05.8-4+deb12u3; the inventory targets 26.05 "
        "(Debian carries 26.05 in forky: run forky on the host or name a repository that carries it "
        "in cluster.slurm.packages.repository)"
    )
    [none] = check.problems("gpu01", "25.11", None, "", {}, "")
    assert none.startswith("gpu01: its package sources offer no Slurm; the inventory targets 25.11")
    assert "no Debian suite carries 25.11" in none


def test_another_release_installed_is_an_upgrade_or_a_downgrade_never_done_here() -> None:
    [upgrade] = check.problems(
        "ctl01", "26.05", None, "26.05.5-1", {"slurmctld": "24.11.5-4+deb13u1"}, "forky"
    )
    assert upgrade.startswith(
        "ctl01: runs Slurm 24.11 (slurmctld 24.11.5-4+deb13u1); going to 26.05 is an upgrade"
    )
    assert upgrade.endswith("nothing was changed")
    [downgrade] = check.problems(
        "ctl01", "24.11", None, "24.11.5-4+deb13u1", {"slurmctld": "26.05.5-1"}, "trixie"
    )
    assert "is a downgrade, which Slurm does not support" in downgrade


def test_a_maintenance_version_the_inventory_needs() -> None:
    [old] = check.problems("ctl01", "25.05", "25.05.2", "25.05.1-1", {}, "")
    assert old == "ctl01: its package sources offer Slurm 25.05.1-1; the inventory needs 25.05.2 or later"
    assert check.problems("ctl01", "25.05", "25.05.2", "25.05.3-1", {}, "") == []
