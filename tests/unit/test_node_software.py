"""node_types.<type>.software: what each node type gets (Debian's suite or NVIDIA's repository,
open or proprietary modules, fabric manager, IMEX per NVLink block, DCGM, toolkit), the refusals
naming hosts and versions, the rendered nodes/ files, the GPU Operator's share, and verify's rows."""

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
from gpucluster.nodesoftware.stack import resolve_stacks
from gpucluster.rendering import render_files
from gpucluster.verify.nodesoftware import check_driver_versions, check_gpu_services, parse_probe
from gpucluster.verify.observed import HostSeen, Observations
from gpucluster.verify.probes import make_plan
from tests.conftest import SMALL_CLUSTER, SMALL_HOSTS, InventoryFactory

REPO = Path(__file__).resolve().parents[2]
BASE = yaml.safe_load(textwrap.dedent(SMALL_CLUSTER))
NVIDIA = {
    "driver": {"source": "nvidia", "version": "580.95.05", "repository": {"key": "files/nvidia.asc"}},
}


def write(inventories: InventoryFactory, mutate: Callable[[dict[str, Any]], None]) -> Path:
    data = copy.deepcopy(BASE)
    mutate(data["cluster"])
    return inventories.make(SMALL_HOSTS, yaml.safe_dump(data, sort_keys=False))


def software(version: str = "22.05", gpu: str = "h100", **soft: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(cluster: dict[str, Any]) -> None:
        cluster["slurm"]["version"] = version
        cluster["node_types"]["h100"]["gpus"]["model"] = gpu
        cluster["node_types"]["h100"]["software"] = soft

    return mutate


def problems(path: Path) -> list[str]:
    with pytest.raises(InventoryError) as caught:
        load_cluster(path)
    return [f"{p.path}: {p.message}" for p in caught.value.problems]


def test_debian_driver_of_each_suite(inventories: InventoryFactory) -> None:
    for release, suite, version, modules in (
        ("22.05", "bookworm", "535.261.03", "open"),
        ("24.11", "trixie", "550.163.01", "open"),
        # forky has no nvidia-open-kernel-dkms; Ampere still runs the proprietary modules.
        ("26.05", "forky", "550.163.01", "proprietary"),
    ):
        path = write(inventories, software(release, "a100", driver={"source": "debian"}))
        stack = resolve_stacks(load_cluster(path)).stacks["h100"]
        assert (stack.suite, stack.version, stack.kernel_modules) == (suite, version, modules)
        assert stack.packages == ("nvidia-smi", "libnvidia-ml1", "nvidia-persistenced")
        assert stack.repository_url is None and not stack.dcgm


def test_nvidia_repository_stack(inventories: InventoryFactory) -> None:
    path = write(inventories, software("24.11", nvlink="nvswitch", container_toolkit=True, **NVIDIA))
    stack = resolve_stacks(load_cluster(path)).stacks["h100"]
    assert stack.repository_url == "https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64/"
    assert stack.kernel_packages == ("nvidia-kernel-open-dkms",)
    assert "nvidia-fabricmanager-580" in stack.packages
    assert "datacenter-gpu-manager-4-cuda13" in stack.packages
    assert stack.services == ("nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm")
    files = render_files(load_cluster(path), only=["nodes"])
    assert "Pin: version 580.95.05-*\nPin-Priority: 1001" in files["nodes/h100/apt/nvidia-driver.pref"]
    assert (
        "Signed-By: /usr/share/keyrings/gpucluster-nvidia-cuda.asc"
        in files["nodes/h100/apt/nvidia-cuda.sources"]
    )
    assert "NVSWITCH_FAILURE_MODE=0" in files["nodes/h100/fabricmanager.cfg"]
    assert yaml.safe_load(files["nodes/hosts.yaml"]) == {f"n0{i}": "h100" for i in range(1, 9)}


REFUSALS: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    (
        "proprietary on hopper",
        software("24.11", driver={"source": "debian", "kernel_modules": "proprietary"}),
        "cluster.node_types.h100.software.driver.kernel_modules",
        "hopper GPUs (h100) run only the open kernel modules, not proprietary (hosts n[01-08])",
    ),
    (
        "hopper on forky's debian driver",
        software("26.05", driver={"source": "debian"}),
        "cluster.node_types.h100.software.driver.kernel_modules",
        "forky has no nvidia-open-kernel-dkms (only sid does): use source `nvidia` (hosts n[01-08])",
    ),
    (
        "blackwell on trixie's 550",
        software("24.11", "b200", driver={"source": "debian"}),
        "cluster.node_types.h100.software.driver.version",
        "blackwell GPUs need driver branch 570 or newer; this node would get 550.163.01 (Debian trixie's)",
    ),
    (
        "fabric manager of another version",
        software("24.11", nvlink="nvswitch", fabric_manager_version="580.82.07", **NVIDIA),
        "cluster.node_types.h100.software.fabric_manager_version",
        "fabric manager 580.82.07 does not match driver 580.95.05: it must be the same version (hosts n[01-08])",
    ),
    (
        "dcgm for another cuda",
        software("24.11", dcgm_cuda=12, **NVIDIA),
        "cluster.node_types.h100.software.dcgm_cuda",
        "DCGM for CUDA 12 does not match driver 580.95.05 (CUDA 13) (hosts n[01-08])",
    ),
    (
        "dcgm with debian's driver",
        software("24.11", driver={"source": "debian"}, dcgm=True),
        "cluster.node_types.h100.software.dcgm",
        "dcgm comes from NVIDIA's repository only, versioned with NVIDIA's driver; Debian trixie's driver 550.163.01",
    ),
    (
        "debian version not the suite's",
        software("22.05", driver={"source": "debian", "version": "550.163.01"}),
        "cluster.node_types.h100.software.driver.version",
        "bookworm carries driver 535.261.03, not 550.163.01",
    ),
    (
        "imex outside any block",
        software("24.11", nvlink="nvl72", **NVIDIA),
        "cluster.node_types.h100.software.nvlink",
        "IMEX needs every NVL72 tray in an NVLink block of fabric.blocks; none for n[01-08]",
    ),
    (
        "no nvidia repository for forky",
        software("26.05", **NVIDIA),
        "cluster.node_types.h100.software.driver.repository.url",
        "NVIDIA has no CUDA repository for forky: give its url (a mirror)",
    ),
    (
        "nvidia without a pin",
        software("24.11", driver={"source": "nvidia", "repository": {"key": "k.asc"}}),
        "cluster.node_types.h100.software",
        "needs driver.version or driver.branch",
    ),
]


