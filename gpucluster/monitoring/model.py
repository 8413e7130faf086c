"""The `monitoring:` section of the cluster file: where Prometheus and Alertmanager run, how often
they scrape and evaluate, and where Grafana's packages come from.
(No `from __future__ import annotations`: see gpucluster/model/spec.py.)"""

from typing import TYPE_CHECKING, Annotated

from pydantic import Field, StrictBool

from gpucluster.model.base import Strict, Update, spec

if TYPE_CHECKING:
    from gpucluster.model.cluster import Cluster

DURATION_RE = r"^[1-9][0-9]*(s|m|h|d)$"
Duration = Annotated[str, Field(pattern=DURATION_RE)]
Port = Annotated[int, Field(ge=1, le=65535)]


class PackageSource(Strict):
    url: str = spec("APT repository URL.", Update.SERVICE)
    suite: str = spec("Its suite (e.g. stable).", Update.SERVICE)
    components: list[str] = spec("Its components.", Update.SERVICE, default_factory=lambda: ["main"])
    key: str = spec("Signing key file, relative to the inventory directory.", Update.SERVICE)


class Grafana(Strict):
    repository: PackageSource = spec(
        "Where the `grafana` package comes from (Grafana is not in Debian): the monitoring host "
        "installs it from here and provisions the dashboards.",
        Update.SERVICE,
    )
    port: Port = spec("Grafana's HTTP port.", Update.SERVICE, default=3000)


class SlurmExporter(Strict):
    """A Slurm exporter the site installs and runs itself (gpucluster only scrapes it)."""

    port: Port = spec("Its port on every controller (where it answers /metrics).", Update.SERVICE)


class MonitoringSpec(Strict):
    host: str = spec(
        "Inventory host running Prometheus and Alertmanager (an existing host: a controller, a login node).",
        Update.SERVICE,
    )
    scrape_interval: Duration = spec("How often every target is scraped.", Update.SERVICE, default="30s")
    evaluation_interval: Duration = spec(
        "How often the alert rules are evaluated.", Update.SERVICE, default="30s"
    )
    alert_after: Duration = spec(
        "How long a condition must hold before its alert fires (the rules' `for`).",
        Update.SERVICE,
        default="5m",
    )
    retention: Duration = spec("How long Prometheus keeps samples.", Update.SERVICE, default="15d")
    prometheus_port: Port = spec("Prometheus' HTTP port.", Update.SERVICE, default=9090)
    alertmanager_port: Port = spec("Alertmanager's HTTP port.", Update.SERVICE, default=9093)
    node_exporter_port: Port = spec("node-exporter's port on every host.", Update.SERVICE, default=9100)
    dcgm_exporter: StrictBool | None = spec(
        "NVIDIA's dcgm-exporter on the GPU nodes Slurm owns, with each GPU's Slurm job (its HPC job "
        "mapping, written by a Prolog and an Epilog that slurm.conf names): installed, run and scraped "
        "there. It comes from NVIDIA's CUDA repository only (package datacenter-gpu-manager-exporter), "
        "which the gpu_driver role configures where a node type's `software.driver.source` is `nvidia`. "
        "Default (auto): on where every GPU node type of Slurm's nodes has that source and the release "
        "takes several Prolog lines (24.05+); else off. `true` is refused where a GPU node type of "
        "Slurm's has no NVIDIA repository, or where the release takes one Prolog (or Epilog) and "
        "slurm.conf has another; `false`: none (the lab's GPUs are device files).",
        Update.RECONFIGURE,
        default=None,
    )
    dcgm_exporter_port: Port = spec("NVIDIA dcgm-exporter's port on GPU nodes.", Update.SERVICE, default=9400)
    slurm_exporter: SlurmExporter | None = spec(
        "A Slurm exporter the site runs on every controller, scraped as job `slurm_exporter` for "
        "the site's own queries: no alert rule or dashboard reads its metrics (their names are its "
        "own). gpucluster installs none, and needs none: before 25.11, whose slurmctld serves no "
        "metrics, gpucluster's state collector on the controllers gives the partition GPU, node GPU "
        "and queue metrics the alerts and dashboards read (gpucluster_slurm_*, from sinfo and "
        "squeue); from 25.11 slurmctld serves its own. Absent: no such job.",
        Update.SERVICE,
        default=None,
    )
    webhook: str | None = spec(
        "URL Alertmanager posts alerts to (a chat bridge, a pager); none: alerts stay in Alertmanager's "
        "API and UI.",
        Update.SERVICE,
        default=None,
    )
    grafana: Grafana | None = spec(
        "Grafana on the monitoring host, from a site package source; none: the dashboards are rendered "
        "for a Grafana elsewhere to provision.",
        Update.SERVICE,
        default=None,
    )


def monitoring_of(cluster: "Cluster") -> MonitoringSpec | None:
    section = getattr(cluster.spec, "monitoring", None)
    return section if isinstance(section, MonitoringSpec) else None
