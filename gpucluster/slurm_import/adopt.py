"""`gpucluster import` end to end: read a cluster's Slurm files, make the inventory, prove it
valid (and, with `check`, that it renders the same cluster), write it without half-written files.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster.checks.storage import SYSTEM_DIRS
from gpucluster.errors import InventoryError, Problem
from gpucluster.model.releases import RELEASES, SlurmVersion, known_text
from gpucluster.model.spec import SlurmSettings
from gpucluster.slurm.sharing import MPS_PROGRAM
from gpucluster.slurm.view import SiteFiles, View, build_view
from gpucluster.slurm_import.compactyaml import content_lines, dump
from gpucluster.slurm_import.compare import Comparison, compare
from gpucluster.slurm_import.importer import KINDS, NATIVE, REFUSED, GlobalImport, Placement
from gpucluster.slurm_import.nodes import NodeImport

CLUSTER_FILE = Path("group_vars") / "all" / "cluster.yml"
HOSTS_FILE = Path("hosts.yml")


@dataclass
class ImportResult:
    version: str
    files: list[str]
    hosts_yml: str
    cluster_yml: str
    placements: list[Placement]
    view: View
    original_lines: int  # non-blank, non-comment lines of slurm.conf (and its includes)
    comparison: Comparison | None = None
    adjusted: set[str] = field(default_factory=set)  # keys the import changed on purpose
    written_to: Path | None = None
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def inventory_lines(self) -> int:
        return content_lines(self.hosts_yml) + content_lines(self.cluster_yml)


def target_version(text: str) -> SlurmVersion:
    try:
        version = SlurmVersion.parse(text)
    except ValueError as exc:
        raise InventoryError([Problem("--slurm-version", "", str(exc))]) from None
    if version.release not in RELEASES:
        raise InventoryError(
            [
                Problem(
                    "--slurm-version",
                    "",
                    f"Slurm {version.release} is not a release gpucluster knows ({known_text()})",
                )
            ]
        )
    return version


def _slurm_order(slurm: dict[str, Any], version: str) -> dict[str, Any]:
    """cluster.slurm in the model's order (version and controllers first)."""
    ordered: dict[str, Any] = {"version": version}
    for name in SlurmSettings.model_fields:
        if name in slurm and name != "version":
            value = slurm[name]
            model = SlurmSettings.model_fields[name].annotation
            ordered[name] = _field_order(value, model)
    return ordered


def _field_order(value: Any, annotation: Any) -> Any:
    if not isinstance(value, dict):
        return value
    for candidate in getattr(annotation, "__args__", (annotation,)):
        fields = getattr(candidate, "model_fields", None)
        if fields is not None:
            return {name: value[name] for name in fields if name in value} | {
                k: v for k, v in value.items() if k not in fields
            }
    return value


