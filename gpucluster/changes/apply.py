"""`gpucluster apply OLD NEW`: the plan's steps as ansible-playbook runs, in the plan's order, each
limited to the hosts its step changes.

Everything comes from the plan and the procedure table (gpucluster.changes.playbooks): a step's
procedure names its playbook and the groups of hosts its plays change; the hosts of those groups
come from the new inventory and its rendered files, read as the playbooks' first plays read them.
Consecutive steps of one playbook are one run. A step no playbook carries out (the plan gives it
no procedure: a drain, a wait, a rebuild, kubectl) stops apply with its text.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from gpucluster.changes.moves import Step
from gpucluster.changes.playbooks import (
    FILES_ONLY_PROCEDURES,
    FILES_ONLY_TAG,
    PROCEDURES,
    SLURM_HOSTS,
    Procedure,
)
from gpucluster.changes.procedures import CONFIRM
from gpucluster.changes.records import Plan
from gpucluster.model.base import Owner, Update
from gpucluster.model.cluster import Cluster
from gpucluster.model.powered import cloud_hosts

# Where the render runs: every playbook's first play, whose facts the other plays read.
CONTROLLER_HOST = "localhost"
# Policies under which a Slurm file reaches the daemons by `scontrol reconfigure` (or not at all):
# only the hosts that keep the file need it. Any other restarts or touches the daemons everywhere.
FILES_ONLY = (Update.RENDER_ONLY, Update.RECONFIGURE)


@dataclass(frozen=True)
class Run:
    """One ansible-playbook run: the plan's steps it carries out (numbered as the plan prints them)."""

    steps: tuple[int, ...]
    playbook: str
    hosts: tuple[str, ...]  # the --limit, localhost first
    extra: tuple[str, ...] = ()  # -e key=value
    tags: tuple[str, ...] = ()  # --tags: only the plays they mark (none: every play)

    def argv(
        self, inventory: Path | str, program: str = "ansible-playbook", path: Path | None = None
    ) -> list[str]:
        """The command; `path`: where the playbook is (its name in the table otherwise)."""
        playbook = str(path or self.playbook)
        command = [program, "-i", str(inventory), playbook, "--limit", ",".join(self.hosts)]
        for var in self.extra:
            command += ["-e", var]
        if self.tags:
            command += ["--tags", ",".join(self.tags)]
        return command

    def line(self, inventory: Path | str) -> str:
        return shlex.join(self.argv(inventory))


@dataclass(frozen=True)
class ByHand:
    """A step of the plan no playbook carries out: apply stops before it."""

    step: int
    text: str


def _read(files: dict[str, str], rel: str) -> Any:
    text = files.get(rel)
    return None if text is None else yaml.safe_load(text)


def slurm_host_groups(cluster: Cluster) -> dict[str, list[str]]:
    """Each host's Slurm role, from the model (the render module gives the playbooks these groups).
    Only hosts bare-metal Slurm owns run slurmd; with none, there is no bare-metal Slurm to install;
    instances made when Slurm needs them are reached by no playbook (their image does the work)."""
    slurm = cluster.spec.slurm
    nodes = cluster.hosts_owned_by(Owner.SLURM)
    instances = set(cloud_hosts(cluster))
    return {
        "slurm_controllers": list(slurm.controller) if nodes else [],
        "slurm_dbd_hosts": [slurm.accounting.host] if slurm.accounting and nodes else [],
        "slurm_compute_nodes": [h for h in nodes if h not in instances],
        "slurm_login_nodes": list(slurm.login) if nodes else [],
        "slurm_restd_hosts": [slurm.rest_api.host] if slurm.rest_api and nodes else [],
    }


def host_groups(cluster: Cluster, files: dict[str, str]) -> dict[str, list[str]]:
    """The groups the playbooks' first plays build, from the cluster model (slurm_host_groups) and
    the rendered files they read (nodes/, mig/, hosts/storage.yaml, monitoring/)."""
    slurm = slurm_host_groups(cluster)
    storage = _read(files, "hosts/storage.yaml") or {}
    monitoring = _read(files, "monitoring/hosts.yaml") or {}
    return {
        **slurm,
        "slurm_controllers[0]": slurm["slurm_controllers"][:1],
        "nfs_servers": [e["host"] for e in storage.get("exports", [])],
        "shared_storage_hosts": list(
            dict.fromkeys(h for fs in storage.get("filesystems", []) for h in fs.get("hosts", []))
        ),
        "gpu_driver_hosts": list(_read(files, "nodes/hosts.yaml") or {}),
        "gpu_mig_hosts": list(_read(files, "mig/hosts.yaml") or {}),
        "monitoring_servers": [monitoring["monitoring_host"]] if monitoring.get("monitoring_host") else [],
    }


@dataclass(frozen=True)
class _Inventories:
    old: Cluster
    new: Cluster
    new_groups: dict[str, list[str]]
    known: frozenset[str]  # every host of the new Ansible inventory


def _reached(step: Step, plan: Plan, inv: _Inventories, group: list[str]) -> set[str]:
    """The hosts of `group` a per-host procedure's step changes: those its changes name (a node
    type's hosts, the hosts of a change of hosts), and those new or of another node type."""
    found: set[str] = set(step.hosts)
    by_path = {c.path: c for c in plan.changes}
    for path in step.changes:
        parts = path.split(".")
        if parts[:2] == ["cluster", "node_types"] and len(parts) > 2:
            found |= set(inv.new.hosts_by_type.get(parts[2], []))
        elif parts[0] == "hosts" and path in by_path:
            found |= set(by_path[path].hosts)
    old_type, new_type = inv.old.node_type_of, inv.new.node_type_of
    found |= {h for h in group if old_type.get(h) != new_type.get(h)}
    return found & set(group)


