"""healthcheck.conf: what gpucluster-healthcheck expects of each node, one section per node type
(bare-metal Slurm) or per NodeSet (Slurm on Kubernetes). The program itself is package data,
gpucluster/programs/gpucluster_healthcheck.py; the slurm_health role installs it on the nodes (the
gpucluster_render module gives it its path), and the Slinky values carry it to the slurmd pods."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpucluster.hostlists import expand
from gpucluster.model.cluster import Cluster
from gpucluster.model.spec import HealthSettings, NodeType
from gpucluster.packagedata import data_path
from gpucluster.render.templating import header, render_template

# Where the slurm_health role installs the program (its defaults say the same; a unit test checks).
HEALTH_PROGRAM = "/usr/local/sbin/gpucluster-healthcheck"
HEALTH_CONF = "healthcheck.conf"


def program_path() -> Path:
    """The health check program, as the package carries it."""
    return data_path("programs", "gpucluster_healthcheck.py")


@dataclass(frozen=True)
class Section:
    name: str
    # Every name, not a hostlist: the program on the node then needs no hostlist parser.
    nodes: list[str]
    checks: list[str]
    node_type: NodeType


def checks_of(node_type: NodeType) -> list[str]:
    """The checks the program runs on this node type, in its own order; GPU checks need GPUs."""
    health = node_type.health
    gpus = node_type.gpus is not None
    wanted = {
        "gpu_count": gpus and health.gpu_count,
        "mounts": bool(health.mounts),
        "infiniband": bool(health.infiniband),
        "xid": gpus and health.xid,
        "ecc": gpus and health.ecc,
        "dcgm": gpus and health.dcgm,
    }
    return [name for name, on in wanted.items() if on]


def section(name: str, nodes: list[str], node_type: NodeType) -> Section:
    return Section(name, nodes, checks_of(node_type), node_type)


def devices_of(node_type: NodeType) -> list[str]:
    gpus = node_type.gpus
    return expand(gpus.devices) if gpus and gpus.devices else []


def health_timeout(cluster: Cluster, health: HealthSettings) -> int:
    """The seconds Slurm allows a run of the health check on the target release."""
    facts = cluster.release
    return health.effective_timeout(facts.health_check_kill_after, facts.health_check_timeout)


def render_health_conf(cluster: Cluster, health: HealthSettings, sections: list[Section]) -> str:
    return render_template(
        "slurm/healthcheck.conf.j2",
        header=header(cluster.name),
        health=health,
        budget=health.budget(health_timeout(cluster, health)),
        sections=sorted(sections, key=lambda s: s.name),
        devices_of=devices_of,
    )


def bare_metal_health_conf(cluster: Cluster) -> str | None:
    """One section per node type of the hosts in this view (bare-metal Slurm's)."""
    health = cluster.spec.slurm.health
    if health is None:
        return None
    sections = []
    for type_name, hosts in cluster.hosts_by_type.items():
        # Hosts whose cluster.nodes entry changes their GPUs get a section of their own.
        by_entry: dict[int | None, list[str]] = {}
        for host in hosts:
            entry = cluster.entry_of.get(host)
            gpus_changed = entry is not None and cluster.spec.nodes[entry].gpus is not None
            by_entry.setdefault(entry if gpus_changed else None, []).append(host)
        for entry, members in by_entry.items():
            name = type_name if entry is None else f"{type_name}/{cluster.spec.nodes[entry].group}"
            sections.append(section(name, members, cluster.node_type(members[0])))
    return render_health_conf(cluster, health, sections)


def program_text() -> str:
    return program_path().read_text(encoding="utf-8")
