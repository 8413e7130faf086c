"""Shared GPUs in bare-metal Slurm (gpucluster.model.sharing declares them): each node's Gres=,
its gres.conf lines, GresTypes, the TRES accounted, the tenants' limits in shards, MPS shares and
MIG instances, and the checks of what the target release can do.

What Slurm does with each (gres.shtml, gres.conf(5), slurm.conf(5) at 24.11 and 26.05):
- MIG: every instance is a gres/gpu of its profile's type. Only AutoDetect=nvml finds them (the
  `nvidia` autodetection "doesn't detect MIGs"; a File= line cannot name an instance's
  capability files, which depend on the instance ids the driver gives). slurm.conf's type must be
  a substring of the profile NVML reports (`nvidia_h100_80gb_hbm3_1g.10gb`): the profile name is.
- shard, mps: the count in slurm.conf is the node's total. With File= GPUs, one gres.conf line
  per GPU gives each its share; with autodetection one Name= line spreads it evenly.
- DefCpuPerGPU and DefMemPerGPU apply to gres/gpu only (select/cons_tres gres_select_util.c):
  a shard or MPS job would otherwise take the node's whole memory, so a partition with such
  nodes gets DefMemPerCPU instead (the three memory defaults exclude each other).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucluster.model.sharing import (
    GpuSharing,
    NodeKind,
    mig_counts,
    tenant_units,
)

if TYPE_CHECKING:
    from gpucluster.model.checking import CheckContext
    from gpucluster.model.cluster import Cluster
    from gpucluster.model.spec import ClusterSpec, GpuQuota, NodeType, Tenant


def sharing_of(node_type: NodeType) -> GpuSharing | None:
    return node_type.gpus.sharing if node_type.gpus is not None else None


def node_gres(node_type: NodeType) -> str:
    """The Gres= value of a node of this type."""
    gpus = node_type.gpus
    assert gpus is not None
    return gpus.gres().text


def gres_unit_count(node_type: NodeType) -> int:
    """What Slurm counts as the node's GPUs (gres/gpu): its GPUs, or its MIG instances."""
    gpus = node_type.gpus
    assert gpus is not None
    if gpus.sharing is not None and gpus.sharing.mig is not None:
        return sum(mig_counts(gpus.sharing.mig, gpus.count).values())
    return gpus.count


def shares_unfenced(node_type: NodeType) -> bool:
    """Jobs on these nodes may ask for shards or MPS, which no per-GPU default sizes."""
    sharing = sharing_of(node_type)
    return sharing is not None and (sharing.shard is not None or sharing.mps is not None)


def shared_gres_lines(node_type: NodeType, devices: list[str] | None) -> list[str]:
    """gres.conf lines of the node's shards or MPS shares (after NodeName=): one per GPU device
    file when the devices are listed, else one spreading the node's total over its GPUs."""
    gpus = node_type.gpus
    assert gpus is not None
    sharing = gpus.sharing
    lines: list[str] = []
    if sharing is None:
        return lines
    for name, per_gpu in (("shard", sharing.shard), ("mps", sharing.mps)):
        if per_gpu is None:
            continue
        if devices:
            lines += [f"Name={name} Count={per_gpu} File={device}" for device in devices]
        else:
            lines.append(f"Name={name} Count={per_gpu * gpus.count}")
    return lines


def gres_types(cluster: Cluster) -> list[str]:
    """GresTypes of the Slurm view: gpu, then shard and mps where a node has them."""
    kinds = ["gpu"]
    sharings = [sharing_of(cluster.node_type(host)) for host in cluster.hosts]
    for kind in ("shard", "mps"):
        if any(s is not None and getattr(s, kind) is not None for s in sharings):
            kinds.append(kind)
    return kinds


def node_kinds(cluster: Cluster) -> list[NodeKind]:
    """The Slurm view's GPUs by kind (node type with its hosts' overrides), each with the TRES
    its nodes carry, in host order. Asked per tenant: computed once per cluster view."""
    return cluster.derived("slurm node kinds", lambda: _node_kinds(cluster))


def _node_kinds(cluster: Cluster) -> list[NodeKind]:
    kinds: dict[str, NodeKind] = {}
    # A host's GPUs follow from its node type and its cluster.nodes entry (the overrides).
    of_entry: dict[tuple[str, int | None], tuple[str, int, dict[str, int]] | None] = {}
    for host in cluster.hosts:
        which = (cluster.node_type_of[host], cluster.entry_of.get(host))
        if which not in of_entry:
            gpus = cluster.node_type(host).gpus
            if gpus is None:
                of_entry[which] = None
            else:
                tres = gpus.gres().tres(bool(gpus.sharing and gpus.sharing.mig))
                of_entry[which] = (f"{which[0]}:{sorted(tres.items())}", gpus.count, tres)
        found = of_entry[which]
        if found is None:
            continue
        key, count, tres = found
        known = kinds.get(key)
        units = {t: n + (known.units.get(t, 0) if known else 0) for t, n in tres.items()}
        kinds[key] = NodeKind(key, (known.gpus if known else 0) + count, units)
    return list(kinds.values())


