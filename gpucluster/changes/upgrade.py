"""A change of `slurm.version` on a live cluster: refused, or the ordered steps of the upgrade.

Slurm's order (upgrades.shtml): slurmdbd first (it converts the accounting database), then
slurmctld (it converts its state), then every slurmd, then the clients; running jobs survive
because slurmstepd is never restarted and the new daemons read the old release's messages within
the window (gpucluster.model.releases). playbooks/slurm-upgrade.yml (role slurm_upgrade) carries
these steps out, each deciding from the versions it finds installed whether it still has work, so
that a second run continues where the first stopped. `gpucluster plan` prints them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpucluster.changes.playbooks import PROCEDURES
from gpucluster.hostlists import compress
from gpucluster.model.base import Owner
from gpucluster.model.releases import SlurmVersion, upgrade_refusal
from gpucluster.slurm.containers import container_settings, pyxis_hosts

if TYPE_CHECKING:
    from gpucluster.errors import Problem
    from gpucluster.model.cluster import Cluster

PLAYBOOK = PROCEDURES["upgrade:prove"].playbook
VERSION_PATH = "cluster.slurm.version"


@dataclass(frozen=True)
class UpgradeStep:
    """One step of the upgrade: what it does where, and what it waits for before the next."""

    name: str
    hosts: tuple[str, ...]
    does: str
    waits_for: str
    procedure: str  # whose plays carry it out (gpucluster.changes.playbooks)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "hosts": list(self.hosts), "does": self.does, "waits_for": self.waits_for}

    @property
    def text(self) -> str:
        where = f" on {compress(list(self.hosts))}" if self.hosts else ""
        return f"{self.name}{where}: {self.does}; waits for {self.waits_for}"


@dataclass(frozen=True)
class Upgrade:
    old: SlurmVersion
    new: SlurmVersion
    backup: str  # the directory of this upgrade's backups, on the accounting host and the first controller
    steps: tuple[UpgradeStep, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": str(self.old),
            "to": str(self.new),
            "playbook": PLAYBOOK,
            "backup": self.backup,
            "steps": [s.as_dict() for s in self.steps],
        }


def versions(old: Cluster, new: Cluster) -> tuple[SlurmVersion, SlurmVersion] | None:
    """The two versions, when the inventories target different ones."""
    before, after = old.version, new.version
    return None if before == after else (before, after)


def refusal(old: Cluster, new: Cluster) -> Problem | None:
    """The new inventory's `slurm.version` line, when Slurm cannot go there from the old one."""
    found = versions(old, new)
    if found is None:
        return None
    reason = upgrade_refusal(*found)
    if reason is None:
        return None
    return new.inventory.cluster_file.problem(VERSION_PATH, reason)


def batches(hosts: list[str], size: int) -> list[list[str]]:
    return [hosts[i : i + size] for i in range(0, len(hosts), size)]


class _Upgrading:
    """What the steps of an upgrade to `after` name: the release, the hosts by role, the settings.
    (Not a dataclass: generating its methods costs about a millisecond at import.)"""

    def __init__(self, new: Cluster, before: SlurmVersion, after: SlurmVersion) -> None:
        slurm = new.spec.slurm
        settings = slurm.upgrade
        controllers = list(slurm.controller)
        self.target = after.release
        self.backup = f"{settings.backup_dir}/{before}-to-{after}"  # this upgrade's backups
        self.backup_dir = settings.backup_dir
        self.state_dir = slurm.state_dir
        self.batch_size = settings.batch_size
        self.sackd = new.release.sackd  # the new release's clients run sackd
        self.primary, self.backups = controllers[0], controllers[1:]
        self.dbd = [slurm.accounting.host] if slurm.accounting else []
        self.compute = new.hosts_owned_by(Owner.SLURM)
        self.login = [h for h in slurm.login if h not in controllers]
        self.every = list(dict.fromkeys([*controllers, *self.dbd, *self.compute, *self.login]))
        gate = new.spec.gate
        self.gate_level = gate.levels.upgrade if gate is not None and slurm.health is not None else "none"
        # What gpucluster builds against Slurm's headers (SPANK plugins: Pyxis) and where: a plugin
        # built for the old release is refused by the new one's srun and slurmd.
        self.spank = spank_plugins(new)
        self.spank_hosts = set(pyxis_hosts(new)) if self.spank else set()


