"""How each kind of change reaches a live cluster without losing a job, per target release.

`gpucluster plan` finds the change classes here (a partition renamed, removed or added; a controller
removed, added or replaced; the accounting host or the controllers' state moved; a change Slurm
cannot make without ending jobs) and places their steps among its own (gpucluster.changes.plan). Every
step is something a person can paste, and playbooks/slurm.yml carries it out itself:

- partitions: slurm_common runs `slurm_partitions_change` on the first controller before it
  installs the new files (the new partition created live, the old one closed, its pending jobs
  moved, its running ones waited for, bounded like nodes leaving: slurm_common_leave_timeout);
- controllers: the play "Controllers leaving" (`slurm_controllers_change`) puts the one that stays
  in charge, stops and disables slurmctld where it leaves and unmounts the state storage the
  shared_storage role mounted there; after the restart, `scontrol ping` must list exactly the new
  controllers, and a controller that joined proves a takeover;
- the accounting host: slurmdbd stopped on the old host, its database dumped there and loaded on
  the new one before slurmctld is restarted towards it;
- the state: slurmctld stopped on every controller and the state copied before it starts on the
  new location;
- what cannot avoid ending jobs (a SwitchType change, the state's filesystem replaced under it): plan says so in its first line, and the
  playbook refuses (`slurm_ending_changes`) unless run with `-e gpucluster_end_jobs=true`.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpucluster.changes.moves import Action, Step, on_hosts, wait_bound
from gpucluster.changes.playbooks import PROCEDURES
from gpucluster.hostlists import compress
from gpucluster.model.base import Owner, Update
from gpucluster.model.releases import RELEASES
from gpucluster.model.storage import filesystem_of

if TYPE_CHECKING:
    from gpucluster.model.cluster import Cluster
    from gpucluster.model.storage import SharedFilesystem


# The variable that lets playbooks/slurm.yml carry out a change that ends jobs.
CONFIRM = "gpucluster_end_jobs"
PLAYBOOK = PROCEDURES["slurm"].playbook


@dataclass(frozen=True)
class EndsJobs:
    """A change Slurm cannot make without ending jobs."""

    path: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason, "confirm": f"-e {CONFIRM}=true"}


@dataclass
class Procedures:
    """The steps of the change classes found, by where they go among the plan's steps."""

    # Change path -> the name of its class (`partition renamed to interactive`, ...).
    classes: dict[str, str] = field(default_factory=dict)
    # Before the shared storage and the Slurm files (partitions closed, controllers handed over,
    # slurmdbd and slurmctld stopped where they move).
    before: list[Step] = field(default_factory=list)
    # After the Slurm files are applied (the controllers as listed, a takeover proved).
    after: list[Step] = field(default_factory=list)
    ends_jobs: list[EndsJobs] = field(default_factory=list)
    # Text the Slurm apply step adds (what it does beyond installing the files).
    apply_notes: list[str] = field(default_factory=list)
    # Text the sacctmgr step and the Kubernetes step add (tenants removed).
    account_notes: list[str] = field(default_factory=list)
    kube_notes: list[str] = field(default_factory=list)


def _step(
    procedure: str | None,
    action: Action,
    update: Update,
    text: str,
    paths: Iterable[str],
    hosts: Iterable[str] = (),
) -> Step:
    return Step(
        procedure=procedure,
        scheduler=Owner.SLURM,
        action=action,
        hosts=tuple(hosts),
        text=text,
        update=update,
        changes=tuple(dict.fromkeys(paths)),
    )


# --- partitions ------------------------------------------------------------------------------------


def bare_metal_partitions(cluster: Cluster) -> dict[str, tuple[str, ...]]:
    """Partition name -> hosts, for the partitions of bare-metal Slurm (the playbook's)."""
    out = {}
    for partition in cluster.spec.partitions:
        hosts = cluster.partitions.get(partition.name, [])
        if all(cluster.owner_of.get(h) == Owner.SLURM for h in hosts):
            out[partition.name] = tuple(hosts)
    return out


