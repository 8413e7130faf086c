"""What an inventory resolves to, for a person (`gpucluster show`) and for a program (`--json`).

The text has every section of the inventory: the Slurm settings and the facts of the target
release (with the releases gpucluster knows, and which of them real daemons prove here), node types,
partitions with their per-GPU defaults, the fabric, the fleet, tenants per scheduler with what each
number becomes, QOS, users and groups, storage, and the Kubernetes and cloud sections. The JSON is
the whole resolved model (gpucluster.resolved) with hosts as lists, the release's facts and the fleet.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from typing import Any

from gpucluster.console import Tree, table
from gpucluster.hostlists import compress
from gpucluster.layers import layer_summaries, layer_tables
from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster
from gpucluster.model.releases import RELEASES, Release, SlurmVersion
from gpucluster.model.sharing import effective_autodetect
from gpucluster.resolved import resolved_view
from gpucluster.slurm.accounts import fair_shares
from gpucluster.slurm.gpus import gpu_cores, per_gpu_defaults
from gpucluster.slurm.settings import priority_lines


def _gpus(cluster: Cluster, hosts: list[str]) -> int:
    return sum(g.count for h in hosts if (g := cluster.node_type(h).gpus))


def _compact(value: Any, limit: int | None = None) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list) and all(isinstance(v, str | int) for v in value):
        text = ", ".join(str(v) for v in value) or "-"
    elif isinstance(value, str | int | float):
        text = str(value)
    elif isinstance(value, dict) and all(not isinstance(v, dict | list) for v in value.values()):
        text = ", ".join(f"{k} {_compact(v)}" for k, v in value.items())
    else:
        text = json.dumps(value, separators=(", ", ": "))
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


# The narrowest a value is cut to on a narrow terminal.
MIN_VALUE_WIDTH = 30


def value_width(key_width: int) -> int | None:
    """How wide a value of a two-column table may be: what the terminal leaves beside the key
    column and the borders (`│ key │ value │`), never less than MIN_VALUE_WIDTH; None (whole
    values) where stdout is no terminal: a pipe or a file gets every value as it is."""
    if not sys.stdout.isatty():
        return None
    columns = shutil.get_terminal_size().columns
    return max(MIN_VALUE_WIDTH, columns - key_width - 7)


def settings_table(title: str, rows: list[tuple[str, Any]]) -> str:
    limit = value_width(max((len(key) for key, _ in rows), default=7))
    return table(title, ("setting", "value"), [[key, _compact(value, limit)] for key, value in rows])


def release_facts(release: Release) -> dict[str, Any]:
    """A release's facts as JSON values."""
    facts = dataclasses.asdict(release)
    since = release.configless_topology_yaml_since
    facts["configless_topology_yaml_since"] = str(since) if isinstance(since, SlurmVersion) else None
    facts["notes"] = list(release.notes)
    return facts


