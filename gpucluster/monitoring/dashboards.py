"""Grafana dashboards (provisioning JSON) from the model: fleet by owner and partition, idle GPU
hours per tenant, the queue, node states, and GPU utilisation per job. The Slurm panels read the
release's source: slurmctld's own metrics (25.11+) or, before, the state collector's
(gpucluster.monitoring.collector). Every query names metrics that something serves for the
cluster (served_metrics, checked by the tests against the rules and the rendered collector)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucluster.model.cluster import Cluster
from gpucluster.monitoring import collector
from gpucluster.monitoring.collector import collector_metrics, collector_serves_slurm_metrics
from gpucluster.monitoring.model import MonitoringSpec
from gpucluster.render.templating import header

# slurmctld's metrics (25.11+) that the dashboards and rules read.
SLURMCTLD_METRICS = (
    "slurm_partition_gpus",
    "slurm_partition_jobs_gpus_alloc",
    "slurm_partition_jobs_pending",
    "slurm_partition_jobs_running",
    "slurm_partition_nodes_idle",
    "slurm_partition_nodes_alloc",
    "slurm_partition_nodes_mixed",
    "slurm_partition_nodes_drain",
    "slurm_partition_nodes_down",
    "slurm_node_gpus",
    "slurm_node_gpus_alloc",
)


def served_metrics(cluster: Cluster) -> dict[str, tuple[str, ...]]:
    """The metrics the cluster's dashboards may query, by who serves them."""
    served = {
        "node-exporter": ("up", "node_load1"),
        "dcgm-exporter": ("DCGM_FI_DEV_GPU_UTIL",),
        "collector": collector_metrics(cluster),
    }
    if cluster.release.openmetrics:
        served["slurmctld"] = SLURMCTLD_METRICS
    return served


