#!/usr/bin/python
# ruff: noqa: E402  (Ansible modules keep DOCUMENTATION above the imports)
"""Ansible module: what the live Slurm controllers are, and the controller that stays put in charge
before the configuration changes the list."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_controllers_change
short_description: Compare the live Slurm controllers with the new list and hand control to one that stays
description:
  - Reads C(scontrol ping) (each controller of the running configuration, in order, UP or DOWN)
    and C(scontrol show config) on this host, and compares the controllers with O(controllers),
    the list of the new configuration. Returns which controllers leave, join and stay, and the
    live settings later steps compare with (release, StateSaveLocation, AccountingStorageHost,
    SwitchType).
  - With O(act), when a controller leaves, makes the first controller of the new list that runs
    now the one in charge before anything else changes; when it is a backup of the running
    configuration, with C(scontrol takeover INDEX) (the old primary's slurmctld exits), then
    waits up to O(timeout) seconds until C(scontrol ping) shows it in charge. When it is the
    running primary but DOWN, the module reports it in RV(start) (the play starts it there).
  - Refuses a new list that keeps no controller that runs now (there is no one to hand over to;
    add the new controllers first, then remove the old ones, in two runs).
  - Where no slurmctld answers (a first install, or a host without the Slurm commands yet),
    RV(answered) is false and nothing else is done.
options:
  controllers:
    description: The controllers of the new configuration, primary first.
    type: list
    elements: str
    required: true
  act:
    description: Hand control over when a controller leaves (otherwise only read and compare).
    type: bool
    default: false
  timeout:
    description: Seconds to wait for the controller that stays to be in charge after a takeover.
    type: int
    default: 120
author: gpucluster maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read the live controllers
  gpucluster.cluster.slurm_controllers_change:
    controllers: [ctl01]
  register: live

- name: Put the controller that stays in charge before the list changes
  gpucluster.cluster.slurm_controllers_change:
    controllers: [ctl01]
    act: true
  when: live.answered
"""

RETURN = r"""
answered:
  description: Whether a slurmctld answered from this host.
  type: bool
  returned: always
live:
  description: The controllers of the running configuration, in order, each with C(host) and C(state) (UP or DOWN).
  type: list
  returned: always
leaving:
  description: Live controllers the new list drops.
  type: list
  returned: always
joining:
  description: Controllers of the new list that do not run now.
  type: list
  returned: always
kept:
  description: Controllers of the new list that run now, in the new list's order.
  type: list
  returned: always
in_charge:
  description: The live controller in charge (the first that is UP), empty when none.
  type: str
  returned: always
start:
  description: A controller that stays, is the running primary and is DOWN (the play starts its slurmctld).
  type: str
  returned: always
stop_first:
  description: >-
    Controllers that stay but must be stopped before the new configuration starts: the new
    primary joins, and it must be the only slurmctld starting as primary.
  type: list
  returned: always
took_over:
  description: Whether this run made a backup take control (scontrol takeover).
  type: bool
  returned: always
config:
  description: >-
    Settings of the running configuration (C(scontrol show config)): version, state_save_location,
    accounting_host, switch_type.
  type: dict
  returned: always
"""

import re
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule

PING_RE = re.compile(r"Slurmctld\((\w+)\) at (\S+) is (UP|DOWN)")
# `scontrol show config` line: `Key = value` (Key may carry an index: SlurmctldHost[0]).
CONFIG_RE = re.compile(r"^(\S+?)\s*=\s*(.*?)\s*$")


def parse_ping(text: str) -> list[dict[str, str]]:
    """Each controller of the running configuration, in order, with UP or DOWN."""
    return [{"host": host, "state": state} for _role, host, state in PING_RE.findall(text)]


