"""cluster.slurm.health and node_types.<type>.health: validated like every other key (file:line:
key.path: reason, exit 2), rendered into slurm.conf and healthcheck.conf only when set."""

from __future__ import annotations

import copy
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.errors import InventoryError
from gpucluster.layers import load_cluster
from gpucluster.render.health import HEALTH_PROGRAM
from gpucluster.rendering import render_files
from tests.conftest import SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory, run_cli

BASE = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))


def write(inventories: InventoryFactory, mutate: Callable[[dict[str, Any]], None]) -> Path:
    data = copy.deepcopy(BASE)
    mutate(data["cluster"])
    return inventories.make(SMALL_HOSTS, yaml.safe_dump(data, sort_keys=False))


def health(**settings: Any) -> Callable[[dict[str, Any]], None]:
    return lambda c: c["slurm"].update(health=settings)


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    (
        "alloc only",
        health(node_state=["ALLOC", "MIXED"]),
        "cluster.slurm.health.node_state",
        "include ANY or IDLE",
    ),
    (
        "state twice",
        health(node_state=["IDLE", "IDLE"]),
        "cluster.slurm.health.node_state",
        "more than once: IDLE",
    ),
    (
        "23.02 state on 22.05",
        health(node_state=["IDLE", "NONDRAINED_IDLE"]),
        "cluster.slurm.health.node_state[1]",
        "Slurm 22.05 knows no HealthCheckNodeState `NONDRAINED_IDLE` (it knows ALLOC, ANY, CYCLE, IDLE, MIXED)",
    ),
    ("interval 0", health(interval=0), "cluster.slurm.health.interval", "greater than or equal to 1"),
    (
        "interval too big",
        health(interval=70000),
        "cluster.slurm.health.interval",
        "70000 is more than 65535, the most this key takes",
    ),
    ("xid 0", health(xid_fatal=[79, 0]), "cluster.slurm.health.xid_fatal[1]", "greater than or equal to 1"),
    ("typo", health(intervall=10), "cluster.slurm.health.intervall", "unknown key"),
    (
        "port without number",
        lambda c: c["node_types"]["h100"].update(health={"infiniband": ["mlx5_0"]}),
        "cluster.node_types.h100.health.infiniband[0]",
        "should match pattern",
    ),
    (
        "relative mount",
        lambda c: c["node_types"]["h100"].update(health={"mounts": ["home"]}),
        "cluster.node_types.h100.health.mounts[0]",
        "should match pattern",
    ),
    (
        "mount twice",
        lambda c: c["node_types"]["h100"].update(health={"mounts": ["/home", "/home"]}),
        "cluster.node_types.h100.health.mounts",
        "more than once: /home",
    ),
    (
        "program in extra",
        lambda c: c["slurm"].update(health={}, extra={"HealthCheckProgram": "/usr/sbin/nhc"}),
        "cluster.slurm.extra.HealthCheckProgram",
        "written by cluster.slurm.health",
    ),
    (
        "prolog in extra",
        lambda c: c["slurm"].update(health={"prolog": True}, extra={"Prolog": "/etc/slurm/prolog.sh"}),
        "cluster.slurm.extra.Prolog",
        "Prolog is cluster.slurm.prolog: set it there",
    ),
    (
        "a second prolog where the release takes one",
        lambda c: c["slurm"].update(health={"prolog": True}, prolog=["/etc/slurm/prolog.sh"]),
        "cluster.slurm.prolog",
        "Slurm 22.05 takes one Prolog (the health check's (cluster.slurm.health.prolog) and cluster.slurm.prolog given",
    ),
]


