"""The sacctmgr plan of the slurm_associations module: only differences, in a valid order."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import load_module

assoc = load_module("slurm_associations")

DESIRED: dict[str, Any] = {
    "cluster": "lab",
    "qos": [
        {"name": "capped", "priority": 0, "max_tres_per_user": "gres/gpu=2"},
        {"name": "normal", "priority": 0},
    ],
    "accounts": [
        {
            "name": "product",
            "parent": "root",
            "fairshare": 40,
            "grp_tres": "gres/gpu=32",
            "qos": ["normal"],
            "default_qos": "normal",
        },
        {
            "name": "research",
            "parent": "root",
            "fairshare": 60,
            "grp_tres": "gres/gpu=24",
            "qos": ["capped", "normal"],
            "default_qos": "normal",
        },
    ],
    "users": [
        {"name": "alice", "default_account": "research", "accounts": ["research"]},
        {"name": "bob", "default_account": "product", "accounts": ["product"]},
    ],
}

# sacctmgr -nP output once DESIRED is in place (columns as the module asks for them).
CLUSTERS = "lab\n"
QOS = "normal|0|||||\ncapped|0|gres/gpu=2||||\n"
ASSOCS = (
    "root||||||normal\n"
    "root|root||1|||normal\n"
    "product||root|40|gres/gpu=32|normal|normal\n"
    "bob|product||1||normal|\n"
    "research||root|60|gres/gpu=24|capped,normal|normal\n"
    "alice|research||1||capped,normal|\n"
)
ASSOCS = "\n".join(
    # format=account,user,parentname,...: the user rows above list user first for readability
    "|".join([row.split("|")[1], row.split("|")[0], *row.split("|")[2:]])
    if row.split("|")[1] in ("product", "research")
    else row
    for row in ASSOCS.splitlines()
)
USERS = "root|root\nalice|research\nbob|product\n"


def current(**overrides: str) -> Any:
    parts = {"clusters": CLUSTERS, "qos": QOS, "assocs": ASSOCS, "users": USERS, **overrides}
    return assoc.current_state("lab", parts["clusters"], parts["qos"], parts["assocs"], parts["users"])


def test_in_sync_plans_nothing() -> None:
    assert assoc.plan(DESIRED, current()) == []


def test_empty_database_gets_everything_in_order() -> None:
    plan = assoc.plan(DESIRED, assoc.current_state("lab", "", "normal|0|||||\n", "", ""))
    assert plan[0] == ["add", "cluster", "lab"]
    assert ["add", "qos", "capped", "Priority=0", "MaxTRESPerUser=gres/gpu=2"] in plan
    add_research = next(c for c in plan if c[:3] == ["add", "account", "research"])
    assert "Fairshare=60" in add_research and "GrpTRES=gres/gpu=24" in add_research
    assert "QOS=capped,normal" in add_research and "DefaultQOS=normal" in add_research
    add_alice = next(c for c in plan if c[:3] == ["add", "user", "alice"])
    assert plan.index(add_research) < plan.index(add_alice)
    assert "DefaultAccount=research" in add_alice


def test_changed_fairshare_and_limit_modify_only_that_account() -> None:
    desired = {
        **DESIRED,
        "accounts": [
            dict(DESIRED["accounts"][0]),
            {**DESIRED["accounts"][1], "fairshare": 70, "grp_tres": "gres/gpu=16"},
        ],
    }
    assert assoc.plan(desired, current()) == [
        [
            "modify",
            "account",
            "where",
            "name=research",
            "cluster=lab",
            "set",
            "Fairshare=70",
            "GrpTRES=gres/gpu=16",
        ]
    ]


def test_other_tres_set_by_hand_are_left_alone() -> None:
    assocs = ASSOCS.replace("gres/gpu=24", "cpu=100,gres/gpu=24")
    assert assoc.plan(DESIRED, current(assocs=assocs)) == []


def test_dropped_qos_limit_is_cleared() -> None:
    desired = {**DESIRED, "qos": [{"name": "capped", "priority": 0}, {"name": "normal", "priority": 0}]}
    assert assoc.plan(desired, current()) == [
        ["modify", "qos", "where", "name=capped", "set", "MaxTRESPerUser=gres/gpu=-1"]
    ]


def test_removed_tenant_stays_unless_asked() -> None:
    desired = {**DESIRED, "accounts": DESIRED["accounts"][1:], "users": DESIRED["users"][:1]}
    assert assoc.plan(desired, current()) == []
    assert assoc.plan(desired, current(), remove_absent=True) == [
        ["delete", "user", "where", "name=bob", "account=product", "cluster=lab"],
        ["delete", "account", "where", "name=product", "cluster=lab"],
    ]


def test_root_and_normal_are_never_removed() -> None:
    desired = {"cluster": "lab", "qos": [], "accounts": [], "users": []}
    plan = assoc.plan(desired, current(), remove_absent=True)
    assert ["delete", "account", "where", "name=root", "cluster=lab"] not in plan
    assert not any("name=normal" in c for c in plan)
    assert not any("name=root" in c and c[1] == "user" for c in plan)


def test_child_account_is_added_after_its_parent() -> None:
    desired = {
        **DESIRED,
        "accounts": [
            {
                "name": "a-child",
                "parent": "z-parent",
                "fairshare": 1,
                "grp_tres": "gres/gpu=1",
                "qos": [],
                "default_qos": None,
            },
            {
                "name": "z-parent",
                "parent": "root",
                "fairshare": 1,
                "grp_tres": "gres/gpu=1",
                "qos": [],
                "default_qos": None,
            },
        ],
        "users": [],
    }
    names = [c[2] for c in assoc.plan(desired, current()) if c[:2] == ["add", "account"]]
    assert names == ["z-parent", "a-child"]


def test_new_user_account_pair_is_added() -> None:
    desired = {
        **DESIRED,
        "users": [
            {"name": "alice", "default_account": "research", "accounts": ["product", "research"]},
            DESIRED["users"][1],
        ],
    }
    assert assoc.plan(desired, current()) == [
        ["add", "user", "alice", "Account=product", "Cluster=lab", "DefaultAccount=research"]
    ]


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("30", 30),
        ("30:00", 30),
        ("02:00:00", 120),
        ("1-00:00:00", 1440),
        ("1-2", 1560),
        ("UNLIMITED", None),
        ("", None),
    ],
)
def test_slurm_times_compare_in_minutes(text: str, minutes: int | None) -> None:
    assert assoc.minutes(text) == minutes


def test_max_wall_written_differently_is_not_a_change() -> None:
    desired = {
        **DESIRED,
        "qos": [
            {"name": "capped", "priority": 0, "max_tres_per_user": "gres/gpu=2", "max_wall": "1-0"},
            DESIRED["qos"][1],
        ],
    }
    qos = QOS.replace("capped|0|gres/gpu=2||||", "capped|0|gres/gpu=2|||1-00:00:00|")
    assert assoc.plan(desired, current(qos=qos)) == []
