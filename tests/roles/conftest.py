"""Load the roles' Ansible modules (role-level library/ folders) as plain Python modules."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROLES = Path(__file__).resolve().parents[2] / "roles"


def load_module(role: str, name: str) -> ModuleType:
    path = ROLES / role / "library" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"role_{role}_{name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
