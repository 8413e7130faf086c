"""Ansible host patterns expand exactly as Ansible itself expands them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucluster.hostranges import HostPatternError, expand

ansible_inventory = pytest.importorskip("ansible.plugins.inventory")


def ansible_expand(pattern: str) -> list[str]:
    if ansible_inventory.detect_range(pattern):
        return list(ansible_inventory.expand_hostname_range(pattern))
    return [pattern]


@pytest.mark.parametrize(
    "pattern",
    ["gpu[001:128]", "n[1:10]", "rack[a:c]-n[1:4]", "x[01:10:3]", "plain", "db[0:2].example.org", "n[:3]"],
)
def test_known_patterns_match_ansible(pattern: str) -> None:
    assert expand(pattern) == ansible_expand(pattern)


@st.composite
def patterns(draw: st.DrawFn) -> str:
    prefix = draw(st.text(alphabet="abcxyz-", min_size=1, max_size=4))
    begin = draw(st.integers(0, 30))
    end = draw(st.integers(begin, begin + 40))
    padded = draw(st.booleans())
    width = len(str(end)) + (1 if padded else 0)
    b, e = (str(begin).zfill(width), str(end).zfill(width)) if padded else (str(begin), str(end))
    step = draw(st.sampled_from(["", ":2", ":5"]))
    suffix = draw(st.sampled_from(["", "-ib", ".lab"]))
    return f"{prefix}[{b}:{e}{step}]{suffix}"


@settings(max_examples=200, deadline=None)
@given(patterns())
def test_generated_patterns_match_ansible(pattern: str) -> None:
    assert expand(pattern) == ansible_expand(pattern)


@pytest.mark.parametrize("pattern", ["n[01:100]", "n[1]", "n[1:]"])
def test_patterns_ansible_refuses_are_refused(pattern: str) -> None:
    with pytest.raises(ansible_inventory.AnsibleError):
        ansible_expand(pattern)
    with pytest.raises(HostPatternError):
        expand(pattern)


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("n[5:1]", "begin is after end"), ("n[a:5]", "numbers or single letters"), ("n[1:2:0]", "step")],
)
def test_patterns_ansible_mishandles_get_a_clear_error(pattern: str, why: str) -> None:
    # Ansible yields no hosts for n[5:1] and crashes on the others; a typo deserves a message.
    with pytest.raises(HostPatternError, match=why):
        expand(pattern)
