"""Facts about NVIDIA's packages the node software model relies on: what each Debian suite carries
(apt-cache madison over main contrib non-free, 2026-11), GPU generations, the CUDA major of each
driver branch, and the names of NVIDIA's repository packages."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DebianDriver:
    """The driver of one Debian suite (non-free, and contrib for the open kernel modules)."""

    suite: str
    version: str
    # nvidia-open-kernel-dkms (contrib) is in the suite (forky: only in sid).
    open_modules: bool
    # NVIDIA's CUDA repository folder for this Debian release (None: NVIDIA has none).
    nvidia_repo: str | None


DEBIAN_DRIVERS = {
    "bookworm": DebianDriver("bookworm", "535.261.03", open_modules=True, nvidia_repo="debian12"),
    "trixie": DebianDriver("trixie", "550.163.01", open_modules=True, nvidia_repo="debian13"),
    "forky": DebianDriver("forky", "550.163.01", open_modules=False, nvidia_repo=None),
}

# Debian's driver userspace that works (and installs) without the kernel module; the Molecule
# scenario installs exactly these in containers of each suite.
DEBIAN_USERSPACE = ("nvidia-smi", "libnvidia-ml1")
DEBIAN_PERSISTENCED = "nvidia-persistenced"
DEBIAN_KERNEL = {
    "open": ("nvidia-open-kernel-dkms", "firmware-nvidia-gsp"),
    "proprietary": ("nvidia-kernel-dkms",),
}

# NVIDIA's CUDA repository (Debian flavour): the driver's userspace, the kernel modules per kind,
# and the version-locked services.
NVIDIA_USERSPACE = ("nvidia-driver-cuda", "libnvidia-ml1")
NVIDIA_PERSISTENCED = "nvidia-persistenced"
NVIDIA_KERNEL = {"open": ("nvidia-kernel-open-dkms",), "proprietary": ("nvidia-kernel-dkms",)}
# The packages NVIDIA versions with the driver: every one is pinned to the driver's version.
NVIDIA_DRIVER_PINNED = (
    "nvidia-*",
    "libnvidia-*",
    "libcuda1",
    "libxnvctrl0",
    "firmware-nvidia-gsp",
    "cuda-drivers*",
)

GENERATIONS = ("pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell")
# The oldest driver branch that runs each generation.
MIN_BRANCH = {"hopper": 525, "blackwell": 570}
# Lower-case prefixes of gpus.model -> generation, longest first.
MODEL_PREFIXES = (
    ("rtx_pro_6000", "blackwell"),
    ("gb300", "blackwell"),
    ("gb200", "blackwell"),
    ("b300", "blackwell"),
    ("b200", "blackwell"),
    ("gh200", "hopper"),
    ("h800", "hopper"),
    ("h200", "hopper"),
    ("h100", "hopper"),
    ("h20", "hopper"),
    ("l40", "ada"),
    ("l4", "ada"),
    ("a100", "ampere"),
    ("a800", "ampere"),
    ("a40", "ampere"),
    ("a30", "ampere"),
    ("a10", "ampere"),
    ("t4", "turing"),
    ("v100", "volta"),
    ("p100", "pascal"),
)


def generation_of(model: str | None) -> str | None:
    if model is None:
        return None
    low = model.lower()
    return next((gen for prefix, gen in MODEL_PREFIXES if low.startswith(prefix)), None)


def cuda_major(branch: int) -> int:
    """The newest CUDA major a driver branch runs (535 and 550 -> 12, 580 on -> 13)."""
    if branch >= 580:
        return 13
    if branch >= 525:
        return 12
    return 11


def open_modules_required(generation: str | None) -> bool:
    return generation in ("hopper", "blackwell")


def open_modules_possible(generation: str | None) -> bool:
    return generation not in ("pascal", "volta")
