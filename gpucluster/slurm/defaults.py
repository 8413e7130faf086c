"""What Slurm assumes for a key a file leaves out, and how each key's values compare, as the
table of keys (gpucluster.slurm.keys) says.

Defaults are those of src/common/read_config.h (DEFAULT_*) and slurm.conf(5) at each release (the
two changed in 23.11: SelectType select/linear -> select/cons_tres, PriorityType priority/basic ->
priority/multifactor, TreeWidth 50 -> 16, and the `none` plugins became no plugin at all). Only
keys whose default is certain are in the table with one: for any other, a file that leaves it out
and one that sets it differ.
"""

from __future__ import annotations

import re

from gpucluster.model.releases import Release
from gpucluster.slurm import keys

# What each kind of key reads, from the table of keys (gpucluster.slurm.keys).
_GLOBAL = keys.defaults(keys.SLURM_CONF)
# Keys whose value is a comma-separated list that Slurm reads as a set (order and case aside).
SET_KEYS = keys.of_kind(keys.SLURM_CONF, keys.SET, keys.PLUGINS)
# Keys naming a plugin `<type>/<name>`: Slurm accepts the name without its type.
PLUGIN_TYPES = {key.name.lower(): key.plugin for key in keys.SLURM_CONF_KEYS if key.plugin}
# Keys whose value is a file: /var/run is /run on every system gpucluster targets.
PATH_KEYS = keys.of_kind(keys.SLURM_CONF, keys.PATH)
# Time values (minutes, [days-]hours:minutes:seconds, UNLIMITED) compared as minutes.
TIME_KEYS = keys.of_kind(keys.SLURM_CONF, keys.TIME)
# Words Slurm reads in any case; yes/no values; debug levels.
UPPER_KEYS = keys.of_kind(keys.SLURM_CONF, keys.UPPER)
FLAG_KEYS = keys.of_kind(keys.SLURM_CONF, keys.FLAG)
LEVEL_KEYS = keys.of_kind(keys.SLURM_CONF, keys.LEVEL)

# Partition options: Slurm's value when a line leaves the option out.
PARTITION_DEFAULTS = keys.defaults(keys.PARTITION)
PARTITION_SET_KEYS = keys.of_kind(keys.PARTITION, keys.SET)
PARTITION_TIME_KEYS = keys.of_kind(keys.PARTITION, keys.TIME)

# Node options: Slurm's value when a line leaves the option out (the CPU layout is worked out
# from what is given: gpucluster.slurm_import.compare.normal_node).
NODE_DEFAULTS = {
    key: value
    for key, value in keys.defaults(keys.NODE).items()
    if key not in ("corespersocket", "threadspercore")
}

# cgroup.conf keys -> Slurm's value when left out (cgroup.conf(5)).
CGROUP_DEFAULTS = keys.defaults(keys.CGROUP)


def global_default(key: str, release: Release) -> str | None:
    """Slurm's value of a slurm.conf key the file leaves out, at the target release."""
    found = keys.entry(keys.SLURM_CONF, key)
    return found.default_at(release) if found is not None and found.name.lower() == key.lower() else None


TIME_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def minutes(text: str) -> str:
    """A Slurm time as minutes (`7-0` -> 10080, `1:30:00` -> 90); UNLIMITED and INFINITE alike.
    Slurm reads `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`."""
    value = text.strip().upper()
    if value in ("UNLIMITED", "INFINITE", "-1"):
        return "UNLIMITED"
    match = TIME_RE.match(value)
    if match is None:
        return value
    days, first, second, third = match.groups()
    if days is not None:
        hours, mins, secs = int(first), int(second or 0), int(third or 0)
        return str(int(days) * 1440 + hours * 60 + mins + (secs + 59) // 60)
    if third is not None:
        return str(int(first) * 60 + int(second) + (int(third) + 59) // 60)
    if second is not None:
        return str(int(first) + (int(second) + 59) // 60)
    return str(int(first))