def spank_plugins(cluster: Cluster) -> list[str]:
    """The SPANK plugins gpucluster builds against the release's spank.h (cluster.slurm.containers)."""
    settings = container_settings(cluster)
    if settings is None or settings.pyxis is None:
        return []
    return [f"Pyxis {settings.pyxis.pyxis_version}"]


def upgrade_of(old: Cluster, new: Cluster) -> Upgrade | None:
    """The steps from the old inventory's version to the new one's (None: no upgrade, or refused)."""
    found = versions(old, new)
    if found is None or upgrade_refusal(*found) is not None:
        return None
    before, after = found
    up = _Upgrading(new, before, after)
    steps = [
        *_first_steps(up),
        *_accounting_steps(up),
        *_controller_steps(up),
        *_slurmd_steps(up),
        *_last_steps(up),
    ]
    return Upgrade(before, after, up.backup, tuple(steps))


def _first_steps(up: _Upgrading) -> list[UpgradeStep]:
    """The trial of the new release's files, then the checks of every host before any change."""
    return [
        UpgradeStep(
            "prove",
            (),
            f"`gpucluster trial` of the new inventory starts Slurm {up.target}'s real daemons on the files rendered "
            "for it (on the Ansible controller, before any host changes)",
            "the trial to pass; no host is touched otherwise",
            "upgrade:prove",
        ),
        UpgradeStep(
            "pre-checks",
            tuple(up.every),
            f"the package sources of every host offer {up.target}; slurmctld answers (`scontrol ping`)"
            + (", slurmdbd answers (`sacctmgr show cluster`)" if up.dbd else "")
            + "; every node responds (a node DOWN or NOT_RESPONDING with a job would lose it); "
            f"free space in {up.backup_dir} for the database dump and the state copy",
            "every check to pass; nothing is changed before",
            "upgrade:pre-checks",
        ),
    ]


def _accounting_steps(up: _Upgrading) -> list[UpgradeStep]:
    """slurmdbd first (it converts the accounting database), after a dump of that database."""
    if not up.dbd:
        return []
    return [
        UpgradeStep(
            "backup",
            tuple(up.dbd),
            f"mysqldump --single-transaction of the accounting database into {up.backup} (mode 0700; "
            "the dump is never printed)",
            "the dump to be complete",
            "upgrade:backup",
        ),
        UpgradeStep(
            "slurmdbd",
            tuple(up.dbd),
            f"stop slurmdbd (slurmctld keeps the records it cannot send, up to MaxDBDMsgs), upgrade its "
            f"packages with apt to {up.target}, start it: it converts the database",
            "the conversion, with no time limit (its log is polled and shown), then `sacctmgr show "
            f"cluster` answering from {up.target}",
            "upgrade:slurmdbd",
        ),
    ]


def _controller_steps(up: _Upgrading) -> list[UpgradeStep]:
    """The backup controllers' packages (not started), the primary (it converts its state), then
    the backups started."""
    steps = [
        UpgradeStep(
            "slurmctld (backup)",
            (host,),
            f"stop the backup slurmctld and upgrade its packages to {up.target} (not started: it must not "
            "take over from the old primary)",
            "the packages installed; the primary keeps answering meanwhile",
            "upgrade:slurmctld-backups",
        )
        for host in reversed(up.backups)
    ]
    steps.append(
        UpgradeStep(
            "slurmctld (primary)",
            (up.primary,),
            f"stop slurmctld, copy StateSaveLocation ({up.state_dir}) into {up.backup}, upgrade to {up.target} "
            "with the new files, start it: it converts its state (commands and submissions wait meanwhile; "
            "running jobs go on)",
            f"slurmctld answering as {up.target} and holding every job it held before",
            "upgrade:slurmctld",
        )
    )
    if up.backups:
        steps.append(
            UpgradeStep(
                "slurmctld (backups started)",
                tuple(up.backups),
                f"start the upgraded backup slurmctld ({up.target})",
                "`scontrol ping` to list every controller UP",
                "upgrade:slurmctld-backups-started",
            )
        )
    controllers = [h for h in [up.primary, *up.backups] if h in up.spank_hosts]
    if controllers:
        steps.append(
            _spank_step("controllers", controllers, up, "srun there loads them", "upgrade:spank-controllers")
        )
    return steps


