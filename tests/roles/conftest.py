"""Load the collection's Ansible modules (plugins/modules/) as plain Python modules."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROLES = Path(__file__).resolve().parents[2] / "roles"
MODULES = ROLES.parent / "plugins" / "modules"


def load_module(name: str) -> ModuleType:
    path = MODULES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"gpucluster_module_{name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
