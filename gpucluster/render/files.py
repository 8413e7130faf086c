"""Write a rendered tree atomically: every file goes to a temp file first, then is renamed
into place; files this tool wrote before and no longer generates are removed."""

from __future__ import annotations

import os
import tempfile
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


def write_tree(files: dict[str, str], out_dir: str | Path) -> list[Path]:
    """Write all files under out_dir; returns the paths written (unchanged files are left alone)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    previous: set[str] = set()
    manifest = out / MANIFEST
    if manifest.is_file():
        previous = set(manifest.read_text(encoding="utf-8").split())
    written: list[Path] = []
    for rel, content in files.items():
        target = out / rel
        if target.is_file() and target.read_text(encoding="utf-8") == content:
            continue
        atomic_write(target, content)
        written.append(target)
    for rel in sorted(previous - set(files)):
        (out / rel).unlink(missing_ok=True)
    atomic_write(manifest, "".join(f"{rel}\n" for rel in sorted(files)))
    return written
