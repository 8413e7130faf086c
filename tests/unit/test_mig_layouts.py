"""MIG: the profile table (NVIDIA's MIG user guide, `nvidia-smi mig -lgip` placements), which
layouts a GPU holds, the checks of a node type's declaration, and gpucluster-mig's decisions from
nvidia-smi's output (no GPU here: the output shapes are NVIDIA's)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster.errors import InventoryError
from gpucluster.layers import load_cluster
from gpucluster.model.sharing import MIG_GPUS, fits, layout_problem, mig_gpu_of
from gpucluster.programs import gpucluster_mig as prog
from tests.conftest import SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory

H100 = MIG_GPUS["H100-80GB"]


@pytest.mark.parametrize(
    "layout",
    [
        {"1g.10gb": 7},
        {"7g.80gb": 1},
        {"3g.40gb": 2},
        {"4g.40gb": 1, "3g.40gb": 1},
        {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1},
        {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2},
        {"2g.20gb": 3, "1g.10gb": 1},
        {"1g.20gb": 4},
        {"3g.40gb": 1, "1g.20gb": 2},
        {"2g.20gb": 2, "1g.10gb": 3},
    ],
)
def test_layouts_of_nvidias_supported_configurations_fit(layout: dict[str, int]) -> None:
    assert fits(H100, layout), layout


@pytest.mark.parametrize(
    ("layout", "why"),
    [
        ({"1g.10gb": 8}, "a H100-80GB holds at most 7"),
        ({"4g.40gb": 2}, "holds at most 1"),
        ({"3g.40gb": 2, "1g.10gb": 1}, "memory slices overlap"),  # 3+3+1 = 7, but no memory slice left
        ({"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1}, "8 compute slices of 7"),
        ({"1g.20gb": 4, "1g.10gb": 1}, "memory slices overlap"),
        ({"1g.5gb": 7}, "not a MIG profile of the H100-80GB"),
    ],
)
def test_layouts_that_cannot_be_placed_are_refused_naming_why(layout: dict[str, int], why: str) -> None:
    problem = layout_problem(H100, layout)
    assert problem is not None and why in problem, problem


def test_every_product_has_the_seven_slice_profiles_named_by_its_memory() -> None:
    assert set(MIG_GPUS) == {
        "A100-40GB", "A100-80GB", "H100-80GB", "H100-94GB", "H200-141GB", "B200-180GB", "GB200-186GB",
    }  # fmt: skip
    assert list(MIG_GPUS["H200-141GB"].profiles) == [
        "1g.18gb",
        "1g.35gb",
        "2g.35gb",
        "3g.71gb",
        "4g.71gb",
        "7g.141gb",
    ]
    assert list(MIG_GPUS["GB200-186GB"].profiles) == [
        "1g.23gb",
        "1g.47gb",
        "2g.47gb",
        "3g.93gb",
        "4g.93gb",
        "7g.186gb",
    ]
    assert next(iter(MIG_GPUS["A100-40GB"].profiles)) == "1g.5gb"
    for gpu in MIG_GPUS.values():
        assert fits(gpu, {next(iter(gpu.profiles)): 7})


def test_the_product_follows_from_model_and_memory() -> None:
    assert mig_gpu_of("h100", 80) is H100
    assert mig_gpu_of("H100_SXM5", 94) is MIG_GPUS["H100-94GB"]
    assert mig_gpu_of("nvidia_h200", None) is MIG_GPUS["H200-141GB"]
    assert mig_gpu_of("gb200", None) is MIG_GPUS["GB200-186GB"]
    assert mig_gpu_of("b200", None) is MIG_GPUS["B200-180GB"]
    assert mig_gpu_of("a100", None) is None  # 40 or 80 GB: memory_gb says which
    assert mig_gpu_of("l40s", 48) is None


def _mig_type(inventories: InventoryFactory, gpus: dict[str, Any]) -> Path:
    """The small inventory (tests/conftest.py) at 26.05, its node type's GPUs replaced."""
    data = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))
    data["cluster"]["slurm"]["version"] = "26.05"
    data["cluster"]["node_types"]["h100"]["gpus"] = gpus
    return inventories.make(SMALL_HOSTS, yaml.safe_dump(data, sort_keys=False))


def problems_of(directory: Path) -> list[str]:
    try:
        load_cluster(directory)
    except InventoryError as error:
        return [f"{p.path}: {p.message}" for p in error.problems]
    return []