def partition_renames(old: Cluster, new: Cluster) -> list[tuple[str, str]]:
    """(old name, new name) of bare-metal partitions that only changed name: one gone, one new,
    the same hosts. slurm_partitions_change pairs them by the same rule on the live cluster."""
    before, after = bare_metal_partitions(old), bare_metal_partitions(new)
    gone = [name for name in before if name not in after]
    fresh = [name for name in after if name not in before]
    pairs = []
    for name in gone:
        match = next((f for f in fresh if after[f] == before[name] and before[name]), None)
        if match is not None:
            fresh.remove(match)
            pairs.append((name, match))
    return pairs


def partition_line(new: Cluster, name: str, slurm_conf: str | None) -> str:
    """The partition as `scontrol create` takes it: its line of the new slurm.conf, per-GPU
    defaults as JobDefaults (scontrol has no DefCpuPerGPU/DefMemPerGPU keys of their own)."""
    line = next(
        (
            row
            for row in (slurm_conf or "").splitlines()
            if row.startswith(f"PartitionName={name} ") or row == f"PartitionName={name}"
        ),
        f"PartitionName={name} Nodes={compress(new.partitions.get(name, []))} State=UP",
    )
    return scontrol_partition_args(line)


def scontrol_partition_args(line: str) -> str:
    """A slurm.conf partition line as `scontrol create` accepts it (JobDefaults for the per-GPU
    defaults; everything else as written)."""
    words, defaults = [], []
    for word in line.split():
        key = word.split("=", 1)[0]
        if key in ("DefCpuPerGPU", "DefMemPerGPU"):
            defaults.append(word)
        else:
            words.append(word)
    if defaults:
        words.insert(
            -1 if words[-1].startswith("State=") else len(words), f"JobDefaults={','.join(defaults)}"
        )
    return " ".join(words)


def partition_procedures(
    old: Cluster, new: Cluster, result: Procedures, slurm_conf: str | None, changed: set[str]
) -> None:
    release = new.release
    update = Update.RECONFIGURE
    by = f"({PLAYBOOK} does this itself, before it installs the files: slurm_partitions_change)"
    renames = partition_renames(old, new)
    renamed = {a for a, _ in renames}
    before, after = bare_metal_partitions(old), bare_metal_partitions(new)
    for gone, successor in renames:
        paths = [p for p in (f"cluster.partitions.{gone}", f"cluster.partitions.{successor}") if p in changed]
        result.classes[f"cluster.partitions.{gone}"] = f"partition renamed to {successor}"
        result.classes[f"cluster.partitions.{successor}"] = f"partition renamed from {gone}"
        result.before += [
            _step("partitions", Action.PREPARE, update, f"scontrol create {partition_line(new, successor, slurm_conf)} (the new partition, as the new slurm.conf defines it, so the jobs have somewhere to go) {by}", paths),
            _step("partitions", Action.STOP_PLACING, update, f"scontrol update PartitionName={gone} State=INACTIVE (no job is queued or started there any more; its running jobs go on)", paths),
            _step("partitions", Action.KEEP, update, f"every controller's slurm.conf gets {successor} as the new slurm.conf defines it and {gone} as it is now (State=INACTIVE): a slurmctld that starts again or takes over from here on keeps both partitions and every job moved {by}", paths, old.spec.slurm.controller),
            _step("partitions", Action.MOVE_JOBS, update, f'for job in $(squeue --noheader --partition={gone} --states=PENDING --format=%i); do scontrol update JobId="$job" Partition={successor}; done (its pending jobs wait in {successor} instead)', paths),
            _step("partitions", Action.WAIT_EMPTY, update, f"wait until `squeue --noheader --partition={gone}` prints nothing: its running jobs finish, none is killed or requeued ({wait_bound(old, [gone])})", paths),
        ]  # fmt: skip
        result.apply_notes.append(f"{gone} goes, {successor} stays as slurm.conf defines it")
    for gone in before:
        if gone in after or gone in renamed:
            continue
        path = f"cluster.partitions.{gone}"
        if path not in changed:
            continue
        result.classes[path] = "partition removed"
        result.before += [
            _step("partitions", Action.STOP_PLACING, update, f"scontrol update PartitionName={gone} State=DRAIN (no job is queued there any more; the queued ones still start) {by}", [path]),
            _step("partitions", Action.WAIT_EMPTY, update, f"wait until `squeue --noheader --partition={gone}` prints nothing: its pending and running jobs finish, none is killed ({wait_bound(old, [gone])}; what is left can move with `scontrol update JobId=<id> Partition=<other>`)", [path]),
        ]  # fmt: skip
        result.apply_notes.append(f"{gone} goes")
    for name in after:
        path = f"cluster.partitions.{name}"
        if name not in before and path in changed and path not in result.classes:
            result.classes[path] = "partition added"
    for name in set(before) & set(after):
        prefix = f"cluster.partitions.{name}."
        for path in changed:
            if path.startswith(prefix):
                what = "nodes" if path == prefix + "nodes" else "limits"
                result.classes[path] = (
                    f"partition {what} changed ({_partition_change_note(what, release.name)})"
                )


