"""cluster.slurm.configless: the slurm.conf line, what nodes keep, the check, the update policy."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.changes.plan import plan
from gpucluster.changes.records import required_action
from gpucluster.errors import InventoryError
from gpucluster.layers import load_cluster
from gpucluster.model.base import Update
from gpucluster.rendering import render_files
from gpucluster.slurm.render import CONFIGLESS_SERVED, conf_server, configless_served
from tests.conftest import INVENTORIES, SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory

BASE = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))


def small(inventories: InventoryFactory, name: str = "inv", **slurm: Any) -> Path:
    data = copy.deepcopy(BASE)
    data["cluster"]["slurm"].update(slurm)
    return inventories.make(SMALL_HOSTS, yaml.safe_dump(data, sort_keys=False), name=name)


def slurm_conf(directory: Path) -> list[str]:
    return render_files(load_cluster(directory), only=["slurm"])["slurm/slurm.conf"].splitlines()


def test_off_by_default_and_no_line(inventories: InventoryFactory) -> None:
    directory = small(inventories)
    assert load_cluster(directory).spec.slurm.configless is False
    assert not [line for line in slurm_conf(directory) if line.startswith("SlurmctldParameters")]


def test_on_enables_configless_in_slurmctld(inventories: InventoryFactory) -> None:
    lines = slurm_conf(small(inventories, configless=True))
    assert [line for line in lines if line.startswith("SlurmctldParameters")] == [
        "SlurmctldParameters=enable_configless"
    ]


def test_site_slurmctld_parameters_join_the_one_line(inventories: InventoryFactory) -> None:
    """Two SlurmctldParameters lines would leave Slurm the last one, without enable_configless."""
    settings = {
        "slurmctld_parameters": ["idle_on_node_suspend", "enable_configless"],
        "timeouts": {"slurmd": 20},
    }
    lines = slurm_conf(small(inventories, configless=True, **settings))
    assert [line for line in lines if line.startswith("SlurmctldParameters")] == [
        "SlurmctldParameters=enable_configless,idle_on_node_suspend"
    ]
    assert "SlurmdTimeout=20" in lines
    # Classic: the site's values as they are.
    classic = slurm_conf(small(inventories, name="classic", **settings))
    assert [line for line in classic if line.startswith("SlurmctldParameters")] == [
        "SlurmctldParameters=idle_on_node_suspend,enable_configless"
    ]


def test_conf_server_names_the_controllers_in_priority_order(inventories: InventoryFactory) -> None:
    assert conf_server(load_cluster(INVENTORIES / "lab")) == "ctl01,ctl02"
    assert conf_server(load_cluster(small(inventories, configless=True))) == "head"


def test_nodes_keep_only_what_slurmctld_does_not_serve(inventories: InventoryFactory) -> None:
    lab = load_cluster(INVENTORIES / "lab")
    assert lab.spec.slurm.configless
    rendered = {p.removeprefix("slurm/") for p in render_files(lab, only=["slurm"])}
    kept = sorted(rendered - set(configless_served(lab)) - {"accounts.yaml"})
    # The health check's own file: no Slurm release serves it.
    assert kept == ["healthcheck.conf"]
    # oci.conf: the lab runs container jobs (cluster.slurm.containers.oci).
    served = [
        "slurm.conf",
        "cgroup.conf",
        "plugstack.conf",
        "gres.conf",
        "topology.conf",
        "topology.yaml",
        "oci.conf",
    ]
    assert configless_served(lab) == served
    # Slurm 22.05 serves no script, and topology.yaml not before 25.05.2.
    assert "topology.yaml" not in CONFIGLESS_SERVED
    older = load_cluster(small(inventories, configless=True))
    assert older.release.name == "22.05" and "topology.yaml" not in configless_served(older)


def test_topology_yaml_is_served_from_25_11(inventories: InventoryFactory) -> None:
    newer = load_cluster(small(inventories, version="25.11", configless=True))
    assert "topology.yaml" in configless_served(newer)
    assert "topology.yaml" not in configless_served(load_cluster(small(inventories, name="old")))


def test_configless_with_topology_yaml_needs_a_release_that_serves_it(inventories: InventoryFactory) -> None:
    with pytest.raises(InventoryError) as info:
        load_cluster(small(inventories, version="25.05", configless=True))
    problems = [str(p) for p in info.value.problems]
    assert len(problems) == 1, problems
    assert "cluster.slurm.configless:" in problems[0]
    assert "group_vars/all/cluster.yml:" in problems[0]
    assert "25.05.2" in problems[0]
    # Without a fabric there is no topology file to serve.
    data = copy.deepcopy(BASE)
    data["cluster"]["slurm"].update(version="25.05", configless=True)
    del data["cluster"]["fabric"]
    load_cluster(inventories.make(SMALL_HOSTS, yaml.safe_dump(data), name="nofabric"))


def test_switching_needs_a_restart_of_every_daemon(inventories: InventoryFactory) -> None:
    old = load_cluster(small(inventories, name="old"))
    new = load_cluster(small(inventories, name="new", configless=True))
    changes = plan(old, new)
    assert [(c.path, c.update) for c in changes] == [("cluster.slurm.configless", Update.RESTART)]
    assert required_action(changes) == Update.RESTART