def _slurm_file_hosts(step: Step, inv: _Inventories) -> set[str]:
    """Where a Slurm step's files are kept (slurm_common's rule): with configless Slurm, the files
    slurmctld serves only on the controllers (and the login hosts without sackd)."""
    groups = inv.new_groups
    if step.update not in FILES_ONLY or not step.files:
        return {h for g in SLURM_HOSTS for h in groups[g]}
    # The hosts of the play "Slurm configuration, slurmctld and slurmd" (slurmdbd.conf: slurm_dbd's).
    every = {h for g in ("slurm_controllers", "slurm_compute_nodes", "slurm_login_nodes") for h in groups[g]}
    from gpucluster.slurm.render import configless_served

    new = inv.new
    served = set(configless_served(new)) if new.spec.slurm.configless else set()
    release = new.release
    fetch = release.sackd and release.packaging.sackd
    keepers = set(groups["slurm_controllers"]) | (set() if fetch else set(groups["slurm_login_nodes"]))
    found: set[str] = set()
    for rel in step.files:
        name = rel.removeprefix("slurm/")
        if rel.startswith("slurm/") and name in served:
            found |= keepers
        elif rel == "slurm/slurmdbd.conf":
            found |= set(groups["slurm_dbd_hosts"])
        else:
            found |= every
    return found


def step_hosts(step: Step, procedure: Procedure, plan: Plan, inv: _Inventories) -> list[str]:
    """The --limit of a step: localhost, then the hosts of the new inventory its plays change."""
    group = [h for g in procedure.hosts for h in inv.new_groups.get(g, [])]
    if procedure.per_host:
        chosen = _reached(step, plan, inv, group)
    elif procedure.key == "slurm":
        chosen = _slurm_file_hosts(step, inv)
    else:
        chosen = set(group)
    chosen |= set(step.hosts)
    ordered = [h for h in [*group, *step.hosts, *sorted(chosen)] if h in chosen and h in inv.known]
    return [CONTROLLER_HOST, *dict.fromkeys(ordered)]


def files_only(step: Step, plan: Plan) -> bool:
    """Whether the step changes Slurm's own files (or its accounts) alone, which the plays tagged
    FILES_ONLY_TAG install: each of its changes touches files under slurm/ only (not slurmdbd.conf,
    which slurmdbd's play installs), read again by `scontrol reconfigure` or as they are. A change
    that touches another file (node_ssh, containers) or none (what a role does without one) takes
    the whole playbook."""
    if step.procedure not in FILES_ONLY_PROCEDURES or step.update not in (*FILES_ONLY, Update.ACCOUNTS):
        return False
    by_path = {c.path: c for c in plan.changes}
    files = [f for path in step.changes for f in (by_path[path].files if path in by_path else ("",))]
    files += step.files
    return bool(files) and all(f.startswith("slurm/") and f != "slurm/slurmdbd.conf" for f in files)


def apply_actions(old: Cluster, new: Cluster, plan: Plan, new_files: dict[str, str]) -> list[Run | ByHand]:
    """The plan's steps as runs and steps by hand, in the plan's order (`new_files`: what the new
    inventory renders, which the playbooks group the hosts by)."""
    known = frozenset(new.inventory.members("all")) | {CONTROLLER_HOST}
    inv = _Inventories(old, new, host_groups(new, new_files), known)
    actions: list[Run | ByHand] = []
    for number, step in enumerate(plan.steps, 1):
        if step.procedure is None:
            if step.update == Update.RENDER_ONLY and not step.files:
                continue  # its changes' files are installed by the steps that route them
            actions.append(ByHand(number, step.text))
            continue
        procedure = PROCEDURES[step.procedure]
        extra = (
            (f"{CONFIRM}=true",)
            if plan.ends_jobs and procedure.playbook == PROCEDURES["slurm"].playbook
            else ()
        )
        tags: tuple[str, ...] = (FILES_ONLY_TAG,) if files_only(step, plan) else ()
        run = Run((number,), procedure.playbook, tuple(step_hosts(step, procedure, plan, inv)), extra, tags)
        last = actions[-1] if actions else None
        if isinstance(last, Run) and (last.playbook, last.extra) == (run.playbook, run.extra):
            # One run: tagged where both are, else every play (which does what the tags select).
            hosts = tuple(dict.fromkeys([*last.hosts, *run.hosts]))
            common = last.tags if last.tags == run.tags else ()
            actions[-1] = replace(last, steps=(*last.steps, number), hosts=hosts, tags=common)
        else:
            actions.append(run)
    return actions


def from_step(actions: Iterable[Run | ByHand], first: int) -> list[Run | ByHand]:
    """What is left from step `first` on (a run whose steps all come before it is left out)."""
    left: list[Run | ByHand] = []
    for action in actions:
        numbers = action.steps if isinstance(action, Run) else (action.step,)
        if max(numbers) >= first:
            left.append(action)
    return left


def playbook_path(playbook: str) -> Path:
    """A playbook of the table in this clone of gpucluster (or its Ansible collection)."""
    from gpucluster.changes.gate import PLAYBOOKS_ROOT

    return PLAYBOOKS_ROOT / playbook
