"""The decisions of the modules that carry out gpucluster.changes.procedures (issue 31): who leaves, who
joins and who takes control (slurm_controllers_change), what would end jobs (slurm_ending_changes),
which partition a gone one's jobs move to and how it is created live (slurm_partitions_change).
tests/lab/test_safe_changes.py runs them against the real daemons."""

from __future__ import annotations

from typing import Any

import pytest

from gpucluster.lab.paths import DEFAULT_INVENTORY
from gpucluster.layers import load_cluster

from .conftest import load_module

controllers = load_module("slurm_controllers_change")
ending = load_module("slurm_ending_changes")
partitions = load_module("slurm_partitions_change")
render = load_module("gpucluster_render")

PING_BOTH = "Slurmctld(primary) at ctl01 is UP\nSlurmctld(backup) at ctl02 is UP\n"
PING_BACKUP_IN_CHARGE = "Slurmctld(primary) at ctl01 is DOWN\nSlurmctld(backup) at ctl02 is UP\n"
CONFIG_26_05 = """\
Configuration data as of 2026-06-01T10:00:00
AccountingStorageHost   = ctl02
SLURM_VERSION           = 26.05.5
SlurmctldHost[0]        = ctl01(10.0.0.1)
SlurmctldHost[1]        = ctl02(10.0.0.2)
StateSaveLocation       = /shared/slurmctld
SwitchType              = (null)
"""


def test_ping_and_config_as_slurm_prints_them() -> None:
    assert controllers.parse_ping(PING_BOTH) == [
        {"host": "ctl01", "state": "UP"},
        {"host": "ctl02", "state": "UP"},
    ]
    assert controllers.parse_config(CONFIG_26_05) == {
        "version": "26.05.5",
        "state_save_location": "/shared/slurmctld",
        "accounting_host": "ctl02",
        "switch_type": "",
    }
    assert controllers.parse_config("SwitchType              = switch/none\n")["switch_type"] == ""


def decide(ping: str, new: list[str]) -> dict[str, Any]:
    result: dict[str, Any] = controllers.compare(controllers.parse_ping(ping), new)
    return result


def test_the_backup_leaves_while_the_primary_runs_the_cluster() -> None:
    result = decide(PING_BOTH, ["ctl01"])
    assert (result["leaving"], result["joining"], result["kept"]) == (["ctl02"], [], ["ctl01"])
    assert (result["takeover"], result["start"], result["error"]) == (None, "", "")


def test_the_primary_leaves_the_backup_takes_over_first() -> None:
    result = decide(PING_BOTH, ["ctl02"])
    assert result["leaving"] == ["ctl01"] and result["takeover"] == 1


def test_the_backup_leaves_while_it_runs_the_cluster_the_primary_is_started() -> None:
    result = decide(PING_BACKUP_IN_CHARGE, ["ctl01"])
    assert result["in_charge"] == "ctl02" and result["start"] == "ctl01" and result["takeover"] is None


def test_a_new_primary_starts_alone() -> None:
    result = decide("Slurmctld(primary) at ctl02 is UP\n", ["ctl01", "ctl02"])
    assert result["joining"] == ["ctl01"] and result["stop_first"] == ["ctl02"]
    assert decide("Slurmctld(primary) at ctl01 is UP\n", ["ctl01", "ctl02"])["stop_first"] == []


def test_replacing_every_controller_is_refused() -> None:
    result = decide(PING_BOTH, ["ctl03", "ctl04"])
    assert "no controller of the new list (ctl03, ctl04) runs now" in result["error"]
    assert "listing ctl01, ctl02, ctl03, ctl04 first" in result["error"]


# --- what would end jobs ----------------------------------------------------------------------------


def params(**changes: Any) -> dict[str, Any]:
    base = {
        "live": controllers.parse_config(CONFIG_26_05),
        "release": "26.05",
        "reads": ["24.11", "25.05", "25.11", "26.05"],
        "switch_type": "",
        "state_save_location": "/shared/slurmctld",
        "state_filesystem": None,
        "confirmed": False,
    }
    base.update(changes)
    return base


def test_nothing_ends_jobs_on_the_same_release_and_settings() -> None:
    assert ending.reasons(params(), None) == []
    upgrade = params(live={**params()["live"], "version": "24.11.5"})
    assert ending.reasons(upgrade, None) == []


