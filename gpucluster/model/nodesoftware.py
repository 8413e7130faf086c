"""The GPU node software of a node type (`node_types.<name>.software`): the driver, where it comes
from and which kernel modules, and the services beside it (persistence daemon, fabric manager, IMEX,
DCGM, container toolkit). The role gpu_driver installs what this says; nothing here is installed
when `driver.source` is `none` (the site or the host image owns the driver).

No `from __future__ import annotations`: gpucluster.model.spec imports this at start-up (pydantic).
"""

import re
from typing import Annotated, Literal

from pydantic import Field, StrictBool, model_validator

from gpucluster.model.base import Strict, Update, spec

# A full driver version as NVIDIA numbers it (580.95.05, 550.163.01).
DRIVER_VERSION_RE = r"^[1-9][0-9]{2}\.[0-9]{1,3}(\.[0-9]{1,3})?$"
BRANCH_RE = r"^[1-9][0-9]{2}$"


class NvidiaRepository(Strict):
    """NVIDIA's CUDA network repository (or the site's mirror of it)."""

    url: Annotated[str, Field(pattern=r"^(https?|file)://\S+/$")] | None = spec(
        "Repository URL ending in `/` (a flat repository: `deb [signed-by=...] URL /`). Default: "
        "NVIDIA's CUDA repository of the host's Debian release, "
        "https://developer.download.nvidia.com/compute/cuda/repos/debian<N>/<arch>/ "
        "(debian12 for bookworm, debian13 for trixie); required for suites NVIDIA has none of.",
        Update.NODE_SOFTWARE,
        default=None,
    )
    key: Annotated[str, Field(pattern=r"^\S+$")] = spec(
        "The repository's OpenPGP signing key (ASCII-armored, NVIDIA publishes it beside the "
        "repository as <keyid>.pub), a file on the Ansible controller: absolute, or relative to the "
        "inventory directory. Installed as the only key the repository is trusted with (apt "
        "`Signed-By`), never fetched by the role.",
        Update.NODE_SOFTWARE,
    )
    arch: Literal["x86_64", "sbsa"] = spec(
        "The repository's architecture folder: x86_64, or sbsa for Arm servers (Grace: GH200, GB200, GB300).",
        Update.NODE_SOFTWARE,
        default="x86_64",
    )


class DriverSettings(Strict):
    source: Literal["none", "debian", "nvidia"] = spec(
        "Where the driver comes from. `none`: the site or the host image provides it (gpucluster "
        "installs nothing, and the Kubernetes GPU Operator may own it); `debian`: the host suite's "
        "own packages (non-free and contrib: 535 on bookworm, 550 on trixie and forky); `nvidia`: "
        "NVIDIA's CUDA network repository, pinned to `branch`/`version`.",
        Update.NODE_SOFTWARE,
        default="none",
    )
    branch: Annotated[str, Field(pattern=BRANCH_RE)] | None = spec(
        "Driver branch (e.g. 580, 590) the packages are pinned to with source `nvidia`. Default: "
        "the branch of `version`.",
        Update.NODE_SOFTWARE,
        default=None,
    )
    version: Annotated[str, Field(pattern=DRIVER_VERSION_RE)] | None = spec(
        "The exact driver version (e.g. 580.95.05): the one place the node's NVIDIA versions are "
        "pinned; the fabric manager and IMEX get the same version and DCGM the driver's CUDA major. "
        "Required with source `nvidia` unless `branch` is given (then the newest of the branch); "
        "with source `debian`, the suite's version (checked against it when given).",
        Update.NODE_SOFTWARE,
        default=None,
    )
    kernel_modules: Literal["auto", "open", "proprietary"] = spec(
        "Which kernel modules: `open` (required from Hopper on, and NVIDIA's default from 560 on), "
        "`proprietary` (required before Turing: Volta, Pascal). `auto`: what the GPU generation "
        "requires, open from Turing on.",
        Update.NODE_SOFTWARE,
        default="auto",
    )
    persistenced: StrictBool = spec(
        "Install and enable nvidia-persistenced (keeps the driver initialised between jobs).",
        Update.NODE_SOFTWARE,
        default=True,
    )
    repository: NvidiaRepository | None = spec(
        "NVIDIA's CUDA repository; required with source `nvidia`.", Update.NODE_SOFTWARE, default=None
    )


