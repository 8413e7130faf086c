"""What the monitoring layer adds to slurm.conf (composed by gpucluster.layers, written by the
Slurm renderer after its own sections): slurmctld's metrics where the release serves them, and
dcgm-exporter's job mapping as a Prolog and an Epilog where the exporter runs."""

from __future__ import annotations

from gpucluster.model.cluster import Cluster
from gpucluster.monitoring.dcgm import EPILOG, JOB_MAPPING_DIR, PROLOG, dcgm_exporter
from gpucluster.monitoring.model import monitoring_of


def slurm_conf_lines(cluster: Cluster) -> list[tuple[str, object]]:
    """(key, value) lines, key "#" for a comment."""
    monitoring = monitoring_of(cluster)
    if monitoring is None:
        return []
    lines: list[tuple[str, object]] = []
    if cluster.release.openmetrics:
        lines += [
            ("#", "Metrics (cluster.monitoring): slurmctld serves OpenMetrics on its port, /metrics/<kind>"),
            ("MetricsType", "metrics/openmetrics"),
        ]
    if dcgm_exporter(cluster, monitoring).on:
        lines += [
            ("#", "dcgm-exporter's job mapping (cluster.monitoring.dcgm_exporter): the prolog writes"),
            ("#", f"each job's id into {JOB_MAPPING_DIR}/<GPU index>, the epilog removes it"),
            ("Prolog", PROLOG),
            ("Epilog", EPILOG),
        ]
    return lines