def _spank_step(which: str, hosts: list[str], up: _Upgrading, why: str, procedure: str) -> UpgradeStep:
    """The SPANK plugins gpucluster builds, rebuilt against the new release's headers."""
    plugins = ", ".join(up.spank)
    return UpgradeStep(
        f"SPANK plugins ({which})",
        tuple(hosts),
        f"rebuild {plugins} against {up.target}'s spank.h (its libslurm-dev, upgraded with the packages) and "
        f"install it in {up.target}'s plugin directory ({why}; a plugin built for the old release is refused)",
        f"{plugins} built for {up.target}",
        procedure,
    )


def _slurmd_steps(up: _Upgrading) -> list[UpgradeStep]:
    """Every slurmd, a batch of nodes at a time (slurm.upgrade.batch_size); in each batch, the SPANK
    plugins rebuilt for the new release between its packages and the restart of slurmd (which loads
    them)."""
    groups = batches(up.compute, up.batch_size)
    steps = []
    registered = (
        f"every node of the batch registered with {up.target} and responding (within SlurmdTimeout, "
        "past which slurmctld would set it DOWN)"
    )
    drain = (
        "drain the nodes (no new job starts while their packages change), let the jobs ending there "
        f"end, upgrade the packages to {up.target} while slurmd runs, install the new files"
    )
    restart = "restart slurmd (running jobs go on: slurmstepd is not restarted), " + (
        "resume the nodes this step drained"
        if up.gate_level == "none"
        else f"hand them to the return-to-service gate (a {up.gate_level} burn-in lifts this step's "
        "drain; the next batch does not wait for it)"
    )
    for number, batch in enumerate(groups, 1):
        name = f"slurmd batch {number}/{len(groups)}"
        spank = [h for h in batch if h in up.spank_hosts]
        if not spank:
            steps.append(UpgradeStep(name, tuple(batch), f"{drain}, {restart}", registered, "upgrade:slurmd"))
            continue
        steps += [
            UpgradeStep(
                name,
                tuple(batch),
                f"{drain} (slurmd not restarted yet)",
                "the packages and files installed",
                "upgrade:slurmd",
            ),
            _spank_step(
                f"batch {number}/{len(groups)}",
                spank,
                up,
                "slurmd loads them when it starts",
                "upgrade:spank",
            ),
            UpgradeStep(f"{name} restarted", tuple(batch), restart, registered, "upgrade:slurmd-restart"),
        ]
    return steps


def _last_steps(up: _Upgrading) -> list[UpgradeStep]:
    """The clients on the login hosts, then the check of every host."""
    steps = []
    if up.login:
        steps.append(
            UpgradeStep(
                "login and clients",
                tuple(up.login),
                f"upgrade the client commands{' and sackd' if up.sackd else ''} to {up.target} with the new files",
                "`sinfo` answering there",
                "upgrade:login",
            )
        )
        login = [h for h in up.login if h in up.spank_hosts]
        if login:
            steps.append(
                _spank_step("login hosts", login, up, "srun there loads them", "upgrade:spank-login")
            )
    steps.append(
        UpgradeStep(
            "verify",
            tuple(up.every),
            f"every host's Slurm packages are {up.target}; every daemon reports {up.target}; the running jobs "
            "are still running",
            "`gpucluster verify` of the new inventory to pass",
            "upgrade:verify",
        )
    )
    return steps
