"""Power saving as Slurm gets it: slurm.conf's power-saving lines, and gpucluster-power.json, what
gpucluster's own ResumeProgram / SuspendProgram / ResumeFailProgram (gpucluster/programs/
gpucluster_power.py) knows of each power-saved node. The slurm_power role installs the program and
the file on the controllers (where slurmctld runs them, as SlurmUser); the credentials stay in the
role's secrets file, never here."""

from __future__ import annotations

import json
from pathlib import Path

from gpucluster.hostlists import compress
from gpucluster.model.base import Owner
from gpucluster.model.cluster import Cluster
from gpucluster.model.power import NodePower
from gpucluster.model.powered import (
    PowerGroup,
    power_groups,
    power_timers,
    resume_timeout_of,
    saved_hosts,
    template_name,
)
from gpucluster.packagedata import data_path
from gpucluster.render.templating import header

# Where the slurm_power role installs the program; slurmctld runs it under three names (Slurm passes
# only the node list: the name says what to do). Its defaults say the same (a unit test checks).
POWER_PROGRAM = "/usr/local/sbin/gpucluster-power"
RESUME_PROGRAM = f"{POWER_PROGRAM}-resume"
SUSPEND_PROGRAM = f"{POWER_PROGRAM}-suspend"
RESUME_FAIL_PROGRAM = f"{POWER_PROGRAM}-resume-fail"
POWER_CONF = "gpucluster-power.json"
# On the controllers, written by the role: credentials (mode 0600, SlurmUser's), the BMCs' CA.
SECRETS_FILE = "/etc/slurm/gpucluster-power-secrets.json"
CA_FILE = "/etc/slurm/gpucluster-power-ca.pem"
LOG_FILE = "/var/log/slurm/gpucluster-power.log"
STATE_DIR = "/var/lib/gpucluster/power"

Line = tuple[str, object]


def program_path() -> Path:
    """The power program, as the package carries it."""
    return data_path("programs", "gpucluster_power.py")


def always_on_nodes(cluster: Cluster) -> list[str]:
    """Slurm's nodes that are never suspended: every host of no power-saved group."""
    saved = set(saved_hosts(cluster))
    return [h for h in cluster.hosts if h not in saved]


def power_save_lines(cluster: Cluster, named_hosts: list[str]) -> list[Line]:
    """slurm.conf's power-saving section. `named_hosts`: SuspendExcNodes' inventory names, expanded.
    With a power-saved group, gpucluster's programs and GPU defaults for what the inventory leaves
    unset, and every always-on node excluded from suspending."""
    power = cluster.spec.slurm.power_save
    groups = [g for g in power_groups(cluster) if g.hosts]
    if power is None and not groups:
        return []
    timers = power_timers(cluster)
    lines: list[Line] = []
    if groups:
        lines += [
            (
                "#",
                "Power saving (cluster.slurm.power_save): the nodes of cluster.nodes[].power bmc and cloud",
            ),
            (
                "#",
                "are off until a job needs them; gpucluster-power powers them on and off (gpucluster-power.json)",
            ),
            ("SuspendProgram", SUSPEND_PROGRAM),
            ("ResumeProgram", RESUME_PROGRAM),
            ("ResumeFailProgram", RESUME_FAIL_PROGRAM),
        ]
    else:
        assert power is not None
        lines.append(("#", "Power saving (cluster.slurm.power_save; cloud nodes: State=CLOUD)"))
        lines += [
            (key, value)
            for key, value in (
                ("SuspendProgram", power.suspend_program),
                ("ResumeProgram", power.resume_program),
                ("ResumeFailProgram", power.resume_fail_program),
            )
            if value is not None
        ]
    lines += [
        (key, value)
        for key, value in (
            ("SuspendTime", timers.suspend_time),
            ("SuspendTimeout", timers.suspend_timeout),
            ("ResumeTimeout", timers.resume_timeout),
            ("SuspendRate", timers.suspend_rate),
            ("ResumeRate", timers.resume_rate),
        )
        if value is not None
    ]
    excluded = list(named_hosts)
    if groups:
        excluded += always_on_nodes(cluster)
    if excluded:
        lines.append(("SuspendExcNodes", compress(list(dict.fromkeys(excluded)))))
    if power is not None:
        if power.exclude_partitions:
            lines.append(("SuspendExcParts", ",".join(power.exclude_partitions)))
        if power.exclude_states:
            lines.append(("SuspendExcStates", ",".join(power.exclude_states)))
    tree_width = cluster.release.cloud_tree_width
    if tree_width and any(g.power.kind == "cloud" for g in groups):
        lines.append(("TreeWidth", tree_width))
    return lines


def _group_entry(cluster: Cluster, group: PowerGroup) -> dict[str, object]:
    power: NodePower = group.power
    entry: dict[str, object] = {"kind": power.kind, "boot_time": power.effective_boot_time}
    if power.bmc is not None:
        entry["bmc"] = power.bmc.model_dump(mode="json")
    if power.cloud is not None:
        node_type = cluster.node_type(group.hosts[0])
        cloud = power.cloud.model_dump(mode="json")
        cloud["template"] = power.cloud.template or template_name(cluster, group.group)
        cloud["instance_type"] = node_type.instance_type
        entry["cloud"] = cloud
    return entry


def render_power_conf(cluster: Cluster) -> str | None:
    """gpucluster-power.json: every power-saved node with its group and ResumeTimeout, each group's
    provider settings. JSON, so that the program needs no parser beyond Python's own."""
    groups = [g for g in power_groups(cluster) if g.hosts]
    if not groups:
        return None
    doc = {
        "comment": header(cluster.name, comment="").strip(),
        "cluster": cluster.name,
        "release": cluster.release.name,
        "log_file": LOG_FILE,
        "state_dir": STATE_DIR,
        "secrets_file": SECRETS_FILE,
        "ca_file": CA_FILE,
        "groups": {g.group: _group_entry(cluster, g) for g in groups},
        "nodes": {
            host: {"group": g.group, "resume_timeout": resume_timeout_of(cluster, host)}
            for g in groups
            for host in g.hosts
        },
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def render_power(cluster: Cluster) -> dict[str, str]:
    """power/: what the slurm_power role installs on the controllers (nothing without a
    power-saved group). Not in slurm/: no node needs it, and a change to it needs no reconfigure."""
    conf = render_power_conf(cluster.owned_by(Owner.SLURM))
    return {} if conf is None else {f"power/{POWER_CONF}": conf}
