"""`gpucluster trial --json`: what the throwaway slurmctld did with the rendered files."""

from __future__ import annotations

from typing import Any

from gpucluster.model.cluster import Cluster
from gpucluster.trial.slurmctld import TrialResult, expected_blocks, expected_topology

Topology = dict[str, tuple[frozenset[str], frozenset[str]]]


def _switches(topology: Topology) -> dict[str, dict[str, list[str]]]:
    return {
        name: {"switches": sorted(switches), "nodes": sorted(nodes)}
        for name, (switches, nodes) in sorted(topology.items())
    }


def _blocks(blocks: dict[str, frozenset[str]]) -> dict[str, list[str]]:
    return {name: sorted(nodes) for name, nodes in sorted(blocks.items())}


def trial_doc(inventory: str, cluster: Cluster, result: TrialResult) -> dict[str, Any]:
    """ok: slurmctld started, logged no error and shows the inventory's switch tree and blocks."""
    tree, blocks = expected_topology(cluster), expected_blocks(cluster)
    tree_ok, blocks_ok = result.topology == tree, result.blocks == blocks
    return {
        "inventory": inventory,
        "release": cluster.release.name,
        "ok": result.ok and tree_ok and blocks_ok,
        "started": result.started,
        "error_lines": list(result.bad_lines),
        "notes": list(result.notes),
        "topology": {"matches": tree_ok, "seen": _switches(result.topology), "expected": _switches(tree)},
        "blocks": {"matches": blocks_ok, "seen": _blocks(result.blocks), "expected": _blocks(blocks)},
    }
