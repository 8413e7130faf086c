"""Shared pools (`cluster.shared_pools`): GPU nodes lent between bare-metal Slurm and Kubernetes by
demand, never owned by both at once.

A pool's hosts are Slurm's at home (their `cluster.nodes` group says `owner: slurm`); at each moment
exactly one scheduler may place work on each of them. Slurm keeps at least `slurm_min_nodes`,
Kubernetes at least `kubernetes_min_nodes`; the rest move by demand within the pool's timers. How
the balancer decides is gpucluster.pool.policy; the steps of a move are gpucluster.pool.steps.
Which combinations cannot work is decided in gpucluster.checks.pools (and, for Kueue's names, in
gpucluster.k8s.pools); this module is the shape of the section only.

No `from __future__ import annotations`: gpucluster.model.spec imports this at start-up (pydantic).
"""

from typing import Annotated

from pydantic import Field, StrictBool

from gpucluster.model.base import Strict, Update, spec
from gpucluster.model.gate import TriggerLevel

POOL_NAME_RE = r"^[a-z][a-z0-9-]{0,38}[a-z0-9]$"
# Kueue object names are DNS subdomains; gpucluster's own are DNS labels.
KUEUE_NAME_RE = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"

SHARED_POOLS_DOC = (
    "Pools of GPU nodes lent between bare-metal Slurm and Kubernetes by demand: Slurm keeps its "
    "minimum, Kubernetes its minimum, the rest move to the side that waits, one owner per node at "
    "every instant. Omit for none (every node keeps the owner its `nodes` group gives it)."
)


# Bounds and timers are the balancer's settings; until the balancer and the pool's power programs
# exist (issue 42's next slice) nothing reads them on a live cluster, so a change only re-renders.


class PoolKubernetes(Strict):
    """Where a lent node's GPUs go in Kubernetes: the Kueue flavor its pods are admitted on and
    the ClusterQueues whose quota grows while it is lent (and shrinks before it returns)."""

    flavor: Annotated[str, Field(pattern=KUEUE_NAME_RE)] | None = spec(
        "Kueue ResourceFlavor a lent node's GPUs are admitted on. Default: the flavor gpucluster "
        "makes for the pool's node type (its name, lowercase with `-`). With "
        "`kubernetes.kueue.enabled` it must be that one; with the site's own Kueue, the site's name.",
        Update.RENDER_ONLY,
        default=None,
    )
    cluster_queues: list[Annotated[str, Field(pattern=KUEUE_NAME_RE)]] = spec(
        "Kueue ClusterQueues whose nominal quota of the flavor's GPUs grows by a node's GPUs when it "
        "is lent, and is lowered by them before the node returns to Slurm (no pod is admitted "
        "against GPUs about to leave). gpucluster makes one ClusterQueue per leaf tenant with a "
        "Kubernetes share, named after it: these are the tenants whose quotas grow and shrink. A "
        "lent node's GPUs are split among them in proportion to their fair-share.",
        Update.RENDER_ONLY,
        min_length=1,
    )


class SharedPool(Strict):
    """One pool: its hosts, each side's minimum, the Kubernetes side it lends to, and its timers."""

    name: Annotated[str, Field(pattern=POOL_NAME_RE)] = spec(
        "Name of the pool (in the balancer's log, metrics and `gpucluster show`).", Update.RENDER_ONLY
    )
    hosts: list[str] = spec(
        "Groups or hosts of hosts.yml whose nodes the pool lends. Each is Slurm's at home (its "
        "`cluster.nodes` group says `owner: slurm`, no `power`: the pool powers it down for "
        "Kubernetes), all of one node type, in no other pool. Adding a host moves it under the "
        "pool; removing one gives it back to its group's owner.",
        Update.MOVE,
        min_length=1,
    )
    slurm_min_nodes: Annotated[int, Field(ge=0, le=100000)] = spec(
        "Nodes Slurm always keeps: never lent, whatever Kubernetes waits for.",
        Update.RENDER_ONLY,
        default=0,
    )
    kubernetes_min_nodes: Annotated[int, Field(ge=0, le=100000)] = spec(
        "Nodes Kubernetes always keeps: never taken back, whatever Slurm waits for.",
        Update.RENDER_ONLY,
        default=0,
    )
    kubernetes: PoolKubernetes = spec(
        "The Kubernetes side the pool lends to (Kueue flavor and ClusterQueues).", Update.RENDER_ONLY
    )
    lend_after_seconds: Annotated[int, Field(ge=0, le=86400)] = spec(
        "Seconds a Kubernetes workload of the flavor must pend before the balancer powers an idle "
        "Slurm node down early for it (hysteresis: a burst that Kueue admits within this time moves "
        "nothing). Slurm's own SuspendTime still lends a node idle that long without demand.",
        Update.RENDER_ONLY,
        default=300,
    )
    min_idle_seconds: Annotated[int, Field(ge=0, le=86400)] = spec(
        "Seconds a Slurm node must have been idle before the balancer lends it early (a node whose "
        "job just ended is likely wanted again soon).",
        Update.RENDER_ONLY,
        default=300,
    )
    min_lent_seconds: Annotated[int, Field(ge=0, le=604800)] = spec(
        "Seconds a node stays lent at least before Slurm may take it back (a move costs a burn-in "
        "and the pods' restart: fewer, longer loans).",
        Update.RENDER_ONLY,
        default=3600,
    )
    pod_drain_seconds: Annotated[int, Field(ge=0, le=86400)] = spec(
        "Seconds to wait for a lent node's GPU pods to end once it is cordoned for its return. Past "
        "it the return is refused (the node stays lent, uncordoned, and Slurm picks another), "
        "unless `evict_pods`.",
        Update.RENDER_ONLY,
        default=600,
    )
    evict_pods: StrictBool = spec(
        "Evict the pods still running after `pod_drain_seconds` (through the Eviction API: "
        "PodDisruptionBudgets hold). Default never: a lent node returns only once empty.",
        Update.RENDER_ONLY,
        default=False,
    )
    gate_level: TriggerLevel | None = spec(
        "Burn-in level a node passes in the return-to-service gate each time it changes side "
        "(quick, standard, deep, or none). Default: `cluster.gate.levels.move`; needs `cluster.gate`.",
        Update.RENDER_ONLY,
        default=None,
    )
