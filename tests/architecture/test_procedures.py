"""The procedure table (gpucluster.changes.playbooks) against playbooks/: every play it names exists
and runs the role entry points it says, and every play of a playbook belongs to some procedure
(a play that only imports another playbook belongs to that playbook's procedures); every group of
hosts a procedure says it acts on (what `gpucluster apply` limits its playbook to) is a group one of
its plays runs on."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from gpucluster.changes.playbooks import (
    FILES_ONLY_PLAYS,
    FILES_ONLY_PROCEDURES,
    FILES_ONLY_TAG,
    HOST_GROUPS,
    PROCEDURES,
    Play,
    Procedure,
)

ROOT = Path(__file__).resolve().parents[2]
INCLUDES = ("ansible.builtin.include_role", "ansible.builtin.import_role")


def _entry_points(tasks: Any) -> list[str]:
    """The role entry points a list of tasks runs (nested blocks included)."""
    found: list[str] = []
    if isinstance(tasks, list):
        for task in tasks:
            found += _entry_points(task)
    elif isinstance(tasks, dict):
        for key, value in tasks.items():
            if key in INCLUDES:
                role = value["name"].rpartition(".")[2]
                step = (tasks.get("vars") or {}).get(f"{role}_step")
                entry = value.get("tasks_from") or step
                found.append(f"{role}:{entry}" if entry else role)
            elif key in ("block", "rescue", "always"):
                found += _entry_points(value)
    return found


def playbook_plays(path: Path) -> dict[str, Any]:
    """Play name -> its role entry points, or the playbook it imports (str)."""
    plays: dict[str, Any] = {}
    for play in yaml.safe_load(path.read_text(encoding="utf-8")):
        if "ansible.builtin.import_playbook" in play:
            plays[play["name"]] = str(path.parent / play["ansible.builtin.import_playbook"])
            continue
        roles = [(r["role"] if isinstance(r, dict) else r).rpartition(".")[2] for r in play.get("roles", [])]
        for section in ("pre_tasks", "tasks", "post_tasks"):
            roles += _entry_points(play.get(section, []))
        plays[play["name"]] = roles
    return plays


def all_plays() -> dict[str, dict[str, Any]]:
    return {
        str(path.relative_to(ROOT)): playbook_plays(path)
        for path in sorted((ROOT / "playbooks").glob("*.yml"))
    }


def problems(procedures: dict[str, Procedure], plays: dict[str, dict[str, Any]]) -> list[str]:
    found: list[str] = []
    named: dict[tuple[str, str], set[str]] = {}
    for procedure in procedures.values():
        for play in procedure.plays:
            runs = plays.get(play.playbook, {}).get(play.name)
            if runs is None:
                found.append(f"{procedure.key}: {play.playbook} has no play `{play.name}`")
                continue
            missing = [r for r in play.roles if r not in runs]
            if missing:
                found.append(
                    f"{procedure.key}: `{play.name}` in {play.playbook} does not run {', '.join(missing)}"
                )
            named.setdefault((play.playbook, play.name), set()).update(play.roles)
    covered = {playbook for playbook, _ in named}
    for playbook, its_plays in plays.items():
        for name, runs in its_plays.items():
            if isinstance(runs, str):
                imported = str(Path(runs).relative_to(ROOT))
                if imported not in covered:
                    found.append(f"{playbook}: `{name}` imports {imported}, whose plays no procedure names")
                continue
            if (playbook, name) not in named:
                found.append(f"{playbook}: no procedure names the play `{name}`")
                continue
            unnamed = sorted(set(runs) - named[(playbook, name)])
            if unnamed:
                found.append(f"{playbook}: `{name}` runs {', '.join(unnamed)}, which no procedure names")
    return found


def test_the_procedure_table_is_what_the_playbooks_run() -> None:
    assert problems(PROCEDURES, all_plays()) == []


def test_a_missing_play_and_an_unnamed_play_are_both_found() -> None:
    plays = all_plays()
    wrong = dict(PROCEDURES)
    wrong["users"] = Procedure(
        "users", "x", (Play("playbooks/slurm.yml", "Unix users everywhere", ("users",)),)
    )
    found = problems(wrong, plays)
    assert "users: playbooks/slurm.yml has no play `Unix users everywhere`" in found
    assert (
        "playbooks/slurm.yml: no procedure names the play `Unix groups and users of the cluster model on every Slurm host`"
        in found
    )


def test_every_step_text_names_its_playbook_and_roles() -> None:
    assert PROCEDURES["users"].text() == (
        "playbooks/slurm.yml (users): the Unix groups and users of hosts/users.yaml on every Slurm host"
    )
    assert PROCEDURES["storage"].roles == ("nfs_server", "shared_storage")


def play_groups(path: Path) -> dict[str, set[str]]:
    """Play name -> the groups of its `hosts:` pattern (`a:b:!c` gives a, b; a subscript stays)."""
    found: dict[str, set[str]] = {}
    for play in yaml.safe_load(path.read_text(encoding="utf-8")):
        if "hosts" in play:
            parts = re.split(r":(?![^\[]*\])", str(play["hosts"]))
            found[play["name"]] = {p for p in parts if p and not p.startswith(("!", "&"))}
    return found


def host_problems(procedures: dict[str, Procedure]) -> list[str]:
    found = []
    groups = {str(p.relative_to(ROOT)): play_groups(p) for p in sorted((ROOT / "playbooks").glob("*.yml"))}
    for procedure in procedures.values():
        runs_on = set().union(*(groups.get(p.playbook, {}).get(p.name, set()) for p in procedure.plays))
        for group in procedure.hosts:
            if group not in HOST_GROUPS:
                found.append(f"{procedure.key}: {group} is no group of HOST_GROUPS")
            elif group not in runs_on:
                found.append(f"{procedure.key}: none of its plays runs on {group}")
    return found


def test_every_group_a_procedure_acts_on_is_one_its_plays_run_on() -> None:
    assert host_problems(PROCEDURES) == []
    wrong = {"users": Procedure("users", "x", PROCEDURES["users"].plays, hosts=("gpu_mig_hosts",))}
    assert host_problems(wrong) == ["users: none of its plays runs on gpu_mig_hosts"]


def tagged_plays(tag: str) -> set[tuple[str, str]]:
    """(playbook, play) of every play that carries `tag` (on itself or on the import of its playbook)."""
    found: set[tuple[str, str]] = set()
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(path.read_text(encoding="utf-8")):
            if tag in (play.get("tags") or []) and "hosts" in play:
                found.add((str(path.relative_to(ROOT)), play["name"]))
            elif tag in (play.get("tags") or []):
                found.add((str(path.relative_to(ROOT)), f"import {play['ansible.builtin.import_playbook']}"))
    return found


def test_the_plays_of_a_files_only_change_carry_its_tag_and_no_other_does() -> None:
    """`gpucluster apply` runs a change of Slurm files or accounts alone with `--tags slurm_files`:
    exactly the plays FILES_ONLY_PLAYS lists carry the tag, and each belongs to a procedure of
    FILES_ONLY_PROCEDURES or to the render, the controllers or the power hold around them."""
    assert tagged_plays(FILES_ONLY_TAG) == set(FILES_ONLY_PLAYS)
    named = {(p.playbook, p.name): proc.key for proc in PROCEDURES.values() for p in proc.plays}
    for play in FILES_ONLY_PLAYS:
        assert named.get(play) in (*FILES_ONLY_PROCEDURES, "render", "controllers", "power"), play
