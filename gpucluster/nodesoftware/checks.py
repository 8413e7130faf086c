"""Checks of the node software: gpucluster.layers.CHECKS runs them after hosts and NVLink blocks
are resolved; they see the cluster only through gpucluster.model.checking.CheckContext."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucluster.model.sharing import effective_autodetect
from gpucluster.nodesoftware.stack import resolve_stacks

if TYPE_CHECKING:
    from gpucluster.model.checking import CheckContext


def check_node_software(ctx: CheckContext) -> None:
    for parts, message in resolve_stacks(ctx.cluster).problems:
        ctx.fail(parts, message)
    packaging = ctx.cluster.release.packaging
    if packaging.debian_suite is None or packaging.nvml_plugin:
        return
    for type_name, node_type in ctx.spec.node_types.items():
        managed = node_type.software is not None and node_type.software.driver.source != "none"
        gpus = node_type.gpus
        if managed and gpus is not None and effective_autodetect(gpus.autodetect, gpus.sharing) == "nvml":
            mig = gpus.sharing is not None and gpus.sharing.mig is not None
            ctx.fail(
                ["node_types", type_name, "gpus", "sharing", "mig"]
                if mig
                else ["node_types", type_name, "gpus", "autodetect"],
                f"{packaging.debian_suite} has no slurm-wlm-nvml-plugin for Slurm {ctx.cluster.release.name}: "
                + (
                    "slurmd finds MIG instances through NVML only: give cluster.slurm.packages.repository a "
                    "Slurm with the gpu/nvml plugin, or leave this node type's software to the site"
                    if mig
                    else "AutoDetect=nvml would find no GPU; use `nvidia` (Slurm >= 24.11) or device files"
                ),
            )
