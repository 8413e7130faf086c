#!/usr/bin/python
# ruff: noqa: E402  (Ansible modules keep DOCUMENTATION above the imports)
"""Ansible module: resume the nodes slurmctld drained while their slurmd still ran the old files."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_config_drains
short_description: Resume nodes Slurm drained for a size or GRES mismatch their slurmd no longer has
description:
  - Runs on a host where the Slurm client commands reach the live slurmctld (the first
    controller), after slurmd restarted on the nodes with the new files.
  - A slurmctld restarted with new node sizes or GRES (shards, MPS, more GPUs) checks every node
    as it registers; a node whose slurmd still runs the old files reports the old counts and is
    drained (`gres/shard count reported lower than configured (0 < 4)`, `Low RealMemory`). That
    drain outlives the slurmd restart that brings the new files.
  - For each of O(nodes) drained by the Slurm user for such a mismatch before its slurmd last
    started, waits until slurmd has registered again (at most O(timeout) seconds), then resumes
    it. A drain set after slurmd started (the new files mismatch too), a drain with any other
    reason, or one set by an administrator is left as it is.
options:
  nodes:
    description: Compute nodes whose slurmd restarted with the new files.
    type: list
    elements: str
    required: true
  timeout:
    description: Seconds to wait for those nodes' slurmd to register again.
    type: int
    default: 60
author: gpucluster maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Resume the nodes drained while their slurmd ran the old files
  gpucluster.cluster.slurm_config_drains:
    nodes: "{{ groups['slurm_compute_nodes'] }}"
  when: inventory_hostname == groups['slurm_controllers'][0]
"""

RETURN = r"""
resumed:
  description: Nodes this run resumed.
  type: list
  returned: always
left:
  description: Nodes still drained for a mismatch, with their reason (their new registration mismatches too, or slurmd did not register again in time).
  type: dict
  returned: always
"""

import re
import time
from datetime import datetime

from ansible.module_utils.basic import AnsibleModule

# What slurmctld's check of a registering node says (node_mgr.c), before its counts.
MISMATCH = re.compile(
    r"^(gres/\S+ count reported lower than configured|Low RealMemory|Low TmpDisk|"
    r"Low socket\*core\*thread count|Low CPUs)"
)
# slurmctld appends who set the reason and when: `[slurm@2026-11-27T14:51:09]`.
STAMP = re.compile(r"\[(\S+)@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\]\s*$")


def records(text: str) -> dict[str, dict[str, str]]:
    """`scontrol show node --oneliner` -> node -> its fields (Reason runs to the end of the line)."""
    out: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        line, _, reason = line.partition(" Reason=")
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if "NodeName" in fields:
            fields["Reason"] = reason.strip()
            out[fields["NodeName"]] = fields
    return out


def stale_drain(fields: dict[str, str], slurm_user: str) -> tuple[bool, bool]:
    """(drained by Slurm for a mismatch, and before its slurmd last started)."""
    if "DRAIN" not in fields.get("State", "") or not MISMATCH.match(fields.get("Reason", "")):
        return False, False
    stamp = STAMP.search(fields["Reason"])
    if stamp is None or stamp.group(1) != slurm_user:
        return False, False
    started = fields.get("SlurmdStartTime", "")
    try:
        before = datetime.fromisoformat(stamp.group(2)) < datetime.fromisoformat(started)
    except ValueError:
        before = False
    return True, before


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nodes": {"type": "list", "elements": "str", "required": True},
            "timeout": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    wanted = set(module.params["nodes"])
    rc, out, err = module.run_command(["scontrol", "show", "config"])
    if rc != 0:
        module.fail_json(msg=f"scontrol show config: {err or out}")
    found = re.search(r"^SlurmUser\s*=\s*(\S+?)\(", out, re.MULTILINE)
    slurm_user = found.group(1) if found else "slurm"
    deadline = time.monotonic() + module.params["timeout"]
    resumed: list[str] = []
    while True:
        rc, out, err = module.run_command(["scontrol", "show", "node", "--oneliner"])
        if rc != 0:
            module.fail_json(msg=f"scontrol show node: {err or out}")
        nodes = {n: f for n, f in records(out).items() if n in wanted}
        mismatched = {n: stale_drain(f, slurm_user) for n, f in nodes.items()}
        ready = sorted(n for n, (drained, before) in mismatched.items() if drained and before)
        for node in ready:
            if not module.check_mode:
                rc, out, err = module.run_command(["scontrol", "update", f"NodeName={node}", "State=RESUME"])
                if rc != 0:
                    module.fail_json(msg=f"scontrol update NodeName={node} State=RESUME: {err or out}")
            resumed.append(node)
        waiting = {n for n, (drained, before) in mismatched.items() if drained and not before}
        if not waiting or time.monotonic() >= deadline or module.check_mode:
            left = {n: nodes[n]["Reason"] for n in sorted(waiting)}
            module.exit_json(changed=bool(resumed), resumed=sorted(resumed), left=left)
        time.sleep(2)


if __name__ == "__main__":
    main()
