"""Checks of the Unix users and groups: one name and one id each, ids outside the system's ranges, groups that exist."""

from __future__ import annotations

from gpucluster.model.spec import UNIX_ID_RANGES, UNIX_ID_RANGES_TEXT
from gpucluster.resolve import Resolution


def check_id_range(r: Resolution, parts: list[str | int], kind: str, value: int) -> bool:
    if any(low <= value <= high for low, high in UNIX_ID_RANGES):
        return True
    r.fail(
        parts,
        f"{kind} {value} is outside the ranges for people's accounts, {UNIX_ID_RANGES_TEXT} (the "
        "others belong to the system, to nobody and to systemd's containers)",
    )
    return False


def check_users(r: Resolution) -> None:
    """One name and one id per user and group on every host, no id of the system's, and only
    groups that exist. A user without `group` brings a private group (its name, gid = uid)."""
    group_at: dict[str, str] = {}  # group name -> where it is defined
    gid_at: dict[int, str] = {}  # gid -> the group holding it, and where
    for index, group in enumerate(r.spec.groups):
        parts: list[str | int] = ["groups", index]
        if group.name in group_at:
            r.fail([*parts, "name"], f"group `{group.name}` is defined twice (also {group_at[group.name]})")
            continue
        group_at[group.name] = f"cluster.groups[{index}]"
        if not check_id_range(r, [*parts, "gid"], "gid", group.gid):
            continue
        if group.gid in gid_at:
            r.fail([*parts, "gid"], f"gid {group.gid} is already the gid of {gid_at[group.gid]}")
        else:
            gid_at[group.gid] = f"group `{group.name}` (cluster.groups[{index}])"
    user_at: dict[str, int] = {}
    uid_at: dict[int, int] = {}
    for index, user in enumerate(r.spec.users):
        parts = ["users", index]
        if user.name in user_at:
            r.fail(
                [*parts, "name"],
                f"user `{user.name}` is defined twice (also cluster.users[{user_at[user.name]}])",
            )
            continue
        user_at[user.name] = index
        private = user.group is None
        if private and user.name in group_at:
            r.fail(
                [*parts, "name"],
                f"group `{user.name}`, this user's private group (it has no `group`), is defined twice "
                f"(also {group_at[user.name]}): set `group: {user.name}` to make that one its primary group",
            )
            private = False
        elif private:
            group_at[user.name] = f"the private group of cluster.users[{index}]"
        if not check_id_range(r, [*parts, "uid"], "uid", user.uid):
            continue
        if user.uid in uid_at:
            first = uid_at[user.uid]
            r.fail(
                [*parts, "uid"],
                f"uid {user.uid} is already the uid of `{r.spec.users[first].name}` (cluster.users[{first}])",
            )
        else:
            uid_at[user.uid] = index
        if private and user.uid in gid_at:
            r.fail(
                [*parts, "uid"],
                f"gid {user.uid} of this user's private group (it has no `group`) is already the gid of "
                f"{gid_at[user.uid]}",
            )
        elif private:
            gid_at[user.uid] = f"the private group `{user.name}` (cluster.users[{index}])"
    for index, user in enumerate(r.spec.users):
        if user.group is not None and user.group not in group_at:
            r.fail(["users", index, "group"], f"unknown group `{user.group}` (not in cluster.groups)")
        for n, name in enumerate(user.groups):
            if name not in group_at:
                r.fail(["users", index, "groups", n], f"unknown group `{name}` (not in cluster.groups)")