def release_section(cluster: Cluster) -> list[str]:
    target = cluster.release
    rows = [
        [
            name,
            "target" if name == target.name else "",
            "yes" if release.proven else "no",
            release.source,
        ]
        for name, release in RELEASES.items()
    ]
    known = table("Slurm releases gpucluster knows", ("release", "", "proven here", "facts from"), rows)
    pack = target.packaging
    facts = [
        ("Slurm version", str(cluster.version)),
        ("proven by real daemons", "yes" if target.proven else "no: rendered from Slurm's documentation, never run here"),
        ("packages", f"Debian {pack.debian_suite} ({pack.debian_version})" if pack.debian_suite else "a site repository (cluster.slurm.packages)"),
        ("nodes added or removed", "scontrol reconfigure" if target.reconfigure_node_changes else "restart slurmctld, then every slurmd"),
        ("reconfigure", "slurmctld re-executes; bad files are refused, the old ones kept" if target.reconfigure_reexec else "a bad file makes the daemons exit"),
        ("reads state and database of", ", ".join(target.upgrades_from)),
        ("topology", "topology.yaml" if target.topology_yaml else "topology.conf"),
        ("NVLink blocks", "BlockSizes" if target.block_sizes else "BlockLevels only" if target.block_topology else "no"),
        ("login nodes in configless mode", "sackd" if target.sackd else "local copies of the files"),
        ("REST API", f"{', '.join(target.rest_api.plugins)} {target.rest_api.data_parser or ''} (URLs /slurm/{target.rest_api.url_version}/)"),
        ("HealthCheckNodeState values", list(target.health_node_states)),
        ("health check killed after", f"{target.health_check_kill_after} s" + (" (HealthCheckTimeout)" if target.health_check_timeout else "")),
        ("exclusive partitions", "Exclusive=NODE" if target.exclusive_key else "OverSubscribe=EXCLUSIVE"),
        ("gres.conf AutoDetect", "nvml, nvidia" if target.autodetect_nvidia else "nvml"),
        ("MPI plugins packaged", "pmix, pmi2" if pack.pmix else "pmi2, cray_shasta (no pmix)"),
        ("slurmctld pid file", pack.slurmctld_pid_file),
        ("daemons run as", "slurm" if pack.daemons_run_as_slurm else "root"),
        *(("note", note) for note in target.notes),
    ]  # fmt: skip
    return [known, settings_table(f"Target release: Slurm {target.name}", facts)]


def slurm_section(cluster: Cluster) -> str:
    slurm = cluster.spec.slurm
    accounting = slurm.accounting
    rest = slurm.rest_api
    health = slurm.health
    rows: list[tuple[str, Any]] = [
        ("controllers", slurm.controller),
        ("state save location", slurm.state_dir),
        ("accounting", f"slurmdbd on {accounting.host}:{accounting.port}, enforce {','.join(accounting.enforce)}" if accounting else None),
        ("login hosts", slurm.login),
        ("configless", slurm.configless),
        ("REST API", f"http://{rest.host}:{rest.port}/slurm/{cluster.release.rest_api.url_version}/ (JWT)" if rest else None),
        ("priority", dict(priority_lines(cluster.spec)) or None),
        ("health checks", f"every {health.interval} s in {','.join(health.node_state)}; heavy ones in {','.join(health.heavy_node_state)}; prolog {'on' if health.prolog else 'off'}" if health else None),
        ("node ssh", ("admins: " + (", ".join(slurm.node_ssh.admins) or "root only")) if slurm.node_ssh else None),
        ("MPI default", slurm.mpi_default),
        ("proctrack / task plugins", f"{slurm.proctrack} / {','.join(slurm.task_plugins)}"),
        ("cgroup", slurm.cgroup.model_dump()),
        ("package source", slurm.packages.repository.model_dump() if slurm.packages.repository else "the hosts' apt sources"),
        ("extra slurm.conf keys", slurm.extra or None),
    ]  # fmt: skip
    return settings_table("Slurm", rows)


def node_type_table(cluster: Cluster) -> str:
    types = []
    for name, hosts in sorted(cluster.hosts_by_type.items()):
        t = cluster.spec.node_types[name]
        gpus = t.gpus.label if t.gpus else "-"
        cores = gpu_cores(t)
        if t.gpus is None:
            affinity = "-"
        elif effective_autodetect(t.gpus.autodetect, t.gpus.sharing) != "off":
            affinity = f"AutoDetect={effective_autodetect(t.gpus.autodetect, t.gpus.sharing)}"
        else:
            affinity = " ".join(dict.fromkeys(cores)) if cores else "none"
        types.append(
            [
                name,
                str(len(hosts)),
                compress(hosts),
                str(t.total_cpus),
                str(t.memory_mb or "-"),
                gpus,
                affinity,
            ]
        )
    columns = ("type", "nodes", "hosts", "CPUs", "memory MiB", "GPUs/node", "GPU cores")
    return table("Node types", columns, types)


