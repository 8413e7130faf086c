"""The monitoring layer: Prometheus, Alertmanager, node-exporter, Slurm's metrics, DCGM and the
Grafana dashboards of a cluster, from the same model (section `cluster.monitoring`)."""
