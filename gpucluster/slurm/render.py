"""Slurm files: slurm.conf, topology.conf or topology.yaml, gres.conf, cgroup.conf, healthcheck.conf."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hostlist import numeric_sort_key

from gpucluster import yamlout
from gpucluster.hostlists import compress
from gpucluster.model.cluster import Cluster
from gpucluster.model.releases import configless_serves_topology_yaml
from gpucluster.model.spec import NodeType, Owner, Partition
from gpucluster.render.health import (
    HEALTH_CONF,
    HEALTH_PROGRAM,
    REBOOT_PROGRAM,
    bare_metal_health_conf,
    health_timeout,
)
from gpucluster.render.templating import header, render_template
from gpucluster.slurm.accounts import desired_associations
from gpucluster.slurm.containers import render_oci
from gpucluster.slurm.gpus import gres_lines, per_gpu_defaults
from gpucluster.slurm.restapi import controller_key_path
from gpucluster.slurm.settings import (
    POWER_SAVE_KEYS,
    TIMEOUT_KEYS,
    job_acct_gather,
    priority_lines,
    prolog_flags,
    slurmctld_parameters,
    slurmd_parameters,
)

# Slurm's SlurmctldPort when slurm.conf names none (and gpucluster's default).
DEFAULT_SLURMCTLD_PORT = 6817

# Topology names in topology.yaml. Slurm on Kubernetes places each dynamic node with its Topology=
# option, `<topology>:<unit>` (gpucluster.k8s.objects.slinky_topology_spec), which names these.
TREE_TOPOLOGY = "fabric-tree"
BLOCK_TOPOLOGY = "nvlink-blocks"

# What slurmctld sends a configless slurmd (Slurm 22.05, src/slurmctld/proc_req.c
# slurmd_config_files): never Prolog, Epilog or HealthCheckProgram scripts, nor our healthcheck.conf.
CONFIGLESS_SERVED = (
    "slurm.conf", "acct_gather.conf", "cgroup.conf", "cli_filter.lua", "ext_sensors.conf",
    "gres.conf", "helpers.conf", "job_container.conf", "knl_cray.conf", "mpi.conf", "oci.conf",
    "plugstack.conf", "topology.conf",
)  # fmt: skip
# Every file render_slurm may install in /etc/slurm (accounts.yaml stays with slurm_accounts).
SLURM_FILES = (
    "slurm.conf", "cgroup.conf", "plugstack.conf", "gres.conf", "topology.conf", "topology.yaml", HEALTH_CONF,
    "oci.conf",
)  # fmt: skip


@dataclass(frozen=True)
class NodeLine:
    hosts: str
    type_name: str
    node_type: NodeType  # with the overrides of the hosts' cluster.nodes entry
    first: str  # the first host, for the order of the lines
    state: str | None = None


def topology_kind(cluster: Cluster) -> str | None:
    """`tree`, `block` or None: the default topology Slurm should use for these hosts."""
    present = {"block": bool(cluster.blocks), "tree": bool(cluster.switches)}
    chosen = cluster.spec.fabric.default
    if chosen != "auto" and present[chosen]:
        return chosen
    return next((kind for kind in ("block", "tree") if present[kind]), None)


def uses_topology_yaml(cluster: Cluster) -> bool:
    return cluster.release.topology_yaml and topology_kind(cluster) is not None


def block_sizes(cluster: Cluster) -> list[int]:
    sizes = cluster.spec.fabric.block_sizes
    if sizes:
        return list(sizes)
    return [min(len(hosts) for hosts in cluster.blocks.values())] if cluster.blocks else []


def configless_served(cluster: Cluster) -> list[str]:
    """The files of SLURM_FILES that slurmctld serves to a configless slurmd of this release."""
    served = (
        [*CONFIGLESS_SERVED, "topology.yaml"]
        if configless_serves_topology_yaml(cluster.version)
        else CONFIGLESS_SERVED
    )
    return [name for name in SLURM_FILES if name in served]


def conf_server(cluster: Cluster) -> str:
    """slurmd's `--conf-server` value: the controllers in priority order, with SlurmctldPort where
    it is not Slurm's default (the first port of a range)."""
    port = str(cluster.spec.slurm.daemons.slurmctld_port).split("-")[0]
    suffix = "" if port == str(DEFAULT_SLURMCTLD_PORT) else f":{port}"
    return ",".join(f"{host}{suffix}" for host in cluster.spec.slurm.controller)