def import_cluster(files: SiteFiles, version_text: str, shown: dict[Path, str] | None = None) -> ImportResult:
    """The inventory of a cluster's files; InventoryError listing every problem (unknown input,
    refused settings) when there is one."""
    version = target_version(version_text)
    release = RELEASES[version.release]
    view = build_view(files, release, shown)
    globals_ = GlobalImport(view).run()
    nodes = NodeImport(view, globals_)
    nodes.run()
    if not nodes.refused_nodes:
        nodes.make_partitions()
        nodes.make_fabric()
        nodes.power_exclusions()
    for disposition in view.dispositions:
        if disposition.kind == REFUSED:
            where = disposition.where
            globals_.problems.append(
                Problem(
                    where.file if where else "",
                    disposition.written.split("=")[0],
                    f"refused: {disposition.reason}",
                    where.line if where else None,
                )
            )
    if globals_.name is None and not globals_.problems:
        globals_.problems.append(
            Problem(view.files[0] if view.files else "", "ClusterName", "slurm.conf names no ClusterName")
        )
    if globals_.problems:
        raise InventoryError(globals_.problems)
    slurm = dict(globals_.slurm)
    accounting = slurm.get("accounting")
    has_gpus = any("gpus" in t for t in nodes.node_types.values())
    # With shared GPUs gpucluster also accounts their units (gres/shard, gres/mps): a site that
    # accounts whole GPUs only keeps its list.
    sharing = any((t.get("gpus") or {}).get("sharing") for t in nodes.node_types.values())
    if (
        accounting is not None
        and not sharing
        and accounting.get("tres") == (["gres/gpu"] if has_gpus else [])
    ):
        del accounting["tres"]  # what gpucluster writes anyway
    if sharing and MPS_PROGRAM not in _prolog_programs(view):
        # MPS without gpucluster-mps: the site's own hooks (or none) start the daemons, as before.
        for node_type in nodes.node_types.values():
            shared = (node_type.get("gpus") or {}).get("sharing")
            if shared and "mps" in shared:
                shared["mps_daemon"] = "site"
    if globals_.extra:
        slurm["extra"] = dict(sorted(globals_.extra.items()))
    cluster: dict[str, Any] = {"name": globals_.name, "slurm": _slurm_order(slurm, str(version))}
    cluster["node_types"] = nodes.node_types
    cluster["nodes"] = nodes.nodes
    if nodes.fabric:
        cluster["fabric"] = nodes.fabric
    cluster["partitions"] = nodes.partitions
    state_storage = _state_storage(slurm)
    if state_storage is not None:
        cluster["storage"] = [state_storage]
        globals_.placements.append(_state_placement(view, slurm["state_save_location"], state_storage))
    source = ", ".join(view.files)
    header = f"Imported by `gpucluster import` from {source} (target Slurm {version})."
    cluster_yml = dump(
        {"cluster": cluster},
        flow_depth=3,
        header=header,
        blocks=(("cluster", "fabric", "tree"), ("cluster", "fabric", "blocks")),
    )
    hosts_yml = dump(nodes.hosts_yml(), flow_depth=3, header=header)
    placements = [
        *(_disposition(d) for d in view.dispositions if d.kind != REFUSED),
        *globals_.placements,
    ]
    # A DEFAULT line's options are placed with every line that takes them: once is enough.
    placements = list({(p.where, p.written, p.kind, p.target): p for p in placements if p.written}.values())
    placements.sort(key=lambda p: _position(p.where, view.files))
    result = ImportResult(
        version=str(version),
        files=list(view.files),
        hosts_yml=hosts_yml,
        cluster_yml=cluster_yml,
        placements=placements,
        view=view,
        original_lines=_conf_lines(files, shown),
        adjusted=set(globals_.adjusted),
    )
    result.counts = dict(Counter(p.kind for p in result.placements))
    for kind in KINDS:
        result.counts.setdefault(kind, 0)
    return result


def _state_storage(slurm: dict[str, Any]) -> dict[str, Any] | None:
    """With a backup controller, the filesystem that holds StateSaveLocation for every controller:
    slurm.conf does not say where it is mounted, so the import assumes the site mounts the state
    path's first directory on each controller (the shared_storage role checks that it is a mount
    point there and never mounts it)."""
    controllers = slurm.get("controller", [])
    state = slurm.get("state_save_location")
    if len(controllers) < 2 or not state:
        return None
    mount = "/" + str(state).strip("/").split("/")[0]
    if mount in SYSTEM_DIRS:  # /var/lib/slurm: the state path itself, not the system's /var
        mount = str(state).rstrip("/")
    return {"name": "slurm-state", "mount": mount, "site_managed": True, "hosts": list(controllers)}


def _state_placement(view: View, state: str, storage: dict[str, Any]) -> Placement:
    found = view.settings.get("StateSaveLocation")
    setting = found[-1] if found else None
    where = str(setting.where) if setting is not None and setting.where is not None else ""
    written = f"StateSaveLocation={state}" + ("" if setting is not None else " (left out)")
    hosts = ", ".join(storage["hosts"])
    return Placement(
        where,
        written,
        NATIVE,
        "cluster.storage.slurm-state",
        f"{len(storage['hosts'])} controllers share it: assumed mounted by the site at {storage['mount']} on "
        f"{hosts} (site_managed); correct the mount point if it is another",
    )


