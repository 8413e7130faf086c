"""Grafana dashboards (provisioning JSON) from the model: fleet by owner and partition, idle GPU
hours per tenant, the queue, node states, and GPU utilisation per job. Every query names metrics
that the scrape targets serve (EXPORTED_METRICS, checked by the tests against the rules too)."""

from __future__ import annotations

from typing import Any

from gpucluster.cluster import Cluster
from gpucluster.monitoring.model import MonitoringSpec
from gpucluster.render.templating import header

# Metrics the dashboards query, by who serves them.
EXPORTED_METRICS = {
    "slurmctld": (
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
    ),
    "node-exporter": ("up", "node_load1"),
    "dcgm-exporter": ("DCGM_FI_DEV_GPU_UTIL",),
    "collector": ("gpucluster_slurm_node_state",),
}


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


def dashboards(cluster: Cluster, monitoring: MonitoringSpec) -> dict[str, dict[str, Any]]:
    partitions = [p.name for p in cluster.spec.partitions if p.name in cluster.partitions]
    tenants = [t.name for t in cluster.spec.tenants]
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
                    (f'slurm_partition_gpus{{partition="{name}"}}', "total"),
                    (f'slurm_partition_jobs_gpus_alloc{{partition="{name}"}}', "allocated"),
                ],
            )
        )
    idle = [
        _panel(
            1,
            "Idle GPU hours per partition (24 h)",
            [
                (
                    "sum by (partition) (sum_over_time((slurm_partition_gpus - slurm_partition_jobs_gpus_alloc)[24h:5m])) / 12",
                    "{{partition}}",
                )
            ],
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
                        "sum(sum_over_time((slurm_node_gpus - slurm_node_gpus_alloc)[24h:5m]"
                        f' * on (node) group_left () max by (node) (label_replace(up{{job="node", tenant="{name}"}}, '
                        '"node", "$1", "host", "(.*)"))) / 12',
                        name,
                    )
                ],
                "stat",
            )
        )
    queue = [
        _panel(1, "Pending jobs per partition", [("slurm_partition_jobs_pending", "{{partition}}")]),
        _panel(2, "Running jobs per partition", [("slurm_partition_jobs_running", "{{partition}}")]),
    ]
    states = [
        _panel(
            1,
            "Node states per partition",
            [
                ("slurm_partition_nodes_idle", "idle {{partition}}"),
                ("slurm_partition_nodes_alloc", "allocated {{partition}}"),
                ("slurm_partition_nodes_mixed", "mixed {{partition}}"),
                ("slurm_partition_nodes_drain", "drain {{partition}}"),
                ("slurm_partition_nodes_down", "down {{partition}}"),
            ],
        ),
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
