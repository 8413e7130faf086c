"""A 2026 GPU fleet written from the README alone (issue 37): the input a newcomer gets wrong and
the day-2 changes they make, each reported where it was written with what to do (exit 2), or done
right; never a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpucluster.errors import InventoryError
from gpucluster.layers import load_cluster
from tests.conftest import InventoryFactory, run_cli
from tests.fleet import NEWCOMER_CLUSTER, NEWCOMER_HOSTS, edit

CLUSTER_FILE = "group_vars/all/cluster.yml"


def problems(directory: Path) -> list[str]:
    with pytest.raises(InventoryError) as info:
        load_cluster(directory)
    return [str(p).removeprefix(str(directory) + "/") for p in info.value.problems]


def test_a_leaf_switch_whose_group_was_emptied_is_named_not_a_crash(inventories: InventoryFactory) -> None:
    """Decommissioning a scalable unit by emptying its group: KeyError 'su2-leaf', exit 1, before."""
    directory = inventories.copy_example("superpod")
    hosts = directory / "hosts.yml"
    text = hosts.read_text(encoding="utf-8")
    emptied = text.replace(
        "        dgx_su2:\n          hosts:\n            dgx[033:064]:\n",
        "        dgx_su2:\n          hosts: {}\n",
    )
    assert emptied != text
    hosts.write_text(emptied, encoding="utf-8")
    found = problems(directory)
    assert (
        f"{CLUSTER_FILE}:71: cluster.fabric.tree.su2-leaf[0]: group `dgx_su2` has no hosts: remove it here "
        f"(hosts decommissioned), or give it hosts in {directory}/hosts.yml" in found
    )
    proc = run_cli("validate", str(directory))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "KeyError" not in proc.stderr


# --- input a newcomer gets wrong (item 9) ---------------------------------------------------------


def newcomer(
    inventories: InventoryFactory,
    cluster_edits: dict[str, str] | None = None,
    hosts_edits: dict[str, str] | None = None,
) -> Path:
    return inventories.make(
        edit(NEWCOMER_HOSTS, hosts_edits or {}), edit(NEWCOMER_CLUSTER, cluster_edits or {}), name="acme"
    )


def test_state_on_a_system_directory_is_not_told_to_mount_it(inventories: InventoryFactory) -> None:
    """Before: `e.g. {name: slurm-state, mount: /var, ...}`, which the storage checks then refuse."""
    directory = newcomer(
        inventories, {"state_save_location: /shared/slurm/state": "state_save_location: /var/lib/slurm/state"}
    )
    (found,) = problems(directory)
    assert found.startswith(
        f"{CLUSTER_FILE}:6: cluster.slurm.state_save_location: /var/lib/slurm/state is on no filesystem"
    )
    assert "mount: /var" not in found
    assert (
        "move it onto a shared filesystem outside the system's directories (e.g. state_save_location: /shared/slurm/statesave"
        in found
    )


def test_a_quoted_yes_is_not_a_boolean(inventories: InventoryFactory) -> None:
    """Before: `exclusive: "yes"` was taken as true."""
    directory = newcomer(inventories, {"exclusive: true": 'exclusive: "yes"'})
    assert problems(directory) == [
        f"{CLUSTER_FILE}:35: cluster.partitions[0].exclusive: 'yes' is not true or false: write `true` or "
        "`false`, unquoted"
    ]


def test_one_controller_named_alone_of_its_group_is_refused(inventories: InventoryFactory) -> None:
    """Before: `controller: ctl01` was valid and ctl02, grouped with it, silently ran no backup."""
    directory = newcomer(inventories, {"controller: [ctl01, ctl02]": "controller: ctl01"})
    assert problems(directory) == [
        f"{CLUSTER_FILE}:5: cluster.slurm.controller: one controller, `ctl01`, where {directory}/hosts.yml "
        "groups it in `controllers` with ctl02, which Slurm gives no part: to make it a backup, list it "
        "after the primary (`controller: [ctl01, ctl02]`), or write `controller: [ctl01]` to run no backup"
    ]
    # Said as a list, one controller is what is meant.
    load_cluster(newcomer(inventories, {"controller: [ctl01, ctl02]": "controller: [ctl01]"}))


def test_a_group_where_controllers_belong_names_its_hosts(inventories: InventoryFactory) -> None:
    directory = newcomer(inventories, {"controller: [ctl01, ctl02]": "controller: controllers"})
    assert problems(directory) == [
        f"{CLUSTER_FILE}:5: cluster.slurm.controller[0]: `controllers` is a group of {directory}/hosts.yml: "
        "name the controllers themselves, the primary first (e.g. `controller: [ctl01, ctl02]`)"
    ]


def test_numbers_past_what_slurm_reads_are_refused(inventories: InventoryFactory) -> None:
    """Before: RealMemory=99999999999999999999999999999 was rendered."""
    directory = newcomer(inventories, {"memory_mb: 512000": "memory_mb: 99999999999999999999999999999"})
    assert problems(directory) == [
        f"{CLUSTER_FILE}:20: cluster.node_types.l40s.memory_mb: 99999999999999999999999999999 is more than "
        "1099511627776, the most this key takes"
    ]
    directory = newcomer(inventories, {"cores_per_socket: 32": "cores_per_socket: 70000"})
    assert problems(directory) == [
        f"{CLUSTER_FILE}:18: cluster.node_types.l40s.cores_per_socket: 70000 is more than 65533, the most this key takes"
    ]


def test_a_host_name_slurm_and_dns_cannot_hold_is_refused(inventories: InventoryFactory) -> None:
    """Before: `lœs-09` was rendered into slurm.conf."""
    directory = newcomer(
        inventories, hosts_edits={"        l40s-[01:08]:\n": "        l40s-[01:08]:\n        lœs-09:\n"}
    )
    assert problems(directory) == [
        "hosts.yml:29: all.children.l40s.hosts.lœs-09: host name `lœs-09` holds `œ`: host names are ASCII "
        "letters, digits, `-`, `.` and `_` (Slurm, DNS and Kubernetes name nodes by them); rename it"
    ]


def test_render_into_a_file_is_a_usage_error(inventories: InventoryFactory) -> None:
    """Before: `error: FileExistsError: ...`, exit 1."""
    directory = newcomer(inventories)
    target = directory / "hosts.yml"
    before = target.read_text(encoding="utf-8")
    proc = run_cli("render", str(directory), "--out", str(target))
    assert proc.returncode == 2, proc
    assert f"--out {target} is a file: name a directory (made if missing)" in proc.stderr
    assert "FileExistsError" not in proc.stderr and target.read_text(encoding="utf-8") == before


def test_validate_given_hosts_yml_names_the_directory(inventories: InventoryFactory) -> None:
    """Before: `.../hosts.yml: inventory directory not found`."""
    directory = newcomer(inventories)
    proc = run_cli("validate", str(directory / "hosts.yml"))
    assert proc.returncode == 2
    assert (
        f"{directory}/hosts.yml: is a file: give the inventory directory (`{directory}`), the one that holds "
        "hosts.yml and group_vars/" in proc.stderr
    )


def test_a_control_character_is_reported_at_its_line(inventories: InventoryFactory) -> None:
    """Before: `YAML error: unacceptable character #x0007 ... position 19`, no line."""
    directory = newcomer(inventories, {"name: acme": "name: ac\x07me"})
    assert problems(directory) == [
        f"{CLUSTER_FILE}:2: column 11: the character U+0007 is not allowed in YAML (a control character): "
        "remove it (an editor may show it as ^ and a letter, or not at all)"
    ]


def test_a_misindented_list_item_says_indentation(inventories: InventoryFactory) -> None:
    """Before: `did not find expected '-' indicator`, no word of indentation."""
    directory = newcomer(
        inventories,
        {
            '    - {name: dev, nodes: [l40s], max_time: "08:00:00"}': '      - {name: dev, nodes: [l40s], max_time: "08:00:00"}'
        },
    )
    assert problems(directory) == [
        f"{CLUSTER_FILE}:36: YAML syntax error at column 7: did not find expected '-' indicator (indentation: "
        "line 36 starts at column 7, but the list that begins at line 35 has its items (`- `) at column 5: "
        "give every entry of one list the same indentation, and indent what belongs to an entry further "
        "than the entry)"
    ]


def test_a_host_in_two_groups_is_one_problem(inventories: InventoryFactory) -> None:
    """Before: also `cluster.partitions: host(s) in no partition: l40s-[02-08]` and the owner of
    l40s-01 in the partition: the same mistake three times, two of them false."""
    directory = newcomer(
        inventories,
        hosts_edits={
            "            h200-r3-[01:16]:\n": "            h200-r3-[01:16]:\n            l40s-01:\n"
        },
    )
    (found,) = problems(directory)
    assert found.startswith(
        "hosts.yml:29: all.children.l40s.hosts.l40s-[01:08]: host `l40s-01` is listed in group `l40s`"
    )


def test_show_in_a_pipe_cuts_no_value() -> None:
    """Before: values over 90 characters ended in `...` whatever the output."""
    proc = run_cli("show", "inventories/superpod")
    assert proc.returncode == 0
    assert "..." not in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) > 130


# --- monitoring (item 8) --------------------------------------------------------------------------


def test_a_monitoring_host_of_its_own_is_accepted_and_scraped(inventories: InventoryFactory) -> None:
    """Before: `host mon01 has no part in cluster.yml`; the NFS server had no node-exporter target."""
    from gpucluster.monitoring.model import monitoring_of
    from gpucluster.monitoring.targets import every_host, host_labels

    directory = newcomer(
        inventories,
        {"  kubernetes:\n": "  monitoring:\n    host: mon01\n  kubernetes:\n"},
        {"    nfs:\n": "    monitoring:\n      hosts:\n        mon01:\n    nfs:\n"},
    )
    cluster = load_cluster(directory)
    monitoring = monitoring_of(cluster)
    assert monitoring is not None
    hosts = every_host(cluster, monitoring)
    assert {"mon01", "nfs01", "dbd01", "login01", "ctl01", "ctl02"} <= set(hosts)
    assert host_labels(cluster, monitoring, "nfs01")["role"] == "storage"
    assert host_labels(cluster, monitoring, "mon01")["role"] == "monitoring"


def test_a_host_with_no_part_names_the_monitoring_host_among_the_parts(inventories: InventoryFactory) -> None:
    directory = newcomer(
        inventories,
        {"  kubernetes:\n": "  monitoring:\n    host: login01\n  kubernetes:\n"},
        {"    nfs:\n": "    spare:\n      hosts:\n        spare01:\n    nfs:\n"},
    )
    assert problems(directory) == [
        f"hosts.yml:14: all.children.spare.hosts.spare01: host `spare01` has no part in {directory}/{CLUSTER_FILE}: "
        "in no group of cluster.nodes, and no controller, login, accounting, REST API, monitoring or storage "
        "host (give them one, or remove them)"
    ]


# --- plan is one voice (item 5) ------------------------------------------------------------------


def test_a_change_that_ends_jobs_gets_the_steps_that_empty_the_cluster(inventories: InventoryFactory) -> None:
    """Before: `ENDS JOBS ... let the cluster empty first`, then one step and an overall line
    saying that running jobs survive, with no drain and no wait."""
    from gpucluster.changes.moves import Action
    from gpucluster.changes.plan import make_plan, text_lines

    old = load_cluster(newcomer(inventories))
    new = load_cluster(
        inventories.make(
            NEWCOMER_HOSTS,
            edit(
                NEWCOMER_CLUSTER,
                {
                    "    login: [login01]\n": "    login: [login01]\n    extra: {SwitchType: switch/nvidia_imex}\n"
                },
            ),
            name="imex",
        )
    )
    result = make_plan(old, new)
    assert [s.action for s in result.steps] == [
        Action.STOP_PLACING,
        Action.WAIT_EMPTY,
        Action.APPLY,
        Action.RESUME,
    ]
    lines = text_lines(result)
    assert lines[0].startswith("ENDS JOBS: cluster.slurm.extra.SwitchType")
    assert 'state=drain reason="gpucluster: emptied for a change that ends jobs"' in result.steps[0].text
    assert "wait until `squeue --noheader` prints nothing" in result.steps[1].text
    assert "-e gpucluster_end_jobs=true" in result.steps[2].text
    assert "state=resume" in result.steps[3].text
    # One voice: nothing says that the jobs survive, and the last line says that they end.
    assert not any("survive" in line or "unaffected" in line for line in lines), lines
    assert lines[-1].startswith(
        "overall: restart: ENDS JOBS: cluster.slurm.extra.SwitchType ends every job still in the cluster "
        "when it is applied: the cluster is emptied first (steps 1-2)"
    )


def test_a_refused_plan_prints_the_refusal_and_no_steps(inventories: InventoryFactory) -> None:
    """Before: the refusal, then the steps and `overall: ... running jobs survive`."""
    old = newcomer(inventories)
    new = inventories.make(
        NEWCOMER_HOSTS, edit(NEWCOMER_CLUSTER, {'version: "26.05"': 'version: "24.11"'}), name="down"
    )
    proc = run_cli("plan", str(old), str(new))
    assert proc.returncode == 2
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(
        f"REFUSED: {new}/{CLUSTER_FILE}:4: cluster.slurm.version: Slurm cannot go back"
    )
    assert lines[1].startswith("nothing to apply: Slurm cannot make this change")
    assert len(lines) == 2
    document = run_cli("plan", "--json", str(old), str(new))
    import json

    data = json.loads(document.stdout)
    assert data["refused"] and data["steps"] == [] and data["overall"] is None


# --- upgrades (item 6) ----------------------------------------------------------------------------


def test_an_upgrade_rebuilds_pyxis_before_slurmd_restarts_and_restarts_nothing_twice(
    inventories: InventoryFactory,
) -> None:
    """Before: no Pyxis rebuild, and a last step installing the files and restarting every daemon a
    second time, the removed topology.conf listed as installed."""
    from gpucluster.changes.plan import make_plan

    with_pyxis = {"    login: [login01]\n": "    login: [login01]\n    containers: {pyxis: {}}\n"}
    old = load_cluster(
        inventories.make(
            NEWCOMER_HOSTS,
            edit(NEWCOMER_CLUSTER, {**with_pyxis, 'version: "26.05"': 'version: "24.11"'}),
            name="old",
        )
    )
    new = load_cluster(inventories.make(NEWCOMER_HOSTS, edit(NEWCOMER_CLUSTER, with_pyxis), name="new"))
    result = make_plan(old, new)
    assert result.upgrade is not None
    procedures = [s.procedure for s in result.steps]
    # No daemon restarted twice: the upgrade installs the new files, no playbooks/slurm.yml step follows.
    assert "slurm" not in procedures
    # Per batch: packages and files, then Pyxis rebuilt on its hosts, then slurmd restarted.
    batches = [i for i, p in enumerate(procedures) if p == "upgrade:slurmd"]
    assert len(batches) == 10
    for i in batches:
        assert procedures[i + 1 : i + 3] == ["upgrade:spank", "upgrade:slurmd-restart"]
        assert result.steps[i].hosts == result.steps[i + 1].hosts == result.steps[i + 2].hosts
        assert "slurmd not restarted yet" in result.steps[i].text
        assert "rebuild Pyxis 0.24.0 against 26.05's spank.h" in result.steps[i + 1].text
    # The controllers after their own upgrade, the login hosts after theirs.
    assert procedures.index("upgrade:spank-controllers") > procedures.index(
        "upgrade:slurmctld-backups-started"
    )
    assert procedures.index("upgrade:spank-login") == procedures.index("upgrade:login") + 1
    # Files the new release no longer reads are said removed, not installed.
    (primary,) = [s for s in result.steps if s.procedure == "upgrade:slurmctld"]
    assert "installs slurm/slurm.conf, slurm/topology.yaml; removes slurm/topology.conf" in primary.text
    assert set(primary.files) == {"slurm/slurm.conf", "slurm/topology.conf", "slurm/topology.yaml"}


# --- waits bounded by what can run (item 4) ------------------------------------------------------


def _steps(
    inventories: InventoryFactory, cluster_edits: dict[str, str], hosts_edits: dict[str, str] | None = None
) -> list[Any]:
    from gpucluster.changes.plan import make_plan

    old = load_cluster(newcomer(inventories))
    new = load_cluster(
        inventories.make(
            edit(NEWCOMER_HOSTS, hosts_edits or {}), edit(NEWCOMER_CLUSTER, cluster_edits), name="changed"
        )
    )
    return make_plan(old, new).steps


def test_a_rename_waits_as_long_as_its_jobs_may_run_and_keeps_both_partitions_first(
    inventories: InventoryFactory,
) -> None:
    """Before: the wait stopped at 3600 s whatever MaxTime said (dev: 8 h), and the new partition
    lived only in the running slurmctld until the files changed."""
    from gpucluster.changes.moves import Action

    steps = _steps(inventories, {"{name: dev, nodes": "{name: interactive, nodes"})
    actions = [s.action for s in steps]
    assert actions[:5] == [
        Action.PREPARE,
        Action.STOP_PLACING,
        Action.KEEP,
        Action.MOVE_JOBS,
        Action.WAIT_EMPTY,
    ]
    assert "every controller's slurm.conf gets interactive" in steps[2].text
    assert steps[2].hosts == ("ctl01", "ctl02")
    assert (
        "bounded by the longest MaxTime, 08:00:00 (dev): the playbook waits as long as its jobs may run"
        in steps[4].text
    )
    assert "3600" not in steps[4].text


def test_a_partition_of_unlimited_jobs_says_how_to_wait_longer(inventories: InventoryFactory) -> None:
    from gpucluster.changes.plan import make_plan

    dev = '{name: dev, nodes: [l40s], max_time: "08:00:00"}'
    old = load_cluster(
        inventories.make(
            NEWCOMER_HOSTS, edit(NEWCOMER_CLUSTER, {dev: "{name: dev, nodes: [l40s]}"}), name="a"
        )
    )
    new = load_cluster(
        inventories.make(
            NEWCOMER_HOSTS, edit(NEWCOMER_CLUSTER, {dev: "{name: interactive, nodes: [l40s]}"}), name="b"
        )
    )
    (wait,) = [s for s in make_plan(old, new).steps if s.action.value == "wait-empty"]
    assert (
        "dev: MaxTime UNLIMITED, so its jobs may run for ever: the playbook waits 3600 s, then lists what still "
        "runs and stops before any file changes; -e slurm_common_leave_timeout=<seconds> waits longer"
    ) in wait.text


def test_nodes_removed_are_waited_for_as_long_as_their_partitions_let_jobs_run(
    inventories: InventoryFactory,
) -> None:
    steps = _steps(inventories, {}, {"            h200-r2-[01:16]:\n": "            h200-r2-[01:15]:\n"})
    (wait,) = [s for s in steps if s.action.value == "wait-empty"]
    assert "bounded by the longest MaxTime, 7-00:00:00 (train)" in wait.text


# --- topology as sites build it (item 3) ----------------------------------------------------------


def fleet26(
    inventories: InventoryFactory, edits: dict[str, str] | None = None, name: str = "fleet26"
) -> Path:
    from tests.fleet import FLEET_2026_CLUSTER, FLEET_2026_HOSTS

    return inventories.make(FLEET_2026_HOSTS, edit(FLEET_2026_CLUSTER, edits or {}), name=name)


def test_blocks_only_where_there_are_nvlink_domains_and_a_topology_per_partition(
    inventories: InventoryFactory,
) -> None:
    """Before: every host had to be in a block (the L40S and the Kubernetes H200s in fake ones, the
    H200s then labelled with a false NVLink block) and one base size served every block (8, not 18)."""
    from gpucluster.rendering import render_files

    cluster = load_cluster(fleet26(inventories))
    files = render_files(cluster)
    topology = files["slurm/topology.yaml"]
    assert "block_sizes: [18, 36]" in topology and "l40s" not in topology.split("- topology: fabric-tree")[0]
    partitions = [
        line for line in files["slurm/slurm.conf"].splitlines() if line.startswith("PartitionName=")
    ]
    assert "Topology=nvlink-blocks" in partitions[0] and "Topology=fabric-tree" in partitions[1]
    # No Kubernetes host is in a block: none carries the label, and Kueue's topology has no block level.
    kube = "\n".join(text for path, text in files.items() if path.startswith("kubernetes/"))
    assert "gpucluster.io/nvlink-block" not in kube


def test_a_partition_whose_nodes_are_in_no_block_of_its_topology_is_refused(
    inventories: InventoryFactory,
) -> None:
    directory = fleet26(inventories, {", topology: fabric-tree, tenants": ", tenants"})
    assert problems(directory) == [
        f"{CLUSTER_FILE}:45: cluster.partitions[1]: l40s-[01-08] are in no block of `nvlink-blocks`, the topology "
        "this partition's jobs are placed by: give the partition `topology: fabric-tree` (or `flat`), set "
        "fabric.default to one that holds them, or put them in blocks"
    ]


def test_a_partition_topology_is_one_the_fabric_defines(inventories: InventoryFactory) -> None:
    """Before: `extra: {Topology: ...}` was written as given, whatever topology.yaml defined."""
    directory = fleet26(inventories, {"topology: fabric-tree, tenants": "topology: fabric_tree, tenants"})
    assert problems(directory) == [
        f"{CLUSTER_FILE}:45: cluster.partitions[1].topology: `fabric_tree` is no topology of this fabric (it has "
        "nvlink-blocks, fabric-tree, flat); did you mean `fabric-tree`?"
    ]
    directory = fleet26(
        inventories,
        {", topology: fabric-tree, tenants": ", extra: {Topology: fabric-tree}, tenants"},
        "extra",
    )
    assert (
        f"{CLUSTER_FILE}:45: cluster.partitions[1].extra.Topology: Topology is `topology` here: set it there"
        in problems(directory)
    )


def test_block_sets_have_sizes_of_their_own(inventories: InventoryFactory) -> None:
    from gpucluster.rendering import render_files

    directory = fleet26(
        inventories,
        {
            "    block_sizes: [18, 36]\n": "    block_sets:\n      nvl72: {blocks: [nvl72-r1], block_sizes: [18]}\n"
            "      nvl72-b: {blocks: [nvl72-r2], block_sizes: [9, 18]}\n",
            "{name: train, nodes: [gb200]": "{name: train, nodes: [rack1]",
            "topology: nvlink-blocks": "topology: nvl72",
            "  qos:\n": "    - {name: train-b, nodes: [rack2], topology: nvl72-b}\n  qos:\n",
        },
    )
    topology = render_files(load_cluster(directory))["slurm/topology.yaml"]
    assert "- topology: nvl72\n  cluster_default: true\n  block:\n    block_sizes: [18]" in topology
    assert "- topology: nvl72-b\n  cluster_default: false\n  block:\n    block_sizes: [9, 18]" in topology


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        (
            {
                'count: 4, devices: "/dev/nvidia[0-3]"}\n    h200': 'count: 8, devices: "/dev/nvidia[0-7]"}\n    h200'
            },
            "15: cluster.node_types.gb200-tray.gpus.count: an NVL72 compute tray has 4 GPUs (NVL72: 18 trays x 4 "
            "GPUs), not 8: each tray is one node of 4",
        ),
        (
            {"nvl72-r1: [rack1]\n      nvl72-r2: [rack2]": "nvl72-r1: [gb200]"},
            "39: cluster.fabric.blocks.nvl72-r1: 36 NVL72 trays (144 GPUs) in one block: an NVL72 NVLink domain is at "
            "most 18 trays of 4 GPUs (72 GPUs, one rack): one block per rack",
        ),
    ],
)
def test_nvlink_domains_the_gpus_cannot_form_are_refused(
    inventories: InventoryFactory, edits: dict[str, str], expected: str
) -> None:
    """Before: an NVL72 `rack` of 72 trays (288 GPUs) and a GB200 tray of 8 GPUs were accepted."""
    assert f"{CLUSTER_FILE}:{expected}" in problems(fleet26(inventories, edits))


def test_what_24_11_cannot_say_is_refused_or_said(inventories: InventoryFactory) -> None:
    """Before: on 24.11 the switch tree was dropped without a word."""
    from gpucluster.layers import layer_warnings
    from tests.fleet import FLEET_2026_ON_24_11

    cluster = load_cluster(fleet26(inventories, FLEET_2026_ON_24_11))
    (warning,) = [str(w) for w in layer_warnings(cluster) if "cluster.fabric.default" in str(w)]
    assert "Slurm 24.11 reads one topology (topology.conf): it gets the switch tree" in warning
    assert "set fabric.default: block to give Slurm that one instead" in warning
    refused = fleet26(inventories, {'version: "26.05"': 'version: "24.11"'}, "refused")
    found = problems(refused)
    assert any(
        "cluster.partitions[0].topology: Slurm 24.11 reads one topology plugin (topology.conf): a partition "
        "cannot choose one" in p
        for p in found
    ), found
    # The blocks as its one topology leave the L40S nodes, in no block, without jobs: said with the choices.
    blocks = fleet26(inventories, {**FLEET_2026_ON_24_11, "    default: tree\n": ""}, "blocks")
    (only,) = problems(blocks)
    assert "l40s-[01-08] are in no block of `nvlink-blocks`" in only and "set fabric.default: tree" in only


def test_plan_lists_a_change_of_the_block_sizes_slurm_gets(inventories: InventoryFactory) -> None:
    """Before: moving nodes changed BlockSizes for the whole cluster, seen only in the file diff."""
    from gpucluster.changes.plan import make_plan

    flat = {"    block_sizes: [18, 36]\n": "", "topology: nvlink-blocks": "topology: flat"}
    old = load_cluster(fleet26(inventories, flat, "old"))
    new = load_cluster(
        fleet26(inventories, {**flat, "nvl72-r2: [rack2]": "nvl72-r2: [gb200-r2-01, gb200-r2-02]"}, "new")
    )
    changes = {c.path: (c.old, c.new) for c in make_plan(old, new).changes}
    assert changes["cluster.fabric.topologies.nvlink-blocks.block_sizes"] == ([18], [2])


# --- the trial's slurmdbd and programs (item 1; the daemons: tests/slurm/test_fleet_trial.py) ------


def test_the_trial_seeds_what_the_accounts_role_adds(inventories: InventoryFactory) -> None:
    """The sacctmgr commands come from the collection's slurm_associations module and the rendered
    accounts.yaml: a new database gets the cluster, the QOS but `normal` (slurmdbd makes it), the
    accounts and the users."""
    from gpucluster.rendering import render_files
    from gpucluster.trial import seeding

    cluster = load_cluster(fleet26(inventories))
    commands, notes = seeding.seed_commands(render_files(cluster, only=["slurm"])["slurm/accounts.yaml"])
    assert notes == []
    assert [c[:3] for c in commands] == [
        ["add", "cluster", "fleet26"],
        ["add", "qos", "interactive"],
        ["add", "account", "product"],
        ["add", "account", "research"],
        ["add", "account", "serving"],
        ["add", "user", "alice"],
        ["add", "user", "bob"],
        ["add", "user", "carol"],
    ]
    assert "GrpTRES=gres/gpu=144" in commands[3]


def test_the_trial_installs_gpuclusters_programs_and_stands_in_for_the_sites(
    inventories: InventoryFactory,
) -> None:
    from gpucluster.render.health import HEALTH_PROGRAM
    from gpucluster.rendering import render_files
    from gpucluster.trial import seeding

    site = {
        "    login: [login01, login02]\n": "    login: [login01, login02]\n"
        "    power_save: {resume_program: /opt/site/resume, suspend_program: /opt/site/suspend}\n"
        "    health: {interval: 300}\n"
    }
    cluster = load_cluster(fleet26(inventories, site))
    found = seeding.programs(cluster, render_files(cluster, only=["slurm"])["slurm/slurm.conf"])
    assert found[HEALTH_PROGRAM][:2] == ("HealthCheckProgram", "own")
    assert found[HEALTH_PROGRAM][2].startswith("#!")
    assert found["/opt/site/resume"][:2] == ("ResumeProgram", "site")
    assert "trial-stand-ins.log" in found["/opt/site/resume"][2]
    assert seeding.stand_in_notes("stand-in ResumeProgram /opt/site/resume\n") == [
        "trial: ResumeProgram=/opt/site/resume is the site's program: an executable stand-in that only logs ran "
        "in its place"
    ]
