"""Read an Ansible YAML inventory directory: hosts, groups and the `cluster` variable.

Only the parts gpucluster needs are interpreted: `hosts.yml` (groups, children, host
patterns) and the group_vars file of `all` that defines `cluster`. Everything else is left
to Ansible.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.errors import InventoryError, Problem, format_path
from gpucluster.hostranges import MAX_HOSTS, HostPatternError, expand
from gpucluster.yamlfile import LoadedYaml, load_yaml

HOSTS_FILES = ("hosts.yml", "hosts.yaml")
_GROUP_KEYS = {"hosts", "children", "vars"}


@dataclass
class Inventory:
    """Hosts and groups of an inventory, plus the raw cluster definition."""

    root: Path
    display_root: str
    hosts_file: LoadedYaml
    cluster_file: LoadedYaml
    hostvars: dict[str, dict[str, Any]] = field(default_factory=dict)
    group_hosts: dict[str, list[str]] = field(default_factory=dict)
    group_children: dict[str, list[str]] = field(default_factory=dict)
    # Host -> the key path of hosts.yml where it is first listed (its pattern), for problems.
    declared_at: dict[str, str] = field(default_factory=dict)
    # (group, host) -> the key path of hosts.yml listing the host directly in that group.
    listed_at: dict[tuple[str, str], str] = field(default_factory=dict)

    def members(self, group: str) -> list[str]:
        """Every host of a group and of its descendants, in inventory order, once each."""
        seen: dict[str, None] = {}
        queue = [group]
        visited: set[str] = set()
        for current in queue:  # breadth first; the list grows while it is read
            if current in visited:
                continue
            visited.add(current)
            for host in self.group_hosts.get(current, []):
                seen.setdefault(host, None)
            queue.extend(self.group_children.get(current, []))
        return list(seen)

    @property
    def groups(self) -> list[str]:
        return sorted(set(self.group_hosts) | set(self.group_children))


def _display(root: Path, path: Path, display_root: str) -> str:
    return str(Path(display_root) / path.relative_to(root))


def _find_cluster_file(root: Path, display_root: str) -> LoadedYaml:
    candidates: list[Path] = []
    all_dir = root / "group_vars" / "all"
    if all_dir.is_dir():
        candidates += sorted(p for p in all_dir.iterdir() if p.suffix in (".yml", ".yaml"))
    candidates += [
        p for p in (root / "group_vars" / "all.yml", root / "group_vars" / "all.yaml") if p.is_file()
    ]
    found: list[LoadedYaml] = []
    read: list[LoadedYaml] = []
    problems: list[Problem] = []
    for path in candidates:
        try:
            loaded = load_yaml(path, _display(root, path, display_root))
        except InventoryError as exc:
            problems += exc.problems
            continue
        read.append(loaded)
        if isinstance(loaded.data, dict) and "cluster" in loaded.data:
            found.append(loaded)
    if problems:
        raise InventoryError(problems)
    if not found:
        raise InventoryError([_no_cluster(root, display_root, read)])
    if len(found) > 1:
        raise InventoryError(
            [
                Problem(f.file, "cluster", "`cluster` is defined in more than one group_vars file")
                for f in found
            ]
        )
    return found[0]


# What a host name may hold: Slurm's node names, DNS and Kubernetes' node names all take these
# (a range's letters and digits aside, which expand() checks).
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_RANGES = re.compile(r"\[[^\]]*\]")


def _host_name_problem(pattern: str) -> str | None:
    """What is wrong with the names a host pattern stands for, if anything."""
    fixed = _RANGES.sub("0", pattern)
    if _HOST_NAME.fullmatch(fixed):
        return None
    odd = sorted({c for c in fixed if not (c.isascii() and (c.isalnum() or c in "._-"))})
    which = ", ".join(f"`{c}`" if c.isprintable() and not c.isspace() else repr(c) for c in odd)
    if not odd:
        return f"host name `{pattern}` must start with an ASCII letter or digit"
    return (
        f"host name `{pattern}` holds {which}: host names are ASCII letters, digits, `-`, `.` and `_` "
        "(Slurm, DNS and Kubernetes name nodes by them); rename it"
    )


def _no_cluster(root: Path, display_root: str, read: list[LoadedYaml]) -> Problem:
    """No group_vars file of `all` holds `cluster:`: said at the key that stands for it where a
    file has one close to it (`Cluster:`, `clusters:`), else at the first line of the first file."""
    for loaded in read:
        keys = [str(k) for k in loaded.data] if isinstance(loaded.data, dict) else []
        close = difflib.get_close_matches("cluster", [k.lower() for k in keys], n=1, cutoff=0.75)
        if close:
            key = next(k for k in keys if k.lower() == close[0])
            return loaded.problem(key, "unknown top-level key: did you mean `cluster`?")
    if read:
        return Problem(
            read[0].file,
            "cluster",
            "no group_vars file of `all` defines `cluster` (this one has no `cluster:` at its top level)",
            1,
        )
    where = _display(root, root / "group_vars" / "all" / "cluster.yml", display_root)
    return Problem(where, "cluster", "no group_vars file of `all` defines `cluster`")


@dataclass
class _Reading:
    """State of one read of hosts.yml beyond the Inventory itself."""

    hosts_of: dict[str, set[str]] = field(default_factory=dict)  # group -> its direct hosts
    children_of: dict[str, set[str]] = field(default_factory=dict)  # group -> its children
    expanded: int = 0  # host names listed so far, ranges expanded (at most MAX_HOSTS are)


def _read_group(
    inv: Inventory,
    name: str,
    body: Any,
    parts: list[str | int],
    problems: list[Problem],
    reading: _Reading | None = None,
) -> None:
    reading = reading if reading is not None else _Reading()
    hosts_file = inv.hosts_file
    path = format_path(parts)
    if body is None:
        body = {}
    if not isinstance(body, dict):
        problems.append(
            hosts_file.problem(path, f"group `{name}` must be a mapping with hosts/children/vars")
        )
        return
    for key in body:
        if key not in _GROUP_KEYS:
            problems.append(
                hosts_file.problem(
                    format_path([*parts, key]), "unknown key (expected hosts, children or vars)"
                )
            )
    direct = inv.group_hosts.setdefault(name, [])
    hosts = body.get("hosts") or {}
    if not isinstance(hosts, dict):
        problems.append(hosts_file.problem(format_path([*parts, "hosts"]), "must be a mapping of host names"))
        hosts = {}
    seen_here = reading.hosts_of.setdefault(name, set())
    for pattern, hvars in hosts.items():
        if reading.expanded > MAX_HOSTS:
            break
        key_path = format_path([*parts, "hosts", str(pattern)])
        try:
            names = expand(str(pattern))
        except HostPatternError as exc:
            problems.append(hosts_file.problem(key_path, str(exc)))
            continue
        bad = _host_name_problem(str(pattern))
        if bad:
            problems.append(hosts_file.problem(key_path, bad))
            continue
        reading.expanded += len(names)
        if reading.expanded > MAX_HOSTS:
            problems.append(
                hosts_file.problem(
                    key_path,
                    f"the inventory lists more than {MAX_HOSTS:,} hosts (the limit; ranges expanded)",
                )
            )
            break
        if hvars is not None and not isinstance(hvars, dict):
            problems.append(hosts_file.problem(key_path, "host variables must be a mapping"))
            hvars = None
        for host in names:
            if host in seen_here:
                problems.append(hosts_file.problem(key_path, f"duplicate host `{host}` in group `{name}`"))
                continue
            seen_here.add(host)
            direct.append(host)
            inv.declared_at.setdefault(host, key_path)
            inv.listed_at[(name, host)] = key_path
            inv.hostvars.setdefault(host, {}).update(hvars or {})
    children = body.get("children") or {}
    if not isinstance(children, dict):
        problems.append(
            hosts_file.problem(format_path([*parts, "children"]), "must be a mapping of group names")
        )
        children = {}
    kids = inv.group_children.setdefault(name, [])
    known = reading.children_of.setdefault(name, set())
    for child, child_body in children.items():
        if str(child) not in known:
            known.add(str(child))
            kids.append(str(child))
        _read_group(inv, str(child), child_body, [*parts, "children", str(child)], problems, reading)


def _check_group_cycles(inv: Inventory, problems: list[Problem]) -> None:
    """Depth first from each group in turn, without recursion (a chain of groups may be long)."""
    done: set[str] = set()
    for start in list(inv.group_children):
        if start in done:
            continue
        trail = [start]  # the groups being visited, outermost first
        position = {start: 0}
        pending = [iter(inv.group_children.get(start, []))]
        while pending:
            child = next(pending[-1], None)
            if child is None:
                pending.pop()
                finished = trail.pop()
                del position[finished]
                done.add(finished)
                continue
            if child in position:
                cycle = " -> ".join([*trail[position[child] :], child])
                problems.append(inv.hosts_file.problem("all", f"group children form a cycle: {cycle}"))
            elif child not in done:
                position[child] = len(trail)
                trail.append(child)
                pending.append(iter(inv.group_children.get(child, [])))


def load_inventory(directory: str | Path) -> Inventory:
    """Load hosts and the cluster definition from an inventory directory."""
    display_root = str(directory)
    root = Path(directory)
    if root.is_file():
        parent = str(root.parent) if str(root.parent) != "." else "."
        raise InventoryError(
            [
                Problem(
                    display_root,
                    "",
                    f"is a file: give the inventory directory (`{parent}`), the one that holds hosts.yml "
                    "and group_vars/",
                )
            ]
        )
    if not root.is_dir():
        raise InventoryError([Problem(display_root, "", "inventory directory not found")])
    hosts_path = next((root / name for name in HOSTS_FILES if (root / name).is_file()), None)
    if hosts_path is None:
        raise InventoryError([Problem(str(Path(display_root) / "hosts.yml"), "", "file not found")])
    problems: list[Problem] = []
    hosts_file: LoadedYaml | None = None
    cluster_file: LoadedYaml | None = None
    try:
        hosts_file = load_yaml(hosts_path, _display(root, hosts_path, display_root))
    except InventoryError as exc:
        problems += exc.problems
    try:
        cluster_file = _find_cluster_file(root, display_root)
    except InventoryError as exc:
        problems += exc.problems
    if problems or hosts_file is None or cluster_file is None:
        raise InventoryError(problems)
    inv = Inventory(root=root, display_root=display_root, hosts_file=hosts_file, cluster_file=cluster_file)
    data = hosts_file.data
    if not isinstance(data, dict) or set(data) != {"all"}:
        others = [str(key) for key in data if key != "all"] if isinstance(data, dict) else []
        where = others[0] if others else ""
        problem = hosts_file.problem(where, "the top level must be a single `all` group")
        raise InventoryError([Problem(problem.file, problem.path, problem.message, problem.line or 1)])
    _read_group(inv, "all", data["all"], ["all"], problems)
    _check_group_cycles(inv, problems)
    clashes = sorted(set(inv.hostvars) & (set(inv.group_hosts) | set(inv.group_children)))
    for name in clashes:
        problems.append(hosts_file.problem("all", f"`{name}` is both a host and a group"))
    if problems:
        raise InventoryError(problems)
    return inv
