"""GPU machine types the stacks know, with the GPU facts the guardrails compare to the inventory.

Figures are from the clouds' public instance-type documentation. A GPU node type whose machine type
is not listed here is refused: the guardrail could not prove its GPU count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuMachine:
    gpu_model: str  # as Slurm names it in the inventory (gpus.model)
    gpus: int
    memory_gb: int  # per GPU
    accelerator: str | None = None  # GCP guest accelerator type


AWS: dict[str, GpuMachine] = {
    "p4d.24xlarge": GpuMachine("a100", 8, 40),
    "p4de.24xlarge": GpuMachine("a100", 8, 80),
    "p5.48xlarge": GpuMachine("h100", 8, 80),
    "p5e.48xlarge": GpuMachine("h200", 8, 141),
    "p5en.48xlarge": GpuMachine("h200", 8, 141),
}

GCP: dict[str, GpuMachine] = {
    "a2-highgpu-8g": GpuMachine("a100", 8, 40, "nvidia-tesla-a100"),
    "a2-ultragpu-8g": GpuMachine("a100", 8, 80, "nvidia-a100-80gb"),
    "a3-highgpu-8g": GpuMachine("h100", 8, 80, "nvidia-h100-80gb"),
    "a3-megagpu-8g": GpuMachine("h100", 8, 80, "nvidia-h100-mega-80gb"),
    "a3-ultragpu-8g": GpuMachine("h200", 8, 141, "nvidia-h200-141gb"),
    "a4-highgpu-8g": GpuMachine("b200", 8, 180, "nvidia-b200"),
}

AZURE: dict[str, GpuMachine] = {
    "Standard_ND96asr_v4": GpuMachine("a100", 8, 40),
    "Standard_ND96amsr_A100_v4": GpuMachine("a100", 8, 80),
    "Standard_ND96isr_H100_v5": GpuMachine("h100", 8, 80),
    "Standard_ND96isr_H200_v5": GpuMachine("h200", 8, 141),
}

# Nebius machine types are `<platform>/<preset>`; the preset names the GPU count (`8gpu-128vcpu-1600gb`).
NEBIUS_PLATFORMS: dict[str, tuple[str, int]] = {
    "gpu-h100-sxm": ("h100", 80),
    "gpu-h200-sxm": ("h200", 141),
    "gpu-b200-sxm": ("b200", 180),
}
NEBIUS_PRESET_RE = re.compile(r"^(?P<gpus>\d+)gpu-\d+vcpu-\d+gb$")
NEBIUS_CPU_PRESET_RE = re.compile(r"^\d+vcpu-\d+gb$")

CATALOGS = {"aws": AWS, "gcp": GCP, "azure": AZURE}


def split_nebius(machine: str) -> tuple[str, str] | None:
    """`gpu-h100-sxm/8gpu-128vcpu-1600gb` -> (platform, preset), or None if not of that shape."""
    platform, sep, preset = machine.partition("/")
    return (platform, preset) if sep and platform and preset else None


def gpu_machine(provider: str, machine: str) -> GpuMachine | None:
    """GPU facts of a machine type, or None when the type is not a known GPU machine."""
    if provider == "nebius":
        parts = split_nebius(machine)
        if parts is None or parts[0] not in NEBIUS_PLATFORMS:
            return None
        match = NEBIUS_PRESET_RE.match(parts[1])
        if match is None:
            return None
        model, memory = NEBIUS_PLATFORMS[parts[0]]
        return GpuMachine(model, int(match["gpus"]), memory)
    return CATALOGS[provider].get(machine)


def known_gpu_machines(provider: str) -> list[str]:
    if provider == "nebius":
        return [f"{p}/8gpu-128vcpu-1600gb" for p in NEBIUS_PLATFORMS]
    return sorted(CATALOGS[provider])