def _partition_change_note(what: str, release: str) -> str:
    if what == "nodes":
        return "running jobs keep their nodes; pending ones are placed on the new list"
    return (
        "running jobs keep the limits they started with; pending ones over a new limit wait, with its reason"
    )


# --- controllers -------------------------------------------------------------------------------


def _state_filesystem(cluster: Cluster) -> SharedFilesystem | None:
    path = cluster.spec.slurm.state_save_location
    return None if path is None else filesystem_of(path, cluster.spec.storage)


def controller_procedures(old: Cluster, new: Cluster, result: Procedures, changed: set[str]) -> None:
    path = "cluster.slurm.controller"
    if path not in changed or not new.hosts_owned_by(Owner.SLURM):
        return
    before, after = list(old.spec.slurm.controller), list(new.spec.slurm.controller)
    leaving = [h for h in before if h not in after]
    joining = [h for h in after if h not in before]
    kept = [h for h in after if h in before]
    update = Update.RESTART
    by = f"({PLAYBOOK} does this itself: slurm_controllers_change)"
    if not kept:
        result.classes[path] = "controllers replaced"
        result.before.append(
            _step("controllers", Action.PREPARE, update, f"not in one run: no controller of {', '.join(before)} stays to hand over to; first apply an inventory listing {', '.join(before + after)}, then one with {', '.join(after)} (the playbook refuses this one)", [path])
        )  # fmt: skip
        return
    names = []
    target = kept[0]
    if leaving:
        names.append(f"{', '.join(leaving)} removed")
        index = before.index(target)
        if index == 0:
            take = (
                f"make {target} the controller in charge: `scontrol ping` shows `Slurmctld(primary) at {target} is UP` "
                f"(if a backup runs the cluster, `ssh {target} systemctl start slurmctld`: the primary takes control back at start-up) {by}"
            )
        else:
            take = f"scontrol takeover {index} ({target}, backup {index}, takes control; the slurmctld of {before[0]} exits) {by}"
        result.before += [
            _step("controllers", Action.TAKEOVER, update, take, [path], [target]),
            _step("controllers", Action.STOP_DAEMON, update, f"{on_hosts(leaving, 'systemctl disable --now slurmctld')} (a controller that leaves must not take over while {target} restarts on the new configuration) {by}", [path], leaving),
        ]  # fmt: skip
        unmount = _unmount_text(old, new, leaving)
        if unmount:
            result.before.append(
                _step("controllers", Action.RELEASE, Update.STORAGE, unmount, [path], leaving)
            )
    if joining:
        names.append(f"{', '.join(joining)} added")
    if after[0] in joining:
        # A new primary starts as primary: no slurmctld of the old list may run then, or two would
        # act as the controller at once (slurm.conf(5): "destructive").
        running = [h for h in before if h in after]
        result.before.append(
            _step("controllers", Action.STOP_DAEMON, update, f"{on_hosts(running, 'systemctl stop slurmctld')} (the new primary {after[0]} must be the only slurmctld starting as primary; running jobs go on, commands wait until it answers) {by}", [path], running)
        )  # fmt: skip
    if not leaving and not joining:
        names.append("order changed")
    result.classes[path] = "controller " + "; ".join(names)
    started = (
        f", started on {', '.join(joining)} (the storage step mounts its StateSaveLocation first)"
        if joining
        else ""
    )
    result.apply_notes.append(f"slurm.conf lists SlurmctldHost {', '.join(after)}{started}")
    expected = "; ".join(
        f"`Slurmctld({'primary' if i == 0 else 'backup'}) at {h} is UP`" for i, h in enumerate(after)
    )
    verify = f"`scontrol ping` lists exactly {expected}"
    if joining and len(after) > 1:
        verify += (
            f"; then prove the takeover: `scontrol takeover 1` ({after[1]} takes control, the slurmctld of "
            f"{after[0]} exits), wait until `scontrol ping` shows {after[1]} UP and `sinfo` answers, then "
            f"`ssh {after[0]} systemctl start slurmctld` (the primary takes control back) and wait until every "
            "controller is UP again; running jobs go on throughout"
        )
    result.after.append(
        _step(
            "controllers", Action.VERIFY, update, f"{verify} ({PLAYBOOK} checks this itself)", [path], after
        )
    )