def node_lines(cluster: Cluster) -> list[NodeLine]:
    """One NodeName line per node type, and per set of settings or state that cluster.nodes
    entries give some of its hosts, in the order of their first hosts."""
    lines: list[NodeLine] = []
    kinds: dict[int, tuple[str, str | None]] = {}  # entry -> what its hosts' line depends on
    for entry in set(cluster.entry_of.values()):
        group = cluster.spec.nodes[entry]
        kinds[entry] = (repr(sorted(group.overrides.items())), group.state)
    for type_name, hosts in cluster.hosts_by_type.items():
        by_kind: dict[tuple[str, str | None] | None, tuple[int | None, list[str]]] = {}
        for host in hosts:
            index = cluster.entry_of.get(host)
            kind = None if index is None else kinds[index]
            by_kind.setdefault(kind, (index, []))[1].append(host)
        for index, members in by_kind.values():
            node_type = cluster.spec.node_types[type_name]
            state = None
            if index is not None:
                node_type = cluster.overridden_types.get(index, node_type)
                state = cluster.spec.nodes[index].state
            lines.append(NodeLine(compress(members), type_name, node_type, members[0], state))
    return sorted(lines, key=lambda line: numeric_sort_key(line.first))


def node_options(line: NodeLine) -> list[tuple[str, object]]:
    """The options of a NodeName line after its names, in slurm.conf's order."""
    t = line.node_type
    options: list[tuple[str, object]] = [("CPUs", t.total_cpus)]
    if t.layout:
        options += [
            ("SocketsPerBoard", t.sockets),
            ("CoresPerSocket", t.cores_per_socket),
            ("ThreadsPerCore", t.threads_per_core),
        ]
    elif t.threads_per_core != 1:
        options.append(("ThreadsPerCore", t.threads_per_core))
    if t.memory_mb is not None:
        options.append(("RealMemory", t.memory_mb))
    if t.gpus:
        options.append(("Gres", gres_of(t)))
    if t.features:
        options.append(("Feature", ",".join(t.features)))
    if t.weight and t.weight != 1:  # 1: Slurm's own
        options.append(("Weight", t.weight))
    for key, value in (
        ("TmpDisk", t.tmp_disk_mb),
        ("MemSpecLimit", t.mem_spec_limit_mb),
        ("CoreSpecCount", t.core_spec_count),
        ("CpuSpecList", t.cpu_spec_list),
    ):
        if value is not None:
            options.append((key, value))
    options += sorted(t.extra.items())
    options.append(("State", (line.state or "unknown").upper()))
    return options


def gres_of(node_type: NodeType) -> str:
    gpus = node_type.gpus
    assert gpus is not None
    return f"gpu:{gpus.model}:{gpus.count}" if gpus.model else f"gpu:{gpus.count}"


def _yes(value: bool) -> str:
    return "YES" if value else "NO"


