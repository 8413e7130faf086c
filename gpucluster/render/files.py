"""Write a rendered tree atomically: every file goes to a temp file first, then is renamed
into place; files this tool wrote before and no longer generates are removed."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

MANIFEST = ".gpucluster-files"


def atomic_write(path: Path, content: str) -> None:
    """Write content to a temp file beside path, then rename it into place (never half-written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(content)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class TreeChanges:
    written: list[Path]  # files whose content changed (or that are new)
    removed: list[Path]  # files rendered before that are no longer generated


def part_of(rel: str) -> str:
    """The output folder (one per renderer: slurm, hosts, kubernetes, helm) a rendered path is in."""
    return rel.split("/", 1)[0]


def sync_tree(
    files: dict[str, str], out_dir: str | Path, parts: Collection[str] | None = None
) -> TreeChanges:
    """Write all files under out_dir, and remove the files rendered there before that are no longer
    generated. With `parts` (a partial render) only those folders are rendered: files of the other
    folders are neither written nor removed, and stay in the manifest."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    previous: set[str] = set()
    manifest = out / MANIFEST
    if manifest.is_file():
        previous = set(manifest.read_text(encoding="utf-8").split())
    ours = previous if parts is None else {rel for rel in previous if part_of(rel) in parts}
    written: list[Path] = []
    for rel, content in files.items():
        target = out / rel
        if target.is_file() and target.read_text(encoding="utf-8") == content:
            continue
        atomic_write(target, content)
        written.append(target)
    removed = []
    for rel in sorted(ours - set(files)):
        (out / rel).unlink(missing_ok=True)
        removed.append(out / rel)
    kept = previous - ours
    atomic_write(manifest, "".join(f"{rel}\n" for rel in sorted(kept | set(files))))
    return TreeChanges(written, removed)


def write_tree(files: dict[str, str], out_dir: str | Path) -> list[Path]:
    """Write all files under out_dir; returns the paths written (unchanged files are left alone)."""
    return sync_tree(files, out_dir).written
