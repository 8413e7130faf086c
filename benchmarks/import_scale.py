"""`gpucluster import` of a generated site against rendering the same site, in one run.

The site is render_scale.py's cluster (8 GPUs per node, 32 nodes per leaf switch, 64 leaves per
spine under one core): its slurm.conf, gres.conf and topology.conf, as gpucluster renders them,
are written to a directory and imported from there. Prints, per size, the best of 3 in-process
seconds of the render (validate + render the Slurm files, as render_scale.py measures it) and of
the import (read the files, make the inventory, write it and load it back as any inventory), and
their ratio; issue 36 asks for at most 1.5x at 16,384 nodes (issue 29 asked 3x).

    python benchmarks/import_scale.py [--sizes 16384] [--check]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from gpucluster.layers import load_cluster
from gpucluster.rendering import render_files
from gpucluster.slurm.view import SiteFiles
from gpucluster.slurm_import.adopt import import_cluster
from gpucluster.slurm_import.adopt import write_inventory as write_imported

# `python benchmarks/import_scale.py` has benchmarks/ first on its path.
from render_scale import write_inventory  # isort: skip

LIMIT = 1.5


def render_seconds(directory: Path) -> tuple[float, dict[str, str]]:
    start = time.perf_counter()
    files = render_files(load_cluster(directory), only=["slurm"])
    return time.perf_counter() - start, files


def import_seconds(site: Path, out: Path, version: str) -> float:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    write_imported(import_cluster(SiteFiles.in_directory(site), version), out)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[16384])
    parser.add_argument(
        "--check", action="store_true", help=f"exit 1 when an import takes over {LIMIT}x the render"
    )
    args = parser.parse_args()
    print(
        f"{'nodes':>7} {'render s':>9} {'import s':>9} {'ratio':>6} {'slurm.conf lines':>17} {'inventory lines':>16}"
    )
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for size in args.sizes:
            inventory = write_inventory(root, size)
            runs = [render_seconds(inventory) for _ in range(3)]
            rendered = min(seconds for seconds, _ in runs)
            site = root / f"site{size}"
            for rel, text in runs[0][1].items():
                if rel.startswith("slurm/") and rel != "slurm/accounts.yaml":
                    (site / rel).parent.mkdir(parents=True, exist_ok=True)
                    (site / rel).write_text(text)
            version = load_cluster(inventory).spec.slurm.version
            imported = min(
                import_seconds(site / "slurm", root / f"imported{size}", version) for _ in range(3)
            )
            result = import_cluster(SiteFiles.in_directory(site / "slurm"), version)
            ratio = imported / rendered
            worst = max(worst, ratio)
            print(
                f"{size:>7} {rendered:>9.3f} {imported:>9.3f} {ratio:>5.2f}x "
                f"{result.original_lines:>17} {result.inventory_lines:>16}"
            )
    if args.check and worst > LIMIT:
        print(f"import took {worst:.2f}x the render (limit {LIMIT}x)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
