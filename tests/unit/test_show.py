"""`gpucluster show`: every section of the inventory, the releases gpucluster knows and the target's
facts; `--json` the whole resolved model with hosts as lists."""

from __future__ import annotations

import json

from gpucluster.model.releases import RELEASES
from tests.conftest import InventoryFactory, run_cli


def test_fleet_json_of_a_mixed_fleet() -> None:
    proc = run_cli("show", "--json", "inventories/superpod")
    assert proc.returncode == 0, proc.stderr
    fleet = json.loads(proc.stdout)["fleet"]
    owners = {row["owner"]: row for row in fleet["owners"]}
    assert set(owners) == {"slurm", "kubernetes"}
    assert (owners["slurm"]["nodes"], owners["slurm"]["gpus"], owners["slurm"]["hosts"]) == (
        96,
        768,
        [f"dgx{i:03d}" for i in range(1, 97)],
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


def test_json_is_the_whole_resolved_model_with_hosts_as_lists() -> None:
    doc = json.loads(run_cli("show", "--json", "inventories/superpod").stdout)
    assert set(doc) == {
        "monitoring",
        "cluster",
        "hosts",
        "switches",
        "tenants",
        "release",
        "releases",
        "fleet",
        "kubernetes",
    }
    cluster = doc["cluster"]
    assert {
        "slurm",
        "node_types",
        "partitions",
        "fabric",
        "qos",
        "groups",
        "users",
        "storage",
        "kubernetes",
    } <= set(cluster)
    assert cluster["partitions"]["interactive"]["nodes"] == [f"dgx{i:03d}" for i in range(65, 97)]
    assert cluster["storage"]["slurm-state"]["hosts"] == ["mgmt01", "mgmt02"]
    assert cluster["users"]["erin"]["group"] == "ml" and cluster["qos"]["high"]["max_gpus_per_user"] == 256
    assert cluster["kubernetes"]["kueue"]["enabled"] is True
    assert doc["hosts"]["dgx100"] == {"type": "dgx-h100", "owner": "kubernetes"}
    assert doc["switches"]["su1-leaf"]["nodes"][:2] == ["dgx001", "dgx002"]
    assert doc["tenants"]["research"]["slurm"]["limit"] == 640
    assert doc["tenants"]["research"]["kubernetes"]["quota"] == 64
    assert doc["release"]["name"] == "26.05" and doc["release"]["proven"] is True
    assert doc["releases"]["25.11"] == {"proven": False, "source": doc["releases"]["25.11"]["source"]}


def test_text_has_every_section() -> None:
    out = run_cli("show", "inventories/superpod").stdout
    for title in (
        "Slurm\n", "Slurm releases gpucluster knows", "Target release: Slurm 26.05", "Node types",
        "Partitions", "Fabric tree", "Fleet:", "Tenants:", "QOS\n", "Users:", "Groups:", "Shared storage",
        "Kubernetes\n",
    ):  # fmt: skip
        assert title in out, title
    assert "│ high   │ 100      │ 256 " in out
    assert "│ scratch     │ /scratch │ lustre 10.10.0.10@o2ib:/scratch │" in out
    assert (
        "│ batch       │ yes     │ 96    │ 768  │ dgx[001-096] │ 7-00:00:00 │ yes       │ 28 / 250000 " in out
    )
    lab = run_cli("show", "inventories/lab").stdout
    assert "│ login hosts              │ login01 " in lab
    assert "│ REST API                 │ http://ctl01:6820/slurm/v0.0.44/ (JWT)" in lab


def test_the_releases_and_which_real_daemons_prove(inventories: InventoryFactory) -> None:
    gke = inventories.copy_example("gke-prod")
    cluster_file = gke / "group_vars" / "all" / "cluster.yml"
    cluster_file.write_text(cluster_file.read_text().replace('version: "26.05"', 'version: "25.11"'))
    out = run_cli("show", str(gke)).stdout
    assert "Slurm 25.11 (facts from Slurm's documentation, not run here)" in out.splitlines()[0]
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.startswith("│ 2")}
    assert "target" in rows["25.11"] and "│ no " in rows["25.11"]
    for name, release in RELEASES.items():
        assert (f"│ {'yes' if release.proven else 'no'} " in rows[name]) and release.source in rows[name]
    assert "│ nodes added or removed         │ scontrol reconfigure " in out
