#!/usr/bin/python
# ruff: noqa: E402  (Ansible modules keep DOCUMENTATION above the imports)
"""Ansible module: refuse the changes Slurm cannot make without ending jobs, unless confirmed."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_ending_changes
short_description: Refuse a configuration change that would end running and pending Slurm jobs
description:
  - Compares what the running cluster has (O(live), the C(config) that slurm_controllers_change
    returns, and the filesystem mounted at the state's mount point on this host) with the new
    configuration, and lists the changes Slurm cannot make without ending jobs. Fails listing
    them unless O(confirmed); changes nothing either way.
  - The release of the running slurmctld must be one the target release reads (O(reads), from
    gpucluster's release facts, upgrades.shtml); an older target never reads a newer state.
  - A SwitchType change (slurm.conf(5), restarting slurmctld with another SwitchType while jobs
    exist may lose the records of every job).
  - The controllers' state kept at the same path on a filesystem whose backing changes
    (O(state_filesystem)), which the shared_storage role would mount over the old one, so that
    slurmctld would start from an empty state.
options:
  live:
    description: The running configuration's settings (version, state_save_location, switch_type), as slurm_controllers_change returns them in C(config).
    type: dict
    required: true
  release:
    description: The target release (YY.MM).
    type: str
    required: true
  reads:
    description: The releases whose state the target release reads (itself included).
    type: list
    elements: str
    required: true
  switch_type:
    description: SwitchType of the new configuration (empty for none).
    type: str
    default: ""
  state_save_location:
    description: StateSaveLocation of the new configuration.
    type: str
    required: true
  state_filesystem:
    description: >-
      The filesystem of cluster.storage holding the state in the new configuration (mount, source,
      site_managed), as hosts/storage.yaml renders it; omit when the state is on no shared filesystem.
    type: dict
    required: false
  confirmed:
    description: Go on although jobs end (the playbook's C(-e gpucluster_end_jobs=true)).
    type: bool
    default: false
author: gpucluster maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Refuse what would end jobs, unless confirmed
  gpucluster.cluster.slurm_ending_changes:
    live: "{{ live.config }}"
    release: "26.05"
    reads: ["24.11", "25.05", "25.11", "26.05"]
    state_save_location: /shared/slurmctld
    confirmed: "{{ gpucluster_end_jobs | default(false) | bool }}"
"""

RETURN = r"""
reasons:
  description: Each change that would end jobs, in one sentence.
  type: list
  returned: always
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

CONFIRM = "-e gpucluster_end_jobs=true"


def release_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def reasons(params: dict[str, Any], mounted_source: str | None) -> list[str]:
    """The changes that end jobs; `mounted_source`: what is mounted at the state filesystem's
    mount point on this host now (None: not a mount point, or not asked)."""
    live = params["live"] or {}
    found = []
    running = release_of(str(live.get("version", "")))
    target = params["release"]
    if running and running != target:
        key = tuple(int(part) for part in running.split("."))
        newer = key > tuple(int(part) for part in target.split("."))
        if newer:
            found.append(
                f"the cluster runs Slurm {running}; Slurm {target} cannot read a newer release's state: every "
                "running and pending job would be lost"
            )
        elif running not in params["reads"]:
            found.append(
                f"the cluster runs Slurm {running}; Slurm {target} reads the state of "
                f"{', '.join(r for r in params['reads'] if r != target)} only: every running and pending job "
                "would be lost (upgrade through the releases between, one inventory each; `gpucluster plan` names them)"
            )
    if str(live.get("switch_type", "")) != params["switch_type"]:
        found.append(
            f"SwitchType changes from {live.get('switch_type') or 'none'} to {params['switch_type'] or 'none'}: "
            "slurmctld restarted with another SwitchType while jobs exist may lose the records of every job "
            "(slurm.conf(5)); let the cluster empty first"
        )
    fs = params.get("state_filesystem")
    if (
        fs
        and not fs.get("site_managed")
        and mounted_source is not None
        and ":" in mounted_source  # a network filesystem (a bind mount on its NFS server is local)
        and live.get("state_save_location") == params["state_save_location"]
        and mounted_source != fs.get("source")
    ):
        found.append(
            f"the state ({params['state_save_location']}) is on {fs['mount']}, mounted from {mounted_source}; the "
            f"new configuration mounts {fs.get('source')} there: slurmctld would start from an empty state "
            "and every job would be lost. Copy the state onto the new backing first (slurmctld stopped on "
            "every controller)"
        )
    return found


def mounted_at(module: AnsibleModule, mount: str) -> str | None:
    """The source mounted at exactly `mount` on this host, or None."""
    findmnt = module.get_bin_path("findmnt")
    if findmnt is None:
        return None
    rc, out, _err = module.run_command([findmnt, "--noheadings", "--output", "SOURCE", "--mountpoint", mount])
    return str(out).strip() or None if rc == 0 else None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "live": {"type": "dict", "required": True},
            "release": {"type": "str", "required": True},
            "reads": {"type": "list", "elements": "str", "required": True},
            "switch_type": {"type": "str", "default": ""},
            "state_save_location": {"type": "str", "required": True},
            "state_filesystem": {"type": "dict", "required": False},
            "confirmed": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    fs = params.get("state_filesystem")
    found = reasons(params, mounted_at(module, fs["mount"]) if fs else None)
    if found and not params["confirmed"]:
        module.fail_json(
            msg="this run would end jobs; nothing was changed. "
            + " ".join(f"({n}) {r}." for n, r in enumerate(found, 1))
            + f" To go on anyway: {CONFIRM}",
            reasons=found,
        )
    module.exit_json(changed=False, reasons=found)


if __name__ == "__main__":
    main()
