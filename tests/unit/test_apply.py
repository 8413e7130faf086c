"""`gpucluster apply OLD NEW`: the plan's steps as ansible-playbook runs, each limited to the hosts
its step changes. Config-only changes reach the controllers only (configless Slurm), a node-software
change its node type's hosts, a change that ends jobs stops at the emptying steps first; on random
pairs of inventories (the plan's own, tests/unit/test_plan_pairs.py) every changed file is installed
by some run, every run's playbook exists and every host of its limit is in the inventory. Nothing
here runs a playbook: the runs are the pure function's, and `--dry-run`'s."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

from gpucluster.changes.apply import ByHand, Run, apply_actions, from_step, host_groups, playbook_path
from gpucluster.changes.plan import make_plan
from gpucluster.changes.playbooks import PROCEDURES
from gpucluster.changes.steps import route
from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from tests.conftest import REPO, InventoryFactory, run_cli
from tests.unit.test_moves import lab_pair
from tests.unit.test_plan import edited
from tests.unit.test_plan_pairs import pairs, write

PAIRS = int(os.environ.get("GPUCLUSTER_APPLY_PAIRS", "60"))


def actions_of(old_dir: Path, new_dir: Path) -> list[Run | ByHand]:
    old, new = load_cluster(old_dir), load_cluster(new_dir)
    old_files, new_files = render_files(old), render_files(new)
    return apply_actions(old, new, make_plan(old, new, old_files, new_files), new_files)


def lab_change(inventories: InventoryFactory, edits: dict[str, str]) -> list[Run | ByHand]:
    return actions_of(edited(inventories, name="old"), edited(inventories, edits, name="new"))


def limits(actions: list[Run | ByHand]) -> list[tuple[str, set[str]]]:
    return [(a.playbook, set(a.hosts)) for a in actions if isinstance(a, Run)]


CONTROLLERS = {"localhost", "ctl01", "ctl02"}


def test_a_partition_limit_reaches_only_the_controllers(inventories: InventoryFactory) -> None:
    edits = {
        '{name: gpu, nodes: [gpu_nodes], default: true, max_time: "1-00:00:00"}': '{name: gpu, nodes: [gpu_nodes], default: true, max_time: "12:00:00"}'
    }
    assert limits(lab_change(inventories, edits)) == [("playbooks/slurm.yml", CONTROLLERS)]


def test_a_node_added_to_a_partition_reaches_only_the_controllers(inventories: InventoryFactory) -> None:
    # leaf1's nodes join a second partition.
    partition = '{name: gpu, nodes: [gpu_nodes], default: true, max_time: "1-00:00:00"}'
    edits = {partition: partition + '\n    - {name: short, nodes: [leaf1_nodes], max_time: "1:00:00"}'}
    # The nodes' monitoring targets carry their partitions: Prometheus (on login01) gets the new labels.
    assert limits(lab_change(inventories, edits)) == [
        ("playbooks/slurm.yml", CONTROLLERS),
        ("playbooks/monitoring.yml", {"localhost", "login01"}),
    ]


def test_a_tenant_quota_and_a_qos_reach_the_first_controller(inventories: InventoryFactory) -> None:
    for edits in (
        {"gpu_quota: 16\n      gpu_limit: 24": "gpu_quota: 8\n      gpu_limit: 24"},
        {"{name: capped, max_gpus_per_user: 2}": "{name: capped, max_gpus_per_user: 4}"},
    ):
        actions = lab_change(inventories, edits)
        assert limits(actions) == [("playbooks/slurm.yml", {"localhost", "ctl01"})], edits
        assert actions[0].hosts[0] == "localhost"
        for directory in ("old", "new"):
            shutil.rmtree(inventories.root / directory)


def test_without_configless_slurm_conf_goes_to_every_slurm_host(inventories: InventoryFactory) -> None:
    both = {"    configless: true\n": "    configless: false\n"}
    old = edited(inventories, both, name="old")
    new = edited(
        inventories,
        {
            **both,
            'max_time: "1-00:00:00"}': 'max_time: "2-00:00:00"}',
        },
        name="new",
    )
    [(playbook, hosts)] = limits(actions_of(old, new))
    assert playbook == "playbooks/slurm.yml"
    # Every host keeps slurm.conf: controllers, the accounting host, the nodes and login01.
    assert hosts == CONTROLLERS | {"login01", "gpu01", "gpu02", "gpu03", "gpu04"}


# A second node type, without node software, for the hosts of the second scalable unit.
PLAIN_TYPE = {
    "  node_types:\n": "  node_types:\n    dgx-plain:\n      sockets: 2\n      cores_per_socket: 56\n"
    "      threads_per_core: 2\n      memory_mb: 2000000\n"
    '      gpus: {model: h100, count: 8, devices: "/dev/nvidia[0-7]", memory_gb: 80}\n',
    "{group: dgx_su2, type: dgx-h100,": "{group: dgx_su2, type: dgx-plain,",
}


def test_a_driver_change_reaches_only_its_node_types_hosts(inventories: InventoryFactory) -> None:
    old = edited(inventories, PLAIN_TYPE, example="superpod", name="old")
    driver = {'version: "580.95.05"': 'version: "580.105.08"'}
    new = edited(inventories, {**PLAIN_TYPE, **driver}, example="superpod", name="new")
    runs = [a for a in actions_of(old, new) if isinstance(a, Run)]
    cluster = load_cluster(new)
    software = next(r for r in runs if r.playbook == "playbooks/gpu_nodes.yml")
    assert set(software.hosts) == {"localhost", *cluster.hosts_by_type["dgx-h100"]}
    assert not {"mgmt01", "mgmt02", "dbd01", "nfs01", *cluster.hosts_by_type["dgx-plain"]} & set(
        software.hosts
    )
    # The health check's settings name the driver: slurm/healthcheck.conf, which slurmctld does not
    # serve, on every Slurm host that keeps the Slurm files.
    slurm = next(r for r in runs if r.playbook == "playbooks/slurm.yml")
    assert "dbd01" not in slurm.hosts and "dgx033" in slurm.hosts


def test_a_change_that_ends_jobs_stops_to_empty_the_cluster_first(inventories: InventoryFactory) -> None:
    edits = {"    login: [login01]\n": "    login: [login01]\n    extra: {SwitchType: switch/nvidia_imex}\n"}
    actions = lab_change(inventories, edits)
    by_hand = [a for a in actions if isinstance(a, ByHand)]
    assert actions[0] == by_hand[0] and "state=drain" in by_hand[0].text
    assert actions[1] == by_hand[1] and "squeue --noheader" in by_hand[1].text
    assert actions[-1] == by_hand[-1] and "state=resume" in by_hand[-1].text
    runs = [a for a in actions if isinstance(a, Run)]
    assert runs and all(
        "gpucluster_end_jobs=true" in r.extra for r in runs if r.playbook == "playbooks/slurm.yml"
    )
    # After the drain by hand, apply goes on from the step after it.
    left = from_step(actions, by_hand[1].step + 1)
    assert isinstance(left[0], Run) and left[-1] == by_hand[-1]


def test_the_groups_are_those_of_the_rendered_files() -> None:
    cluster = load_cluster(REPO / "inventories" / "superpod")
    groups = host_groups(cluster, render_files(cluster))
    assert groups["nfs_servers"] == ["nfs01"]
    assert groups["slurm_dbd_hosts"] == ["dbd01"]
    assert len(groups["gpu_driver_hosts"]) == 128


@settings(max_examples=PAIRS, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=pairs())
def test_every_changed_file_is_installed_by_a_run_on_hosts_of_the_inventory(
    tmp_path_factory: Any, pair: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    root = tmp_path_factory.getbasetemp() / "apply-pairs"
    old_dir, new_dir = write(root, "old", pair[0]), write(root, "new", pair[1])
    old, new = load_cluster(old_dir), load_cluster(new_dir)
    old_files, new_files = render_files(old), render_files(new)
    plan = make_plan(old, new, old_files, new_files)
    actions = apply_actions(old, new, plan, new_files)
    known = {"localhost", *new.inventory.members("all")}
    ran = {n for a in actions if isinstance(a, Run) for n in a.steps}
    for action in actions:
        if isinstance(action, Run):
            assert playbook_path(action.playbook).is_file(), action.playbook
            assert action.hosts[0] == "localhost" and set(action.hosts) <= known, action
    for number, step in enumerate(plan.steps, 1):
        for rel in step.files:
            assert number in ran, f"{rel} (step {number}, {route(rel)}) is installed by no run"
            run = next(a for a in actions if isinstance(a, Run) and number in a.steps)
            assert run.playbook == PROCEDURES[step.procedure or ""].playbook


def test_dry_run_prints_the_plan_then_the_runs(inventories: InventoryFactory) -> None:
    old = edited(inventories, name="old")
    new = edited(
        inventories,
        {"{name: capped, max_gpus_per_user: 2}": "{name: capped, max_gpus_per_user: 3}"},
        name="new",
    )
    proc = run_cli("apply", "--dry-run", str(old), str(new))
    assert proc.returncode == 0, proc.stderr
    assert "steps (Slurm 26.05):" in proc.stdout
    assert f"ansible-playbook -i {new} playbooks/slurm.yml --limit localhost,ctl01" in proc.stdout


def test_without_a_terminal_or_yes_apply_refuses(inventories: InventoryFactory) -> None:
    old = edited(inventories, name="old")
    new = edited(
        inventories,
        {"{name: capped, max_gpus_per_user: 2}": "{name: capped, max_gpus_per_user: 3}"},
        name="new",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", "apply", str(old), str(new)],
        capture_output=True, text=True, cwd=REPO, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "--yes" in proc.stderr


def test_no_change_runs_nothing(inventories: InventoryFactory) -> None:
    old = edited(inventories, name="old")
    proc = run_cli("apply", "--yes", str(old), str(old))
    assert proc.returncode == 0, proc.stderr
    assert "apply: nothing to run" in proc.stdout


def test_an_inventory_dir_that_renders_otherwise_is_refused(inventories: InventoryFactory) -> None:
    old = edited(inventories, name="old")
    new = edited(
        inventories,
        {"{name: capped, max_gpus_per_user: 2}": "{name: capped, max_gpus_per_user: 3}"},
        name="new",
    )
    proc = run_cli("apply", "--dry-run", "--inventory-dir", str(old), str(old), str(new))
    assert proc.returncode == 2
    assert "renders other files than" in proc.stderr


def test_a_limit_restricts_the_groups_a_first_play_builds(tmp_path: Path) -> None:
    """What apply relies on, with the real ansible-playbook: hosts the first play adds to a group
    (add_host, as the playbooks' render plays do) are left out of later plays unless the limit names
    them, and the implicit localhost runs when the limit names it."""
    (tmp_path / "hosts.yml").write_text(
        "all:\n  hosts:\n" + "".join(f"    {h}: {{ansible_connection: local}}\n" for h in "abc")
    )
    (tmp_path / "play.yml").write_text(
        "- name: Group\n  hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - name: Add\n      ansible.builtin.add_host: {name: '{{ item }}', groups: built}\n"
        "      loop: [a, b, c]\n"
        "- name: On the group\n  hosts: built\n  gather_facts: false\n  tasks:\n"
        "    - name: Say\n      ansible.builtin.debug: {msg: 'on {{ inventory_hostname }}'}\n"
    )
    run = Run((1,), "play.yml", ("localhost", "b"))
    command = run.argv(tmp_path / "hosts.yml", str(Path(sys.executable).parent / "ansible-playbook"))
    proc = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '"msg": "on b"' in proc.stdout
    assert "on a" not in proc.stdout and "on c" not in proc.stdout


def test_nodes_leaving_slurm_are_drained_by_the_playbook_and_kubectl_stops_apply(
    inventories: InventoryFactory,
) -> None:
    """gpu04 from Slurm to Kubernetes: slurm_common drains it and waits for its jobs itself (the
    procedure nodes_leaving: no stop), claiming it in Kubernetes is kubectl's (a stop, by hand);
    the reverse move stops at kubectl cordon before anything runs."""
    old_dir, new_dir = lab_pair(inventories)
    actions = actions_of(old_dir, new_dir)
    first = actions[0]
    assert isinstance(first, Run) and first.playbook == "playbooks/slurm.yml", first
    assert "gpu04" in first.hosts  # the moving node stays in the inventory
    assert any(isinstance(a, ByHand) and "kubectl uncordon gpu04" in a.text for a in actions)
    back = actions_of(new_dir, old_dir)
    assert isinstance(back[0], Run) and back[0].playbook == "playbooks/kubernetes.yml"  # quotas lowered
    assert isinstance(back[1], ByHand) and back[1].text == "kubectl cordon gpu04"


def test_a_node_removed_is_left_out_of_the_limit(inventories: InventoryFactory) -> None:
    old = edited(inventories, name="old")
    # gpu04's 8 GPUs leave: one tenant's quota and limit shrink to the 24 left.
    shrunk = {"gpu_quota: 16\n      gpu_limit: 32": "gpu_quota: 8\n      gpu_limit: 24"}
    new = edited(inventories, shrunk, hosts_edits={"gpu[03:04]:": "gpu03:"}, name="new")
    actions = actions_of(old, new)
    assert all(isinstance(a, Run) for a in actions)
    slurm = actions[0]
    assert isinstance(slurm, Run) and slurm.playbook == "playbooks/slurm.yml" and slurm.steps[:2] == (1, 2)
    assert "gpu04" not in slurm.hosts and "gpu03" in slurm.hosts


def test_a_step_by_hand_first_stops_apply_before_any_run(inventories: InventoryFactory) -> None:
    """A change that ends jobs: the cluster is emptied by hand first, so `--yes` runs nothing and
    exits 4 with the step's text and the way to go on."""
    old = edited(inventories, name="old")
    new = edited(
        inventories,
        {"    login: [login01]\n": "    login: [login01]\n    extra: {SwitchType: switch/nvidia_imex}\n"},
        name="new",
    )
    proc = run_cli("apply", "--yes", str(old), str(new))
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "apply: stopped before step 1, which is done by hand: by hand: scontrol update" in proc.stderr
    assert f"gpucluster apply {old} {new} --from-step 2" in proc.stderr
    assert "apply: steps" not in proc.stdout  # no run started (the list of runs is indented)


def tagged(actions: list[Run | ByHand]) -> list[tuple[str, tuple[str, ...]]]:
    return [(a.playbook, a.tags) for a in actions if isinstance(a, Run)]


def test_slurm_files_or_accounts_alone_run_only_the_plays_tagged_for_them(
    inventories: InventoryFactory,
) -> None:
    """Issue 41: a partition's limit, a tenant's quota, a QOS: `--tags slurm_files` (the render,
    the live controllers, the files and their reconfigure, the accounts; no munge, users, slurmdbd
    or software plays)."""
    for edits in (
        {'default: true, max_time: "1-00:00:00"}': 'default: true, max_time: "12:00:00"}'},
        {"gpu_quota: 16\n      gpu_limit: 24": "gpu_quota: 8\n      gpu_limit: 24"},
        {"{name: capped, max_gpus_per_user: 2}": "{name: capped, max_gpus_per_user: 4}"},
    ):
        actions = lab_change(inventories, edits)
        assert tagged(actions) == [("playbooks/slurm.yml", ("slurm_files",))], edits
        run = actions[0]
        assert isinstance(run, Run) and run.argv("inv")[-2:] == ["--tags", "slurm_files"]
        for directory in ("old", "new"):
            shutil.rmtree(inventories.root / directory)


def test_a_change_another_play_installs_runs_the_whole_playbook(inventories: InventoryFactory) -> None:
    """The admins of node_ssh reach hosts/node_ssh.yaml (slurm_node_ssh's play); configless Slurm
    switched off restarts the daemons: no tags, every play."""
    for edits in (
        {"node_ssh: {admins: [ops]}": "node_ssh: {admins: [ops, bob]}"},
        {"    configless: true\n": "    configless: false\n"},
    ):
        actions = lab_change(inventories, edits)
        runs = [a for a in actions if isinstance(a, Run) and a.playbook == "playbooks/slurm.yml"]
        assert runs and all(r.tags == () for r in runs), (edits, actions)
        for directory in ("old", "new"):
            shutil.rmtree(inventories.root / directory)
