#!/usr/bin/python
# ruff: noqa: E402  (Ansible modules keep DOCUMENTATION above the imports)
"""Ansible module: retire the Slurm partitions a new configuration drops, losing no job."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_partitions_change
short_description: Empty the Slurm partitions the new configuration no longer has, moving their pending jobs
description:
  - Runs where the Slurm commands reach the live slurmctld, before the new configuration is
    installed. slurmctld fails the jobs of a partition its configuration no longer has
    ("Invalid partition"), so every live partition missing from O(partitions) is emptied first.
  - A partition renamed (in O(renames), or one gone and one new with the same nodes) - the new
    partition is created live from its O(partitions) definition (C(scontrol create), nodes
    slurmctld does not know yet left out), the old one set State=INACTIVE (no job queued or
    started there), its pending jobs moved to the new one (C(scontrol update JobId=... Partition=)).
  - A partition removed - State=DRAIN (no job queued there; the queued ones still start).
  - Then waits until no job is left in them. Running jobs are never killed or requeued; after
    O(timeout) seconds the module fails listing the jobs left, and the configuration is not
    replaced (the partitions stay closed).
  - Where no slurmctld answers (a first install), nothing is done.
options:
  partitions:
    description: Name -> the partition of the new configuration as C(scontrol create) takes it (PartitionName=... Nodes=... State=UP).
    type: dict
    required: true
  renames:
    description: Old name -> new name, for renames whose nodes also changed (the same nodes are paired without it).
    type: dict
    default: {}
  timeout:
    description: Seconds to wait for the jobs of the partitions that go.
    type: int
    default: 3600
  poll:
    description: Seconds between two looks at the queue.
    type: int
    default: 5
author: gpucluster maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Close the partitions the new configuration drops and wait for their jobs (never killed)
  gpucluster.cluster.slurm_partitions_change:
    partitions:
      interactive: PartitionName=interactive Nodes=l40s-[01-08] Default=NO MaxTime=08:00:00 State=UP
      train: PartitionName=train Nodes=h200-r[1-2]-[01-16] Default=YES MaxTime=7-00:00:00 State=UP
    timeout: 3600
"""

RETURN = r"""
gone:
  description: Live partitions the new configuration drops.
  type: list
  returned: always
renamed:
  description: Old name -> new name of the partitions renamed.
  type: dict
  returned: always
created:
  description: Partitions created live ahead of the new configuration.
  type: list
  returned: always
moved:
  description: Pending jobs moved, as "JOBID old -> new".
  type: list
  returned: always
waited:
  description: Seconds spent waiting for the jobs of the partitions that go.
  type: float
  returned: always
"""

import re
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule

FIELD_RE = re.compile(r"(\w+)=(\S*)")


def parse_partitions(text: str) -> dict[str, dict[str, str]]:
    """`scontrol show partition --oneliner`: name -> its fields."""
    found = {}
    for line in text.splitlines():
        fields = dict(FIELD_RE.findall(line))
        if "PartitionName" in fields:
            found[fields["PartitionName"]] = fields
    return found


def nodes_of(definition: str) -> str:
    return dict(FIELD_RE.findall(definition)).get("Nodes", "")


def pair_renames(
    gone: list[str], fresh: list[str], hosts: dict[str, frozenset[str]], explicit: dict[str, str]
) -> dict[str, str]:
    """Old -> new: the explicit ones, then a gone partition and a new one with the same nodes."""
    renames = {old: new for old, new in explicit.items() if old in gone and new in fresh}
    for old in gone:
        if old in renames:
            continue
        match = next(
            (
                new
                for new in fresh
                if new not in renames.values() and hosts.get(new) and hosts.get(new) == hosts.get(old)
            ),
            None,
        )
        if match is not None:
            renames[old] = match
    return renames


def create_args(definition: str, known: set[str], expand: Any) -> list[str]:
    """The words of `scontrol create`, with nodes slurmctld does not know yet left out (they join
    with the new configuration)."""
    words = definition.split()
    out = []
    for word in words:
        if word.startswith("Nodes="):
            members = [n for n in expand(word[len("Nodes=") :]) if n in known]
            if members:
                out.append("Nodes=" + ",".join(members))
            continue
        out.append(word)
    return out


