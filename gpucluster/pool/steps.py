"""The steps of lending a pool node to Kubernetes and of taking it back, as one table: the
SuspendProgram and ResumeProgram of a pool run these steps in this order, the balancer reports
which step a node is at, and the property test (tests/unit/test_pool_steps.py) replays every
interleaving of them with jobs and pods arriving on both sides.

A node's state is what each scheduler may do with it: Slurm places jobs only while it
`slurm_accepts` (slurmd up, not powering down, no gate drain), Kubernetes places pods only while it
`kubernetes_accepts` (uncordoned, no taint of gpucluster's). The one-owner invariant: never may
one scheduler place work on a node while the other may place work there or still runs work there.

Standard library only: shipped beside the programs (gpucluster/programs) to the controllers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum


class Procedure(StrEnum):
    LEND = "lend"  # Slurm -> Kubernetes: the pool's SuspendProgram
    RETURN = "return"  # Kubernetes -> Slurm: the pool's ResumeProgram


@dataclass(frozen=True)
class NodeState:
    """One pool node as both schedulers see it at an instant."""

    slurm_accepts: bool  # Slurm may start a job there
    kubernetes_accepts: bool  # a pod may be bound there
    slurmd_running: bool
    quota_raised: bool  # the ClusterQueues' quota counts the node's GPUs
    jobs: int = 0  # Slurm jobs running there
    pods: int = 0  # GPU pods running there

    @property
    def slurm_side(self) -> bool:
        return self.slurm_accepts or self.jobs > 0

    @property
    def kubernetes_side(self) -> bool:
        return self.kubernetes_accepts or self.pods > 0

    @property
    def one_owner(self) -> bool:
        """No scheduler may place work where the other may place or runs work."""
        return not (self.slurm_side and self.kubernetes_side)


AT_SLURM = NodeState(slurm_accepts=True, kubernetes_accepts=False, slurmd_running=True, quota_raised=False)
AT_KUBERNETES = NodeState(
    slurm_accepts=False, kubernetes_accepts=True, slurmd_running=False, quota_raised=True
)

Guard = Callable[[NodeState], bool]
EVICT_OR_UNDO = "evict-or-undo"


def _always(state: NodeState) -> bool:
    return True


def _no_jobs(state: NodeState) -> bool:
    return state.jobs == 0


def _no_pods(state: NodeState) -> bool:
    return state.pods == 0


@dataclass(frozen=True)
class Step:
    procedure: Procedure
    name: str
    does: str  # what the program runs, in words (logged with the step)
    waits_for: Guard  # the step runs once this holds; until then the program waits
    sets: dict[str, bool]  # the NodeState fields the step changes
    # What the program does when waiting runs past its bound (None: it waits as long as it takes,
    # Slurm's own timers bound it). EVICT_OR_UNDO: the pods are evicted where the pool allows it
    # (`evict_pods`), else the procedure's UNDO steps run and the node stays where it was.
    on_timeout: str | None = None

    def apply(self, state: NodeState) -> NodeState:
        return replace(state, **self.sets)


# The table. Order matters: on the way out a side stops placing before the other may; on the way in
# the node is empty of the old side's work before the new side may place.
STEPS: tuple[Step, ...] = (
    Step(
        Procedure.LEND,
        "power-down",
        "scontrol power down asap: Slurm places no new job there (running ones finish)",
        _always,
        {"slurm_accepts": False},
    ),
    Step(
        Procedure.LEND,
        "stop-slurmd",
        "SuspendProgram: once no job runs there (squeue -w), stop slurmd",
        _no_jobs,
        {"slurmd_running": False},
    ),
    Step(
        Procedure.LEND,
        "gate",
        "the node keeps gpucluster's gate taint in Kubernetes while its burn-in runs",
        _always,
        {},
    ),
    Step(
        Procedure.LEND,
        "untaint",
        "remove the gate taint, uncordon: Kubernetes may bind pods there",
        _always,
        {"kubernetes_accepts": True},
    ),
    Step(
        Procedure.LEND,
        "raise-quota",
        "raise the ClusterQueues' nominal quota of the flavor by the node's GPUs",
        _always,
        {"quota_raised": True},
    ),
    Step(
        Procedure.RETURN,
        "lower-quota",
        "lower the ClusterQueues' nominal quota by the node's GPUs (Kueue admits nothing more on them)",
        _always,
        {"quota_raised": False},
    ),
    Step(
        Procedure.RETURN,
        "cordon",
        "cordon the node and taint it: Kubernetes binds no new pod there",
        _always,
        {"kubernetes_accepts": False},
    ),
    Step(
        Procedure.RETURN,
        "wait-pods",
        "wait for the node's GPU pods to end, at most pod_drain_seconds",
        _no_pods,
        {},
        on_timeout=EVICT_OR_UNDO,
    ),
    Step(
        Procedure.RETURN,
        "start-slurmd",
        "ResumeProgram: start slurmd; the node registers in the gate's drain",
        _no_pods,
        {"slurmd_running": True},
    ),
    Step(
        Procedure.RETURN,
        "gate",
        "the burn-in of the pool's gate level runs under the gate's reservation",
        _always,
        {},
    ),
    Step(
        Procedure.RETURN,
        "resume",
        "the gate resumes the node: Slurm may start jobs there",
        _no_pods,
        {"slurm_accepts": True},
    ),
)

# What undoes a procedure that cannot go on (a return whose pods outlast the drain bound and may not
# be evicted: the node stays lent, Slurm picks another). Each undo step is applied in order.
UNDO: dict[Procedure, tuple[Step, ...]] = {
    Procedure.RETURN: (
        Step(
            Procedure.RETURN, "uncordon", "remove the taint, uncordon", _always, {"kubernetes_accepts": True}
        ),
        Step(Procedure.RETURN, "restore-quota", "raise the quota back", _always, {"quota_raised": True}),
    ),
    Procedure.LEND: (),  # a lend only waits (Slurm's jobs end; Slurm's timers bound it)
}


def steps_of(procedure: Procedure) -> tuple[Step, ...]:
    return tuple(step for step in STEPS if step.procedure == procedure)


def start_of(procedure: Procedure) -> NodeState:
    return AT_SLURM if procedure == Procedure.LEND else AT_KUBERNETES