def _unmount_text(old: Cluster, new: Cluster, leaving: list[str]) -> str | None:
    """What happens to the state storage on controllers that leave."""
    fs = _state_filesystem(old)
    if fs is None:
        return None
    still = set(new.storage_hosts.get(fs.name, []))
    gone = [h for h in leaving if h in old.storage_hosts.get(fs.name, []) and h not in still]
    kept = [h for h in leaving if h in still]
    parts = []
    if gone and fs.site_managed:
        parts.append(
            f"`{fs.name}` ({fs.mount}) is site-managed: unmount it on {', '.join(gone)} yourself once "
            f"slurmctld is stopped there ({on_hosts(gone, shlex.quote('umount ' + fs.mount))})"
        )
    elif gone:
        parts.append(
            f"the shared_storage role unmounts `{fs.name}` ({fs.mount}) on {', '.join(gone)} and drops it from "
            "/etc/fstab (a mount it made there, in its record /var/lib/gpucluster/storage/mounted.json, that "
            f"the inventory no longer gives them; {PLAYBOOK} does this right after stopping slurmctld)"
        )
    if kept:
        parts.append(f"`{fs.name}` stays mounted on {', '.join(kept)} (cluster.storage still lists them)")
    return "; ".join(parts) or None


# --- accounting, state, and what ends jobs -----------------------------------------------------------


def accounting_procedure(old: Cluster, new: Cluster, result: Procedures, changed: set[str]) -> None:
    path = "cluster.slurm.accounting.host"
    if path not in changed:
        return
    before, after = old.spec.slurm.accounting, new.spec.slurm.accounting
    assert before is not None and after is not None
    result.classes[path] = f"accounting moved from {before.host} to {after.host}"
    update = Update.RESTART
    by = f"({PLAYBOOK} does this itself: slurm_common's accounting_dump and accounting_load)"
    result.before += [
        _step("accounting_move", Action.STOP_DAEMON, update, f"ssh {before.host} systemctl disable --now slurmdbd (slurmctld keeps the accounting records it cannot send, up to MaxDBDMsgs, and sends them to the new slurmdbd; running jobs go on) {by}", [path], [before.host]),
        _step("accounting_move", Action.PREPARE, update, f"ssh {before.host} mysqldump --single-transaction --databases slurm_acct_db > slurm_acct_db.sql; the slurm_dbd role makes the database on {after.host}, then it is replaced by this copy (`mysql < slurm_acct_db.sql`) before slurmctld is restarted towards it {by}", [path], [before.host, after.host]),
    ]  # fmt: skip
    result.apply_notes.append(f"slurm.conf's AccountingStorageHost={after.host}")


