"""What this gpucluster is and targets: `gpucluster --version` (and with --json the Slurm
releases and the pinned Kubernetes add-ons), read from the tables that decide them."""

from __future__ import annotations

from typing import Any

from gpucluster import __version__


def version_line() -> str:
    return f"gpucluster {__version__}"


def version_doc() -> dict[str, Any]:
    """The version, the Slurm releases (gpucluster.model.releases.RELEASES: which are proven,
    i.e. run here from Debian's packages) and the charts the Kubernetes layer pins by default
    (gpucluster.k8s.model.Versions)."""
    from gpucluster.k8s.model import Versions
    from gpucluster.model.releases import RELEASES

    pins = Versions()
    return {
        "version": __version__,
        "slurm_releases": [{"name": r.name, "proven": r.proven} for r in RELEASES.values()],
        "addons": {
            name: {"chart": pin.chart, "version": pin.version, "repo": pin.repo}
            for name, pin in ((name, getattr(pins, name)) for name in type(pins).model_fields)
        },
    }
