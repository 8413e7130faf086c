"""`gpucluster import` on the command line: what it prints and writes, its JSON document against
its schema, and input it refuses (each problem with its file and line, exit 2, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from gpucluster.layers import load_cluster
from tests.conftest import REPO, run_cli

SCHEMA = json.loads((REPO / "gpucluster" / "output_schemas" / "import.schema.json").read_text())
SITE = REPO / "tests" / "import_sites" / "lab-server-upgrade" / "etc"
SMALL = """\
ClusterName=small
GresTypes=gpu
SlurmctldHost=head
SlurmUser=slurm
MailProg=/usr/bin/true
NodeName=n[1-4] CPUs=8 RealMemory=16000
PartitionName=all Nodes=n[1-4] Default=YES
"""


def write_site(root: Path, slurm_conf: str, **files: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "slurm.conf").write_text(slurm_conf)
    for name, text in files.items():
        (root / name.replace("_", ".")).write_text(text)
    return root


def test_text_says_where_every_setting_went_and_writes_a_valid_inventory(tmp_path: Path) -> None:
    out = tmp_path / "vision"
    proc = run_cli("import", str(SITE), "--slurm-version", "24.11", "--out", str(out), "--check")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "slurm.conf:8: ControlMachine=vision-head: mapped -> cluster.slurm.controller" in text
    assert "FastSchedule=1: dropped (Slurm 20.02 removed FastSchedule" in text
    assert "settings: " in text and "lines: slurm.conf 38 -> inventory" in text
    assert "check: no difference as Slurm 24.11 reads them" in text
    cluster = load_cluster(out)
    assert cluster.spec.slurm.select_type == "cons_tres" and cluster.release.name == "24.11"
    assert sorted(p.name for p in out.iterdir()) == ["group_vars", "hosts.yml"]


def test_json_document_follows_its_schema(tmp_path: Path) -> None:
    proc = run_cli(
        "import", "--json", str(SITE), "--slurm-version", "24.11", "--out", str(tmp_path / "o"), "--check"
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    errors = list(Draft202012Validator(SCHEMA).iter_errors(doc))
    assert not errors, errors
    assert doc["ok"] and doc["check"]["same"] and doc["lines"]["inventory"] < doc["lines"]["slurm_conf"]
    assert doc["counts"]["mapped"] == 3 and doc["counts"]["dropped"] == 2 and doc["counts"]["refused"] == 0
    kinds = {p["written"]: p["kind"] for p in doc["placements"]}
    assert kinds["CacheGroups=0"] == "dropped"


def test_a_difference_found_by_check_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpucluster.slurm_import import adopt
    from gpucluster.slurm_import.compare import Comparison, Difference

    def differing(*args: object) -> Comparison:
        return Comparison([Difference("setting", "KillWait", "", "30", "60")], {"settings": 1})

    monkeypatch.setattr(adopt, "check_render", differing)
    from gpucluster.cli import run

    code = run(["import", str(SITE), "--slurm-version", "24.11", "--out", str(tmp_path / "o"), "--check"])
    assert code == 1


@pytest.mark.parametrize(
    ("conf", "files", "where", "message"),
    [
        (SMALL + "SlurmctldTimout=60\n", {}, "slurm.conf:8", "SlurmctldTimout: not a slurm.conf key of any Slurm release gpucluster knows: did you mean `SlurmctldTimeout`?"),
        ("cluster:\n  name: small\n", {}, "slurm.conf:1", "not a `Key=Value` setting: 'cluster:'"),
        (SMALL.replace("n[1-4] Default", "n[1-5] Default"), {}, "slurm.conf:7", "PartitionName=all: n5: no NodeName defines it"),
        (SMALL, {"gres_conf": "NodeName=gpu1 Name=gpu File=/dev/nvidia0\n"}, "gres.conf:1", "NodeName: gpu1: no NodeName defines it"),
        (SMALL + "FastSchedule=0\n", {}, "slurm.conf:8", "FastSchedule: refused: Slurm 20.02 removed FastSchedule (slurmctld stops on the key) and has no replacement for FastSchedule=0"),
        (SMALL + "AuthType=auth/none\n", {}, "slurm.conf:8", "AuthType: refused: gpucluster writes AuthType=auth/munge"),
        (SMALL + "HealthCheckTimeout=90\n", {}, "slurm.conf:8", "HealthCheckTimeout: refused: Slurm 24.11 has no HealthCheckTimeout (Slurm 26.05 added it)"),
        (SMALL + "include missing.conf\n", {}, "slurm.conf:8", "include: `missing.conf` not found"),
        (SMALL.replace("CPUs=8", "CPUs=8 NodeAddr=10.0.0.[1-2]"), {}, "slurm.conf:6", "NodeAddr: refused: 2 names for 4 nodes: slurmctld needs as many NodeAddr as NodeName"),
    ],
    ids=["unknown key", "not a slurm.conf", "partition names no node", "gres.conf names no node", "no mapping",
         "fixed value", "newer key", "include not found", "addresses short of the nodes"],
)  # fmt: skip
def test_input_it_cannot_carry_is_refused_with_file_and_line(
    tmp_path: Path, conf: str, files: dict[str, str], where: str, message: str
) -> None:
    site = write_site(tmp_path / "etc", conf, **files)
    out = tmp_path / "out"
    proc = run_cli("import", str(site), "--slurm-version", "24.11", "--out", str(out))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and (not where or f"{where}:" in proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def test_json_of_refused_input_is_validates_invalid_document(tmp_path: Path) -> None:
    site = write_site(tmp_path / "etc", SMALL + "FastSchedule=0\n")
    proc = run_cli("import", "--json", str(site), "--slurm-version", "24.11", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    assert doc["ok"] is False and doc["problems"][0]["line"] == 8
    assert doc["problems"][0]["path"] == "FastSchedule"


def test_an_unknown_release_and_a_full_output_directory_are_usage_errors(tmp_path: Path) -> None:
    site = write_site(tmp_path / "etc", SMALL)
    proc = run_cli("import", str(site), "--slurm-version", "21.08", "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "Slurm 21.08 is not a release gpucluster knows" in proc.stderr
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep").write_text("x")
    proc = run_cli("import", str(site), "--slurm-version", "24.11", "--out", str(full))
    assert proc.returncode == 2 and "not empty" in proc.stderr
    assert (full / "keep").read_text() == "x"


def test_per_host_gres_copies_and_include_modifiers(tmp_path: Path) -> None:
    site = write_site(
        tmp_path / "etc",
        SMALL.replace("CPUs=8", "CPUs=8 Gres=gpu:l4:1").replace(
            "PartitionName", "include %c-parts.conf\n#PartitionName"
        ),
    )
    (site / "small-parts.conf").write_text("PartitionName=all Nodes=n[1-4] Default=YES\n")
    copy = tmp_path / "n1-gres.conf"
    copy.write_text("Name=gpu Type=l4 File=/dev/nvidia0\n")
    out = tmp_path / "out"
    proc = run_cli(
        "import",
        str(site),
        "--slurm-version",
        "24.11",
        "--out",
        str(out),
        "--gres-conf",
        f"n[1-4]={copy}",
        "--check",
    )
    assert proc.returncode == 0, proc.stderr
    cluster = yaml.safe_load((out / "group_vars" / "all" / "cluster.yml").read_text())["cluster"]
    assert cluster["node_types"]["n"]["gpus"] == {"model": "l4", "count": 1, "devices": "/dev/nvidia0"}
    assert "small-parts.conf" in proc.stdout
