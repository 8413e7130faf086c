"""Every kind of bad inventory is reported with file, key path and reason; nothing else escapes."""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.errors import InventoryError
from gpucluster.layers import load_cluster
from gpucluster.model.base import Owner
from gpucluster.model.spec import RestApi
from tests.conftest import SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory, run_cli

BASE = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))
CLUSTER_FILE = "group_vars/all/cluster.yml"


def write(
    inventories: InventoryFactory, mutate: Callable[[dict[str, Any]], None], hosts: str = SMALL_HOSTS
) -> Path:
    data = copy.deepcopy(BASE)
    mutate(data["cluster"])
    return inventories.make(hosts, yaml.safe_dump(data, sort_keys=False))


def problems_of(directory: Path) -> list[str]:
    with pytest.raises(InventoryError) as info:
        load_cluster(directory)
    return [str(p) for p in info.value.problems]


def test_small_inventory_is_valid(inventories: InventoryFactory) -> None:
    cluster = load_cluster(write(inventories, lambda c: None))
    assert cluster.total_gpus == 64
    assert cluster.partitions["batch"] == [f"n{i:02d}" for i in range(1, 9)]
    assert cluster.switch_path["n05"] == ("top", "leaf2")


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    (
        "typo",
        lambda c: c["partitions"][0].update(nodse=["gpus"]),
        "cluster.partitions[0].nodse",
        "unknown key",
    ),
    ("missing", lambda c: c.pop("nodes"), "cluster.nodes", "required key is missing"),
    (
        "bad type",
        lambda c: c["node_types"]["h100"].update(sockets="two"),
        "cluster.node_types.h100.sockets",
        "integer",
    ),
    (
        "unknown type",
        lambda c: c["nodes"][0].update(type="a100"),
        "cluster.nodes[0].type",
        "unknown node type `a100`",
    ),
    (
        "unknown group",
        lambda c: c["nodes"].append({"group": "nope", "type": "h100"}),
        "cluster.nodes[1].group",
        "`nope` is not a host or group",
    ),
    (
        "two node types",
        lambda c: (
            c["node_types"].update(h200=c["node_types"]["h100"]),
            c["nodes"].append({"group": "rack1", "type": "h200"}),
        ),
        "cluster.nodes[1].group",
        "hosts n[01-04] already have node type `h100` from cluster.nodes[0] (`gpus`) (group `rack1` is inside `gpus`)",
    ),
    (
        "device count",
        lambda c: c["node_types"]["h100"]["gpus"].update(devices="/dev/nvidia[0-3]"),
        "cluster.node_types.h100.gpus.devices",
        "names 4 device(s) but count is 8",
    ),
    (
        "no devices",
        lambda c: c["node_types"]["h100"]["gpus"].pop("devices"),
        "cluster.node_types.h100.gpus.devices",
        "device files are required",
    ),
    (
        "partition host",
        lambda c: c["partitions"][0].update(nodes=["gpus", "ghost"]),
        "cluster.partitions[0].nodes[1]",
        "`ghost` is not a host or group",
    ),
    (
        "partition non-node",
        lambda c: c["partitions"][0].update(nodes=["gpus", "head"]),
        "cluster.partitions[0].nodes[1]",
        "`head` has no node type",
    ),
    (
        "no partition",
        lambda c: c["partitions"][0].update(nodes=["rack1"]),
        "cluster.partitions",
        "in no partition: n[05-08]",
    ),
    (
        "two defaults",
        lambda c: c["partitions"].append({"name": "b2", "nodes": ["rack1"], "default": True}),
        "cluster.partitions[1].default",
        "2 partitions are the default (batch, b2): Slurm keeps only one",
    ),
    (
        "bad time",
        lambda c: c["partitions"][0].update(max_time="7 days"),
        "cluster.partitions[0].max_time",
        "not a Slurm time",
    ),
    (
        "switch unknown child",
        lambda c: c["fabric"]["tree"].update(leaf2=["rack2", "ghost"]),
        "cluster.fabric.tree.leaf2[1]",
        "`ghost` is not a host or group",
    ),
    (
        "cycle",
        lambda c: c["fabric"]["tree"].update(leaf1=["top"], top=["leaf1", "leaf2"]),
        "cluster.fabric.tree.top",
        "cycle: top -> leaf1 -> top",
    ),
    (
        "two leaves",
        lambda c: c["fabric"]["tree"].update(leaf2=["rack2", "n01"]),
        "cluster.fabric.tree.leaf2[1]",
        "already under leaf switch `leaf1`",
    ),
    (
        "mixed switch",
        lambda c: c["fabric"]["tree"].update(top=["leaf1", "leaf2", "n01"]),
        "cluster.fabric.tree.top",
        "either child switches or hosts",
    ),
    (
        "not under a leaf",
        lambda c: c["fabric"]["tree"].update(leaf2=["n05"]),
        "cluster.fabric.tree",
        "under no leaf switch: n[06-08]",
    ),
    (
        "block on 22.05",
        lambda c: c["fabric"].update(blocks={"b1": ["rack1"], "b2": ["rack2"]}),
        "cluster.fabric.blocks",
        "NVLink blocks need topology/block with BlockSizes (Slurm >= 24.05); Slurm 22.05 has no topology/block",
    ),
    (
        "block sizes",
        lambda c: (
            c["slurm"].update(version="24.05"),
            c["fabric"].update(blocks={"b1": ["rack1"], "b2": ["rack2"]}, block_sizes=[4, 12]),
        ),
        "cluster.fabric.block_sizes[1]",
        "not a power-of-two multiple",
    ),
    (
        "old slurm",
        lambda c: c["slurm"].update(version="21.08"),
        "cluster.slurm.version",
        "Slurm 21.08 is not a release gpucluster knows (22.05, 23.02, 23.11, 24.05, 24.11, 25.05, 25.11, 26.05)",
    ),
    (
        "controller",
        lambda c: c["slurm"].update(controller=["head", "head2"]),
        "cluster.slurm.controller[1]",
        "`head2` is not a host",
    ),
    (
        "login host unknown",
        lambda c: c["slurm"].update(login=["login9"]),
        "cluster.slurm.login[0]",
        "login host `login9` is not a host",
    ),
    (
        "login host is a node",
        lambda c: c["slurm"].update(login=["head", "n03"]),
        "cluster.slurm.login[1]",
        "login host `n03` is a node of cluster.nodes (type `h100`): it would run jobs",
    ),
    (
        "node ssh without cgroup proctrack",
        lambda c: c["slurm"].update(node_ssh={}, proctrack="linuxproc", task_plugins=["none"]),
        "cluster.slurm.proctrack",
        "slurm.node_ssh needs proctrack `cgroup` (is `linuxproc`)",
    ),
    (
        "node ssh admin not a declared user",
        lambda c: c["slurm"].update(node_ssh={"admins": ["root", "alice", "mallory"]}),
        "cluster.slurm.node_ssh.admins[2]",
        "admin `mallory` is not a user of cluster.users",
    ),
    (
        "node ssh and PrologFlags in extra",
        lambda c: c["slurm"].update(node_ssh={}, extra={"PrologFlags": "Contain,X11"}),
        "cluster.slurm.extra.PrologFlags",
        "PrologFlags is cluster.slurm.prolog_flags: set it there",
    ),
    (
        "OverMemoryKill beside the cgroup's memory limit",
        lambda c: c["slurm"].update(
            task_plugins=["cgroup", "affinity"], extra={"JobAcctGatherParams": "NoShared,OverMemoryKill"}
        ),
        "cluster.slurm.extra.JobAcctGatherParams",
        "OverMemoryKill beside the cgroup's memory limit (task/cgroup with ConstrainRAMSpace): slurmctld refuses to start with both",
    ),
    (
        "node ssh admin twice",
        lambda c: c["slurm"].update(node_ssh={"admins": ["ops", "ops"]}),
        "cluster.slurm.node_ssh.admins",
        "listed more than once: ops",
    ),
    (
        "login host twice",
        lambda c: c["slurm"].update(login=["head", "head"]),
        "cluster.slurm.login[1]",
        "login host `head` is listed twice",
    ),
    (
        "REST API host unknown",
        lambda c: c["slurm"].update(rest_api={"host": "api9"}),
        "cluster.slurm.rest_api.host",
        "REST API host `api9` is not a host",
    ),
    (
        "REST API on a compute node",
        lambda c: c["slurm"].update(rest_api={"host": "n01"}),
        "cluster.slurm.rest_api.host",
        "REST API host `n01` is neither a controller nor a login host",
    ),
    (
        "REST API on a privileged port",
        lambda c: c["slurm"].update(rest_api={"host": "head", "port": 80}),
        "cluster.slurm.rest_api.port",
        "greater than or equal to 1024",
    ),
    (
        "REST API on slurmctld's port",
        lambda c: c["slurm"].update(rest_api={"host": "head", "port": 6817}),
        "cluster.slurm.rest_api.port",
        "port 6817 is slurmctld's (SlurmctldPort) on `head`",
    ),
    (
        "REST API on slurmdbd's port",
        lambda c: c["slurm"].update(rest_api={"host": "head", "port": 6819}),
        "cluster.slurm.rest_api.port",
        "port 6819 is slurmdbd's (cluster.slurm.accounting.port) on `head`",
    ),
    (
        "REST API keys set by hand too",
        lambda c: c["slurm"].update(rest_api={"host": "head"}, extra={"AuthAltTypes": "auth/jwt"}),
        "cluster.slurm.extra.AuthAltTypes",
        "AuthAltTypes is written by cluster.slurm.rest_api",
    ),
    (
        "backup controller without shared state",
        lambda c: c["slurm"].update(controller=["head", "n01"]),
        "cluster.slurm.state_save_location",
        "2 controllers (head, n01) need a StateSaveLocation they all share",
    ),
    (
        "quota sum",
        lambda c: c["tenants"][0].update(gpu_quota=40, gpu_limit=40),
        "cluster.tenants",
        "top-level tenants' quotas in slurm add up to 72, more than the 64 GPUs it owns",
    ),
    (
        "limit below quota",
        lambda c: c["tenants"][0].update(gpu_limit=16),
        "cluster.tenants[0].gpu_limit",
        "limit 16 is below quota 32",
    ),
    (
        "limit above cluster",
        lambda c: c["tenants"][0].update(gpu_limit=65),
        "cluster.tenants[0].gpu_limit",
        "limit 65 exceeds the 64 GPUs owned by slurm",
    ),
    (
        "tenant user not in cluster.users",
        lambda c: c["tenants"][1].update(users=["bob", "mallory"]),
        "cluster.tenants[1].users[1]",
        "unknown user `mallory` (not in cluster.users)",
    ),
    (
        "user defined twice",
        lambda c: c["users"].append({"name": "alice", "uid": 10003}),
        "cluster.users[2].name",
        "user `alice` is defined twice (also cluster.users[0])",
    ),
    (
        "uid twice",
        lambda c: c["users"].append({"name": "carol", "uid": 10001}),
        "cluster.users[2].uid",
        "uid 10001 is already the uid of `alice` (cluster.users[0])",
    ),
    (
        "group defined twice",
        lambda c: c.update(groups=[{"name": "ml", "gid": 20000}, {"name": "ml", "gid": 20001}]),
        "cluster.groups[1].name",
        "group `ml` is defined twice (also cluster.groups[0])",
    ),
    (
        "gid twice",
        lambda c: c.update(groups=[{"name": "ml", "gid": 20000}, {"name": "ops", "gid": 20000}]),
        "cluster.groups[1].gid",
        "gid 20000 is already the gid of group `ml` (cluster.groups[0])",
    ),
    (
        "private group named like a declared group",
        lambda c: c.update(groups=[{"name": "alice", "gid": 20000}]),
        "cluster.users[0].name",
        "group `alice`, this user's private group (it has no `group`), is defined twice (also cluster.groups[0])",
    ),
    (
        "private group with a declared group's gid",
        lambda c: c.update(groups=[{"name": "ml", "gid": 10002}]),
        "cluster.users[1].uid",
        "gid 10002 of this user's private group (it has no `group`) is already the gid of group `ml`",
    ),
    (
        "unknown primary group",
        lambda c: c["users"][0].update(group="ops"),
        "cluster.users[0].group",
        "unknown group `ops` (not in cluster.groups)",
    ),
    (
        "unknown supplementary group",
        lambda c: c["users"][1].update(groups=["ml"]),
        "cluster.users[1].groups[0]",
        "unknown group `ml` (not in cluster.groups)",
    ),
    (
        "supplementary group listed twice",
        lambda c: (
            c.update(groups=[{"name": "ml", "gid": 20000}]),
            c["users"][1].update(groups=["ml", "ml"]),
        ),
        "cluster.users[1].groups",
        "listed more than once: ml",
    ),
    (
        "system uid",
        lambda c: c["users"][0].update(uid=999),
        "cluster.users[0].uid",
        "uid 999 is outside the ranges for people's accounts, 1000-59999 or 65536-524287",
    ),
    (
        "system gid",
        lambda c: c.update(groups=[{"name": "ml", "gid": 100}]),
        "cluster.groups[0].gid",
        "gid 100 is outside the ranges for people's accounts, 1000-59999 or 65536-524287",
    ),
    (
        "not an SSH key",
        lambda c: c["users"][0].update(ssh_authorized_keys=["ssh-ed25519 not-base64"]),
        "cluster.users[0].ssh_authorized_keys",
        "is not one OpenSSH public key line",
    ),
    (
        "unknown qos",
        lambda c: c["tenants"][0].update(qos=["normal", "turbo"]),
        "cluster.tenants[0].qos[1]",
        "unknown QOS `turbo`",
    ),
    (
        "unknown parent",
        lambda c: c["tenants"][1].update(parent="team-z"),
        "cluster.tenants[1].parent",
        "unknown parent tenant",
    ),
    (
        "child quota",
        lambda c: c["tenants"][1].update(parent="team-a", gpu_quota=40, gpu_limit=48),
        "cluster.tenants[0].gpu_quota",
        "child tenants' quotas in slurm add up to 40, more than this tenant's 32",
    ),
    (
        "tenant name",
        lambda c: c["tenants"][0].update(name="Team A"),
        "cluster.tenants[0].name",
        "should match pattern",
    ),
]


