"""Files the package reads at run time (templates, the programs and playbooks it hands to Ansible),
found through the package itself: the same in a clone, an editable install and an installed wheel.

Each of them lives inside the package directory and is declared as package data in pyproject.toml;
tests/packaging builds the wheel, installs it into a fresh virtualenv and runs the examples from it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

PACKAGE = "gpucluster"


@cache
def package_root() -> Path:
    """The package's directory. pip installs a wheel unpacked, so this is its directory on disk;
    importing importlib.resources to say so would cost a short command ~5% of its time (its
    readers import zipfile). Any other loader (a zip archive) goes through importlib.resources,
    and must give real files: Jinja's loader, ansible-playbook and `bash` need paths."""
    here = Path(__file__).resolve().parent
    if (here / "__init__.py").is_file():
        return here
    from importlib import resources

    root = resources.files(PACKAGE)
    if not isinstance(root, Path):
        raise RuntimeError(f"gpucluster is installed where its files are not files on disk ({root})")
    return root


def data_path(*parts: str) -> Path:
    """A file or directory of package data, e.g. data_path("templates")."""
    return package_root().joinpath(*parts)
