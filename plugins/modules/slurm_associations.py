#!/usr/bin/python
# ruff: noqa: E402  (Ansible modules keep DOCUMENTATION above the imports)
"""Ansible module: make Slurm's associations (cluster, QOS, accounts, users) match a desired state."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_associations
short_description: Reconcile sacctmgr associations with the desired state rendered by gpucluster
description:
  - Reads the current cluster, QOS, account and user associations with C(sacctmgr -nP show),
    compares them with O(desired) (the content of slurm/accounts.yaml from C(gpucluster render))
    and runs only the sacctmgr commands that remove the difference. A second run changes nothing.
  - Only the GPU TRES of GrpTRES/MaxTRES* limits are managed (gres/gpu, and for accounts its typed
    forms gres/gpu:<type>, gres/shard and gres/mps of shared GPUs); other TRES set by hand stay.
  - Accounts, user associations and QOS missing from O(desired) are deleted only when
    O(remove_absent) is true; the root account, the root user and the normal QOS never are.
options:
  desired:
    description: Mapping with keys cluster, qos, accounts and users (see slurm/accounts.yaml).
    type: dict
    required: true
  remove_absent:
    description: Delete accounts, user associations and QOS that O(desired) does not list.
    type: bool
    default: false
  sacctmgr:
    description: Path of the sacctmgr binary.
    type: str
    default: sacctmgr
author: gpucluster maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Make the Slurm associations match the tenants (run where sacctmgr reaches slurmdbd)
  gpucluster.cluster.slurm_associations:
    desired: "{{ lookup('ansible.builtin.file', 'build/prod/slurm/accounts.yaml') | from_yaml }}"
    remove_absent: true
  register: accounts

- name: Show the sacctmgr commands that were run
  ansible.builtin.debug:
    msg: "{{ accounts.commands | map('join', ' ') | list }}"
"""

RETURN = r"""
commands:
  description: The sacctmgr argument lists run (or that would run in check mode), in order.
  type: list
  returned: always
"""

from dataclasses import dataclass, field
from typing import Any

from ansible.module_utils.basic import AnsibleModule

GPU = "gres/gpu"
SHARED_GPU_TRES = ("gres/shard", "gres/mps")
PROTECTED_ACCOUNTS = {"root"}
PROTECTED_USERS = {"root"}
PROTECTED_QOS = {"normal"}
# (desired key, sacctmgr show column, sacctmgr set key) for TRES limits of a QOS.
QOS_TRES = (
    ("max_tres_per_user", "maxtrespu", "MaxTRESPerUser"),
    ("max_tres_per_job", "maxtres", "MaxTRESPerJob"),
    ("grp_tres", "grptres", "GrpTRES"),
)
QOS_FIELDS = ("name", "priority", "maxtrespu", "maxtres", "grptres", "maxwall", "preempt")
ASSOC_FIELDS = ("account", "user", "parentname", "fairshare", "grptres", "qos", "defaultqos")
USER_FIELDS = ("user", "defaultaccount")


def parse_tres(text: str | None) -> dict[str, str]:
    """`cpu=4,gres/gpu=8` -> {"cpu": "4", "gres/gpu": "8"}."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        if "=" in item:
            key, value = item.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def gpu_limit(text: str | None) -> str | None:
    return parse_tres(text).get(GPU)


def gpu_tres(text: str | None) -> dict[str, str]:
    """The GPU TRES of a limit: gres/gpu, gres/gpu:<type> (MIG instances), gres/shard, gres/mps."""
    return {
        key: value
        for key, value in parse_tres(text).items()
        if key == GPU or key.startswith(GPU + ":") or key in SHARED_GPU_TRES
    }


def tres_changes(wanted: dict[str, str], existing: dict[str, str]) -> dict[str, str]:
    """TRES to set so that `existing` becomes `wanted` (-1 removes one no longer wanted)."""
    changes = {key: value for key, value in wanted.items() if existing.get(key) != value}
    changes.update({key: "-1" for key in existing if key not in wanted})
    return dict(sorted(changes.items(), key=lambda item: (item[0] != GPU, item[0])))


def minutes(text: str | None) -> int | None:
    """Slurm time (min, min:sec, h:m:s, d-h, d-h:m, d-h:m:s, UNLIMITED) -> whole minutes."""
    if text is None or text.strip() == "":
        return None
    text = text.strip()
    if text.upper() in ("UNLIMITED", "INFINITE", "-1"):
        return None
    days = 0
    if "-" in text:
        day_part, text = text.split("-", 1)
        days = int(day_part)
        parts = [int(p) for p in text.split(":")]
        hours, mins = parts[0], parts[1] if len(parts) > 1 else 0
        return days * 1440 + hours * 60 + mins
    parts = [int(p) for p in text.split(":")]
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        return parts[0]
    return parts[0] * 60 + parts[1]


def names(text: str | None) -> list[str]:
    return sorted(n for n in (text or "").split(",") if n)


def parse_rows(text: str, fields: tuple[str, ...]) -> list[dict[str, str]]:
    """`sacctmgr -nP` output -> one dict per line, keyed by `fields`."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = line.split("|")
        values += [""] * (len(fields) - len(values))
        rows.append(dict(zip(fields, values, strict=False)))
    return rows


