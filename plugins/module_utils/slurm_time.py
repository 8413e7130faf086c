"""Slurm's times as its commands print them (MaxTime, `squeue %L`, `sinfo %l`), in seconds: shared by
the modules that wait for jobs (slurm_partitions_change, slurm_leaving_nodes)."""

from __future__ import annotations

import re

# slurmctld's time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS; UNLIMITED,
# INFINITE (`infinite` in sinfo): none.
TIME_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def seconds(value: str) -> int | None:
    """A Slurm time in seconds; None for UNLIMITED, INFINITE or anything else."""
    match = TIME_RE.match(value.strip())
    if not match:
        return None
    days, first, second, third = match.groups()
    if days is None and second is None:  # plain minutes
        return int(first) * 60
    if days is not None and second is None:  # D-HH
        return int(days) * 86400 + int(first) * 3600
    if third is None and days is None:  # MM:SS
        return int(first) * 60 + int(second)
    if third is None:  # D-HH:MM
        return int(days) * 86400 + int(first) * 3600 + int(second) * 60
    return int(days or 0) * 86400 + int(first) * 3600 + int(second) * 60 + int(third)
