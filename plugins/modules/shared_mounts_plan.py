#!/usr/bin/python
# ruff: noqa: E402  (Ansible modules keep DOCUMENTATION above the imports)
"""Ansible module: decide which shared filesystems of hosts/storage.yaml the shared_storage role may
mount, check or unmount on this host, from /etc/fstab, the mounts in place and the record of the
mounts the role made."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: shared_mounts_plan
short_description: Plan the shared filesystems the shared_storage role mounts on a host
description:
  - Takes the filesystems of O(filesystems) (hosts/storage.yaml rendered by gpucluster) whose
    C(hosts) list O(host), and compares them with /etc/fstab, the filesystems mounted now
    (/proc/self/mountinfo) and O(record), the JSON file listing the mount points the role wrote.
    Changes nothing.
  - A site-managed filesystem must already be mounted at its mount point; the module fails naming
    the host and the mount point otherwise. The role never mounts or unmounts it.
  - A mount point that /etc/fstab or the mount table already holds, and that the role did not
    write, is never changed. With the wanted source and type in /etc/fstab it is left alone and
    said so; with another source or type, or mounted without an fstab entry, the module fails
    naming the host, the mount point, what is there and what the inventory wants.
  - The NFS server of a filesystem gets a bind mount of its export instead of an NFS mount of itself.
  - Recorded mount points that the inventory no longer gives this host are to be unmounted only
    with O(remove_absent).
options:
  filesystems:
    description: The C(filesystems) list of hosts/storage.yaml (name, mount, site_managed, source, type, options, server, export, hosts).
    type: list
    elements: dict
    required: true
  record:
    description: Path of the JSON record of the mount points the role wrote on this host (may not exist yet).
    type: path
    required: true
  remove_absent:
    description: Unmount and remove from /etc/fstab the recorded mount points the inventory no longer lists here.
    type: bool
    default: false
  host:
    description: This host's inventory name (which filesystems are its own, and for messages).
    type: str
    required: true
author: gpucluster maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Plan the shared filesystems of this host
  gpucluster.cluster.shared_mounts_plan:
    filesystems: "{{ (lookup('ansible.builtin.file', 'build/prod/hosts/storage.yaml') | from_yaml).filesystems }}"
    record: /var/lib/gpucluster/storage/mounted.json
    host: "{{ inventory_hostname }}"
  register: storage_plan

- name: Say what is left alone
  ansible.builtin.debug:
    msg: "{{ storage_plan.notes }}"
"""

RETURN = r"""
mounts:
  description: Filesystems the role manages here (mount, src, fstype, opts), in inventory order.
  type: list
  returned: always
missing_dirs:
  description: Mount points of RV(mounts) that do not exist yet as directories.
  type: list
  returned: always
site_managed:
  description: Mount points the site mounts, found mounted.
  type: list
  returned: always
remove:
  description: Recorded mount points to unmount and drop from /etc/fstab (only with remove_absent).
  type: list
  returned: always
nfs_client:
  description: Whether a managed mount is NFS (the host needs nfs-common).
  type: bool
  returned: always
notes:
  description: Mount points left alone or kept, one sentence each.
  type: list
  returned: always
record_changed:
  description: Whether record_before differs from the record on the host.
  type: bool
  returned: always
record_before:
  description: The record to write before mounting (mount points about to be written included).
  type: dict
  returned: always
record_after:
  description: The record once the removals are done.
  type: dict
  returned: always
"""

import os
from dataclasses import dataclass, field
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpucluster.cluster.plugins.module_utils.record import (
    RECORD_OPTIONS,
    RecordPlan,
    fail_on_errors,
    load_record,
)

NFS_TYPES = ("nfs", "nfs4")
RECORD_KEYS = ("mounts",)


@dataclass
class Plan(RecordPlan):
    mounts: list[dict[str, str]] = field(default_factory=list)
    site_managed: list[str] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)


def wanted_mount(fs: dict[str, Any], host: str) -> dict[str, str]:
    """fstab's fields for this host: the NFS server binds its export, the others mount the source."""
    if fs.get("server") == host:
        return {"mount": fs["mount"], "src": fs["export"], "fstype": "none", "opts": "bind"}
    return {"mount": fs["mount"], "src": fs["source"], "fstype": fs["type"], "opts": fs["options"]}