def state_procedure(old: Cluster, new: Cluster, result: Procedures, changed: set[str]) -> None:
    path = "cluster.slurm.state_save_location"
    if path not in changed or not new.hosts_owned_by(Owner.SLURM):
        return
    source, target = old.spec.slurm.state_dir, new.spec.slurm.state_dir
    controllers = list(new.spec.slurm.controller)
    first = controllers[0]
    result.classes[path] = f"state moved from {source} to {target}"
    update = Update.RESTART
    by = f"({PLAYBOOK} does this itself: slurm_common, before slurmctld starts)"
    result.before += [
        _step("state_move", Action.STOP_DAEMON, update, f"{on_hosts(list(old.spec.slurm.controller), 'systemctl stop slurmctld')} (running jobs go on; commands and submissions wait until it is back) {by}", [path], old.spec.slurm.controller),
        _step("state_move", Action.PREPARE, update, f"ssh {first} {shlex.quote(f'install -d -o slurm -g slurm {target} && cp -a {source}/. {target}/')} (every job and node state, copied before slurmctld starts there; the new location must be mounted first) {by}", [path], [first]),
    ]  # fmt: skip


def _backing(fs: SharedFilesystem) -> tuple[Any, ...]:
    server = (fs.nfs_server.host, fs.nfs_server.export) if fs.nfs_server else None
    return (fs.site_managed, fs.source, fs.type, server)


def ending_changes(old: Cluster, new: Cluster, changed: set[str]) -> list[EndsJobs]:
    """Changes Slurm cannot make without ending jobs (on the new inventory's release)."""
    found = []
    for key in ("SwitchType",):
        path = f"cluster.slurm.extra.{key}"
        if path in changed and old.hosts_owned_by(Owner.SLURM):
            found.append(
                EndsJobs(
                    path,
                    f"slurm.conf(5): restarting slurmctld with another {key} while jobs exist may lose the "
                    "records of every job, in any state; let the cluster empty first (drain every node, "
                    "wait until `squeue` prints nothing)",
                )
            )
    before_fs, after_fs = _state_filesystem(old), _state_filesystem(new)
    if (
        before_fs is not None
        and after_fs is not None
        and before_fs.name == after_fs.name
        and old.spec.slurm.state_dir == new.spec.slurm.state_dir
        and _backing(before_fs) != _backing(after_fs)
        and not after_fs.site_managed
    ):
        found.append(
            EndsJobs(
                f"cluster.storage.{after_fs.name}",
                f"the controllers' state ({new.spec.slurm.state_dir}) is on `{after_fs.name}`, which the "
                f"shared_storage role remounts from its new backing at {after_fs.mount}: slurmctld then "
                "starts from an empty state and every job is lost, unless the state is copied onto the new "
                "backing first (stop slurmctld on every controller, copy, then run the playbook); or move "
                "the state with state_save_location to another filesystem first",
            )
        )
    return found


# The reason of the drain that empties the cluster before a change that ends jobs.
EMPTY_REASON = "gpucluster: emptied for a change that ends jobs"


def emptying_steps(old: Cluster, ends: list[EndsJobs], update: Update) -> tuple[list[Step], list[Step]]:
    """What a change that ends jobs gets around it: every Slurm node drained and the jobs left to
    finish before it (by hand: the playbook only refuses, unless confirmed), and the drain lifted
    after it. `update`: the policy of the step that carries the change out."""
    nodes = old.hosts_owned_by(Owner.SLURM)
    if not ends or not nodes:
        return [], []
    hosts = compress(nodes)
    paths = [e.path for e in ends]
    why = ", ".join(paths)
    before = [
        _step(None, Action.STOP_PLACING, update, f'by hand: scontrol update nodename={hosts} state=drain reason="{EMPTY_REASON}" (no new job starts anywhere: {why} would end the jobs still there)', paths, nodes),
        _step(None, Action.WAIT_EMPTY, update, f"by hand: wait until `squeue --noheader` prints nothing (the running jobs finish, none is killed; what still runs or waits when the change is applied is lost); then run {PLAYBOOK} with -e {CONFIRM}=true", paths, nodes),
    ]  # fmt: skip
    after = [
        _step(None, Action.RESUME, update, f'by hand, once every daemon runs the new configuration: scontrol update nodename={hosts} state=resume (the drain of "{EMPTY_REASON}" lifted)', paths, nodes),
    ]  # fmt: skip
    return before, after


