"""The files of the monitoring layer (`monitoring/` of the rendered tree): prometheus.yml, the
alert rules and their promtool tests, alertmanager.yml, Grafana's provisioning and dashboards,
dcgm-exporter's settings, the Slurm state collector and what the roles read (hosts.yaml)."""

from __future__ import annotations

import json
from typing import Any

from gpucluster.model.cluster import Cluster
from gpucluster.model.powered import cloud_hosts
from gpucluster.monitoring import dcgm
from gpucluster.monitoring.collector import TEXTFILE_DIR, collector_script
from gpucluster.monitoring.dashboards import dashboards
from gpucluster.monitoring.model import MonitoringSpec, monitoring_of
from gpucluster.monitoring.rules import rule_tests_document, rules_document
from gpucluster.monitoring.targets import controllers, every_host, scrape_jobs
from gpucluster.render.templating import header
from gpucluster.yamlout import dump

# Where the monitoring host keeps them (Debian's prometheus package reads /etc/prometheus).
RULES_PATH = "/etc/prometheus/rules/gpucluster.rules.yml"


def prometheus_config(cluster: Cluster, monitoring: MonitoringSpec) -> dict[str, Any]:
    """Accepted by Debian bookworm's promtool 2.42 and forky's Prometheus 3.5: no key newer than
    2.42, none 3.x removed."""
    jobs = []
    for job in scrape_jobs(cluster, monitoring):
        groups = []
        for target in job.targets:
            labels = dict(target.labels)
            if "node" in labels:  # `host`: `node` is a label Slurm's own metrics carry
                labels["host"] = labels.pop("node")
            groups.append({"targets": [target.address], "labels": dict(sorted(labels.items()))})
        jobs.append({"job_name": job.name, "metrics_path": job.metrics_path, "static_configs": groups})
    return {
        "global": {
            "scrape_interval": monitoring.scrape_interval,
            "evaluation_interval": monitoring.evaluation_interval,
            "external_labels": {"cluster": cluster.name},
        },
        "alerting": {
            "alertmanagers": [
                {"static_configs": [{"targets": [f"localhost:{monitoring.alertmanager_port}"]}]}
            ]
        },
        "rule_files": [RULES_PATH],
        "scrape_configs": jobs,
    }


def alertmanager_config(cluster: Cluster, monitoring: MonitoringSpec) -> dict[str, Any]:
    receiver: dict[str, Any] = {"name": "default"}
    if monitoring.webhook:
        receiver["webhook_configs"] = [{"url": monitoring.webhook, "send_resolved": True}]
    return {
        "route": {
            "receiver": "default",
            "group_by": ["alertname", "cluster", "partition"],
            "group_wait": "10s",
            "group_interval": "1m",
            "repeat_interval": "4h",
        },
        "receivers": [receiver],
    }


def hosts_settings(cluster: Cluster, monitoring: MonitoringSpec) -> dict[str, Any]:
    """What the playbooks read: who runs what, and the ports."""
    slurm = cluster.spec.slurm
    exporter = dcgm.dcgm_exporter(cluster, monitoring)
    return {
        "monitoring_host": monitoring.host,
        # Not the instances of cloud groups: their image runs node-exporter.
        "node_exporter_hosts": [h for h in every_host(cluster, monitoring) if h not in cloud_hosts(cluster)],
        "collector_hosts": controllers(cluster),
        # None where it does not run. Its scripts go on every Slurm node: slurm.conf names them as
        # Prolog and Epilog there (slurm.yml installs them before slurmd reads that slurm.conf).
        "dcgm_exporter": {
            "hosts": list(exporter.hosts),
            "job_mapping_hosts": list(exporter.job_mapping_hosts),
            "packages": [dcgm.PACKAGE],
            "service": dcgm.SERVICE,
            "settings_path": dcgm.SETTINGS_PATH,
            "job_mapping_dir": dcgm.JOB_MAPPING_DIR,
            "prolog": dcgm.PROLOG,
            "epilog": dcgm.EPILOG,
        }
        if exporter.on
        else None,
        "prometheus_port": monitoring.prometheus_port,
        "alertmanager_port": monitoring.alertmanager_port,
        "node_exporter_port": monitoring.node_exporter_port,
        "retention": monitoring.retention,
        "rules_path": RULES_PATH,
        "textfile_dir": TEXTFILE_DIR,
        "slurmctld_metrics": cluster.release.openmetrics,
        "rest_api": f"http://{slurm.rest_api.host}:{slurm.rest_api.port}" if slurm.rest_api else None,
        "accounting": slurm.accounting is not None,
        "grafana": None if monitoring.grafana is None else {"port": monitoring.grafana.port},
    }


