"""Where the lab keeps its files, and the names of everything it creates on the host."""

from __future__ import annotations

import os
from pathlib import Path

from gpucluster.packagedata import data_path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_INVENTORY = REPO_ROOT / "inventories" / "lab"
# The image recipe is package data (the package list); the rest of the lab is the repository's.
IMAGE_RECIPE_DIR = data_path("lab", "recipe")
PLAYBOOK = REPO_ROOT / "playbooks" / "slurm.yml"

# Every host object the lab creates carries this prefix, so `lab down` can be checked by eye. A
# second lab on the same machine takes another prefix (at most 6 characters: interface names are
# `<prefix><n>h`) and another subnet (GPUCLUSTER_LAB_SUBNET), with its own GPUCLUSTER_LAB_DIR.
PREFIX = os.environ.get("GPUCLUSTER_LAB_PREFIX", "gclab")[:6]
IMAGE_REPO = "localhost/gpucluster-lab"


def state_dir() -> Path:
    """The lab's working directory (state file, generated inventory, containers.conf)."""
    return Path(os.environ.get("GPUCLUSTER_LAB_DIR", str(REPO_ROOT / ".lab")))


def containers_conf() -> Path:
    return state_dir() / "containers.conf"


CONTAINERS_CONF = """\
# Written by gpucluster lab. crun fails on this kind of host (RLIMIT_NOFILE, hybrid cgroups);
# runc with cgroupfs works, and containers never get podman's default network.
[containers]
netns = "none"
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
"""


def podman_env() -> dict[str, str]:
    """Environment for every podman call (and for Ansible's podman connection)."""
    path = containers_conf()
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != CONTAINERS_CONF:
        path.write_text(CONTAINERS_CONF, encoding="utf-8")
    return {**os.environ, "CONTAINERS_CONF": str(path)}
