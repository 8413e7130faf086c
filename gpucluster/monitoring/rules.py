"""The alert rules (each with its runbook line) and their promtool unit tests, from the model.

Metric sources: node-exporter's `up`, DCGM's DCGM_FI_DEV_*, gpucluster's Slurm state collector
(gpucluster_slurm_*, a textfile node-exporter serves from each controller: per-node state and
reason, controllers, slurmdbd, slurmrestd on every release), and for GpusIdleWhileJobsPend the
partition metrics of the release's source: slurmctld's OpenMetrics (slurm_partition_*, 25.11+) or,
before, the collector's (gpucluster_slurm_partition_*, from sinfo and squeue). A site's Slurm
exporter serves names of its own, which no rule reads. Whether slurmctld answers is the
collector's `scontrol ping`, on every release."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpucluster.model.cluster import Cluster
from gpucluster.model.powered import saved_hosts
from gpucluster.monitoring import collector
from gpucluster.monitoring.collector import collector_serves_slurm_metrics
from gpucluster.monitoring.model import MonitoringSpec
from gpucluster.monitoring.targets import controllers

HEALTH_PREFIX = "[health]"  # the health check's drain reasons start with it (slurm_health)


@dataclass(frozen=True)
class Rule:
    alert: str
    expr: str
    summary: str
    runbook: str
    severity: str = "warning"
    wait: bool = True  # `for: alert_after`; False: fires at the first evaluation
    # promtool test: input series (name{labels} -> values) and the labels of the alert expected.
    series: tuple[tuple[str, str], ...] = ()
    expect: dict[str, str] | None = None
    value: str = "1"  # the expression's value in the test, for the summary expected


_IN_CONTROL = collector.CONTROLLER_IN_CONTROL


def _re(text: str) -> str:
    """A literal inside a PromQL regex in a double-quoted string."""
    return "".join("\\\\" + c if c in "[]().*+?" else c for c in text)


def gpus_idle_while_jobs_pend(cluster: Cluster) -> Rule:
    """From slurmctld's partition metrics where it serves them, else from the collector's. Each
    controller's collector reports the same numbers: `max by (partition)` keeps one."""
    summary = "{{ $value }} GPUs of partition {{ $labels.partition }} are idle while its jobs pend"
    runbook = (
        "squeue -p PARTITION -t PD -o '%i %u %r' gives why they wait (limits, QOS, drained or "
        "reserved nodes, a job asking for more than the partition holds)."
    )
    if collector_serves_slurm_metrics(cluster):
        # The collector counts the GPUs pending jobs ask for: a job asking for none (CPUs only) does
        # not make idle GPUs an alert.
        total, alloc, asked = (
            collector.PARTITION_GPUS,
            collector.PARTITION_GPUS_ALLOC,
            collector.PARTITION_JOBS_PENDING_GPUS,
        )
        return Rule(
            "GpusIdleWhileJobsPend",
            f"(max by (partition) ({total}) - max by (partition) ({alloc})) > 0 and max by (partition) ({asked}) > 0",
            summary,
            runbook,
            # As Prometheus stores them: from each controller's node-exporter, with its target labels.
            series=tuple(
                (f'{name}{{partition="gpu",host="{host}",role="controller"}}', values)
                for name, values in ((total, "32x10"), (alloc, "8x10"), (asked, "16x10"))
                for host in ("ctl01", "ctl02")
            ),
            expect={"partition": "gpu"},
            value="24",
        )
    return Rule(
        "GpusIdleWhileJobsPend",
        "(max by (partition) (slurm_partition_gpus) - max by (partition) (slurm_partition_jobs_gpus_alloc)) > 0 "
        "and max by (partition) (slurm_partition_jobs_pending) > 0",
        summary,
        runbook,
        series=(
            ('slurm_partition_gpus{partition="gpu"}', "32x10"),
            ('slurm_partition_jobs_gpus_alloc{partition="gpu"}', "8x10"),
            ('slurm_partition_jobs_pending{partition="gpu"}', "3x10"),
        ),
        expect={"partition": "gpu"},
        value="24",
    )


def gpus_idle_not_powered_down(cluster: Cluster) -> Rule:
    """GpusIdleWhileJobsPend. GPUs of nodes Slurm has powered off are not idle: a job pending for
    them waits for their boot (the collector counts them, on every release)."""
    rule = gpus_idle_while_jobs_pend(cluster)
    if not saved_hosts(cluster):
        return rule
    off = collector.PARTITION_GPUS_POWERED_DOWN
    total, _, rest = rule.expr.partition(" - ")
    expr = f"{total} - max by (partition) ({off}) - {rest}"
    series = (*rule.series, (f'{off}{{partition="gpu",host="ctl01",role="controller"}}', "8x10"))
    value = str(int(rule.value) - 8)
    return Rule(
        rule.alert, expr, rule.summary, rule.runbook, rule.severity, rule.wait, series, rule.expect, value
    )


def node_exporter_missing(cluster: Cluster) -> Rule:
    """node-exporter of an always-on host that does not answer. A power-saved node's target (its
    `power` label) is expected down while Slurm keeps the node off: PowerSavedExporterMissing."""
    saved = bool(saved_hosts(cluster))
    return Rule(
        "NodeExporterMissing",
        'up{job="node", power=""} < 1' if saved else 'up{job="node"} < 1',
        "node-exporter of {{ $labels.host }} does not answer",
        "systemctl status prometheus-node-exporter on the host; if the host is down, its Slurm "
        "alerts say so too.",
        series=(('up{job="node",host="gpu01",instance="gpu01:9100"}', "0x10"),),
        expect={"job": "node", "host": "gpu01", "instance": "gpu01:9100"},
        value="0",
    )


def power_saved_exporter_missing(cluster: Cluster) -> Rule | None:
    """A power-saved node Slurm says is up whose node-exporter does not answer (none while Slurm
    has it off, or is powering it on or off: sinfo's ~ # %)."""
    if not saved_hosts(cluster):
        return None
    off = f'{collector.NODE_STATE}{{state=~".*[~#%].*"}}'
    return Rule(
        "PowerSavedNodeExporterMissing",
        f'(up{{job="node", power!=""}} < 1) unless on (host) '
        f'label_replace(max by (slurm_node) ({off}), "host", "$1", "slurm_node", "(.*)")',
        "node-exporter of {{ $labels.host }} does not answer, though Slurm has the node powered on",
        "The node booted without its exporter (its image or disk lacks it: run the playbook while it "
        "is up), or did not boot: `scontrol show node`, the power log /var/log/slurm/gpucluster-power.log.",
        series=(
            ('up{job="node",host="gpu05",instance="gpu05:9100",power="bmc"}', "0x10"),
            (f'{collector.NODE_STATE}{{slurm_node="gpu05",state="idle",reason=""}}', "1x10"),
            ('up{job="node",host="gpu06",instance="gpu06:9100",power="bmc"}', "0x10"),
            (f'{collector.NODE_STATE}{{slurm_node="gpu06",state="idle~",reason=""}}', "1x10"),
        ),
        expect={"job": "node", "host": "gpu05", "instance": "gpu05:9100", "power": "bmc"},
        value="0",
    )


def slurmctld_unreachable(cluster: Cluster) -> Rule:
    """Where Slurm has controllers, their collectors' silence counts too (every controller down)."""
    silent = f" or absent({_IN_CONTROL})" if controllers(cluster) else ""
    return Rule(
        "SlurmctldUnreachable",
        f"max({_IN_CONTROL}) < 1{silent}",
        "No slurmctld answers scontrol ping on the controllers",
        "Every controller's slurmctld is down or unreachable (or no controller's node-exporter "
        "answers): systemctl status slurmctld and its log on each controller; nothing is scheduled "
        "meanwhile.",
        severity="critical",
        series=(
            (f'{_IN_CONTROL}{{slurm_controller="ctl01",controller_role="primary",host="ctl01"}}', "0x10"),
        ),
        expect={},
        value="0",
    )


def gate_node_out(cluster: Cluster) -> Rule | None:
    """A node that failed the return-to-service gate stays out (cluster.gate): the record keeper
    on each controller says so, with the failing check."""
    if cluster.spec.gate is None:
        return None
    reason = "[gate] repaired/deep out: gpu count: 7 of 8 (failed 2 burn-in(s))"
    return Rule(
        "GateNodeOut",
        "max by (slurm_node, check, reason) (gpucluster_gate_node_out) > 0",
        "{{ $labels.slurm_node }} failed its burn-in and stays out: {{ $labels.check }}",
        "The node failed the return-to-service gate (cluster.gate.attempts times, or past its time "
        "bound): /var/lib/gpucluster/gate/records.jsonl on a controller has every check of each "
        "burn-in; repair it, then `gpucluster node repaired INVENTORY NODE` (a deep burn-in).",
        severity="critical",
        wait=False,
        series=tuple(
            (
                f'gpucluster_gate_node_out{{slurm_node="gpu04",check="gpu count",reason="{reason}",host="{host}"}}',
                "1x10",
            )
            for host in ("ctl01", "ctl02")
        ),
        expect={"slurm_node": "gpu04", "check": "gpu count", "reason": reason},
    )


# The alert rules, in the order written; a function of the cluster stands for a rule that depends on
# it (or returns None where the cluster has no such thing).
ALERT_RULES: tuple[Rule | Callable[[Cluster], Rule | None], ...] = (
    Rule(
        "SlurmNodeDrained",
        'max by (slurm_node, state, reason) (gpucluster_slurm_node_state{state=~".*drain.*"}) > 0',
        "{{ $labels.slurm_node }} is {{ $labels.state }}: {{ $labels.reason }}",
        "sinfo -R names who drained it and why; fix the cause, then `scontrol update "
        "nodename=NODE state=resume`.",
        series=(
            (
                'gpucluster_slurm_node_state{slurm_node="gpu01",state="drained",reason="maintenance"}',
                "1x10",
            ),
        ),
        expect={"slurm_node": "gpu01", "state": "drained", "reason": "maintenance"},
    ),
    Rule(
        "SlurmNodeDown",
        'max by (slurm_node, state, reason) (gpucluster_slurm_node_state{state=~".*(down|fail|[*]).*"}) > 0',
        "{{ $labels.slurm_node }} is {{ $labels.state }}: {{ $labels.reason }}",
        "Is slurmd running on the node (systemctl status slurmd) and can it reach slurmctld? "
        "After a reboot Slurm keeps it down until `scontrol update state=resume`.",
        severity="critical",
        series=(
            (
                'gpucluster_slurm_node_state{slurm_node="gpu02",state="down",reason="Not responding"}',
                "1x10",
            ),
        ),
        expect={"slurm_node": "gpu02", "state": "down", "reason": "Not responding"},
    ),
    Rule(
        "HealthCheckDrainedNode",
        f'max by (slurm_node, reason) (gpucluster_slurm_node_state{{state=~".*drain.*", reason=~"{_re(HEALTH_PREFIX)}.*"}}) > 0',
        "The health check drained {{ $labels.slurm_node }}: {{ $labels.reason }}",
        "The node failed a hardware check (GPU count, devices, fabric): replace or repair it; "
        "the health check resumes it by itself once every check passes.",
        wait=False,
        series=(
            (
                'gpucluster_slurm_node_state{slurm_node="gpu03",state="drained",reason="[health] gpu count: 7 of 8"}',
                "1x10",
            ),
        ),
        expect={"slurm_node": "gpu03", "reason": "[health] gpu count: 7 of 8"},
    ),
    gpus_idle_not_powered_down,
    Rule(
        "GpuXidError",
        "max by (Hostname, gpu, host) (DCGM_FI_DEV_XID_ERRORS) > 0",
        "GPU {{ $labels.gpu }} of {{ $labels.host }} reported XID {{ $value }}",
        "Look the XID up in NVIDIA's XID catalogue; 48/63/64/74/79/94/95 mean drain the node and "
        "reset or replace the GPU.",
        severity="critical",
        wait=False,
        series=(('DCGM_FI_DEV_XID_ERRORS{Hostname="gpu01",gpu="3",host="gpu01"}', "79x10"),),
        expect={"Hostname": "gpu01", "gpu": "3", "host": "gpu01"},
        value="79",
    ),
    Rule(
        "GpuEccError",
        "max by (Hostname, gpu, host) (increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m])) > 0",
        "GPU {{ $labels.gpu }} of {{ $labels.host }} had double-bit ECC errors",
        "Double-bit errors kill the job using the GPU: drain the node, check retired/remapped rows "
        "(nvidia-smi -q -d ROW_REMAPPER) and reset or replace the GPU.",
        severity="critical",
        wait=False,
        series=(
            (
                'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{Hostname="gpu02",gpu="0",host="gpu02"}',
                "0 0 1 2 2 2 2 2 2 2",
            ),
        ),
        expect={"Hostname": "gpu02", "gpu": "0", "host": "gpu02"},
    ),
    Rule(
        "SlurmControllerFailover",
        f'max by (slurm_controller) ({_IN_CONTROL}{{controller_role!="primary"}}) > 0',
        "Backup controller {{ $labels.slurm_controller }} is in control",
        "The primary slurmctld stopped answering: restart it and run `scontrol takeover` from "
        "it once it answers; check StateSaveLocation's filesystem.",
        severity="critical",
        wait=False,
        series=(
            # As Prometheus stores it: with the node-exporter target's labels.
            (
                f'{_IN_CONTROL}{{slurm_controller="ctl02",controller_role="backup1",host="ctl02",role="controller"}}',
                "1x10",
            ),
        ),
        expect={"slurm_controller": "ctl02"},
    ),
    slurmctld_unreachable,
    gate_node_out,
    Rule(
        "SlurmdbdUnreachable",
        "max by (host) (gpucluster_slurmdbd_up) < 1",
        "slurmctld's host {{ $labels.host }} cannot reach slurmdbd",
        "systemctl status slurmdbd mariadb on the accounting host; slurmctld queues accounting "
        "records meanwhile (MaxDBDMsgs) and drops them when that fills up.",
        severity="critical",
        series=(('gpucluster_slurmdbd_up{host="ctl01"}', "0x10"),),
        expect={"host": "ctl01"},
        value="0",
    ),
    Rule(
        "SlurmrestdUnreachable",
        "max by (host) (gpucluster_slurmrestd_up) < 1",
        "slurmrestd does not answer (seen from {{ $labels.host }})",
        "systemctl status slurmrestd on the REST API host; clients and Slurm on Kubernetes "
        "operators lose the API meanwhile.",
        series=(('gpucluster_slurmrestd_up{host="ctl01"}', "0x10"),),
        expect={"host": "ctl01"},
        value="0",
    ),
    Rule(
        "NodeOwnerDisagrees",
        'max by (slurm_node) (gpucluster_slurm_node_state{state!~".*(drain|down).*"} * on (slurm_node) '
        'group_left () max by (slurm_node) (label_replace(up{job="node", owner="kubernetes"}, "slurm_node", '
        '"$1", "host", "(.*)") >= 0)) > 0',
        "Slurm schedules on {{ $labels.slurm_node }}, which the inventory gives to Kubernetes",
        "gpucluster plan INVENTORY shows the move; apply it (the playbook drains the node in Slurm "
        "before Kubernetes takes it).",
        series=(
            ('gpucluster_slurm_node_state{slurm_node="gpu04",state="idle",reason=""}', "1x10"),
            ('up{job="node",host="gpu04",owner="kubernetes"}', "1x10"),
        ),
        expect={"slurm_node": "gpu04"},
    ),
    node_exporter_missing,
    power_saved_exporter_missing,
)


def alert_rules(cluster: Cluster, monitoring: MonitoringSpec) -> list[Rule]:
    """ALERT_RULES for this cluster: each function in it made into the cluster's rule."""
    made = [rule if isinstance(rule, Rule) else rule(cluster) for rule in ALERT_RULES]
    return [rule for rule in made if rule is not None]


def rules_document(cluster: Cluster, monitoring: MonitoringSpec) -> dict[str, Any]:
    rules = []
    for rule in alert_rules(cluster, monitoring):
        entry: dict[str, Any] = {"alert": rule.alert, "expr": rule.expr}
        if rule.wait:
            entry["for"] = monitoring.alert_after
        entry["labels"] = {"severity": rule.severity, "cluster": cluster.name}
        entry["annotations"] = {"summary": rule.summary, "runbook": rule.runbook}
        rules.append(entry)
    groups: list[dict[str, Any]] = [
        {"name": "gpucluster", "interval": monitoring.evaluation_interval, "rules": rules}
    ]
    if saved_hosts(cluster):
        # Powered-down GPU-hours of a day: avg_over_time(gpucluster:gpus_powered_down[1d]) * 24.
        record = {"record": "gpucluster:gpus_powered_down", "expr": f"max({collector.GPUS_POWERED_DOWN})"}
        groups.append(
            {"name": "gpucluster-power", "interval": monitoring.evaluation_interval, "rules": [record]}
        )
    return {"groups": groups}