@pytest.mark.parametrize(("name", "mutate", "path", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_health_settings_are_reported_at_their_key(
    inventories: InventoryFactory,
    name: str,
    mutate: Callable[[dict[str, Any]], None],
    path: str,
    message: str,
) -> None:
    directory = write(inventories, mutate)
    proc = run_cli("validate", str(directory))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    pattern = rf"^{re.escape(str(directory))}/group_vars/all/cluster\.yml:\d+: {re.escape(path)}: .*{re.escape(message)}"
    assert re.search(pattern, proc.stderr, re.MULTILINE), proc.stderr


@pytest.mark.parametrize("states", [["ANY"], ["CYCLE"], ["IDLE", "MIXED"], ["ALLOC", "IDLE", "CYCLE"]])
def test_node_states_that_reach_a_drained_idle_node_are_accepted(
    inventories: InventoryFactory, states: list[str]
) -> None:
    cluster = load_cluster(write(inventories, health(node_state=states)))
    assert cluster.spec.slurm.health is not None
    assert "HealthCheckNodeState=" + ",".join(states) in render_files(cluster)["slurm/slurm.conf"]


def test_own_prolog_stays_when_the_check_is_not_the_prolog(inventories: InventoryFactory) -> None:
    directory = write(
        inventories,
        lambda c: c["slurm"].update(health={"prolog": False}, prolog=["/etc/slurm/p.sh"]),
    )
    conf = render_files(load_cluster(directory))["slurm/slurm.conf"]
    assert f"HealthCheckProgram={HEALTH_PROGRAM}" in conf
    assert conf.count("Prolog=") == 1 and "Prolog=/etc/slurm/p.sh" in conf


def test_from_24_05_the_check_and_the_sites_prologs_are_lines_of_their_own(
    inventories: InventoryFactory,
) -> None:
    directory = write(
        inventories,
        lambda c: c["slurm"].update(
            version="24.11", health={"prolog": True}, prolog=["/etc/slurm/prolog.d/*", "/opt/site/prolog"]
        ),
    )
    conf = render_files(load_cluster(directory))["slurm/slurm.conf"]
    assert [line for line in conf.splitlines() if line.startswith("Prolog=")] == [
        "Prolog=/etc/slurm/prolog.d/*",
        "Prolog=/opt/site/prolog",
        f"Prolog={HEALTH_PROGRAM}",
    ]


def test_without_health_nothing_is_rendered(inventories: InventoryFactory) -> None:
    files = render_files(load_cluster(write(inventories, lambda c: None)))
    assert "slurm/healthcheck.conf" not in files
    assert "HealthCheck" not in files["slurm/slurm.conf"] and "Prolog" not in files["slurm/slurm.conf"]


def test_health_renders_slurm_conf_keys_and_the_expectations(inventories: InventoryFactory) -> None:
    def mutate(c: dict[str, Any]) -> None:
        c["slurm"]["health"] = {"interval": 120, "node_state": ["ANY", "CYCLE"], "xid_fatal": [79, 48]}
        c["node_types"]["h100"]["health"] = {"dcgm": False, "infiniband": ["mlx5_0:1"], "mounts": ["/home"]}
        c["node_types"]["cpu"] = {"sockets": 1, "cores_per_socket": 4, "memory_mb": 8000}
        c["nodes"] = [{"group": "rack1", "type": "h100"}, {"group": "rack2", "type": "cpu"}]
        c["tenants"] = [{"name": "team-a", "fairshare": 1, "gpu_quota": 32, "users": ["alice"]}]

    files = render_files(load_cluster(write(inventories, mutate)))
    conf = files["slurm/slurm.conf"]
    for line in (
        f"HealthCheckProgram={HEALTH_PROGRAM}",
        "HealthCheckInterval=120",
        "HealthCheckNodeState=ANY,CYCLE",
        f"Prolog={HEALTH_PROGRAM}",
    ):
        assert f"\n{line}\n" in conf
    expected = textwrap.dedent(
        """\
        [cpu]
        nodes = n05 n06 n07 n08
        checks =
        gpus = 0
        devices =
        xid_fatal = 79 48
        infiniband =
        mounts =
        budget = 50
        heavy_node_state = IDLE

        [h100]
        nodes = n01 n02 n03 n04
        checks = gpu_count mounts infiniband xid ecc
        gpus = 8
        devices = /dev/nvidia0 /dev/nvidia1 /dev/nvidia2 /dev/nvidia3 /dev/nvidia4 /dev/nvidia5 /dev/nvidia6 /dev/nvidia7
        xid_fatal = 79 48
        infiniband = mlx5_0:1
        mounts = /home
        budget = 50
        heavy_node_state = IDLE
        """
    )
    text = files["slurm/healthcheck.conf"]
    assert text.startswith("# Generated by gpucluster for cluster 'small'.")
    assert text.split("\n\n", 1)[1] == expected


def test_programmatic_load_reports_every_health_problem_at_once(inventories: InventoryFactory) -> None:
    def mutate(c: dict[str, Any]) -> None:
        c["slurm"]["health"] = {"node_state": ["ALLOC"]}
        c["node_types"]["h100"]["health"] = {"infiniband": ["ib0"]}

    with pytest.raises(InventoryError) as info:
        load_cluster(write(inventories, mutate))
    paths = sorted(p.path for p in info.value.problems)
    assert paths == ["cluster.node_types.h100.health.infiniband[0]", "cluster.slurm.health.node_state"]
