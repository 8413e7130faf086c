"""The files of the monitoring layer (`monitoring/` of the rendered tree): prometheus.yml, the
alert rules and their promtool tests, alertmanager.yml, Grafana's provisioning and dashboards,
dcgm-exporter's settings, the Slurm state collector and what the roles read (hosts.yaml)."""

from __future__ import annotations

import json
from typing import Any

from gpucluster.cluster import Cluster
from gpucluster.monitoring import dcgm
from gpucluster.monitoring.dashboards import dashboards
from gpucluster.monitoring.dcgm import dcgm_exporter
from gpucluster.monitoring.model import MonitoringSpec, monitoring_of
from gpucluster.monitoring.rules import rule_tests_document, rules_document
from gpucluster.monitoring.targets import controllers, every_host, scrape_jobs
from gpucluster.render.templating import header
from gpucluster.yamlout import dump

# Where the monitoring host keeps them (Debian's prometheus package reads /etc/prometheus).
RULES_PATH = "/etc/prometheus/rules/gpucluster.rules.yml"
# Debian's prometheus-node-exporter reads textfiles from here (its --collector.textfile.directory).
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"


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
    exporter = dcgm_exporter(cluster, monitoring)
    return {
        "monitoring_host": monitoring.host,
        "node_exporter_hosts": every_host(cluster, monitoring),
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


def collector_script(cluster: Cluster, monitoring: MonitoringSpec) -> str:
    """The Slurm state collector a timer runs on each controller: what slurmctld's metrics lack
    (per-node state and reason, which controller is in control, slurmdbd and slurmrestd reachable),
    as a node-exporter textfile written whole then renamed."""
    slurm = cluster.spec.slurm
    ctl = controllers(cluster)
    rest = f"http://{slurm.rest_api.host}:{slurm.rest_api.port}/openapi/v3" if slurm.rest_api else ""
    lines = [
        "#!/bin/sh",
        header(cluster.name),
        "# Slurm's state for node-exporter's textfile collector (gpucluster_slurm_*).",
        "set -u",
        f"out={TEXTFILE_DIR}/gpucluster_slurm.prom",
        'tmp="$out.$$"',
        "esc() { sed -e 's/\\\\/\\\\\\\\/g' -e 's/\"/\\\\\"/g'; }",
        "{",
        '  echo "# TYPE gpucluster_slurm_node_state gauge"',
        "  sinfo -N -h -o '%N|%T|%E' 2>/dev/null | sort -u | while IFS='|' read -r node state reason; do",
        '    [ "$reason" = none ] && reason=',
        '    state=$(printf %s "$state" | tr "A-Z" "a-z")',
        '    reason=$(printf %s "$reason" | esc)',
        '    printf \'gpucluster_slurm_node_state{slurm_node="%s",state="%s",reason="%s"} 1\\n\' "$node" "$state" "$reason"',
        "  done",
        '  echo "# TYPE gpucluster_slurm_controller_in_control gauge"',
        "  ping=$(scontrol ping 2>/dev/null)",
    ]
    for index, host in enumerate(ctl):
        role = "primary" if index == 0 else f"backup{index}"
        lines += [
            # `scontrol ping`: "Slurmctld(primary) at ctl01 is UP" / "...(backup) at ctl02 is UP";
            # the first UP one answers for the cluster.
            '  first=$(printf "%s\\n" "$ping" | grep " is UP" | head -n 1 | sed -n "s/.* at \\([^ ]*\\) is UP.*/\\1/p")',
            f'  [ "$first" = "{host}" ] && v=1 || v=0',
            # Not `role`: node-exporter's target carries the host's `role`, which would win and
            # rename this one to exported_role.
            f'  echo "gpucluster_slurm_controller_in_control{{slurm_controller=\\"{host}\\",controller_role=\\"{role}\\"}} $v"',
        ]
    if slurm.accounting:
        lines += [
            '  echo "# TYPE gpucluster_slurmdbd_up gauge"',
            "  sacctmgr -n -P show cluster >/dev/null 2>&1 && v=1 || v=0",
            '  echo "gpucluster_slurmdbd_up $v"',
        ]
    if rest:
        lines += [
            '  echo "# TYPE gpucluster_slurmrestd_up gauge"',
            # Any HTTP answer (401 without a token included) means slurmrestd runs.
            f"  code=$(curl -s -o /dev/null -m 5 -w '%{{http_code}}' {rest} 2>/dev/null)",
            '  [ "${code:-000}" != 000 ] && v=1 || v=0',
            '  echo "gpucluster_slurmrestd_up $v"',
        ]
    lines += ['} > "$tmp" && mv "$tmp" "$out"', ""]
    return "\n".join(lines)


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
    if dcgm_exporter(cluster, monitoring).on:
        files["monitoring/dcgm/dcgm-exporter.env"] = dcgm_settings(cluster, monitoring)
        files["monitoring/dcgm/job-mapping-prolog.sh"] = job_mapping_script(cluster, "prolog")
        files["monitoring/dcgm/job-mapping-epilog.sh"] = job_mapping_script(cluster, "epilog")
    return files
