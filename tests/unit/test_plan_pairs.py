"""`gpucluster plan` never lies, on random pairs of valid inventories (hypothesis).

Each pair is an inventory and a variant of it: hosts regrouped, added or removed, node types,
partitions, the switch tree, owners (nodes moved between Slurm and Kubernetes), tenants, QOS,
health checks, `slurm.extra`, storage and the release changed a few at a time. For every pair:
the rendered files differ exactly where the plan lists a file, each listed file is changed by a
listed change and installed by one step, every change touches a file or says who applies it,
each change has the policy of its step, and no step does nothing.

GPUCLUSTER_PLAN_PAIRS sets how many pairs (default 300; the suite's own runs use a few thousand).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucluster.changes.moves import Action
from gpucluster.changes.plan import make_plan, plan_schema
from gpucluster.changes.records import SEVERITY
from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files

PAIRS = int(os.environ.get("GPUCLUSTER_PLAN_PAIRS", "300"))
VERSIONS = ("22.05", "24.11", "26.05")

node_type = st.fixed_dictionaries(
    {
        "sockets": st.sampled_from([1, 2]),
        "cores_per_socket": st.sampled_from([2, 4, 8]),
        "threads_per_core": st.sampled_from([1, 2]),
        "memory_mb": st.sampled_from([4096, 16384, 65536]),
        "gpus": st.sampled_from([4, 8]),
        "features": st.sampled_from([[], ["ib"]]),
        "affinity": st.sampled_from([None, "none"]),
    }
)
tenant = st.fixed_dictionaries(
    {
        "quota": st.integers(0, 4),  # eighths of a scheduler's GPUs, per tenant
        "borrow": st.integers(0, 4),
        "fairshare": st.integers(1, 100),
        "users": st.sampled_from([[], ["alice"], ["alice", "bob"]]),
        "qos": st.sampled_from([[], ["capped"]]),
    }
)
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "version": st.sampled_from(VERSIONS),
    "racks": st.lists(st.integers(1, 3), min_size=1, max_size=3),
    "kubernetes_racks": st.sampled_from([set(), {1}, {2}]),  # racks Kubernetes owns (never rack 0)
    "types": st.lists(node_type, min_size=1, max_size=2),
    "type_of_rack": st.lists(st.integers(0, 1), min_size=3, max_size=3),
    "second_partition": st.sampled_from([None, 0, 1]),  # a partition of one rack
    "max_time": st.sampled_from(["UNLIMITED", "1-00:00:00", "04:00:00"]),
    "exclusive": st.booleans(),
    "tree": st.booleans(),
    "tenants": st.lists(tenant, min_size=1, max_size=3),
    "capped": st.sampled_from([None, 2, 4]),
    "health": st.sampled_from([None, 60, 300]),
    "kill_wait": st.sampled_from([None, 30, 60]),
    "home": st.booleans(),
    "users": st.sampled_from([["alice", "bob"], ["alice", "bob", "carol"]]),
    # A backup controller (on shared state): added, removed and swapped by the variants.
    "controllers": st.sampled_from([["ctl01"], ["ctl01", "ctl02"], ["ctl02", "ctl01"]]),
}


def hosts_of(params: dict[str, Any]) -> list[list[str]]:
    """Hosts per rack, numbered across racks: changing a rack's size regroups the hosts after it."""
    racks, number = [], 1
    for size in params["racks"]:
        racks.append([f"n{number + i:02d}" for i in range(size)])
        number += size
    return racks


