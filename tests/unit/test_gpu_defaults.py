"""What a GPU site deploys, from the model: per-GPU CPU and memory defaults on the partitions, each
GPU with its cores in gres.conf, tenants' quotas as Slurm fair-share, heavy health checks on idle
nodes only."""

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
from gpucluster.rendering import render_files
from tests.conftest import SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory

BASE = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))


def inventory(
    inventories: InventoryFactory, mutate: Callable[[dict[str, Any]], None] = lambda c: None
) -> Path:
    data = copy.deepcopy(BASE)
    mutate(data["cluster"])
    return inventories.make(SMALL_HOSTS, yaml.safe_dump(data, sort_keys=False))


def files(
    inventories: InventoryFactory, mutate: Callable[[dict[str, Any]], None] = lambda c: None
) -> dict[str, str]:
    return render_files(load_cluster(inventory(inventories, mutate)))


def problems(inventories: InventoryFactory, mutate: Callable[[dict[str, Any]], None]) -> list[str]:
    with pytest.raises(InventoryError) as info:
        load_cluster(inventory(inventories, mutate))
    return [f"{p.path}: {p.message}" for p in info.value.problems]


def partition_line(conf: str, name: str = "batch") -> str:
    return next(line for line in conf.splitlines() if line.startswith(f"PartitionName={name} "))


def gres(conf: str) -> list[str]:
    return [line for line in conf.splitlines() if line.startswith("NodeName=")]


def h100(c: dict[str, Any]) -> dict[str, Any]:
    node_type: dict[str, Any] = c["node_types"]["h100"]
    return node_type


# --- DefCpuPerGPU / DefMemPerGPU --------------------------------------------------------------


def test_a_gpu_partition_gets_each_gpus_share_of_cpus_and_memory(inventories: InventoryFactory) -> None:
    # 2 sockets x 8 cores, 64000 MiB, 8 GPUs: 2 CPUs and 8000 MiB per GPU.
    line = partition_line(files(inventories)["slurm/slurm.conf"])
    assert " DefCpuPerGPU=2 DefMemPerGPU=8000 " in line


def test_set_values_win_and_the_smallest_share_serves_mixed_node_types(inventories: InventoryFactory) -> None:
    def mixed(c: dict[str, Any]) -> None:
        c["node_types"]["h200"] = {**copy.deepcopy(h100(c)), "memory_mb": 128000, "threads_per_core": 2}
        c["nodes"] = [{"group": "rack1", "type": "h100"}, {"group": "rack2", "type": "h200"}]
        c["partitions"].append({"name": "big", "nodes": ["rack2"], "memory_per_gpu_mb": 12000})

    conf = files(inventories, mixed)["slurm/slurm.conf"]
    assert " DefCpuPerGPU=2 DefMemPerGPU=8000 " in partition_line(conf)  # h100's share: the smaller
    assert " DefCpuPerGPU=4 DefMemPerGPU=12000 " in partition_line(conf, "big")


def test_no_cpu_default_where_a_node_has_fewer_cpus_than_gpus(inventories: InventoryFactory) -> None:
    conf = files(inventories, lambda c: h100(c).update(sockets=1, cores_per_socket=4))["slurm/slurm.conf"]
    line = partition_line(conf)
    assert "DefCpuPerGPU" not in line and " DefMemPerGPU=8000 " in line


def test_a_cpu_partition_gets_no_gpu_defaults(inventories: InventoryFactory) -> None:
    def cpu_only(c: dict[str, Any]) -> None:
        del h100(c)["gpus"]
        c["tenants"] = []

    assert "PerGPU" not in files(inventories, cpu_only)["slurm/slurm.conf"]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"cpus_per_gpu": 3}, "cpus_per_gpu: a job using all 8 GPUs of a `h100` node would get 8 x 3 = 24 CPUs; the node has 16"),
        ({"memory_per_gpu_mb": 9000}, "memory_per_gpu_mb: a job using all 8 GPUs of a `h100` node would get 8 x 9000 = 72000 MiB; the node has 64000"),
    ],
)  # fmt: skip
def test_defaults_a_full_node_could_not_give_are_refused(
    inventories: InventoryFactory, setting: dict[str, int], message: str
) -> None:
    assert problems(inventories, lambda c: c["partitions"][0].update(setting)) == [
        f"cluster.partitions[0].{message}"
    ]


# --- gres.conf Cores= -------------------------------------------------------------------------


def test_gpus_split_over_the_sockets_by_default(inventories: InventoryFactory) -> None:
    assert gres(files(inventories)["slurm/gres.conf"]) == [
        "NodeName=n[01-08] Name=gpu Type=h100 File=/dev/nvidia[0-3] Cores=0-7",
        "NodeName=n[01-08] Name=gpu Type=h100 File=/dev/nvidia[4-7] Cores=8-15",
    ]


