"""Read an Ansible YAML inventory directory: hosts, groups and the `cluster` variable.

Only the parts gpucluster needs are interpreted: `hosts.yml` (groups, children, host
patterns) and the group_vars file of `all` that defines `cluster`. Everything else is left
to Ansible.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.errors import InventoryError, Problem, format_path
from gpucluster.hostranges import HostPatternError, expand
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

    def members(self, group: str) -> list[str]:
        """Every host of a group and of its descendants, in inventory order, once each."""
        seen: dict[str, None] = {}
        stack = [group]
        visited: set[str] = set()
        while stack:
            current = stack.pop(0)
            if current in visited:
                continue
            visited.add(current)
            for host in self.group_hosts.get(current, []):
                seen.setdefault(host, None)
            stack.extend(self.group_children.get(current, []))
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
    problems: list[Problem] = []
    for path in candidates:
        try:
            loaded = load_yaml(path, _display(root, path, display_root))
        except InventoryError as exc:
            problems += exc.problems
            continue
        if isinstance(loaded.data, dict) and "cluster" in loaded.data:
            found.append(loaded)
    if problems:
        raise InventoryError(problems)
    if not found:
        where = _display(root, root / "group_vars" / "all" / "cluster.yml", display_root)
        raise InventoryError([Problem(where, "cluster", "no group_vars file of `all` defines `cluster`")])
    if len(found) > 1:
        raise InventoryError(
            [
                Problem(f.file, "cluster", "`cluster` is defined in more than one group_vars file")
                for f in found
            ]
        )
    return found[0]


def _read_group(
    inv: Inventory, name: str, body: Any, parts: list[str | int], problems: list[Problem]
) -> None:
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
    seen_here: set[str] = set(direct)
    for pattern, hvars in hosts.items():
        key_path = format_path([*parts, "hosts", str(pattern)])
        try:
            names = expand(str(pattern))
        except HostPatternError as exc:
            problems.append(hosts_file.problem(key_path, str(exc)))
            continue
        if hvars is not None and not isinstance(hvars, dict):
            problems.append(hosts_file.problem(key_path, "host variables must be a mapping"))
            hvars = None
        for host in names:
            if host in seen_here:
                problems.append(hosts_file.problem(key_path, f"duplicate host `{host}` in group `{name}`"))
                continue
            seen_here.add(host)
            direct.append(host)
            inv.hostvars.setdefault(host, {}).update(hvars or {})
    children = body.get("children") or {}
    if not isinstance(children, dict):
        problems.append(
            hosts_file.problem(format_path([*parts, "children"]), "must be a mapping of group names")
        )
        children = {}
    kids = inv.group_children.setdefault(name, [])
    for child, child_body in children.items():
        if str(child) not in kids:
            kids.append(str(child))
        _read_group(inv, str(child), child_body, [*parts, "children", str(child)], problems)


def _check_group_cycles(inv: Inventory, problems: list[Problem]) -> None:
    state: dict[str, int] = {}

    def visit(group: str, trail: list[str]) -> None:
        state[group] = 1
        for child in inv.group_children.get(group, []):
            if state.get(child) == 1:
                cycle = " -> ".join([*trail[trail.index(child) :], child]) if child in trail else child
                problems.append(inv.hosts_file.problem("all", f"group children form a cycle: {cycle}"))
            elif child not in state:
                visit(child, [*trail, child])
        state[group] = 2

    for group in list(inv.group_children):
        if group not in state:
            visit(group, [group])


def load_inventory(directory: str | Path) -> Inventory:
    """Load hosts and the cluster definition from an inventory directory."""
    display_root = str(directory)
    root = Path(directory)
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
        raise InventoryError([hosts_file.problem("", "the top level must be a single `all` group")])
    _read_group(inv, "all", data["all"], ["all"], problems)
    _check_group_cycles(inv, problems)
    clashes = sorted(set(inv.hostvars) & (set(inv.group_hosts) | set(inv.group_children)))
    for name in clashes:
        problems.append(hosts_file.problem("all", f"`{name}` is both a host and a group"))
    if problems:
        raise InventoryError(problems)
    return inv
