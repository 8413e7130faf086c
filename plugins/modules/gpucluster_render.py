#!/usr/bin/python
# ruff: noqa: E402  (Ansible modules keep DOCUMENTATION above the imports)
"""Ansible module: render an inventory's Slurm files (and Unix accounts) with gpucluster and say
which host does what."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpucluster_render
short_description: Render the Slurm files of a gpucluster inventory and classify its hosts
description:
  - Loads the cluster model of an inventory directory with gpucluster, writes the files of
    C(gpucluster render) (the same renderer, so the bytes are identical) under O(out), and
    returns which hosts run slurmctld, slurmdbd and slurmd, and which are login (submit) hosts,
    according to the model.
  - Runs on the Ansible controller; gpucluster must be importable there (the collection's
    requirements.txt installs it for Ansible's Python; O(gpucluster_path), when given, is put
    first on sys.path, as the roles do from a clone of the repository).
options:
  inventory:
    description: Inventory directory (hosts.yml and group_vars/all/cluster.yml).
    type: path
    required: true
  out:
    description: >-
      Output directory; files land in O(out)/slurm/, the Unix accounts (cluster.users,
      cluster.groups) in O(out)/hosts/users.yaml when the inventory declares any, and the GPU
      node software (node_types.*.software) in O(out)/nodes/.
    type: path
    required: true
  gpucluster_path:
    description: Directory holding the gpucluster package (a clone's root), put first on sys.path.
    type: path
    required: false
author: gpucluster maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Render the Slurm files of an inventory on the controller and learn who runs what
  gpucluster.cluster.gpucluster_render:
    inventory: inventories/prod
    out: build/ansible/prod
  delegate_to: localhost
  run_once: true
  register: rendered

- name: Put the slurmctld hosts in a group of their own
  ansible.builtin.add_host:
    name: "{{ item }}"
    groups: slurm_controllers
  loop: "{{ rendered.controllers }}"
"""

RETURN = r"""
files:
  description: Relative paths of the rendered files.
  type: list
  returned: always
contents:
  description: Name -> content of the files installed under /etc/slurm (slurm/*, accounts.yaml excepted).
  type: dict
  returned: always
controllers:
  description: slurmctld hosts, primary first.
  type: list
  returned: always
dbd_hosts:
  description: The slurmdbd host (empty when accounting is off).
  type: list
  returned: always
compute_nodes:
  description: slurmd hosts (the nodes bare-metal Slurm owns).
  type: list
  returned: always
login_nodes:
  description: >-
    Login (submit) hosts (cluster.slurm.login): client commands, munge, the Slurm files, sshd;
    no slurmd. Empty when bare-metal Slurm has no nodes.
  type: list
  returned: always
restd_hosts:
  description: The slurmrestd host (cluster.slurm.rest_api.host); empty when the REST API is off.
  type: list
  returned: always
rest_api:
  description: >-
    The REST API as the slurm_restd and slurm_dbd roles need it (host, port, listen address,
    OpenAPI plugins, the host making the JWT key and each key holder's path); null when off.
  type: dict
  returned: always
state_save_location:
  description: StateSaveLocation as rendered into slurm.conf (created on the controllers).
  type: str
  returned: always
leave_reasons:
  description: Host -> drain reason, for every inventory host that another scheduler owns.
  type: dict
  returned: always
cluster_name:
  description: Slurm ClusterName as Slurm knows it (slurm.conf's, in lower case).
  type: str
  returned: always
slurm_user:
  description: >-
    SlurmUser (cluster.slurm.slurm_user) - the user slurmctld and slurmdbd run as and own their
    state, logs and slurmdbd.conf under.
  type: str
  returned: always
configless:
  description: cluster.slurm.configless; slurmd fetches the files slurmctld serves.
  type: bool
  returned: always
conf_server:
  description: slurmd's --conf-server value, the controllers in priority order (used when configless).
  type: str
  returned: always
release:
  description: >-
    What the target Slurm release means on the hosts (from gpucluster.model.releases): name,
    target version, Debian suite, pid files, whether slurmctld/slurmdbd run as slurm, MariaDB
    and PMIx needs, sackd, whether node-list changes need only a reconfigure and whether a
    reconfigure re-executes the daemons.
  type: dict
  returned: always
packages:
  description: >-
    The Slurm package source: the apt pin (YY.MM.*), the minimum maintenance version, and the
    site's repository (url, suite, components, key as an absolute path) or null.
  type: dict
  returned: always
partitions:
  description: >-
    Name -> each bare-metal partition of the rendered slurm.conf as C(scontrol create) takes it
    (slurm_partitions_change creates a renamed partition's successor from it).
  type: dict
  returned: always
switch_type:
  description: SwitchType of the rendered slurm.conf; empty for none.
  type: str
  returned: always
state_filesystem:
  description: >-
    The filesystem of cluster.storage holding StateSaveLocation, as hosts/storage.yaml renders it
    (name, mount, site_managed, source, type, hosts...); null when the state is on none.
  type: dict
  returned: always
power:
  description: >-
    The power-saved nodes (cluster.nodes[].power bmc or cloud) and what the slurm_power role needs:
    program (gpucluster-power as the package carries it), nodes, bmc_nodes, cloud_nodes (never in
    compute_nodes: instances made on demand, configured by their image), ipmi (a BMC group may fall
    back to IPMI), providers (the clouds of the cloud groups).
  type: dict
  returned: always
health_program:
  description: >-
    Path on the controller of gpucluster-healthcheck as the gpucluster package carries it (the
    slurm_health role installs it on the nodes).
  type: str
  returned: always
mig_program:
  description: >-
    Path on the controller of gpucluster-mig as the gpucluster package carries it (the gpu_mig
    role installs it on bare-metal Slurm's MIG nodes).
  type: str
  returned: always
mps_program:
  description: >-
    Path on the controller of gpucluster-mps as the gpucluster package carries it (the
    slurm_compute role installs it on the nodes where a node type shares GPUs by MPS).
  type: str
  returned: always
upgrade:
  description: >-
    How playbooks/slurm-upgrade.yml upgrades a live cluster (cluster.slurm.upgrade): backup_dir
    (the backups' directory on the accounting host and the first controller) and batch_size
    (compute hosts whose slurmd is upgraded at once).
  type: dict
  returned: always
served_files:
  description: >-
    The files slurmctld serves to a configless slurmd of this Slurm release (empty when not
    configless): nodes that fetch their configuration hold no local copy of them.
  type: list
  returned: always
"""

