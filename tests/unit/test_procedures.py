"""Each kind of change has a procedure that loses no job, named by `gpucluster plan` with its policy
on the target release (issue 31, items 1 and 3), on the fleet a newcomer writes first (tests/fleet.py):
a partition renamed or removed, a controller removed, replaced or added, the accounting host and
the state moved, nodes moved from Kubernetes to Slurm; what cannot avoid ending jobs says so first."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import pytest

from gpucluster.changes.moves import Action
from gpucluster.changes.plan import make_plan, plan_schema, text_lines
from gpucluster.changes.procedures import partition_renames, scontrol_partition_args
from gpucluster.changes.records import Plan
from gpucluster.layers import load_cluster
from gpucluster.model.base import Owner, Update
from tests.conftest import InventoryFactory, run_cli
from tests.fleet import NEWCOMER_CLUSTER, NEWCOMER_HOSTS, edit

RENAME = {"{name: dev, nodes: [l40s]": "{name: interactive, nodes: [l40s]"}
# ctl02 leaves the cluster: out of cluster.yml and of hosts.yml.
NO_BACKUP = ({"controller: [ctl01, ctl02]": "controller: [ctl01]"}, {"ctl[01:02]": "ctl01"})
# Half of rack 3 goes from Kubernetes to Slurm's training partition, with the tenants' numbers.
R3_HALF_TO_SLURM = (
    {
        "    - {group: h200_r3, type: h200, owner: kubernetes}\n": (
            "    - {group: h200_r3a, type: h200, owner: slurm}\n    - {group: h200_r3b, type: h200, owner: kubernetes}\n"
        ),
        "{name: train, nodes: [h200_r1, h200_r2]": "{name: train, nodes: [h200_r1, h200_r2, h200_r3a]",
        "gpus: {slurm: {quota: 128, limit: 256}, kubernetes: {quota: 32, limit: 64}}": (
            "gpus: {slurm: {quota: 160, limit: 320}, kubernetes: {quota: 16, limit: 32}}"
        ),
        "gpus: {kubernetes: {quota: 96, limit: 128}}": "gpus: {kubernetes: {quota: 48, limit: 64}}",
    },
    {
        "        h200_r3:\n          hosts:\n            h200-r3-[01:16]:\n": (
            "        h200_r3:\n          children:\n            h200_r3a:\n              hosts:\n"
            "                h200-r3-[01:08]:\n            h200_r3b:\n              hosts:\n"
            "                h200-r3-[09:16]:\n"
        )
    },
)


def fleet(
    inventories: InventoryFactory,
    name: str,
    cluster_edits: dict[str, str] | None = None,
    hosts_edits: dict[str, str] | None = None,
) -> Path:
    directory = inventories.make(
        edit(NEWCOMER_HOSTS, hosts_edits or {}),
        edit(NEWCOMER_CLUSTER, cluster_edits or {}),
        name=f"{name}/acme",
    )
    return directory


def plan_of(inventories: InventoryFactory, old: Path, new: Path) -> Plan:
    result = make_plan(load_cluster(old), load_cluster(new))
    jsonschema.validate(result.as_dict(), plan_schema())
    return result


def steps_of(result: Plan) -> list[tuple[str, Action, Update | None]]:
    return [(str(s.scheduler), s.action, s.update) for s in result.steps]


# --- partitions --------------------------------------------------------------------------------------


def test_a_partition_renamed_is_moved_not_restarted(inventories: InventoryFactory) -> None:
    """The defect: `dev -> None [restart]`, `None -> interactive [restart]`, overall restart, `running
    jobs survive`; slurmctld fails the jobs of a partition its new configuration lacks."""
    old, new = fleet(inventories, "old"), fleet(inventories, "new", RENAME)
    result = plan_of(inventories, old, new)
    changes = {c.path: (c.update, c.procedure) for c in result.changes}
    assert changes == {
        "cluster.partitions.dev": (Update.RECONFIGURE, "partition renamed to interactive"),
        "cluster.partitions.interactive": (Update.RECONFIGURE, "partition renamed from dev"),
    }
    assert result.overall == Update.RECONFIGURE and result.ends_jobs == []
    assert steps_of(result) == [
        ("slurm", Action.PREPARE, Update.RECONFIGURE),
        ("slurm", Action.STOP_PLACING, Update.RECONFIGURE),
        ("slurm", Action.KEEP, Update.RECONFIGURE),
        ("slurm", Action.MOVE_JOBS, Update.RECONFIGURE),
        ("slurm", Action.WAIT_EMPTY, Update.RECONFIGURE),
        ("slurm", Action.APPLY, Update.RECONFIGURE),
    ]
    create, close, _keep, move, wait, apply = (s.text for s in result.steps)
    # The new partition as the new slurm.conf defines it, in the words `scontrol create` takes.
    assert create.startswith(
        "scontrol create PartitionName=interactive Nodes=l40s-[01-08] Default=NO MaxTime=08:00:00 "
        "JobDefaults=DefCpuPerGPU=16,DefMemPerGPU=128000 State=UP "
    )
    assert close.startswith("scontrol update PartitionName=dev State=INACTIVE ")
    assert move.startswith(
        'for job in $(squeue --noheader --partition=dev --states=PENDING --format=%i); do scontrol update JobId="$job" '
        "Partition=interactive; done "
    )
    assert (
        "squeue --noheader --partition=dev` prints nothing" in wait and "slurm_common_leave_timeout" in wait
    )
    assert "dev goes, interactive stays" in apply and "scontrol reconfigure" in apply
    assert all(
        s.changes == ("cluster.partitions.dev", "cluster.partitions.interactive") for s in result.steps
    )


def test_a_partition_removed_is_drained_and_waited_for(inventories: InventoryFactory) -> None:
    old = fleet(inventories, "old")
    new = fleet(
        inventories,
        "new",
        {
            '    - {name: dev, nodes: [l40s], max_time: "08:00:00"}\n': "",
            "{name: train, nodes: [h200_r1, h200_r2]": "{name: train, nodes: [h200_r1, h200_r2, l40s]",
        },
    )
    result = plan_of(inventories, old, new)
    by_path = {c.path: c for c in result.changes}
    assert by_path["cluster.partitions.dev"].procedure == "partition removed"
    assert by_path["cluster.partitions.dev"].update == Update.RECONFIGURE
    drain, wait = result.steps[:2]
    assert (drain.action, wait.action) == (Action.STOP_PLACING, Action.WAIT_EMPTY)
    assert drain.text.startswith(
        "scontrol update PartitionName=dev State=DRAIN (no job is queued there any more;"
    )
    assert "pending and running jobs finish, none is killed" in wait.text


def test_partition_renames_pair_the_same_hosts_only(inventories: InventoryFactory) -> None:
    old = load_cluster(fleet(inventories, "old"))
    renamed = load_cluster(fleet(inventories, "new", RENAME))
    assert partition_renames(old, renamed) == [("dev", "interactive")]
    other_nodes = load_cluster(
        fleet(
            inventories, "other", {"{name: dev, nodes: [l40s]": "{name: interactive, nodes: [l40s, h200_r1]"}
        )
    )
    assert partition_renames(old, other_nodes) == []


def test_scontrol_takes_the_per_gpu_defaults_as_job_defaults() -> None:
    line = "PartitionName=batch Nodes=dgx[001-096] Default=YES MaxTime=7-00:00:00 Exclusive=NODE DefCpuPerGPU=28 DefMemPerGPU=250000 State=UP"
    assert scontrol_partition_args(line) == (
        "PartitionName=batch Nodes=dgx[001-096] Default=YES MaxTime=7-00:00:00 Exclusive=NODE "
        "JobDefaults=DefCpuPerGPU=28,DefMemPerGPU=250000 State=UP"
    )
    assert scontrol_partition_args("PartitionName=gpu Nodes=gpu[01-04] State=UP") == (
        "PartitionName=gpu Nodes=gpu[01-04] State=UP"
    )


# --- controllers -------------------------------------------------------------------------------------


def test_removing_the_backup_hands_over_stops_it_and_unmounts_its_state(
    inventories: InventoryFactory,
) -> None:
    """The defect: `controller: [ctl01, ctl02] -> [ctl01] [restart]` and nothing else, while ctl02
    could take over during ctl01's restart and kept the state mounted."""
    old, new = fleet(inventories, "old"), fleet(inventories, "new", *NO_BACKUP)
    result = plan_of(inventories, old, new)
    change = next(c for c in result.changes if c.path == "cluster.slurm.controller")
    assert (change.update, change.procedure) == (Update.RESTART, "controller ctl02 removed")
    steps = [s for s in result.steps if "cluster.slurm.controller" in s.changes]
    assert [(s.action, s.update) for s in steps] == [
        (Action.TAKEOVER, Update.RESTART),
        (Action.STOP_DAEMON, Update.RESTART),
        (Action.RELEASE, Update.STORAGE),
        (Action.APPLY, Update.RESTART),
        (Action.VERIFY, Update.RESTART),
    ]
    take, stop, unmount, apply, verify = steps
    assert "`scontrol ping` shows `Slurmctld(primary) at ctl01 is UP`" in take.text
    assert stop.text.startswith("ssh ctl02 systemctl disable --now slurmctld ")
    assert "unmounts `slurm-state` (/shared) on ctl02" in unmount.text
    assert "/var/lib/gpucluster/storage/mounted.json" in unmount.text
    assert "SlurmctldHost ctl01" in apply.text and "restart slurmctld" in apply.text
    assert verify.text.startswith("`scontrol ping` lists exactly `Slurmctld(primary) at ctl01 is UP` ")
    # Stopped before the storage step unmounts, and before the files and the restart.
    order = [s.action for s in result.steps]
    assert order.index(Action.STOP_DAEMON) < order.index(Action.APPLY)


