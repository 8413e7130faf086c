#!/usr/bin/python
# ruff: noqa: E402  (Ansible modules keep DOCUMENTATION above the imports)
"""Ansible module: decide which Unix accounts of hosts/users.yaml the users role may create, change
or delete on this host, from the accounts it finds and the record of those the role created."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: unix_accounts_plan
short_description: Plan the Unix groups and users the users role manages on a host
description:
  - Compares O(desired) (hosts/users.yaml rendered by gpucluster) with the users and groups the
    host knows (NSS, so directory services count too) and with O(record), the JSON file listing
    the accounts the users role created there. Changes nothing.
  - An account the role did not create is never changed. If one of a wanted name exists with
    another id, or holds a wanted id under another name, the module fails naming the host, the
    account, the existing id and the wanted id. If it exists with the wanted id it is adopted
    (recorded and managed from then on) only with O(adopt_existing); otherwise it is left alone.
  - Accounts in the record that O(desired) no longer lists are to be deleted only with
    O(remove_absent).
options:
  desired:
    description: >-
      Mapping with C(groups) (name, gid), C(users) (name, uid, group, groups, shell, home,
      ssh_authorized_keys) and optionally C(shared_homes) (mount, created_on, hosts): a home below
      such a mount point is created, and its authorized_keys written, only on C(created_on); the
      other hosts of C(hosts) see it through the shared filesystem.
    type: dict
    required: true
  record:
    description: Path of the JSON record of the accounts the role created on this host (may not exist yet).
    type: path
    required: true
  adopt_existing:
    description: Manage an existing account of a wanted name and id the role did not create.
    type: bool
    default: false
  remove_absent:
    description: Delete recorded accounts that O(desired) no longer lists.
    type: bool
    default: false
  host:
    description: Name of the host in messages (the inventory name).
    type: str
    required: true
  cluster_keys:
    description: >-
      Give each user whose home is on a shared home an SSH key of its own for use inside the cluster
      (~/.ssh/id_ed25519, made by the role where the home is created) and let that key in: its
      public half is part of the user's authorized keys, after the inventory's.
    type: bool
    default: false
author: gpucluster maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Plan the cluster's Unix accounts on this host
  gpucluster.cluster.unix_accounts_plan:
    desired: "{{ lookup('ansible.builtin.file', 'build/prod/hosts/users.yaml') | from_yaml }}"
    record: /var/lib/gpucluster/users/created.json
    host: "{{ inventory_hostname }}"
  register: accounts_plan

- name: Say which accounts are left alone
  ansible.builtin.debug:
    msg: "{{ accounts_plan.notes }}"
"""

RETURN = r"""
groups:
  description: Managed groups the host does not have exactly as desired (to create or update), in order.
  type: list
  returned: always
users:
  description: >-
    Managed users the host does not have exactly as desired (uid, primary and supplementary groups,
    shell, home), in order, each with C(create_home): whether this host creates the home.
  type: list
  returned: always
keys_to_install:
  description: >-
    Managed users whose home this host creates and whose authorized_keys file does not hold exactly
    their desired keys (the inventory's, then the cluster key's public half with O(cluster_keys));
    each with C(cluster_key), whether the user has a cluster key.
  type: list
  returned: always
cluster_keys_to_make:
  description: Users with a cluster key (see O(cluster_keys)) whose home this host creates and who have none yet.
  type: list
  returned: always
record_changed:
  description: Whether record_before differs from the record on the host (the record file is written only then).
  type: bool
  returned: always
remove_groups:
  description: Recorded groups to delete (only with remove_absent).
  type: list
  returned: always
remove_users:
  description: Recorded users to delete (only with remove_absent).
  type: list
  returned: always
notes:
  description: Accounts left alone, adopted, or kept although no longer listed, one sentence each.
  type: list
  returned: always
record_before:
  description: The record to write before any change (managed accounts included before they exist).
  type: dict
  returned: always
record_after:
  description: The record once the deletions are done.
  type: dict
  returned: always
"""

import grp
import os
import pwd
from dataclasses import dataclass, field
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpucluster.cluster.plugins.module_utils.record import (
    RECORD_OPTIONS,
    RecordPlan,
    fail_on_errors,
    load_record,
)

KINDS = (("groups", "group", "gid"), ("users", "user", "uid"))
RECORD_KEYS = tuple(kind[0] for kind in KINDS)


@dataclass
class Plan(RecordPlan):
    groups: list[dict[str, Any]] = field(default_factory=list)
    users: list[dict[str, Any]] = field(default_factory=list)
    remove_groups: list[str] = field(default_factory=list)
    remove_users: list[str] = field(default_factory=list)


def on_shared_home(home: str, shared_homes: list[dict[str, Any]]) -> bool:
    return any(home.startswith(shared["mount"].rstrip("/") + "/") for shared in shared_homes)


def creates_home(home: str, shared_homes: list[dict[str, Any]], host: str) -> bool:
    """Whether this host creates the home: always, unless the home is on a shared filesystem this
    host mounts and another host is the one that creates homes there (once, for every host)."""
    for shared in shared_homes:
        mount = shared["mount"].rstrip("/")
        if home.startswith(mount + "/") and host in shared.get("hosts", []):
            return bool(shared["created_on"] == host)
    return True


