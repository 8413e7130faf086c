"""The slurm.conf keys gpucluster writes itself (gpucluster/slurm/render.py), and where the model
holds each, from the table of keys (gpucluster.slurm.keys). `cluster.slurm.extra` may not set them: a key the model has a place for belongs there
(MODELLED), and a key another setting writes (WRITTEN, when that setting is on) would be a second
line, of which Slurm keeps one, so that the other setting would silently lose. The lines a layer
adds (monitoring's MetricsType, Prolog, Epilog) are the layer's: gpucluster.layers checks those.

tests/unit/test_input_errors.py renders slurm.conf for every example and a maximal inventory and
checks that every key it finds is here, written exactly when `written_keys` says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpucluster.model.spec import ClusterSpec
from gpucluster.slurm import keys

# slurm.conf key -> the model setting that holds it (the import puts a site's value there).
MODELLED: dict[str, str] = keys.modelled(keys.SLURM_CONF)

# Written with one value whatever the inventory: what the roles set up (munge on every host).
# A site's other value cannot be carried.
FIXED: dict[str, str] = {
    key.name: str(key.default) for key in keys.SLURM_CONF_KEYS if key.written_by == keys.CORE
}


@dataclass(frozen=True)
class Written:
    setting: str  # what writes it, for the message
    when: Callable[[ClusterSpec], bool]


# Keys other settings write (no place of their own in the model), and when.
WRITTEN: dict[str, Written] = {
    key.name: Written(key.written_by, key.when)
    for key in keys.SLURM_CONF_KEYS
    if key.written_by and key.when is not None
}


def modelled(key: str) -> tuple[str, str] | None:
    """(Slurm's spelling, model setting) of a key the model has a place for, in any spelling."""
    found = keys.entry(keys.SLURM_CONF, key)
    if found is None or not found.model or found.name.lower() != key.lower():
        return None
    return found.name, found.model


def written_keys(spec: ClusterSpec) -> dict[str, str]:
    """Key -> the setting writing it, for the keys without a place of their own in the model that
    slurm.conf of this spec gets from gpucluster."""
    return {key: w.setting for key, w in WRITTEN.items() if w.when(spec)}


def _fields(file: str, prefix: str) -> dict[str, str]:
    """Option (and its older spellings) -> the setting of the line's model holding it."""
    out: dict[str, str] = {}
    for key in keys.TABLE[file]:
        if key.model:
            home = key.model[len(prefix) :] if key.model.startswith(prefix) else key.model
            for spelling in (key.name, *key.old):
                out[spelling] = home
    return out


# NodeName options -> the setting holding them (node type, its cluster.nodes entry, hosts.yml);
# the others of the release go to the node type's `extra`.
NODE_MODELLED: dict[str, str] = _fields(keys.NODE, keys.T + ".")
# Options naming one value per host that the model does not hold.
NODE_PER_HOST = ("BcastAddr",)

# PartitionName options -> the partition setting holding them; the others of the release go to
# the partition's `extra`.
PARTITION_MODELLED: dict[str, str] = _fields(keys.PARTITION, keys.P + ".")

# cgroup.conf keys -> cluster.slurm.cgroup settings; the others of the release go to its `extra`.
CGROUP_MODELLED: dict[str, str] = _fields(keys.CGROUP, keys.S + ".cgroup.")


def option_problem(
    key: str, table: dict[str, str], known: frozenset[str], what: str, release: str
) -> str | None:
    """Why `key` may not be in the `extra` of a node type, partition or cgroup.conf, if it may not."""
    lower = key.lower()
    typed = next((field for name, field in table.items() if name.lower() == lower), None)
    if typed is not None:
        return f"{key} is `{typed}` here: set it there"
    spelt = next((name for name in known if name.lower() == lower), None)
    if spelt is None:
        return f"`{key}` is not an option of {what} in Slurm {release}"
    if spelt != key:
        return f"Slurm spells it `{spelt}`"
    return None
