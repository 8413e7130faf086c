"""What the inventory's Slurm settings mean in slurm.conf, decided once from the model (no hosts
needed): the list values gpucluster merges with what other settings need (PrologFlags, the
daemons' parameters), the priority keys and when they are written, the jobs' accounting plugin.
The renderer, the extra-key check (gpucluster.slurm.written) and `gpucluster show` read these."""

from __future__ import annotations

from gpucluster.model.powered import node_state
from gpucluster.model.spec import FAIRSHARE_PRIORITY, ClusterSpec, Priority
from gpucluster.slurm import keys

# Priority, Timeouts and PowerSave fields -> their slurm.conf keys, in the order slurm.conf lists
# them (the table of keys, gpucluster.slurm.keys).
PRIORITY_KEYS = {f: k for f, k in keys.under(f"{keys.S}.priority").items() if f != "type"}
TIMEOUT_KEYS = keys.under(f"{keys.S}.timeouts")
POWER_SAVE_KEYS = {
    f: k for f, k in keys.under(f"{keys.S}.power_save").items() if not f.startswith("exclude_")
}


def slurm_cluster_name(spec: ClusterSpec) -> str:
    """The cluster's name as Slurm knows it (sacctmgr, accounting): slurm.conf's ClusterName in
    lower case, which is what slurmctld makes of it."""
    return (spec.slurm.cluster_name or spec.name).lower()


def fair_share_priority(spec: ClusterSpec) -> bool:
    """Tenants share bare-metal Slurm by fair-share: accounting holds their associations."""
    return spec.slurm.accounting is not None and bool(spec.tenants)


def priority_written(spec: ClusterSpec) -> bool:
    return spec.slurm.priority is not None or fair_share_priority(spec)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "YES" if value else "NO"
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    return str(value)


def priority_lines(spec: ClusterSpec) -> list[tuple[str, str]]:
    """PriorityType and the weights, as written: the inventory's, and with fair-share tenants
    gpucluster's weights for what it leaves unset."""
    if not priority_written(spec):
        return []
    priority = spec.slurm.priority or Priority()
    lines = [("PriorityType", f"priority/{priority.type}")]
    fill = FAIRSHARE_PRIORITY if fair_share_priority(spec) and priority.type == "multifactor" else {}
    for field, key in PRIORITY_KEYS.items():
        value = getattr(priority, field)
        if value is None or value == []:
            value = fill.get(field)
        if value is not None:
            lines.append((key, _text(value)))
    return lines


def prolog_flags(spec: ClusterSpec) -> list[str]:
    """PrologFlags: the inventory's, and Contain where pam_slurm_adopt needs it (cluster.slurm.node_ssh)."""
    flags: list[str] = list(spec.slurm.prolog_flags)
    if spec.slurm.node_ssh is not None and "Contain" not in flags:
        flags.append("Contain")
    return flags


def slurmctld_parameters(spec: ClusterSpec) -> list[str]:
    """enable_configless first (cluster.slurm.configless), then what power saving needs, then the
    inventory's own."""
    slurm = spec.slurm
    values = (["enable_configless"] if slurm.configless else []) + power_parameters(spec)
    values += list(slurm.slurmctld_parameters)
    return list(dict.fromkeys(values))


def power_parameters(spec: ClusterSpec) -> list[str]:
    """SlurmctldParameters of power saving: CLOUD nodes' addresses from their registration where
    the release needs the flag for it, and the ceiling on powered-up nodes."""
    release = spec.slurm.release
    values = []
    if release.cloud_reg_addrs and any(node_state(entry) == "cloud" for entry in spec.nodes):
        values.append("cloud_reg_addrs")
    power = spec.slurm.power_save
    if power is not None and power.max_powered_nodes is not None:
        values.append(f"max_powered_nodes={power.max_powered_nodes}")
    return values


def scheduler_parameters(spec: ClusterSpec) -> list[str]:
    """The inventory's SchedulerParameters; with power-saved nodes, batch jobs whose nodes fail to
    resume are requeued even if they asked for no requeue (where the release can)."""
    values = list(spec.slurm.scheduler_parameters)
    saved = any(entry.power is not None and entry.power.saved for entry in spec.nodes)
    if saved and spec.slurm.release.requeue_on_resume_failure:
        values.append("requeue_on_resume_failure")
    return list(dict.fromkeys(values))


def slurmd_parameters(spec: ClusterSpec) -> list[str]:
    slurm = spec.slurm
    values = (["config_overrides"] if slurm.config_overrides else []) + list(slurm.slurmd_parameters)
    return list(dict.fromkeys(values))


def job_acct_gather(spec: ClusterSpec) -> str:
    """JobAcctGatherType's plugin: as set, else from the process tracking in use."""
    slurm = spec.slurm
    if slurm.job_acct_gather_type is not None:
        return slurm.job_acct_gather_type
    return "cgroup" if slurm.proctrack == "cgroup" else "linux"


def prologs(spec: ClusterSpec, health_program: str) -> list[str]:
    """Every Prolog= of slurm.conf, in order: the health check's first, then gpucluster-mps."""
    from gpucluster.slurm.sharing import MPS_PROGRAM, uses_mps

    slurm = spec.slurm
    health = [health_program] if slurm.health is not None and slurm.health.prolog else []
    mps = [MPS_PROGRAM] if uses_mps(spec) else []
    return health + mps + list(slurm.prolog)