def test_cores_per_gpu_as_listed(inventories: InventoryFactory) -> None:
    cores = ["0-1", "2-3", "4-5", "6-7", "8-9", "10-11", "12-13", "14-15"]
    conf = files(inventories, lambda c: h100(c)["gpus"].update(affinity=cores))["slurm/gres.conf"]
    assert gres(conf)[0] == "NodeName=n[01-08] Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-1"
    assert len(gres(conf)) == 8


def test_no_affinity_when_told(inventories: InventoryFactory) -> None:
    conf = files(inventories, lambda c: h100(c)["gpus"].update(affinity="none"))["slurm/gres.conf"]
    assert gres(conf) == ["NodeName=n[01-08] Name=gpu Type=h100 File=/dev/nvidia[0-7]"]


def test_autodetect_nvidia_where_the_release_has_it(inventories: InventoryFactory) -> None:
    def nvidia(c: dict[str, Any]) -> None:
        c["slurm"]["version"] = "24.11"
        h100(c)["gpus"] = {"model": "h100", "count": 8, "autodetect": "nvidia"}

    assert gres(files(inventories, nvidia)["slurm/gres.conf"]) == [
        "NodeName=n[01-08] AutoDetect=nvidia",
        "NodeName=n[01-08] Name=gpu Type=h100 Count=8",
    ]
    assert problems(inventories, lambda c: (nvidia(c), c["slurm"].update(version="22.05"))) == [
        "cluster.node_types.h100.gpus.autodetect: gres.conf AutoDetect=nvidia needs Slurm 24.11 or later "
        "(target: 22.05): use nvml (slurmd then needs the NVML library) or device files"
    ]


@pytest.mark.parametrize(
    ("gpus", "message"),
    [
        ({"count": 3, "devices": "/dev/nvidia[0-2]"}, "affinity: 3 GPUs do not split evenly over 2 sockets"),
        ({"affinity": ["0-7"] * 7}, "affinity: 7 core lists for 8 GPUs: give one per GPU"),
        ({"affinity": [*["0-7"] * 7, "8-16"]}, "affinity[7]: core 16 does not exist: the node has 16 cores (0-15)"),
        ({"autodetect": "nvml", "affinity": "socket"}, "affinity: with autodetect, slurmd finds each GPU's cores itself"),
    ],
)  # fmt: skip
def test_affinity_problems(inventories: InventoryFactory, gpus: dict[str, Any], message: str) -> None:
    found = problems(inventories, lambda c: h100(c)["gpus"].update(gpus))
    assert any(f"cluster.node_types.h100.gpus.{message}" in p for p in found), found


# --- tenants' quotas --------------------------------------------------------------------------


def accounts(text: str) -> dict[str, dict[str, Any]]:
    return {a["name"]: a for a in yaml.safe_load(text)["accounts"]}


def test_a_slurm_quota_becomes_the_tenants_shares_and_the_limit_its_grptres(
    inventories: InventoryFactory,
) -> None:
    def third(c: dict[str, Any]) -> None:
        c["tenants"].append({"name": "guests", "fairshare": 80, "gpu_quota": 0, "gpu_limit": 8})

    found = accounts(files(inventories, third)["slurm/accounts.yaml"])
    assert {name: (a["fairshare"], a["grp_tres"]) for name, a in found.items()} == {
        "team-a": (32, "gres/gpu=48"),
        "team-b": (32, "gres/gpu=32"),
        "guests": (1, "gres/gpu=8"),  # no guarantee: one share, the least
    }


def test_a_slurm_without_gpus_keeps_the_tenants_fairshare(inventories: InventoryFactory) -> None:
    def cpu_only(c: dict[str, Any]) -> None:
        del h100(c)["gpus"]
        for tenant in c["tenants"]:
            tenant.pop("gpu_quota", None)
            tenant.pop("gpu_limit", None)
        c["tenants"][1]["fairshare"] = 20

    found = accounts(files(inventories, cpu_only)["slurm/accounts.yaml"])
    assert {name: a["fairshare"] for name, a in found.items()} == {"team-a": 50, "team-b": 20}


# --- heavy health checks ----------------------------------------------------------------------


def test_heavy_checks_run_on_idle_nodes_by_default(inventories: InventoryFactory) -> None:
    conf = files(inventories, lambda c: c["slurm"].update(health={}))["slurm/healthcheck.conf"]
    assert "\nheavy_node_state = IDLE\n" in conf


def test_heavy_node_states_are_those_the_release_knows(inventories: InventoryFactory) -> None:
    health = {"heavy_node_state": ["NONDRAINED_IDLE"]}
    assert problems(inventories, lambda c: c["slurm"].update(health=health)) == [
        "cluster.slurm.health.heavy_node_state[0]: Slurm 22.05 knows no HealthCheckNodeState `NONDRAINED_IDLE` "
        "(it knows ALLOC, ANY, CYCLE, IDLE, MIXED)"
    ]
    newer = files(inventories, lambda c: c["slurm"].update(version="24.11", health=health))
    assert "\nheavy_node_state = NONDRAINED_IDLE\n" in newer["slurm/healthcheck.conf"]