def _two_owners(c: dict[str, Any]) -> None:
    """rack1 (n01-n04) under bare-metal Slurm, rack2 (n05-n08) under Kubernetes."""
    c["kubernetes"] = {"version": "1.34", "kueue": {"enabled": True}}
    c["nodes"] = [
        {"group": "rack1", "type": "h100", "owner": "slurm"},
        {"group": "rack2", "type": "h100", "owner": "kubernetes"},
    ]
    c["partitions"][0]["nodes"] = ["rack1"]
    c["tenants"][0].update(gpus={"slurm": {"quota": 16}, "kubernetes": {"quota": 16}})
    c["tenants"][1].update(gpus={"slurm": {"quota": 16}})
    for tenant in c["tenants"]:
        tenant.pop("gpu_quota", None)
        tenant.pop("gpu_limit", None)


def _then(
    first: Callable[[dict[str, Any]], None], then: Callable[[dict[str, Any]], None]
) -> Callable[[dict[str, Any]], None]:
    def both(c: dict[str, Any]) -> None:
        first(c)
        then(c)

    return both


OWNER_CASES: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    (
        "owner required with kubernetes",
        lambda c: c.update(kubernetes={"version": "1.34"}),
        "cluster.nodes[0].owner",
        "required when the inventory has a `kubernetes:` or `cloud:` section",
    ),
    (
        "owner slurm-on-kubernetes without kubernetes",
        lambda c: c["nodes"][0].update(owner="slurm-on-kubernetes"),
        "cluster.nodes[0].owner",
        "`slurm-on-kubernetes` needs the `kubernetes:` section",
    ),
    (
        "two owners",
        _then(_two_owners, lambda c: c["nodes"].append({"group": "n05", "type": "h100", "owner": "slurm"})),
        "cluster.nodes[2].group",
        "host `n05` would have two owners: `kubernetes` from cluster.nodes[1] (`rack2`) and `slurm`",
    ),
    (
        "partition names a kubernetes host",
        _then(_two_owners, lambda c: c["partitions"][0].update(nodes=["gpus"])),
        "cluster.partitions[0].nodes[0]",
        "host `n05` is owned by kubernetes; a Slurm partition may only name hosts owned by slurm or slurm-on-kubernetes",
    ),
    (
        "partition mixes slurm and slurm on kubernetes",
        _then(
            _two_owners,
            lambda c: (
                c["nodes"][1].update(owner="slurm-on-kubernetes"),
                c["partitions"][0].update(nodes=["gpus"]),
            ),
        ),
        "cluster.partitions[0].nodes",
        "the partition mixes bare-metal Slurm and Slurm on Kubernetes",
    ),
    (
        "shorthand with two GPU owners",
        _then(_two_owners, lambda c: c["tenants"][1].update(gpus={}, gpu_quota=8)),
        "cluster.tenants[1].gpu_quota",
        "GPUs here have several owners (slurm, kubernetes): give this tenant's numbers per scheduler in `gpus`",
    ),
    (
        "shorthand and gpus together",
        _then(_two_owners, lambda c: c["tenants"][0].update(gpu_quota=8)),
        "cluster.tenants[0].gpus",
        "either as gpu_quota/gpu_limit or as gpus, not both",
    ),
    (
        "quota where the owner has no GPUs",
        lambda c: c["tenants"][0].update(gpu_quota=None, gpu_limit=None, gpus={"kubernetes": {"quota": 8}}),
        "cluster.tenants[0].gpus.kubernetes.quota",
        "no GPU node is owned by kubernetes: a quota there can never be met",
    ),
    (
        "kubernetes quotas exceed kubernetes GPUs",
        _then(
            _two_owners,
            lambda c: c["tenants"][1].update(gpus={"slurm": {"quota": 8}, "kubernetes": {"quota": 24}}),
        ),
        "cluster.tenants",
        "top-level tenants' quotas in kubernetes add up to 40, more than the 32 GPUs it owns",
    ),
    (
        "slurm limit above slurm GPUs",
        _then(_two_owners, lambda c: c["tenants"][1].update(gpus={"slurm": {"quota": 16, "limit": 40}})),
        "cluster.tenants[1].gpus.slurm.limit",
        "limit 40 exceeds the 32 GPUs owned by slurm",
    ),
]
OWNER_CASES.append(
    (
        "child quota where the parent has none",
        _then(
            _two_owners,
            lambda c: (
                c["tenants"][0].update(gpus={"slurm": {"quota": 16}}),
                c["tenants"][1].update(
                    parent="team-a", gpus={"slurm": {"quota": 8}, "kubernetes": {"quota": 4}}
                ),
            ),
        ),
        "cluster.tenants[1].gpus.kubernetes.quota",
        "parent tenant `team-a` has no GPUs in kubernetes: give it numbers there that cover its children",
    )
)
CASES += OWNER_CASES