def accounted_tres(cluster: Cluster) -> list[str]:
    """AccountingStorageTRES by default: gres/gpu, and the shared units the nodes carry."""
    found: list[str] = []
    for kind in node_kinds(cluster):
        found += [t for t in kind.units if t not in found]
    return sorted(found, key=lambda t: (t != "gres/gpu", t))


def unit_tres(unit: str) -> str:
    """A tenant's unit (`shard`, `mps`, `1g.10gb`) as Slurm's TRES."""
    return f"gres/{unit}" if unit in ("shard", "mps") else f"gres/gpu:{unit}"


def quota_tres(cluster: Cluster, quota: GpuQuota) -> dict[str, int]:
    """A limit (GPUs, and a tenant's own units) as the TRES of the Slurm view's shared units."""
    kinds = node_kinds(cluster)
    if not any(len(k.units) > 1 or k.units.get("gres/gpu", 0) != k.gpus for k in kinds):
        return {"gres/gpu": quota.effective_limit}
    own = {unit_tres(unit): n for unit, n in quota.units.items()}
    found = tenant_units(kinds, quota.effective_limit, own)
    return dict(sorted(found.items(), key=lambda item: (item[0] != "gres/gpu", item[0])))


def tenant_tres(cluster: Cluster, tenant: Tenant) -> dict[str, int]:
    """The tenant's Slurm limit as TRES: its GPU limit split over the node kinds by their GPUs,
    each share in that kind's units (gres/gpu counts MIG instances, so it grows with them); a
    unit the tenant numbers itself (gpus.slurm.units) keeps its number. Without shared GPUs:
    gres/gpu=<limit>, as always."""
    return quota_tres(cluster, cluster.quota(tenant.name))


def grp_tres(cluster: Cluster, tenant: Tenant) -> str:
    return ",".join(f"{tres}={count}" for tres, count in tenant_tres(cluster, tenant).items())


def check_sharing(ctx: CheckContext) -> None:
    """What bare-metal Slurm and Slurm on Kubernetes can do with the shared GPUs they own."""
    from gpucluster.model.base import Owner

    cluster = ctx.cluster
    release = cluster.release
    owners: dict[str, set[Owner]] = {}
    for host, owner in cluster.owner_of.items():
        owners.setdefault(cluster.node_type_of[host], set()).add(owner)
    for name, node_type in ctx.spec.node_types.items():
        sharing = sharing_of(node_type)
        if sharing is None:
            continue
        parts: list[str | int] = ["node_types", name, "gpus", "sharing"]
        slurm = owners.get(name, set()) & {Owner.SLURM, Owner.SLURM_ON_KUBERNETES}
        if sharing.mig is not None and sharing.shard is not None and slurm and not release.shard_on_mig:
            ctx.fail(
                [*parts, "shard"],
                f"Slurm {release.name} cannot shard a MIG instance (gres.shtml's sharding divides whole "
                "GPUs; no release documents shards of MIG devices): give the node type one of mig and shard",
            )
        unfenced = sharing.shard is not None or sharing.mps is not None
        if (unfenced or sharing.mig is not None) and slurm and ctx.spec.slurm.select_type != "cons_tres":
            ctx.fail(
                ["slurm", "select_type"],
                f"node type {name} shares its GPUs: gres/shard, gres/mps and typed MIG GPUs need "
                "select/cons_tres",
            )
        if sharing.mps is not None and Owner.SLURM_ON_KUBERNETES in owners.get(name, set()):
            ctx.fail(
                [*parts, "mps"],
                "Slurm on Kubernetes runs no gpucluster-mps in its slurmd pods (the MPS daemons of "
                "gres/mps): give this node type's hosts to bare-metal Slurm, or share them by shards",
            )
        if sharing.mig is not None and Owner.SLURM_ON_KUBERNETES in owners.get(name, set()):
            ctx.fail(
                [*parts, "mig"],
                "Slurm on Kubernetes finds its GPUs with AutoDetect=nvidia, which does not see MIG "
                "instances: give this node type's hosts to bare-metal Slurm or Kubernetes",
            )


# gpucluster-mps (gpucluster/programs/gpucluster_mps.py): the Prolog, Epilog and TaskProlog of
# nodes sharing GPUs by MPS, installed by the slurm_compute role; what each node does is in its
# configuration file beside slurm.conf (not served to configless nodes: they keep a copy).
MPS_PROGRAM = "/usr/local/sbin/gpucluster-mps"
MPS_CONF = "gpucluster-mps.conf"


