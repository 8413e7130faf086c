"""No input makes the loader fail with anything but a listed problem (never a traceback)."""

from __future__ import annotations

import copy
import textwrap
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster.errors import InventoryError
from gpucluster.layers import load_cluster
from tests.conftest import SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory, run_cli

BASE = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**7), st.text(max_size=12), st.floats(allow_nan=False)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, child in node.items():
            found += paths(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += paths(child, (*prefix, index))
    return found


ALL_PATHS = paths(BASE)


def mutated(choice: int, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    path = ALL_PATHS[choice % len(ALL_PATHS)]
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return data


def check(directory: Any) -> None:
    try:
        load_cluster(directory)
    except InventoryError as exc:
        assert exc.problems, "an InventoryError always lists at least one problem"
        for problem in exc.problems:
            assert problem.file and problem.message


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(choice=st.integers(0, 10_000), value=values)
def test_any_value_anywhere_gives_problems_not_crashes(
    inventories: InventoryFactory, choice: int, value: Any
) -> None:
    directory = inventories.make(SMALL_HOSTS, yaml.safe_dump(mutated(choice, value)), name=f"m{choice}")
    check(directory)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet="ab:[]{}-,\n 01#&*!|>'\"", max_size=80))
def test_arbitrary_text_files_give_problems_not_crashes(inventories: InventoryFactory, text: str) -> None:
    check(inventories.make(text, SMALL_CLUSTER, name="hosts-fuzz"))
    check(inventories.make(SMALL_HOSTS, text, name="cluster-fuzz"))


def test_cli_on_garbage_prints_no_traceback(inventories: InventoryFactory) -> None:
    for name, hosts, cluster in [
        ("binary", "\x00\x01", SMALL_CLUSTER),
        ("list-top", "- a\n- b\n", SMALL_CLUSTER),
        ("cluster-list", SMALL_HOSTS, "cluster: [1, 2]\n"),
        ("anchors", SMALL_HOSTS, "cluster: &a {name: *a}\n"),
    ]:
        directory = inventories.make(hosts, cluster, name=name)
        proc = run_cli("validate", str(directory))
        assert proc.returncode == 2, (name, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr
