"""gpucluster's Slurm state collector: a POSIX sh script a systemd timer runs on each controller
every 15 s, writing a node-exporter textfile (gpucluster_slurm_*, whole then renamed).

On every release it gives what slurmctld's metrics lack: each node's state with Slurm's reason,
the controller in control, whether slurmdbd and slurmrestd answer. Where slurmctld serves no
metrics (before 25.11), it also gives the partition, node-GPU and queue metrics the alert rules
and dashboards read, from one `sinfo` and one `squeue`, under gpucluster's own names: one name has
one source, and from 25.11 slurmctld's own metrics (slurm_partition_*, slurm_node_*) are used
instead. A site's Slurm exporter (cluster.monitoring.slurm_exporter) changes none of this."""

from __future__ import annotations

from gpucluster.model.cluster import Cluster
from gpucluster.model.powered import saved_hosts
from gpucluster.monitoring.model import MonitoringSpec
from gpucluster.monitoring.targets import controllers
from gpucluster.render.health import NODE_EXPORTER_TEXTFILES
from gpucluster.render.templating import header

# Debian's prometheus-node-exporter reads textfiles from here (its --collector.textfile.directory).
TEXTFILE_DIR = NODE_EXPORTER_TEXTFILES

NODE_STATE = "gpucluster_slurm_node_state"
CONTROLLER_IN_CONTROL = "gpucluster_slurm_controller_in_control"
SLURMDBD_UP = "gpucluster_slurmdbd_up"
SLURMRESTD_UP = "gpucluster_slurmrestd_up"

# Where slurmctld serves no metrics. Labels: `partition`, `slurm_node`, `state`: none of them a
# label of node-exporter's targets, which would win over the metric's own.
PARTITION_GPUS = "gpucluster_slurm_partition_gpus"
PARTITION_GPUS_ALLOC = "gpucluster_slurm_partition_gpus_alloc"
PARTITION_NODES = "gpucluster_slurm_partition_nodes"
PARTITION_JOBS_PENDING = "gpucluster_slurm_partition_jobs_pending"
PARTITION_JOBS_PENDING_GPUS = "gpucluster_slurm_partition_jobs_pending_gpus"
PARTITION_JOBS_RUNNING = "gpucluster_slurm_partition_jobs_running"
NODE_GPUS = "gpucluster_slurm_node_gpus"
NODE_GPUS_ALLOC = "gpucluster_slurm_node_gpus_alloc"
# With power-saved nodes (cluster.nodes[].power), on every release: the GPUs of nodes Slurm has
# powered off or is powering on or off (sinfo's ~ # % suffixes), per partition and in all (each node
# once): GpusIdleWhileJobsPend leaves them out, and their average over a day times 24 is the day's
# powered-down GPU-hours (the recording rule gpucluster:gpus_powered_down).
PARTITION_GPUS_POWERED_DOWN = "gpucluster_slurm_powered_down_partition_gpus"
GPUS_POWERED_DOWN = "gpucluster_slurm_powered_down_gpus"
# The `state` values of PARTITION_NODES, each node in one (the first that matches, in this order).
NODE_STATE_CLASSES = ("down", "drain", "mixed", "allocated", "idle", "other")

# name, HELP text, the awk array holding its value per partition.
_PARTITION_FAMILIES = (
    (PARTITION_GPUS, "GPUs of the nodes of the partition (a node in two partitions counts in each).", "gpus"),
    (
        PARTITION_GPUS_ALLOC,
        "GPUs allocated on the nodes of the partition, by jobs of any partition.",
        "gpus_alloc",
    ),
    (PARTITION_JOBS_PENDING, "Pending jobs that may run in the partition (array tasks each).", "pending"),
    (PARTITION_JOBS_PENDING_GPUS, "GPUs asked for by the pending jobs of the partition.", "pending_gpus"),
    (PARTITION_JOBS_RUNNING, "Running jobs of the partition.", "running"),
)