@pytest.mark.parametrize(
    ("changes", "mounted", "words"),
    [
        ({"live": {"version": "22.05.8"}}, None, "Slurm 26.05 reads the state of 24.11, 25.05, 25.11 only"),
        (
            {
                "live": {"version": "26.05.5"},
                "release": "24.11",
                "reads": ["23.02", "23.11", "24.05", "24.11"],
            },
            None,
            "Slurm 24.11 cannot read a newer release's state",
        ),
        ({"switch_type": "switch/nvidia_imex"}, None, "SwitchType changes from none to switch/nvidia_imex"),
        (
            {
                "state_filesystem": {
                    "mount": "/shared",
                    "source": "filer02:/export/slurm",
                    "site_managed": False,
                }
            },
            "filer01:/export/slurm",
            "the new configuration mounts filer02:/export/slurm there",
        ),
    ],
)
def test_what_ends_jobs_is_named(changes: dict[str, Any], mounted: str | None, words: str) -> None:
    live = {**params()["live"], **changes.pop("live", {})}
    found = ending.reasons(params(live=live, **changes), mounted)
    assert len(found) == 1 and words in found[0], found


def test_a_bind_mount_or_a_site_managed_state_is_not_judged() -> None:
    fs = {"mount": "/shared", "source": "filer02:/export/slurm", "site_managed": False}
    assert ending.reasons(params(state_filesystem=fs), "/dev/sda1[/srv/nfs/slurm]") == []
    assert ending.reasons(params(state_filesystem={**fs, "site_managed": True}), "filer01:/x") == []


# --- partitions -----------------------------------------------------------------------------------


def test_partitions_as_scontrol_shows_them() -> None:
    text = (
        "PartitionName=gpu AllowGroups=ALL Default=YES MaxTime=1-00:00:00 Nodes=gpu[01-04] State=UP TotalCPUs=8\n"
        "PartitionName=dev AllowGroups=ALL Default=NO Nodes=gpu[03-04] State=DRAIN\n"
    )
    found = partitions.parse_partitions(text)
    assert found["gpu"]["Nodes"] == "gpu[01-04]" and found["dev"]["State"] == "DRAIN"


def test_a_gone_partition_pairs_with_a_new_one_of_the_same_nodes() -> None:
    hosts = {
        "gpu": frozenset({"gpu01", "gpu02"}),
        "dev": frozenset({"gpu03"}),
        "batch": frozenset({"gpu01", "gpu02"}),
        "debug": frozenset({"gpu04"}),
    }
    assert partitions.pair_renames(["dev", "gpu"], ["batch", "debug"], hosts, {}) == {"gpu": "batch"}
    # Told explicitly, nodes that changed too.
    assert partitions.pair_renames(["dev", "gpu"], ["batch", "debug"], hosts, {"dev": "debug"}) == {
        "dev": "debug",
        "gpu": "batch",
    }


def test_a_partition_is_created_with_the_nodes_slurmctld_knows() -> None:
    words = partitions.create_args(
        "PartitionName=batch Nodes=gpu[01-05] Default=YES JobDefaults=DefMemPerGPU=128 State=UP",
        {"gpu01", "gpu02", "gpu03", "gpu04"},
        lambda text: [f"gpu0{n}" for n in range(1, 6)],
    )
    assert words == [
        "PartitionName=batch",
        "Nodes=gpu01,gpu02,gpu03,gpu04",
        "Default=YES",
        "JobDefaults=DefMemPerGPU=128",
        "State=UP",
    ]


# --- what the render gives the plays ----------------------------------------------------------------


def test_the_render_gives_the_lab_partitions_and_its_state_filesystem() -> None:
    cluster = load_cluster(DEFAULT_INVENTORY)
    facts = render.classify(cluster)
    assert facts["release"]["reads"] == ["24.11", "25.05", "25.11", "26.05"]
    assert facts["switch_type"] == ""
    state = facts["state_filesystem"]
    assert (state["name"], state["mount"], state["site_managed"]) == (
        "slurm-state",
        "/shared/slurmctld",
        True,
    )
    assert state["hosts"] == ["ctl01", "ctl02"]


