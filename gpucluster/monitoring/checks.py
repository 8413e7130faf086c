"""Checks of the `monitoring:` section against the rest of the model, and what is valid but worth
a warning."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucluster.errors import Problem, format_path
from gpucluster.monitoring import dcgm
from gpucluster.monitoring.model import monitoring_of

if TYPE_CHECKING:
    from gpucluster.model.cluster import Cluster


def check_monitoring(cluster: Cluster) -> list[Problem]:
    monitoring = monitoring_of(cluster)
    if monitoring is None:
        return []
    problems: list[Problem] = []
    file = cluster.inventory.cluster_file

    def fail(parts: list[str | int], message: str) -> None:
        problems.append(file.problem(format_path(["cluster", "monitoring", *parts]), message))

    known = set(cluster.inventory.hostvars) | set(cluster.hosts)
    if monitoring.host not in known:
        fail(["host"], f"{monitoring.host!r} is no host of the inventory")
    extra = cluster.spec.slurm.extra
    if cluster.release.openmetrics and "PrivateData" in extra:
        fail(
            [],
            f"Slurm {cluster.release.name} serves no metrics while cluster.slurm.extra sets PrivateData: "
            "remove it, or monitoring stays blind",
        )
    for message in dcgm.refusals(cluster, monitoring):
        fail(["dcgm_exporter"], message)
    return problems


def monitoring_host(cluster: Cluster) -> list[str]:
    """The host the section gives a part: the one running Prometheus and Alertmanager."""
    monitoring = monitoring_of(cluster)
    return [] if monitoring is None else [monitoring.host]


def monitoring_warnings(cluster: Cluster) -> list[Problem]:
    """What a valid `monitoring:` section leaves out (printed as warnings, exit code 0)."""
    monitoring = monitoring_of(cluster)
    if monitoring is None:
        return []
    file = cluster.inventory.cluster_file
    warnings: list[Problem] = []
    message = dcgm.warning(cluster, monitoring)
    if message:
        warnings.append(file.problem("cluster.monitoring", message))
    return warnings
