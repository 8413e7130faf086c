"""The monitoring entry of `gpucluster show`: where Prometheus, Alertmanager and the dashboards are."""

from __future__ import annotations

from typing import Any

from gpucluster.console import table
from gpucluster.model.cluster import Cluster
from gpucluster.monitoring.collector import collector_serves_slurm_metrics
from gpucluster.monitoring.dashboards import dashboards
from gpucluster.monitoring.dcgm import dcgm_exporter
from gpucluster.monitoring.model import MonitoringSpec, monitoring_of
from gpucluster.monitoring.targets import scrape_jobs


def summary(cluster: Cluster) -> dict[str, Any]:
    monitoring = monitoring_of(cluster)
    assert monitoring is not None
    grafana = (
        f"http://{monitoring.host}:{monitoring.grafana.port}"
        if monitoring.grafana
        else "not installed (not in Debian; give cluster.monitoring.grafana.repository)"
    )
    return {
        "prometheus": f"http://{monitoring.host}:{monitoring.prometheus_port}",
        "alertmanager": f"http://{monitoring.host}:{monitoring.alertmanager_port}",
        "grafana": grafana,
        "dashboards": sorted(b["title"] for b in dashboards(cluster, monitoring).values()),
        # Rendered by `gpucluster render`; the role provisions them into Grafana where it runs.
        "dashboards_dir": "monitoring/grafana/dashboards"
        + (f" -> {monitoring.host}:/var/lib/grafana/dashboards/gpucluster" if monitoring.grafana else ""),
        "targets": {job.name: len(job.targets) for job in scrape_jobs(cluster, monitoring)},
        "slurm_metrics": slurm_metrics(cluster, monitoring),
        "dcgm_exporter": dcgm_summary(cluster, monitoring),
    }


def slurm_metrics(cluster: Cluster, monitoring: MonitoringSpec) -> str:
    if collector_serves_slurm_metrics(cluster):
        source = (
            "the state collector on the controllers (sinfo, squeue: partition and node GPUs, the "
            f"queue, node states); Slurm {cluster.release.name}'s slurmctld serves none (25.11+)"
        )
    else:
        source = "slurmctld (metrics/openmetrics)"
    if monitoring.slurm_exporter is not None:
        source += f"; the site's Slurm exporter is scraped too (port {monitoring.slurm_exporter.port})"
    return source


def dcgm_summary(cluster: Cluster, monitoring: MonitoringSpec) -> str:
    exporter = dcgm_exporter(cluster, monitoring)
    if exporter.on:
        return f"{len(exporter.hosts)} GPU nodes, Slurm jobs mapped by slurm.conf's Prolog and Epilog"
    return f"off ({exporter.off_because})" if exporter.off_because else "off"


def summary_table(cluster: Cluster) -> str:
    data = summary(cluster)
    rows = [
        ["Prometheus", data["prometheus"]],
        ["Alertmanager", data["alertmanager"]],
        ["Grafana", data["grafana"]],
        ["dashboards", "\n".join([*data["dashboards"], f"(files: {data['dashboards_dir']})"])],
        ["Slurm metrics from", data["slurm_metrics"]],
        ["dcgm-exporter", data["dcgm_exporter"]],
        ["targets", "\n".join(f"{job}: {n}" for job, n in data["targets"].items())],
    ]
    return table("Monitoring", ("setting", "value"), rows)