def tenant_procedures(old: Cluster, new: Cluster, result: Procedures, changed: set[str]) -> None:
    """A tenant gone from a scheduler: nothing of it is deleted while it may have work there."""
    for path in sorted(changed):
        parts = path.split(".")
        if len(parts) != 3 or parts[0] != "tenants":
            continue
        name, scheduler = parts[1], parts[2]
        if name in new.tenants_by_name and scheduler in {o.value for o in new.tenant_gpus.get(name, {})}:
            continue
        before = old.tenants_by_name.get(name)
        if before is None and name not in old.tenant_gpus:
            continue
        if scheduler == Owner.SLURM.value and scheduler not in _tenant_schedulers(new, name):
            result.classes[path] = "tenant removed from Slurm (its account stays until it is idle)"
            result.account_notes.append(
                f"the account {name} stays, its jobs run on: once `squeue --account={name}` prints nothing, "
                "`-e slurm_accounts_remove_absent=true` deletes it (sacctmgr refuses while it has jobs)"
            )
        elif scheduler == Owner.KUBERNETES.value and scheduler not in _tenant_schedulers(new, name):
            namespace = (before.namespace if before else None) or name
            result.classes[path] = "tenant removed from Kubernetes (its queues stay until it is idle)"
            result.kube_notes.append(
                f"playbooks/kubernetes.yml deletes no object: {name}'s ClusterQueue, LocalQueues and namespace "
                f"stay, its workloads run on; once `kubectl get workloads -n {namespace}` lists none: "
                f"kubectl delete clusterqueue {name}; kubectl delete namespace {namespace}"
            )


def _tenant_schedulers(cluster: Cluster, name: str) -> set[str]:
    from gpucluster.resolved import tenant_views

    return set(tenant_views(cluster).get(name, {}))


def procedures(old: Cluster, new: Cluster, changed: set[str], slurm_conf: str | None) -> Procedures:
    """Every change class found among the changed paths, its steps and what would end jobs."""
    result = Procedures()
    partition_procedures(old, new, result, slurm_conf, changed)
    controller_procedures(old, new, result, changed)
    accounting_procedure(old, new, result, changed)
    state_procedure(old, new, result, changed)
    tenant_procedures(old, new, result, changed)
    result.ends_jobs = ending_changes(old, new, changed)
    return result


def releases_reading(name: str) -> list[str]:
    """The releases whose state the release `name` reads (itself included)."""
    return [*RELEASES[name].upgrades_from, name]


def partition_definitions(cluster: Cluster, slurm_conf: str) -> dict[str, str]:
    """The bare-metal partitions of a rendered slurm.conf as `scontrol create` takes them
    (slurm_partitions_change creates a renamed partition's successor from these)."""
    return {name: partition_line(cluster, name, slurm_conf) for name in bare_metal_partitions(cluster)}


def state_filesystem_entry(cluster: Cluster) -> dict[str, Any] | None:
    """The filesystem of cluster.storage holding StateSaveLocation, as hosts/storage.yaml has it."""
    from gpucluster.render.storage import mount_entry

    fs = _state_filesystem(cluster)
    return None if fs is None else mount_entry(cluster, fs)


def switch_type(cluster: Cluster) -> str:
    """SwitchType of the rendered slurm.conf (`slurm.extra`), empty for none."""
    value = str(cluster.spec.slurm.extra.get("SwitchType", ""))
    return "" if value in ("", "switch/none") else value


def host_change_class(path: str, before: Any, after: Any, release_reconfigures: bool) -> str | None:
    """The class of a change of hosts (`hosts.gpu[05-08]`, `hosts.gpu04.owner`)."""
    if not path.startswith("hosts."):
        return None
    how = "scontrol reconfigure" if release_reconfigures else "a restart of the daemons"
    if path.endswith(".owner") and before is not None and after is not None:
        return f"nodes moved from {before} to {after}"
    if before is None:
        return f"nodes added (they come up idle; {how})"
    if after is None:
        return f"nodes removed (drained, their jobs finish first; {how})"
    return None
