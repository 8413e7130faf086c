"""healthcheck.conf: what gpucluster-healthcheck expects of each node, one section per node type
(bare-metal Slurm) or per NodeSet (Slurm on Kubernetes). The program itself is package data,
gpucluster/programs/gpucluster_healthcheck.py; the slurm_health role installs it on the nodes (the
gpucluster_render module gives it its path), and the Slinky values carry it to the slurmd pods."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpucluster.hostlists import expand
from gpucluster.model.cluster import Cluster
from gpucluster.model.gate import LEVELS, TRIGGERS, GateSettings
from gpucluster.model.spec import HealthSettings, NodeType
from gpucluster.packagedata import data_path
from gpucluster.render.templating import header, render_template

# Where the slurm_health role installs the program (its defaults say the same; a unit test checks).
HEALTH_PROGRAM = "/usr/local/sbin/gpucluster-healthcheck"
HEALTH_CONF = "healthcheck.conf"
# Slurm's RebootProgram with a gate: a link to the program, which puts the node in the gate and
# then runs cluster.gate.reboot_command (the slurm_health role makes the link).
REBOOT_PROGRAM = "/usr/local/sbin/gpucluster-reboot"
# Debian's prometheus-node-exporter reads textfiles from here (its --collector.textfile.directory):
# the Slurm state collector and the gate's record keeper write their metrics there.
NODE_EXPORTER_TEXTFILES = "/var/lib/prometheus/node-exporter"
# Where the controllers keep the burn-ins' records (the program's DEFAULT_RECORDS_DIR).
GATE_RECORDS_DIR = "/var/lib/gpucluster/gate"


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


def burn_in_of(node_type: NodeType) -> dict[str, str]:
    """The burn-in keys of a node type's section (empty values: not declared)."""
    burn_in, software = node_type.burn_in, node_type.software
    nvlink_system = software.nvlink if software else "none"
    nvlink = burn_in.nvlink if burn_in.nvlink is not None else nvlink_system != "none"
    imex = burn_in.imex if burn_in.imex is not None else nvlink_system == "nvl72"
    driver = burn_in.driver_version or (software.driver.version if software else None)
    return {
        "gpu_model": burn_in.gpu_model or "",
        "driver": driver or "",
        "pcie_width": str(burn_in.pcie_width or ""),
        "nvlink": "yes" if nvlink else "no",
        "imex": "yes" if imex else "no",
        "ib_rate": str(burn_in.infiniband_rate_gbps or ""),
        "dcgm_diag": " ".join(f"{level}:{getattr(burn_in.dcgm_diag, level)}" for level in LEVELS),
        "nccl_busbw": f"{burn_in.nccl_busbw_gbps:g}" if burn_in.nccl_busbw_gbps else "",
        "nccl_pair_busbw": f"{burn_in.nccl_pair_busbw_gbps:g}" if burn_in.nccl_pair_busbw_gbps else "",
    }


def burn_in_slots(cluster: Cluster, gate: GateSettings) -> dict[str, int]:
    """Nodes of each partition that may be in burn-in at once: never every node of a partition
    of more than one."""
    return {
        name: max(1, min(gate.max_in_burn_in, len(hosts) - 1))
        for name, hosts in sorted(cluster.partitions.items())
        if hosts
    }


def gate_section(cluster: Cluster, gate: GateSettings, slots: dict[str, int] | None = None) -> dict[str, str]:
    """The gate's own section of healthcheck.conf (`slots`: the burn-in slots of each pool where
    they are not the partitions', as on Kubernetes: one pool per node type)."""
    hosts = set(cluster.hosts)
    leaves = [[n for n in s.nodes if n in hosts] for s in cluster.switches if s.nodes]
    return {
        "levels": " ".join(f"{t}:{gate.levels.of(t)}" for t in TRIGGERS),
        "time_limit": " ".join(f"{level}:{gate.time_limit.of(level)}" for level in LEVELS),
        "slots": " ".join(f"{p}:{n}" for p, n in (slots or burn_in_slots(cluster, gate)).items()),
        "attempts": str(gate.attempts),
        "reboot_command": gate.reboot_command,
        "metrics_dir": NODE_EXPORTER_TEXTFILES,
        "records_dir": GATE_RECORDS_DIR,
        "leaves": " ".join(",".join(leaf) for leaf in leaves if len(leaf) > 1),
    }


def devices_of(node_type: NodeType) -> list[str]:
    gpus = node_type.gpus
    return expand(gpus.devices) if gpus and gpus.devices else []


def health_timeout(cluster: Cluster, health: HealthSettings) -> int:
    """The seconds Slurm allows a run of the health check on the target release."""
    facts = cluster.release
    return health.effective_timeout(facts.health_check_kill_after, facts.health_check_timeout)


def render_health_conf(
    cluster: Cluster,
    health: HealthSettings,
    sections: list[Section],
    gated: bool = False,
    slots: dict[str, int] | None = None,
) -> str:
    """healthcheck.conf; with `gated` (bare-metal Slurm with cluster.gate) the burn-in keys of
    each section and the gate's own section."""
    gate = cluster.spec.gate if gated else None
    return render_template(
        "slurm/healthcheck.conf.j2",
        header=header(cluster.name),
        health=health,
        budget=health.budget(health_timeout(cluster, health)),
        sections=sorted(sections, key=lambda s: s.name),
        devices_of=devices_of,
        burn_in_of=burn_in_of if gate else None,
        gate=gate_section(cluster, gate, slots) if gate else None,
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
    return render_health_conf(cluster, health, sections, gated=True)


def program_text() -> str:
    return program_path().read_text(encoding="utf-8")