def uses_mps(spec: ClusterSpec) -> bool:
    """Some node type, or the GPUs a cluster.nodes entry gives its hosts, share by MPS with
    gpucluster's daemons: slurm.conf runs gpucluster-mps."""
    given = [t.gpus for t in spec.node_types.values()] + [n.gpus for n in spec.nodes]
    return any(
        g is not None
        and g.sharing is not None
        and g.sharing.mps is not None
        and g.sharing.mps_daemon == "gpucluster"
        for g in given
    )


def mps_section(cluster: Cluster) -> list[tuple[str, object]]:
    if not uses_mps(cluster.spec):
        return []
    return [
        ("#", "CUDA MPS (gpus.sharing.mps): gpucluster-mps starts an MPS control daemon per GPU and tenant"),
        ("#", "for the jobs that ask for gres/mps, points their tasks at it, stops it after the last one"),
        ("Prolog", MPS_PROGRAM),
        ("Epilog", MPS_PROGRAM),
        ("TaskProlog", MPS_PROGRAM),
    ]


def render_mps_conf(cluster: Cluster, header: str) -> str | None:
    """gpucluster-mps.conf: a section per node type (and cluster.nodes entry) sharing by MPS."""
    from gpucluster.hostlists import compress

    sections: dict[str, tuple[list[str], bool]] = {}
    for host in cluster.hosts:
        node_type = cluster.node_type(host)
        sharing = sharing_of(node_type)
        if sharing is None or sharing.mps is None or sharing.mps_daemon != "gpucluster":
            continue
        name = cluster.node_type_of[host] + (
            "" if cluster.entry_of.get(host) is None else f"-{cluster.entry_of[host]}"
        )
        sections.setdefault(name, ([], sharing.mps_between_tenants))[0].append(host)
    if not sections and not uses_mps(cluster.spec):
        return None
    lines = [
        header,
        "# Read by gpucluster-mps (Prolog, Epilog, TaskProlog): on a node named by a section's `nodes`,",
        "# a job allocated gres/mps gets the MPS control daemon of its GPU and tenant (of its GPU for",
        "# every tenant with between_tenants = yes).",
    ]
    for name, (hosts, between) in sections.items():
        lines += [
            "",
            f"[{name}]",
            f"# {compress(hosts)}",
            f"nodes = {' '.join(hosts)}",
            f"between_tenants = {'yes' if between else 'no'}",
        ]
    return "\n".join(lines) + "\n"


def render_mig(cluster: Cluster) -> dict[str, str]:
    """The `mig/` folder: the MIG layouts the gpu_mig role applies on bare-metal Slurm's nodes
    (Kubernetes' are the GPU Operator's MIG manager's, from its ConfigMap).

    mig/hosts.yaml      host -> {layout: its layout's name (node type, or node type and cluster.nodes
                        entry), gres: its Gres= in slurm.conf (slurmctld gets it before slurmd restarts)}
    mig/<name>.json     {"gpus": {"<index>": {"<profile>": <count>}}}: what gpucluster-mig reads
                        (and a description: the generated header, JSON having no comments)
    """
    import json

    from gpucluster import yamlout
    from gpucluster.model.base import Owner
    from gpucluster.render.templating import header

    view = cluster.owned_by(Owner.SLURM)
    hosts: dict[str, dict[str, str]] = {}
    layouts: dict[str, str] = {}
    for host in view.hosts:
        gpus = view.node_type(host).gpus
        if gpus is None or gpus.sharing is None or gpus.sharing.mig is None:
            continue
        entry = view.entry_of.get(host)
        name = view.node_type_of[host] + (
            "" if entry is None or entry not in view.overridden_types else f"-{entry}"
        )
        hosts[host] = {"layout": name, "gres": node_gres(view.node_type(host))}
        per_gpu = {str(i): layout for i, layout in enumerate(gpus.sharing.mig.layouts(gpus.count))}
        doc = {"description": header(cluster.name, comment="").strip(), "gpus": per_gpu}
        layouts[name] = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if not hosts:
        return {}
    files = {f"mig/{name}.json": text for name, text in layouts.items()}
    files["mig/hosts.yaml"] = header(cluster.name) + "\n" + yamlout.dump(hosts, width=80)
    return files


def shares_gpus(cluster: Cluster) -> bool:
    """The Slurm view's GPUs make units beyond whole GPUs (shards, MPS, MIG instances)."""
    return any(len(k.units) > 1 or k.units.get("gres/gpu", 0) != k.gpus for k in node_kinds(cluster))