def plan(
    filesystems: list[dict[str, Any]],
    fstab: dict[str, tuple[str, str]],
    mounted: dict[str, str],
    record: dict[str, list[str]],
    host: str,
    remove_absent: bool = False,
) -> Plan:
    """`fstab`: mount point -> (source, type) of /etc/fstab; `mounted`: mount point -> source of the
    mount table; `record`: {"mounts": [...]} the role wrote before."""
    result = Plan()
    ours = set(record.get("mounts", []))
    mine = [fs for fs in filesystems if host in fs.get("hosts", [])]
    for fs in mine:
        mount = fs["mount"]
        if fs.get("site_managed"):
            if mount in mounted:
                result.site_managed.append(mount)
            else:
                result.errors.append(
                    f"{host}: {mount} is not a mounted filesystem; cluster.storage `{fs['name']}` says the "
                    "site mounts it there (site_managed)"
                )
            continue
        wanted = wanted_mount(fs, host)
        found = fstab.get(mount)
        if mount in ours:
            result.mounts.append(wanted)
        elif found is not None and found == (wanted["src"], wanted["fstype"]):
            result.notes.append(
                f"{host}: {mount} is in /etc/fstab already ({found[0]}, {found[1]}), not written by the "
                "shared_storage role: left alone"
            )
        elif found is not None:
            result.errors.append(
                f"{host}: {mount} is in /etc/fstab as {found[0]} ({found[1]}), not written by the "
                f"shared_storage role; the inventory wants {wanted['src']} ({wanted['fstype']})"
            )
        elif mount in mounted:
            result.errors.append(
                f"{host}: {mounted[mount]} is mounted at {mount}, not by the shared_storage role; "
                f"the inventory wants {wanted['src']} ({wanted['fstype']}) there"
            )
        else:
            result.mounts.append(wanted)
    wanted_here = {fs["mount"] for fs in mine if not fs.get("site_managed")}
    absent = sorted(ours - wanted_here)
    if remove_absent:
        result.remove = absent
    else:
        result.notes += [
            f"{host}: {mount} is no longer in the inventory for this host: kept mounted "
            "(shared_storage_remove_absent: true unmounts it)"
            for mount in absent
        ]
    before = sorted(ours | {m["mount"] for m in result.mounts})
    result.record_before = {"mounts": before}
    result.record_after = {"mounts": [m for m in before if m not in result.remove]}
    return result


def unescape(field: str) -> str:
    """fstab and mountinfo write a blank in a path as \\040 (octal escapes)."""
    return field.encode().decode("unicode_escape") if "\\" in field else field


def read_fstab(path: str = "/etc/fstab") -> dict[str, tuple[str, str]]:
    entries: dict[str, tuple[str, str]] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) >= 3 and not fields[0].startswith("#"):
                    entries[unescape(fields[1])] = (unescape(fields[0]), fields[2])
    except FileNotFoundError:
        pass
    return entries


def read_mounted(path: str = "/proc/self/mountinfo") -> dict[str, str]:
    """Mount point -> source of every filesystem mounted now (what findmnt lists)."""
    mounted: dict[str, str] = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            head, _separator, tail = line.partition(" - ")
            fields, rest = head.split(), tail.split()
            if len(fields) >= 5 and len(rest) >= 2:
                mounted[unescape(fields[4])] = unescape(rest[1])
    return mounted


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "filesystems": {"type": "list", "elements": "dict", "required": True},
            **RECORD_OPTIONS,
        },
        supports_check_mode=True,
    )
    params = module.params
    record = load_record(module, RECORD_KEYS)
    result = plan(
        params["filesystems"],
        read_fstab(),
        read_mounted(),
        record,
        params["host"],
        remove_absent=params["remove_absent"],
    )
    fail_on_errors(module, result)
    module.exit_json(
        changed=False,
        mounts=result.mounts,
        missing_dirs=[m["mount"] for m in result.mounts if not os.path.isdir(m["mount"])],
        site_managed=result.site_managed,
        remove=result.remove,
        nfs_client=any(m["fstype"] in NFS_TYPES for m in result.mounts),
        notes=result.notes,
        record_changed=result.record_before != record,
        record_before=result.record_before,
        record_after=result.record_after,
    )


if __name__ == "__main__":
    main()
