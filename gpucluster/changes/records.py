"""What a plan is made of: each change between two inventories with the update policy it needs, each
rendered file it touches, and the plan that orders them into steps (gpucluster.changes.plan makes
it, gpucluster.changes.steps orders it)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpucluster.changes.moves import Action, Step
from gpucluster.changes.procedures import EndsJobs
from gpucluster.changes.upgrade import Upgrade
from gpucluster.model.base import Update
from gpucluster.model.releases import Release

# Least to most disruptive.
SEVERITY = [
    Update.RENDER_ONLY,
    Update.SERVICE,
    Update.KUBERNETES,
    Update.UNIX_ACCOUNTS,
    Update.ACCOUNTS,
    Update.RECONFIGURE,
    Update.NODE_LIST,
    Update.STORAGE,
    Update.RESTART,
    Update.GPU_LAYOUT,
    Update.NODE_SOFTWARE,
    Update.MOVE,
    Update.REBUILD,
]

# Changes that act through what the roles or the stacks read from the model, not through a
# rendered file: who carries each out.
OUTSIDE_FILES: tuple[tuple[str, str], ...] = (
    ("cluster.slurm.packages", "the Slurm roles (package source and pin)"),
    ("cluster.slurm.upgrade", "playbooks/slurm-upgrade.yml (at the next change of slurm.version)"),
    ("cluster.slurm.rest_api", "the slurm_restd role"),
    ("cluster.slurm.login", "the slurm_login role (the login hosts)"),
    ("cluster.slurm.accounting", "the slurm_dbd role"),
    ("cluster.node_types.*.instance_type", "the Pulumi stacks"),
    ("cluster.node_types.*.gpus.memory_gb", "the Pulumi stacks' pool checks"),
    ("cluster.cloud", "the Pulumi stacks"),
    ("cluster.kubernetes", "playbooks/kubernetes.yml (the add-ons' roles)"),
)


def under(path: str, prefix: str) -> bool:
    return fnmatch.fnmatchcase(path, prefix) or fnmatch.fnmatchcase(path, prefix + ".*")


@dataclass(frozen=True)
class Change:
    """One thing that differs between what the two inventories resolve to."""

    path: str  # e.g. cluster.partitions.gpu.max_time, hosts.gpu[05-06], switches.leaf1.nodes
    old: Any  # a JSON value of the model; None: absent
    new: Any
    update: Update
    files: tuple[str, ...] = ()  # the rendered files it touches
    hosts: tuple[str, ...] = ()  # for changes of hosts: which
    needs: Update | None = None  # what it needs alone, where its step does more (None: the same)
    procedure: str | None = None  # its change class, where it has a procedure of its own

    @property
    def applied_by(self) -> str | None:
        """Who carries out a change that touches no rendered file."""
        if self.files:
            return None
        return next((who for prefix, who in OUTSIDE_FILES if under(self.path, prefix)), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "old": self.old,
            "new": self.new,
            "update": self.update.name.lower(),
            "needs": (self.needs or self.update).name.lower(),
            "files": list(self.files),
            "hosts": list(self.hosts),
            "procedure": self.procedure,
        }


@dataclass(frozen=True)
class FileChange:
    path: str  # relative to the render directory
    status: str  # added | removed | changed
    diff: tuple[str, ...]  # the changed lines (`-old`, `+new`), at most MAX_DIFF_LINES and a count
    because: tuple[str, ...]  # the changes that touch it
    update: Update  # the most disruptive of theirs

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "status": self.status,
            "diff": list(self.diff),
            "because": list(self.because),
            "update": self.update.name.lower(),
        }


@dataclass
class Plan:
    release: Release  # of the new inventory: what the changes are applied with
    changes: list[Change]
    files: list[FileChange]
    steps: list[Step] = field(default_factory=list)
    # Changes Slurm cannot make without ending jobs: the first lines of the plan, and what
    # playbooks/slurm.yml refuses without -e gpucluster_end_jobs=true.
    ends_jobs: list[EndsJobs] = field(default_factory=list)
    # cluster.monitoring: Prometheus' targets added, removed, relabelled (None: no monitoring).
    monitoring_targets: dict[str, list[str]] | None = None
    # Changes Slurm cannot make at all (a downgrade, a jump past the new release's window): the
    # inventory line and why; `gpucluster plan` exits 2.
    refused: list[str] = field(default_factory=list)
    # A change of slurm.version Slurm can make: its own steps (playbooks/slurm-upgrade.yml).
    upgrade: Upgrade | None = None

    @property
    def overall(self) -> Update | None:
        return None if self.refused else required_action(self.changes)

    @property
    def overall_means(self) -> str:
        """What applying the plan means on its release, and, where a change ends jobs, that."""
        overall = self.overall
        if overall is None:
            return ""
        if not self.ends_jobs:
            return meaning(overall, self.release)
        text = str(effective(overall, self.release).value).split(" (")[0]
        ending = {e.path for e in self.ends_jobs}
        numbers = [
            n
            for n, step in enumerate(self.steps, 1)
            if step.action in (Action.STOP_PLACING, Action.WAIT_EMPTY) and set(step.changes) & ending
        ]
        empties = f" (steps {numbers[0]}-{numbers[1]})" if len(numbers) > 1 else ""
        return (
            f"ENDS JOBS: {', '.join(e.path for e in self.ends_jobs)} ends every job still in the cluster when "
            f"it is applied: the cluster is emptied first{empties}; then {text}, with -e gpucluster_end_jobs=true"
        )

    def as_dict(self) -> dict[str, Any]:
        overall = self.overall
        return {
            "release": self.release.name,
            "refused": list(self.refused),
            "upgrade": None if self.upgrade is None else self.upgrade.as_dict(),
            "ends_jobs": [e.as_dict() for e in self.ends_jobs],
            "changes": [c.as_dict() for c in self.changes],
            "files": [f.as_dict() for f in self.files],
            "steps": [s.as_dict() for s in self.steps],
            "monitoring_targets": self.monitoring_targets,
            "overall": None
            if overall is None
            else {"update": overall.name.lower(), "means": self.overall_means},
        }


def required_action(changes: Iterable[Change]) -> Update | None:
    found = [c.update for c in changes]
    return max(found, key=SEVERITY.index) if found else None


def effective(update: Update, release: Release) -> Update:
    """The policy a release really needs: node-list changes reconfigure from 24.11 on."""
    if update == Update.NODE_LIST:
        return Update.RECONFIGURE if release.reconfigure_node_changes else Update.RESTART
    return update


def meaning(update: Update, release: Release, ends_jobs: bool = False) -> str:
    """What applying a policy means on the target release; `ends_jobs`: for a change that ends the
    jobs still in the cluster (no word of jobs surviving then)."""
    if ends_jobs:
        does = str(effective(update, release).value).split(" (")[0]
        return f"{does}, run with -e gpucluster_end_jobs=true: the jobs still in the cluster end (empty it first)"
    if update == Update.RECONFIGURE:
        how = (
            "slurmctld re-executes itself and keeps running on the old files if the new ones are bad"
            if release.reconfigure_reexec
            else "a file slurmctld cannot read makes the daemons exit: prove it with `gpucluster trial` first"
        )
        return f"scontrol reconfigure (running jobs unaffected; Slurm {release.name}: {how})"
    return str(effective(update, release).value)
