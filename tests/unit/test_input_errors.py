"""Mistakes a first inventory makes, each reported once, where it was written, saying what to do:
misspelt and misplaced keys, tabs, groups named twice, device lists, hosts with no part, and
slurm.conf keys in `slurm.extra` the target release does not have or gpucluster writes itself."""

from __future__ import annotations

import copy
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.errors import InventoryError
from gpucluster.layers import layer_slurm_conf, load_cluster
from gpucluster.model.cluster import Cluster
from gpucluster.model.releases import RELEASES
from gpucluster.rendering import render_files
from gpucluster.slurm.conf_keys import KEYS, SOURCES
from gpucluster.slurm.written import MODELLED, written_keys
from tests.conftest import INVENTORIES, SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory, example_inventories

BASE = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))
CLUSTER_FILE = "group_vars/all/cluster.yml"


def problems(directory: Path) -> list[str]:
    with pytest.raises(InventoryError) as info:
        load_cluster(directory)
    return [str(p).removeprefix(str(directory) + "/") for p in info.value.problems]


def edited(
    inventories: InventoryFactory, mutate: Callable[[dict[str, Any]], None], hosts: str = SMALL_HOSTS
) -> Path:
    data = copy.deepcopy(BASE)
    mutate(data["cluster"])
    return inventories.make(hosts, yaml.safe_dump(data, sort_keys=False))


def text_edited(inventories: InventoryFactory, edits: dict[str, str]) -> Path:
    text = textwrap.dedent(SMALL_CLUSTER)
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new)
    return inventories.make(SMALL_HOSTS, text)


# --- keys of the model ------------------------------------------------------------------------


def test_a_misspelt_key_is_one_problem_with_the_key_it_stands_for(inventories: InventoryFactory) -> None:
    directory = text_edited(inventories, {"cores_per_socket: 8": "cores_per_sockets: 8"})
    assert problems(directory) == [
        f"{CLUSTER_FILE}:8: cluster.node_types.h100.cores_per_sockets: unknown key: did you mean `cores_per_socket`?"
    ]


def test_every_unknown_key_gets_the_closest_known_one(inventories: InventoryFactory) -> None:
    def typos(c: dict[str, Any]) -> None:
        c["partitions"][0]["max_tme"] = "1:00:00"
        c["slurm"]["acounting"] = c["slurm"].pop("accounting")
        c["tenants"][0]["fairshar"] = 3

    found = problems(edited(inventories, typos))
    assert [p.split(": ", 1)[1] for p in found] == [
        "cluster.slurm.acounting: unknown key: did you mean `accounting`?",
        "cluster.partitions[0].max_tme: unknown key: did you mean `max_time`?",
        "cluster.tenants[0].fairshar: unknown key: did you mean `fairshare`?",
    ]


def test_a_key_indented_into_a_mapping_is_one_problem(inventories: InventoryFactory) -> None:
    directory = text_edited(
        inventories,
        {"  nodes:\n    - {group: gpus, type: h100}\n": "    nodes:\n      - {group: gpus, type: h100}\n"},
    )
    assert problems(directory) == [
        f"{CLUSTER_FILE}:10: cluster.node_types.nodes: `nodes` is an entry of cluster.node_types, but a key "
        "of cluster: check its indentation"
    ]


def test_a_key_one_level_too_high_names_where_it_belongs(inventories: InventoryFactory) -> None:
    found = problems(
        edited(inventories, lambda c: c["node_types"]["h100"].update(devices="/dev/nvidia[0-7]"))
    )
    assert found == [
        f"{CLUSTER_FILE}:17: cluster.node_types.h100.devices: `devices` is a key of `gpus` "
        "(cluster.node_types.h100.gpus.devices): check its indentation"
    ]


def test_a_key_one_level_too_deep_is_reported_once(inventories: InventoryFactory) -> None:
    def deeper(c: dict[str, Any]) -> None:
        c["slurm"]["accounting"]["controller"] = c["slurm"].pop("controller")

    assert [p.split(": ", 1)[1] for p in problems(edited(inventories, deeper))] == [
        "cluster.slurm.accounting.controller: `controller` is a key of cluster.slurm, not of "
        "cluster.slurm.accounting: check its indentation"
    ]


