"""render -> import -> render gives the same bytes, on random valid inventories (hypothesis).

Each inventory is one the Slurm files describe entirely (no tenants, users, node ssh or REST
API: those are not in slurm.conf), with node types of several CPU layouts and GPU kinds, per-group
overrides and cloud nodes, partitions sharing hosts with every kind of option, a switch tree and
NVLink blocks, and the Slurm settings the model holds, for releases with topology.conf and with
topology.yaml. Rendered, imported from the rendered files and rendered again, every Slurm file
but the two the files do not describe (accounts.yaml: tenants; healthcheck.conf: per node type
checks) is byte for byte the same, and the comparison finds no difference.

GPUCLUSTER_IMPORT_ROUNDTRIPS sets how many inventories (default 300; thousands for a long run).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster.layers import load_cluster
from gpucluster.model.releases import RELEASES
from gpucluster.rendering import render_files
from gpucluster.slurm.view import SiteFiles
from gpucluster.slurm_import.adopt import import_cluster, write_inventory

ROUNDTRIPS = int(os.environ.get("GPUCLUSTER_IMPORT_ROUNDTRIPS", "300"))
VERSIONS = ("22.05", "23.11", "24.11", "25.11", "26.05")
NOT_DESCRIBED = ("slurm/accounts.yaml", "slurm/healthcheck.conf")


@st.composite
def gpus(draw: Any, cores: int, sockets: int | None, version: str) -> dict[str, Any] | None:
    if not draw(st.booleans()):
        return None
    count = draw(st.sampled_from([1, 2, 4, 8]))
    spec: dict[str, Any] = {"count": count}
    # A GB200 node has at most 4 GPUs (gpucluster.checks.fabric.check_nvlink_domains).
    model = draw(st.sampled_from([None, "h100", "H100", "a100_80gb", *(["gb200"] if count <= 4 else [])]))
    if model:
        spec["model"] = model
    detect = ["off", "nvml"] + (["nvidia"] if version >= "24.11" else [])
    auto = draw(st.sampled_from(detect))
    if auto != "off":
        spec["autodetect"] = auto
        return spec
    spec["devices"] = "/dev/nvidia0" if count == 1 else f"/dev/nvidia[0-{count - 1}]"
    if sockets is None or count % sockets:
        choice = (
            draw(st.sampled_from(["none", "list"]))
            if sockets is not None
            else draw(st.sampled_from([None, "list"]))
        )
    else:
        choice = draw(st.sampled_from([None, "none", "list"]))
    if choice == "list":
        spec["affinity"] = [f"{i % cores}" for i in range(count)]
    elif choice == "none":
        spec["affinity"] = "none"
    return spec


@st.composite
def node_type(draw: Any, version: str, index: int) -> dict[str, Any]:
    layout = draw(st.booleans())
    node: dict[str, Any] = {}
    sockets = None
    if layout:
        sockets = draw(st.sampled_from([1, 2]))
        cores = draw(st.sampled_from([4, 8, 16]))
        node.update({"sockets": sockets, "cores_per_socket": cores + index})  # distinct hardware per type
        threads = draw(st.sampled_from([1, 2]))
        if threads != 1:
            node["threads_per_core"] = threads
        total = sockets * (cores + index)
    else:
        total = draw(st.sampled_from([16, 32, 96])) + index
        node["cpus"] = total
    if draw(st.booleans()):
        node["memory_mb"] = draw(st.sampled_from([65536, 262144, 2000000]))
    spec = draw(gpus(total, sockets, version))
    if spec is not None:
        node["gpus"] = spec
    if draw(st.booleans()):
        node["features"] = draw(st.sampled_from([["ib"], ["h100", "ib-ndr"], ["cpu"]]))
    if draw(st.booleans()):
        node["weight"] = draw(st.sampled_from([10, 100]))
    for key, values in (
        ("tmp_disk_mb", [0, 800000]),
        ("mem_spec_limit_mb", [4096]),
        ("core_spec_count", [2]),
    ):
        if draw(st.integers(0, 3)) == 0:
            node[key] = draw(st.sampled_from(values))
    if draw(st.integers(0, 4)) == 0:
        node["extra"] = {"CpuBind": draw(st.sampled_from(["cores", "threads"]))}
    return node


PARTITION_OPTIONS: dict[str, Any] = {
    "max_time": st.sampled_from(["1-00:00:00", "04:00:00", "INFINITE", "60"]),
    "default_time": st.sampled_from(["01:00:00", "30"]),
    "allow_accounts": st.sampled_from([["physics"], ["physics", "chem"]]),
    "allow_groups": st.sampled_from([["hpc"]]),
    "allow_qos": st.sampled_from([["normal", "high"]]),
    "qos": st.sampled_from(["part"]),
    "preempt_mode": st.sampled_from([["REQUEUE"], ["CANCEL"]]),
    "grace_time": st.sampled_from([30, 120]),
    "max_nodes": st.sampled_from([1, 4]),
    "max_cpus_per_node": st.sampled_from([8]),
    "over_subscribe": st.sampled_from(["YES", "FORCE:2"]),
    "exclusive": st.just(True),
    "exclusive_user": st.just(True),
    "priority_tier": st.sampled_from([0, 10]),
    "priority_job_factor": st.sampled_from([5]),
    "tres_billing_weights": st.sampled_from(["CPU=1.0,Mem=0.25G"]),
    "hidden": st.just(True),
    "state": st.sampled_from(["DOWN", "DRAIN"]),
    "suspend_time": st.sampled_from([300, -1]),
    "resume_timeout": st.sampled_from([600]),
    "def_mem_per_cpu_mb": st.sampled_from([2048]),
    "max_mem_per_node_mb": st.sampled_from([60000]),
    "cpus_per_gpu": st.sampled_from([0, 1]),
    "memory_per_gpu_mb": st.sampled_from([0, 1024]),
    "extra": st.sampled_from([{"LLN": "YES"}, {"AllocNodes": "login1"}]),
}

TIMEOUTS = {"slurmctld": [60, 300], "slurmd": [120], "message": [20], "kill_wait": [60], "min_job_age": [600]}


@st.composite
def inventory(draw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    version = draw(st.sampled_from(VERSIONS))
    types = draw(st.integers(1, 3))
    node_types = {f"t{i}": draw(node_type(version, i)) for i in range(types)}
    racks = draw(st.integers(1, 4))
    sizes = [draw(st.integers(1, 4)) for _ in range(racks)]
    groups: dict[str, list[str]] = {}
    number = 1
    for rack, size in enumerate(sizes):
        groups[f"rack{rack}"] = [f"n{number + i:03d}" for i in range(size)]
        number += size
    hosts_yml: dict[str, Any] = {
        "all": {
            "children": {
                "controllers": {"hosts": {"ctl1": None, "ctl2": None}},
                **{name: {"hosts": {h: None for h in members}} for name, members in groups.items()},
            }
        }
    }
    slurm: dict[str, Any] = {"version": version}
    controllers = draw(st.sampled_from([["ctl1"], ["ctl1", "ctl2"]]))
    slurm["controller"] = controllers
    if len(controllers) == 2 or draw(st.booleans()):
        slurm["state_save_location"] = "/shared/slurmctld"
    if len(controllers) == 1:
        del hosts_yml["all"]["children"]["controllers"]["hosts"]["ctl2"]
    nodes: list[dict[str, Any]] = []
    cloud = False
    for rack, name in enumerate(groups):
        type_name = f"t{rack % types}"
        entry: dict[str, Any] = {"group": name, "type": type_name}
        base = node_types[type_name]
        if draw(st.integers(0, 2)) == 0:
            override = draw(st.sampled_from(["memory_mb", "features", "weight", "state", "gpus"]))
            if override == "memory_mb" and base.get("memory_mb"):
                entry["memory_mb"] = base["memory_mb"] // 2
            elif override == "features":
                entry["features"] = [*base.get("features", []), f"rack{rack}"]
            elif override == "weight":
                entry["weight"] = base.get("weight", 1) + 1 + rack
            elif override == "state" and base.get("gpus", {}).get("autodetect", "off") == "off":
                entry["state"] = "cloud"  # slurmctld refuses AutoDetect on cloud nodes
                cloud = True
            elif (
                override == "gpus"
                and base.get("gpus")
                and base["gpus"]["count"] > 1
                and "devices" in base["gpus"]
            ):
                count = base["gpus"]["count"] - 1
                entry["gpus"] = {
                    **{k: v for k, v in base["gpus"].items() if k != "affinity"},
                    "count": count,
                    "devices": "/dev/nvidia0" if count == 1 else f"/dev/nvidia[0-{count - 1}]",
                    "affinity": "none",
                }
        nodes.append(entry)
    # Partitions: one of every rack, more of some racks (sharing hosts).
    partitions: list[dict[str, Any]] = [{"name": "all", "nodes": list(groups), "default": True}]
    for index in range(draw(st.integers(0, 2))):
        members = draw(st.lists(st.sampled_from(list(groups)), min_size=1, max_size=len(groups), unique=True))
        partitions.append({"name": f"p{index}", "nodes": members})
    gpu_racks = {
        name
        for name, entry in zip(groups, nodes, strict=True)
        if node_types[entry["type"]].get("gpus") or entry.get("gpus")
    }

    def cpus(node: dict[str, Any]) -> int:
        return int(
            node.get("cpus") or node["sockets"] * node["cores_per_socket"] * node.get("threads_per_core", 1)
        )

    # Racks where a job of all GPUs would not get one CPU each (gpucluster refuses cpus_per_gpu there).
    few_cpus = {
        name
        for name, entry in zip(groups, nodes, strict=True)
        if node_types[entry["type"]].get("gpus")
        and node_types[entry["type"]]["gpus"]["count"] > cpus(node_types[entry["type"]])
    }
    for partition in partitions:
        for key in draw(st.lists(st.sampled_from(sorted(PARTITION_OPTIONS)), max_size=4, unique=True)):
            if key in ("cpus_per_gpu", "memory_per_gpu_mb") and not set(partition["nodes"]) & gpu_racks:
                continue
            if key == "cpus_per_gpu" and set(partition["nodes"]) & few_cpus:
                continue
            partition[key] = draw(PARTITION_OPTIONS[key])
        if partition.get("exclusive") and "over_subscribe" in partition:
            del partition["over_subscribe"]
        if "def_mem_per_cpu_mb" in partition and partition.get("memory_per_gpu_mb"):
            del partition["memory_per_gpu_mb"]  # Slurm takes one memory default
    cluster: dict[str, Any] = {"name": "rt", "slurm": slurm, "node_types": node_types, "nodes": nodes}
    fabric = draw(st.sampled_from(["none", "tree", "blocks", "both"]))
    if version < "24.05" and fabric in ("blocks", "both"):
        fabric = "tree"
    fabric_data: dict[str, Any] = {}
    if fabric in ("tree", "both"):
        fabric_data["tree"] = {
            "spine": [f"leaf{r}" for r in range(racks)],
            **{f"leaf{r}": [f"rack{r}"] for r in range(racks)},
        }
    if fabric in ("blocks", "both"):
        fabric_data["blocks"] = {f"block{r}": [f"rack{r}"] for r in range(racks)}
        smallest = min(sizes)
        fabric_data["block_sizes"] = draw(st.sampled_from([[smallest], [smallest, smallest * 2]]))
        if fabric == "both":
            fabric_data["default"] = draw(st.sampled_from(["tree", "block"]))
    if fabric_data:
        cluster["fabric"] = fabric_data
    cluster["partitions"] = partitions
    # Slurm settings the model holds.
    if draw(st.booleans()):
        accounting: dict[str, Any] = {"host": "ctl1"}
        if draw(st.booleans()):
            accounting["enforce"] = draw(st.sampled_from([[], ["associations", "limits", "qos", "safe"]]))
        if draw(st.booleans()):
            accounting["tres"] = draw(st.sampled_from([[], ["gres/gpu", "gres/gpu:h100"]]))
        if draw(st.booleans()):
            accounting["port"] = 7031
        slurm["accounting"] = accounting
    if draw(st.booleans()):
        priority: dict[str, Any] = {}
        for key, values in (("type", ["basic"]), ("fairshare", [1000]), ("age", [10]), ("decay_half_life", ["14-0"]),
                            ("calc_period", [1]), ("tres", ["GRES/gpu=100"]), ("flags", [["SMALL_RELATIVE_TO_TIME"]]),
                            ("favor_small", [True])):  # fmt: skip
            if draw(st.booleans()):
                priority[key] = draw(st.sampled_from(values))
        slurm["priority"] = priority
    pmix = RELEASES[version].packaging.pmix
    slurm["mpi_default"] = draw(st.sampled_from(["none", "pmi2", *(["pmix"] if pmix else [])]))
    proctrack = draw(st.sampled_from(["cgroup", "linuxproc"]))
    slurm["proctrack"] = proctrack
    slurm["task_plugins"] = draw(
        st.sampled_from([["cgroup", "affinity"], ["affinity", "cgroup"], ["affinity"], []])
    )
    if draw(st.booleans()):
        slurm["job_acct_gather_type"] = draw(st.sampled_from(["cgroup", "linux", "none"]))
    slurm["scheduler_type"] = draw(st.sampled_from(["backfill", "builtin"]))
    if draw(st.booleans()):
        slurm["scheduler_parameters"] = ["bf_continue", "bf_window=4320"]
    select = draw(st.sampled_from(["cons_tres", "linear", *(["cons_res"] if version < "23.11" else [])]))
    slurm["select_type"] = select
    slurm["select_type_parameters"] = (
        draw(st.sampled_from([["CR_Core_Memory"], ["CR_CPU"], ["CR_Core", "CR_ONE_TASK_PER_CORE"]]))
        if select != "linear"
        else draw(st.sampled_from([[], ["CR_Memory"]]))
    )
    if draw(st.booleans()):
        slurm["preemption"] = draw(
            st.sampled_from(
                [
                    {"type": "partition_prio", "mode": ["REQUEUE"]},
                    {"type": "qos", "mode": ["CANCEL"], "exempt_time": "00:10:00"},
                ]
            )
        )
    several = version >= "24.05"
    if draw(st.booleans()):
        slurm["prolog"] = (
            ["/etc/slurm/prolog.d/*", "/opt/site/prolog"] if several else ["/etc/slurm/prolog.d/*"]
        )
    if draw(st.booleans()):
        slurm["epilog"] = ["/etc/slurm/epilog.d/*"]
    flags = draw(st.sampled_from([[], ["Alloc", "Contain"], ["Alloc", "Serial"], ["Contain", "X11"]]))
    if flags and not ("X11" in flags and proctrack == "linuxproc"):
        slurm["prolog_flags"] = flags
    timeouts = {k: draw(st.sampled_from(v)) for k, v in TIMEOUTS.items() if draw(st.booleans())}
    if timeouts:
        slurm["timeouts"] = timeouts
    daemons: dict[str, Any] = {}
    if draw(st.booleans()):
        daemons["slurmctld_port"] = draw(st.sampled_from([6817, 6820, "6820-6829"]))
    if draw(st.booleans()):
        daemons["spool_dir"] = "/var/spool/slurmd"
    if draw(st.booleans()):
        daemons["slurmctld_log_file"] = None
    if draw(st.booleans()):
        daemons["slurmd_debug"] = draw(st.sampled_from(["verbose", "debug2", "error"]))
    if draw(st.booleans()):
        daemons["debug_flags"] = ["Gres", "Backfill"]
    if daemons:
        slurm["daemons"] = daemons
    if cloud or draw(st.integers(0, 3)) == 0:
        power: dict[str, Any] = {
            "suspend_program": "/usr/local/sbin/suspend",
            "resume_program": "/usr/local/sbin/resume",
        }
        if draw(st.booleans()):
            power.update({"suspend_time": 600, "resume_timeout": 900, "resume_rate": 0})
        if draw(st.booleans()):
            power["exclude_nodes"] = ["rack0"]
        if draw(st.booleans()):
            power["exclude_partitions"] = ["all"]
        slurm["power_save"] = power
    if draw(st.booleans()):
        slurm["propagate_resource_limits_except"] = ["MEMLOCK"]
    if draw(st.booleans()):
        slurm["slurmctld_parameters"] = ["idle_on_node_suspend"]
    if draw(st.booleans()):
        slurm["configless"] = True
        if fabric != "none" and version == "25.05":
            slurm["version"] = "25.05.2"
    if draw(st.booleans()):
        slurm["config_overrides"] = True
    if draw(st.booleans()):
        slurm["return_to_service"] = draw(st.sampled_from([0, 1]))
    if draw(st.booleans()):
        slurm["mail_prog"] = "/usr/bin/mail"
    if draw(st.booleans()):
        slurm["cgroup"] = draw(
            st.sampled_from(
                [
                    {"plugin": "cgroup/v2", "constrain_devices": False},
                    {"constrain_cores": False, "extra": {"ConstrainSwapSpace": "yes", "AllowedRAMSpace": 98}},
                ]
            )
        )
    if draw(st.booleans()):
        slurm["health"] = draw(st.sampled_from([{}, {"interval": 120, "prolog": False}]))
        if not several and slurm.get("prolog"):
            slurm["health"]["prolog"] = False  # one Prolog before 24.05
    if draw(st.booleans()):
        slurm["extra"] = {"TreeWidth": 64, "EnforcePartLimits": "ALL", "MaxArraySize": 4001}
    if len(controllers) == 2:
        # Both controllers read one state: the site's shared filesystem, as the import writes it.
        cluster["storage"] = [
            {"name": "slurm-state", "mount": "/shared", "site_managed": True, "hosts": controllers}
        ]
    return hosts_yml, {"cluster": cluster}


def _write(root: Path, name: str, hosts: dict[str, Any], cluster: dict[str, Any]) -> Path:
    directory = root / name
    (directory / "group_vars" / "all").mkdir(parents=True)
    (directory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    (directory / "group_vars" / "all" / "cluster.yml").write_text(yaml.safe_dump(cluster, sort_keys=False))
    return directory


def _slurm_files(directory: Path) -> dict[str, str]:
    files = render_files(load_cluster(directory), only=["slurm"])
    return {rel: text for rel, text in files.items() if rel not in NOT_DESCRIBED}


@settings(max_examples=ROUNDTRIPS, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inventory())
def test_render_import_render_gives_the_same_files(tmp_path_factory: Any, generated: Any) -> None:
    hosts, cluster = generated
    root = tmp_path_factory.mktemp("roundtrip")
    original = _write(root / "a", "site", hosts, cluster)
    first = _slurm_files(original)
    rendered = root / "rendered"
    for rel, text in first.items():
        (rendered / rel).parent.mkdir(parents=True, exist_ok=True)
        (rendered / rel).write_text(text)
    result = import_cluster(
        SiteFiles.in_directory(rendered / "slurm"), cluster["cluster"]["slurm"]["version"]
    )
    imported = write_inventory(result, root / "b" / "site", check=True)
    assert imported.comparison is not None and imported.comparison.same, imported.comparison.differences
    second = _slurm_files(root / "b" / "site")
    assert sorted(second) == sorted(first)
    for rel, text in first.items():
        diff = "".join(difflib.unified_diff(text.splitlines(True), second[rel].splitlines(True)))
        assert second[rel] == text, f"{rel} differs:\n{diff}\n{imported.hosts_yml}\n{imported.cluster_yml}"