def plan(
    desired: dict[str, Any],
    existing: dict[str, dict[str, int]],
    record: dict[str, list[str]],
    host: str,
    adopt_existing: bool = False,
    remove_absent: bool = False,
) -> Plan:
    """`existing`: {"groups": {name: gid}, "users": {name: uid}} as the host resolves them;
    `record`: {"groups": [...], "users": [...]} the role created before."""
    result = Plan()
    for key, kind, id_key in KINDS:
        ours = set(record.get(key, []))
        present = existing.get(key, {})
        wanted = list(desired.get(key) or [])
        wanted_names = {item["name"] for item in wanted}
        absent = sorted(ours - wanted_names)
        removing = set(absent) if remove_absent else set()
        # Who holds each id now, the accounts deleted in this run aside (a rename frees the old id).
        holder: dict[int, str] = {}
        for name, number in present.items():
            if name not in removing:
                holder.setdefault(number, name)
        managed: list[dict[str, Any]] = []
        if key == "users":
            shared = list(desired.get("shared_homes") or [])
            wanted = [
                {**item, "create_home": creates_home(item.get("home", ""), shared, host)} for item in wanted
            ]
        for item in wanted:
            name, number = item["name"], item[id_key]
            found = present.get(name)
            other = holder.get(number)
            if name not in ours and found is not None and found != number:
                result.errors.append(
                    f"{host}: {kind} `{name}` exists with {id_key} {found}, not created by the users role; "
                    f"the inventory wants {id_key} {number}"
                )
            elif other is not None and other != name:
                result.errors.append(
                    f"{host}: {kind} `{name}` wants {id_key} {number}, which {kind} `{other}` already has"
                    + ("" if other in ours else " (not created by the users role)")
                )
            elif name in ours or found is None:
                managed.append(item)
            elif adopt_existing:
                managed.append(item)
                result.notes.append(f"{host}: {kind} `{name}` ({id_key} {number}) existed; adopted")
            else:
                result.notes.append(
                    f"{host}: {kind} `{name}` ({id_key} {number}) exists and was not created by the users role: "
                    "left alone (users_adopt_existing: true manages it)"
                )
        for name in absent:
            if not remove_absent:
                result.notes.append(
                    f"{host}: {kind} `{name}` is no longer in the inventory: kept (users_remove_absent: true deletes it)"
                )
        setattr(result, key, managed)
        setattr(result, f"remove_{key}", sorted(removing))
        before = sorted(ours | {item["name"] for item in managed})
        result.record_before[key] = before
        result.record_after[key] = [name for name in before if name not in removing]
    return result


def existing_accounts() -> dict[str, dict[str, int]]:
    """Every group and user the host resolves (files and directory services alike)."""
    return {
        "groups": {entry.gr_name: entry.gr_gid for entry in grp.getgrall()},
        "users": {entry.pw_name: entry.pw_uid for entry in pwd.getpwall()},
    }


def group_in_place(item: dict[str, Any]) -> bool:
    try:
        return grp.getgrnam(item["name"]).gr_gid == item["gid"]
    except KeyError:
        return False


def user_in_place(item: dict[str, Any]) -> bool:
    """The user exists with exactly the desired uid, groups, shell and home (and the home exists)."""
    try:
        entry = pwd.getpwnam(item["name"])
        primary = grp.getgrnam(item["group"]).gr_gid
    except KeyError:
        return False
    member_of = {group.gr_name for group in grp.getgrall() if item["name"] in group.gr_mem}
    return (
        (entry.pw_uid, entry.pw_gid, entry.pw_shell, entry.pw_dir)
        == (item["uid"], primary, item["shell"], item["home"])
        and member_of == set(item["groups"])
        and (os.path.isdir(item["home"]) or not item.get("create_home", True))
    )


CLUSTER_KEY = os.path.join(".ssh", "id_ed25519")


def key_lines(path: str) -> list[str] | None:
    """The non-comment lines of a key file; [] when it does not exist, None when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return [line.strip() for line in handle if line.strip() and not line.startswith("#")]
    except FileNotFoundError:
        return []
    except OSError:
        return None


def keys_in_place(item: dict[str, Any]) -> bool:
    """~/.ssh/authorized_keys holds exactly the desired keys (no file and no keys: in place): the
    inventory's, then the public half of the user's cluster key when there is one."""
    lines = key_lines(os.path.join(item["home"], ".ssh", "authorized_keys"))
    wanted = list(item["ssh_authorized_keys"])
    if item.get("cluster_key"):
        public = key_lines(os.path.join(item["home"], CLUSTER_KEY + ".pub"))
        if not public:
            return False
        wanted += public[:1]
    return lines == wanted


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            **RECORD_OPTIONS,
            "desired": {"type": "dict", "required": True},
            "adopt_existing": {"type": "bool", "default": False},
            "cluster_keys": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    record = load_record(module, RECORD_KEYS)
    result = plan(
        params["desired"],
        existing_accounts(),
        record,
        params["host"],
        adopt_existing=params["adopt_existing"],
        remove_absent=params["remove_absent"],
    )
    fail_on_errors(module, result)
    shared_homes = list(params["desired"].get("shared_homes") or [])
    home_here = [
        {**item, "cluster_key": params["cluster_keys"] and on_shared_home(item["home"], shared_homes)}
        for item in result.users
        if item.get("create_home", True)
    ]
    # Only what differs goes to the role's tasks: a converge with nothing to do costs this one call.
    module.exit_json(
        changed=False,
        groups=[item for item in result.groups if not group_in_place(item)],
        users=[item for item in result.users if not user_in_place(item)],
        keys_to_install=[item for item in home_here if not keys_in_place(item)],
        cluster_keys_to_make=[
            item
            for item in home_here
            if item["cluster_key"] and not os.path.exists(os.path.join(item["home"], CLUSTER_KEY + ".pub"))
        ],
        record_changed=result.record_before != record,
        remove_groups=result.remove_groups,
        remove_users=result.remove_users,
        notes=result.notes,
        record_before=result.record_before,
        record_after=result.record_after,
    )


if __name__ == "__main__":
    main()
