"""One owner at every instant (issue 42, requirement 4): every interleaving of the lend and return
steps (gpucluster.pool.steps, the one table the programs follow) with Slurm jobs and Kubernetes
pods arriving and ending whenever their scheduler allows, and with the drain bound running out at
any moment, is explored exhaustively. At no reachable state may both schedulers place work on the
node, or one place work where the other's still runs; every procedure ends where it should. The
same exploration over a table with two steps swapped finds the instant the table forbids."""

from __future__ import annotations

import ast
import sys
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpucluster.pool
from gpucluster.pool.steps import (
    AT_KUBERNETES,
    AT_SLURM,
    EVICT_OR_UNDO,
    STEPS,
    UNDO,
    NodeState,
    Procedure,
    Step,
    start_of,
    steps_of,
)

# Work on a node beyond two jobs or pods behaves as two: the exploration is finite and complete.
MOST = 2


@dataclass(frozen=True)
class Run:
    procedure: Procedure
    position: int  # the next step's index; len(steps): done
    state: NodeState
    undone: bool = False  # the procedure gave up and its undo steps ran


def events(run: Run, steps: tuple[Step, ...], evict: bool, most: int = MOST) -> list[tuple[str, Run]]:
    """Every event that may happen next, with the run it leads to (at most `most` jobs or pods)."""
    state = run.state
    found: list[tuple[str, Run]] = []
    if state.slurm_accepts and state.jobs < most:
        found.append(("job starts", replace(run, state=replace(state, jobs=state.jobs + 1))))
    if state.jobs:
        found.append(("job ends", replace(run, state=replace(state, jobs=state.jobs - 1))))
    if state.kubernetes_accepts and state.pods < most:
        found.append(("pod binds", replace(run, state=replace(state, pods=state.pods + 1))))
    if state.pods:
        found.append(("pod ends", replace(run, state=replace(state, pods=state.pods - 1))))
    if run.undone or run.position == len(steps):
        return found
    step = steps[run.position]
    if step.waits_for(state):
        found.append((step.name, replace(run, position=run.position + 1, state=step.apply(state))))
    elif step.on_timeout == EVICT_OR_UNDO:
        if evict:
            emptied = replace(state, pods=0)
            found.append(
                (f"{step.name}: evicted", replace(run, position=run.position + 1, state=step.apply(emptied)))
            )
        else:
            undone = state
            for undo in UNDO[run.procedure]:
                undone = undo.apply(undone)
            found.append((f"{step.name}: timed out, undone", replace(run, state=undone, undone=True)))
    return found


def explore(procedure: Procedure, steps: tuple[Step, ...], evict: bool) -> tuple[set[str], list[str] | None]:
    """Breadth-first over every reachable run from the procedure's start with any work on the node:
    (the events that happened somewhere, the events to the first state with two owners, or None)."""
    start = start_of(procedure)
    roots = [
        Run(procedure, 0, replace(start, jobs=w) if procedure == Procedure.LEND else replace(start, pods=w))
        for w in range(MOST + 1)
    ]
    seen = set(roots)
    happened: set[str] = set()
    queue = deque((root, [f"start with {root.state}"]) for root in roots)
    while queue:
        run, path = queue.popleft()
        if not run.state.one_owner:
            return happened, path
        finished = run.position == len(steps) and not run.undone
        if finished:
            assert_ended(procedure, run.state, path)
        for name, after in events(run, steps, evict):
            happened.add(name)
            if after not in seen:
                seen.add(after)
                queue.append((after, [*path, name]))
    return happened, None


def assert_ended(procedure: Procedure, state: NodeState, path: list[str]) -> None:
    """A finished procedure leaves the node wholly the other side's (its work may have started)."""
    target = AT_KUBERNETES if procedure == Procedure.LEND else AT_SLURM
    flags = replace(state, jobs=0, pods=0)
    assert flags == target, path
    assert (state.jobs if procedure == Procedure.LEND else state.pods) == 0, path


@pytest.mark.parametrize("evict", [False, True], ids=["pods never evicted", "pods evicted"])
@pytest.mark.parametrize("procedure", list(Procedure))
def test_no_reachable_instant_has_two_owners(procedure: Procedure, evict: bool) -> None:
    happened, bad = explore(procedure, steps_of(procedure), evict)
    assert bad is None, " -> ".join(bad)
    # The exploration went everywhere: every step ran, and work came and went.
    assert {s.name for s in steps_of(procedure)} <= happened
    assert {"job ends", "pod binds"} <= happened
    if procedure == Procedure.RETURN:
        assert ("wait-pods: evicted" if evict else "wait-pods: timed out, undone") in happened