@pytest.mark.parametrize(
    ("gpus", "where", "what"),
    [
        (
            {"model": "l40s", "count": 8, "devices": "/dev/nvidia[0-7]", "sharing": {"mig": {"layout": {"1g.10gb": 7}}}},
            "cluster.node_types.h100.gpus.sharing.mig",
            "l40s has no MIG",
        ),
        (
            {"model": "a100", "count": 8, "sharing": {"mig": {"layout": {"1g.10gb": 7}}}},
            "cluster.node_types.h100.gpus.sharing.mig.gpu",
            "which GPU is `a100` (no memory_gb)? name it for its MIG profiles",
        ),
        (
            {"model": "h100", "count": 8, "memory_gb": 80, "sharing": {"mig": {"layout": {"3g.40gb": 3}}}},
            "cluster.node_types.h100.gpus.sharing.mig.layout",
            "3 x 3g.40gb: a H100-80GB holds at most 2",
        ),
        (
            {
                "model": "h100", "count": 8, "memory_gb": 80,
                "sharing": {"mig": {"per_gpu": [{"gpus": "0-3", "profiles": {"3g.40gb": 2}}]}},
            },
            "cluster.node_types.h100.gpus.sharing.mig.per_gpu",
            "GPUs 4,5,6,7 have no layout",
        ),
        (
            {"model": "h100", "count": 8, "autodetect": "nvidia", "sharing": {"mig": {"layout": {"7g.80gb": 1}}}},
            "cluster.node_types.h100.gpus.autodetect",
            "AutoDetect=nvidia does not find MIG instances",
        ),
        (
            {"model": "h100", "count": 8, "memory_gb": 80, "sharing": {"mig": {"layout": {"7g.80gb": 1}}, "mps": 100}},
            "cluster.node_types.h100.gpus.sharing",
            "mig and mps together",
        ),
        (
            {"model": "h100", "count": 8, "memory_gb": 80, "sharing": {"mig": {"layout": {"7g.80gb": 1}}, "shard": 4}},
            "cluster.node_types.h100.gpus.sharing.shard",
            "cannot shard a MIG instance",
        ),
    ],
)  # fmt: skip
def test_a_node_types_declaration_is_checked(
    inventories: InventoryFactory, gpus: dict[str, Any], where: str, what: str
) -> None:
    found = problems_of(_mig_type(inventories, gpus))
    assert any(where in p and what in p for p in found), found


def test_a_valid_mig_node_type_needs_no_device_files(inventories: InventoryFactory) -> None:
    gpus = {"model": "h100", "count": 8, "memory_gb": 80, "sharing": {"mig": {"layout": {"1g.10gb": 7}}}}
    assert problems_of(_mig_type(inventories, gpus)) == []


QUERY_OFF = "0, Disabled, Disabled\n1, Disabled, Enabled\n"
LGI = """\
+-------------------------------------------------------+
| GPU instances:                                        |
| GPU   Name             Profile  Instance   Placement  |
|                          ID       ID       Start:Size |
|=======================================================|
|   0  MIG 3g.40gb          9        1          4:4     |
+-------------------------------------------------------+
|   0  MIG 1g.10gb         19        7          0:1     |
+-------------------------------------------------------+
"""


def test_nvidia_smis_output_is_read() -> None:
    gpus = prog.parse_query("0, Enabled, Enabled\n")
    prog.parse_instances(LGI, gpus)
    assert gpus["0"].mig_current and dict(gpus["0"].instances) == {"3g.40gb": 1, "1g.10gb": 1}


def test_commands_per_gpu_state() -> None:
    gpus = prog.parse_query(QUERY_OFF)
    # MIG off: enable, reset; pending already: reset only; then the instances, largest first.
    assert prog.commands_for(gpus["0"], {"1g.10gb": 1, "3g.40gb": 2}) == [
        ["-i", "0", "-mig", "1"],
        ["-i", "0", "-r"],
        ["mig", "-i", "0", "-cgi", "3g.40gb,3g.40gb,1g.10gb", "-C"],
    ]
    assert prog.commands_for(gpus["1"], {"7g.80gb": 1})[:1] == [["-i", "1", "-r"]]
    on = prog.parse_query("0, Enabled, Enabled\n")
    prog.parse_instances(LGI, on)
    assert prog.commands_for(on["0"], {"3g.40gb": 1, "1g.10gb": 1}) == []
    assert prog.commands_for(on["0"], {"7g.80gb": 1}) == [
        ["mig", "-i", "0", "-dci"],
        ["mig", "-i", "0", "-dgi"],
        ["mig", "-i", "0", "-cgi", "7g.80gb", "-C"],
    ]


def test_plan_and_check_from_recorded_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "query-gpu.csv").write_text("0, Enabled, Enabled\n")
    (tmp_path / "lgi.txt").write_text(LGI)
    config = tmp_path / "mig.json"
    config.write_text('{"gpus": {"0": {"3g.40gb": 1, "1g.10gb": 1}}}')
    assert prog.main(["plan", "--config", str(config), "--observed", str(tmp_path)]) == 0
    assert prog.main(["check", "--config", str(config), "--observed", str(tmp_path)]) == 0
    config.write_text('{"gpus": {"0": {"1g.10gb": 7}}}')
    assert prog.main(["plan", "--config", str(config), "--observed", str(tmp_path)]) == prog.PLAN_CHANGES
    assert prog.main(["check", "--config", str(config), "--observed", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "nvidia-smi mig -i 0 -cgi 1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb -C" in out
    assert "GPU 0: 1 x 1g.10gb, 1 x 3g.40gb (declared: 7 x 1g.10gb)" in out