def sharing_table(cluster: Cluster) -> str | None:
    """How each node type's GPUs are shared, and what each scheduler makes of one of its nodes:
    Slurm's Gres=, Kubernetes' extended resources (gpus.sharing; gpucluster.model.sharing)."""
    from gpucluster.model.sharing import describe, kubernetes_units

    rows = []
    strategy = "mixed"
    if cluster.spec.kubernetes is not None:
        from gpucluster.k8s.model import kubernetes_of
        from gpucluster.k8s.owners import pods_view
        from gpucluster.k8s.sharing import mig_strategy

        k8s = kubernetes_of(cluster)
        assert k8s is not None
        strategy = mig_strategy(pods_view(cluster), k8s)
    for name, hosts in sorted(cluster.hosts_by_type.items()):
        gpus = cluster.spec.node_types[name].gpus
        if gpus is None or gpus.sharing is None:
            continue
        owners = sorted({cluster.owner_of[h].value for h in hosts})
        kube = kubernetes_units(gpus.count, gpus.sharing, strategy)
        rows.append(
            [
                name,
                describe(gpus.sharing, gpus.count),
                ", ".join(owners),
                gpus.gres().text,
                ", ".join(f"{r}: {n}" for r, n in kube.items()),
            ]
        )
    if not rows:
        return None
    columns = ("type", "sharing", "owners", "Slurm Gres= per node", "Kubernetes per node")
    return table("GPU sharing (gpus.sharing)", columns, rows)


def tenant_units_table(cluster: Cluster) -> str | None:
    """Each tenant's Slurm limit in the shared units of bare-metal Slurm's GPUs (GrpTRES)."""
    from gpucluster.slurm.sharing import grp_tres, node_kinds

    if Owner.SLURM not in cluster.owners:
        return None
    view = cluster.owned_by(Owner.SLURM)
    if all(set(k.units) == {"gres/gpu"} and k.units["gres/gpu"] == k.gpus for k in node_kinds(view)):
        return None
    rows = [
        [t.name, str(view.quota(t.name).effective_limit), grp_tres(view, t)] for t in cluster.spec.tenants
    ]
    return table("Tenants' Slurm limits in shared units", ("tenant", "GPU limit", "GrpTRES"), rows)


def partition_table(cluster: Cluster) -> str:
    partitions = []
    for p in cluster.spec.partitions:
        hosts = cluster.partitions.get(p.name, [])
        cpus, memory = per_gpu_defaults(cluster, p)
        partitions.append(
            [
                p.name,
                "yes" if p.default else "",
                str(len(hosts)),
                str(_gpus(cluster, hosts)),
                compress(hosts),
                p.max_time,
                "yes" if p.exclusive else "",
                f"{cpus or '-'} / {memory or '-'}",
                ", ".join(p.tenants) or "all",
            ]
        )
    columns = (
        "partition",
        "default",
        "nodes",
        "GPUs",
        "hosts",
        "max time",
        "exclusive",
        "per GPU CPUs / MiB",
        "tenants",
    )
    return table("Partitions", columns, partitions)


def gate_table(cluster: Cluster) -> str:
    """cluster.gate: the burn-in of each way back, each partition's slots, what each node type's
    burn-in compares against (the nodes in the gate now: `gpucluster verify`, `sinfo -R`)."""
    from gpucluster.model.gate import TRIGGERS
    from gpucluster.render.health import burn_in_of, burn_in_slots

    gate = cluster.spec.gate
    assert gate is not None
    rows = [
        [
            trigger,
            gate.levels.of(trigger),
            "-" if gate.levels.of(trigger) == "none" else f"{gate.time_limit.of(gate.levels.of(trigger))} s",
        ]
        for trigger in TRIGGERS
    ]
    text = table(
        f"Return-to-service gate: at most {gate.attempts} failed burn-in(s), then the node stays out",
        ("way back", "burn-in", "time bound"),
        rows,
    )
    slots = ", ".join(
        f"{p} {n} of {len(cluster.partitions[p])}" for p, n in burn_in_slots(cluster, gate).items()
    )
    declared = []
    for name in sorted(cluster.hosts_by_type):
        values = {k: v for k, v in burn_in_of(cluster.spec.node_types[name]).items() if v and v != "no"}
        declared.append([name, ", ".join(f"{k} {v}" for k, v in values.items())])
    return (
        text
        + f"\nnodes in burn-in at once per partition: {slots or '-'}\n"
        + table(
            "Burn-in per node type (undeclared checks are skipped, never passed)",
            ("type", "compared against"),
            declared,
        )
    )


