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
        "description": header(cluster.name, comment="").strip(),
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
    view = cluster.owned_by(Owner.SLURM)
    conf = render_power_conf(view)
    if conf is None:
        return {}
    files = {f"power/{POWER_CONF}": conf}
    # What the burst stack puts in each cloud group's template (stacks/burst).
    for group in power_groups(view):
        cloud = group.power.cloud
        if group.hosts and cloud is not None and cloud.template is None and cloud.provider in NODE_NAME:
            files[f"power/boot-{group.group}.yaml"] = boot_config(view, group)
    return files


# How a node's first boot learns which Slurm node it is, and reads the munge key from the cloud's
# secret store (the burst stack makes the secret and lets the nodes' identity read it alone).
NODE_NAME = {
    "aws": (
        'TOKEN=$(curl -sf -X PUT http://169.254.169.254/latest/api/token -H "X-aws-ec2-metadata-token-ttl-seconds: 300")\n'
        'NODE=$(curl -sf -H "X-aws-ec2-metadata-token: $TOKEN" '
        "http://169.254.169.254/latest/meta-data/tags/instance/gpucluster-node)"
    ),
    "gcp": 'NODE=$(curl -sf -H "Metadata-Flavor: Google" http://metadata.google.internal/computeMetadata/v1/instance/name)',
}
MUNGE_KEY = {
    "aws": "aws secretsmanager get-secret-value --region {region} --secret-id {secret} --query SecretString --output text",
    "gcp": "gcloud secrets versions access latest --project {project} --secret {secret}",
}


def munge_secret_name(cluster: Cluster) -> str:
    """The secret (AWS Secrets Manager, GCP Secret Manager) holding the munge key, base64."""
    return f"{cluster.name}-munge-key"


def boot_config(cluster: Cluster, group: PowerGroup) -> str:
    """The cloud-init user data of a cloud group's instances: at first boot, become the Slurm node
    the instance was made for, install the target release's slurmd and munge where the image lacks
    them, take the munge key from the cloud's secret store, and join Slurm configless."""
    cloud = group.power.cloud
    assert cloud is not None and cloud.provider in NODE_NAME
    release = cluster.release.name
    servers = ",".join(cluster.spec.slurm.controller)
    key = MUNGE_KEY[cloud.provider].format(
        region=cloud.region, project=cloud.project or "", secret=munge_secret_name(cluster)
    )
    script = "\n".join(
        [
            "#!/bin/sh",
            f"# {header(cluster.name, comment='').strip()}",
            f"# First boot of a node of {group.group}: Slurm {release}, configless from {servers}.",
            "set -eu",
            NODE_NAME[cloud.provider],
            'test -n "$NODE"',
            'hostnamectl set-hostname "$NODE"',
            "if ! command -v slurmd >/dev/null; then",
            "  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmd munge",
            "fi",
            # A slurmd of another release would register and be refused: the node then stays down
            # with this line in its console log, and ResumeTimeout gives up on it.
            f'slurmd -V | grep -q "^slurm {release}\\." || {{ echo "gpucluster: slurmd is not Slurm {release}" >&2; exit 1; }}',
            "umask 077",
            f"{key} | base64 -d > /etc/munge/munge.key",
            "chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key",
            "systemctl enable --now munge",
            f'echo "SLURMD_OPTIONS=\\"--conf-server {servers} -N $NODE\\"" > /etc/default/slurmd',
            "systemctl enable --now slurmd",
        ]
    )
    indented = "\n".join(f"      {line}" if line else "" for line in script.splitlines())
    return (
        "#cloud-config\n"
        f"{header(cluster.name)}\n"
        "write_files:\n"
        "  - path: /usr/local/sbin/gpucluster-join\n"
        '    permissions: "0700"\n'
        "    content: |\n"
        f"{indented}\n"
        "runcmd:\n"
        "  - [/usr/local/sbin/gpucluster-join]\n"
    )
