"""The power of each host, resolved: which hosts are off until Slurm powers them on (power-saved:
`bmc` and `cloud` groups), and the power-saving timers Slurm runs them with, the inventory's or
gpucluster's GPU defaults. Every part of gpucluster that must treat such hosts as off (the
renderers, checks, monitoring, storage, upgrade, verify, plan, the lab) asks here."""

from __future__ import annotations

from dataclasses import dataclass

from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster
from gpucluster.model.power import NodePower
from gpucluster.model.spec import NodeGroup, PowerSave

ALWAYS = NodePower()

# GPU-suited power-saving defaults, written when the inventory has a power-saved group and leaves
# the timer unset. A GPU node takes minutes to come back, so it is suspended after half an hour
# idle, not Slurm's minutes; the BMC's graceful shutdown or the cloud's delete gets two minutes.
DEFAULT_SUSPEND_TIME = 1800
DEFAULT_SUSPEND_TIMEOUT = 120
# What ResumeTimeout adds to the longest boot time: the program's own calls and slurmd's
# registration after its start.
RESUME_MARGIN = 60


@dataclass(frozen=True)
class PowerGroup:
    index: int  # in cluster.nodes
    group: str  # the inventory group
    power: NodePower
    hosts: tuple[str, ...]  # the group's hosts Slurm owns, in name order


def power_of_entry(entry: NodeGroup) -> NodePower:
    return entry.power or ALWAYS


def power_of(cluster: Cluster, host: str) -> NodePower:
    """How `host` gets power (`always` for a host of no power-saved group)."""
    index = cluster.entry_of.get(host)
    return ALWAYS if index is None else power_of_entry(cluster.spec.nodes[index])


def node_state(entry: NodeGroup) -> str | None:
    """The Slurm State= of the group's NodeName line: `cloud` for instances made on demand."""
    if entry.state is not None:
        return entry.state
    return "cloud" if entry.power is not None and entry.power.kind == "cloud" else None


def power_groups(cluster: Cluster) -> list[PowerGroup]:
    """The power-saved groups (bmc, cloud) with their Slurm hosts, in inventory order."""
    hosts: dict[int, list[str]] = {}
    for host in cluster.hosts:
        index = cluster.entry_of.get(host)
        if index is not None and cluster.owner_of.get(host, Owner.SLURM) == Owner.SLURM:
            hosts.setdefault(index, []).append(host)
    return [
        PowerGroup(index, entry.group, entry.power, tuple(hosts.get(index, ())))
        for index, entry in enumerate(cluster.spec.nodes)
        if entry.power is not None and entry.power.saved
    ]


def saved_hosts(cluster: Cluster) -> list[str]:
    """Hosts that are off until Slurm powers them on, in name order."""
    return [h for group in power_groups(cluster) for h in group.hosts]


def cloud_hosts(cluster: Cluster) -> list[str]:
    """Hosts that exist only while Slurm needs them (instances, or State=CLOUD nodes of a site's
    own programs): no playbook ever reaches them; their software comes from their image."""
    found = {h for g in power_groups(cluster) if g.power.kind == "cloud" for h in g.hosts}
    found |= {h for h, i in cluster.entry_of.items() if cluster.spec.nodes[i].state == "cloud"}
    return [h for h in cluster.hosts if h in found]


def always_on(cluster: Cluster, hosts: list[str]) -> list[str]:
    """`hosts` without the power-saved ones."""
    off = set(saved_hosts(cluster)) | set(cloud_hosts(cluster))
    return [h for h in hosts if h not in off]


@dataclass(frozen=True)
class PowerTimers:
    """The cluster-wide power-saving settings Slurm gets (None: Slurm's own default, left out)."""

    suspend_time: int | None
    suspend_timeout: int | None
    resume_timeout: int | None
    suspend_rate: int | None
    resume_rate: int | None


def needed_resume_timeout(cluster: Cluster) -> int:
    """The ResumeTimeout the longest boot of a power-saved group needs."""
    groups = power_groups(cluster)
    return max((g.power.effective_boot_time for g in groups), default=0) + RESUME_MARGIN


def power_timers(cluster: Cluster) -> PowerTimers:
    """The inventory's timers; with a power-saved group, gpucluster's GPU defaults for the unset."""
    given = cluster.spec.slurm.power_save or PowerSave()
    if not power_groups(cluster):
        return PowerTimers(
            given.suspend_time,
            given.suspend_timeout,
            given.resume_timeout,
            given.suspend_rate,
            given.resume_rate,
        )
    return PowerTimers(
        suspend_time=given.suspend_time if given.suspend_time is not None else DEFAULT_SUSPEND_TIME,
        suspend_timeout=given.suspend_timeout
        if given.suspend_timeout is not None
        else DEFAULT_SUSPEND_TIMEOUT,
        resume_timeout=given.resume_timeout
        if given.resume_timeout is not None
        else needed_resume_timeout(cluster),
        suspend_rate=given.suspend_rate,
        resume_rate=given.resume_rate,
    )


def resume_timeout_of(cluster: Cluster, host: str) -> int:
    """The ResumeTimeout slurmctld applies to `host`: the largest of its partitions' that set one,
    else the cluster's (Slurm's default 60 s where nothing sets it)."""
    partitions = [
        p.resume_timeout
        for p in cluster.spec.partitions
        if p.resume_timeout is not None and host in cluster.partitions.get(p.name, [])
    ]
    if partitions:
        return max(partitions)
    return power_timers(cluster).resume_timeout or 60


def may_be_off(cluster: Cluster, host: str) -> bool:
    """A host Slurm may have powered off at any moment: anything that reaches hosts treats it as
    off unless Slurm says it is up."""
    return power_of(cluster, host).saved or host in cloud_hosts(cluster)


def template_name(cluster: Cluster, group: str) -> str:
    """The name of the template the burst stack makes for a cloud group (every cloud's naming
    rules allow it: lowercase letters, digits and hyphens)."""
    return f"{cluster.name}-{group}".lower().replace("_", "-").replace(".", "-")
