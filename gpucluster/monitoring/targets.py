"""What Prometheus scrapes, from the model: every host's node-exporter labelled with what the
model knows of it, Slurm's metrics (slurmctld's own endpoints from 25.11, and the site's Slurm
exporter where the inventory declares one), and NVIDIA's dcgm-exporter on the GPU nodes Slurm owns
where it runs (gpucluster.monitoring.dcgm)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster, sort_hosts
from gpucluster.model.powered import may_be_off, power_of
from gpucluster.monitoring.dcgm import dcgm_exporter
from gpucluster.monitoring.model import MonitoringSpec

# slurmctld's OpenMetrics endpoints (MetricsType=metrics/openmetrics, 25.11+), one scrape job each.
SLURMCTLD_ENDPOINTS = ("nodes", "jobs", "partitions", "scheduler", "jobs-users-accts")


@dataclass(frozen=True)
class Target:
    address: str  # host:port
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ScrapeJob:
    name: str
    metrics_path: str
    targets: tuple[Target, ...]
    what: str  # one line for the comment above it


def slurmctld_port(cluster: Cluster) -> int:
    """The first port of SlurmctldPort (a range serves on each; the first always listens)."""
    port = cluster.spec.slurm.daemons.slurmctld_port
    return int(str(port).split("-")[0])


def controllers(cluster: Cluster) -> list[str]:
    return list(cluster.spec.slurm.controller) if cluster.hosts_owned_by(Owner.SLURM) else []


def storage_servers(cluster: Cluster) -> set[str]:
    """The hosts that serve a shared filesystem (cluster.storage's NFS servers)."""
    return {fs.nfs_server.host for fs in cluster.spec.storage if fs.nfs_server}


def every_host(cluster: Cluster, monitoring: MonitoringSpec) -> list[str]:
    """Every host the model names: compute nodes, controllers, accounting, REST API, login, the
    storage servers and the hosts that mount shared filesystems, and the monitoring host itself."""
    slurm = cluster.spec.slurm
    found = set(cluster.hosts) | set(controllers(cluster)) | {monitoring.host} | storage_servers(cluster)
    found |= {h for hosts in cluster.storage_hosts.values() for h in hosts}
    if cluster.hosts_owned_by(Owner.SLURM):
        found |= set(slurm.login)
        if slurm.accounting:
            found.add(slurm.accounting.host)
        if slurm.rest_api:
            found.add(slurm.rest_api.host)
    return sort_hosts(found)


def exclusive_tenant(cluster: Cluster, host: str) -> str | None:
    """The tenant a node belongs to alone: every partition holding it admits that one tenant."""
    tenants = {
        tuple(p.tenants) for p in cluster.spec.partitions if host in cluster.partitions.get(p.name, [])
    }
    if len(tenants) == 1:
        (only,) = tenants
        if len(only) == 1:
            return only[0]
    return None


def host_labels(cluster: Cluster, monitoring: MonitoringSpec, host: str) -> dict[str, str]:
    """The model's labels of a host, empty values left out (Prometheus drops empty labels)."""
    slurm = cluster.spec.slurm
    roles = []
    if host in controllers(cluster):
        roles.append("controller")
    if slurm.accounting and host == slurm.accounting.host:
        roles.append("accounting")
    if slurm.rest_api and host == slurm.rest_api.host:
        roles.append("restapi")
    if host in slurm.login:
        roles.append("login")
    if host in cluster.node_type_of:
        roles.append("compute")
    if host in storage_servers(cluster):
        roles.append("storage")
    if host == monitoring.host:
        roles.append("monitoring")
    labels = {"node": host, "cluster": cluster.name, "role": ",".join(roles)}
    if host in cluster.node_type_of:
        partitions = [p.name for p in cluster.spec.partitions if host in cluster.partitions.get(p.name, [])]
        path = cluster.switch_path.get(host, ())
        labels.update(
            {
                "node_type": cluster.node_type_of[host],
                "gpus": str(gpus.count if (gpus := cluster.node_type(host).gpus) else 0),
                "owner": str(cluster.owner_of.get(host, Owner.SLURM)),
                "partitions": ",".join(partitions),
                "switch": path[-1] if path else "",
                "nvlink_block": cluster.block_of.get(host, ""),
                "tenant": exclusive_tenant(cluster, host) or "",
                # Off until Slurm powers it on: its target is down meanwhile (no alert).
                "power": power_of(cluster, host).kind if may_be_off(cluster, host) else "",
            }
        )
    return {key: value for key, value in labels.items() if value}


def scrape_jobs(cluster: Cluster, monitoring: MonitoringSpec) -> list[ScrapeJob]:
    jobs = [
        ScrapeJob(
            "prometheus",
            "/metrics",
            (Target(f"localhost:{monitoring.prometheus_port}", {"node": monitoring.host}),),
            "Prometheus itself",
        ),
        ScrapeJob(
            "alertmanager",
            "/metrics",
            (Target(f"localhost:{monitoring.alertmanager_port}", {"node": monitoring.host}),),
            "Alertmanager",
        ),
        ScrapeJob(
            "node",
            "/metrics",
            tuple(
                Target(f"{host}:{monitoring.node_exporter_port}", host_labels(cluster, monitoring, host))
                for host in every_host(cluster, monitoring)
            ),
            "node-exporter on every host, labelled from the model",
        ),
    ]
    ctl = controllers(cluster)
    if ctl:
        jobs += slurm_jobs(cluster, monitoring, ctl)
    gpu_nodes = dcgm_exporter(cluster, monitoring).hosts
    if gpu_nodes:
        jobs.append(
            ScrapeJob(
                "dcgm",
                "/metrics",
                tuple(
                    Target(f"{h}:{monitoring.dcgm_exporter_port}", host_labels(cluster, monitoring, h))
                    for h in gpu_nodes
                ),
                "NVIDIA dcgm-exporter on the GPU nodes Slurm owns (NVIDIA's package)",
            )
        )
    return jobs


def slurm_jobs(cluster: Cluster, monitoring: MonitoringSpec, ctl: list[str]) -> list[ScrapeJob]:
    def controller_label(index: int) -> dict[str, str]:
        return {"node": ctl[index], "controller": "primary" if index == 0 else f"backup{index}"}

    jobs: list[ScrapeJob] = []
    if cluster.release.openmetrics:
        port = slurmctld_port(cluster)
        jobs += [
            ScrapeJob(
                f"slurmctld_{endpoint.replace('-', '_')}",
                f"/metrics/{endpoint}",
                tuple(Target(f"{host}:{port}", controller_label(i)) for i, host in enumerate(ctl)),
                f"slurmctld's own /metrics/{endpoint} on every controller",
            )
            for endpoint in SLURMCTLD_ENDPOINTS
        ]
    # Only where the site declares one: gpucluster installs no Slurm exporter, and a job whose
    # targets nothing serves would only be down.
    exporter = monitoring.slurm_exporter
    if exporter is not None:
        jobs.append(
            ScrapeJob(
                "slurm_exporter",
                "/metrics",
                tuple(Target(f"{host}:{exporter.port}", controller_label(i)) for i, host in enumerate(ctl)),
                "the Slurm exporter the site runs on every controller (cluster.monitoring.slurm_exporter)",
            )
        )
    return jobs


def target_list(cluster: Cluster, monitoring: MonitoringSpec) -> list[str]:
    """`job host:port` of every target, for plan and show."""
    return [f"{job.name} {t.address}" for job in scrape_jobs(cluster, monitoring) for t in job.targets]
