"""GPUs of several types on one node (gpus.types, issue 36): what slurm.conf and gres.conf say of
them, what the checks refuse (at the key's line, saying what to do), and the import of a site's
files that say them (Gres=gpu:titanx:3,gpu:gtx1080:1 with a gres.conf naming each card's type)."""

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
from gpucluster.slurm.view import SiteFiles
from gpucluster.slurm_import.adopt import import_cluster, write_inventory
from tests.conftest import SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory
from tests.unit.test_input_errors import CLUSTER_FILE, problems

BASE = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))
# Six TITAN X and two GTX 1080 (slots 2 and 5), on a node of two sockets.
MIXED: dict[str, Any] = {
    "types": [
        {"model": "titanx", "count": 6, "devices": "/dev/nvidia[0-1,3-4,6-7]"},
        {"model": "gtx1080", "count": 2, "devices": "/dev/nvidia[2,5]"},
    ]
}


def mixed_inventory(inventories: InventoryFactory, gpus: dict[str, Any]) -> Path:
    data = copy.deepcopy(BASE)
    data["cluster"]["node_types"]["h100"]["gpus"] = gpus
    return inventories.make(SMALL_HOSTS, yaml.safe_dump(data, sort_keys=False))


def rendered(directory: Path) -> dict[str, str]:
    return {str(k): v for k, v in render_files(load_cluster(directory), only=["slurm"]).items()}


def test_slurm_conf_lists_each_type_and_gres_conf_gives_each_card_its_type_in_device_order(
    inventories: InventoryFactory,
) -> None:
    files = rendered(mixed_inventory(inventories, MIXED))
    node_lines = [line for line in files["slurm/slurm.conf"].splitlines() if line.startswith("NodeName=n")]
    assert node_lines and all("Gres=gpu:titanx:6,gpu:gtx1080:2 " in line for line in node_lines), node_lines
    gres = [
        line.split(" ", 1)[1]
        for line in files["slurm/gres.conf"].splitlines()
        if line.startswith("NodeName=")
    ]
    # Sockets split the eight GPUs 4 + 4 (affinity `socket`): cores 0-7 and 8-15.
    assert gres == [
        "Name=gpu Type=titanx File=/dev/nvidia[0-1] Cores=0-7",
        "Name=gpu Type=gtx1080 File=/dev/nvidia2 Cores=0-7",
        "Name=gpu Type=titanx File=/dev/nvidia3 Cores=0-7",
        "Name=gpu Type=titanx File=/dev/nvidia4 Cores=8-15",
        "Name=gpu Type=gtx1080 File=/dev/nvidia5 Cores=8-15",
        "Name=gpu Type=titanx File=/dev/nvidia[6-7] Cores=8-15",
    ]
    cluster = load_cluster(mixed_inventory(inventories, MIXED))
    gpus = cluster.spec.node_types["h100"].gpus
    assert gpus is not None and (gpus.count, gpus.devices) == (8, "/dev/nvidia[0-7]")
    assert gpus.label == "6 x titanx + 2 x gtx1080"


def test_under_autodetect_the_types_need_no_device_files(inventories: InventoryFactory) -> None:
    gpus = {"autodetect": "nvml", "types": [{"model": "a100", "count": 4}, {"model": "a40", "count": 4}]}
    files = rendered(mixed_inventory(inventories, gpus))
    gres = [
        line.split(" ", 1)[1]
        for line in files["slurm/gres.conf"].splitlines()
        if line.startswith("NodeName=")
    ]
    assert gres == ["AutoDetect=nvml", "Name=gpu Type=a100 Count=4", "Name=gpu Type=a40 Count=4"]
    assert "Gres=gpu:a100:4,gpu:a40:4 " in files["slurm/slurm.conf"]


@pytest.mark.parametrize(
    ("gpus", "key", "message"),
    [
        (
            {"types": [{"model": "titanx", "count": 8, "devices": "/dev/nvidia[0-7]"}]},
            "types",
            "for one type, say model",
        ),
        ({**MIXED, "model": "titanx"}, "model", "each type names its model: leave gpus.model out"),
        ({**MIXED, "count": 4}, "count", "count is 4 but the types have 8 GPUs"),
        ({**MIXED, "sharing": {"shard": 4}}, "sharing", "share GPUs of one type"),
        (
            {
                "types": [
                    {"model": "titanx", "count": 4, "devices": "/dev/nvidia[0-3]"},
                    {"model": "titanx", "count": 4, "devices": "/dev/nvidia[4-7]"},
                ]
            },
            "types[1].model",
            "titanx is listed twice",
        ),
        (
            {
                "types": [
                    {"model": "titanx", "count": 7, "devices": "/dev/nvidia[0-6]"},
                    {"model": "gtx1080", "count": 1, "devices": "/dev/nvidia6"},
                ]
            },
            "types[1].devices",
            "/dev/nvidia6 is also a device of titanx",
        ),
        (
            {
                "types": [
                    {"model": "titanx", "count": 7, "devices": "/dev/nvidia[0-5]"},
                    {"model": "gtx1080", "count": 1, "devices": "/dev/nvidia7"},
                ]
            },
            "types[0].devices",
            "names 6 device(s) but this type's count is 7",
        ),
        (
            {
                "types": [
                    {"model": "titanx", "count": 7, "devices": "/dev/nvidia[0-6]"},
                    {"model": "gtx1080", "count": 1},
                ]
            },
            "types[1].devices",
            "give every type its device files, or none",
        ),
        (
            {
                "types": [
                    {"model": "titanx", "count": 7, "devices": "/dev/nvidia[0-6]"},
                    {"model": "gtx1080", "count": 1, "devices": "/dev/nvidia8"},
                ]
            },
            "devices",
            "the 8 GPUs of a node are /dev/nvidia0 to /dev/nvidia7",
        ),
        (
            {**MIXED, "devices": "/dev/nvidia[0-8]"},
            "devices",
            "is not the types' device files (/dev/nvidia[0-7])",
        ),
    ],
)
def test_a_mistaken_list_of_types_is_refused_at_its_key(
    inventories: InventoryFactory, gpus: dict[str, Any], key: str, message: str
) -> None:
    found = problems(mixed_inventory(inventories, gpus))
    wanted = f"cluster.node_types.h100.gpus.{key}: "
    assert any(wanted in p and message in p for p in found), found
    assert all(p.startswith(f"{CLUSTER_FILE}:") for p in found), found


