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
    O(timeout) seconds the module fails listing the jobs left with the time each may still run, and
    the configuration is not replaced (the partitions stay closed).
  - What it did live is kept in slurm.conf (O(phase)=keep, on every controller, before the wait).
    A partition created live is appended as the new configuration defines it (O(conf_lines)), a
    closed one gets its live State (and Default=NO). So a slurmctld restarted or taking over
    while the wait runs, or after it stopped, has the partitions the live one had, and every job
    moved keeps its partition.
  - O(phase) C(close) (on the host that reaches slurmctld), C(keep) (on each controller, with
    O(closing), the result of C(close)), C(wait) (with O(closing)); C(all) does the three here.
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
    description: >-
      Seconds to wait for the jobs of the partitions that go; omitted: the longest MaxTime of
      those partitions (what their jobs may run), or 3600 where one has none (UNLIMITED).
    type: int
    required: false
  poll:
    description: Seconds between two looks at the queue.
    type: int
    default: 5
  phase:
    description: What to do (see the description).
    type: str
    choices: [all, close, keep, wait]
    default: all
  closing:
    description: The result of the C(close) phase (gone, renamed), for the C(keep) and C(wait) phases.
    type: dict
    default: {}
  conf_lines:
    description: The PartitionName lines of the new slurm.conf (a partition created live is kept as one of these).
    type: list
    elements: str
    default: []
  conf_path:
    description: The slurm.conf the C(keep) phase edits.
    type: path
    default: /etc/slurm/slurm.conf
author: gpucluster maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Close the partitions the new configuration drops, keep that in slurm.conf, wait for their jobs
  gpucluster.cluster.slurm_partitions_change:
    partitions:
      interactive: PartitionName=interactive Nodes=l40s-[01-08] Default=NO MaxTime=08:00:00 State=UP
      train: PartitionName=train Nodes=h200-r[1-2]-[01-16] Default=YES MaxTime=7-00:00:00 State=UP
    conf_lines:
      - PartitionName=interactive Nodes=l40s-[01-08] Default=NO MaxTime=08:00:00 DefCpuPerGPU=16 State=UP
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
timeout:
  description: The bound of the wait, in seconds, and where it came from.
  type: str
  returned: when it waited
kept:
  description: Whether the C(keep) phase changed slurm.conf.
  type: bool
  returned: always
"""

import os
import re
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpucluster.cluster.plugins.module_utils.slurm_time import seconds

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


# The bound where a partition lets its jobs run forever.
UNBOUNDED_WAIT = 3600


def wait_bound(live: dict[str, dict[str, str]], gone: list[str], given: int | None) -> tuple[int, str]:
    """How long to wait for the jobs of `gone`: `given`, else the longest MaxTime among them (what
    their jobs may run), or UNBOUNDED_WAIT where one runs jobs without a limit."""
    if given is not None:
        return given, "slurm_common_leave_timeout"
    limits = {name: seconds(live.get(name, {}).get("MaxTime", "UNLIMITED")) for name in gone}
    unlimited = sorted(name for name, limit in limits.items() if limit is None)
    if unlimited:
        return UNBOUNDED_WAIT, f"{', '.join(unlimited)}: MaxTime=UNLIMITED, no bound of Slurm's"
    longest = max(limits, key=lambda name: limits[name] or 0)
    return limits[longest] or UNBOUNDED_WAIT, f"MaxTime of {longest}"


def _with(line: str, key: str, value: str) -> str:
    """A slurm.conf line with `key=value` (replaced, or appended)."""
    pattern = re.compile(rf"(?i)(?<=\s){key}=\S*")
    return pattern.sub(f"{key}={value}", line) if pattern.search(line) else f"{line} {key}={value}"


def kept_conf(text: str, gone: list[str], renamed: dict[str, str], conf_lines: list[str]) -> str:
    """slurm.conf with what was done live: each gone partition with its live State (INACTIVE where
    renamed, DRAIN where removed) and Default=NO, each successor created live appended from the new
    configuration's line, unless there already."""
    out = []
    present = set()
    for line in text.splitlines():
        fields = dict(FIELD_RE.findall(line)) if line.startswith("PartitionName=") else {}
        name = fields.get("PartitionName")
        if name is not None:
            present.add(name)
        if name in gone:
            line = _with(_with(line, "State", "INACTIVE" if name in renamed else "DRAIN"), "Default", "NO")
        out.append(line)
    lines_of = {dict(FIELD_RE.findall(line)).get("PartitionName"): line for line in conf_lines}
    added = [lines_of[new] for new in renamed.values() if new not in present and new in lines_of]
    if added:
        olds = ", ".join(old for old, new in renamed.items() if new not in present)
        out.append(
            f"# gpucluster: created live while {olds} empties (the run that installs the new "
            "configuration replaces this file)"
        )
        out += added
    return "\n".join(out) + "\n"


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
        args = ["squeue", "--noheader", f"--partition={','.join(partitions)}", "--format=%i %u %T %P %L"]
        if states:
            args.append(f"--states={states}")
        return [line for line in self.must(*args).splitlines() if line.strip()]


