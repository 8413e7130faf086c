#!/usr/bin/python
# ruff: noqa: E402  (Ansible modules keep DOCUMENTATION above the imports)
"""Ansible module: drain the nodes a new configuration drops, and wait until they hold no job."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_leaving_nodes
short_description: Empty the Slurm nodes that the new configuration no longer has
description:
  - Runs on a host where the Slurm client commands reach the live slurmctld (the first
    controller). Compares the nodes slurmctld knows with O(nodes), the compute nodes of the new
    configuration. Every node only slurmctld knows is leaving Slurm (moved to another scheduler,
    or removed from the inventory).
  - Drains each leaving node with O(reasons)[node] (so no new job starts there from this moment),
    then waits until no job runs on any of them. Running jobs are never killed or requeued; if
    they are still running after O(timeout) seconds, the module fails and lists them, and the
    configuration is not replaced.
  - On a first install (no slurmctld answering yet) nothing is leaving.
options:
  nodes:
    description: Compute nodes of the new configuration.
    type: list
    elements: str
    required: true
  reasons:
    description: Node -> drain reason; nodes not listed get O(default_reason).
    type: dict
    default: {}
  default_reason:
    description: Drain reason of a leaving node not in O(reasons).
    type: str
    default: "gpucluster: removed from the inventory"
  timeout:
    description: >-
      Seconds to wait for the leaving nodes' jobs to finish; omitted: the longest MaxTime of the
      partitions holding them (what their jobs may run), or 3600 where one has none (UNLIMITED).
    type: int
    required: false
  poll:
    description: Seconds between two looks at the queue.
    type: int
    default: 5
author: gpucluster maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Drain the nodes leaving Slurm and wait for their jobs (never killed)
  gpucluster.cluster.slurm_leaving_nodes:
    nodes: [gpu01, gpu02]
    reasons:
      gpu03: "gpucluster: moving to kubernetes"
    timeout: 3600
  register: leaving
  when: inventory_hostname == groups['slurm_controllers'][0]
"""

RETURN = r"""
leaving:
  description: Nodes slurmctld knows that the new configuration drops.
  type: list
  returned: always
drained:
  description: Leaving nodes this run drained (others already carried a drain).
  type: list
  returned: always
waited:
  description: Seconds spent waiting for jobs on the leaving nodes.
  type: float
  returned: always
"""

import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpucluster.cluster.plugins.module_utils.slurm_time import seconds

# The bound where a partition lets its jobs run forever.
UNBOUNDED_WAIT = 3600


def _run(module: AnsibleModule, *args: str) -> tuple[int, str, str]:
    rc, out, err = module.run_command(list(args))
    return int(rc), str(out), str(err)


def live_nodes(module: AnsibleModule) -> dict[str, str] | None:
    """Node -> state flags as slurmctld reports them; None when no slurmctld answers."""
    rc, out, _err = _run(module, "sinfo", "--noheader", "--Node", "--format=%N %T")
    if rc != 0:
        return None
    nodes: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            nodes[parts[0]] = parts[1]
    return nodes


def jobs_on(module: AnsibleModule, nodes: list[str]) -> list[str]:
    rc, out, err = _run(
        module, "squeue", "--noheader", "--nodelist", ",".join(nodes), "--format=%i %u %T %N %L"
    )
    if rc != 0:
        module.fail_json(msg=f"squeue failed: {err.strip() or out.strip()}")
    return [line.strip() for line in out.splitlines() if line.strip()]


def node_limits(module: AnsibleModule) -> dict[str, list[str]]:
    """Node -> the time limits of the partitions holding it, as `sinfo` prints them."""
    rc, out, _err = _run(module, "sinfo", "--noheader", "--Node", "--format=%N %l")
    limits: dict[str, list[str]] = {}
    for line in out.splitlines() if rc == 0 else []:
        parts = line.split()
        if len(parts) == 2:
            limits.setdefault(parts[0], []).append(parts[1])
    return limits


def wait_bound(limits: dict[str, list[str]], leaving: list[str], given: int | None) -> tuple[int, str]:
    """`given`, else the longest time limit of the partitions holding the leaving nodes, or
    UNBOUNDED_WAIT where one of them runs jobs without a limit (or none is known)."""
    if given is not None:
        return given, "slurm_common_leave_timeout"
    found = [(seconds(limit), limit) for node in leaving for limit in limits.get(node, [])]
    if not found or any(value is None for value, _ in found):
        return UNBOUNDED_WAIT, "a partition of theirs has MaxTime=UNLIMITED, no bound of Slurm's"
    value, text = max(found, key=lambda pair: pair[0] or 0)
    return value or UNBOUNDED_WAIT, f"the longest MaxTime of their partitions, {text}"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nodes": {"type": "list", "elements": "str", "required": True},
            "reasons": {"type": "dict", "default": {}},
            "default_reason": {"type": "str", "default": "gpucluster: removed from the inventory"},
            "timeout": {"type": "int", "required": False},
            "poll": {"type": "int", "default": 5},
        },
        supports_check_mode=True,
    )
    params: dict[str, Any] = module.params
    live = live_nodes(module)
    if live is None:
        module.exit_json(changed=False, leaving=[], drained=[], waited=0.0, msg="no slurmctld answers")
        return
    keep = set(params["nodes"])
    leaving = sorted(node for node in live if node not in keep)
    if not leaving:
        module.exit_json(changed=False, leaving=[], drained=[], waited=0.0)
        return
    drained = [node for node in leaving if "drain" not in live[node]]
    if module.check_mode:
        module.exit_json(changed=bool(drained), leaving=leaving, drained=drained, waited=0.0)
        return
    for node in drained:
        reason = str(params["reasons"].get(node, params["default_reason"]))
        rc, out, err = _run(
            module, "scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"
        )
        if rc != 0:
            module.fail_json(msg=f"cannot drain {node}: {err.strip() or out.strip()}", leaving=leaving)
    bound, source = wait_bound(node_limits(module), leaving, params["timeout"])
    started = time.monotonic()
    running = jobs_on(module, leaving)
    while running and time.monotonic() - started < bound:
        time.sleep(params["poll"])
        running = jobs_on(module, leaving)
    waited = round(time.monotonic() - started, 1)
    if running:
        longest = max((seconds(line.split()[-1]) or 0 for line in running), default=0)
        module.fail_json(
            msg=(
                f"{len(running)} job(s) still run on the nodes leaving Slurm after {bound} s ({source}); "
                "they stay drained and the configuration was not replaced. Still running (id user state "
                "nodes time-left): " + "; ".join(running) + ". Run again once they end, or with "
                f"-e slurm_common_leave_timeout={max(longest, bound) + 60} to wait as long as they may run"
            ),
            leaving=leaving,
            drained=drained,
            waited=waited,
            still_running=running,
        )
    module.exit_json(changed=bool(drained), leaving=leaving, drained=drained, waited=waited)


if __name__ == "__main__":
    main()