@dataclass
class Current:
    """What sacctmgr reports today for one cluster."""

    cluster_exists: bool
    qos: dict[str, dict[str, str]] = field(default_factory=dict)
    accounts: dict[str, dict[str, str]] = field(default_factory=dict)
    user_accounts: dict[str, set[str]] = field(default_factory=dict)
    default_account: dict[str, str] = field(default_factory=dict)


def current_state(cluster: str, clusters: str, qos: str, assocs: str, users: str) -> Current:
    state = Current(cluster_exists=cluster in {r["cluster"] for r in parse_rows(clusters, ("cluster",))})
    state.qos = {row["name"]: row for row in parse_rows(qos, QOS_FIELDS)}
    for row in parse_rows(assocs, ASSOC_FIELDS):
        if row["user"]:
            state.user_accounts.setdefault(row["user"], set()).add(row["account"])
        else:
            state.accounts[row["account"]] = row
    state.default_account = {row["user"]: row["defaultaccount"] for row in parse_rows(users, USER_FIELDS)}
    return state


def _qos_settings(want: dict[str, Any], have: dict[str, str] | None) -> list[str]:
    """`Key=value` words that turn `have` (None: a new QOS) into `want`."""
    words: list[str] = []
    if have is None or str(want.get("priority", 0)) != (have.get("priority") or "0"):
        words.append(f"Priority={want.get('priority', 0)}")
    for key, column, set_key in QOS_TRES:
        wanted = gpu_limit(want.get(key))
        existing = gpu_limit(have.get(column)) if have else None
        if wanted != existing:
            words.append(f"{set_key}={GPU}={wanted if wanted is not None else -1}")
    wanted_wall = minutes(want.get("max_wall"))
    if wanted_wall != (minutes(have.get("maxwall")) if have else None):
        words.append(f"MaxWall={want['max_wall'] if wanted_wall is not None else -1}")
    wanted_preempt = sorted(want.get("preempt") or [])
    if wanted_preempt != (names(have.get("preempt")) if have else []):
        words.append(f"Preempt={','.join(wanted_preempt)}")
    return words


def _account_settings(want: dict[str, Any], have: dict[str, str] | None) -> list[str]:
    words: list[str] = []
    if have is None or want.get("parent", "root") != have.get("parentname"):
        words.append(f"Parent={want.get('parent', 'root')}")
    if have is None or str(want["fairshare"]) != have.get("fairshare"):
        words.append(f"Fairshare={want['fairshare']}")
    changes = tres_changes(gpu_tres(want.get("grp_tres")), gpu_tres(have.get("grptres")) if have else {})
    if changes:
        words.append("GrpTRES=" + ",".join(f"{key}={value}" for key, value in changes.items()))
    wanted_qos = sorted(want.get("qos") or [])
    if wanted_qos and (have is None or wanted_qos != names(have.get("qos"))):
        words.append(f"QOS={','.join(wanted_qos)}")
    default_qos = want.get("default_qos")
    if default_qos and (have is None or default_qos != have.get("defaultqos")):
        words.append(f"DefaultQOS={default_qos}")
    return words