def keep(module: AnsibleModule, closing: dict[str, Any], conf_lines: list[str], path: str) -> bool:
    """The `keep` phase: slurm.conf on this host holds what was done live; whether it changed."""
    try:
        with open(path, encoding="utf-8") as handle:
            before = handle.read()
    except OSError as exc:
        module.fail_json(msg=f"cannot read {path}: {exc}")
    after = kept_conf(before, list(closing.get("gone", [])), dict(closing.get("renamed", {})), conf_lines)
    if after == before:
        return False
    if not module.check_mode:
        # Written beside it and renamed over it, with its owner and mode: never half a file.
        temporary = f"{path}.gpucluster-partitions"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(after)
        status = os.stat(path)
        os.chown(temporary, status.st_uid, status.st_gid)
        os.chmod(temporary, status.st_mode & 0o7777)
        os.replace(temporary, path)
    return True


def close(
    module: AnsibleModule, slurm: Slurm, live: dict[str, dict[str, str]], result: dict[str, Any]
) -> None:
    """The `close` phase: successors created live, the partitions that go closed."""
    wanted: dict[str, str] = {str(k): str(v) for k, v in module.params["partitions"].items()}
    gone = sorted(name for name in live if name not in wanted)
    fresh = sorted(name for name in wanted if name not in live)
    hosts = {name: slurm.hostnames(live[name].get("Nodes", "")) for name in gone}
    hosts.update({name: slurm.hostnames(nodes_of(wanted[name])) for name in fresh})
    explicit = {str(k): str(v) for k, v in module.params["renames"].items()}
    result.update(gone=gone, renamed=pair_renames(gone, fresh, hosts, explicit))
    if module.check_mode or not gone:
        return
    known = set(slurm.must("sinfo", "--noheader", "--Node", "--format=%N").split())
    for old, new in result["renamed"].items():
        if new not in live and new not in result["created"]:
            words = create_args(wanted[new], known, lambda text: sorted(slurm.hostnames(text)))
            slurm.must("scontrol", "create", *words)
            result["created"].append(new)
        slurm.must("scontrol", "update", f"PartitionName={old}", "State=INACTIVE")
    for old in gone:
        if old not in result["renamed"] and live[old].get("State") != "DRAIN":
            slurm.must("scontrol", "update", f"PartitionName={old}", "State=DRAIN")


def wait(
    module: AnsibleModule, slurm: Slurm, live: dict[str, dict[str, str]], result: dict[str, Any]
) -> None:
    """The `wait` phase: pending jobs moved to the successors, running ones waited for (bounded)."""
    gone, renames = list(result["gone"]), dict(result["renamed"])
    if not gone:
        return
    bound, source = wait_bound(live, gone, module.params["timeout"])
    result["timeout"] = f"{bound} s ({source})"

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
    while left and time.monotonic() - started < bound:
        time.sleep(module.params["poll"])
        move_pending()
        left = slurm.jobs(gone)
    result["waited"] = round(time.monotonic() - started, 1)
    if left:
        longest = max((seconds(line.split()[-1]) or 0 for line in left), default=0)
        module.fail_json(
            msg=(
                f"{len(left)} job(s) are still in the partitions the new configuration drops after {bound} s "
                f"({source}); the partitions stay closed and the configuration was not replaced (slurm.conf "
                "keeps the partitions as they are live, so a restart or a takeover loses no job). Left (id "
                "user state partition time-left): " + "; ".join(left) + ". Run again once they end, or with "
                f"-e slurm_common_leave_timeout={max(longest, bound) + 60} to wait as long as they may run"
            ),
            still_there=left,
            **result,
        )


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "partitions": {"type": "dict", "required": True},
            "renames": {"type": "dict", "default": {}},
            "timeout": {"type": "int", "required": False},
            "poll": {"type": "int", "default": 5},
            "phase": {"type": "str", "default": "all", "choices": ["all", "close", "keep", "wait"]},
            "closing": {"type": "dict", "default": {}},
            "conf_lines": {"type": "list", "elements": "str", "default": []},
            "conf_path": {"type": "path", "default": "/etc/slurm/slurm.conf"},
        },
        supports_check_mode=True,
    )
    params = module.params
    phase = params["phase"]
    closing = params["closing"] or {}
    result: dict[str, Any] = {
        "gone": list(closing.get("gone", [])),
        "renamed": dict(closing.get("renamed", {})),
        "created": [],
        "moved": [],
        "waited": 0.0,
        "kept": False,
    }
    if phase == "keep":
        result["kept"] = (
            keep(module, closing, params["conf_lines"], params["conf_path"]) if result["gone"] else False
        )
        module.exit_json(changed=result["kept"], **result)
    slurm = Slurm(module)
    if module.get_bin_path("scontrol") is None:
        module.exit_json(changed=False, msg="no Slurm commands on this host", **result)
    rc, out = slurm.run("scontrol", "show", "partition", "--oneliner")
    if rc != 0:
        module.exit_json(changed=False, msg="no slurmctld answers", **result)
    live = parse_partitions(out)
    if phase in ("all", "close"):
        close(module, slurm, live, result)
    if module.check_mode or not result["gone"]:
        module.exit_json(changed=bool(result["gone"]), **result)
    if phase == "all":
        result["kept"] = keep(module, result, params["conf_lines"], params["conf_path"])
    if phase in ("all", "wait"):
        wait(module, slurm, live, result)
    module.exit_json(changed=True, **result)


if __name__ == "__main__":
    main()