def test_removing_the_primary_makes_the_backup_take_over_first(inventories: InventoryFactory) -> None:
    old = fleet(inventories, "old")
    new = fleet(
        inventories, "new", {"controller: [ctl01, ctl02]": "controller: [ctl02]"}, {"ctl[01:02]": "ctl02"}
    )
    result = plan_of(inventories, old, new)
    take, stop = (s for s in result.steps if s.action in (Action.TAKEOVER, Action.STOP_DAEMON))
    assert take.text.startswith("scontrol takeover 1 (ctl02, backup 1, takes control;")
    assert stop.text.startswith("ssh ctl01 systemctl disable --now slurmctld ")


def test_adding_a_backup_proves_the_takeover(inventories: InventoryFactory) -> None:
    old, new = fleet(inventories, "old", *NO_BACKUP), fleet(inventories, "new")
    result = plan_of(inventories, old, new)
    change = next(c for c in result.changes if c.path == "cluster.slurm.controller")
    assert change.procedure == "controller ctl02 added"
    verify = result.steps[-1]
    assert verify.action == Action.VERIFY
    assert "`scontrol takeover 1` (ctl02 takes control" in verify.text
    assert "`ssh ctl01 systemctl start slurmctld` (the primary takes control back)" in verify.text
    # The storage step mounts the state on ctl02 before slurmctld starts there.
    storage = next(i for i, s in enumerate(result.steps) if "hosts/storage.yaml" in s.files)
    apply = next(
        i for i, s in enumerate(result.steps) if s.action == Action.APPLY and s.scheduler == Owner.SLURM
    )
    assert storage < apply


