"""One declaration per node type (gpus.sharing), rendered for Slurm: Gres= with shards, MPS and MIG
types, GresTypes, gres.conf (AutoDetect=nvml for MIG; a line per GPU for shards and MPS), the TRES
accounted, the tenants' GrpTRES in shared units, the memory default shards and MPS need, the MPS
hooks; and what Slurm cannot do refused with the key to change."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.errors import InventoryError
from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from tests.conftest import SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory

BASE = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))
BASE["cluster"]["slurm"]["version"] = "26.05"


def inventory(inventories: InventoryFactory, sharing: dict[str, Any], **gpus: Any) -> Path:
    data = copy.deepcopy(BASE)
    node_gpus = data["cluster"]["node_types"]["h100"]["gpus"]
    node_gpus.update(gpus)
    node_gpus["sharing"] = sharing
    return inventories.make(SMALL_HOSTS, yaml.safe_dump(data, sort_keys=False))


def rendered(inventories: InventoryFactory, sharing: dict[str, Any], **gpus: Any) -> dict[str, str]:
    return render_files(load_cluster(inventory(inventories, sharing, **gpus)), only=["slurm", "mig"])


def lines(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(prefix)]


def problems(directory: Path) -> list[str]:
    with pytest.raises(InventoryError) as info:
        load_cluster(directory)
    return [f"{p.path}: {p.message}" for p in info.value.problems]


def test_shards_per_gpu(inventories: InventoryFactory) -> None:
    files = rendered(inventories, {"shard": 4})
    conf = files["slurm/slurm.conf"]
    assert "GresTypes=gpu,shard" in conf
    assert "AccountingStorageTRES=gres/gpu,gres/shard" in conf
    assert "Gres=gpu:h100:8,shard:32 " in conf
    gres = files["slurm/gres.conf"]
    assert lines(gres, "NodeName=n[01-08] Name=shard") == [
        f"NodeName=n[01-08] Name=shard Count=4 File=/dev/nvidia{i}" for i in range(8)
    ]
    # Shard jobs get no DefMemPerGPU (gres/gpu only): DefMemPerCPU of the node's memory per CPU.
    (partition,) = lines(conf, "PartitionName=batch ")
    assert "DefMemPerCPU=4000 " in partition and "DefMemPerGPU" not in partition, partition
    assert "DefCpuPerGPU=2 " in partition
    # Tenants' limits in shards: team-a's 48 GPUs (all of them) are 192 shards.
    accounts = yaml.safe_load(files["slurm/accounts.yaml"])["accounts"]
    assert {a["name"]: a["grp_tres"] for a in accounts} == {
        "team-a": "gres/gpu=48,gres/shard=192",
        "team-b": "gres/gpu=32,gres/shard=128",
    }


def test_shards_with_autodetection_spread_one_count(inventories: InventoryFactory) -> None:
    gres = rendered(inventories, {"shard": 4}, autodetect="nvml", devices=None)["slurm/gres.conf"]
    assert lines(gres, "NodeName=n[01-08]") == [
        "NodeName=n[01-08] AutoDetect=nvml",
        "NodeName=n[01-08] Name=gpu Type=h100 Count=8",
        "NodeName=n[01-08] Name=shard Count=32",
    ]


def test_mps_per_gpu_with_its_hooks(inventories: InventoryFactory) -> None:
    files = rendered(inventories, {"mps": 100})
    conf = files["slurm/slurm.conf"]
    assert "GresTypes=gpu,mps" in conf and "Gres=gpu:h100:8,mps:800 " in conf
    for key in ("Prolog", "Epilog", "TaskProlog"):
        assert f"{key}=/usr/local/sbin/gpucluster-mps" in conf
    mps = files["slurm/gpucluster-mps.conf"]
    assert "nodes = n01 n02 n03 n04 n05 n06 n07 n08\nbetween_tenants = no" in mps


def test_mps_with_the_sites_own_daemons_writes_no_hook(inventories: InventoryFactory) -> None:
    files = rendered(inventories, {"mps": 100, "mps_daemon": "site"})
    conf = files["slurm/slurm.conf"]
    assert "gpucluster-mps" not in conf and "slurm/gpucluster-mps.conf" not in files
    assert "mps:" in conf  # the shares are still Slurm's gres/mps
    assert any(p.endswith("mps_between_tenants with mps_daemon site: the site's own hooks decide that")
               for p in problems(inventory(inventories, {"mps": 100, "mps_daemon": "site",
                                                         "mps_between_tenants": True})))  # fmt: skip


def test_shards_slurm_spreads_itself_compare_equal(tmp_path: Path) -> None:
    """gres.conf without a shard line: slurmd spreads slurm.conf's count over the GPUs, as the
    rendered line over its File= GPUs does (a real site's shape)."""
    etc = site(
        tmp_path, "shard", "gpu:rtx:4,shard:96", "AutoDetect=nvml\nName=gpu Type=rtx File=/dev/nvidia[0-3]\n"
    )
    cluster, problems_found, differences = imported(etc, tmp_path / "out")
    assert problems_found == [] and differences == [], (problems_found, differences)
    (node_type,) = cluster["node_types"].values()
    assert node_type["gpus"]["sharing"] == {"shard": 24}


def test_mig_types_and_autodetection(inventories: InventoryFactory) -> None:
    sharing = {
        "mig": {
            "per_gpu": [
                {"gpus": "0-3", "profiles": {"3g.40gb": 2}},
                {"gpus": "4-7", "profiles": {"1g.10gb": 7}},
            ]
        }
    }
    files = rendered(inventories, sharing, devices=None, memory_gb=80)
    conf = files["slurm/slurm.conf"]
    assert "Gres=gpu:3g.40gb:8,gpu:1g.10gb:28 " in conf
    assert "AccountingStorageTRES=gres/gpu,gres/gpu:1g.10gb,gres/gpu:3g.40gb" in conf
    assert lines(files["slurm/gres.conf"], "NodeName=") == ["NodeName=n[01-08] AutoDetect=nvml"]
    # A MIG instance is a GPU to DefCpuPerGPU and DefMemPerGPU: 16 CPUs, 64000 MiB over 36.
    (partition,) = lines(conf, "PartitionName=batch ")
    assert "DefMemPerGPU=1777 " in partition and "DefCpuPerGPU" not in partition, partition
    assert yaml.safe_load(files["mig/hosts.yaml"])["n01"] == {
        "layout": "h100",
        "gres": "gpu:3g.40gb:8,gpu:1g.10gb:28",
    }
    assert yaml.safe_load(files["mig/h100.json"])["gpus"]["5"] == {"1g.10gb": 7}


def test_a_tenants_own_units_keep_their_number(inventories: InventoryFactory) -> None:
    data = copy.deepcopy(BASE)
    data["cluster"]["node_types"]["h100"]["gpus"]["sharing"] = {"shard": 4}
    data["cluster"]["tenants"][1] = {
        "name": "team-b", "fairshare": 50, "users": ["bob"],
        "gpus": {"slurm": {"quota": 32, "limit": 32, "units": {"shard": 6}}},
    }  # fmt: skip
    files = render_files(load_cluster(inventories.make(SMALL_HOSTS, yaml.safe_dump(data))), only=["slurm"])
    accounts = {a["name"]: a["grp_tres"] for a in yaml.safe_load(files["slurm/accounts.yaml"])["accounts"]}
    assert accounts["team-b"] == "gres/gpu=32,gres/shard=6"


def test_units_a_scheduler_does_not_have_are_refused(inventories: InventoryFactory) -> None:
    data = copy.deepcopy(BASE)
    data["cluster"]["tenants"][1] = {
        "name": "team-b", "fairshare": 50, "users": ["bob"],
        "gpus": {"slurm": {"quota": 32, "units": {"shard": 6}}},
    }  # fmt: skip
    found = problems(inventories.make(SMALL_HOSTS, yaml.safe_dump(data)))
    assert any(
        "cluster.tenants[1].gpus.slurm.units.shard" in p
        and "no slurm GPU makes `shard` (its shared units: none)" in p
        for p in found
    ), found


def test_mps_beside_another_prolog_on_a_release_with_one(inventories: InventoryFactory) -> None:
    data = copy.deepcopy(BASE)
    data["cluster"]["slurm"]["version"] = "22.05"
    data["cluster"]["slurm"]["health"] = {"interval": 300}
    data["cluster"]["node_types"]["h100"]["gpus"]["sharing"] = {"mps": 100}
    found = problems(inventories.make(SMALL_HOSTS, yaml.safe_dump(data)))
    assert any("Slurm 22.05 takes one Prolog" in p and "gpucluster-mps" in p for p in found), found


def test_sharing_needs_cons_tres(inventories: InventoryFactory) -> None:
    data = copy.deepcopy(BASE)
    data["cluster"]["slurm"]["select_type"] = "linear"
    data["cluster"]["node_types"]["h100"]["gpus"]["sharing"] = {"shard": 2}
    found = problems(inventories.make(SMALL_HOSTS, yaml.safe_dump(data)))
    assert any("cluster.slurm.select_type" in p and "need select/cons_tres" in p for p in found), found


@pytest.mark.parametrize(
    ("sharing", "message"),
    [
        ({"shard": 4, "mps": 100}, "shard and mps together"),
        ({"mig": {"layout": {"7g.80gb": 1}}, "time_slicing": 2}, "mig and time_slicing together"),
        ({"mps_between_tenants": True}, "mps_between_tenants without mps"),
        (
            {"mig": {"layout": {"7g.80gb": 1}, "per_gpu": [{"gpus": "0", "profiles": {"7g.80gb": 1}}]}},
            "give `layout`",
        ),
    ],
)
def test_refused_combinations_are_named(
    inventories: InventoryFactory, sharing: dict[str, Any], message: str
) -> None:
    found = problems(inventory(inventories, sharing, memory_gb=80))
    assert any("cluster.node_types.h100.gpus.sharing" in p and message in p for p in found), found


# --- import: sites' shards and MPS onto gpus.sharing ----------------------------------------------

SITE_CONF = """\
ClusterName=site
SlurmctldHost=head
SlurmUser=slurm
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu,{kind}
NodeName=g[1-2] CPUs=16 Boards=1 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=64000 Gres={gres} State=UNKNOWN
PartitionName=main Nodes=g[1-2] Default=YES MaxTime=INFINITE State=UP
"""


def site(tmp_path: Path, kind: str, gres: str, gres_conf: str) -> Path:
    etc = tmp_path / "etc"
    etc.mkdir(parents=True)
    (etc / "slurm.conf").write_text(SITE_CONF.format(kind=kind, gres=gres))
    (etc / "gres.conf").write_text(gres_conf)
    return etc


def imported(etc: Path, out: Path) -> tuple[dict[str, Any], list[str], list[str]]:
    from gpucluster.slurm.view import SiteFiles
    from gpucluster.slurm_import.adopt import import_cluster, write_inventory

    try:
        result = import_cluster(SiteFiles.in_directory(etc), "24.11")
    except InventoryError as error:
        return {}, [f"{p.path}: {p.message}" for p in error.problems], []
    written = write_inventory(result, out, check=True)
    cluster = yaml.safe_load((out / "group_vars" / "all" / "cluster.yml").read_text())["cluster"]
    assert written.comparison is not None
    return cluster, [], [str(d) for d in written.comparison.differences]


def test_a_sites_shards_import_per_gpu(tmp_path: Path) -> None:
    etc = site(tmp_path, "shard", "gpu:a5000:4,shard:32", "AutoDetect=nvml\n")
    cluster, problems, differences = imported(etc, tmp_path / "out")
    assert problems == [] and differences == []
    (node_type,) = cluster["node_types"].values()
    assert node_type["gpus"]["sharing"] == {"shard": 8}


def test_a_sites_mps_per_device_imports_per_gpu(tmp_path: Path) -> None:
    gres_conf = (
        "AutoDetect=off\nName=gpu Type=rtx File=/dev/nvidia[0-1]\n"
        "Name=mps Count=100 File=/dev/nvidia0\nName=mps Count=100 File=/dev/nvidia1\n"
    )
    etc = site(tmp_path, "mps", "gpu:rtx:2,mps:200", gres_conf)
    cluster, problems, differences = imported(etc, tmp_path / "out")
    assert problems == [], problems
    (node_type,) = cluster["node_types"].values()
    # The site names no gpucluster-mps: its own hooks (or none) keep starting the daemons, and the
    # cluster renders as it reads (no hook added).
    assert node_type["gpus"]["sharing"] == {"mps": 100, "mps_daemon": "site"}
    assert differences == [], differences


def test_uneven_shares_are_refused_naming_why(tmp_path: Path) -> None:
    gres_conf = "AutoDetect=off\nName=gpu File=/dev/nvidia[0-1]\nName=mps Count=150 File=/dev/nvidia0\nName=mps Count=50 File=/dev/nvidia1\n"
    etc = site(tmp_path, "mps", "gpu:2,mps:200", gres_conf)
    _, problems, _ = imported(etc, tmp_path / "out")
    assert any("gives each GPU of a node the same" in p for p in problems), problems
    odd = site(tmp_path / "odd", "shard", "gpu:4,shard:30", "AutoDetect=nvml\n")
    _, problems, _ = imported(odd, tmp_path / "odd-out")
    assert any("shard:30 over 4 GPUs" in p for p in problems), problems


def test_managed_node_software_installs_what_sharing_needs(inventories: InventoryFactory) -> None:
    from gpucluster.nodesoftware.stack import resolve_stacks

    data = copy.deepcopy(BASE)
    data["cluster"]["slurm"]["version"] = "24.11"
    node_type = data["cluster"]["node_types"]["h100"]
    node_type["software"] = {"driver": {"source": "debian"}}
    node_type["gpus"] = {
        "model": "h100",
        "count": 8,
        "memory_gb": 80,
        "sharing": {"mig": {"layout": {"7g.80gb": 1}}},
    }
    stacks = resolve_stacks(
        load_cluster(inventories.make(SMALL_HOSTS, yaml.safe_dump(data), name="mig"))
    ).stacks
    assert "slurm-wlm-nvml-plugin" in stacks["h100"].packages  # MIG autodetects with NVML
    node_type["gpus"] = {"model": "h100", "count": 8, "devices": "/dev/nvidia[0-7]", "sharing": {"mps": 100}}
    stacks = resolve_stacks(
        load_cluster(inventories.make(SMALL_HOSTS, yaml.safe_dump(data), name="mps"))
    ).stacks
    assert "nvidia-cuda-mps" in stacks["h100"].packages
    # forky carries no NVML plugin for 26.05: a MIG node type whose software gpucluster installs is refused.
    data["cluster"]["slurm"]["version"] = "26.05"
    node_type["gpus"] = {
        "model": "h100",
        "count": 8,
        "memory_gb": 80,
        "sharing": {"mig": {"layout": {"7g.80gb": 1}}},
    }
    found = problems(inventories.make(SMALL_HOSTS, yaml.safe_dump(data), name="forky"))
    assert any("sharing.mig" in p and "slurmd finds MIG instances through NVML only" in p for p in found), (
        found
    )


def test_a_mig_layout_change_is_planned_drain_apply_restart_resume(inventories: InventoryFactory) -> None:
    from gpucluster.changes.plan import make_plan, plan_schema

    old = inventory(inventories, {"mig": {"layout": {"1g.10gb": 7}}}, devices=None, memory_gb=80)
    new = inventories.make(
        SMALL_HOSTS,
        (old / "group_vars" / "all" / "cluster.yml").read_text().replace("1g.10gb: 7", "3g.40gb: 2"),
        name="new",
    )
    result = make_plan(load_cluster(old), load_cluster(new))
    steps = [(s.procedure, s.update.name.lower() if s.update else None, s.hosts) for s in result.steps]
    assert steps[0] == ("mig_layout", "gpu_layout", tuple(f"n0{i}" for i in range(1, 9)))
    assert steps[1][:2] == ("slurm", "restart")
    text = result.steps[0].text
    assert "drained, emptied" in text and "its slurmd restarted, resumed" in text
    import jsonschema

    jsonschema.validate(result.as_dict(), plan_schema())


def test_shards_and_mps_in_one_slurm_cluster_are_refused(inventories: InventoryFactory) -> None:
    """rack1's GPUs by shards, rack2's by MPS: on the lab's 26.05 (GresTypes=gpu,shard,mps) the shard
    job ran without CUDA_VISIBLE_DEVICES and the MPS job got CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=0."""
    data = copy.deepcopy(BASE)
    types = data["cluster"]["node_types"]
    types["h100-mps"] = copy.deepcopy(types["h100"])
    types["h100"]["gpus"]["sharing"] = {"shard": 4}
    types["h100-mps"]["gpus"]["sharing"] = {"mps": 100}
    data["cluster"]["nodes"] = [{"group": "rack1", "type": "h100"}, {"group": "rack2", "type": "h100-mps"}]
    found = problems(inventories.make(SMALL_HOSTS, yaml.safe_dump(data, sort_keys=False)))
    assert any(
        "node_types.h100-mps.gpus.sharing.mps" in p and "one of the two ways per Slurm cluster" in p
        for p in found
    ), found
    # A cluster.nodes entry sharing by MPS is named as such, at its own key.
    types["h100-mps"]["gpus"]["sharing"] = {"shard": 2}
    data["cluster"]["nodes"][1]["gpus"] = {**types["h100"]["gpus"], "sharing": {"mps": 100}}
    found = problems(inventories.make(SMALL_HOSTS, yaml.safe_dump(data, sort_keys=False), name="entry"))
    assert any(p.startswith("cluster.nodes[1].gpus.sharing.mps: node type h100 shares") for p in found), found
    del data["cluster"]["nodes"][1]["gpus"]
    # Each way alone is valid.
    types["h100-mps"]["gpus"]["sharing"] = {"shard": 2}
    load_cluster(inventories.make(SMALL_HOSTS, yaml.safe_dump(data, sort_keys=False), name="shards"))
