#!/usr/bin/python
# ruff: noqa: E402  (Ansible modules keep DOCUMENTATION above the imports)
"""Ansible module: give users a lasting /run/user/<uid> (lingering, user-runtime-dir@<uid>
started) in one call per host, instead of three tasks per user."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: user_runtime_dirs
short_description: Give users a lasting /run/user/<uid> on a host
description:
  - Records each user of O(users) as lingering (the empty file /var/lib/systemd/linger/<user>, root
    0644, what C(loginctl enable-linger) writes; loginctl itself needs a D-Bus peer check that fails
    through a namespace-entering connection) and starts C(user-runtime-dir@<uid>.service) where it is
    not active, so that /run/user/<uid> exists now and after each boot.
  - One module call for every user (a lab re-converge spent three tasks per user per node here).
  - Fails naming the users that do not exist on the host.
  - Supports check mode (reports what it would change) and diff.
options:
  users:
    description: Names of the users that need their runtime directory.
    type: list
    elements: str
    required: true
  linger_dir:
    description: Where systemd-logind keeps its lingering users.
    type: path
    default: /var/lib/systemd/linger
author: gpucluster maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Keep alice's and bob's runtime directories
  gpucluster.cluster.user_runtime_dirs:
    users: [alice, bob]
"""

RETURN = r"""
lingering:
  description: Users recorded as lingering by this call.
  type: list
  returned: always
started:
  description: Units started by this call (user-runtime-dir@<uid>.service).
  type: list
  returned: always
"""

import os
import pwd

from ansible.module_utils.basic import AnsibleModule


def unit_of(uid: int) -> str:
    return f"user-runtime-dir@{uid}.service"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "users": {"type": "list", "elements": "str", "required": True},
            "linger_dir": {"type": "path", "default": "/var/lib/systemd/linger"},
        },
        supports_check_mode=True,
    )
    users: list[str] = list(dict.fromkeys(module.params["users"]))
    linger_dir: str = module.params["linger_dir"]

    uids: dict[str, int] = {}
    missing: list[str] = []
    for user in users:
        try:
            uids[user] = pwd.getpwnam(user).pw_uid
        except KeyError:
            missing.append(user)
    if missing:
        module.fail_json(
            msg=f"no such user on this host: {', '.join(missing)} (the users role creates them first)"
        )

    lingering = [user for user in users if not os.path.isfile(os.path.join(linger_dir, user))]
    systemctl = module.get_bin_path("systemctl", required=True)
    units = [unit_of(uids[user]) for user in users]
    inactive: list[str] = []
    if units:
        # One line per unit, in order; exit status non-zero when any is not active.
        _rc, out, _err = module.run_command([systemctl, "is-active", *units])
        states = (out.splitlines() + [""] * len(units))[: len(units)]
        inactive = [unit for unit, state in zip(units, states, strict=True) if state.strip() != "active"]

    changed = bool(lingering or inactive)
    diff = {
        "before": {
            "lingering": sorted(set(users) - set(lingering)),
            "active": sorted(set(units) - set(inactive)),
        },
        "after": {"lingering": sorted(users), "active": sorted(units)},
    }
    if module.check_mode or not changed:
        module.exit_json(changed=changed, lingering=lingering, started=inactive, diff=diff)

    if lingering:
        os.makedirs(linger_dir, mode=0o755, exist_ok=True)
    for user in lingering:
        path = os.path.join(linger_dir, user)
        with open(path, "w", encoding="utf-8"):
            pass
        os.chown(path, 0, 0)
        os.chmod(path, 0o644)
    if inactive:
        rc, out, err = module.run_command([systemctl, "start", *inactive])
        if rc != 0:
            module.fail_json(msg=f"systemctl start {' '.join(inactive)} failed: {err or out}", rc=rc)
    module.exit_json(changed=True, lingering=lingering, started=inactive, diff=diff)


if __name__ == "__main__":
    main()
