#!/usr/bin/python
# ruff: noqa: E402  (Ansible modules keep DOCUMENTATION above the imports)
"""Ansible module: remove a list of files in one call per host (a loop of ansible.builtin.file
costs a module run per path per host on every converge)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: paths_absent
short_description: Remove several files or symbolic links from a host in one call
description:
  - Removes each path of O(paths) that exists (a file or a symbolic link; the link itself, never
    its target) and reports which. Paths that do not exist are fine.
  - Refuses a directory, naming it (the roles remove files that a daemon would otherwise read).
  - Supports check mode and diff.
options:
  paths:
    description: Absolute paths to remove.
    type: list
    elements: path
    required: true
author: gpucluster maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Remove the local copies of the files slurmctld serves
  gpucluster.cluster.paths_absent:
    paths:
      - /etc/slurm/slurm.conf
      - /etc/slurm/gres.conf
"""

RETURN = r"""
removed:
  description: The paths removed (or that would be, in check mode).
  type: list
  returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    module = AnsibleModule(
        argument_spec={"paths": {"type": "list", "elements": "path", "required": True}},
        supports_check_mode=True,
    )
    paths: list[str] = list(dict.fromkeys(module.params["paths"]))
    relative = [path for path in paths if not os.path.isabs(path)]
    if relative:
        module.fail_json(msg=f"paths must be absolute: {', '.join(relative)}")
    present = [path for path in paths if os.path.lexists(path)]
    directories = [path for path in present if os.path.isdir(path) and not os.path.islink(path)]
    if directories:
        module.fail_json(msg=f"refusing to remove a directory: {', '.join(directories)}")
    diff = {"before": {"present": present}, "after": {"present": []}}
    if not module.check_mode:
        for path in present:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as error:
                module.fail_json(msg=f"cannot remove {path}: {error.strerror}", removed=present)
    module.exit_json(changed=bool(present), removed=present, diff=diff)


if __name__ == "__main__":
    main()
