"""What the trial's slurmdbd and slurmctld need beside the files: the accounts, users and QOS of the
inventory (partitions limited to tenants name accounts slurmctld must find), and the programs
slurm.conf names (slurmctld refuses a power-saving program it cannot find).

The accounts come from the rendered slurm/accounts.yaml through the collection's own
`slurm_associations` module (what the slurm_accounts role runs): its `plan` gives the sacctmgr
commands that make an empty database hold them, and the sandbox runs them before slurmctld starts.
gpucluster's own programs are installed as the roles install them; a site's program gets an
executable stand-in that only logs, and the trial says so.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from gpucluster.lab.paths import REPO_ROOT
from gpucluster.model.cluster import Cluster
from gpucluster.render.health import HEALTH_PROGRAM, REBOOT_PROGRAM, program_path
from gpucluster.render.power import (
    POWER_PROGRAM,
    RESUME_FAIL_PROGRAM,
    RESUME_PROGRAM,
    SUSPEND_PROGRAM,
)
from gpucluster.render.power import program_path as power_program_path

ASSOCIATIONS = Path("plugins") / "modules" / "slurm_associations.py"
COLLECTION = Path("ansible_collections") / "gpucluster" / "cluster"
# slurm.conf keys naming a program (an absolute path; a glob such as prolog.d/* is left alone).
PROGRAM_KEYS = re.compile(
    r"^(?P<key>\w*Program|Prolog|Epilog|PrologSlurmctld|EpilogSlurmctld|MailProg|SlurmctldPrimaryOnProg"
    r"|SlurmctldPrimaryOffProg|ResvProlog|ResvEpilog|TaskProlog|TaskEpilog|SrunProlog|SrunEpilog)"
    r"=(?P<path>/[^\s*?\[]+)$",
    re.MULTILINE,
)
# The QOS a new slurmdbd database holds (as `sacctmgr -nP show qos` prints it): `normal`, priority 0,
# no limit.
FRESH_NORMAL_QOS = {
    "name": "normal",
    "priority": "0",
    "maxtrespu": "",
    "maxtres": "",
    "grptres": "",
    "maxwall": "",
    "preempt": "",
}
# What a site's program is replaced with, where this machine has none: it logs its arguments and succeeds.
STAND_IN = '#!/bin/sh\necho "$(date +%s) {path} $*" >>/var/log/slurm/trial-stand-ins.log\nexit 0\n'


def associations_module() -> Path | None:
    """The collection's slurm_associations module: beside the package in a clone, else in an
    installed collection (ANSIBLE_COLLECTIONS_PATH, then Ansible's default places)."""
    places = [REPO_ROOT]
    for variable in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS"):
        places += [Path(p) / COLLECTION for p in os.environ.get(variable, "").split(os.pathsep) if p]
    places += [
        Path.home() / ".ansible" / "collections" / COLLECTION,
        Path("/usr/share/ansible/collections") / COLLECTION,
    ]
    return next((place / ASSOCIATIONS for place in places if (place / ASSOCIATIONS).is_file()), None)


def _load(path: Path) -> ModuleType | None:
    spec = importlib.util.spec_from_file_location("gpucluster_trial_slurm_associations", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    # Registered first: its dataclasses look their module up while the class is built.
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except ImportError:  # ansible-core, which the module imports, is not installed here
        del sys.modules[spec.name]
        return None
    return module


def seed_commands(accounts_yaml: str | None) -> tuple[list[list[str]], list[str]]:
    """The sacctmgr argument lists (after `sacctmgr -i`) that give an empty database the accounts,
    users and QOS of accounts.yaml, and what the trial says when it cannot work them out."""
    if not accounts_yaml:
        return [], []
    path = associations_module()
    module = _load(path) if path is not None else None
    if module is None:
        return [], [
            "trial: the accounts, users and QOS of slurm/accounts.yaml were not added to the trial's slurmdbd: "
            "the collection's slurm_associations module (gpucluster.cluster, with ansible-core) is not "
            "installed here; partitions limited to tenants then log `No association for account`"
        ]
    desired: dict[str, Any] = yaml.safe_load(accounts_yaml)
    # A new database: no cluster yet, and the one QOS slurmdbd makes itself.
    fresh = module.Current(cluster_exists=False, qos={"normal": dict(FRESH_NORMAL_QOS)})
    return [[str(word) for word in command] for command in module.plan(desired, fresh)], []


def commands_file(commands: list[list[str]]) -> str:
    """One command per line, quoted for the sandbox's shell."""
    return "".join(shlex.join(command) + "\n" for command in commands)


def own_programs(cluster: Cluster) -> dict[str, str]:
    """gpucluster's own programs slurm.conf may name, path -> content, as the roles install them."""
    health = program_path().read_text(encoding="utf-8")
    # gpucluster-reboot is a link to the health check (role slurm_health); gpucluster-power goes by
    # four names (role slurm_power).
    found = {HEALTH_PROGRAM: health, REBOOT_PROGRAM: health}
    power = power_program_path().read_text(encoding="utf-8")
    found.update(
        (name, power) for name in (POWER_PROGRAM, RESUME_PROGRAM, SUSPEND_PROGRAM, RESUME_FAIL_PROGRAM)
    )
    if getattr(cluster.spec, "monitoring", None) is not None:
        from gpucluster.monitoring import dcgm
        from gpucluster.monitoring.render import job_mapping_script

        found[dcgm.PROLOG] = job_mapping_script(cluster, "prolog")
        found[dcgm.EPILOG] = job_mapping_script(cluster, "epilog")
    return found


def programs(cluster: Cluster, slurm_conf: str) -> dict[str, tuple[str, str, str]]:
    """Every program slurm.conf names: path -> (its key, whose: `own` or `site`, what the trial
    installs there). gpucluster's own are installed; a site's gets the stand-in where the machine
    that runs the trial has nothing at that path (the sandbox decides, and says so)."""
    own = own_programs(cluster)
    found: dict[str, tuple[str, str, str]] = {}
    for match in PROGRAM_KEYS.finditer(slurm_conf):
        key, path = match.group("key"), match.group("path")
        if path not in found:
            found[path] = (
                (key, "own", own[path]) if path in own else (key, "site", STAND_IN.format(path=path))
            )
    return found


def stand_in_notes(log: str) -> list[str]:
    """What the sandbox's programs.log says, as the trial's notes."""
    notes = []
    for line in log.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "stand-in":
            key, _, path = rest.partition(" ")
            notes.append(
                f"trial: {key}={path} is the site's program: an executable stand-in that only logs ran in its place"
            )
        elif kind == "missing":
            notes.append(f"trial: {rest}")
    return notes
