"""The live kind scenario (roles/gpu_workloads/molecule/kind) cannot run here (no Docker, kind or
helm); check what can be: its inventory is valid and renders objects the pinned CRDs accept, and
its playbooks pass Ansible's syntax check."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from gpucluster.tools import venv_env, venv_tool
from tests.k8s.conftest import REPO
from tests.k8s.crd import validate_custom_resource

SCENARIO = REPO / "roles" / "gpu_workloads" / "molecule" / "kind"


def _write_inventory(target: Path) -> Path:
    plays = yaml.safe_load((SCENARIO / "create.yml").read_text())
    tasks = {task["name"]: task for task in plays[0]["tasks"]}
    (target / "group_vars" / "all").mkdir(parents=True)
    for name, relpath in (
        ("Write the kind inventory hosts", "hosts.yml"),
        ("Write the kind inventory cluster model", "group_vars/all/cluster.yml"),
    ):
        (target / relpath).write_text(tasks[name]["ansible.builtin.copy"]["content"])
    return target


def test_kind_inventory_renders_valid_objects(tmp_path: Path) -> None:
    cluster = load_cluster(_write_inventory(tmp_path / "inventory"))
    files = render_files(cluster, only=["kubernetes", "helm"])
    queues = []
    for path, text in files.items():
        if not path.startswith("kubernetes/") or path.endswith("manifest.yaml"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc["apiVersion"] not in ("v1", "resource.k8s.io/v1", "rbac.authorization.k8s.io/v1"):
                validate_custom_resource(doc)
            if doc["kind"] == "ClusterQueue":
                queues.append(doc["metadata"]["name"])
    # verify.yml expects these names.
    assert sorted(queues) == ["team-a", "team-b"]
    nodes = list(yaml.safe_load_all(files["kubernetes/nodes.yaml"]))
    assert len(nodes) == 4
    assert {n["metadata"]["labels"]["gpucluster.io/fabric-leaf"] for n in nodes} == {"leaf1", "leaf2"}
    # verify.yml expects every worker owned by Kubernetes (no owner taint; no GPU taint either: the
    # add-ons' pods run there), and KAI's queues over them.
    assert {n["metadata"]["labels"]["gpucluster.io/owner"] for n in nodes} == {"kubernetes"}
    assert not [n for n in nodes if "spec" in n]
    assert "slurm/slurm.conf" not in render_files(cluster, only=["slurm"])
    kai = list(yaml.safe_load_all(files["kubernetes/kai/queues.yaml"]))
    assert sorted(q["metadata"]["name"] for q in kai) == ["gpucluster", "team-a", "team-b"]
    assert kai[0]["spec"]["resources"]["gpu"]["quota"] == 32


def test_kind_playbooks_pass_syntax_check() -> None:
    ansible_playbook = venv_tool("ansible-playbook")
    env = {**venv_env(), "ANSIBLE_ROLES_PATH": str(REPO / "roles")}
    playbooks = [str(SCENARIO / name) for name in ("create.yml", "converge.yml", "verify.yml", "destroy.yml")]
    result = subprocess.run(
        [ansible_playbook, "--syntax-check", "-i", "localhost,", *playbooks],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