def _panel(
    pid: int, title: str, exprs: list[tuple[str, str]], kind: str = "timeseries", y: int = 0
) -> dict[str, Any]:
    return {
        "id": pid,
        "title": title,
        "type": kind,
        "datasource": {"type": "prometheus", "uid": "prometheus"},
        "gridPos": {"h": 8, "w": 12, "x": 12 * ((pid - 1) % 2), "y": 8 * ((pid - 1) // 2) + y},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(exprs)
        ],
    }


def _board(cluster: Cluster, uid: str, title: str, panels: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "uid": f"gpucluster-{cluster.name}-{uid}"[:40],
        "title": f"{cluster.name}: {title}",
        "description": header(cluster.name, comment="").strip(),
        "tags": ["gpucluster", cluster.name],
        "schemaVersion": 39,
        "version": 1,
        "editable": False,
        "time": {"from": "now-24h", "to": "now"},
        "panels": panels,
    }


@dataclass(frozen=True)
class SlurmSource:
    """The names of one source of Slurm's partition, node-GPU and queue metrics."""

    partition_gpus: str
    partition_gpus_alloc: str
    jobs_pending: str
    jobs_running: str
    node_gpus: str
    node_gpus_alloc: str
    node_label: str  # the label naming a Slurm node
    # (query, legend) of the node states per partition
    node_states: tuple[tuple[str, str], ...]
    jobs_pending_gpus: str | None = None


SLURMCTLD = SlurmSource(
    "slurm_partition_gpus",
    "slurm_partition_jobs_gpus_alloc",
    "slurm_partition_jobs_pending",
    "slurm_partition_jobs_running",
    "slurm_node_gpus",
    "slurm_node_gpus_alloc",
    "node",
    tuple(
        (f"max by (partition) (slurm_partition_nodes_{state})", f"{legend} {{{{partition}}}}")
        for state, legend in (
            ("idle", "idle"),
            ("alloc", "allocated"),
            ("mixed", "mixed"),
            ("drain", "drain"),
            ("down", "down"),
        )
    ),
)
COLLECTOR = SlurmSource(
    collector.PARTITION_GPUS,
    collector.PARTITION_GPUS_ALLOC,
    collector.PARTITION_JOBS_PENDING,
    collector.PARTITION_JOBS_RUNNING,
    collector.NODE_GPUS,
    collector.NODE_GPUS_ALLOC,
    "slurm_node",
    ((f"max by (partition, state) ({collector.PARTITION_NODES})", "{{state}} {{partition}}"),),
    collector.PARTITION_JOBS_PENDING_GPUS,
)


def _tenant_filter(label: str, tenant: str) -> str:
    """The nodes of a tenant, as Slurm node names in `label`: node-exporter's targets carry the
    model's `tenant` label, and Slurm's node names are the inventory's host names."""
    return f'label_replace(up{{job="node", tenant="{tenant}"}}, "{label}", "$1", "host", "(.*)")'


def dashboards(cluster: Cluster, monitoring: MonitoringSpec) -> dict[str, dict[str, Any]]:
    partitions = [p.name for p in cluster.spec.partitions if p.name in cluster.partitions]
    tenants = [t.name for t in cluster.spec.tenants]
    source = COLLECTOR if collector_serves_slurm_metrics(cluster) else SLURMCTLD
    node = source.node_label
    # Each controller reports the same numbers (its collector; a standby slurmctld redirects its
    # /metrics to the primary's): `max by` keeps one.
    idle_by_partition = f"max by (partition) ({source.partition_gpus} - {source.partition_gpus_alloc})"
    idle_by_node = f"max by ({node}) ({source.node_gpus} - {source.node_gpus_alloc})"

    def per_partition(metric: str, name: str | None = None) -> str:
        selector = f'{{partition="{name}"}}' if name else ""
        return f"max by (partition) ({metric}{selector})"

    fleet = [
        _panel(1, "Hosts up by owner", [('count by (owner) (up{job="node", owner!=""} == 1)', "{{owner}}")]),
        _panel(
            2, "Hosts down by owner", [('count by (owner) (up{job="node", owner!=""} == 0)', "{{owner}}")]
        ),
    ]
    for i, name in enumerate(partitions):
        fleet.append(
            _panel(
                3 + i,
                f"GPUs of partition {name}",
                [
                    (per_partition(source.partition_gpus, name), "total"),
                    (per_partition(source.partition_gpus_alloc, name), "allocated"),
                ],
            )
        )
    idle = [
        _panel(
            1,
            "Idle GPU hours per partition (24 h)",
            [(f"sum by (partition) (sum_over_time(({idle_by_partition})[24h:5m])) / 12", "{{partition}}")],
            "bargauge",
        )
    ]
    for i, name in enumerate(tenants):
        idle.append(
            _panel(
                2 + i,
                f"Idle GPU hours on nodes of tenant {name} (24 h)",
                [
                    (
                        f"sum(sum_over_time(({idle_by_node} and on ({node}) {_tenant_filter(node, name)})[24h:5m])) / 12",
                        name,
                    )
                ],
                "stat",
            )
        )
    queue = [
        _panel(1, "Pending jobs per partition", [(per_partition(source.jobs_pending), "{{partition}}")]),
        _panel(2, "Running jobs per partition", [(per_partition(source.jobs_running), "{{partition}}")]),
    ]
    if source.jobs_pending_gpus:  # slurmctld's metrics do not say
        queue.append(
            _panel(
                3,
                "GPUs asked for by pending jobs per partition",
                [(per_partition(source.jobs_pending_gpus), "{{partition}}")],
            )
        )
    states = [
        _panel(1, "Node states per partition", list(source.node_states)),
        _panel(
            2,
            "Drained and down nodes, with Slurm's reason",
            [
                (
                    'gpucluster_slurm_node_state{state=~".*(drain|down).*"}',
                    "{{slurm_node}} {{state}}: {{reason}}",
                )
            ],
            "table",
        ),
    ]
    jobs = [
        _panel(
            1,
            "GPU utilisation per job",
            [('avg by (hpc_job) (DCGM_FI_DEV_GPU_UTIL{hpc_job!=""})', "job {{hpc_job}}")],
        ),
        _panel(
            2,
            "GPU utilisation per node",
            [("avg by (host) (DCGM_FI_DEV_GPU_UTIL)", "{{host}}")],
        ),
    ]
    return {
        "fleet": _board(cluster, "fleet", "fleet by owner and partition", fleet),
        "idle-gpu-hours": _board(cluster, "idle", "idle GPU hours", idle),
        "queue": _board(cluster, "queue", "queue", queue),
        "node-states": _board(cluster, "nodes", "node states", states),
        "job-gpu-utilisation": _board(cluster, "jobs", "GPU utilisation per job", jobs),
    }