def test_a_new_primary_starts_alone(inventories: InventoryFactory) -> None:
    """Two controllers acting as primary at once is destructive (slurm.conf(5)): the old one stops first."""
    old = fleet(
        inventories, "old", {"controller: [ctl01, ctl02]": "controller: [ctl02]"}, {"ctl[01:02]": "ctl02"}
    )
    result = plan_of(inventories, old, fleet(inventories, "new"))
    stop = next(s for s in result.steps if s.action == Action.STOP_DAEMON)
    assert stop.text.startswith("ssh ctl02 systemctl stop slurmctld (the new primary ctl01 must be the only")


def test_replacing_every_controller_at_once_is_two_runs(inventories: InventoryFactory) -> None:
    old = fleet(inventories, "old")
    new = fleet(
        inventories,
        "new",
        {"controller: [ctl01, ctl02]": "controller: [ctl03, ctl04]"},
        {"ctl[01:02]": "ctl[03:04]"},
    )
    result = plan_of(inventories, old, new)
    change = next(c for c in result.changes if c.path == "cluster.slurm.controller")
    assert change.procedure == "controllers replaced"
    assert "not in one run" in result.steps[0].text and "ctl01, ctl02, ctl03, ctl04" in result.steps[0].text


# --- the accounting host and the state ----------------------------------------------------------------