def show(cluster: Cluster) -> str:
    """The text `gpucluster show` prints."""
    spec = cluster.spec
    target = cluster.release
    proven = "proven by real daemons" if target.proven else "facts from Slurm's documentation, not run here"
    parts = [f"{spec.name}  Slurm {spec.slurm.version} ({proven})", slurm_section(cluster)]
    parts += release_section(cluster)
    parts.append(node_type_table(cluster))
    parts += [t for t in (sharing_table(cluster), tenant_units_table(cluster)) if t]
    if spec.partitions:
        parts.append(partition_table(cluster))
    if cluster.switches:
        by_name = {s.name: s for s in cluster.switches}
        children = {c for s in cluster.switches for c in s.switches}
        fabric = Tree("Fabric tree")

        def add(node: Tree, name: str) -> None:
            switch = by_name[name]
            branch = node.add(
                f"{name}"
                + (f"  ({len(switch.nodes)} nodes: {compress(switch.nodes)})" if switch.nodes else "")
            )
            for child in switch.switches:
                add(branch, child)

        for root in sorted(set(by_name) - children):
            add(fabric, root)
        parts.append(fabric.render())
    if cluster.blocks:
        blocks = [
            [name, str(len(hosts)), str(_gpus(cluster, hosts)), compress(hosts)]
            for name, hosts in sorted(cluster.blocks.items())
        ]
        parts.append(table("NVLink blocks", ("block", "nodes", "GPUs", "hosts"), blocks))
    parts.append(fleet_table(cluster))
    if spec.gate is not None:
        parts.append(gate_table(cluster))
    parts += layer_tables(cluster)
    if spec.tenants:
        parts.append(tenant_table(cluster))
    if spec.qos:
        parts.append(qos_table(cluster))
    if spec.users:
        parts.append(user_table(cluster))
    if spec.groups:
        groups = [[g.name, str(g.gid)] for g in spec.groups]
        parts.append(table("Groups: one gid on every Slurm host", ("group", "gid"), groups))
    if spec.storage:
        parts.append(storage_table(cluster))
    for key, title in (("kubernetes", "Kubernetes"), ("cloud", "Cloud")):
        section = getattr(spec, key)
        if section is not None:
            settings = list(section.model_dump(mode="json").items())
            parts.append(settings_table(title, settings))
    return "\n".join(parts) + "\n"


def fleet(cluster: Cluster) -> dict[str, Any]:
    """Who owns what: per owner its nodes (hosts as a list), GPUs, partitions or queues; per tenant
    its numbers per scheduler."""
    owners = []
    for owner in cluster.owners:
        view = cluster.owned_by(owner)
        owners.append(
            {
                "owner": owner.value,
                "nodes": len(view.hosts),
                "hosts": list(view.hosts),
                "gpus": view.total_gpus,
                "partitions": sorted(view.partitions) if owner != Owner.KUBERNETES else [],
                "queues": sorted(t.name for t in cluster.spec.tenants if view.quota(t.name).effective_limit),
            }
        )
    tenants = {
        tenant.name: {
            owner.value: {"quota": gpus.quota, "limit": gpus.effective_limit}
            for owner, gpus in sorted(cluster.tenant_gpus.get(tenant.name, {}).items())
        }
        for tenant in cluster.spec.tenants
    }
    return {
        "cluster": cluster.name,
        "gpus": cluster.total_gpus,
        "owners": owners,
        "tenants": tenants,
        **layer_summaries(cluster),
    }


def as_json(cluster: Cluster) -> dict[str, Any]:
    """`gpucluster show --json`: the resolved model, the target release's facts, the fleet."""
    return {
        **resolved_view(cluster),
        "release": release_facts(cluster.release),
        "releases": {name: {"proven": r.proven, "source": r.source} for name, r in RELEASES.items()},
        # Each layer's own summary (Kubernetes: who schedules its GPU nodes), at the top level too.
        **layer_summaries(cluster),
        "fleet": fleet(cluster),
    }


