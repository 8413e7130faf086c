"""cluster.shared_pools: what a valid pool resolves to, and every pool that cannot work refused with
the file, line and key and what to do: bounds that exceed the pool (or leave nothing to move), a
host in two pools, a pool host with a fixed owner elsewhere or another power provider, a pool
without Kubernetes or with the site's own power programs, and Kueue names gpucluster does not make."""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.changes.plan import plan
from gpucluster.errors import InventoryError
from gpucluster.k8s.pools import pool_flavor
from gpucluster.layers import load_cluster
from gpucluster.model.base import Owner, Update
from gpucluster.model.pooled import move_gate_level, policy_settings, pool_of, resolved_pools
from gpucluster.pool.policy import PoolSettings
from tests.conftest import SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory, run_cli

BASE = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))


def _pooled(c: dict[str, Any]) -> None:
    """rack1 (n01-n04) under Kubernetes; rack2 (n05-n08) bare-metal Slurm's, lent by pool `flex`."""
    c["kubernetes"] = {"version": "1.34", "kueue": {"enabled": True}}
    c["nodes"] = [
        {"group": "rack1", "type": "h100", "owner": "kubernetes"},
        {"group": "rack2", "type": "h100", "owner": "slurm"},
    ]
    c["partitions"][0]["nodes"] = ["rack2"]
    c["tenants"][0].update(gpus={"slurm": {"quota": 16}, "kubernetes": {"quota": 16}})
    c["tenants"][1].update(gpus={"slurm": {"quota": 16}})
    for tenant in c["tenants"]:
        tenant.pop("gpu_quota", None)
        tenant.pop("gpu_limit", None)
    c["shared_pools"] = [
        {
            "name": "flex",
            "hosts": ["rack2"],
            "slurm_min_nodes": 1,
            "kubernetes": {"cluster_queues": ["team-a"]},
        }
    ]


def write(
    inventories: InventoryFactory, *mutations: Callable[[dict[str, Any]], object], name: str = "inv"
) -> Path:
    data = copy.deepcopy(BASE)
    _pooled(data["cluster"])
    for mutate in mutations:
        mutate(data["cluster"])
    return inventories.make(SMALL_HOSTS, yaml.safe_dump(data, sort_keys=False), name=name)


def problems_of(directory: Path) -> list[str]:
    with pytest.raises(InventoryError) as info:
        load_cluster(directory)
    return [f"{p.path}: {p.message}" for p in info.value.problems]


def pool(c: dict[str, Any], index: int = 0) -> dict[str, Any]:
    found: dict[str, Any] = c["shared_pools"][index]
    return found


def test_a_valid_pool_resolves_to_its_hosts_flavor_and_gate_level(inventories: InventoryFactory) -> None:
    cluster = load_cluster(write(inventories))
    (resolved,) = resolved_pools(cluster)
    assert resolved.hosts == ("n05", "n06", "n07", "n08")
    assert resolved.movable == 3  # four hosts, one Slurm always keeps
    assert pool_of(cluster)["n06"] == "flex" and "n01" not in pool_of(cluster)
    assert pool_flavor(cluster, 0) == "h100"
    # Pool nodes are Slurm's at home: slurm.conf lists them, Kubernetes owns none of them yet.
    assert set(resolved.hosts) <= set(cluster.hosts_owned_by(Owner.SLURM))
    assert move_gate_level(cluster, resolved.pool) == "none"  # no cluster.gate: no burn-in
    pool_defaults = resolved.pool
    assert (pool_defaults.evict_pods, pool_defaults.min_lent_seconds) == (False, 3600)
    # What the balancer's policy decides with: the node type's GPUs, the pool's bounds and timers.
    assert policy_settings(cluster, resolved) == PoolSettings(
        gpus_per_node=8, slurm_min_nodes=1, kubernetes_min_nodes=0, lend_after_seconds=300,
        min_idle_seconds=300, min_lent_seconds=3600, evict_pods=False,
    )  # fmt: skip


def with_gate(c: dict[str, Any]) -> None:
    c["gate"] = {}
    c["slurm"]["health"] = {}  # the gate runs inside the health check