def test_plan_knows_the_keys_the_role_restarts_for() -> None:
    """gpucluster.slurm.keys.RESTART_KEYS is the role's list: a `slurm.extra` key among them is
    planned as a restart, which is what the role then does."""
    import yaml

    from gpucluster.slurm.keys import RESTART_KEYS, needs_restart

    from .conftest import ROLES

    defaults = yaml.safe_load((ROLES / "slurm_common" / "defaults" / "main.yml").read_text())
    assert sorted(RESTART_KEYS) == sorted(defaults["slurm_common_restart_keys"])
    assert needs_restart("SwitchType") and needs_restart("SlurmctldHost")
    assert not needs_restart("KillWait") and not needs_restart("SlurmdTimeout")


# --- a rename whose wait stops survives a restart (issue 37, item 4) -------------------------------

LIVE_CONF = """\
ClusterName=lab
PartitionName=gpu Nodes=gpu[01-04] Default=YES MaxTime=UNLIMITED State=UP
PartitionName=old Nodes=gpu01 MaxTime=1-00:00:00
"""


def test_slurm_conf_keeps_the_partitions_as_they_are_live() -> None:
    new_lines = [
        "PartitionName=batch Nodes=gpu[01-04] Default=YES MaxTime=UNLIMITED State=UP",
        "PartitionName=other Nodes=gpu02 State=UP",
    ]
    kept = partitions.kept_conf(LIVE_CONF, ["gpu", "old"], {"gpu": "batch"}, new_lines)
    assert kept.splitlines() == [
        "ClusterName=lab",
        "PartitionName=gpu Nodes=gpu[01-04] Default=NO MaxTime=UNLIMITED State=INACTIVE",
        "PartitionName=old Nodes=gpu01 MaxTime=1-00:00:00 State=DRAIN Default=NO",
        "# gpucluster: created live while gpu empties (the run that installs the new configuration "
        "replaces this file)",
        "PartitionName=batch Nodes=gpu[01-04] Default=YES MaxTime=UNLIMITED State=UP",
    ]
    # A second run (the wait stopped, the playbook run again) changes nothing.
    assert partitions.kept_conf(kept, ["gpu", "old"], {"gpu": "batch"}, new_lines) == kept


@pytest.mark.parametrize(
    ("text", "value"),
    [("60", 3600), ("08:00:00", 28800), ("7-00:00:00", 604800), ("1-12", 129600), ("2-01:30", 178200),
     ("59:30", 3570), ("UNLIMITED", None), ("infinite", None), ("INVALID", None)],
)  # fmt: skip
def test_slurm_times_in_seconds(text: str, value: int | None) -> None:
    assert partitions.seconds(text) == value


def test_the_wait_is_bounded_by_what_the_jobs_may_run() -> None:
    live = {
        "dev": {"MaxTime": "08:00:00"},
        "train": {"MaxTime": "14-00:00:00"},
        "free": {"MaxTime": "UNLIMITED"},
    }
    assert partitions.wait_bound(live, ["dev", "train"], None) == (1209600, "MaxTime of train")
    assert partitions.wait_bound(live, ["dev"], 600) == (600, "slurm_common_leave_timeout")
    assert partitions.wait_bound(live, ["dev", "free"], None) == (
        3600,
        "free: MaxTime=UNLIMITED, no bound of Slurm's",
    )
    leaving = load_module("slurm_leaving_nodes")
    limits = {"gpu01": ["08:00:00", "7-00:00:00"], "gpu02": ["08:00:00"]}
    assert leaving.wait_bound(limits, ["gpu01", "gpu02"], None) == (
        604800,
        "the longest MaxTime of their partitions, 7-00:00:00",
    )
    assert leaving.wait_bound({"gpu01": ["infinite"]}, ["gpu01"], None)[0] == 3600


