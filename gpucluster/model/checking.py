"""What a check module works with: the inventory, the spec, the cluster being resolved, and a way to
report a problem at a key path. cluster.py's checker provides it; check modules depend on this
interface, never on the checker's class."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gpucluster.inventory import Inventory
    from gpucluster.model.cluster import Cluster
    from gpucluster.model.spec import ClusterSpec


class CheckContext(Protocol):
    inv: Inventory
    spec: ClusterSpec
    cluster: Cluster

    def fail(self, parts: Iterable[str | int], message: str) -> None:
        """A problem at `cluster.<parts>` of the cluster file."""

    def hosts_of(self, name: str, parts: list[str | int]) -> list[str] | None:
        """The hosts of an inventory group or host name, or None (and a problem at `parts`)."""
