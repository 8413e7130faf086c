#!/usr/bin/python
# ruff: noqa: E402  (Ansible modules keep DOCUMENTATION above the imports)
"""Ansible module: install Slurm's rendered files in one pass and say how the daemons must take them."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_config_files
short_description: Install rendered Slurm files and decide between reconfigure and restart
description:
  - Writes each file of O(files) into O(dest) atomically when its content differs, removes the
    files of O(absent), and creates O(directories).
  - A new slurm.conf is parsed with C(SLURM_CONF=<new> scontrol show hostnames) before it replaces
    the live one (a slurm.conf that does not parse makes Slurm 22.05 daemons exit on reconfigure).
  - Returns RV(restart) when the change is one Slurm applies only on restart (a slurm.conf line
    matching O(restart_keys_regex) changed, or a file of O(restart_files) changed), and
    RV(reconfigure) for other changes. Neither is set on a first install (no slurm.conf before).
  - One module call instead of a copy task per file keeps a converge fast on many hosts.
options:
  dest:
    description: Slurm configuration directory.
    type: path
    default: /etc/slurm
  files:
    description: File name -> exact content.
    type: dict
    required: true
  absent:
    description: File names in O(dest) managed here that the renderer no longer produces.
    type: list
    elements: str
    default: []
  directories:
    description: Directories to create, each with path, owner and mode.
    type: list
    elements: dict
    default: []
  restart_keys_regex:
    description: slurm.conf lines matching this need a restart when they change.
    type: str
    required: true
  restart_files:
    description: Files whose change needs a daemon restart (read by slurmd at start only).
    type: list
    elements: str
    default: [gres.conf, cgroup.conf]
  validate:
    description: Parse a new slurm.conf with scontrol before installing it.
    type: bool
    default: true
author: gpucluster maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Install the rendered Slurm files, parsing slurm.conf first
  gpucluster.cluster.slurm_config_files:
    dest: /etc/slurm
    files:
      slurm.conf: "{{ lookup('ansible.builtin.file', 'build/prod/slurm/slurm.conf') }}"
      cgroup.conf: "{{ lookup('ansible.builtin.file', 'build/prod/slurm/cgroup.conf') }}"
    absent: [topology.yaml]
    directories:
      - {path: /var/log/slurm, owner: slurm, mode: "0755"}
    restart_keys_regex: '^(NodeName|SlurmctldHost|\w+Type)[=\s]'
  register: slurm_files

- name: Restart the daemons when a change needs it
  ansible.builtin.debug:
    msg: "{{ 'restart' if slurm_files.restart else 'reconfigure' if slurm_files.reconfigure else 'nothing' }}"
"""

RETURN = r"""
changed_files:
  description: Files written or removed.
  type: list
  returned: always
restart:
  description: The change needs slurmctld/slurmd restarts.
  type: bool
  returned: always
reconfigure:
  description: The change is applied by scontrol reconfigure.
  type: bool
  returned: always
"""

import grp
import os
import pwd
import re
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule

SLURM_CONF = "slurm.conf"


def restart_lines(text: str, regex: str) -> list[str]:
    pattern = re.compile(regex)
    return [line for line in text.splitlines() if pattern.match(line)]


def decide(
    before: dict[str, str | None], after: dict[str, str | None], regex: str, restart_files: list[str]
) -> tuple[list[str], bool, bool]:
    """(changed file names, restart, reconfigure) for a change from `before` to `after` (None: absent)."""
    changed = sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name))
    if not changed or before.get(SLURM_CONF) is None:
        return changed, False, False
    restart = any(name in restart_files for name in changed) or restart_lines(
        before[SLURM_CONF] or "", regex
    ) != restart_lines(after.get(SLURM_CONF) or "", regex)
    return changed, restart, not restart


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _write(module: AnsibleModule, path: str, content: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".slurm-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(content)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        module.fail_json(msg=f"cannot write {path}: {exc}")


def _validate(module: AnsibleModule, content: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".slurm.conf-check-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        rc, out, err = module.run_command(
            ["scontrol", "show", "hostnames", "localhost"], environ_update={"SLURM_CONF": tmp}
        )
    finally:
        os.unlink(tmp)
    if rc != 0:
        module.fail_json(
            msg=f"the new slurm.conf does not parse; the live one is unchanged: {(err or out).strip()}"
        )


def _ensure_directory(module: AnsibleModule, spec: dict[str, Any]) -> bool:
    path, mode = spec["path"], int(str(spec.get("mode", "0755")), 8)
    uid = pwd.getpwnam(spec.get("owner", "root")).pw_uid
    gid = grp.getgrnam(spec.get("group", spec.get("owner", "root"))).gr_gid
    changed = False
    if not os.path.isdir(path):
        if not module.check_mode:
            os.makedirs(path, exist_ok=True)
        changed = True
    if module.check_mode and changed:
        return True
    info = os.stat(path)
    if (info.st_mode & 0o7777) != mode or info.st_uid != uid or info.st_gid != gid:
        if not module.check_mode:
            os.chown(path, uid, gid)
            os.chmod(path, mode)
        changed = True
    return changed


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "dest": {"type": "path", "default": "/etc/slurm"},
            "files": {"type": "dict", "required": True},
            "absent": {"type": "list", "elements": "str", "default": []},
            "directories": {"type": "list", "elements": "dict", "default": []},
            # A regular expression of slurm.conf keys, no secret (validate-modules guesses from "keys").
            "restart_keys_regex": {"type": "str", "required": True, "no_log": False},
            "restart_files": {"type": "list", "elements": "str", "default": ["gres.conf", "cgroup.conf"]},
            "validate": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    dirs_changed = [spec["path"] for spec in params["directories"] if _ensure_directory(module, spec)]
    names = sorted(set(params["files"]) | set(params["absent"]))
    before = {name: _read(os.path.join(params["dest"], name)) for name in names}
    after: dict[str, str | None] = {name: None for name in params["absent"]}
    after.update({name: str(content) for name, content in params["files"].items()})
    changed, restart, reconfigure = decide(
        before, after, params["restart_keys_regex"], params["restart_files"]
    )
    if SLURM_CONF in changed and after.get(SLURM_CONF) is not None and params["validate"]:
        _validate(module, after[SLURM_CONF] or "")
    if not module.check_mode:
        for name in changed:
            path = os.path.join(params["dest"], name)
            content = after[name]
            if content is None:
                os.unlink(path)
            else:
                _write(module, path, content)
    module.exit_json(
        changed=bool(changed or dirs_changed),
        changed_files=changed,
        directories=dirs_changed,
        restart=restart,
        reconfigure=reconfigure,
    )


if __name__ == "__main__":
    main()