def test_owners_split_hosts_and_quotas(inventories: InventoryFactory) -> None:
    cluster = load_cluster(write(inventories, _two_owners))
    assert cluster.hosts_owned_by(Owner.SLURM) == [f"n{i:02d}" for i in range(1, 5)]
    slurm = cluster.owned_by(Owner.SLURM)
    assert slurm.total_gpus == 32 and slurm.quota("team-a").quota == 16 and slurm.quota("team-b").quota == 16
    pods = cluster.owned_by(Owner.KUBERNETES)
    assert pods.hosts == [f"n{i:02d}" for i in range(5, 9)]
    assert pods.quota("team-a").quota == 16 and pods.quota("team-b").quota == 0
    # The switch tree is pruned to each owner's hosts: no switch without hosts below it.
    assert [s.name for s in slurm.switches] == ["leaf1", "top"]
    assert next(s for s in slurm.switches if s.name == "top").switches == ("leaf1",)
    assert pods.partitions == {}


@pytest.mark.parametrize(("mutate", "path", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_problem_names_file_path_and_reason(
    inventories: InventoryFactory, mutate: Callable[[dict[str, Any]], None], path: str, message: str
) -> None:
    directory = write(inventories, mutate)
    found = problems_of(directory)
    expected_file = str(directory / CLUSTER_FILE)
    assert any(p.startswith(expected_file) and f": {path}: " in p and message in p for p in found), (
        f"expected {path}: {message} in {found}"
    )


def test_rest_api_may_run_on_a_controller_or_a_login_host(inventories: InventoryFactory) -> None:
    hosts = SMALL_HOSTS.replace(
        "    all:\n      children:\n",
        "    all:\n      children:\n        login:\n          hosts:\n            login01:\n",
    )
    on_login = write(
        inventories, lambda c: c["slurm"].update(login=["login01"], rest_api={"host": "login01"}), hosts
    )
    assert load_cluster(on_login).spec.slurm.rest_api == RestApi(host="login01", port=6820)
    # 6817 is slurmctld's only where slurmctld runs.
    login_6817 = {"host": "login01", "port": 6817}
    on_login = write(inventories, lambda c: c["slurm"].update(login=["login01"], rest_api=login_6817), hosts)
    assert load_cluster(on_login).spec.slurm.rest_api == RestApi(host="login01", port=6817)
    on_head = write(inventories, lambda c: c["slurm"].update(rest_api={"host": "head", "port": 8080}))
    assert load_cluster(on_head).spec.slurm.rest_api == RestApi(host="head", port=8080)
    assert load_cluster(write(inventories, lambda c: None)).spec.slurm.rest_api is None


def test_login_hosts_may_be_a_controller_or_a_host_of_their_own(inventories: InventoryFactory) -> None:
    hosts = SMALL_HOSTS.replace(
        "    all:\n      children:\n",
        "    all:\n      children:\n        login:\n          hosts:\n            login01:\n",
        1,
    )
    cluster = load_cluster(write(inventories, lambda c: c["slurm"].update(login=["login01", "head"]), hosts))
    assert cluster.spec.slurm.login == ["login01", "head"]
    # In no partition: login hosts are not Slurm nodes.
    assert "login01" not in cluster.node_type_of
    # One name alone is a list of one, as for the controller; none by default.
    assert load_cluster(write(inventories, lambda c: c["slurm"].update(login="head"))).spec.slurm.login == [
        "head"
    ]
    assert load_cluster(write(inventories, lambda c: None)).spec.slurm.login == []


@pytest.mark.parametrize(
    ("uid", "allowed"),
    [
        (999, False),
        (1000, True),
        (59999, True),
        (60000, False),
        (65535, False),
        (65536, True),
        (524287, True),
        (524288, False),
    ],
)
def test_ids_are_refused_outside_the_ranges_for_people(
    inventories: InventoryFactory, uid: int, allowed: bool
) -> None:
    def mutate(c: dict[str, Any]) -> None:
        c["users"][0].update(uid=uid, group="ml")
        c["groups"] = [{"name": "ml", "gid": uid}]

    directory = write(inventories, mutate)
    if allowed:
        load_cluster(directory)
        return
    found = problems_of(directory)
    for path in ("cluster.users[0].uid", "cluster.groups[0].gid"):
        assert any(f": {path}: " in p and "1000-59999 or 65536-524287" in p for p in found), found


def test_users_may_share_declared_and_private_groups(inventories: InventoryFactory) -> None:
    def mutate(c: dict[str, Any]) -> None:
        c["groups"] = [{"name": "ml", "gid": 20000}]
        c["users"][0].update(groups=["ml", "bob"])  # bob's private group
        c["users"].append({"name": "carol", "uid": 10003, "group": "ml", "shell": "/bin/sh"})

    cluster = load_cluster(write(inventories, mutate))
    assert [u.primary_group for u in cluster.spec.users] == ["alice", "bob", "ml"]


def test_tenant_users_need_no_declaration_without_cluster_users(inventories: InventoryFactory) -> None:
    # A directory service provides the accounts: cluster.users is omitted, tenants name anyone.
    load_cluster(write(inventories, lambda c: c.pop("users")))


def test_a_bad_user_exits_2_with_the_problem_and_no_traceback(inventories: InventoryFactory) -> None:
    directory = write(inventories, lambda c: c["users"].append({"name": "carol", "uid": 10001}))
    proc = run_cli("validate", str(directory))
    assert proc.returncode == 2, proc.stderr
    assert "cluster.users[2].uid: uid 10001 is already the uid of `alice`" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_all_problems_are_reported_at_once(inventories: InventoryFactory) -> None:
    def many(c: dict[str, Any]) -> None:
        c["nodes"][0]["type"] = "a100"
        c["partitions"][0]["nodes"] = ["ghost"]
        c["tenants"][0]["qos"] = ["turbo"]

    found = problems_of(write(inventories, many))
    assert len(found) >= 3


def test_problem_carries_the_line_of_the_key(inventories: InventoryFactory) -> None:
    directory = write(inventories, lambda c: c["partitions"][0].update(nodse=["gpus"]))
    text = (directory / CLUSTER_FILE).read_text().splitlines()
    line = next(i for i, row in enumerate(text, 1) if "nodse" in row)
    assert any(p.startswith(f"{directory / CLUSTER_FILE}:{line}: ") for p in problems_of(directory))


HOSTS_CASES = [
    (
        "duplicate host",
        "all:\n  children:\n    g:\n      hosts:\n        n[01:04]:\n        n[03:05]:\n",
        "hosts.yml",
        "duplicate host `n03`",
    ),
    (
        "duplicate key",
        "all:\n  children:\n    g:\n      hosts:\n        n01:\n        n01:\n",
        "hosts.yml",
        "duplicate key",
    ),
    (
        "bad range",
        "all:\n  children:\n    g:\n      hosts:\n        n[04:01]:\n",
        "hosts.yml",
        "begin is after end",
    ),
    ("bad group key", "all:\n  children:\n    g:\n      host:\n        n01:\n", "hosts.yml", "unknown key"),
    ("syntax", "all:\n  children:\n    g: [\n", "hosts.yml:4", "YAML syntax error at column"),
    (
        "group cycle",
        "all:\n  children:\n    a:\n      children:\n        b:\n          children:\n            a:\n",
        "hosts.yml",
        "cycle",
    ),
]


@pytest.mark.parametrize(
    ("hosts", "file", "message"), [c[1:] for c in HOSTS_CASES], ids=[c[0] for c in HOSTS_CASES]
)
def test_hosts_file_problems(inventories: InventoryFactory, hosts: str, file: str, message: str) -> None:
    directory = inventories.make(hosts, SMALL_CLUSTER)
    found = problems_of(directory)
    assert any(p.startswith(str(directory / file)) and message in p for p in found), found


def test_cluster_file_syntax_error_names_line_and_column(inventories: InventoryFactory) -> None:
    directory = inventories.make(SMALL_HOSTS, "cluster:\n  name: x\n  slurm: {version: '22.05'\n")
    found = problems_of(directory)
    assert found == [
        f"{directory / CLUSTER_FILE}:4: YAML syntax error at column 1: did not find expected ',' or '}}'"
    ]


def test_missing_cluster_definition(inventories: InventoryFactory) -> None:
    directory = inventories.make(SMALL_HOSTS, "other_var: 1\n")
    assert any("no group_vars file of `all` defines `cluster`" in p for p in problems_of(directory))


def test_cli_exit_code_2_and_no_traceback(inventories: InventoryFactory) -> None:
    directory = write(inventories, lambda c: c["nodes"][0].update(type="a100"))
    for command in ("validate", "show", "render"):
        proc = run_cli(command, str(directory))
        assert proc.returncode == 2, proc
        assert "Traceback" not in proc.stderr + proc.stdout
        assert "cluster.nodes[0].type: unknown node type `a100`" in proc.stderr


def test_cli_valid_inventory_exits_0(inventories: InventoryFactory) -> None:
    proc = run_cli("validate", str(write(inventories, lambda c: None)))
    assert proc.returncode == 0
    assert "valid (8 nodes, 64 GPUs" in proc.stdout
