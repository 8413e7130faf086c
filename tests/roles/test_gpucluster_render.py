"""gpucluster_render groups the hosts by their Slurm role straight from the cluster model."""

from __future__ import annotations

from gpucluster.lab.paths import DEFAULT_INVENTORY
from gpucluster.layers import load_cluster

from .conftest import ROLES, load_module

render = load_module("gpucluster_render")
MOLECULE_INVENTORIES = ROLES.parent / "molecule" / "inventory"


def test_lab_login_node_is_a_group_of_its_own() -> None:
    groups = render.classify(load_cluster(DEFAULT_INVENTORY))
    assert groups["controllers"] == ["ctl01", "ctl02"]
    assert groups["dbd_hosts"] == ["ctl02"]
    assert groups["compute_nodes"] == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert groups["login_nodes"] == ["login01"]


def test_a_controller_may_be_the_login_node() -> None:
    groups = render.classify(load_cluster(MOLECULE_INVENTORIES / "mollogin"))
    assert groups["controllers"] == groups["login_nodes"] == ["gclogin01"]
    assert groups["compute_nodes"] == ["gcnode-absent"]


def test_no_login_nodes_by_default() -> None:
    assert render.classify(load_cluster(MOLECULE_INVENTORIES / "mol"))["login_nodes"] == []


def test_configless_lab_gives_nodes_the_controllers_in_order() -> None:
    lab = render.classify(load_cluster(DEFAULT_INVENTORY))
    assert lab["configless"] is True
    assert lab["conf_server"] == "ctl01,ctl02"
    # What the lab's nodes no longer hold: slurmctld serves it; healthcheck.conf it does not.
    # 26.05 serves topology.yaml too (25.05.2 and later); oci.conf for the lab's container jobs.
    assert lab["served_files"] == [
        "slurm.conf", "cgroup.conf", "plugstack.conf", "gres.conf", "topology.conf", "topology.yaml", "oci.conf",
    ]  # fmt: skip


def test_classic_cluster_serves_nothing() -> None:
    mol = render.classify(load_cluster(MOLECULE_INVENTORIES / "mol"))
    assert mol["configless"] is False
    assert mol["served_files"] == []


def test_lab_runs_the_rest_api_on_the_first_controller() -> None:
    groups = render.classify(load_cluster(DEFAULT_INVENTORY))
    assert groups["restd_hosts"] == ["ctl01"]
    rest = groups["rest_api"]
    assert (rest["host"], rest["listen"], rest["key_host"]) == ("ctl01", "0.0.0.0:6820", "ctl01")
    # slurmdbd runs on ctl02, a controller: the one key in the shared StateSaveLocation serves all.
    assert rest["key_paths"] == {host: "/shared/slurmctld/jwt_hs256.key" for host in ("ctl01", "ctl02")}


def test_no_rest_api_by_default() -> None:
    groups = render.classify(load_cluster(MOLECULE_INVENTORIES / "mol"))
    assert groups["restd_hosts"] == [] and groups["rest_api"] is None


def test_the_health_program_is_the_one_the_package_carries() -> None:
    """slurm_health installs the file this names: the program the Slinky values embed too."""
    from gpucluster.render.health import program_text

    path = render.classify(load_cluster(DEFAULT_INVENTORY))["health_program"]
    with open(path, encoding="utf-8") as handle:
        assert handle.read() == program_text()