def inventory(params: dict[str, Any]) -> tuple[str, str]:
    """hosts.yml and cluster.yml of the parameters (valid by construction)."""
    racks = hosts_of(params)
    kube = sorted(r for r in params["kubernetes_racks"] if r < len(racks))
    owner = {r: ("kubernetes" if r in kube else "slurm") for r in range(len(racks))}
    hosts = {"all": {"children": {"ctl": {"hosts": {"ctl01": None, "ctl02": None}}}}}
    children = hosts["all"]["children"]
    for r, names in enumerate(racks):
        children[f"rack{r}"] = {"hosts": dict.fromkeys(names)}
    types = {}
    for index, t in enumerate(params["types"]):
        gpus: dict[str, Any] = {
            "model": "h100",
            "count": t["gpus"],
            "devices": f"/dev/nvidia[0-{t['gpus'] - 1}]",
        }
        if t["affinity"]:
            gpus["affinity"] = t["affinity"]
        types[f"t{index}"] = {
            "sockets": t["sockets"],
            "cores_per_socket": t["cores_per_socket"],
            "threads_per_core": t["threads_per_core"],
            "memory_mb": t["memory_mb"],
            "gpus": gpus,
            "features": t["features"],
        }
    type_of = [f"t{min(params['type_of_rack'][r], len(types) - 1)}" for r in range(len(racks))]
    nodes = []
    for r in range(len(racks)):
        entry = {"group": f"rack{r}", "type": type_of[r]}
        if kube:
            entry["owner"] = owner[r]
        nodes.append(entry)
    slurm_racks = [f"rack{r}" for r in range(len(racks)) if owner[r] == "slurm"]
    partitions: list[dict[str, Any]] = [
        {"name": "batch", "nodes": slurm_racks, "default": True, "max_time": params["max_time"]}
    ]
    if params["exclusive"]:
        partitions[0]["exclusive"] = True
    second = params["second_partition"]
    if second is not None and second < len(slurm_racks):
        partitions.append({"name": "small", "nodes": [slurm_racks[second]], "max_time": "01:00:00"})
    capacity = {
        o: sum(len(racks[r]) * types[type_of[r]]["gpus"]["count"] for r in range(len(racks)) if owner[r] == o)
        for o in ("slurm", "kubernetes")
    }
    users = params["users"]
    tenants = []
    shares = max(1, len(params["tenants"]))
    for index, t in enumerate(params["tenants"]):
        entry = {"name": f"team{index}", "fairshare": t["fairshare"], "users": t["users"]}
        if t["qos"] and params["capped"] is not None:
            entry["qos"] = t["qos"]
        numbers = {}
        for o, cap in capacity.items():
            if cap:
                quota = cap * t["quota"] // (8 * shares)
                numbers[o] = {"quota": quota, "limit": min(cap, quota + cap * t["borrow"] // 8)}
        if kube:
            entry["gpus"] = numbers
        else:
            entry["gpu_quota"], entry["gpu_limit"] = numbers["slurm"]["quota"], numbers["slurm"]["limit"]
        tenants.append(entry)
    controllers = params["controllers"]
    slurm: dict[str, Any] = {
        "version": params["version"],
        "controller": controllers,
        # ctl02 has a part when it is no controller: it runs slurmdbd.
        "accounting": {"host": "ctl02"},
    }
    if len(controllers) > 1:
        slurm["state_save_location"] = "/shared/state"
    if params["health"] is not None:
        slurm["health"] = {"interval": params["health"]}
    if params["kill_wait"] is not None:
        slurm["extra"] = {"MaxArraySize": params["kill_wait"]}
    cluster: dict[str, Any] = {
        "name": "pairs",
        "slurm": slurm,
        "node_types": types,
        "nodes": nodes,
        "partitions": partitions,
        "users": [{"name": u, "uid": 10001 + i} for i, u in enumerate(users)],
        "tenants": tenants,
    }
    if params["tree"]:
        cluster["fabric"] = {
            "tree": {
                "spine": [f"leaf{r}" for r in range(len(racks))],
                **{f"leaf{r}": [f"rack{r}"] for r in range(len(racks))},
            }
        }
    if params["capped"] is not None:
        cluster["qos"] = [{"name": "capped", "max_gpus_per_user": params["capped"]}]
    storage = []
    if params["home"] or len(controllers) > 1:
        storage.append({"name": "home", "mount": "/home", "site_managed": True, "home": True})
    if len(controllers) > 1:
        storage.append(
            {"name": "slurm-state", "mount": "/shared", "site_managed": True, "hosts": controllers}
        )
    if storage:
        cluster["storage"] = storage
    if kube:
        cluster["kubernetes"] = {
            "version": "1.34",
            "gpu_operator": {"driver": "host", "toolkit": False},
            "kueue": {"enabled": True},
        }
    return yaml.safe_dump(hosts, sort_keys=False), yaml.safe_dump({"cluster": cluster}, sort_keys=False)


@st.composite
def pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    old = {name: draw(strategy) for name, strategy in FIELDS.items()}
    # The variant changes a few things: small differences are the ones a plan would miss.
    changed = draw(st.sets(st.sampled_from(sorted(FIELDS)), min_size=1, max_size=3))
    new = {name: (draw(FIELDS[name]) if name in changed else value) for name, value in old.items()}
    return old, new


def write(root: Path, name: str, params: dict[str, Any]) -> Path:
    directory = root / name
    shutil.rmtree(directory, ignore_errors=True)
    (directory / "group_vars" / "all").mkdir(parents=True)
    hosts, cluster = inventory(params)
    (directory / "hosts.yml").write_text(hosts)
    (directory / "group_vars" / "all" / "cluster.yml").write_text(cluster)
    return directory


@settings(max_examples=PAIRS, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=pairs())
def test_plan_lists_exactly_what_changes_deployed_files(
    tmp_path_factory: Any, pair: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    root = tmp_path_factory.getbasetemp() / "plan-pairs"  # one directory, rewritten for each pair
    old_params, new_params = pair
    old, new = load_cluster(write(root, "old", old_params)), load_cluster(write(root, "new", new_params))
    old_files, new_files = render_files(old), render_files(new)
    result = make_plan(old, new, old_files, new_files)
    before, after = old_files, new_files
    differing = {rel for rel in set(before) | set(after) if before.get(rel) != after.get(rel)}

    # Rendered files differ <=> the plan lists them; each is changed by a listed change.
    assert {f.path for f in result.files} == differing
    assert bool(differing) <= bool(result.changes)
    for f in result.files:
        assert f.because, f"{f.path} changes, but no listed change touches it"
    # Every change touches a rendered file, or says who applies it (none of these pairs has one).
    for change in result.changes:
        assert change.files, f"{change.path}: {change.old} -> {change.new} changes no rendered file"
    if result.refused:
        # A change Slurm cannot make (a downgrade): the refusal is the plan, no step to apply.
        assert result.steps == [] and result.overall is None and result.upgrade is None
        return
    # Every change is carried out by a step with its policy; no step does nothing.
    used: dict[str, list[Any]] = {}
    for step in result.steps:
        assert step.update is not None
        assert step.changes or step.files or step.action in (Action.STOP_PLACING, Action.WAIT_EMPTY), step
        for path in step.changes:
            used.setdefault(path, []).append(step.update)
    for change in result.changes:
        assert change.path in used, f"{change.path} is in no step"
        assert change.update == max(used[change.path], key=SEVERITY.index), change.path
    installed = sorted(f for step in result.steps for f in step.files)
    assert installed == sorted(differing), "each changed file is installed by exactly one step"
    if len(result.changes) < 4:
        jsonschema.validate(result.as_dict(), plan_schema())
