"""Checks of the `monitoring:` section against the rest of the model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucluster.errors import Problem, format_path
from gpucluster.monitoring.model import monitoring_of

if TYPE_CHECKING:
    from gpucluster.cluster import Cluster


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
    return problems
