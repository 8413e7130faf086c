"""Load the collection's Ansible modules (plugins/modules/) and their module_utils as plain Python
modules."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROLES = Path(__file__).resolve().parents[2] / "roles"
MODULES = ROLES.parent / "plugins" / "modules"
# collections/ansible_collections/gpucluster/cluster links to the clone: the modules import their
# module_utils as Ansible runs them, from ansible_collections.gpucluster.cluster.plugins.module_utils.
COLLECTIONS = ROLES.parent / "collections"
MODULE_UTILS = "ansible_collections.gpucluster.cluster.plugins.module_utils"


def collection_importable() -> None:
    # Last: the ansible package's own collections (site-packages) stay first in ansible_collections.
    if str(COLLECTIONS) not in sys.path:
        sys.path.append(str(COLLECTIONS))


def load_module(name: str) -> ModuleType:
    collection_importable()
    path = MODULES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"gpucluster_module_{name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load_module_utils(name: str) -> ModuleType:
    collection_importable()
    return importlib.import_module(f"{MODULE_UTILS}.{name}")
