"""The procedures the playbooks carry out, each declared once: what its step in a plan does, and the
plays (playbook, play name, role entry points) that do it.

`gpucluster plan` takes every step's text from here (gpucluster.changes.plan), and
tests/architecture/test_procedures.py holds this table to playbooks/: a play named here that a
playbook lacks, a role entry point a play does not run, or a play that no procedure names fails.
A role entry point is the role (its main tasks), `role:tasks_from`, or `role:step` where the play
sets the role's `<role>_step` variable (slurm_upgrade's steps).
"""

from __future__ import annotations

from dataclasses import dataclass

SLURM = "playbooks/slurm.yml"
UPGRADE = "playbooks/slurm-upgrade.yml"
GPU_NODES = "playbooks/gpu_nodes.yml"
KUBERNETES = "playbooks/kubernetes.yml"
MONITORING = "playbooks/monitoring.yml"
POWER_SAVED = "playbooks/power_saved.yml"
POWER_RELEASE = "playbooks/power_release.yml"
NODE_GATE = "playbooks/node-gate.yml"


@dataclass(frozen=True)
class Play:
    playbook: str
    name: str  # as the playbook names it
    roles: tuple[str, ...]  # the role entry points it runs for this procedure


@dataclass(frozen=True)
class Procedure:
    key: str
    does: str  # what its step does, after "<playbook> (<roles>): "
    plays: tuple[Play, ...]
    # The hosts its plays change, as the groups the playbooks' first play builds (HOST_GROUPS):
    # `gpucluster apply` limits the playbook to them (and localhost, where the render runs).
    hosts: tuple[str, ...] = ()
    # Its plays change only the hosts its changes name (a node type's hosts, the nodes whose layout
    # changes), not every host of its groups.
    per_host: bool = False

    @property
    def playbook(self) -> str:
        return self.plays[0].playbook

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles of its plays in its playbook, each once (entry points shown as the role)."""
        found = (r.partition(":")[0] for p in self.plays if p.playbook == self.playbook for r in p.roles)
        return tuple(dict.fromkeys(found))

    def text(self, does: str | None = None) -> str:
        """Its step's text: the playbook, the roles, then what it does (`does` for this plan's)."""
        return f"{self.playbook} ({', '.join(self.roles)}): {does or self.does}"


# The groups of hosts the playbooks' first plays build (add_host), by which a procedure says where
# it acts; gpucluster.changes.apply finds their hosts from the inventory and its rendered files.
SLURM_HOSTS = ("slurm_controllers", "slurm_dbd_hosts", "slurm_compute_nodes", "slurm_login_nodes")
CONTROLLERS = ("slurm_controllers",)
HOST_GROUPS = (
    *SLURM_HOSTS,
    "slurm_controllers[0]",
    "nfs_servers",
    "shared_storage_hosts",
    "gpu_driver_hosts",
    "gpu_mig_hosts",
    "monitoring_servers",
)


def _play(playbook: str, name: str, *roles: str) -> Play:
    return Play(playbook, name, roles)


_PROCEDURES = (
    # Every run of a playbook starts here; no step of its own.
    Procedure(
        "render",
        "renders the inventory on the Ansible controller, groups the hosts, pins the target Slurm release",
        (
            _play(SLURM, "Render the Slurm files and group the hosts by their role in the cluster model", "slurm_common:render", "shared_storage:group"),
            _play(SLURM, "The target Slurm release on every Slurm host (pin and pre-flight)", "slurm_common:packages"),
            _play(GPU_NODES, "Render the inventory and group the hosts with node software", "slurm_common:render"),
            _play(MONITORING, "Render the monitoring files and group the hosts that run them", "slurm_common:render"),
            _play(UPGRADE, "The target Slurm release on every Slurm host (pin and pre-flight)", "slurm_common:packages"),
            _play(NODE_GATE, "Render the inventory and group the hosts of the gate", "slurm_common:render"),
        ),
    ),
    Procedure(
        "controllers",
        "the live controllers read, the one that stays put in charge, slurmctld stopped where it leaves",
        (
            _play(SLURM, "The live controllers, what would end jobs, and the controller that stays in charge", "slurm_controller:live"),
            _play(SLURM, "Controllers leaving, and those stopped while a new primary starts", "slurm_controller:leave", "shared_storage"),
            _play(SLURM, "The controllers of the inventory, and the takeover where one joined", "slurm_controller:verify"),
        ),
        hosts=CONTROLLERS,
    ),
    Procedure(
        "partitions",
        "partitions created, closed and emptied before the files change",
        (_play(SLURM, "Slurm configuration, slurmctld and slurmd", "slurm_common"),),
        hosts=CONTROLLERS,
    ),
    # Nodes that leave bare-metal Slurm (moved to another scheduler, or gone from the inventory):
    # slurm_common drains them and waits for their jobs on the first controller, then stops slurmd
    # there, before the new files are installed.
    Procedure(
        "nodes_leaving",
        "nodes leaving Slurm drained, their running jobs waited for (never killed), slurmd stopped there",
        (_play(SLURM, "Slurm configuration, slurmctld and slurmd", "slurm_common"),),
        hosts=CONTROLLERS,
    ),
    Procedure(
        "accounting_move",
        "slurmdbd stopped on the old host, its database dumped there and loaded on the new one",
        (
            _play(SLURM, "Accounting leaving its host", "slurm_common:accounting_dump"),
            _play(SLURM, "Accounting database and slurmdbd", "slurm_common:accounting_load"),
        ),
        hosts=("slurm_dbd_hosts",),
    ),
    Procedure(
        "state_move",
        "slurmctld stopped on every controller and its state copied to the new location",
        (_play(SLURM, "Slurm configuration, slurmctld and slurmd", "slurm_common"),),
        hosts=CONTROLLERS,
    ),
    Procedure(
        "users",
        "the Unix groups and users of hosts/users.yaml on every Slurm host",
        (_play(SLURM, "Unix groups and users of the cluster model on every Slurm host", "users"),),
        hosts=(*SLURM_HOSTS, "nfs_servers", "shared_storage_hosts"),
    ),
    Procedure(
        "storage",
        "the exports and mounts of hosts/storage.yaml (a changed mount is remounted: drain its hosts first)",
        (
            _play(SLURM, "NFS exports of the shared filesystems", "nfs_server"),
            _play(SLURM, "Shared filesystems on the hosts that mount them", "shared_storage"),
        ),
        hosts=("nfs_servers", "shared_storage_hosts"),
    ),
    Procedure(
        "node_software",
        "the node software of nodes/ on the hosts of its node types (drain them first; reboot where the "
        "kernel module changed)",
        (_play(GPU_NODES, "GPU driver stack", "gpu_driver"),),
        hosts=("gpu_driver_hosts",), per_host=True,
    ),
    Procedure(
        "mig_layout",
        "the MIG layouts of mig/ on bare-metal Slurm's nodes, a batch at a time (cluster.slurm.upgrade."
        "batch_size): each node whose layout differs drained, emptied (its jobs end, none is killed), "
        "re-partitioned with nvidia-smi, given its new Gres, its slurmd restarted, resumed; the layout "
        "also applied at every boot before slurmd",
        (_play(GPU_NODES, "MIG layouts of bare-metal Slurm's GPUs, a batch at a time", "gpu_mig"),),
        hosts=("gpu_mig_hosts",), per_host=True,
    ),
    Procedure(
        "slurm",
        "installs the Slurm configuration",
        (
            _play(SLURM, "Slurm configuration, slurmctld and slurmd", "slurm_common", "slurm_health", "slurm_controller", "slurm_compute", "monitoring_dcgm_exporter:slurm_job_mapping"),
            _play(SLURM, "Munge authentication on every Slurm host", "munge"),
            _play(SLURM, "JWT key of the REST API on the controllers and the slurmdbd host", "slurm_restd:jwt_key"),
            _play(SLURM, "Accounting database and slurmdbd", "slurm_dbd"),
            _play(SLURM, "Every compute node registered with slurmctld", "slurm_compute:registered"),
            _play(SLURM, "Login nodes", "slurm_login"),
            _play(SLURM, "SSH to compute nodes, for users with a job there", "slurm_node_ssh"),
            _play(SLURM, "REST API (slurmrestd with JWT)", "slurm_restd"),
            _play(SLURM, "Containers in jobs - Slurm's OCI support with rootless crun", "slurm_containers"),
            _play(SLURM, "Containers in jobs - Pyxis and enroot", "pyxis_enroot"),
        ),
        hosts=SLURM_HOSTS,
    ),
    # Power saving with gpucluster's programs (cluster.nodes[].power): gpucluster-power on the
    # controllers before slurmctld reads the slurm.conf naming it; every playbook holds the
    # power-saved nodes that are up while it configures them and leaves out those Slurm keeps off.
    Procedure(
        "power",
        "gpucluster-power, gpucluster-power.json and the BMC credentials on the controllers",
        (
            _play(SLURM, "Slurm configuration, slurmctld and slurmd", "slurm_power"),
            _play(POWER_SAVED, "Power-saved nodes - hold those that are up, leave out those Slurm powered off", "slurm_power:hold", "slurm_power:powered_down"),
            _play(POWER_RELEASE, "Power-saved nodes - back to Slurm's power saving", "slurm_power:release"),
        ),
        hosts=CONTROLLERS,
    ),
    Procedure(
        "accounts",
        "sacctmgr makes the accounts, users and QOS of slurm/accounts.yaml",
        (_play(SLURM, "Accounts, QOS and users of the tenants", "slurm_accounts"),),
        hosts=("slurm_controllers[0]",),
    ),
    Procedure(
        "kubernetes",
        "applies the Kubernetes objects",
        (
            _play(KUBERNETES, "Kubernetes add-ons and objects from the inventory", "cert_manager", "network_operator", "gpu_operator", "dra_driver", "kueue", "kai_scheduler", "volcano", "gpu_workloads", "slurm_on_k8s"),
        ),
    ),
    Procedure(
        "monitoring",
        "promtool and amtool check the files on the monitoring host, Prometheus and Alertmanager reload",
        (
            _play(MONITORING, "Node-exporter on every host, the Slurm state collector on the controllers", "monitoring_node_exporter"),
            _play(MONITORING, "NVIDIA's dcgm-exporter and its Slurm job mapping on the GPU nodes", "monitoring_dcgm_exporter"),
            _play(MONITORING, "Prometheus and Alertmanager on the monitoring host", "monitoring_prometheus"),
        ),
        hosts=("monitoring_servers",),
    ),
    # The return-to-service gate (cluster.gate): nodes an administrator declares repaired.
    Procedure(
        "gate",
        "the nodes enter the gate (a reservation of their own and a `[gate]` drain); each returns to "
        "service when its burn-in passes",
        (_play(NODE_GATE, "Nodes into the gate, back only after a burn-in passes", "slurm_health:enter_gate"),),
    ),
    # The upgrade (gpucluster.changes.upgrade): one procedure per step of Slurm's order.
    # Their hosts are those each step of the upgrade names (no group of their own).
    Procedure(
        "upgrade:prove",
        "`gpucluster trial` of the new inventory",
        (_play(UPGRADE, "Render the new release's files, group the hosts and prove the files with the new release", "slurm_common:render"),),
    ),
    Procedure(
        "upgrade:pre-checks",
        "every daemon answers, no node would lose a job, room for the backups",
        (_play(UPGRADE, "Pre-checks (nothing changes before every one passes)", "slurm_upgrade:precheck"),),
    ),
    Procedure(
        "upgrade:job-mapping",
        "the prolog and epilog the new slurm.conf names, before any slurmd reads it",
        (_play(UPGRADE, "The Slurm prolog and epilog of dcgm-exporter's job mapping on every Slurm node", "monitoring_dcgm_exporter:slurm_job_mapping"),),
    ),
    Procedure(
        "upgrade:backup",
        "the accounting database dumped",
        (_play(UPGRADE, "The accounting database, dumped, then converted by the new slurmdbd", "slurm_upgrade:backup"),),
    ),
    Procedure(
        "upgrade:slurmdbd",
        "slurmdbd upgraded; it converts the database",
        (_play(UPGRADE, "The accounting database, dumped, then converted by the new slurmdbd", "slurm_upgrade:slurmdbd"),),
    ),
    Procedure(
        "upgrade:slurmctld-backups",
        "the backup controllers upgraded, not started",
        (_play(UPGRADE, "The backup controllers, upgraded (started once the primary answers)", "slurm_upgrade:slurmctld"),),
    ),
    Procedure(
        "upgrade:slurmctld",
        "the primary controller upgraded with its state",
        (_play(UPGRADE, "The primary controller, its state copied, upgraded and waited for with every job", "slurm_upgrade:slurmctld"),),
    ),
    Procedure(
        "upgrade:slurmctld-backups-started",
        "the backup controllers started",
        (_play(UPGRADE, "The backup controllers started", "slurm_upgrade:slurmctld_backups"),),
    ),
    Procedure(
        "upgrade:spank-controllers",
        "the SPANK plugins gpucluster builds (Pyxis), rebuilt against the new release on the controllers",
        (_play(UPGRADE, "The SPANK plugins gpucluster builds, rebuilt against the new release on the controllers", "pyxis_enroot"),),
    ),
    Procedure(
        "upgrade:slurmd",
        "every slurmd in batches",
        (_play(UPGRADE, "Every slurmd, in batches (cluster.slurm.upgrade.batch_size), each waited for", "slurm_upgrade:slurmd"),),
    ),
    # In each batch, between its packages and the restart of slurmd (which loads the plugins).
    Procedure(
        "upgrade:spank",
        "the SPANK plugins gpucluster builds (Pyxis), rebuilt against the new release before slurmd restarts",
        (_play(UPGRADE, "Every slurmd, in batches (cluster.slurm.upgrade.batch_size), each waited for", "pyxis_enroot"),),
    ),
    Procedure(
        "upgrade:slurmd-restart",
        "slurmd restarted on the new release, each node waited for",
        (_play(UPGRADE, "Every slurmd, in batches (cluster.slurm.upgrade.batch_size), each waited for", "slurm_upgrade:slurmd_restart"),),
    ),
    Procedure(
        "upgrade:login",
        "login hosts and clients",
        (_play(UPGRADE, "Login hosts and clients last", "slurm_upgrade:login"),),
    ),
    Procedure(
        "upgrade:spank-login",
        "the SPANK plugins gpucluster builds (Pyxis), rebuilt against the new release on the login hosts",
        (_play(UPGRADE, "The SPANK plugins gpucluster builds, rebuilt against the new release on the login hosts", "pyxis_enroot"),),
    ),
    Procedure(
        "upgrade:verify",
        "every daemon reports the new release",
        (_play(UPGRADE, "Every daemon reports the new release", "slurm_upgrade:verify"),),
    ),
)  # fmt: skip

PROCEDURES: dict[str, Procedure] = {p.key: p for p in _PROCEDURES}

# A change that reaches the daemons by `scontrol reconfigure` or not at all (Update.RENDER_ONLY,
# RECONFIGURE) or by sacctmgr (ACCOUNTS), carried out by these procedures, needs only some plays
# of slurm.yml: `gpucluster apply` runs such steps with `--tags FILES_ONLY_TAG`. Each of these
# plays carries the tag in its playbook, and no other play of slurm.yml does (tests/architecture
# holds the playbooks to this list): the render, the power hold and release around the change,
# the live controllers' read (what would end jobs), the files with the handlers that reconfigure,
# the controllers' check, the accounts. A full converge runs every play, as before.
FILES_ONLY_TAG = "slurm_files"
FILES_ONLY_PROCEDURES = ("slurm", "accounts")
FILES_ONLY_PLAYS = (
    (SLURM, "Render the Slurm files and group the hosts by their role in the cluster model"),
    (POWER_SAVED, "Power-saved nodes - hold those that are up, leave out those Slurm powered off"),
    (SLURM, "The live controllers, what would end jobs, and the controller that stays in charge"),
    (SLURM, "Slurm configuration, slurmctld and slurmd"),
    (SLURM, "The controllers of the inventory, and the takeover where one joined"),
    (SLURM, "Accounts, QOS and users of the tenants"),
    (POWER_RELEASE, "Power-saved nodes - back to Slurm's power saving"),
)