# gpu03 as the lab's 26.05 slurmctld showed it (CI of branch next): drained by slurmctld at 14:51:09
# while its slurmd ran the old files, slurmd restarted on the new files at 14:51:24.
SHOW_NODES = (
    "NodeName=gpu03 Arch=x86_64 CoresPerSocket=2 CPUAlloc=0 Gres=gpu:h100:1(S:0),shard:h100:4(S:0) "
    "State=IDLE+DRAIN SlurmdStartTime=2026-11-27T14:51:24 Partitions=gpu "
    "Reason=gres/shard count reported lower than configured (0 < 4) [slurm@2026-11-27T14:51:09]\n"
    "NodeName=gpu04 State=IDLE+DRAIN SlurmdStartTime=2026-11-27T14:51:24 "
    "Reason=gres/gpu count reported lower than configured (1 < 8) [slurm@2026-11-27T14:52:30]\n"
    "NodeName=gpu01 State=IDLE+DRAIN SlurmdStartTime=2026-11-27T14:51:24 "
    "Reason=Low RealMemory (reported:512 < 100.00% of configured:1024) [root@2026-11-27T14:50:00]\n"
    "NodeName=gpu02 State=IDLE+DRAIN SlurmdStartTime=2026-11-27T14:51:24 "
    "Reason=maintenance: new PSU [root@2026-11-27T14:00:00]\n"
    "NodeName=gpu05 State=IDLE SlurmdStartTime=2026-11-27T14:51:24\n"
    # gpu06 as 26.05 showed it in CI after the gate's burn-in: its record in the Comment, after
    # the Reason on the same line.
    "NodeName=gpu06 State=IDLE+DRAIN SlurmdStartTime=2026-11-28T14:45:30 "
    "Reason=gres/shard count reported lower than configured (0 < 4) [slurm@2026-11-28T14:45:21] "
    'Comment=gate-record {"node":"gpu06","result":"pass","checks":[["gpu_model","skip","no nvidia-smi"]]} '
    "Extra=(null)\n"
)


def test_only_slurms_own_mismatch_drains_from_before_slurmd_restarted_are_resumed() -> None:
    drains = load_module("slurm_config_drains")
    nodes = drains.records(SHOW_NODES)
    assert nodes["gpu03"]["Reason"].endswith("[slurm@2026-11-27T14:51:09]")
    decided = {name: drains.stale_drain(fields, "slurm") for name, fields in nodes.items()}
    assert decided == {
        "gpu03": (True, True),  # resumed: the old slurmd's counts
        "gpu04": (True, False),  # the new slurmd mismatches too: left drained
        "gpu01": (False, False),  # set by root, not by slurmctld's check
        "gpu02": (False, False),  # an administrator's reason
        "gpu05": (False, False),  # not drained
        "gpu06": (True, True),  # resumed: a Comment after the Reason changes nothing
    }
    assert nodes["gpu06"]["Comment"].startswith("gate-record {")


def test_a_gres_count_slurmctld_kept_from_before_the_change_is_named() -> None:
    # gpu03 as the lab's 22.05.8 slurmctld showed it after its GPUs went from 8 to 1 (the new slurmd
    # registered with 1): Gres= still counted 8 while CfgTRES said 1.
    drains = load_module("slurm_config_drains")
    kept = (
        "NodeName=gpu03 Gres=gpu:h100:8(S:0),shard:h100:4(S:0) State=IDLE "
        "CfgTRES=cpu=2,mem=1G,billing=2,gres/gpu=1,gres/shard=4 SlurmdStartTime=2026-11-27T16:41:51"
    )
    fields = drains.records(kept)["gpu03"]
    assert drains.gres_counts(fields["Gres"]) == {"gpu": 8, "shard": 4}
    assert drains.configured_counts(fields["CfgTRES"]) == {"gpu": 1, "shard": 4}
    assert drains.kept_count(fields) == "gpu=8 configured gpu=1"
    # Two types on one node, typed TRES beside the untyped ones; MPS; a node without GRES.
    two_types = {
        "Gres": "gpu:a100:2(S:0),gpu:v100:2(S:1)",
        "CfgTRES": "cpu=8,gres/gpu=4,gres/gpu:a100=2,gres/gpu:v100=2",
    }
    assert drains.kept_count(two_types) == ""
    assert drains.kept_count({"Gres": "gpu:1,mps:100", "CfgTRES": "gres/gpu=1,gres/mps=100"}) == ""
    assert drains.kept_count({"Gres": "(null)", "CfgTRES": "cpu=2,mem=1G"}) == ""