def test_moving_the_accounting_host_moves_its_database(inventories: InventoryFactory) -> None:
    old = fleet(inventories, "old")
    new = fleet(
        inventories, "new", {"accounting: {host: dbd01}": "accounting: {host: dbd02}"}, {"dbd01:": "dbd02:"}
    )
    result = plan_of(inventories, old, new)
    change = next(c for c in result.changes if c.path == "cluster.slurm.accounting.host")
    assert change.procedure == "accounting moved from dbd01 to dbd02"
    stop, dump = (
        s for s in result.steps if "cluster.slurm.accounting.host" in s.changes and s.action != Action.APPLY
    )
    assert stop.text.startswith("ssh dbd01 systemctl disable --now slurmdbd ")
    assert "mysqldump --single-transaction --databases slurm_acct_db" in dump.text


def test_moving_the_state_copies_it_with_slurmctld_stopped(inventories: InventoryFactory) -> None:
    old = fleet(inventories, "old")
    new = fleet(
        inventories, "new", {"state_save_location: /shared/slurm/state": "state_save_location: /shared/state"}
    )
    result = plan_of(inventories, old, new)
    stop, copy = (s for s in result.steps if s.action in (Action.STOP_DAEMON, Action.PREPARE))
    assert stop.text.startswith(
        'for host in ctl01 ctl02; do ssh "$host" systemctl stop slurmctld; done (running jobs go on;'
    )
    assert copy.text.startswith(
        "ssh ctl01 'install -d -o slurm -g slurm /shared/state && cp -a /shared/slurm/state/. /shared/state/'"
    )
    assert result.ends_jobs == []


# --- what cannot avoid ending jobs ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edits", "path", "words"),
    [
        (
            {"    login: [login01]\n": "    login: [login01]\n    extra: {SwitchType: switch/nvidia_imex}\n"},
            "cluster.slurm.extra.SwitchType",
            "restarting slurmctld with another SwitchType while jobs exist may lose the records of every job",
        ),
        (
            {'source: "filer01:/export/slurm"': 'source: "filer02:/export/slurm"'},
            "cluster.storage.slurm-state",
            "slurmctld then starts from an empty state and every job is lost",
        ),
    ],
)
def test_a_change_that_ends_jobs_says_so_in_the_first_line(
    inventories: InventoryFactory, edits: dict[str, str], path: str, words: str
) -> None:
    old, new = fleet(inventories, "old"), fleet(inventories, "new", edits)
    result = plan_of(inventories, old, new)
    assert [e.path for e in result.ends_jobs] == [path]
    first = text_lines(result)[0]
    assert first.startswith(f"ENDS JOBS: {path}: ") and words in first
    assert first.endswith("playbooks/slurm.yml refuses it unless run with -e gpucluster_end_jobs=true")
    doc = result.as_dict()
    assert doc["ends_jobs"][0]["confirm"] == "-e gpucluster_end_jobs=true"


