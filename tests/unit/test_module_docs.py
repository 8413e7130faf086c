"""What ansible-test's validate-modules checks first, here offline: each module's DOCUMENTATION
says exactly what its argument_spec accepts (names, types, required, defaults, choices, list
elements), and its EXAMPLES parse and call the module by its FQCN with documented options only."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.roles.conftest import MODULES, load_module

NAMES = sorted(p.stem for p in MODULES.glob("*.py"))
KEYS = ("type", "required", "default", "choices", "elements")


class SpecSeen(Exception):
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec


def argument_spec(name: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The argument_spec main() gives AnsibleModule (stopped there: nothing else runs)."""
    module = load_module(name)

    def capture(argument_spec: dict[str, Any], **_options: Any) -> None:
        raise SpecSeen(argument_spec)

    monkeypatch.setattr(module, "AnsibleModule", capture)
    with pytest.raises(SpecSeen) as seen:
        module.main()
    return seen.value.spec


def normal(option: dict[str, Any]) -> dict[str, Any]:
    """An option with Ansible's defaults spelt out (type str, not required, default None)."""
    out = {"type": "str", "required": False, "default": None, "choices": None, "elements": None}
    out.update({key: option[key] for key in KEYS if key in option})
    return out


@pytest.mark.parametrize("name", NAMES)
def test_documentation_matches_the_argument_spec(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module = load_module(name)
    documented = yaml.safe_load(module.DOCUMENTATION)["options"]
    spec = argument_spec(name, monkeypatch)
    assert sorted(documented) == sorted(spec)
    for option, given in spec.items():
        assert normal(documented[option]) == normal(given), option


@pytest.mark.parametrize("name", NAMES)
def test_every_description_is_text(name: str) -> None:
    """A description line with `: ` in it is a YAML mapping, which ansible-doc cannot show (seen:
    `Unable to retrieve documentation ... got '_AnsibleTaggedDict'`)."""
    documented = yaml.safe_load(load_module(name).DOCUMENTATION)
    texts = [documented["short_description"], *documented["description"]]
    texts += [line for option in documented["options"].values() for line in _lines(option["description"])]
    assert [text for text in texts if not isinstance(text, str)] == []


def _lines(description: object) -> list[object]:
    return description if isinstance(description, list) else [description]


@pytest.mark.parametrize("name", NAMES)
def test_examples_use_the_fqcn_and_documented_options(name: str) -> None:
    module = load_module(name)
    documented = set(yaml.safe_load(module.DOCUMENTATION)["options"])
    tasks = yaml.safe_load(module.EXAMPLES)
    calls = [task[f"gpucluster.cluster.{name}"] for task in tasks if f"gpucluster.cluster.{name}" in task]
    assert calls, "no example calls the module by its FQCN"
    for call in calls:
        assert set(call) <= documented
    assert yaml.safe_load(module.RETURN)


def test_every_plugin_has_its_sanity_ignore_line() -> None:
    """ansible-test's validate-modules asks every plugin for a GPLv3 header; the collection is
    Apache-2.0, so each one needs its line in tests/sanity (a module added without it fails the
    online sanity run, which this machine cannot reach)."""
    ignore = (REPO / "tests/sanity/ignore-2.19.txt").read_text(encoding="utf-8")
    listed = {line.split()[0] for line in ignore.splitlines() if line.strip()}
    plugins = {
        str(path.relative_to(REPO))
        for path in [*(REPO / "plugins/modules").glob("*.py"), *(REPO / "plugins/connection").glob("*.py")]
        if path.name != "__init__.py"
    }
    assert plugins <= listed, sorted(plugins - listed)
