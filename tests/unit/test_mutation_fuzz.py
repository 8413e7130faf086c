"""Every example inventory, mutated as people and scripts break inventories (issue 37, item 2): a
key, group or host deleted, emptied, duplicated, retyped or renamed, in hosts.yml and cluster.yml.
Whatever the mutation, validate (and, where it is valid, show, render and plan from the original)
ends in exit 0, or in exit 2 listing problems each at its file and line: never a traceback, never
exit 1.

CI runs GPUCLUSTER_FUZZ_EXAMPLES examples per inventory (default 12: seconds); run thousands with
e.g. `GPUCLUSTER_FUZZ_EXAMPLES=400 pytest tests/unit/test_mutation_fuzz.py`.
"""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster.errors import InventoryError
from tests.conftest import INVENTORIES

EXAMPLES = int(os.environ.get("GPUCLUSTER_FUZZ_EXAMPLES", "12"))
CLUSTER_FILE = Path("group_vars/all/cluster.yml")
INVENTORY_NAMES = sorted(p.name for p in INVENTORIES.iterdir() if (p / "hosts.yml").is_file())

Path_ = tuple[Any, ...]


def node_paths(node: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every key and list item of a YAML tree, by its path."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, child in node.items():
            found += node_paths(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += node_paths(child, (*prefix, index))
    return found


def parent_of(data: Any, path: Path_) -> Any:
    for part in path[:-1]:
        data = data[part]
    return data


OTHER_TYPES: list[Any] = [
    None,
    True,
    0,
    7,
    -1,
    99999999999999999999,
    1.5,
    "",
    "x",
    "yes",
    [],
    {},
    ["a"],
    {"a": 1},
]


def retyped(value: Any, pick: int) -> Any:
    """A value of another type than `value` (what YAML makes of a missing quote or indentation)."""
    choices = [v for v in OTHER_TYPES if type(v) is not type(value)]
    return copy.deepcopy(choices[pick % len(choices)])


def renamed(key: Any, siblings: list[Any], pick: int) -> Any:
    """Another name for a key: a sibling's (a clash), a typo, another case, or a number."""
    text = str(key)
    options: list[Any] = [s for s in siblings if s != key]
    options += [text[:-1] or "x", text + "s", text.upper(), text.replace("_", "-"), text + "[1:2]", 3]
    return options[pick % len(options)]


def mutate(data: Any, op: str, choice: int, pick: int) -> Any:
    """`data` with one mutation at the path `choice` selects."""
    data = copy.deepcopy(data)
    paths = node_paths(data)
    if not paths:
        return retyped(data, pick)
    path = paths[choice % len(paths)]
    parent = parent_of(data, path)
    key = path[-1]
    if op == "delete":
        del parent[key]
    elif op == "empty":
        value = parent[key]
        parent[key] = {} if isinstance(value, dict) else [] if isinstance(value, list) else None
    elif op == "retype":
        parent[key] = retyped(parent[key], pick)
    elif op == "duplicate":
        if isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        else:
            # The same entry (a host, a group, a key) under another mapping of the tree as well.
            dicts = [p for p in paths if isinstance(parent_of(data, p)[p[-1]], dict) and p != path]
            target = (
                parent_of(data, dicts[pick % len(dicts)])[dicts[pick % len(dicts)][-1]] if dicts else parent
            )
            target[key if target is not parent else f"{key}2"] = copy.deepcopy(parent[key])
    elif op == "rename" and isinstance(parent, dict):
        items = list(parent.items())
        new = renamed(key, list(parent), pick)
        parent.clear()
        for k, v in items:
            parent[new if k == key else k] = v
    elif op == "rename":
        parent[key] = (
            renamed(parent[key], [], pick) if not isinstance(parent[key], (dict, list)) else parent[key]
        )
    return data


def dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def located(exc: InventoryError) -> None:
    assert exc.problems, "an InventoryError lists at least one problem"
    for problem in exc.problems:
        assert problem.file and problem.message, problem
        assert problem.line, f"no line: {problem}"


def judge(original: Path, directory: Path) -> str:
    """What the commands make of a mutated inventory: `valid` or `invalid` (exit 2 with located
    problems); anything else fails the test."""
    from gpucluster.layers import layer_warnings, load_cluster

    try:
        cluster = load_cluster(directory)
    except InventoryError as exc:
        located(exc)
        return "invalid"
    layer_warnings(cluster)
    from gpucluster.changes.plan import make_plan, text_lines
    from gpucluster.rendering import render_files
    from gpucluster.show import as_json, show

    render_files(cluster)
    show(cluster)
    as_json(cluster)
    text_lines(make_plan(load_cluster(original), cluster))
    return "valid"


MUTATIONS = st.sampled_from(["delete", "empty", "retype", "duplicate", "rename"])


@pytest.mark.parametrize("name", INVENTORY_NAMES)
def test_mutated_examples_give_located_problems_or_pass(name: str) -> None:
    source = INVENTORIES / name
    hosts = yaml.safe_load((source / "hosts.yml").read_text(encoding="utf-8"))
    cluster = yaml.safe_load((source / CLUSTER_FILE).read_text(encoding="utf-8"))
    seen: dict[str, int] = {}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        which=st.lists(
            st.tuples(st.booleans(), MUTATIONS, st.integers(0, 10**6), st.integers(0, 50)),
            min_size=1,
            max_size=3,
        )
    )
    def run(which: list[tuple[bool, str, int, int]]) -> None:
        new_hosts, new_cluster = hosts, cluster
        for in_hosts, op, choice, pick in which:
            if in_hosts:
                new_hosts = mutate(new_hosts, op, choice, pick)
            else:
                new_cluster = mutate(new_cluster, op, choice, pick)
        with tempfile.TemporaryDirectory(prefix="gpucluster-fuzz-") as tmp:
            directory = Path(tmp) / name
            (directory / CLUSTER_FILE).parent.mkdir(parents=True)
            (directory / "hosts.yml").write_text(dump(new_hosts), encoding="utf-8")
            (directory / CLUSTER_FILE).write_text(dump(new_cluster), encoding="utf-8")
            verdict = judge(source, directory)
        seen[verdict] = seen.get(verdict, 0) + 1

    run()
    assert sum(seen.values()) >= 1
