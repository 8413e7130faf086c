"""`gpucluster trial --json`: what the throwaway slurmctld did with the rendered files."""

from __future__ import annotations

from typing import Any

from gpucluster.trial.slurmctld import TrialResult

Topology = dict[str, tuple[frozenset[str], frozenset[str]]]


def _switches(topology: Topology) -> dict[str, dict[str, list[str]]]:
    return {
        name: {"switches": sorted(switches), "nodes": sorted(nodes)}
        for name, (switches, nodes) in sorted(topology.items())
    }


def trial_doc(inventory: str, result: TrialResult, expected: Topology) -> dict[str, Any]:
    """ok: slurmctld started, logged no error and shows the inventory's switch tree."""
    matches = result.topology == expected
    return {
        "inventory": inventory,
        "ok": result.ok and matches,
        "started": result.started,
        "error_lines": list(result.bad_lines),
        "notes": list(result.notes),
        "topology": {"matches": matches, "seen": _switches(result.topology), "expected": _switches(expected)},
    }