def test_a_word_close_to_an_allowed_one_gets_it(inventories: InventoryFactory) -> None:
    found = problems(edited(inventories, lambda c: c["nodes"][0].update(owner="slrum")))
    assert len(found) == 1 and found[0].endswith("; did you mean `slurm`?"), found


# --- YAML -------------------------------------------------------------------------------------


def test_a_tab_is_called_a_tab_at_its_line(inventories: InventoryFactory) -> None:
    directory = inventories.make(SMALL_HOSTS, "cluster:\n  name: x\n\tslurm: {}\n")
    assert problems(directory) == [
        f"{CLUSTER_FILE}:3: YAML syntax error at column 1: found a tab character that violates indentation "
        "(a tab character: YAML indents with spaces only; replace the tabs on this line with spaces)"
    ]


def test_a_syntax_error_in_hosts_yml_has_its_line(inventories: InventoryFactory) -> None:
    directory = inventories.make(
        "all:\n  children:\n    g:\n      hosts: [a\n", textwrap.dedent(SMALL_CLUSTER)
    )
    found = problems(directory)
    assert len(found) == 1 and found[0].startswith("hosts.yml:5: YAML syntax error at column"), found


# --- hosts and groups -------------------------------------------------------------------------


def test_a_group_listed_with_its_parent_is_one_problem(inventories: InventoryFactory) -> None:
    found = problems(edited(inventories, lambda c: c["nodes"].append({"group": "rack1", "type": "h100"})))
    assert [p.split(": ", 1)[1] for p in found] == [
        "cluster.nodes[1].group: hosts n[01-04] already have node type `h100` from cluster.nodes[0] (`gpus`) "
        "(group `rack1` is inside `gpus`): give each host one entry"
    ]


def test_a_slurm_range_where_a_group_belongs_says_so(inventories: InventoryFactory) -> None:
    found = problems(edited(inventories, lambda c: c["partitions"][0].update(nodes=["n[01-08]"])))
    assert any(
        "`n[01-08]` is not a host or group" in p and "ranges like `gpu[01:04]` belong in hosts.yml" in p
        for p in found
    ), found


def test_a_host_with_no_part_is_reported_at_its_line_in_hosts_yml(inventories: InventoryFactory) -> None:
    hosts = SMALL_HOSTS.replace(
        "        ctl:\n", "        spare:\n          hosts:\n            s[1:2]:\n        ctl:\n"
    )
    found = problems(edited(inventories, lambda c: None, hosts=hosts))
    assert found == [
        "hosts.yml:5: all.children.spare.hosts.s[1:2]: hosts s[1-2] have no part in "
        f"{Path(found[0].split(' have no part in ')[1].split(':')[0])}: in no group of cluster.nodes, and "
        "no controller, login, accounting, REST API or storage host (give them one, or remove them)"
    ]
    assert CLUSTER_FILE in found[0]


# --- GPU device lists -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        ("/dev/nvidia[0:7]", "device lists use Slurm's range syntax, `[0-7]`"),
        ("/dev/nvidia[1-8]", "the 8 GPUs of a node are /dev/nvidia0 to /dev/nvidia7"),
        ("nvidia[0-7]", "nvidia0, nvidia1, nvidia2 ...: not a GPU device file"),
        ("/dev/nvidia[0-6],/dev/nvidiactl", "/dev/nvidiactl: not a GPU device file"),
        ("/dev/nvidia[0-3]", "names 4 device(s) but count is 8"),
        ("/dev/nvidia[0-6],/dev/nvidia6", "names 7 device(s) but count is 8"),
        ("/dev/nvidia[0-", "not a valid device list"),
    ],
)
def test_gpu_device_lists(inventories: InventoryFactory, devices: str, message: str) -> None:
    found = problems(edited(inventories, lambda c: c["node_types"]["h100"]["gpus"].update(devices=devices)))
    assert len(found) == 1 and message in found[0], found
    assert "cluster.node_types.h100.gpus.devices" in found[0]


# --- slurm.extra ------------------------------------------------------------------------------


def extra(**keys: Any) -> Callable[[dict[str, Any]], None]:
    return lambda c: c["slurm"].update(extra=keys)