def test_the_gate_level_defaults_to_the_gate_s_move_level(inventories: InventoryFactory) -> None:
    cluster = load_cluster(write(inventories, with_gate))
    assert move_gate_level(cluster, cluster.spec.shared_pools[0]) == "standard"
    cluster = load_cluster(write(inventories, with_gate, lambda c: pool(c).update(gate_level="deep")))
    assert move_gate_level(cluster, cluster.spec.shared_pools[0]) == "deep"


REFUSALS: list[tuple[str, Callable[[dict[str, Any]], object], str, str]] = [
    (
        "bounds exceed the pool",
        lambda c: pool(c).update(slurm_min_nodes=3, kubernetes_min_nodes=2),
        "cluster.shared_pools[0].slurm_min_nodes",
        "slurm_min_nodes 3 + kubernetes_min_nodes 2 = 5 exceed the pool's 4 hosts: lower them to 3 together at most",
    ),
    (
        "bounds leave nothing to move",
        lambda c: pool(c).update(slurm_min_nodes=2, kubernetes_min_nodes=2),
        "cluster.shared_pools[0].slurm_min_nodes",
        "keep all 4 hosts of the pool: no node could ever move",
    ),
    (
        "a host in two pools",
        lambda c: c["shared_pools"].append(
            {"name": "other", "hosts": ["n05"], "kubernetes": {"cluster_queues": ["team-a"]}}
        ),
        "cluster.shared_pools[1].hosts[0]",
        "host `n05` is already in pool `flex`: a node is lent by one pool only",
    ),
    (
        "two pools of one name",
        lambda c: c["shared_pools"].append(
            {"name": "flex", "hosts": ["rack1"], "kubernetes": {"cluster_queues": ["team-a"]}}
        ),
        "cluster.shared_pools[1].name",
        "pool `flex` is already cluster.shared_pools[0]",
    ),
    (
        "a pool host with a fixed owner elsewhere",
        lambda c: pool(c).update(hosts=["rack2", "n01"]),
        "cluster.shared_pools[0].hosts",
        "host `n01` has the fixed owner `kubernetes` from cluster.nodes[0]: a pool node is Slurm's at home",
    ),
    (
        "a pool host powered by its BMC",
        lambda c: c["nodes"][1].update(
            power={"kind": "bmc", "bmc": {"endpoint": "https://{host}-bmc.example.com"}}
        ),
        "cluster.shared_pools[0].hosts",
        "host `n05` is powered by its BMC or cloud (cluster.nodes[1].power)",
    ),
    (
        "a pool host without a node type",
        lambda c: pool(c).update(hosts=["rack2", "head"]),
        "cluster.shared_pools[0].hosts",
        "host `head` has no node type: add its group to cluster.nodes with `owner: slurm`",
    ),
    (
        "a pool of nodes without GPUs",
        lambda c: c["node_types"]["h100"].pop("gpus"),
        "cluster.shared_pools[0].hosts",
        "host `n05` is of node type `h100`, which has no GPUs: a pool lends GPU nodes",
    ),
    (
        "a name not in hosts.yml",
        lambda c: pool(c).update(hosts=["rack9"]),
        "cluster.shared_pools[0].hosts[0]",
        "`rack9` is not a host or group of",
    ),
    (
        "a pool without Kubernetes",
        lambda c: (
            c.pop("kubernetes"),
            c["nodes"].pop(0),
            c["partitions"][0].update(nodes=["gpus"]),
            c["nodes"][0].update(group="gpus"),
            [t.pop("gpus") for t in c["tenants"]],
            c["tenants"][0].update(gpu_quota=32),
            c["tenants"][1].update(gpu_quota=32),
        ),
        "cluster.shared_pools",
        "a shared pool lends Slurm's nodes to Kubernetes: add the `kubernetes:` section",
    ),
    (
        "the site's own power programs",
        lambda c: c["slurm"].update(power_save={"resume_program": "/usr/local/sbin/site-resume"}),
        "cluster.slurm.power_save.resume_program",
        "cluster.shared_pools moves nodes through gpucluster's power programs",
    ),
    (
        "an unknown ClusterQueue",
        lambda c: pool(c)["kubernetes"].update(cluster_queues=["team-a", "team-b"]),
        "cluster.shared_pools[0].kubernetes.cluster_queues[1]",
        "unknown ClusterQueue `team-b`: gpucluster makes one per leaf tenant with a Kubernetes share (team-a)",
    ),
    (
        "a ClusterQueue named twice",
        lambda c: pool(c)["kubernetes"].update(cluster_queues=["team-a", "team-a"]),
        "cluster.shared_pools[0].kubernetes.cluster_queues[1]",
        "ClusterQueue `team-a` is named twice: its quota would grow twice for one node",
    ),
    (
        "an unknown flavor",
        lambda c: pool(c)["kubernetes"].update(flavor="a100"),
        "cluster.shared_pools[0].kubernetes.flavor",
        "unknown flavor `a100`: gpucluster's Kueue admits the pool's `h100` nodes on ResourceFlavor `h100`",
    ),
    (
        "a gate level without the gate",
        lambda c: pool(c).update(gate_level="quick"),
        "cluster.shared_pools[0].gate_level",
        "`quick` is a burn-in of the return-to-service gate: add `cluster.gate`",
    ),
    (
        "a negative minimum",
        lambda c: pool(c).update(kubernetes_min_nodes=-1),
        "cluster.shared_pools[0].kubernetes_min_nodes",
        "greater than or equal to 0",
    ),
    (
        "no queue",
        lambda c: pool(c)["kubernetes"].update(cluster_queues=[]),
        "cluster.shared_pools[0].kubernetes.cluster_queues",
        "",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "path", "message"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_a_pool_that_cannot_work_is_refused_at_its_key(
    inventories: InventoryFactory, mutate: Callable[[dict[str, Any]], object], path: str, message: str
) -> None:
    found = problems_of(write(inventories, mutate))
    assert any(p.startswith(f"{path}: ") and message in p for p in found), found


def test_the_site_s_own_kueue_names_are_not_checked(inventories: InventoryFactory) -> None:
    """Without gpucluster's Kueue the flavor and queues are the site's objects."""
    cluster = load_cluster(
        write(
            inventories,
            lambda c: c["kubernetes"]["kueue"].update(enabled=False),
            lambda c: pool(c)["kubernetes"].update(flavor="site-h100", cluster_queues=["research"]),
        )
    )
    assert pool_flavor(cluster, 0) == "site-h100"


def test_the_command_line_names_file_line_and_key_and_exits_2(inventories: InventoryFactory) -> None:
    directory = write(inventories, lambda c: pool(c).update(slurm_min_nodes=5))
    proc = run_cli("validate", str(directory))
    assert proc.returncode == 2, proc.stderr
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text
    lines = (directory / "group_vars" / "all" / "cluster.yml").read_text().splitlines()
    line = next(n for n, text_line in enumerate(lines, 1) if "slurm_min_nodes: 5" in text_line)
    assert f"cluster.yml:{line}: cluster.shared_pools[0].slurm_min_nodes: slurm_min_nodes 5" in text, text


def test_plan_names_each_pool_change_with_what_it_requires(inventories: InventoryFactory) -> None:
    """Pools compared by name, their hosts as hosts: a bound is the balancer's setting (nothing on a
    live cluster reads it yet: re-rendered only), a pool added or its hosts changed moves nodes."""
    old = load_cluster(write(inventories))
    bound = load_cluster(write(inventories, lambda c: pool(c).update(slurm_min_nodes=2), name="bound"))
    changes = [(c.path, c.update) for c in plan(old, bound)]
    assert changes == [("cluster.shared_pools.flex.slurm_min_nodes", Update.RENDER_ONLY)]
    fewer = load_cluster(write(inventories, lambda c: pool(c).update(hosts=["n05", "n06"]), name="fewer"))
    assert [(c.path, c.update, c.new) for c in plan(old, fewer)] == [
        ("cluster.shared_pools.flex.hosts", Update.MOVE, ["n05", "n06"])
    ]
    none = load_cluster(write(inventories, lambda c: c.pop("shared_pools"), name="none"))
    assert [(c.path, c.update) for c in plan(none, old)] == [("cluster.shared_pools.flex", Update.MOVE)]