def dcgm_settings(cluster: Cluster, monitoring: MonitoringSpec) -> str:
    return "\n".join(
        [
            header(cluster.name),
            f"# {dcgm.SETTINGS_PATH} on the GPU nodes Slurm owns, read by {dcgm.SERVICE}",
            "# (a drop-in): dcgm-exporter labels each GPU's metrics with the job the Slurm prolog wrote",
            "# into the mapping directory (one file per GPU index).",
            f'DCGM_EXPORTER_LISTEN=":{monitoring.dcgm_exporter_port}"',
            f'DCGM_HPC_JOB_MAPPING_DIR="{dcgm.JOB_MAPPING_DIR}"',
            "",
        ]
    )


def job_mapping_script(cluster: Cluster, kind: str) -> str:
    """Prolog/epilog: one file per GPU index the job holds, naming the job (dcgm-exporter's
    `hpc_job` label); the epilog removes the job's files. A GPU belongs to one job at a time
    (gres/gpu): the prolog's file replaces what a job whose epilog never ran left there. Exits 0
    always: a failing Prolog would drain the node."""
    body = [
        "#!/bin/sh",
        header(cluster.name),
        f"# Slurm {kind}: dcgm-exporter's job mapping (one file per GPU index, its content the job id).",
        f"dir={dcgm.JOB_MAPPING_DIR}",
        '[ -n "${SLURM_JOB_GPUS:-}" ] || exit 0',
        'mkdir -p "$dir"',
        'for gpu in $(printf %s "$SLURM_JOB_GPUS" | tr , " "); do',
    ]
    if kind == "prolog":
        body += ['  printf "%s\\n" "$SLURM_JOB_ID" > "$dir/$gpu.tmp" && mv "$dir/$gpu.tmp" "$dir/$gpu"']
    else:
        body += ['  grep -qx "$SLURM_JOB_ID" "$dir/$gpu" 2>/dev/null && rm -f "$dir/$gpu"']
    body += ["done", "exit 0", ""]
    return "\n".join(body)


def render_monitoring(cluster: Cluster) -> dict[str, str]:
    monitoring = monitoring_of(cluster)
    if monitoring is None:
        return {}
    top = header(cluster.name)
    rules_file = "gpucluster.rules.yml"
    files = {
        "monitoring/prometheus.yml": top + "\n" + dump(prometheus_config(cluster, monitoring)),
        f"monitoring/rules/{rules_file}": top + "\n" + dump(rules_document(cluster, monitoring)),
        "monitoring/rules/gpucluster.rules.test.yml": top
        + "\n"
        + dump(rule_tests_document(cluster, monitoring, rules_file)),
        "monitoring/alertmanager.yml": top + "\n" + dump(alertmanager_config(cluster, monitoring)),
        "monitoring/hosts.yaml": top + "\n" + dump(hosts_settings(cluster, monitoring)),
        "monitoring/slurm-state-collector.sh": collector_script(cluster, monitoring),
        "monitoring/grafana/provisioning/dashboards/gpucluster.yaml": top
        + "\n"
        + dump(
            {
                "apiVersion": 1,
                "providers": [
                    {
                        "name": "gpucluster",
                        "type": "file",
                        "options": {"path": "/var/lib/grafana/dashboards/gpucluster"},
                    }
                ],
            }
        ),
        "monitoring/grafana/provisioning/datasources/prometheus.yaml": top
        + "\n"
        + dump(
            {
                "apiVersion": 1,
                "datasources": [
                    {
                        "name": "Prometheus",
                        "uid": "prometheus",
                        "type": "prometheus",
                        "url": f"http://localhost:{monitoring.prometheus_port}",
                        "isDefault": True,
                    }
                ],
            }
        ),
    }
    for name, board in dashboards(cluster, monitoring).items():
        files[f"monitoring/grafana/dashboards/{name}.json"] = (
            json.dumps(board, indent=2, sort_keys=True) + "\n"
        )
    if dcgm.dcgm_exporter(cluster, monitoring).on:
        files["monitoring/dcgm/dcgm-exporter.env"] = dcgm_settings(cluster, monitoring)
        files["monitoring/dcgm/job-mapping-prolog.sh"] = job_mapping_script(cluster, "prolog")
        files["monitoring/dcgm/job-mapping-epilog.sh"] = job_mapping_script(cluster, "epilog")
    return files