# --- nodes from Kubernetes to Slurm: commands a person can paste -----------------------------------------


def test_nodes_moved_from_kubernetes_to_slurm_in_steps_a_person_can_paste(
    inventories: InventoryFactory,
) -> None:
    """The defect: `kubectl cordon h200-r3-[01-08]` (kubectl expands no ranges), and node deletion with
    the kubelet only stopped hidden inside another step."""
    old, new = (
        fleet(inventories, "old", hosts_edits=R3_HALF_TO_SLURM[1]),
        fleet(inventories, "new", *R3_HALF_TO_SLURM),
    )
    result = plan_of(inventories, old, new)
    kube = [s for s in result.steps if s.scheduler == Owner.KUBERNETES and s.hosts]
    assert [s.action for s in kube] == [
        Action.STOP_PLACING,
        Action.WAIT_EMPTY,
        Action.STOP_DAEMON,
        Action.DELETE,
    ]
    nodes = " ".join(f"h200-r3-{n:02d}" for n in range(1, 9))
    cordon, drain, kubelet, delete = (s.text for s in kube)
    assert cordon == f'for node in {nodes}; do kubectl cordon "$node"; done'
    assert drain.startswith(
        f'for node in {nodes}; do kubectl drain "$node" --ignore-daemonsets --delete-emptydir-data; done'
    )
    assert kubelet.startswith(f'for host in {nodes}; do ssh "$host" systemctl disable --now kubelet; done')
    assert delete.startswith(f'for node in {nodes}; do kubectl delete node "$node"; done')
    # No command of any step hands a host range to a tool that does not expand it.
    for step in result.steps:
        for command in re.findall(r"(?:kubectl|ssh)[^;]*", step.text):
            assert "[" not in command, (step.action, command)
    # The kubelet stops before the node object goes, and Slurm claims the nodes after both.
    actions = [s.action for s in result.steps]
    assert actions.index(Action.STOP_DAEMON) < actions.index(Action.DELETE) < actions.index(Action.CLAIM)


def test_cli_plan_of_a_rename(inventories: InventoryFactory) -> None:
    old, new = fleet(inventories, "old"), fleet(inventories, "new", RENAME)
    proc = run_cli("plan", str(old), str(new))
    assert proc.returncode == 0, proc.stderr
    assert "[reconfigure; partition renamed to interactive]" in proc.stdout
    assert "overall: reconfigure" in proc.stdout and "restart" not in proc.stdout


def test_a_tenant_removed_keeps_what_may_still_run(inventories: InventoryFactory) -> None:
    """Nothing of a removed tenant is deleted while it may have work: its Slurm account (sacctmgr
    refuses to delete one with jobs) and its Kubernetes queues and namespace."""
    old = fleet(inventories, "old")
    new = fleet(
        inventories,
        "new",
        {
            "    - {name: serving, fairshare: 20, users: [carol], gpus: {kubernetes: {quota: 96, limit: 128}}}\n": ""
        },
    )
    result = plan_of(inventories, old, new)
    procedures = {c.path: c.procedure for c in result.changes if c.procedure}
    assert procedures == {
        "tenants.serving.kubernetes": "tenant removed from Kubernetes (its queues stay until it is idle)",
        "tenants.serving.slurm": "tenant removed from Slurm (its account stays until it is idle)",
    }
    kube = next(s for s in result.steps if s.scheduler == Owner.KUBERNETES and s.action == Action.APPLY)
    assert "kubectl delete clusterqueue serving; kubectl delete namespace serving" in kube.text
    accounts = next(s for s in result.steps if s.update == Update.ACCOUNTS)
    assert "`-e slurm_accounts_remove_absent=true` deletes it" in accounts.text
