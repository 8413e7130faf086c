"""What a change between two inventories does to Prometheus' targets (`gpucluster plan`): targets
added, removed, and relabelled (a node that moves scheduler, partition, switch or tenant)."""

from __future__ import annotations

from gpucluster.model.cluster import Cluster
from gpucluster.monitoring.model import monitoring_of
from gpucluster.monitoring.targets import scrape_jobs


def _targets(cluster: Cluster) -> dict[str, dict[str, str]]:
    monitoring = monitoring_of(cluster)
    if monitoring is None:
        return {}
    return {
        f"{job.name} {t.address}": t.labels for job in scrape_jobs(cluster, monitoring) for t in job.targets
    }


def target_changes(old: Cluster, new: Cluster) -> dict[str, list[str]] | None:
    """None when neither inventory has monitoring; else the targets added, removed and relabelled
    (each relabelled one with its changed labels, `key: old -> new`)."""
    if monitoring_of(old) is None and monitoring_of(new) is None:
        return None
    before, after = _targets(old), _targets(new)
    relabelled = []
    for target in sorted(set(before) & set(after)):
        a, b = before[target], after[target]
        diff = [
            f"{k}: {a.get(k, '-')} -> {b.get(k, '-')}"
            for k in sorted(set(a) | set(b))
            if a.get(k) != b.get(k)
        ]
        if diff:
            relabelled.append(f"{target} ({', '.join(diff)})")
    return {
        "added": sorted(set(after) - set(before)),
        "removed": sorted(set(before) - set(after)),
        "relabelled": relabelled,
    }
