"""Checks of power saving with gpucluster's programs (cluster.nodes[].power): what cannot work is
refused before anything is rendered. A host that serves the others (controller, login, accounting,
REST API, NFS server) is never power-saved; a power-saved node must have time to boot within
ResumeTimeout; a cloud group needs its instance type and a template; the site's own power programs
and gpucluster's cannot both drive Slurm."""

from __future__ import annotations

from gpucluster.model.base import Owner
from gpucluster.model.powered import PowerGroup, power_groups, power_timers, resume_timeout_of
from gpucluster.resolve import Resolution

# Clouds whose template the burst stack (stacks/burst) makes; on the others the site names one.
STACK_TEMPLATES = ("aws", "gcp")


def serving_hosts(r: Resolution) -> dict[str, str]:
    """Hosts the cluster needs up all the time -> what they serve."""
    slurm = r.spec.slurm
    serving = {host: "a Slurm controller" for host in slurm.controller}
    serving.update({host: "a login node" for host in slurm.login})
    if slurm.accounting is not None:
        serving[slurm.accounting.host] = "the accounting host (slurmdbd)"
    if slurm.rest_api is not None:
        serving[slurm.rest_api.host] = "the REST API host (slurmrestd)"
    for fs in r.spec.storage:
        if fs.nfs_server is not None:
            serving[fs.nfs_server.host] = f"the NFS server of `{fs.name}`"
    return serving


def check_power(r: Resolution) -> None:
    groups = power_groups(r.cluster)
    if not groups:
        return
    power = r.spec.slurm.power_save
    if power is not None:
        for field in ("suspend_program", "resume_program", "resume_fail_program"):
            if getattr(power, field) is not None:
                r.fail(
                    ["slurm", "power_save", field],
                    f"cluster.nodes[{groups[0].index}].power makes gpucluster's programs Slurm's "
                    "power programs: remove the site's here (one program drives each action)",
                )
    serving = serving_hosts(r)
    for group in groups:
        _check_group(r, group, serving)
    _check_resume_timeouts(r, groups)


def _check_group(r: Resolution, group: PowerGroup, serving: dict[str, str]) -> None:
    where: list[str | int] = ["nodes", group.index, "power"]
    entry = r.spec.nodes[group.index]
    if entry.state is not None:
        r.fail(
            ["nodes", group.index, "state"],
            f"`state: {entry.state}` and `power` both say how Slurm sees these hosts: a power kind "
            "`cloud` group is State=CLOUD already; remove `state`",
        )
    for host in [h for h, index in r.cluster.entry_of.items() if index == group.index]:
        if host in serving:
            r.fail(
                [*where, "kind"],
                f"{host} is {serving[host]}: it must stay on, so it cannot be power-saved "
                "(move it to a group of its own without `power`)",
            )
        owner = r.cluster.owner_of.get(host, Owner.SLURM)
        if owner != Owner.SLURM:
            r.fail(
                [*where, "kind"],
                f"{host} is owned by {owner}: power saving is Slurm's (slurmctld powers nodes on and "
                "off); Kubernetes nodes are scaled by the cloud's autoscaler",
            )
    cloud = group.power.cloud
    if cloud is None:
        return
    type_name = entry.type
    node_type = r.spec.node_types.get(type_name)
    if node_type is not None and not node_type.instance_type:
        r.fail(
            ["node_types", type_name, "instance_type"],
            f"cluster.nodes[{group.index}] creates {cloud.provider} instances of node type "
            f"`{type_name}`: set its instance_type (e.g. p5.48xlarge, a3-highgpu-8g)",
        )
    if cloud.template is None and cloud.provider not in STACK_TEMPLATES:
        r.fail(
            [*where, "cloud", "template"],
            f"a {cloud.provider} cloud group needs a template to create its nodes from: the burst "
            f"stack makes them on {' and '.join(STACK_TEMPLATES)} only; name the site's here",
        )
    if cloud.provider == "gcp" and (cloud.zone is None or cloud.project is None):
        r.fail([*where, "cloud"], "GCP creates instances in a project and a zone: set `project` and `zone`")
    if cloud.provider in ("azure", "nebius") and cloud.project is None:
        what = "resource group" if cloud.provider == "azure" else "project id (`project-...`)"
        r.fail([*where, "cloud", "project"], f"{cloud.provider} creates instances in a {what}: set `project`")


def _check_resume_timeouts(r: Resolution, groups: list[PowerGroup]) -> None:
    """Slurm sets a node DOWN and requeues its job when it has not registered within ResumeTimeout:
    a timeout shorter than the boot would fail every power-on."""
    cluster = r.cluster
    timers = power_timers(cluster)
    for group in groups:
        boot = group.power.effective_boot_time
        short = [h for h in group.hosts if resume_timeout_of(cluster, h) <= boot]
        if not short:
            continue
        timeout = resume_timeout_of(cluster, short[0])
        partition = next(
            (
                p.name
                for p in r.spec.partitions
                if p.resume_timeout == timeout and short[0] in cluster.partitions.get(p.name, [])
            ),
            None,
        )
        where: list[str | int] = (
            [
                "partitions",
                next(i for i, p in enumerate(r.spec.partitions) if p.name == partition),
                "resume_timeout",
            ]
            if partition is not None
            else ["slurm", "power_save", "resume_timeout"]
        )
        source = f"partition `{partition}`'s" if partition else "the cluster's"
        if partition is None and timers.resume_timeout is None:
            source = "Slurm's default"
        r.fail(
            where,
            f"{source} ResumeTimeout ({timeout} s) does not cover the boot of cluster.nodes"
            f"[{group.index}] ({short[0]}: {boot} s from power-on to slurmd, power.boot_time): every "
            f"power-on would end DOWN; raise it above {boot} s (gpucluster leaves {boot + 60} s when unset)",
        )


def check_power_release(r: Resolution) -> None:
    """Power-saving settings the target release does not have."""
    power = r.spec.slurm.power_save
    facts = r.spec.slurm.release
    if power is None:
        return
    if power.exclude_states and not facts.suspend_exc_states:
        r.fail(
            ["slurm", "power_save", "exclude_states"],
            f"SuspendExcStates is Slurm 23.02's; {facts.name} has none: use exclude_nodes or exclude_partitions",
        )
    if power.max_powered_nodes is not None and not facts.max_powered_nodes:
        r.fail(
            ["slurm", "power_save", "max_powered_nodes"],
            f"SlurmctldParameters=max_powered_nodes is Slurm 24.05's; {facts.name} has none",
        )