# --- import -----------------------------------------------------------------------------------

SLURM_CONF = """\
ClusterName=cards
SlurmctldHost=head
AuthType=auth/munge
SelectType=select/cons_tres
GresTypes=gpu
NodeName=card[1-2] Sockets=2 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=64000 Gres={gres} State=UNKNOWN
PartitionName=cards Nodes=card[1-2] Default=YES State=UP
"""
TYPED_GRES_CONF = """\
NodeName=card[1-2] Name=gpu Type=titanx File=/dev/nvidia[0-1] Cores=0-3
NodeName=card[1-2] Name=gpu Type=gtx1080 File=/dev/nvidia2 Cores=4-7
NodeName=card[1-2] Name=gpu Type=titanx File=/dev/nvidia3 Cores=4-7
"""


def site(tmp_path: Path, gres: str, gres_conf: str | None) -> SiteFiles:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "slurm.conf").write_text(SLURM_CONF.format(gres=gres))
    if gres_conf is not None:
        (etc / "gres.conf").write_text(gres_conf)
    return SiteFiles.in_directory(etc, ())


def test_a_site_of_several_gpu_types_per_node_imports_and_renders_the_same_cluster(tmp_path: Path) -> None:
    result = write_inventory(
        import_cluster(site(tmp_path, "gpu:titanx:3,gpu:gtx1080:1", TYPED_GRES_CONF), "22.05"),
        tmp_path / "inv",
        check=True,
    )
    assert result.comparison is not None and result.comparison.same, result.comparison.differences
    gpus = load_cluster(tmp_path / "inv").spec.node_types["card"].gpus
    assert gpus is not None and gpus.types is not None
    assert [(t.model, t.count, t.devices) for t in gpus.types] == [
        ("titanx", 3, "/dev/nvidia[0-1,3]"),
        ("gtx1080", 1, "/dev/nvidia2"),
    ]


def test_without_the_nodes_gres_conf_the_devices_are_assumed_in_the_gres_order(tmp_path: Path) -> None:
    result = import_cluster(site(tmp_path, "gpu:gtx1080:1,gpu:titanx:3", None), "22.05")
    assert any(p.kind == "assumed" for p in result.placements)
    written = write_inventory(result, tmp_path / "inv")
    assert written.written_to is not None
    gpus = load_cluster(tmp_path / "inv").spec.node_types["card"].gpus
    assert gpus is not None and gpus.types is not None
    assert [t.devices for t in gpus.types] == ["/dev/nvidia0", "/dev/nvidia[1-3]"]


@pytest.mark.parametrize(
    ("gres", "gres_conf", "where", "message"),
    [
        ("gpu:titanx:3,gpu:1", TYPED_GRES_CONF, "slurm.conf:6", "typed and untyped GPUs on one node"),
        (
            "gpu:titanx:3,gpu:gtx1080:1,shard:8",
            TYPED_GRES_CONF,
            "slurm.conf:6",
            "shards or MPS on a node of several GPU types",
        ),
        (
            "gpu:titanx:3,gpu:v100:1",
            TYPED_GRES_CONF,
            "gres.conf:2",
            "Type=gtx1080 where slurm.conf's Gres says titanx, v100",
        ),
        (
            "gpu:titanx:2,gpu:gtx1080:2",
            TYPED_GRES_CONF,
            "gres.conf:1",
            "2 GPUs of type titanx and gres.conf 3 device files",
        ),
        (
            "gpu:titanx:3,gpu:gtx1080:1",
            "NodeName=card[1-2] Name=gpu File=/dev/nvidia[0-3]\n",
            "gres.conf:1",
            "each gres.conf line names its Type= and File=",
        ),
    ],
)
def test_a_site_of_several_types_slurm_would_misread_is_refused_at_its_line(
    tmp_path: Path, gres: str, gres_conf: str, where: str, message: str
) -> None:
    with pytest.raises(InventoryError) as info:
        import_cluster(site(tmp_path, gres, gres_conf), "22.05")
    found = [str(p) for p in info.value.problems]
    assert any(where in p and message in p for p in found), found


def test_a_wrong_type_is_its_only_error(inventories: InventoryFactory) -> None:
    """count is derived from the types: a type missing its count is the one problem said, not also
    a `gpus.count: required` the inventory never meant to give."""
    found = problems(
        mixed_inventory(inventories, {"types": [{"model": "titanx"}, {"model": "gtx1080", "count": 2}]})
    )
    assert [p.split(": ", 1)[1] for p in found] == [
        "cluster.node_types.h100.gpus.types[0].count: required key is missing"
    ]
