"""Slurm on Kubernetes gets the same health check as bare metal, through the Slinky chart's own
values: the program and its healthcheck.conf in a ConfigMap (extraObjects) mounted in every
NodeSet's slurmd container, HealthCheck* keys in slurm.conf (controller.extraConfMap) and the
Prolog as a chart prolog script. Checked against the pinned chart values and Kubernetes 1.34."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from gpucluster.k8s.values import SLINKY_HEALTH_DIR, SLINKY_HEALTH_NAME, SLINKY_HEALTH_PROGRAM
from gpucluster.layers import load_cluster
from gpucluster.render.health import program_text
from gpucluster.rendering import render_files
from tests.k8s.conftest import INVENTORIES
from tests.k8s.test_values import chart_values, unknown_keys

SCRIPT = Path(__file__).resolve().parents[2] / "gpucluster" / "programs" / "gpucluster_healthcheck.py"


def slinky_values(tmp_path: Path, health: dict[str, Any] | None) -> dict[str, Any]:
    """gke-prod (16 Slurm-on-Kubernetes nodes in one NodeSet) with cluster.slurm.health set."""
    target = tmp_path / "gke-prod"
    shutil.copytree(INVENTORIES / "gke-prod", target)
    path = target / "group_vars" / "all" / "cluster.yml"
    data = yaml.safe_load(path.read_text())
    if health is not None:
        data["cluster"]["slurm"]["health"] = health
        data["cluster"]["node_types"]["a3-mega"]["health"] = {"mounts": ["/home"]}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    files = render_files(load_cluster(target), only=["helm"])
    values: dict[str, Any] = yaml.safe_load(files["helm/values/slurm.yaml"])
    return values


def test_nodesets_run_the_health_check(tmp_path: Path) -> None:
    values = slinky_values(tmp_path, {"interval": 120, "node_state": ["ANY", "CYCLE"]})
    conf = values["controller"]["extraConfMap"]
    assert conf["HealthCheckProgram"] == SLINKY_HEALTH_PROGRAM
    assert conf["HealthCheckInterval"] == "120" and conf["HealthCheckNodeState"] == "ANY,CYCLE"
    assert values["prologScripts"][SLINKY_HEALTH_NAME].endswith(f"exec {SLINKY_HEALTH_PROGRAM} --prolog\n")
    (config_map,) = values["extraObjects"]
    data = config_map["data"]
    assert data["gpucluster_healthcheck.py"] == SCRIPT.read_text() == program_text()
    assert f"{SLINKY_HEALTH_DIR}/healthcheck.conf" in data["gpucluster-healthcheck"]
    for name, nodeset in values["nodesets"].items():
        assert nodeset["podSpec"]["volumes"] == [
            {
                "name": SLINKY_HEALTH_NAME,
                "configMap": {"name": config_map["metadata"]["name"], "defaultMode": 0o755},
            }
        ]
        assert nodeset["slurmd"]["volumeMounts"][0]["mountPath"] == SLINKY_HEALTH_DIR
        pods = " ".join(f"{name}-{i}" for i in range(nodeset["replicas"]))
        assert f"\n[{name}]\nnodes = {pods}\n" in data["healthcheck.conf"]


def test_the_program_finds_each_slurmd_pods_expectations(tmp_path: Path) -> None:
    """slurmd pods are `<nodeset>-<ordinal>`: the rendered file gives each its node type's checks."""
    values = slinky_values(tmp_path, {})
    conf = tmp_path / "healthcheck.conf"
    conf.write_text(values["extraObjects"][0]["data"]["healthcheck.conf"])
    spec = importlib.util.spec_from_file_location("gpucluster_healthcheck_k8s", SCRIPT)
    assert spec and spec.loader
    program = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = program
    spec.loader.exec_module(program)
    exp = program.load_expectations(conf, "a3-mega-15")
    assert exp.gpus == 8 and exp.devices == () and exp.mounts == ("/home",)
    assert exp.checks == ("gpu_count", "mounts", "xid", "ecc", "dcgm")


def test_values_exist_in_the_pinned_chart_and_make_valid_objects(tmp_path: Path) -> None:
    values = slinky_values(tmp_path, {})
    assert unknown_keys("slurm", values, chart_values("slurm")) == []
    (config_map,) = values["extraObjects"]
    kubernetes_validate.validate(config_map, "1.34.0", strict=True)
    for nodeset in values["nodesets"].values():
        # The chart puts slurmd's volumeMounts on the slurmd container, podSpec on the pod.
        slurmd = {"name": "slurmd", "image": "slurmd", "volumeMounts": nodeset["slurmd"]["volumeMounts"]}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "check"},
            "spec": {"containers": [slurmd], **nodeset["podSpec"]},
        }
        kubernetes_validate.validate(pod, "1.34.0", strict=True)


def test_nothing_reaches_helms_tpl(tmp_path: Path) -> None:
    """The chart renders extraObjects through `tpl`: a `{{` in them would be read as a template."""
    values = slinky_values(tmp_path, {})
    text = yaml.safe_dump(values["extraObjects"])
    assert "{{" not in text


def test_no_health_no_extra_objects(tmp_path: Path) -> None:
    values = slinky_values(tmp_path, None)
    assert "extraObjects" not in values and "prologScripts" not in values
    assert "HealthCheckProgram" not in values["controller"]["extraConfMap"]
    assert all("volumes" not in n["podSpec"] for n in values["nodesets"].values())


def test_prolog_off_keeps_the_periodic_check(tmp_path: Path) -> None:
    values = slinky_values(tmp_path, {"prolog": False})
    assert "prologScripts" not in values
    assert values["controller"]["extraConfMap"]["HealthCheckProgram"] == SLINKY_HEALTH_PROGRAM
