"""How the suite is split over its pytest-xdist workers (tests/conftest.py serial_scope)."""

from __future__ import annotations

from tests.conftest import serial_scope


def test_tests_of_one_shared_thing_share_one_unit() -> None:
    lab = {serial_scope(n) for n in ("tests/lab/test_verify.py::test_a", "tests/lab/test_cli.py::test_b[x]")}
    molecule = {
        serial_scope(n) for n in ("tests/roles/test_molecule.py::t[munge]", "tests/roles/test_x.py::t")
    }
    k8s_molecule = {
        serial_scope(f"tests/k8s/test_molecule.py::test_render_only_scenario[{role}]")
        for role in ("kueue", "kai")
    }
    assert len(lab) == len(molecule) == len(k8s_molecule) == 1
    assert len(lab | molecule | k8s_molecule) == 3


def test_other_tests_are_units_of_their_own() -> None:
    ids = [
        "tests/k8s/test_values.py::test_a",
        "tests/k8s/test_values.py::test_b",
        "tests/unit/test_plan.py::t",
    ]
    assert [serial_scope(n) for n in ids] == ids
