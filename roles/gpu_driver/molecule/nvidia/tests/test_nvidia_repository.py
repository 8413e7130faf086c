"""gpu_driver's NVIDIA repository path: the keyring the inventory names, the deb822 source signed
by it alone, and the pins holding every driver-versioned package at the inventory's version, as
rendered, and apt reading them without complaint."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
BUILD = EPHEMERAL / "build" / "nodes" / "sim-h100"
STACK = yaml.safe_load((BUILD / "software.yaml").read_text())


def test_the_stack_is_nvidias_pinned_580(host) -> None:
    assert STACK["source"] == "nvidia"
    assert STACK["driver_version"] == "580.95.05"
    assert STACK["kernel_modules"] == "open"
    assert "nvidia-fabricmanager-580" in STACK["packages"]
    assert "datacenter-gpu-manager-4-cuda13" in STACK["packages"]


def test_the_keyring_is_the_inventorys_key(host) -> None:
    key = (EPHEMERAL / "molnvidia" / "files" / "nvidia-cuda.asc").read_text()
    keyring = host.file(STACK["repository"]["keyring"])
    assert keyring.content_string == key
    assert keyring.mode == 0o644 and keyring.user == "root"


def test_source_and_pins_are_the_rendered_files(host) -> None:
    source = host.file("/etc/apt/sources.list.d/gpucluster-nvidia-cuda.sources").content_string
    assert source == (BUILD / "apt" / "nvidia-cuda.sources").read_text()
    assert f"Signed-By: {STACK['repository']['keyring']}" in source
    assert "URIs: https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64/" in source
    pins = host.file("/etc/apt/preferences.d/gpucluster-nvidia-driver").content_string
    assert pins == (BUILD / "apt" / "nvidia-driver.pref").read_text()
    assert "Pin: version 580.95.05-*\nPin-Priority: 1001" in pins


def test_apt_reads_them(host) -> None:
    # apt parses every source and preference file for `policy`: a bad one is an E: line, exit 100.
    result = host.run("apt-cache policy")
    assert result.rc == 0 and "E:" not in result.stderr, result.stderr
    # What `apt-get update` would fetch, without fetching (no network here): NVIDIA's flat
    # repository, as the rendered source names it.
    uris = host.run("apt-get update --print-uris")
    assert uris.rc == 0, uris.stderr
    base = "https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64/"
    assert f"'{base}InRelease'" in uris.stdout
    assert f"'{base}Packages.xz'" in uris.stdout