# Reads `node|NODE|PARTITION|STATE|GRES|GRES_USED` (sinfo -N: a node once per partition) and
# `job|STATE|PARTITIONS|TRES` (squeue -r: array tasks one a line). Written for POSIX awk: Debian's
# default awk is mawk.
_AWK_FUNCTIONS = r"""function gpus_of(gres,   n, i, k, entry, field, sum) {
  # gpu:h100:8(S:0), gpu:h100:2(IDX:0-1), gpu:4, gpu:a100:2,gpu:h100:4 (shard:... and other GRES
  # left out); the parenthesised part may hold commas (IDX:0,2-3): removed first.
  gsub(/\([^)]*\)/, "", gres)
  n = split(gres, entry, ",")
  sum = 0
  for (i = 1; i <= n; i++) {
    k = split(entry[i], field, ":")
    if (field[1] != "gpu") continue
    if (k > 1 && field[k] ~ /^[0-9]+$/) sum += field[k]
    else sum += 1
  }
  return sum
}
function gpus_asked(tres,   n, i, entry, typed, untyped) {
  # cpu=1,mem=1G,node=2,billing=1,gres/gpu=16,gres/gpu:h100=16: the untyped count, else the
  # typed ones summed (AccountingStorageTRES may name typed GPUs only).
  untyped = -1
  typed = 0
  n = split(tres, entry, ",")
  for (i = 1; i <= n; i++) {
    if (entry[i] ~ /^gres\/gpu=/) untyped = substr(entry[i], 10) + 0
    else if (entry[i] ~ /^gres\/gpu:/) typed += substr(entry[i], index(entry[i], "=") + 1)
  }
  return untyped >= 0 ? untyped : typed
}
function state_class(state) {
  # The long state of sinfo, with its flags: idle, mixed, allocated, drained, draining, down*, ...
  state = tolower(state)
  if (state ~ /down|fail|[*]/) return "down"
  if (state ~ /drain/) return "drain"
  if (state ~ /mix/) return "mixed"
  if (state ~ /alloc|comp/) return "allocated"
  if (state ~ /idle/) return "idle"
  return "other"
}
function see(partition) {
  if (!(partition in seen)) {
    seen[partition] = 1
    partitions[++np] = partition
  }
}
$1 == "node" && NF >= 6 {
  if ($3 != "n/a") {
    see($3)
    gpus[$3] += gpus_of($5)
    gpus_alloc[$3] += gpus_of($6)
    partition_nodes[$3, state_class($4)]++
  }
  if (!($2 in node_gpus)) node_names[++nn] = $2
  node_gpus[$2] = gpus_of($5)
  node_gpus_alloc[$2] = gpus_of($6)
}
$1 == "job" && NF >= 4 {
  # A pending job may name several partitions (a,b): it counts in each.
  m = split($3, named, ",")
  for (i = 1; i <= m; i++) {
    see(named[i])
    # squeue -t PD,R: the other states it prints (R, CF) are the running ones.
    if ($2 == "PD") {
      pending[named[i]]++
      pending_gpus[named[i]] += gpus_asked($4)
    } else running[named[i]]++
  }
}"""


def collector_serves_slurm_metrics(cluster: Cluster) -> bool:
    """Whether the collector gives the partition, node-GPU and queue metrics: where slurmctld
    serves none (metrics/openmetrics came in 25.11)."""
    return not cluster.release.openmetrics


def collector_metrics(cluster: Cluster) -> tuple[str, ...]:
    """The metric names the cluster's collector writes."""
    served = [NODE_STATE, CONTROLLER_IN_CONTROL]
    if cluster.spec.slurm.accounting:
        served.append(SLURMDBD_UP)
    if cluster.spec.slurm.rest_api:
        served.append(SLURMRESTD_UP)
    if collector_serves_slurm_metrics(cluster):
        served += [name for name, _, _ in _PARTITION_FAMILIES] + [PARTITION_NODES, NODE_GPUS, NODE_GPUS_ALLOC]
    if saved_hosts(cluster):
        served += [PARTITION_GPUS_POWERED_DOWN, GPUS_POWERED_DOWN]
    return tuple(served)


def _powered_down_lines() -> list[str]:
    """GPUs of the nodes that are off (or on their way up or down), from one sinfo."""
    functions = _AWK_FUNCTIONS.split("function gpus_asked")[0].rstrip().split("\n")
    awk = [
        *functions,
        "{",
        "  if (!($2 in seen)) { seen[$2] = 1; partitions[++np] = $2 }",
        "  if ($3 !~ /[~#%]/) next",
        "  off[$2] += gpus_of($4)",
        "  if (!($1 in counted)) { counted[$1] = 1; total += gpus_of($4) }",
        "}",
        "END {",
        f'  printf "# HELP {PARTITION_GPUS_POWERED_DOWN} GPUs of the partition on nodes Slurm powered off (or powers on or off).\\n# TYPE {PARTITION_GPUS_POWERED_DOWN} gauge\\n"',
        f'  for (i = 1; i <= np; i++) printf "{PARTITION_GPUS_POWERED_DOWN}{{partition=\\"%s\\"}} %d\\n", partitions[i], off[partitions[i]]',
        f'  printf "# HELP {GPUS_POWERED_DOWN} GPUs on nodes Slurm powered off (or powers on or off), each node once.\\n# TYPE {GPUS_POWERED_DOWN} gauge\\n"',
        f'  printf "{GPUS_POWERED_DOWN} %d\\n", total',
        "}",
    ]
    assert not any("'" in line for line in awk)
    return [
        "  if nodes=$(sinfo -a -N -h -O 'NodeList:0|,PartitionName:0|,StateLong:0|,Gres:0' 2>/dev/null); then",
        "    printf '%s\\n' \"$nodes\" | awk -F'|' '",
        *(f"      {line}" if line else "" for line in awk),
        "    '",
        "  fi",
    ]


