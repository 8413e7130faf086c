"""Checks of cluster.slurm.containers: the node types it names exist and own Slurm nodes."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpucluster.model.checking import CheckContext


def check_containers(ctx: CheckContext) -> None:
    settings = ctx.spec.slurm.containers
    if settings is None:
        return
    if not settings.oci and settings.pyxis is None:
        ctx.fail(
            ["slurm", "containers"],
            "turns on neither `oci: true` nor `pyxis`: enable one, or remove the section",
        )
    for index, name in enumerate(settings.node_types):
        if name not in ctx.spec.node_types:
            known = ", ".join(sorted(ctx.spec.node_types))
            ctx.fail(["slurm", "containers", "node_types", index], f"`{name}` is not a node type ({known})")
