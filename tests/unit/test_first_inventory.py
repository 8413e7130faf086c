"""What a first inventory needs and Slurm would not forgive (issue 31, item 5): exactly one default
partition, a backup controller's state on a filesystem every controller mounts, a switch tree whose
roots reach every Slurm node (or says it is split on purpose), and a host in two groups reported in
hosts.yml where it is listed twice. Each `file:line: key path: reason` with what to do, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.errors import InventoryError
from gpucluster.layers import layer_warnings, load_cluster
from tests.conftest import InventoryFactory, run_cli
from tests.fleet import NEWCOMER_CLUSTER, NEWCOMER_HOSTS, edit

CLUSTER_FILE = "group_vars/all/cluster.yml"


def newcomer(
    inventories: InventoryFactory,
    cluster_edits: dict[str, str] | None = None,
    hosts_edits: dict[str, str] | None = None,
) -> Path:
    return inventories.make(
        edit(NEWCOMER_HOSTS, hosts_edits or {}), edit(NEWCOMER_CLUSTER, cluster_edits or {}), name="acme"
    )


def problems(directory: Path) -> list[str]:
    with pytest.raises(InventoryError) as info:
        load_cluster(directory)
    return [str(p).removeprefix(str(directory) + "/") for p in info.value.problems]


def test_the_newcomer_fleet_is_valid(inventories: InventoryFactory) -> None:
    cluster = load_cluster(newcomer(inventories))
    assert (len(cluster.hosts), cluster.total_gpus) == (56, 416)
    assert layer_warnings(cluster) == []


# --- the default partition ------------------------------------------------------------------------


def test_no_default_partition_is_refused_naming_the_candidates(inventories: InventoryFactory) -> None:
    """The defect: `valid`; slurmctld then logs `default partition not set` and refuses jobs without -p."""
    directory = newcomer(inventories, {"default: true, ": ""})
    assert problems(directory) == [
        f"{CLUSTER_FILE}:34: cluster.partitions: no partition is the default: jobs that name no partition "
        "would be refused (slurmctld: `default partition not set`); mark one `default: true` "
        "(candidates: train, dev) (or set cluster.slurm.no_default_partition if jobs must name theirs)"
    ]
    proc = run_cli("validate", str(directory))
    assert proc.returncode == 2 and "candidates: train, dev" in proc.stderr


def test_two_default_partitions_are_named(inventories: InventoryFactory) -> None:
    directory = newcomer(
        inventories, {'[l40s], max_time: "08:00:00"': '[l40s], default: true, max_time: "08:00:00"'}
    )
    assert problems(directory) == [
        f"{CLUSTER_FILE}:36: cluster.partitions[1].default: 2 partitions are the default (train, dev): "
        "Slurm keeps only one; leave `default: true` on one of them (or set "
        "cluster.slurm.several_default_partitions: the last wins)"
    ]


def test_slurm_on_kubernetes_has_a_default_partition_of_its_own(inventories: InventoryFactory) -> None:
    """Two Slurm clusters, two defaults: one each is right, none in one of them is not."""
    slinky = {
        "{group: h200_r3, type: h200, owner: kubernetes}": "{group: h200_r3, type: h200, owner: slurm-on-kubernetes}",
        '    - {name: dev, nodes: [l40s], max_time: "08:00:00"}\n': (
            '    - {name: dev, nodes: [l40s], max_time: "08:00:00"}\n'
            "    - {name: k8s, nodes: [h200_r3], default: true}\n"
        ),
        "kubernetes: {quota: 32, limit: 64}": "slurm-on-kubernetes: {quota: 32, limit: 64}",
        "gpus: {kubernetes: {quota: 96, limit: 128}}": "gpus: {slurm-on-kubernetes: {quota: 96, limit: 128}}",
        "    kueue: {enabled: true}\n": "    kueue: {enabled: false}\n    slurm: {operator: slinky, accounting: true, database_host: 10.0.0.5}\n",
    }
    load_cluster(newcomer(inventories, slinky))
    none_there = {
        **slinky,
        "- {name: k8s, nodes: [h200_r3], default: true}": "- {name: k8s, nodes: [h200_r3]}",
    }
    found = problems(newcomer(inventories, none_there))
    assert [p for p in found if "default" in p] == [
        f"{CLUSTER_FILE}:34: cluster.partitions: no partition of slurm-on-kubernetes is the default: jobs "
        "that name no partition would be refused (slurmctld: `default partition not set`); mark one "
        "`default: true` (candidates: k8s)"
    ]


# --- the controllers' shared state --------------------------------------------------------------


def test_a_backup_controller_with_the_state_on_no_shared_filesystem_is_refused(
    inventories: InventoryFactory,
) -> None:
    """The defect: two controllers with the state on local disk were `valid`."""
    directory = newcomer(
        inventories,
        {
            '    - {name: slurm-state, mount: /shared, source: "filer01:/export/slurm", type: nfs4, hosts: [controllers]}\n': ""
        },
    )
    assert problems(directory) == [
        f"{CLUSTER_FILE}:6: cluster.slurm.state_save_location: /shared/slurm/state is on no filesystem of "
        "cluster.storage, but 2 controllers (ctl01, ctl02) must all read and write it: declare the shared "
        "filesystem that holds it in cluster.storage with the controllers among its hosts (e.g. {name: "
        "slurm-state, mount: /shared, source: filer:/export/slurm, type: nfs4, hosts: [ctl01, ctl02]}, "
        "or `site_managed: true` where the site mounts it)"
    ]


def test_a_state_filesystem_one_controller_does_not_mount_is_refused(inventories: InventoryFactory) -> None:
    """The defect: a shared filesystem only one controller mounts was `valid`."""
    directory = newcomer(inventories, {"type: nfs4, hosts: [controllers]}": "type: nfs4, hosts: [ctl01]}"})
    assert problems(directory) == [
        f"{CLUSTER_FILE}:6: cluster.slurm.state_save_location: /shared/slurm/state is on `slurm-state` "
        "(cluster.storage[1]), which controller `ctl02` does not mount: every controller reads and writes "
        "the state there; add it to that filesystem's `hosts`"
    ]


def test_one_controller_keeps_its_state_where_it_likes(inventories: InventoryFactory) -> None:
    load_cluster(
        newcomer(
            inventories, {"controller: [ctl01, ctl02]": "controller: [ctl01, ctl02]".replace(", ctl02", "")}
        )
    )


# --- the switch tree's roots ---------------------------------------------------------------------


SECOND_ROOT = {
    "      spine: [leaf-r1, leaf-r2, leaf-r3, leaf-l40s]\n": "      spine: [leaf-r1, leaf-r2, leaf-r3]\n      spine2: [leaf-l40s]\n"
}


def test_a_second_root_that_leaves_slurm_nodes_out_is_refused_naming_them(
    inventories: InventoryFactory,
) -> None:
    """The defect: nodes under no leaf, "fixed" by a second root switch, were `valid`; slurmctld then
    warns `TOPOLOGY: no switch can reach all nodes` and never places a job across the two."""
    directory = newcomer(inventories, SECOND_ROOT)
    assert problems(directory) == [
        f"{CLUSTER_FILE}:28: cluster.fabric.tree: Slurm's nodes hang under 2 root switches, so no switch "
        "reaches them all (slurmctld: `no switch can reach all nodes`; no job spans two roots): root "
        "`spine` leaves out l40s-[01-08] (under `spine2`); put the roots under one switch (the one that "
        "joins them), or set `fabric.separate_trees: true` if they are apart on purpose"
    ]


def test_separate_trees_on_purpose_are_a_warning(inventories: InventoryFactory) -> None:
    directory = newcomer(inventories, {**SECOND_ROOT, "  fabric:\n": "  fabric:\n    separate_trees: true\n"})
    cluster = load_cluster(directory)
    assert [str(w).removeprefix(str(directory) + "/") for w in layer_warnings(cluster)] == [
        f"{CLUSTER_FILE}:28: cluster.fabric.separate_trees: Slurm's nodes hang under 2 root switches, so no "
        "switch reaches them all (slurmctld: `no switch can reach all nodes`; no job spans two roots): root "
        "`spine` leaves out l40s-[01-08] (under `spine2`) (separate on purpose, as set here)"
    ]
    proc = run_cli("validate", str(directory))
    assert proc.returncode == 0 and "warning: " in proc.stderr and "separate on purpose" in proc.stderr


def test_kubernetes_nodes_under_a_root_of_their_own_are_fine(inventories: InventoryFactory) -> None:
    """Only Slurm reads the switch tree: Kubernetes' rack under its own root splits no Slurm cluster."""
    own_root = {
        "      spine: [leaf-r1, leaf-r2, leaf-r3, leaf-l40s]\n": "      spine: [leaf-r1, leaf-r2, leaf-l40s]\n      k8s-spine: [leaf-r3]\n"
    }
    load_cluster(newcomer(inventories, own_root))