def partition_options(
    cluster: Cluster, p: Partition, hosts: str, cpus_per_gpu: int | None, memory_per_gpu: int | None
) -> list[tuple[str, object]]:
    """The options of a PartitionName line after its name, in slurm.conf's order."""
    release = cluster.release
    options: list[tuple[str, object]] = [
        ("Nodes", hosts),
        ("Default", _yes(p.default)),
        ("MaxTime", p.max_time),
    ]
    if p.default_time:
        options.append(("DefaultTime", p.default_time))
    accounts = [*p.tenants, *p.allow_accounts]
    if accounts:
        options.append(("AllowAccounts", ",".join(accounts)))
    if p.exclusive:
        options.append(("Exclusive", "NODE") if release.exclusive_key else ("OverSubscribe", "EXCLUSIVE"))
    elif p.over_subscribe:
        options.append(("OverSubscribe", p.over_subscribe))
    if p.priority_tier is not None:
        options.append(("PriorityTier", p.priority_tier))
    if cpus_per_gpu:
        options.append(("DefCpuPerGPU", cpus_per_gpu))
    if memory_per_gpu:
        options.append(("DefMemPerGPU", memory_per_gpu))
    for key, values in (
        ("DenyAccounts", p.deny_accounts),
        ("AllowGroups", p.allow_groups),
        ("AllowQos", p.allow_qos),
        ("DenyQos", p.deny_qos),
        ("PreemptMode", p.preempt_mode),
    ):
        if values:
            options.append((key, ",".join(values)))
    for key, value in (
        ("QOS", p.qos),
        ("GraceTime", p.grace_time),
        ("DefMemPerCPU", p.def_mem_per_cpu_mb),
        ("MaxMemPerCPU", p.max_mem_per_cpu_mb),
        ("DefMemPerNode", p.def_mem_per_node_mb),
        ("MaxMemPerNode", p.max_mem_per_node_mb),
        ("MaxNodes", p.max_nodes),
        ("MinNodes", p.min_nodes),
        ("MaxCPUsPerNode", p.max_cpus_per_node),
        ("TRESBillingWeights", p.tres_billing_weights),
        ("SuspendTime", p.suspend_time),
        ("SuspendTimeout", p.suspend_timeout),
        ("ResumeTimeout", p.resume_timeout),
        ("PriorityJobFactor", p.priority_job_factor),
    ):
        if value is not None:
            options.append((key, value))
    for key, flag in (
        ("ExclusiveUser", p.exclusive_user),
        ("Hidden", p.hidden),
        ("PowerDownOnIdle", p.power_down_on_idle),
    ):
        if flag:
            options.append((key, "YES"))
    options += sorted(p.extra.items())
    options.append(("State", p.state))
    return options


Line = tuple[str, object]  # (key, value); key "#" for a comment line


def named_hosts(cluster: Cluster, name: str) -> list[str]:
    """The hosts an inventory name stands for: a group's members, or the host itself."""
    inventory = cluster.inventory
    if name in inventory.group_hosts or name in inventory.group_children:
        return inventory.members(name)
    return [name]


def _listed(key: str, values: Sequence[str]) -> list[Line]:
    return [(key, ",".join(values))] if values else []


