"""The one table of Slurm keys (gpucluster/slurm/keys.py, issue 36 item 7): every entry's model
path is a field of the model, and a key the model holds as it is needs nothing but its entry
(and its model field) to be rendered, imported, refused in `extra` and compared, as CompleteWait
shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpucluster.model.spec import ClusterSpec, NodeType, Partition
from gpucluster.slurm import keys
from gpucluster.slurm.view import SiteFiles
from gpucluster.slurm_import.adopt import import_cluster, write_inventory


def _field(model: Any, parts: list[str]) -> bool:
    for part in (p.removesuffix("[]") for p in parts):
        fields = getattr(model, "model_fields", None)
        if fields is None or part not in fields:
            return False
        annotation = fields[part].annotation
        model = next(
            (a for a in getattr(annotation, "__args__", (annotation,)) if hasattr(a, "model_fields")),
            annotation,
        )
    return True


def _entries() -> list[keys.Key]:
    return [key for table in keys.TABLE.values() for key in table if key.model.startswith("cluster.")]


@pytest.mark.parametrize("key", _entries(), ids=repr)
def test_every_model_path_of_the_table_is_a_field(key: keys.Key) -> None:
    path = key.model.split(" (", 1)[0]  # "cluster.nodes (hosts.yml)": the model's part of it
    for prefix, model in ((keys.T + ".", NodeType), (keys.P + ".", Partition), ("cluster.", ClusterSpec)):
        if path.startswith(prefix):
            assert _field(model, path[len(prefix) :].split(".")), path
            return
    pytest.fail(path)  # pragma: no cover


def test_every_key_is_in_the_table_once_per_file() -> None:
    for file, table in keys.TABLE.items():
        spellings = [s.lower() for key in table for s in (key.name, *key.old)]
        assert len(spellings) == len(set(spellings)), file


def test_a_key_added_by_its_entry_is_rendered_imported_and_refused_in_extra(tmp_path: Path) -> None:
    """CompleteWait was added as one entry of the table (and cluster.slurm.timeouts.complete_wait):
    a site's value lands in the model, is rendered in the timers' section, the comparison reads it
    as a number, and `extra` refuses it naming its place."""
    from gpucluster.errors import InventoryError
    from gpucluster.layers import load_cluster
    from gpucluster.rendering import render_files

    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "slurm.conf").write_text(
        "ClusterName=demo\nSlurmctldHost=head\nSlurmUser=slurm\nMailProg=/usr/bin/true\nCompleteWait=032\n"
        "NodeName=n[1-2] CPUs=8\nPartitionName=all Nodes=n[1-2] Default=YES\n"
    )
    result = write_inventory(
        import_cluster(SiteFiles.in_directory(etc), "24.11"), tmp_path / "inv", check=True
    )
    assert result.comparison is not None and result.comparison.same
    assert ("CompleteWait=032", "native", "cluster.slurm.timeouts.complete_wait") in {
        (p.written, p.kind, p.target) for p in result.placements
    }
    cluster = load_cluster(tmp_path / "inv")
    assert cluster.spec.slurm.timeouts.complete_wait == 32
    conf = render_files(cluster, only=["slurm"])["slurm/slurm.conf"]
    assert "# Timers (cluster.slurm.timeouts)\nCompleteWait=32\n" in conf
    cluster_yml = tmp_path / "inv" / "group_vars" / "all" / "cluster.yml"
    cluster_yml.write_text(
        cluster_yml.read_text()
        .replace("    timeouts: {complete_wait: 32}\n", "")
        .replace('    version: "24.11"\n', '    version: "24.11"\n    extra: {CompleteWait: 32}\n')
    )
    with pytest.raises(InventoryError) as caught:
        load_cluster(tmp_path / "inv")
    assert "CompleteWait is cluster.slurm.timeouts.complete_wait: set it there" in str(caught.value)


def test_restart_keys_come_from_the_table() -> None:
    assert keys.needs_restart("SlurmUser") and keys.needs_restart("JobCompType")
    assert not keys.needs_restart("CompleteWait")