def fleet_table(cluster: Cluster) -> str:
    rows = [
        [
            row["owner"],
            str(row["nodes"]),
            str(row["gpus"]),
            compress(row["hosts"]),
            ", ".join(row["partitions"]) or "-",
            ", ".join(row["queues"]) or "-",
        ]
        for row in fleet(cluster)["owners"]
    ]
    return table(
        f"Fleet: who schedules each node ({cluster.total_gpus} GPUs)",
        ("owner", "nodes", "GPUs", "hosts", "partitions", "tenants with GPUs there"),
        rows,
    )


def tenant_table(cluster: Cluster) -> str:
    owners = cluster.owners
    slurm = cluster.owned_by(Owner.SLURM) if Owner.SLURM in owners else None
    rows = []
    for tenant in cluster.spec.tenants:
        numbers = cluster.tenant_gpus.get(tenant.name, {})
        cells = [f"{g.quota} / {g.effective_limit}" if (g := numbers.get(o)) else "-" for o in owners]
        rows.append(
            [
                tenant.name,
                tenant.parent or "",
                str(tenant.fairshare),
                *cells,
                str(fair_shares(slurm, tenant)) if slurm else "-",
                ", ".join(tenant.users),
                ", ".join(tenant.qos),
            ]
        )
    return table(
        "Tenants: GPU quota / limit per scheduler (Slurm: shares = quota, GrpTRES = limit; Kueue: "
        "nominalQuota = quota, borrowingLimit = limit - quota, weight = fairshare)",
        ("tenant", "parent", "fairshare", *(o.value for o in owners), "Slurm shares", "users", "QOS"),
        rows,
    )


def qos_table(cluster: Cluster) -> str:
    rows = [
        [
            q.name,
            str(q.priority),
            _compact(q.max_gpus_per_user),
            _compact(q.max_gpus_per_job),
            _compact(q.grp_gpus),
            _compact(q.max_wall),
            _compact(q.preempt),
        ]
        for q in cluster.spec.qos
    ]
    columns = ("QOS", "priority", "GPUs per user", "GPUs per job", "GPUs in all", "max wall", "preempts")
    return table("QOS", columns, rows)


def storage_table(cluster: Cluster) -> str:
    rows = []
    for fs in cluster.spec.storage:
        if fs.nfs_server is not None:
            backing = f"NFS from {fs.nfs_server.host}:{fs.nfs_server.export}"
        elif fs.site_managed:
            backing = "site-managed"
        elif fs.source is not None:
            backing = f"{fs.type} {fs.source}"
        else:
            backing = "Kubernetes volume only"
        hosts = cluster.storage_hosts.get(fs.name, [])
        rows.append([fs.name, fs.mount, backing, "yes" if fs.home else "", compress(hosts) if hosts else "-"])
    return table("Shared storage", ("filesystem", "mount", "backed by", "home", "mounted by"), rows)


def user_table(cluster: Cluster) -> str:
    spec = cluster.spec
    gids = {g.name: g.gid for g in spec.groups} | {u.name: u.uid for u in spec.users if u.group is None}
    tenants_of: dict[str, list[str]] = {}
    for tenant in spec.tenants:
        for name in tenant.users:
            tenants_of.setdefault(name, []).append(tenant.name)
    rows = []
    for user in spec.users:
        tenants = tenants_of.get(user.name, [])
        gid = gids.get(user.primary_group)
        rows.append(
            [
                user.name,
                str(user.uid),
                f"{user.primary_group} ({gid})",
                ", ".join(user.groups) or "-",
                ", ".join(tenants) or "-",
                str(len(user.ssh_authorized_keys)),
            ]
        )
    return table(
        "Users: one uid and gid on every Slurm host",
        ("user", "uid", "group (gid)", "groups", "tenants", "SSH keys"),
        rows,
    )
