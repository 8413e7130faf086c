"""Slurm hostlist expressions (`gpu[001-128,130]`), via python-hostlist."""

from __future__ import annotations

from collections.abc import Iterable

import hostlist


def compress(hosts: Iterable[str]) -> str:
    """Shortest-form Slurm hostlist of the given names (order-independent, deterministic)."""
    names = sorted(set(hosts))
    return str(hostlist.collect_hostlist(names)) if names else ""


def expand(expression: str) -> list[str]:
    """Every name a Slurm hostlist expression stands for."""
    return list(hostlist.expand_hostlist(expression))