# --- a host in two groups ----------------------------------------------------------------------


def test_a_host_in_two_groups_is_reported_where_hosts_yml_lists_it_again(
    inventories: InventoryFactory,
) -> None:
    """The defect: reported at cluster.yml (cluster.nodes), not at the hosts.yml line of the mistake."""
    directory = newcomer(
        inventories,
        hosts_edits={
            "            h200-r3-[01:16]:\n": "            h200-r3-[01:16]:\n            h200-r2-16:\n"
        },
    )
    assert problems(directory) == [
        "hosts.yml:26: all.children.h200.children.h200_r3.hosts.h200-r2-16: host `h200-r2-16` is listed in "
        "group `h200_r3` here and in group `h200_r2` (line 22); cluster.nodes gives both groups their "
        "hosts (cluster.nodes[1] `h200_r2`, cluster.nodes[2] `h200_r3`): list each host in one of them"
    ]


def test_a_group_listed_with_its_parent_is_still_a_cluster_yml_mistake(inventories: InventoryFactory) -> None:
    directory = newcomer(
        inventories,
        {
            "    - {group: l40s, type: l40s, owner: slurm}\n": "    - {group: l40s, type: l40s, owner: slurm}\n    - {group: h200, type: h200, owner: slurm}\n"
        },
    )
    found = problems(directory)
    assert found and all(p.startswith(f"{CLUSTER_FILE}:27: cluster.nodes[4].group: ") for p in found), found