def rule_tests_document(cluster: Cluster, monitoring: MonitoringSpec, rule_file: str) -> dict[str, Any]:
    """One promtool test per rule: its series, and the alert expected after `for` has passed
    (and none at the first evaluation of a rule that waits)."""
    step = monitoring.evaluation_interval
    after = _seconds(monitoring.alert_after) + 2 * _seconds(step)
    tests = []
    for rule in alert_rules(cluster, monitoring):
        series = [{"series": name, "values": values} for name, values in rule.series]
        expected_labels = {**(rule.expect or {}), "severity": rule.severity, "cluster": cluster.name}
        cases: list[dict[str, Any]] = []
        if rule.wait and _seconds(monitoring.alert_after) >= _seconds(step):
            cases.append({"eval_time": "0s", "alertname": rule.alert, "exp_alerts": []})
        cases.append(
            {
                "eval_time": f"{after}s",
                "alertname": rule.alert,
                "exp_alerts": [
                    {
                        "exp_labels": expected_labels,
                        "exp_annotations": {"summary": _expand(rule.summary, rule), "runbook": rule.runbook},
                    }
                ],
            }
        )
        # Enough samples to reach eval_time: stretch each series' last value.
        series = [{"series": s["series"], "values": _stretch(s["values"], after, step)} for s in series]
        tests.append({"name": rule.alert, "interval": step, "input_series": series, "alert_rule_test": cases})
    return {"rule_files": [rule_file], "evaluation_interval": step, "tests": tests}


def _expand(template: str, rule: Rule) -> str:
    """The summary as Prometheus expands it for the test's alert."""
    text = template.replace("{{ $value }}", rule.value)
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: (rule.expect or {}).get(m.group(1), ""), text)


def _stretch(values: str, until: int, step: str) -> str:
    needed = until // _seconds(step) + 2
    parts = values.split()
    count = sum(int(p.split("x")[1]) + 1 if "x" in p else 1 for p in parts)
    if count >= needed:
        return values
    last = parts[-1].split("x")[0]
    return f"{values} {last}x{needed - count}"


def _seconds(duration: str) -> int:
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}[duration[-1]]
    return int(duration[:-1]) * unit