def parse_config(text: str) -> dict[str, str]:
    """The settings later steps compare; `(null)` and `none` read as empty."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        match = CONFIG_RE.match(line)
        if match:
            found.setdefault(match.group(1), match.group(2))
    version = re.search(r"\d+\.\d+(\.\d+)?", found.get("SLURM_VERSION", ""))

    def value(key: str) -> str:
        text = found.get(key, "")
        return "" if text in ("(null)", "none", "None", "switch/none") else text

    return {
        "version": version.group(0) if version else "",
        "state_save_location": value("StateSaveLocation"),
        "accounting_host": value("AccountingStorageHost"),
        "switch_type": value("SwitchType"),
    }


def in_charge(live: list[dict[str, str]]) -> str:
    return next((c["host"] for c in live if c["state"] == "UP"), "")


def compare(live: list[dict[str, str]], controllers: list[str]) -> dict[str, Any]:
    """What changes between the running controllers and the new list; `error` when it cannot
    be done in one run."""
    names = [c["host"] for c in live]
    leaving = [h for h in names if h not in controllers]
    joining = [h for h in controllers if h not in names]
    kept = [h for h in controllers if h in names]
    result: dict[str, Any] = {
        "leaving": leaving,
        "joining": joining,
        "kept": kept,
        "in_charge": in_charge(live),
        "start": "",
        "stop_first": [],
        "takeover": None,
        "error": "",
    }
    if live and not kept:
        result["error"] = (
            f"no controller of the new list ({', '.join(controllers)}) runs now (live: {', '.join(names)}): there "
            f"is no one to hand over to. Apply an inventory listing {', '.join([*names, *joining])} first, then "
            f"one with {', '.join(controllers)}"
        )
        return result
    if controllers and controllers[0] in joining and kept:
        result["stop_first"] = [h for h in names if h in controllers and h != controllers[0]]
    if leaving and kept:
        target = kept[0]
        if result["in_charge"] != target:
            index = names.index(target)
            if index == 0:
                result["start"] = target
            else:
                result["takeover"] = index
    return result


def _run(module: AnsibleModule, *args: str) -> tuple[int, str]:
    rc, out, err = module.run_command(list(args))
    return int(rc), str(out) + str(err)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "controllers": {"type": "list", "elements": "str", "required": True},
            "act": {"type": "bool", "default": False},
            "timeout": {"type": "int", "default": 120},
        },
        supports_check_mode=True,
    )
    params = module.params
    empty: dict[str, Any] = {
        "answered": False,
        "live": [],
        "leaving": [],
        "joining": list(params["controllers"]),
        "kept": [],
        "in_charge": "",
        "start": "",
        "stop_first": [],
        "took_over": False,
        "config": parse_config(""),
    }
    if module.get_bin_path("scontrol") is None:
        module.exit_json(changed=False, msg="no Slurm commands on this host", **empty)
    _rc, out = _run(module, "scontrol", "ping")  # exits 1 when a controller is down
    live = parse_ping(out)
    if not live or not in_charge(live):
        module.exit_json(changed=False, msg="no slurmctld answers", **empty)
    rc, config_text = _run(module, "scontrol", "show", "config")
    config = parse_config(config_text if rc == 0 else "")
    plan = compare(live, list(params["controllers"]))
    result = {
        "answered": True,
        "live": live,
        "config": config,
        "took_over": False,
        **{k: plan[k] for k in ("leaving", "joining", "kept", "in_charge", "start", "stop_first")},
    }
    if plan["error"]:
        module.fail_json(msg=plan["error"], **result)
    index = plan["takeover"]
    if not params["act"] or index is None or module.check_mode:
        module.exit_json(changed=bool(params["act"] and index is not None), **result)
    target = plan["kept"][0]
    rc, out = _run(module, "scontrol", "takeover", str(index))
    if rc != 0:
        module.fail_json(msg=f"scontrol takeover {index} failed: {out.strip()}", **result)
    deadline = time.monotonic() + params["timeout"]
    while True:
        _rc, out = _run(module, "scontrol", "ping")
        live = parse_ping(out)
        if in_charge(live) == target:
            break
        if time.monotonic() > deadline:
            module.fail_json(
                msg=f"{target} is not in charge {params['timeout']} s after `scontrol takeover {index}`: {out.strip()}",
                **result,
            )
        time.sleep(2)
    result.update(live=live, in_charge=target, took_over=True)
    module.exit_json(changed=True, **result)


if __name__ == "__main__":
    main()