def plan(desired: dict[str, Any], current: Current, remove_absent: bool = False) -> list[list[str]]:
    """The sacctmgr argument lists (after `sacctmgr -i`) that make `current` equal `desired`."""
    cluster = desired["cluster"]
    commands: list[list[str]] = []
    if not current.cluster_exists:
        commands.append(["add", "cluster", cluster])
    desired_qos = {q["name"]: q for q in desired.get("qos", [])}
    for name, want in desired_qos.items():
        have = current.qos.get(name)
        words = _qos_settings(want, have)
        if have is None:
            commands.append(["add", "qos", name, *words])
        elif words:
            commands.append(["modify", "qos", "where", f"name={name}", "set", *words])
    # Parents before children: desired accounts are added in an order where the parent exists.
    pending = {a["name"]: a for a in desired.get("accounts", [])}
    ordered: list[dict[str, Any]] = []
    known = set(current.accounts) | {"root"}
    while pending:
        ready = [
            a for a in pending.values() if a.get("parent", "root") in known | {o["name"] for o in ordered}
        ]
        if not ready:
            ready = list(pending.values())  # unknown parents: let sacctmgr report them
        for account in sorted(ready, key=lambda a: a["name"]):
            ordered.append(account)
            del pending[account["name"]]
    for want in ordered:
        name = want["name"]
        have = current.accounts.get(name)
        words = _account_settings(want, have)
        if have is None:
            commands.append(["add", "account", name, f"Cluster={cluster}", *words])
        elif words:
            commands.append(
                ["modify", "account", "where", f"name={name}", f"cluster={cluster}", "set", *words]
            )
    desired_users = {u["name"]: u for u in desired.get("users", [])}
    for name, want in sorted(desired_users.items()):
        have_accounts = current.user_accounts.get(name, set())
        missing = sorted(set(want["accounts"]) - have_accounts)
        if missing:
            commands.append(
                [
                    "add",
                    "user",
                    name,
                    f"Account={','.join(missing)}",
                    f"Cluster={cluster}",
                    f"DefaultAccount={want['default_account']}",
                ]
            )
        elif current.default_account.get(name) != want["default_account"]:
            commands.append(
                [
                    "modify",
                    "user",
                    "where",
                    f"name={name}",
                    "set",
                    f"DefaultAccount={want['default_account']}",
                ]
            )
    if remove_absent:
        commands += _removals(desired, current, cluster)
    return commands


def _removals(desired: dict[str, Any], current: Current, cluster: str) -> list[list[str]]:
    commands: list[list[str]] = []
    wanted_pairs = {(u["name"], a) for u in desired.get("users", []) for a in u["accounts"]}
    wanted_accounts = {a["name"] for a in desired.get("accounts", [])} | PROTECTED_ACCOUNTS
    for user, accounts in sorted(current.user_accounts.items()):
        if user in PROTECTED_USERS:
            continue
        for account in sorted(accounts):
            if (user, account) not in wanted_pairs:
                commands.append(
                    ["delete", "user", "where", f"name={user}", f"account={account}", f"cluster={cluster}"]
                )
    for account in sorted(set(current.accounts) - wanted_accounts):
        commands.append(["delete", "account", "where", f"name={account}", f"cluster={cluster}"])
    wanted_qos = {q["name"] for q in desired.get("qos", [])} | PROTECTED_QOS
    for name in sorted(set(current.qos) - wanted_qos):
        commands.append(["delete", "qos", "where", f"name={name}"])
    return commands


def _show(module: AnsibleModule, *args: str) -> str:
    rc, out, err = module.run_command([module.params["sacctmgr"], "-nP", "show", *args])
    if rc != 0:
        module.fail_json(msg=f"sacctmgr show {' '.join(args)} failed: {err.strip() or out.strip()}")
    return str(out)


def read_current(module: AnsibleModule, cluster: str) -> Current:
    return current_state(
        cluster,
        _show(module, "cluster", "format=cluster"),
        _show(module, "qos", "format=" + ",".join(QOS_FIELDS)),
        _show(module, "assoc", "where", f"cluster={cluster}", "format=" + ",".join(ASSOC_FIELDS)),
        _show(module, "user", "format=" + ",".join(USER_FIELDS)),
    )


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "desired": {"type": "dict", "required": True},
            "remove_absent": {"type": "bool", "default": False},
            "sacctmgr": {"type": "str", "default": "sacctmgr"},
        },
        supports_check_mode=True,
    )
    desired = module.params["desired"]
    for key in ("cluster", "qos", "accounts", "users"):
        if key not in desired:
            module.fail_json(msg=f"desired state has no `{key}` (expected slurm/accounts.yaml content)")
    commands = plan(desired, read_current(module, desired["cluster"]), module.params["remove_absent"])
    if not module.check_mode:
        for words in commands:
            rc, out, err = module.run_command([module.params["sacctmgr"], "-i", *words])
            if rc != 0:
                module.fail_json(
                    msg=f"sacctmgr {' '.join(words)} failed: {(err or out).strip()}", commands=commands
                )
        if commands:
            leftover = plan(desired, read_current(module, desired["cluster"]), module.params["remove_absent"])
            if leftover:
                module.fail_json(
                    msg="sacctmgr accepted the changes but still differs",
                    commands=commands,
                    leftover=leftover,
                )
    module.exit_json(changed=bool(commands), commands=commands)


if __name__ == "__main__":
    main()