def _awk_end() -> list[str]:
    lines = ["END {"]

    def family(name: str, help_text: str) -> None:
        lines.append(f'  printf "# HELP {name} {help_text}\\n# TYPE {name} gauge\\n"')

    for name, help_text, array in _PARTITION_FAMILIES:
        family(name, help_text)
        lines.append(
            f'  for (i = 1; i <= np; i++) printf "{name}{{partition=\\"%s\\"}} %d\\n", '
            f"partitions[i], {array}[partitions[i]]"
        )
    family(PARTITION_NODES, "Nodes of the partition by state (each node in one).")
    lines += [
        f'  split("{" ".join(NODE_STATE_CLASSES)}", classes, " ")',
        "  for (i = 1; i <= np; i++) for (c = 1; c <= " + str(len(NODE_STATE_CLASSES)) + "; c++)",
        f'    printf "{PARTITION_NODES}{{partition=\\"%s\\",state=\\"%s\\"}} %d\\n", '
        "partitions[i], classes[c], partition_nodes[partitions[i], classes[c]]",
    ]
    for name, help_text, array in (
        (NODE_GPUS, "GPUs of the node.", "node_gpus"),
        (NODE_GPUS_ALLOC, "GPUs of the node allocated to jobs.", "node_gpus_alloc"),
    ):
        family(name, help_text)
        lines.append(
            f'  for (i = 1; i <= nn; i++) printf "{name}{{slurm_node=\\"%s\\"}} %d\\n", '
            f"node_names[i], {array}[node_names[i]]"
        )
    return [*lines, "}"]


def _slurm_metrics_lines() -> list[str]:
    """The partition, node-GPU and queue metrics from one sinfo and one squeue, both or neither (a
    queue that failed to read would count as an empty one)."""
    awk = _AWK_FUNCTIONS.split("\n") + _awk_end()
    # The program sits between single quotes in the script.
    assert not any("'" in line for line in awk)
    return [
        # -a: hidden partitions too, as slurmctld's metrics count them. Width 0: unpadded fields.
        "  if nodes=$(sinfo -a -N -h -O 'NodeList:0|,PartitionName:0|,StateLong:0|,Gres:0|,GresUsed:0' 2>/dev/null) &&",
        # tres-alloc: what a pending job asks for in total (--gpus, --gres or --gpus-per-task, times
        # its nodes or tasks), which tres-per-node alone does not say.
        "    jobs=$(squeue -a -r -h -t PD,R -O 'StateCompact:0|,Partition:0|,tres-alloc:0' 2>/dev/null); then",
        "    { printf '%s\\n' \"$nodes\" | sed 's/^/node|/'; printf '%s\\n' \"$jobs\" | sed 's/^/job|/'; } | awk -F'|' '",
        *(f"      {line}" if line else "" for line in awk),
        "    '",
        "  fi",
    ]


def collector_script(cluster: Cluster, monitoring: MonitoringSpec) -> str:
    """The script, rendered for the cluster: its controllers, and what its release lacks."""
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
        f'  echo "# TYPE {NODE_STATE} gauge"',
        "  sinfo -N -h -o '%N|%T|%E' 2>/dev/null | sort -u | while IFS='|' read -r node state reason; do",
        '    [ "$reason" = none ] && reason=',
        '    state=$(printf %s "$state" | tr "A-Z" "a-z")',
        '    reason=$(printf %s "$reason" | esc)',
        f'    printf \'{NODE_STATE}{{slurm_node="%s",state="%s",reason="%s"}} 1\\n\' "$node" "$state" "$reason"',
        "  done",
        f'  echo "# TYPE {CONTROLLER_IN_CONTROL} gauge"',
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
            f'  echo "{CONTROLLER_IN_CONTROL}{{slurm_controller=\\"{host}\\",controller_role=\\"{role}\\"}} $v"',
        ]
    if slurm.accounting:
        lines += [
            f'  echo "# TYPE {SLURMDBD_UP} gauge"',
            "  sacctmgr -n -P show cluster >/dev/null 2>&1 && v=1 || v=0",
            f'  echo "{SLURMDBD_UP} $v"',
        ]
    if rest:
        lines += [
            f'  echo "# TYPE {SLURMRESTD_UP} gauge"',
            # Any HTTP answer (401 without a token included) means slurmrestd runs.
            f"  code=$(curl -s -o /dev/null -m 5 -w '%{{http_code}}' {rest} 2>/dev/null)",
            '  [ "${code:-000}" != 000 ] && v=1 || v=0',
            f'  echo "{SLURMRESTD_UP} $v"',
        ]
    if collector_serves_slurm_metrics(cluster):
        lines += _slurm_metrics_lines()
    if saved_hosts(cluster):
        lines += _powered_down_lines()
    lines += ['} > "$tmp" && mv "$tmp" "$out"', ""]
    return "\n".join(lines)
