"""users on the Molecule container: the inventory's ids, homes, groups and keys; the record lists
what the role created; accounts made by hand are untouched."""

import json

ALICE_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOnAOI91TvXiwN9tvIXWaKc6O9yhbmDhFGanAZfF1490 alice@molecule"


def getent(host, database, name):
    result = host.run(f"getent {database} {name}")
    assert result.rc == 0, f"no {database} entry {name}"
    return result.stdout.strip().split(":")


def test_groups_have_their_gid(host):
    assert getent(host, "group", "ml")[2] == "20000"
    assert getent(host, "group", "alice")[2] == "10001"


def test_users_have_their_uid_group_shell_and_home(host):
    # name:x:uid:gid:gecos:home:shell
    alice = getent(host, "passwd", "alice")
    assert (alice[2], alice[3], alice[5], alice[6]) == ("10001", "10001", "/home/alice", "/bin/bash")
    bob = getent(host, "passwd", "bob")
    assert (bob[2], bob[3], bob[5], bob[6]) == ("10002", "20000", "/home/bob", "/bin/sh")
    assert getent(host, "group", "ml")[3].split(",") == ["alice"]
    for name in ("alice", "bob"):
        home = host.file(f"/home/{name}")
        assert home.is_directory and home.user == name


def test_authorized_keys_hold_exactly_the_inventory_keys(host):
    keys = host.file("/home/alice/.ssh/authorized_keys")
    assert keys.user == "alice" and keys.mode == 0o600
    assert [line for line in keys.content_string.splitlines() if line.strip()] == [ALICE_KEY]
    # No keys, no file.
    assert not host.file("/home/bob/.ssh/authorized_keys").exists


def test_record_lists_what_the_role_created(host):
    record = host.file("/var/lib/gpucluster/users/created.json")
    assert record.user == "root" and record.mode == 0o644
    assert json.loads(record.content_string) == {"groups": ["alice", "ml"], "users": ["alice", "bob"]}


def test_accounts_made_by_hand_are_left_alone(host):
    # dave has the wanted uid but the role did not make him: no key installed.
    assert getent(host, "passwd", "dave")[2] == "10004"
    assert not host.file("/home/dave/.ssh/authorized_keys").exists
    # intruder was refused, not renumbered.
    assert getent(host, "passwd", "intruder")[2] == "4242"