@pytest.mark.parametrize(("case", "mutate", "path", "message"), REFUSALS, ids=[c[0] for c in REFUSALS])
def test_refusals(
    inventories: InventoryFactory,
    case: str,
    mutate: Callable[[dict[str, Any]], None],
    path: str,
    message: str,
) -> None:
    found = problems(write(inventories, mutate))
    assert any(p.startswith(f"{path}: ") and message in p for p in found), found


def test_nvml_autodetect_refused_where_the_suite_has_no_plugin(inventories: InventoryFactory) -> None:
    def mutate(cluster: dict[str, Any]) -> None:
        software("26.05", "a100", driver={"source": "debian"})(cluster)
        cluster["node_types"]["h100"]["gpus"] = {"model": "a100", "count": 8, "autodetect": "nvml"}

    found = problems(write(inventories, mutate))
    assert any("forky has no slurm-wlm-nvml-plugin" in p for p in found), found


def test_nvml_plugin_installed_where_packaged(inventories: InventoryFactory) -> None:
    def mutate(cluster: dict[str, Any]) -> None:
        software("24.11", "a100", driver={"source": "debian"})(cluster)
        cluster["node_types"]["h100"]["gpus"] = {"model": "a100", "count": 8, "autodetect": "nvml"}

    stack = resolve_stacks(load_cluster(write(inventories, mutate))).stacks["h100"]
    assert stack.nvml_plugin and "slurm-wlm-nvml-plugin" in stack.packages