# One NVLink domain of an NVL72 system (GB200 and GB300 NVL72): 18 compute trays of 4 GPUs, 72 GPUs.
NVL72_TRAYS = 18
NVL72_GPUS_PER_TRAY = 4
# GPU types (Gres names) that come only as NVL72 compute trays, whatever the node software says.
NVL72_GPU_MODEL = re.compile(r"^gb[23]00", re.IGNORECASE)


class NodeSoftware(Strict):
    driver: DriverSettings = spec(
        "The GPU driver of this node type.", Update.NODE_SOFTWARE, default_factory=DriverSettings
    )
    generation: Literal["pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell"] | None = spec(
        "GPU architecture; decides the kernel modules (Hopper and newer: open only) and the "
        "oldest driver branch. Default: from gpus.model (a100 -> ampere, h100/h200/gh200 -> "
        "hopper, b200/gb200/gb300 -> blackwell, ...); give it when the model name does not say.",
        Update.NODE_SOFTWARE,
        default=None,
    )
    nvlink: Literal["none", "nvswitch", "nvl72"] = spec(
        "The NVLink system of the node: `nvswitch` (HGX/DGX boards with NVSwitch: "
        "nvidia-fabricmanager, same version as the driver, must run), `nvl72` (GB200/GB300 NVL72 "
        "compute trays: the nvidia-imex service, one IMEX domain per NVLink block of "
        "cluster.fabric.blocks); `none`: PCIe GPUs or NVLink bridges only.",
        Update.NODE_SOFTWARE,
        default="none",
    )
    dcgm: StrictBool | None = spec(
        "Install DCGM (datacenter-gpu-manager-4 for the driver's CUDA major) and run nv-hostengine "
        "(the health check's `dcgmi diag`). Default: on with source `nvidia`; DCGM is not in Debian.",
        Update.NODE_SOFTWARE,
        default=None,
    )
    dcgm_cuda: Annotated[int, Field(ge=11, le=13)] | None = spec(
        "CUDA major of the DCGM package (datacenter-gpu-manager-4-cuda<N>). Default: the driver's; "
        "a node whose driver supports another CUDA major is refused.",
        Update.NODE_SOFTWARE,
        default=None,
    )
    fabric_manager_version: Annotated[str, Field(pattern=DRIVER_VERSION_RE)] | None = spec(
        "The fabric manager's version. Default: the driver's; any other version is refused (the "
        "fabric manager does not start against another driver version).",
        Update.NODE_SOFTWARE,
        default=None,
    )
    container_toolkit: StrictBool = spec(
        "Install the NVIDIA container toolkit (GPU hooks and CDI specs for container runtimes: "
        "Slurm's OCI support, enroot, containerd). From NVIDIA's repository.",
        Update.NODE_SOFTWARE,
        default=False,
    )
    container_toolkit_version: Annotated[str, Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+(-[0-9]+)?$")] | None = (
        spec(
            "Pinned nvidia-container-toolkit version (e.g. 1.18.0-1); default: the repository's newest.",
            Update.NODE_SOFTWARE,
            default=None,
        )
    )

    @model_validator(mode="after")
    def _source_needs(self) -> "NodeSoftware":
        driver = self.driver
        if driver.source == "nvidia":
            if driver.repository is None:
                raise ValueError("driver.source `nvidia` needs driver.repository (its key at least)")
            if driver.version is None and driver.branch is None:
                raise ValueError("driver.source `nvidia` needs driver.version or driver.branch (the pin)")
            if driver.version and driver.branch and driver.version.split(".")[0] != driver.branch:
                raise ValueError(f"driver.version {driver.version} is not of driver.branch {driver.branch}")
        elif driver.repository is not None:
            raise ValueError(f"driver.repository is only read with source `nvidia` (source: {driver.source})")
        if driver.source == "none" and (driver.version or driver.branch):
            raise ValueError("driver.version/branch pin what gpucluster installs: source is `none`")
        return self