def _core_section(cluster: Cluster, has_gpus: bool, topology: str | None) -> list[Line]:
    spec = cluster.spec
    slurm = spec.slurm
    daemons = slurm.daemons
    lines: list[Line] = [("#", f"Target Slurm {slurm.version}."), ("ClusterName", spec.name)]
    lines += [("SlurmctldHost", host) for host in slurm.controller]
    lines += [
        ("AuthType", "auth/munge"),
        ("CredType", "cred/munge"),
        ("SlurmUser", "slurm"),
        ("SlurmctldPort", daemons.slurmctld_port),
        ("SlurmdPort", daemons.slurmd_port),
        ("StateSaveLocation", slurm.state_dir),
        ("SlurmdSpoolDir", daemons.spool_dir),
        ("SlurmctldPidFile", slurm.slurmctld_pid_file),
        ("SlurmdPidFile", daemons.slurmd_pid_file),
    ]
    if daemons.slurmctld_log_file:
        lines.append(("SlurmctldLogFile", daemons.slurmctld_log_file))
    if daemons.slurmd_log_file:
        lines.append(("SlurmdLogFile", daemons.slurmd_log_file))
    if daemons.slurmctld_debug:
        lines.append(("SlurmctldDebug", daemons.slurmctld_debug))
    if daemons.slurmd_debug:
        lines.append(("SlurmdDebug", daemons.slurmd_debug))
    lines += _listed("DebugFlags", daemons.debug_flags)
    lines += [
        ("MpiDefault", slurm.mpi_default),
        ("MailProg", slurm.mail_prog),
        ("ReturnToService", slurm.return_to_service),
        ("SchedulerType", f"sched/{slurm.scheduler_type}"),
    ]
    lines += _listed("SchedulerParameters", slurm.scheduler_parameters)
    lines.append(("SelectType", f"select/{slurm.select_type}"))
    lines += _listed("SelectTypeParameters", slurm.select_type_parameters)
    preemption = slurm.preemption
    if preemption is not None:
        lines.append(("PreemptType", f"preempt/{preemption.type}"))
        lines += _listed("PreemptMode", preemption.mode)
        if preemption.exempt_time is not None:
            lines.append(("PreemptExemptTime", preemption.exempt_time))
        lines += _listed("PreemptParameters", preemption.parameters)
    lines.append(("ProctrackType", f"proctrack/{slurm.proctrack}"))
    plugins = [name for name in slurm.task_plugins if name != "none" or cluster.release.none_plugins]
    lines += _listed("TaskPlugin", [f"task/{name}" for name in plugins])
    gather = job_acct_gather(spec)
    if gather != "none" or cluster.release.none_plugins:
        lines.append(("JobAcctGatherType", f"jobacct_gather/{gather}"))
    if slurm.propagate_resource_limits is not None:
        lines.append(("PropagateResourceLimits", ",".join(slurm.propagate_resource_limits)))
    lines += _listed("PropagateResourceLimitsExcept", slurm.propagate_resource_limits_except)
    flags = prolog_flags(spec)
    if flags:
        if slurm.node_ssh:
            lines.append(
                (
                    "#",
                    'Every job starts with an "extern" step on its nodes; pam_slurm_adopt puts ssh sessions there',
                )
            )
        lines.append(("PrologFlags", ",".join(flags)))
    lines += [("Prolog", program) for program in slurm.prolog]
    lines += [("Epilog", program) for program in slurm.epilog]
    lines += _listed("SlurmdParameters", slurmd_parameters(spec))
    lines += _listed("SlurmctldParameters", slurmctld_parameters(spec))
    if has_gpus:
        lines.append(("GresTypes", "gpu"))
    if topology and not uses_topology_yaml(cluster):
        lines.append(("TopologyPlugin", f"topology/{topology}"))
    return lines


def _accounting_section(cluster: Cluster, has_gpus: bool) -> list[Line]:
    spec = cluster.spec
    accounting = spec.slurm.accounting
    priority = priority_lines(spec)
    lines: list[Line] = []
    if accounting is not None:
        comment = "Accounting (slurmdbd) and multifactor priority" if priority else "Accounting (slurmdbd)"
        lines += [
            ("#", comment),
            ("AccountingStorageType", "accounting_storage/slurmdbd"),
            ("AccountingStorageHost", accounting.host),
            ("AccountingStoragePort", accounting.port),
        ]
        tres = accounting.tres if accounting.tres is not None else (["gres/gpu"] if has_gpus else [])
        lines += _listed("AccountingStorageTRES", tres)
        lines += _listed("AccountingStorageEnforce", list(accounting.enforce))
    elif priority:
        lines.append(("#", "Job priority (cluster.slurm.priority)"))
    return lines + list(priority)


def _health_section(cluster: Cluster) -> list[Line]:
    health = cluster.spec.slurm.health
    if health is None:
        return []
    lines: list[Line] = [
        ("#", "GPU health checks (cluster.slurm.health): a failing node is drained with a reason starting"),
        ("#", '"[health]" and resumed once healthy; what each node must have is in healthcheck.conf'),
        ("HealthCheckProgram", HEALTH_PROGRAM),
        ("HealthCheckInterval", health.interval),
        ("HealthCheckNodeState", ",".join(health.node_state)),
    ]
    if cluster.release.health_check_timeout:
        lines.append(("HealthCheckTimeout", health_timeout(cluster, health)))
    if health.prolog:
        lines.append(("Prolog", HEALTH_PROGRAM))
    if cluster.spec.gate is not None:
        lines += [
            ("#", "The return-to-service gate (cluster.gate): `scontrol reboot` puts the node in the gate"),
            ("#", "(a reservation of its own and a [gate] drain) before the host reboots"),
            ("RebootProgram", REBOOT_PROGRAM),
        ]
    return lines


