"""Running a lend or a return on one node, step by step, as steps.py's table says: the pool's
SuspendProgram and ResumeProgram are this loop with their actions.

The loop knows no step by itself: for each step of the procedure (from the one the program
starts at) it waits until the step's guard holds, reading the node's Slurm jobs and GPU pods as it
waits, then runs the action of that name. A wait that runs past its bound does what the step says
(EVICT_OR_UNDO: evict where the pool allows it, else the procedure's undo steps run and the move
is refused). A step the actions do not name stops the program before it changes anything:
`missing_actions` says which, and the tests ask it of every Actions class.

Standard library only (shipped beside the programs).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from gpucluster.pool.steps import EVICT_OR_UNDO, UNDO, NodeState, Procedure, Step, start_of, steps_of


class Actions(Protocol):
    """What a program does for each step of the table (a method per step named
    `<procedure>_<step>`, `-` as `_`: `lend_stop_slurmd`; undo steps `return_undo_<step>`), and how
    it reads the work on the node."""

    def jobs(self, node: str) -> int: ...

    def pods(self, node: str) -> int: ...

    def evict(self, node: str) -> None: ...


def action_name(step: Step, undo: bool = False) -> str:
    return f"{step.procedure.value}_{'undo_' if undo else ''}{step.name.replace('-', '_')}"


def missing_actions(actions: object, procedure: Procedure, start: str | None = None) -> list[str]:
    """The steps (and undo steps) of `procedure` from `start` on that `actions` has no method for."""
    names = [action_name(s) for s in steps_from(procedure, start)]
    names += [action_name(s, undo=True) for s in UNDO[procedure]]
    return [name for name in names if not callable(getattr(actions, name, None))]


def steps_from(procedure: Procedure, start: str | None) -> tuple[Step, ...]:
    steps = steps_of(procedure)
    if start is None:
        return steps
    names = [s.name for s in steps]
    if start not in names:
        raise ValueError(f"{procedure} has no step {start} (its steps: {', '.join(names)})")
    return steps[names.index(start) :]


class MoveRefused(Exception):
    """The move could not go on; its undo steps ran and the node stays where it was."""


@dataclass
class Move:
    """One node's lend or return. `bound` is the wait of a step with `on_timeout` (the pool's
    pod_drain_seconds); `evict` whether its pods may be evicted then."""

    node: str
    procedure: Procedure
    actions: Actions
    bound: float
    evict: bool = False
    poll: float = 2.0
    log: Callable[[str], None] = lambda message: None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    done: list[str] = field(default_factory=list)

    def run(self, start: str | None = None) -> list[str]:
        """Run the steps from `start` (default: the first); the names of those run, undo steps
        as `undo:<name>`. Raises MoveRefused once undone."""
        missing = missing_actions(self.actions, self.procedure, start)
        if missing:
            raise ValueError(f"no action for the {self.procedure} steps {', '.join(missing)}")
        for step in steps_from(self.procedure, start):
            if not self._wait(step):
                self._undo(step)
            self.log(f"{self.node}: {self.procedure} {step.name}: {step.does}")
            getattr(self.actions, action_name(step))(self.node)
            self.done.append(step.name)
        return self.done

    def _observed(self) -> NodeState:
        # The guards read only the work on the node; what each side may place is the table's.
        base = start_of(self.procedure)
        return NodeState(
            slurm_accepts=base.slurm_accepts,
            kubernetes_accepts=base.kubernetes_accepts,
            slurmd_running=base.slurmd_running,
            quota_raised=base.quota_raised,
            jobs=self.actions.jobs(self.node),
            pods=self.actions.pods(self.node),
        )

    def _wait(self, step: Step) -> bool:
        """Until the step's guard holds (True); False when its bound ran out and the pods may not
        be evicted. A step without on_timeout waits as long as it takes (Slurm's timers bound the
        program)."""
        deadline = self.clock() + self.bound
        said = False
        while not step.waits_for(self._observed()):
            if step.on_timeout == EVICT_OR_UNDO and self.clock() >= deadline:
                if not self.evict:
                    return False
                if not said:
                    self.log(f"{self.node}: pods still running after {self.bound:.0f} s: evicting them")
                    said = True
                # Again at each look, as `kubectl drain` does: a disruption budget refuses for now.
                self.actions.evict(self.node)
            self.sleep(self.poll)
        return True

    def _undo(self, step: Step) -> None:
        self.log(
            f"{self.node}: {self.procedure} refused at {step.name}: its wait ran past {self.bound:.0f} s"
        )
        for undo in UNDO[self.procedure]:
            self.log(f"{self.node}: undo {undo.name}: {undo.does}")
            getattr(self.actions, action_name(undo, undo=True))(self.node)
            self.done.append(f"undo:{undo.name}")
        raise MoveRefused(
            f"{self.node}: {self.procedure} refused: its pods still ran after {self.bound:.0f} s and the pool "
            "does not evict (evict_pods); the node stays lent"
        )


class PoolActions:
    """The steps' actions for a pool of real nodes: Kubernetes through kube.PoolKubernetes, Slurm
    through its commands (`slurm` runs one and returns its output), slurmd started and stopped on
    the node by `slurmd(node, "start" | "stop")`, a node's GPUs from `gpus(node)`. With `gate`,
    a lent node enters the Kubernetes gate (its taint) before the pool's taint goes."""

    def __init__(
        self,
        kube: PoolKubernetesLike,
        slurm: Callable[[list[str]], str],
        slurmd: Callable[[str, str], None],
        gpus: Callable[[str], int],
        gate: bool,
    ) -> None:
        self.kube = kube
        self.slurm = slurm
        self.slurmd = slurmd
        self.gpus = gpus
        self.gate_on = gate

    # What the waits read.
    def jobs(self, node: str) -> int:
        out = self.slurm(["squeue", "--noheader", f"--nodelist={node}", "--format=%i",
                          "--states=RUNNING,COMPLETING,CONFIGURING,SUSPENDED,STOPPED"])  # fmt: skip
        return len(out.split())

    def pods(self, node: str) -> int:
        return len(self.kube.gpu_pods(node))

    def evict(self, node: str) -> None:
        for namespace, pod in self.kube.gpu_pods(node):
            self.kube.evict(namespace, pod)

    # Lend (Slurm -> Kubernetes).
    def lend_power_down(self, node: str) -> None:
        self.slurm(["scontrol", "power", "down", "asap", node])

    def lend_stop_slurmd(self, node: str) -> None:
        self.slurmd(node, "stop")

    def lend_gate(self, node: str) -> None:
        """The gate's taint while the burn-in runs (the gate's pod on the node removes it on a
        pass); none when the pool's moves skip the gate."""
        if self.gate_on:
            self.kube.enter_gate(node)

    def lend_untaint(self, node: str) -> None:
        self.kube.uncordon(node)

    def lend_raise_quota(self, node: str) -> None:
        self.kube.change_quota(self.gpus(node))

    # Return (Kubernetes -> Slurm).
    def return_lower_quota(self, node: str) -> None:
        self.kube.change_quota(-self.gpus(node))

    def return_cordon(self, node: str) -> None:
        self.kube.cordon(node)

    def return_wait_pods(self, node: str) -> None:
        """The wait is the step's guard: nothing is left to do once it holds."""

    def return_start_slurmd(self, node: str) -> None:
        self.slurmd(node, "start")

    def return_gate(self, node: str) -> None:
        """Slurm's side of the gate is the health check's: slurmd registers in its drain."""

    def return_resume(self, node: str) -> None:
        """The gate resumes the node once its burn-in passes (without a gate, slurmd's
        registration does): nothing for the program."""

    # Undo of a refused return: the node stays lent.
    def return_undo_uncordon(self, node: str) -> None:
        self.kube.uncordon(node)

    def return_undo_restore_quota(self, node: str) -> None:
        self.kube.change_quota(self.gpus(node))


class PoolKubernetesLike(Protocol):
    """What PoolActions needs of kube.PoolKubernetes (kept apart: kube.py imports the client)."""

    def gpu_pods(self, name: str) -> list[tuple[str, str]]: ...

    def evict(self, namespace: str, pod: str) -> bool: ...

    def cordon(self, name: str) -> bool: ...

    def uncordon(self, name: str) -> bool: ...

    def enter_gate(self, name: str) -> bool: ...

    def change_quota(self, gpus: int) -> dict[str, int]: ...