import sys
from typing import Any

from ansible.module_utils.basic import AnsibleModule


def classify(cluster: Any) -> dict[str, Any]:
    """Host roles straight from the model, so inventories need no Slurm-specific groups. Only
    hosts bare-metal Slurm owns run slurmd; with none, there is no bare-metal Slurm to install."""
    from gpucluster.changes.apply import slurm_host_groups
    from gpucluster.changes.moves import MOVE_REASON
    from gpucluster.changes.procedures import releases_reading, state_filesystem_entry, switch_type
    from gpucluster.model.base import Owner
    from gpucluster.model.powered import cloud_hosts, power_groups
    from gpucluster.packagedata import data_path
    from gpucluster.render.health import program_path
    from gpucluster.render.power import program_path as power_program_path
    from gpucluster.slurm.render import conf_server, configless_served
    from gpucluster.slurm.restapi import rest_api_settings
    from gpucluster.slurm.settings import slurm_cluster_name

    slurm = cluster.spec.slurm
    facts = cluster.release
    nodes = cluster.hosts_owned_by(Owner.SLURM)
    # The groups `gpucluster apply` limits the playbooks to are these.
    hosts = slurm_host_groups(cluster)
    # Instances made when Slurm needs them: no playbook reaches them (their image does the work).
    instances = set(cloud_hosts(cluster))
    groups = [g for g in power_groups(cluster) if g.hosts]
    repository = slurm.packages.repository
    others = {h: o for h, o in cluster.owner_of.items() if o != Owner.SLURM}
    return {
        "cluster_name": slurm_cluster_name(cluster.spec),
        "slurm_user": slurm.slurm_user,
        "controllers": hosts["slurm_controllers"],
        "dbd_hosts": hosts["slurm_dbd_hosts"],
        "compute_nodes": hosts["slurm_compute_nodes"],
        "login_nodes": hosts["slurm_login_nodes"],
        "restd_hosts": hosts["slurm_restd_hosts"],
        "rest_api": rest_api_settings(cluster) if nodes else None,
        "state_save_location": slurm.state_dir,
        "leave_reasons": {h: MOVE_REASON.format(target=o) for h, o in sorted(others.items())},
        "configless": slurm.configless,
        "conf_server": conf_server(cluster),
        "served_files": configless_served(cluster) if slurm.configless else [],
        "release": {
            "name": facts.name,
            "target": str(cluster.version),
            "proven": facts.proven,
            "debian_suite": facts.packaging.debian_suite or "",
            "daemons_run_as_slurm": facts.packaging.daemons_run_as_slurm,
            "slurmctld_pid_file": facts.packaging.slurmctld_pid_file,
            "slurmdbd_pid_file": facts.packaging.slurmdbd_pid_file,
            "mariadb_snapshot_isolation_off": facts.packaging.mariadb_snapshot_isolation_off,
            "pmix": facts.packaging.pmix,
            "sackd": facts.sackd and facts.packaging.sackd,
            "reconfigure_node_changes": facts.reconfigure_node_changes,
            "reconfigure_reexec": facts.reconfigure_reexec,
            # Releases whose state this one reads (itself included): a running cluster of another
            # release ends its jobs (slurm_ending_changes).
            "reads": releases_reading(facts.name),
        },
        "switch_type": switch_type(cluster),
        "state_filesystem": state_filesystem_entry(cluster) if nodes else None,
        "packages": {
            "pin": f"{facts.name}.*",
            "minimum": str(cluster.version) if cluster.version.patch is not None else "",
            "repository": None
            if repository is None
            else {
                "url": repository.url,
                "suite": repository.suite,
                "components": list(repository.components),
                "key": str(cluster.inventory.root / repository.key),
            },
        },
        "health_program": str(program_path()),
        "mps_program": str(data_path("programs", "gpucluster_mps.py")),
        "mig_program": str(data_path("programs", "gpucluster_mig.py")),
        # The power-saved nodes (slurm_power): off until Slurm powers them on.
        "power": {
            "program": str(power_program_path()),
            "nodes": [h for g in groups for h in g.hosts],
            "bmc_nodes": [h for g in groups if g.power.kind == "bmc" for h in g.hosts],
            "cloud_nodes": sorted(instances),
            "ipmi": any(g.power.bmc is not None and g.power.bmc.ipmi_fallback for g in groups),
            "providers": sorted({g.power.cloud.provider for g in groups if g.power.cloud is not None}),
        },
        # playbooks/slurm-upgrade.yml: where its backups go, how many slurmd at once.
        "upgrade": {"backup_dir": slurm.upgrade.backup_dir, "batch_size": slurm.upgrade.batch_size},
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "inventory": {"type": "path", "required": True},
            "out": {"type": "path", "required": True},
            "gpucluster_path": {"type": "path", "required": False},
        },
        supports_check_mode=True,
    )
    if module.params["gpucluster_path"]:
        sys.path.insert(0, module.params["gpucluster_path"])
    try:
        from gpucluster.errors import InventoryError
        from gpucluster.layers import load_cluster
        from gpucluster.render.files import write_tree
        from gpucluster.rendering import render_files
    except ImportError as exc:
        module.fail_json(msg=f"gpucluster is not importable ({exc}); set slurm_common_gpucluster_path")
    try:
        cluster = load_cluster(module.params["inventory"])
    except InventoryError as exc:
        module.fail_json(msg="invalid inventory:\n" + "\n".join(str(p) for p in exc.problems))
    # hosts/: the accounts the users role creates on every Slurm host; containers/: Pyxis, enroot;
    # nodes/: the GPU node software (role gpu_driver); mig/: the MIG layouts (role gpu_mig);
    # monitoring/: the monitoring play; power/: gpucluster-power's settings (role slurm_power).
    files = render_files(
        cluster, only=["slurm", "hosts", "containers", "nodes", "mig", "monitoring", "power"]
    )
    written: list[str] = []
    if not module.check_mode:
        written = [str(path) for path in write_tree(files, module.params["out"])]
    contents = {
        rel.split("/", 1)[1]: text
        for rel, text in files.items()
        if rel.startswith("slurm/") and rel != "slurm/accounts.yaml"
    }
    from gpucluster.changes.procedures import partition_definitions

    module.exit_json(
        changed=bool(written),
        written=written,
        files=sorted(files),
        contents=contents,
        partitions=partition_definitions(cluster, files.get("slurm/slurm.conf", "")),
        **classify(cluster),
    )


if __name__ == "__main__":
    main()