def test_extra_keys_are_those_of_the_target_release(inventories: InventoryFactory) -> None:
    found = problems(
        edited(
            inventories,
            extra(
                SelectTypeParameter="CR_Core",
                SchedulerType="sched/builtin",
                KillWait=30,
                AuthType="auth/none",
            ),
        )
    )
    assert sorted(p.split(": ", 1)[1] for p in found) == [
        "cluster.slurm.extra.AuthType: AuthType is written by gpucluster's slurm.conf (always "
        "written); remove it here (Slurm would keep one of the two lines)",
        "cluster.slurm.extra.KillWait: KillWait is cluster.slurm.timeouts.kill_wait: set it there",
        "cluster.slurm.extra.SchedulerType: SchedulerType is cluster.slurm.scheduler_type: set it there",
        "cluster.slurm.extra.SelectTypeParameter: `SelectTypeParameter` is not a slurm.conf key of Slurm "
        "22.05: did you mean `SelectTypeParameters`?",
    ]


def test_a_key_of_another_release_says_which_had_it(inventories: InventoryFactory) -> None:
    found = problems(edited(inventories, extra(HealthCheckTimeout=90)))
    assert found == [
        f"{CLUSTER_FILE}:9: cluster.slurm.extra.HealthCheckTimeout: `HealthCheckTimeout` is not a slurm.conf "
        "key of Slurm 22.05 (Slurm 26.05 had it; see slurm.conf(5) of the release)"
    ]


def test_written_keys_are_refused_in_any_spelling(inventories: InventoryFactory) -> None:
    found = problems(
        edited(inventories, extra(clustername="x", AccountingStoragePort=7000, authtype="auth/x"))
    )
    assert sorted(p.split(": ", 2)[2] for p in found) == [
        "AccountingStoragePort is cluster.slurm.accounting.port: set it there",
        "AuthType is written by gpucluster's slurm.conf (always written); remove it here (Slurm would keep "
        "one of the two lines)",
        "ClusterName is cluster.name: set it there",
    ]


def test_extra_keys_gpucluster_does_not_write_here_pass(inventories: InventoryFactory) -> None:
    # No health check, no REST API: their keys are the site's to set.
    cluster = load_cluster(edited(inventories, extra(HealthCheckInterval=60, AuthAltTypes="auth/jwt")))
    assert "HealthCheckInterval=60" in render_files(cluster)["slurm/slurm.conf"]


def test_the_key_lists_cover_every_release() -> None:
    assert set(KEYS) == set(RELEASES) == set(SOURCES)
    assert "HealthCheckTimeout" in KEYS["26.05"] and "HealthCheckTimeout" not in KEYS["25.11"]
    assert "DefCpuPerGPU" in KEYS["22.05"]
    # Values of parameters are no keys.
    assert not {"Contain", "Cores", "NoShared", "Backfill"} & set().union(*KEYS.values())


def layer_keys(cluster: Cluster) -> set[str]:
    """The keys the layers write (gpucluster.layers checks them against the Slurm section)."""
    return {key for lines in layer_slurm_conf(cluster).values() for key, _ in lines if key != "#"}


GLOBAL_LINE = re.compile(r"^([A-Za-z]+)=")


def global_keys(slurm_conf: str) -> set[str]:
    return {m.group(1) for line in slurm_conf.splitlines() if (m := GLOBAL_LINE.match(line))} - {
        "NodeName",
        "PartitionName",
    }


@pytest.mark.parametrize("example", example_inventories())
def test_written_keys_are_what_slurm_conf_holds(example: str) -> None:
    cluster = load_cluster(INVENTORIES / example)
    conf = render_files(cluster).get("slurm/slurm.conf")
    if conf is None:
        return
    found = global_keys(conf)
    written = set(written_keys(cluster.spec)) | layer_keys(cluster)
    # Every line gpucluster writes is in the tables, and the table says when it is written.
    assert found - written - set(MODELLED) - set(cluster.spec.slurm.extra) == set()
    assert written - found <= {"DefCpuPerGPU", "DefMemPerGPU"}  # on the partitions' lines
    assert all(key in KEYS[cluster.release.name] for key in found)


