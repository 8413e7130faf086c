"""`gpucluster show`: the fleet table (which scheduler owns which nodes) and tenants per scheduler."""

from __future__ import annotations

import json

from tests.conftest import run_cli


def test_fleet_json_of_a_mixed_fleet() -> None:
    proc = run_cli("show", "--json", "inventories/superpod")
    assert proc.returncode == 0, proc.stderr
    fleet = json.loads(proc.stdout)
    owners = {row["owner"]: row for row in fleet["owners"]}
    assert set(owners) == {"slurm", "kubernetes"}
    assert (owners["slurm"]["nodes"], owners["slurm"]["gpus"], owners["slurm"]["hosts"]) == (
        96,
        768,
        "dgx[001-096]",
    )
    assert owners["slurm"]["partitions"] == ["batch", "interactive"]
    assert (owners["kubernetes"]["nodes"], owners["kubernetes"]["gpus"]) == (32, 256)
    assert owners["kubernetes"]["partitions"] == []
    assert fleet["gpus"] == 1024
    assert fleet["tenants"]["research"] == {
        "slurm": {"quota": 384, "limit": 640},
        "kubernetes": {"quota": 64, "limit": 128},
    }
    assert fleet["tenants"]["inference"] == {"kubernetes": {"quota": 192, "limit": 256}}


def test_fleet_table_in_the_text_output() -> None:
    proc = run_cli("show", "inventories/gke-prod")
    assert proc.returncode == 0, proc.stderr
    assert "Fleet: who schedules each node (256 GPUs)" in proc.stdout
    lines = [
        line
        for line in proc.stdout.splitlines()
        if "slurm-on-kubernetes" in line and "gke-prod-a3mega" in line
    ]
    assert lines and "128" in lines[0]
    assert "Tenants: GPU quota / limit per scheduler" in proc.stdout


def test_users_table_shows_ids_groups_and_tenants() -> None:
    proc = run_cli("show", "inventories/superpod")
    assert proc.returncode == 0, proc.stderr
    assert "Users: one uid and gid on every Slurm host" in proc.stdout
    erin = next(line for line in proc.stdout.splitlines() if " erin " in line and "10005" in line)
    assert "ml (20000)" in erin and "inference" in erin
    alice = next(line for line in proc.stdout.splitlines() if " alice " in line and "10001" in line)
    assert "alice (10001)" in alice and "research" in alice