def _rest_api_section(cluster: Cluster) -> list[Line]:
    slurm = cluster.spec.slurm
    if slurm.rest_api is None:
        return []
    return [
        (
            "#",
            "REST API (cluster.slurm.rest_api): slurmctld also accepts the JWT tokens of `scontrol token`;",
        ),
        ("#", "the slurm_restd role makes the key once (owner slurm, mode 0600)"),
        ("AuthAltTypes", "auth/jwt"),
        ("AuthAltParameters", f"jwt_key={controller_key_path(slurm)}"),
    ]


def _power_save_section(cluster: Cluster) -> list[Line]:
    power = cluster.spec.slurm.power_save
    if power is None:
        return []
    lines: list[Line] = [("#", "Power saving (cluster.slurm.power_save; cloud nodes: State=CLOUD)")]
    for field, key in POWER_SAVE_KEYS.items():
        value = getattr(power, field)
        if value is not None:
            lines.append((key, value))
    if power.exclude_nodes:
        hosts = [h for name in power.exclude_nodes for h in named_hosts(cluster, name)]
        lines.append(("SuspendExcNodes", compress(hosts)))
    lines += _listed("SuspendExcParts", power.exclude_partitions)
    lines += _listed("SuspendExcStates", list(power.exclude_states))
    return lines


def _timeouts_section(cluster: Cluster) -> list[Line]:
    timeouts = cluster.spec.slurm.timeouts
    lines: list[Line] = [
        (key, getattr(timeouts, field))
        for field, key in TIMEOUT_KEYS.items()
        if getattr(timeouts, field) is not None
    ]
    return [("#", "Timers (cluster.slurm.timeouts)"), *lines] if lines else []


def _extra_section(cluster: Cluster) -> list[Line]:
    extra = cluster.spec.slurm.extra
    if not extra:
        return []
    return [("#", "Site settings (cluster.slurm.extra)"), *sorted(extra.items())]


def conf_sections(
    cluster: Cluster, has_gpus: bool, topology: str | None, layer_sections: Sequence[Sequence[Line]] = ()
) -> list[list[Line]]:
    """slurm.conf's global settings, in sections (a blank line between two), before the nodes; the
    layers' sections (gpucluster.layers composes them) before the site's own settings."""
    sections = [
        _core_section(cluster, has_gpus, topology),
        _accounting_section(cluster, has_gpus),
        _health_section(cluster),
        _rest_api_section(cluster),
        _power_save_section(cluster),
        _timeouts_section(cluster),
        *[list(section) for section in layer_sections],
        _extra_section(cluster),
    ]
    return [section for section in sections if section]


def _context(cluster: Cluster, layer_sections: Sequence[Sequence[Line]] = ()) -> dict[str, object]:
    slurm = cluster.spec.slurm
    lines = node_lines(cluster)
    has_gpus = any(line.node_type.gpus for line in lines)
    topology = topology_kind(cluster)
    return {
        "header": header(cluster.name),
        "cluster": cluster,
        "spec": cluster.spec,
        "slurm": slurm,
        "sections": conf_sections(cluster, has_gpus, topology, layer_sections),
        "node_lines": [(line, node_options(line)) for line in lines],
        "partitions": [
            (
                p,
                partition_options(
                    cluster, p, compress(cluster.partitions[p.name]), *per_gpu_defaults(cluster, p)
                ),
            )
            for p in cluster.spec.partitions
            if p.name in cluster.partitions
        ],
        "gres_lines": gres_lines,
        "topology": topology,
        "topology_yaml": uses_topology_yaml(cluster),
        "switches": [(s.name, compress(s.switches), compress(s.nodes)) for s in cluster.switches],
        "blocks": [(name, compress(hosts)) for name, hosts in sorted(cluster.blocks.items())],
        "block_sizes": block_sizes(cluster),
        "tree_topology": TREE_TOPOLOGY,
        "block_topology": BLOCK_TOPOLOGY,
        "dynamic_nodes": False,
        "has_gpus": has_gpus,
        "release": cluster.release,
        "pyxis": cluster.spec.slurm.containers.pyxis if cluster.spec.slurm.containers else None,
    }


