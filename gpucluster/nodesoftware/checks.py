"""Checks of the node software: gpucluster.layers.CHECKS runs them after hosts and NVLink blocks
are resolved; they see the cluster only through gpucluster.model.checking.CheckContext."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
        if managed and node_type.gpus is not None and node_type.gpus.autodetect == "nvml":
            ctx.fail(
                ["node_types", type_name, "gpus", "autodetect"],
                f"{packaging.debian_suite} has no slurm-wlm-nvml-plugin for Slurm {ctx.cluster.release.name}: "
                "AutoDetect=nvml would find no GPU; use `nvidia` (Slurm >= 24.11) or device files",
            )
