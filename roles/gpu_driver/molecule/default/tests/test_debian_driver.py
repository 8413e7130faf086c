"""gpu_driver on Debian's driver: the suite's userspace is installed at the suite's version,
no kernel module package in a container, the persistence daemon enabled but not started (no
driver is loaded), and nvidia-smi fails the way a GPU node without its driver does (exit 9, or
NVML failing to initialise),
which is what the health check drains a node for."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from gpucluster.programs.gpucluster_healthcheck import driver_unanswered

BUILD = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "build"
STACK = yaml.safe_load((BUILD / "nodes" / "sim-a100" / "software.yaml").read_text())


def test_the_suites_driver_userspace_is_installed(host) -> None:
    for name in STACK["packages"]:
        package = host.package(name)
        assert package.is_installed, name
    assert host.package("nvidia-smi").version.startswith(STACK["driver_version"] + "-")
    assert host.package("libnvidia-ml1").version.startswith(STACK["driver_version"] + "-")


def test_no_kernel_module_package_in_a_container(host) -> None:
    assert STACK["kernel_packages"], "the stack names its kernel packages"
    for name in STACK["kernel_packages"]:
        assert not host.package(name).is_installed, name
    assert not host.file("/proc/driver/nvidia/version").exists


def test_persistenced_enabled_not_started_without_a_driver(host) -> None:
    service = host.service("nvidia-persistenced")
    assert service.is_enabled
    assert not service.is_running


def test_nvidia_smi_without_a_driver_is_what_the_health_check_drains_for(host) -> None:
    # Exit 9 where no driver is loaded; in these containers NVML may also fail with exit 255
    # ("Failed to initialize NVML: Unknown Error"). The health check takes both for a driver that
    # does not answer, and drains the node.
    result = host.run("nvidia-smi")
    assert result.rc not in (0, 127), (result.rc, result.stdout, result.stderr)
    assert driver_unanswered(result.rc, result.stdout + result.stderr), (
        result.rc,
        result.stdout,
        result.stderr,
    )


def test_nvml_library_is_loadable(host) -> None:
    # The library slurmd's NVML plugin and DCGM load (it reports "Driver Not Loaded" at init here).
    assert host.run("ldconfig -p | grep -q 'libnvidia-ml.so.1 '").rc == 0
