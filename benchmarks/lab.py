"""Lab timings: `lab up` with the image cached, a no-op re-converge, and an uncached image build.

    python benchmarks/lab.py            # all three (tears the lab down at the end)
    python benchmarks/lab.py --no-build # skip the uncached image build (about a minute)

Needs root, podman and the Debian mirror (for the image build). Prints one line per figure.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpucluster.lab import image, lab
from gpucluster.lab.state import LabState


def quiet(message: str) -> None:
    del message


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-build", action="store_true", help="skip the uncached image build")
    args = parser.parse_args()
    if LabState.load() is not None:
        print(
            "a lab is up: run `gpucluster lab down` first (the benchmark starts from nothing)",
            file=sys.stderr,
        )
        return 2
    figures: list[tuple[str, float, str]] = []
    if not args.no_build:
        tag = image.image_tag()
        started = time.monotonic()
        image.build_image(tag, quiet)
        figures.append(("image build, uncached", time.monotonic() - started, tag))
    else:
        image.ensure_image(quiet)
    try:
        started = time.monotonic()
        first = lab.up(progress=quiet)
        figures.append(("lab up, image cached", time.monotonic() - started, f"changed={first.total_changed}"))
        started = time.monotonic()
        again = lab.converge(progress=quiet)
        figures.append(("no-op re-converge", time.monotonic() - started, f"changed={again.total_changed}"))
    finally:
        lab.down(progress=quiet)
    for name, seconds, note in figures:
        print(f"{name:<24} {seconds:7.1f} s   {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
