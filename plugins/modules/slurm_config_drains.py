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
  - "Also names the nodes whose GRES slurmctld still counts as the old files said (`Gres=` of
    `scontrol show node` against its `CfgTRES`) once their slurmd has registered again. Seen in
    the lab on 22.05.8 and 24.11.5, not on 26.05: a GPU count changed (8 to 1) kept its old value
    through the node's new registration, until slurmctld restarted once more; a job asking for
    two GPUs there waited for ever instead of being refused."
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
  nodes_before:
    description:
      - "`scontrol show node --oneliner` as it was before slurmd restarted: a node whose
        SlurmdStartTime has moved since has registered again. Without it no GRES count is
        checked."
    type: str
    default: ""
  restarted:
    description: The nodes of O(nodes) whose slurmd this run restarted (their GRES counts are checked once they registered again; a power-saved node is not awaited).
    type: list
    elements: str
    default: []
  fail_on_kept_counts:
    description: Fail when a node's GRES count is still the old one (the check after slurmctld's second restart).
    type: bool
    default: false
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
kept_counts:
  description: Nodes registered again whose GRES slurmctld counts otherwise than configured, with both (`gpu=8 configured gpu=1`).
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
STAMP_ANYWHERE = re.compile(r"\[\S+@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\]")


def records(text: str) -> dict[str, dict[str, str]]:
    """`scontrol show node --oneliner` -> node -> its fields. Reason runs to the stamp slurmctld
    appends (`[user@time]`): fields such as Comment follow it on the line, and a Comment holds
    blanks (the gate's burn-in record)."""
    out: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        line, _, reason = line.partition(" Reason=")
        stamp = STAMP_ANYWHERE.search(reason)
        rest = reason[stamp.end() :] if stamp else ""
        reason = reason[: stamp.end()] if stamp else reason
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if "NodeName" in fields:
            fields["Reason"] = reason.strip()
            # Fields after the Reason, up to a Comment (whose value may hold anything).
            head, _, comment = rest.partition(" Comment=")
            fields.update(item.split("=", 1) for item in head.split() if "=" in item)
            if comment:
                fields["Comment"] = comment.strip()
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


def gres_counts(gres: str) -> dict[str, int]:
    """`gpu:h100:8(S:0),shard:h100:4(S:0)` -> {gpu: 8, shard: 4} (types summed)."""
    counts: dict[str, int] = {}
    for item in re.sub(r"\([^)]*\)", "", gres).split(","):
        parts = item.strip().split(":")
        if len(parts) >= 2 and parts[-1].isdigit():
            counts[parts[0]] = counts.get(parts[0], 0) + int(parts[-1])
    return counts


def configured_counts(cfg_tres: str) -> dict[str, int]:
    """`cpu=2,mem=1G,gres/gpu=1,gres/gpu:h100=1,gres/shard=4` -> {gpu: 1, shard: 4} (untyped entries)."""
    counts: dict[str, int] = {}
    for item in cfg_tres.split(","):
        key, _, value = item.partition("=")
        if key.startswith("gres/") and ":" not in key and value.isdigit():
            counts[key[len("gres/") :]] = int(value)
    return counts


def kept_count(fields: dict[str, str]) -> str:
    """How the node's GRES as slurmctld counts them differs from its configured TRES ("" if not)."""
    held = gres_counts(fields.get("Gres", ""))
    configured = configured_counts(fields.get("CfgTRES", ""))
    differ = sorted(name for name in held.keys() & configured.keys() if held[name] != configured[name])
    if not differ:
        return ""
    return " ".join(f"{n}={held[n]} configured {n}={configured[n]}" for n in differ)


def ask(module: AnsibleModule, argv: list[str], deadline: float) -> str:
    """The command's output; retried until the deadline (slurmctld may be restarting)."""
    while True:
        rc, out, err = module.run_command(argv)
        if rc == 0:
            return str(out)
        if time.monotonic() >= deadline:
            module.fail_json(msg=f"{' '.join(argv)}: {err or out}")
        time.sleep(2)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nodes": {"type": "list", "elements": "str", "required": True},
            "timeout": {"type": "int", "default": 60},
            "nodes_before": {"type": "str", "default": ""},
            "restarted": {"type": "list", "elements": "str", "default": []},
            "fail_on_kept_counts": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    wanted = set(module.params["nodes"])
    deadline = time.monotonic() + module.params["timeout"]
    out = ask(module, ["scontrol", "show", "config"], deadline)
    found = re.search(r"^SlurmUser\s*=\s*(\S+?)\(", out, re.MULTILINE)
    slurm_user = found.group(1) if found else "slurm"
    before_restart = records(module.params["nodes_before"])
    restarted = set(module.params["restarted"]) & set(before_restart)
    must_match = module.params["fail_on_kept_counts"]
    resumed: list[str] = []
    while True:
        out = ask(module, ["scontrol", "show", "node", "--oneliner"], deadline)
        nodes = {n: f for n, f in records(out).items() if n in wanted}
        mismatched = {n: stale_drain(f, slurm_user) for n, f in nodes.items()}
        ready = sorted(n for n, (drained, before) in mismatched.items() if drained and before)
        for node in ready:
            if not module.check_mode:
                rc, out, err = module.run_command(["scontrol", "update", f"NodeName={node}", "State=RESUME"])
                if rc != 0:
                    module.fail_json(msg=f"scontrol update NodeName={node} State=RESUME: {err or out}")
            resumed.append(node)
        waiting = {n for n, (drained, earlier) in mismatched.items() if drained and not earlier}
        # A count is only judged once the node's new slurmd has registered (its start time moved).
        unregistered = {
            n
            for n in nodes
            if n in restarted
            and "POWER" not in nodes[n].get("State", "")
            and nodes[n].get("SlurmdStartTime") == before_restart[n].get("SlurmdStartTime")
        }
        kept = {n: kept_count(f) for n, f in nodes.items() if n in restarted and n not in unregistered}
        kept = {n: why for n, why in sorted(kept.items()) if why}
        # After slurmctld's second restart the counts are awaited too: each node registers again.
        pending = waiting or unregistered or (kept and must_match)
        if not pending or time.monotonic() >= deadline or module.check_mode:
            left = {n: nodes[n]["Reason"] for n in sorted(waiting)}
            if kept and must_match:
                module.fail_json(
                    msg="slurmctld still counts these nodes' GRES as before the change: "
                    + "; ".join(f"{n}: {why}" for n, why in kept.items()),
                    kept_counts=kept,
                )
            module.exit_json(changed=bool(resumed), resumed=sorted(resumed), left=left, kept_counts=kept)
        time.sleep(2)


if __name__ == "__main__":
    main()