def render_topology_yaml(cluster: Cluster, dynamic_nodes: bool = False) -> str | None:
    """topology.yaml (Slurm >= 25.05 format) whatever the target version.

    With `dynamic_nodes` (Slurm on Kubernetes) it defines the topologies - switch tree with its
    children, blocks with block_sizes - and names no node. Slinky's slurmd pods are Slurm dynamic
    nodes called `<nodeset>-<ordinal>`, never the inventory host names, so a `nodes:` list of hosts
    would name nodes that do not exist in that Slurm. Slurm documents the other way for dynamic nodes
    (dynamic_nodes.html, "Dynamic Nodes + Topology"): each node joins topologies defined in
    topology.yaml through its `Topology=<topology>:<unit>,...` node option (Slurm 25.05+), and
    Slinky's operator sets it from the Kubernetes node annotation `topology.slinky.slurm.net/spec`
    (gpucluster.k8s.objects.slinky_topology_spec), which names the leaf switch and the block defined
    here. Slurm accepts such definitions (topology/tree switch_record.c, topology/block block_record.c
    of 25.11): a switch with neither nodes nor children is an empty leaf
    switch, the unit of a tree must be a leaf, and blocks may start empty when block_sizes is set
    (always rendered here; the smallest block otherwise).
    """
    context = _context(cluster)
    if context["topology"] is None:
        return None
    if dynamic_nodes:
        context["dynamic_nodes"] = True
        context["switches"] = [(s.name, compress(s.switches), "") for s in cluster.switches]
        context["blocks"] = [(name, "") for name in sorted(cluster.blocks)]
    return render_template("slurm/topology.yaml.j2", **context)


def render_accounts(cluster: Cluster) -> str:
    """The associations the slurm_accounts role makes true (YAML, sorted)."""
    return header(cluster.name) + "\n" + yamlout.dump(desired_associations(cluster), width=80)


def render_slurm(cluster: Cluster, layer_sections: Sequence[Sequence[Line]] = ()) -> dict[str, str]:
    """Bare-metal Slurm's files, naming only the hosts it owns; none when it owns no host.
    `layer_sections`: the slurm.conf lines the layers add (gpucluster.layers.renderers)."""
    cluster = cluster.owned_by(Owner.SLURM)
    if not cluster.hosts:
        return {}
    context = _context(cluster, layer_sections)
    files = {
        "slurm/accounts.yaml": render_accounts(cluster),
        "slurm/slurm.conf": render_template("slurm/slurm.conf.j2", **context),
        "slurm/cgroup.conf": render_template("slurm/cgroup.conf.j2", **context),
        "slurm/plugstack.conf": render_template("slurm/plugstack.conf.j2", **context),
    }
    files.update(render_oci(cluster))
    if context["has_gpus"]:
        files["slurm/gres.conf"] = render_template("slurm/gres.conf.j2", **context)
    health = bare_metal_health_conf(cluster)
    if health is not None:
        files[f"slurm/{HEALTH_CONF}"] = health
    if context["topology_yaml"]:
        files["slurm/topology.yaml"] = render_template("slurm/topology.yaml.j2", **context)
    elif context["topology"]:
        files["slurm/topology.conf"] = render_template("slurm/topology.conf.j2", **context)
    return files