def test_a_return_whose_pods_outlast_the_bound_stays_lent_and_may_take_pods() -> None:
    """Pods never evicted: the return gives up, the node stays Kubernetes', uncordoned, quota back."""
    run = Run(Procedure.RETURN, 0, replace(AT_KUBERNETES, pods=1))
    steps = steps_of(Procedure.RETURN)
    path = []
    while not run.undone:
        name, run = next((n, r) for n, r in events(run, steps, evict=False) if not n.startswith("pod"))
        path.append(name)
    assert path == ["lower-quota", "cordon", "wait-pods: timed out, undone"]
    assert run.state == replace(AT_KUBERNETES, pods=1)


@pytest.mark.parametrize(
    ("procedure", "late", "early"),
    [
        (Procedure.RETURN, "resume", "wait-pods"),  # Slurm placing while pods still run
        (Procedure.LEND, "untaint", "power-down"),  # Kubernetes binding while Slurm still places
        (Procedure.LEND, "untaint", "stop-slurmd"),  # binding before the jobs have ended
    ],
)
def test_the_exploration_finds_two_owners_in_a_table_out_of_order(
    procedure: Procedure, late: str, early: str
) -> None:
    steps = list(steps_of(procedure))
    names = [s.name for s in steps]
    moved = steps.pop(names.index(late))
    steps.insert(names.index(early), replace(moved, waits_for=lambda state: True))
    _, bad = explore(procedure, tuple(steps), evict=False)
    assert bad is not None


def test_the_table_is_the_one_the_procedures_are_made_of() -> None:
    assert [s.name for s in STEPS] == [
        *[s.name for s in steps_of(Procedure.LEND)],
        *[s.name for s in steps_of(Procedure.RETURN)],
    ]
    assert start_of(Procedure.LEND).one_owner and start_of(Procedure.RETURN).one_owner


@settings(max_examples=300, deadline=None)
@given(
    procedure=st.sampled_from(list(Procedure)),
    evict=st.booleans(),
    choices=st.lists(st.integers(min_value=0, max_value=7), max_size=60),
)
def test_long_random_interleavings_keep_one_owner(
    procedure: Procedure, evict: bool, choices: list[int]
) -> None:
    """Beyond the exploration's bound of two jobs or pods: long runs with work piling up."""
    run = Run(procedure, 0, start_of(procedure))
    steps = steps_of(procedure)
    for choice in choices:
        options = events(run, steps, evict, most=50)
        if not options:
            break
        _, run = options[choice % len(options)]
        assert run.state.one_owner, run


def test_the_pool_modules_need_only_the_standard_library() -> None:
    """They ship to the controllers beside the programs, where gpucluster is not installed; the
    official Kubernetes client is kube.py's alone (the controllers get it with the pool's programs)."""
    folder = Path(gpucluster.pool.__file__).parent
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                allowed = (
                    top in sys.stdlib_module_names
                    or top == "__future__"
                    or name.startswith("gpucluster.pool")
                    or (path.name == "kube.py" and top == "kubernetes")
                )
                assert allowed, f"{path.name} imports {name}"


def cycle_events(run: Run, evict: bool) -> list[tuple[str, Run]]:
    """As `events`, and once a procedure ends the next begins on the same node: a lend finished, a
    return may start; a return finished, a lend; a return given up, a return again later."""
    found = events(run, steps_of(run.procedure), evict)
    if run.undone:
        found.append((f"{run.procedure} again", Run(run.procedure, 0, run.state)))
    elif run.position == len(steps_of(run.procedure)):
        other = Procedure.RETURN if run.procedure == Procedure.LEND else Procedure.LEND
        found.append((f"{other} begins", Run(other, 0, run.state)))
    return found


@pytest.mark.parametrize("evict", [False, True], ids=["pods never evicted", "pods evicted"])
def test_moves_back_and_forth_keep_one_owner(evict: bool) -> None:
    """Every interleaving of lend, return, lend, ... (returns given up and retried) with work
    arriving and ending on both sides: no reachable state has two owners."""
    roots = [Run(Procedure.LEND, 0, replace(AT_SLURM, jobs=w)) for w in range(MOST + 1)]
    seen = set(roots)
    queue = deque(roots)
    happened: set[str] = set()
    while queue:
        run = queue.popleft()
        assert run.state.one_owner, run
        for name, after in cycle_events(run, evict):
            happened.add(name)
            if after not in seen:
                seen.add(after)
                queue.append(after)
    assert {"return begins", "lend begins"} <= happened
    assert ("return again" in happened) == (not evict)