def _position(where: str, files: list[str]) -> tuple[int, int]:
    """Where a placement's setting is: its file's place among those read, then its line (the keys
    the files leave out last)."""
    name, _, line = where.rpartition(":")
    if not name or name not in files:
        return (len(files), 0)
    return (files.index(name), int(line) if line.isdigit() else 0)


def _disposition(d: Any) -> Placement:
    return Placement(str(d.where) if d.where else "", d.written, d.kind, d.becomes, d.reason)


def _conf_lines(files: SiteFiles, shown: dict[Path, str] | None) -> int:
    """Lines of slurm.conf that say something, its includes counted (what the inventory replaces)."""
    from gpucluster.slurm.parse import SLURM_RECORDS, Reader

    total = 0
    reader = Reader(SLURM_RECORDS, [], dict(shown or {}))
    conf = reader.read(files.slurm_conf)
    paths = {v: k for k, v in reader.display.items()}
    for name in conf.files:
        path = paths.get(name, Path(name))
        text = path.read_text(encoding="utf-8", errors="replace")
        total += sum(1 for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    return total


def write_inventory(result: ImportResult, out: Path, check: bool = False) -> ImportResult:
    """Write hosts.yml and group_vars/all/cluster.yml into `out` (made; must be empty) after the
    inventory loaded as any other; with `check`, also compare what it renders with the site's files."""
    from gpucluster.layers import load_cluster

    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InventoryError(
            [Problem(str(out), "", "the output directory exists and is not empty: give a new one")]
        )
    parent = out.parent if str(out.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    try:
        inventory = staging / out.name
        (inventory / CLUSTER_FILE).parent.mkdir(parents=True)
        (inventory / HOSTS_FILE).write_text(result.hosts_yml, encoding="utf-8")
        (inventory / CLUSTER_FILE).write_text(result.cluster_yml, encoding="utf-8")
        try:
            cluster = load_cluster(inventory)
        except InventoryError as exc:
            # Said of the site's files (nothing was written): the setting that led there.
            raise InventoryError([_at_input(result, p) for p in exc.problems]) from None
        if check:
            result.comparison = check_render(result, cluster, staging)
        if out.exists():
            out.rmdir()
        inventory.rename(out)
        result.written_to = out
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return result


def _at_input(result: ImportResult, problem: Problem) -> Problem:
    """A problem of the inventory the import made, said at the site's setting it came from (the
    placement whose model setting holds the problem's key path), else at slurm.conf."""
    path = re.sub(r"\[[^\]]*\]", "[]", problem.path)
    best: Placement | None = None
    for placement in result.placements:
        target = re.sub(r"\[[^\]]*\]", "[]", placement.target.split(" ", 1)[0])
        matches = placement.where and target and (path.startswith(target) or target.startswith(path))
        if matches and (best is None or len(target) > len(best.target)):
            best = placement
    inventory = f"the inventory's {problem.path}" if problem.path else "the inventory"
    if best is None:
        return Problem(result.files[0] if result.files else "", "", f"{problem.message} ({inventory})")
    file, _, line = best.where.rpartition(":")
    return Problem(
        file,
        best.written.split("=", 1)[0],
        f"{problem.message} ({inventory})",
        int(line) if line.isdigit() else None,
    )


def check_render(result: ImportResult, cluster: Any, scratch: Path) -> Comparison:
    """The site's files against what the inventory renders, as the target release reads both."""
    from gpucluster.rendering import render_files

    rendered = scratch / "rendered"
    for rel, text in render_files(cluster, only=["slurm"]).items():
        path = rendered / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    view = build_view(SiteFiles.in_directory(rendered / "slurm"), result.view.release)
    return compare(result.view, view, adjusted=result.adjusted)


def _prolog_programs(view: View) -> set[str]:
    """The programs slurm.conf runs as Prolog, Epilog and TaskProlog."""
    return {s.value for key in ("Prolog", "Epilog", "TaskProlog") for s in view.settings.get(key, [])}