def test_nvl72_imex_domain_per_block() -> None:
    cluster = load_cluster(REPO / "inventories" / "nvl72")
    files = render_files(cluster, only=["nodes"])
    domains = sorted(p for p in files if p.endswith("/nodes_config.cfg"))
    assert domains == [f"nodes/imex/nvl72-r0{i}/nodes_config.cfg" for i in range(1, 9)]
    for block, hosts in cluster.blocks.items():
        lines = files[f"nodes/imex/{block}/nodes_config.cfg"].splitlines()
        assert lines[0].startswith("# Generated by gpucluster") and lines[1:] == hosts
    software = yaml.safe_load(files["nodes/gb200-tray/software.yaml"])
    assert software["imex"] and "nvidia-imex-580" in software["packages"]
    assert software["imex_block_of"]["r03n05"] == "nvl72-r03"


def test_gpu_operator_keeps_off_what_the_role_installs() -> None:
    files = render_files(load_cluster(REPO / "inventories" / "nvl72"))
    values = yaml.safe_load(files["helm/values/gpu-operator.yaml"])
    assert values["driver"]["enabled"] is False and values["toolkit"]["enabled"] is False
    nodes = [d for d in yaml.safe_load_all(files["kubernetes/nodes.yaml"]) if d]
    assert nodes
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert labels["nvidia.com/gpu.deploy.driver"] == "false"
        assert labels["nvidia.com/gpu.deploy.container-toolkit"] == "false"
        assert labels["nvidia.com/gpu.deploy.dcgm"] == "false"


def test_kubernetes_nodes_without_node_software_keep_the_operators_driver() -> None:
    files = render_files(load_cluster(REPO / "inventories" / "gke-prod"))
    for node in (d for d in yaml.safe_load_all(files.get("kubernetes/nodes.yaml", "")) if d):
        assert not any(k.startswith("nvidia.com/gpu.deploy.") for k in node["metadata"]["labels"])


def probe(driver: str, *, services: dict[str, str] | None = None, dcgm: int | None = 0) -> str:
    lines = [f"driver {driver}", f"package {driver}-1"]
    lines += [f"service {u} {s}" for u, s in (services or {}).items()]
    if dcgm is not None:
        lines.append(f"dcgm {dcgm}")
    return "\n".join(lines)


def superpod_seen(per_host: Callable[[str], str]) -> tuple[Any, Observations]:
    plan = make_plan(load_cluster(REPO / "inventories" / "superpod"))
    hosts = {h: HostSeen(gpu_stack=per_host(h)) for h in plan.hosts}
    return plan, Observations(hosts, None)


ACTIVE = {u: "active" for u in ("nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm")}


def test_verify_driver_drift_fails_naming_hosts_and_versions() -> None:
    plan, seen = superpod_seen(
        lambda h: probe("580.82.07" if h == "dgx007" else "580.95.05", services=ACTIVE)
    )
    result = check_driver_versions(plan, seen)
    assert result.status == "fail"
    assert "dgx007: driver 580.82.07, the inventory pins 580.95.05" in result.detail
    assert (
        "node type dgx-h100 drifts: 580.82.07 on dgx007, 580.95.05 on dgx[001-006,008-096]" in result.detail
    )
    assert "dgx007" in result.names


def test_verify_services_and_dcgm() -> None:
    plan, seen = superpod_seen(lambda h: probe("580.95.05", services=ACTIVE))
    assert check_driver_versions(plan, seen).status == "pass"
    assert check_gpu_services(plan, seen).status == "pass"
    broken = {**ACTIVE, "nvidia-fabricmanager": "failed"}
    plan, seen = superpod_seen(
        lambda h: probe(
            "580.95.05", services=broken if h == "dgx010" else ACTIVE, dcgm=5 if h == "dgx011" else 0
        )
    )
    result = check_gpu_services(plan, seen)
    assert result.status == "fail"
    assert "dgx010: nvidia-fabricmanager is failed" in result.detail
    assert "dgx011: DCGM not reachable (dcgmi discovery exit 5)" in result.detail


def test_probe_parsing() -> None:
    seen = parse_probe("driver \npackage 550.163.01-1\nservice nvidia-imex inactive\n")
    assert seen.version == "550.163.01" and seen.driver == "" and seen.services == {"nvidia-imex": "inactive"}
    assert seen.dcgm is None