class Slurm:
    def __init__(self, module: AnsibleModule) -> None:
        self.module = module

    def run(self, *args: str) -> tuple[int, str]:
        rc, out, err = self.module.run_command(list(args))
        return int(rc), (str(out) + str(err)).strip()

    def must(self, *args: str) -> str:
        rc, out = self.run(*args)
        if rc != 0:
            self.module.fail_json(msg=f"{' '.join(args)} failed: {out}")
        return out

    def hostnames(self, hostlist: str) -> frozenset[str]:
        if not hostlist or hostlist == "(null)":
            return frozenset()
        return frozenset(self.must("scontrol", "show", "hostnames", hostlist).split())

    def jobs(self, partitions: list[str], states: str | None = None) -> list[str]:
        args = ["squeue", "--noheader", f"--partition={','.join(partitions)}", "--format=%i %u %T %P"]
        if states:
            args.append(f"--states={states}")
        return [line for line in self.must(*args).splitlines() if line.strip()]


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "partitions": {"type": "dict", "required": True},
            "renames": {"type": "dict", "default": {}},
            "timeout": {"type": "int", "default": 3600},
            "poll": {"type": "int", "default": 5},
        },
        supports_check_mode=True,
    )
    params = module.params
    slurm = Slurm(module)
    empty: dict[str, Any] = {"gone": [], "renamed": {}, "created": [], "moved": [], "waited": 0.0}
    if module.get_bin_path("scontrol") is None:
        module.exit_json(changed=False, msg="no Slurm commands on this host", **empty)
    rc, out = slurm.run("scontrol", "show", "partition", "--oneliner")
    if rc != 0:
        module.exit_json(changed=False, msg="no slurmctld answers", **empty)
    live = parse_partitions(out)
    wanted: dict[str, str] = {str(k): str(v) for k, v in params["partitions"].items()}
    gone = sorted(name for name in live if name not in wanted)
    if not gone:
        module.exit_json(changed=False, **empty)
    fresh = sorted(name for name in wanted if name not in live)
    hosts = {name: slurm.hostnames(live[name].get("Nodes", "")) for name in gone}
    hosts.update({name: slurm.hostnames(nodes_of(wanted[name])) for name in fresh})
    renames = pair_renames(gone, fresh, hosts, {str(k): str(v) for k, v in params["renames"].items()})
    result: dict[str, Any] = {**empty, "gone": gone, "renamed": renames}
    if module.check_mode:
        module.exit_json(changed=True, **result)
    known = set(slurm.must("sinfo", "--noheader", "--Node", "--format=%N").split())
    for old, new in renames.items():
        if new not in live and new not in result["created"]:
            words = create_args(wanted[new], known, lambda text: sorted(slurm.hostnames(text)))
            slurm.must("scontrol", "create", *words)
            result["created"].append(new)
        slurm.must("scontrol", "update", f"PartitionName={old}", "State=INACTIVE")
    for old in gone:
        if old not in renames and live[old].get("State") != "DRAIN":
            slurm.must("scontrol", "update", f"PartitionName={old}", "State=DRAIN")

    def move_pending() -> None:
        for old, new in renames.items():
            for line in slurm.jobs([old], "PENDING"):
                job = line.split()[0]
                rc, out = slurm.run("scontrol", "update", f"JobId={job}", f"Partition={new}")
                if rc == 0:
                    result["moved"].append(f"{job} {old} -> {new}")
                elif "pending" not in out.lower():  # one that started meanwhile is waited for
                    module.fail_json(msg=f"cannot move job {job} from {old} to {new}: {out}", **result)

    started = time.monotonic()
    move_pending()
    left = slurm.jobs(gone)
    while left and time.monotonic() - started < params["timeout"]:
        time.sleep(params["poll"])
        move_pending()
        left = slurm.jobs(gone)
    result["waited"] = round(time.monotonic() - started, 1)
    if left:
        module.fail_json(
            msg=(
                f"{len(left)} job(s) are still in the partitions the new configuration drops after "
                f"{params['timeout']} s; the partitions stay closed and the configuration was not replaced. "
                "Left (id user state partition): " + "; ".join(left)
            ),
            still_there=left,
            **result,
        )
    module.exit_json(changed=True, **result)


if __name__ == "__main__":
    main()