def maximal(c: dict[str, Any]) -> None:
    """Every Slurm setting of the model set (Slurm 26.05), so that each key it writes shows."""
    c["slurm"].update(
        version="26.05",
        state_save_location="/shared/state",
        configless=True,
        config_overrides=True,
        rest_api={"host": "head"},
        node_ssh={},
        health={"interval": 300},
        priority={"fairshare": 1, "assoc": 2, "tres": "GRES/gpu=3", "max_age": "7-0", "usage_reset_period": "NONE",
                  "favor_small": True, "flags": ["SMALL_RELATIVE_TO_TIME"]},
        scheduler_parameters=["bf_continue"],
        preemption={"type": "qos", "mode": ["REQUEUE"], "exempt_time": "10", "parameters": ["strict_order"]},
        prolog=["/etc/slurm/prolog.d/*"],
        epilog=["/etc/slurm/epilog.d/*"],
        prolog_flags=["Alloc"],
        timeouts={name: 100 for name in ("slurmctld", "slurmd", "message", "tcp", "batch_start", "prolog_epilog",
                  "unkillable_step", "kill_wait", "min_job_age", "inactive_limit", "wait_time", "over_time_limit",
                  "epilog_msg_time", "resv_over_run", "complete_wait")},
        daemons={"slurmctld_debug": "verbose", "slurmd_debug": "debug", "debug_flags": ["Gres"]},
        power_save={"suspend_program": "/s", "resume_program": "/r", "resume_fail_program": "/f", "suspend_time": 60,
                    "suspend_timeout": 60, "resume_timeout": 60, "suspend_rate": 1, "resume_rate": 1,
                    "exclude_nodes": ["rack1"], "exclude_partitions": ["batch"], "exclude_states": ["DOWN"]},
        propagate_resource_limits=["NOFILE"],
        propagate_resource_limits_except=["MEMLOCK"],
        slurmctld_parameters=["idle_on_node_suspend"],
        slurmd_parameters=["numa_node_as_socket"],
        job_acct_gather_type="linux",
        extra={"TreeWidth": 32},
    )  # fmt: skip
    c["slurm"]["accounting"].update(tres=["gres/gpu"], enforce=["limits"])
    c["node_types"]["h100"].update(
        tmp_disk_mb=1, mem_spec_limit_mb=1024, core_spec_count=1, cpu_spec_list="0"
    )


def test_every_key_a_maximal_inventory_writes_is_in_the_tables(inventories: InventoryFactory) -> None:
    cluster = load_cluster(edited(inventories, maximal))
    conf = render_files(cluster)["slurm/slurm.conf"]
    found = global_keys(conf)
    written = set(written_keys(cluster.spec)) | layer_keys(cluster)
    assert found - written - set(MODELLED) - set(cluster.spec.slurm.extra) == set()
    assert written - found <= {"DefCpuPerGPU", "DefMemPerGPU"}
    assert all(key in KEYS[cluster.release.name] for key in found), found - KEYS[cluster.release.name]
    # Each model home of a key is one this inventory sets, so each key shows.
    homes = {key for key, home in MODELLED.items() if home.startswith("cluster.slurm.")}
    assert homes - found <= {"GetEnvTimeout", "PriorityWeightJobSize", "PriorityWeightPartition", "PriorityDecayHalfLife",
                             "PriorityCalcPeriod", "PriorityWeightQOS", "PriorityWeightAge"}  # fmt: skip


def test_a_setting_whose_key_the_release_lacks_is_refused(inventories: InventoryFactory) -> None:
    found = problems(
        edited(inventories, lambda c: c["slurm"].update(version="26.05", timeouts={"get_env": 60}))
    )
    assert [p.split(": ", 1)[1] for p in found] == [
        "cluster.slurm.timeouts.get_env: Slurm 26.05 has no GetEnvTimeout (slurm.conf(5) of the release): remove it"
    ]


def test_slurm_nodes_without_any_partition_are_refused(inventories: InventoryFactory) -> None:
    found = problems(edited(inventories, lambda c: c.pop("partitions")))
    assert any("no partition: slurmctld stops without one" in p for p in found), found
