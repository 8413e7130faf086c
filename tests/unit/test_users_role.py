"""The users role's plan (unix_accounts_plan): it changes only accounts it created, refuses an
existing account with another id, leaves alone or adopts one with the wanted id, deletes only
when told. The role's tasks themselves run in its Molecule scenario."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from tests.conftest import INVENTORIES
from tests.roles.conftest import load_module, load_module_utils

accounts = load_module("unix_accounts_plan")
records = load_module_utils("record")

DESIRED: dict[str, Any] = {
    "groups": [{"name": "ml", "gid": 20000}, {"name": "alice", "gid": 10001}],
    "users": [
        {"name": "alice", "uid": 10001, "group": "alice", "groups": ["ml"]},
        {"name": "bob", "uid": 10002, "group": "ml", "groups": []},
    ],
}
SYSTEM = {"groups": {"root": 0, "users": 100}, "users": {"root": 0}}
NOTHING: dict[str, list[str]] = {"groups": [], "users": []}


def names(items: list[dict[str, Any]]) -> list[str]:
    return [item["name"] for item in items]


def with_accounts(groups: dict[str, int], users: dict[str, int]) -> dict[str, dict[str, int]]:
    return {"groups": {**SYSTEM["groups"], **groups}, "users": {**SYSTEM["users"], **users}}


def test_a_fresh_host_gets_everything_recorded_before_it_is_made() -> None:
    plan = accounts.plan(DESIRED, SYSTEM, NOTHING, "gpu01")
    assert not plan.errors and not plan.notes
    assert names(plan.groups) == ["ml", "alice"] and names(plan.users) == ["alice", "bob"]
    assert plan.record_before == plan.record_after == {"groups": ["alice", "ml"], "users": ["alice", "bob"]}


def test_an_account_of_another_id_not_made_by_the_role_is_refused() -> None:
    existing = with_accounts({"alice": 1500}, {"alice": 1500})
    plan = accounts.plan(DESIRED, existing, NOTHING, "gpu01")
    assert plan.errors == [
        "gpu01: group `alice` exists with gid 1500, not created by the users role; the inventory wants gid 10001",
        "gpu01: user `alice` exists with uid 1500, not created by the users role; the inventory wants uid 10001",
    ]


def test_a_wanted_id_held_under_another_name_is_refused() -> None:
    plan = accounts.plan(DESIRED, with_accounts({}, {"mallory": 10002}), NOTHING, "gpu01")
    assert plan.errors == [
        "gpu01: user `bob` wants uid 10002, which user `mallory` already has (not created by the users role)"
    ]


def test_an_account_of_the_wanted_id_is_left_alone_unless_adopted() -> None:
    existing = with_accounts({"ml": 20000}, {"bob": 10002})
    plan = accounts.plan(DESIRED, existing, NOTHING, "gpu01")
    assert names(plan.groups) == ["alice"] and names(plan.users) == ["alice"]
    assert plan.record_before == {"groups": ["alice"], "users": ["alice"]}
    assert any(
        "user `bob` (uid 10002) exists and was not created by the users role: left alone" in n
        for n in plan.notes
    )
    adopted = accounts.plan(DESIRED, existing, NOTHING, "gpu01", adopt_existing=True)
    assert names(adopted.groups) == ["ml", "alice"] and names(adopted.users) == ["alice", "bob"]
    assert adopted.record_before == {"groups": ["alice", "ml"], "users": ["alice", "bob"]}


def test_recorded_accounts_are_managed_even_with_another_id() -> None:
    # The inventory renumbered bob: the role made him, so it may change him.
    existing = with_accounts({"ml": 20000, "alice": 10001}, {"alice": 10001, "bob": 9999})
    record = {"groups": ["alice", "ml"], "users": ["alice", "bob"]}
    plan = accounts.plan(DESIRED, existing, record, "gpu01")
    assert not plan.errors and not plan.notes
    assert names(plan.users) == ["alice", "bob"]


def test_absent_accounts_are_kept_unless_removal_is_asked_for() -> None:
    existing = with_accounts({"ml": 20000, "carol": 10003}, {"carol": 10003})
    record = {"groups": ["carol", "ml"], "users": ["carol"]}
    kept = accounts.plan(DESIRED, existing, record, "gpu01")
    assert kept.remove_users == kept.remove_groups == []
    assert kept.record_after["users"] == ["alice", "bob", "carol"]
    assert any("user `carol` is no longer in the inventory: kept" in n for n in kept.notes)
    removed = accounts.plan(DESIRED, existing, record, "gpu01", remove_absent=True)
    assert removed.remove_users == ["carol"] and removed.remove_groups == ["carol"]
    # Recorded until deleted, forgotten after.
    assert "carol" in removed.record_before["users"] and "carol" not in removed.record_after["users"]


def test_a_rename_frees_the_id_only_when_the_old_account_is_deleted() -> None:
    desired = {"groups": [], "users": [{"name": "carla", "uid": 10003, "group": "ml", "groups": []}]}
    existing = with_accounts({"ml": 20000}, {"carol": 10003})
    record = {"groups": [], "users": ["carol"]}
    plan = accounts.plan(desired, existing, record, "gpu01")
    assert plan.errors == ["gpu01: user `carla` wants uid 10003, which user `carol` already has"]
    renamed = accounts.plan(desired, existing, record, "gpu01", remove_absent=True)
    assert not renamed.errors and renamed.remove_users == ["carol"] and names(renamed.users) == ["carla"]


def test_accounts_never_recorded_are_never_deleted() -> None:
    existing = with_accounts({"legacy": 3000}, {"legacy": 3000})
    plan = accounts.plan(DESIRED, existing, NOTHING, "gpu01", remove_absent=True)
    assert plan.remove_users == plan.remove_groups == []


def test_the_record_is_read_from_its_file(tmp_path: Path) -> None:
    assert records.read_record(str(tmp_path / "missing.json"), accounts.RECORD_KEYS) == NOTHING
    record = tmp_path / "created.json"
    record.write_text(json.dumps({"groups": ["ml"], "users": ["alice"]}))
    assert records.read_record(str(record), accounts.RECORD_KEYS) == {"groups": ["ml"], "users": ["alice"]}


def test_the_rendered_users_file_is_what_the_plan_reads() -> None:
    # The lab's own file: every field the role's tasks use is there.
    text = render_files(load_cluster(INVENTORIES / "lab"), only=["hosts"])["hosts/users.yaml"]
    desired = yaml.safe_load(text)
    plan = accounts.plan(desired, SYSTEM, NOTHING, "ctl01")
    assert names(plan.users) == ["alice", "bob", "carol", "outsider", "ops"]
    assert [(u["uid"], u["group"]) for u in plan.users] == [
        (2001, "alice"),
        (2002, "bob"),
        (2003, "carol"),
        (2004, "outsider"),
        (2005, "ops"),
    ]
    for user in plan.users:
        assert set(user) == {
            "name",
            "uid",
            "group",
            "groups",
            "shell",
            "home",
            "ssh_authorized_keys",
            "create_home",
        }
    # The lab's homes are on its shared /home: ctl01 creates them, the other lab hosts do not.
    assert all(u["create_home"] for u in plan.users)
    assert not any(u["create_home"] for u in accounts.plan(desired, SYSTEM, NOTHING, "gpu02").users)


def test_only_accounts_that_differ_from_the_host_reach_the_tasks(tmp_path: Path) -> None:
    # The host's own root account as the desired state: in place; one field off: not.
    import grp
    import pwd

    root = pwd.getpwnam("root")
    member_of = [g.gr_name for g in grp.getgrall() if "root" in g.gr_mem]
    item = {
        "name": "root",
        "uid": root.pw_uid,
        "group": grp.getgrgid(root.pw_gid).gr_name,
        "groups": member_of,
        "shell": root.pw_shell,
        "home": root.pw_dir,
        "ssh_authorized_keys": [],
    }
    assert accounts.user_in_place(item)
    assert not accounts.user_in_place({**item, "shell": "/bin/false-not-this"})
    assert not accounts.user_in_place({**item, "groups": [*member_of, "nogroup"]})
    assert not accounts.user_in_place({**item, "name": "no-such-user-here"})
    assert accounts.group_in_place({"name": item["group"], "gid": root.pw_gid})
    assert not accounts.group_in_place({"name": item["group"], "gid": root.pw_gid + 1})

    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9vZ2xlZ29vZ2xlZ29vZ2xlZ29vZ2xlZ29vZ2xl alice@laptop"
    home = {**item, "home": str(tmp_path)}
    assert accounts.keys_in_place(home)  # no file, no keys
    assert not accounts.keys_in_place({**home, "ssh_authorized_keys": [key]})
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "authorized_keys").write_text(f"# managed\n{key}\n")
    assert accounts.keys_in_place({**home, "ssh_authorized_keys": [key]})
    assert not accounts.keys_in_place(home)


SHARED = [{"mount": "/home", "created_on": "ctl01", "hosts": ["ctl01", "gpu01"]}]


def test_a_shared_home_is_created_once_by_its_creator() -> None:
    desired = {
        **DESIRED,
        "users": [{**u, "home": f"/home/{u['name']}"} for u in DESIRED["users"]],
        "shared_homes": SHARED,
    }
    on_creator = accounts.plan(desired, SYSTEM, NOTHING, "ctl01")
    on_client = accounts.plan(desired, SYSTEM, NOTHING, "gpu01")
    # A host that does not mount the shared home keeps a home of its own.
    elsewhere = accounts.plan(desired, SYSTEM, NOTHING, "dbd01")
    assert [u["create_home"] for u in on_creator.users] == [True, True]
    assert [u["create_home"] for u in on_client.users] == [False, False]
    assert [u["create_home"] for u in elsewhere.users] == [True, True]


def test_a_home_outside_the_shared_mount_is_created_everywhere() -> None:
    assert accounts.creates_home("/local/alice", SHARED, "gpu01")
    assert accounts.creates_home("/home2/alice", SHARED, "gpu01")
    assert not accounts.creates_home("/home/alice", SHARED, "gpu01")


def test_a_cluster_key_is_part_of_the_keys_only_once_made(tmp_path: Path) -> None:
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9vZ2xlZ29vZ2xlZ29vZ2xlZ29vZ2xlZ29vZ2xl alice@laptop"
    cluster = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGNsdXN0ZXJjbHVzdGVyY2x1c3RlcmNsdXN0ZXI alice@cluster"
    item = {"name": "alice", "home": str(tmp_path), "ssh_authorized_keys": [key], "cluster_key": True}
    ssh = tmp_path / ".ssh"
    ssh.mkdir()
    (ssh / "authorized_keys").write_text(f"{key}\n")
    # Not made yet: the keys are not in place (the role makes the key, then installs both).
    assert not accounts.keys_in_place(item)
    (ssh / "id_ed25519.pub").write_text(f"{cluster}\n")
    assert not accounts.keys_in_place(item)
    (ssh / "authorized_keys").write_text(f"{key}\n{cluster}\n")
    assert accounts.keys_in_place(item)
    # Without a cluster key the same file holds one key too many.
    assert not accounts.keys_in_place({**item, "cluster_key": False})


def test_only_homes_on_a_shared_home_get_a_cluster_key() -> None:
    assert accounts.on_shared_home("/home/alice", SHARED)
    assert not accounts.on_shared_home("/local/alice", SHARED)
    assert not accounts.on_shared_home("/homework/alice", SHARED)
