"""Ansible inventory host patterns such as `gpu[001:128]` or `rack[a:c]-n[1:4]`.

Same rules as Ansible's own expansion (numeric ranges keep the begin width, letters range
over single characters, an optional third field is the step); tests compare against Ansible.
Where Ansible silently expands to nothing (`n[5:1]`) or crashes (`n[a:5]`), this refuses with a
message instead.
"""

from __future__ import annotations

import re
import string

_RANGE = re.compile(r"^(?P<head>[^\[]*)\[(?P<body>[^\]]*)\](?P<tail>.*)$")


class HostPatternError(ValueError):
    """A host pattern that Ansible would refuse."""


def is_pattern(name: str) -> bool:
    # Ansible treats any name with "[" as a range pattern.
    return "[" in name


def expand(name: str) -> list[str]:
    """All host names a pattern stands for, in Ansible's order."""
    if not is_pattern(name):
        return [name]
    match = _RANGE.match(name)
    if not match:
        raise HostPatternError(f"malformed host range {name!r}")
    head, body, tail = match.group("head"), match.group("body"), match.group("tail")
    fields = body.split(":")
    if len(fields) not in (2, 3):
        raise HostPatternError(f"host range {name!r} needs [begin:end] or [begin:end:step]")
    begin, end = fields[0], fields[1]
    step = 1
    if len(fields) == 3:
        if not fields[2].isdigit() or int(fields[2]) < 1:
            raise HostPatternError(f"host range {name!r} has a step that is not a positive number")
        step = int(fields[2])
    if not begin:
        begin = "0"
    if not end:
        raise HostPatternError(f"host range {name!r} has no end")
    items: list[str]
    if begin.isdigit() and end.isdigit():
        width = len(begin) if begin.startswith("0") and len(begin) > 1 else 0
        if width and len(begin) != len(end):
            raise HostPatternError(f"host range {name!r}: zero-padded begin and end must have equal width")
        if int(begin) > int(end):
            raise HostPatternError(f"host range {name!r}: begin is after end")
        items = [str(i).zfill(width) for i in range(int(begin), int(end) + 1, step)]
    elif len(begin) == 1 and len(end) == 1 and begin.isalpha() and end.isalpha():
        letters = string.ascii_letters
        lo, hi = letters.index(begin), letters.index(end)
        if lo > hi:
            raise HostPatternError(f"host range {name!r}: begin is after end")
        items = [letters[i] for i in range(lo, hi + 1, step)]
    else:
        raise HostPatternError(f"host range {name!r}: begin and end must both be numbers or single letters")
    hosts: list[str] = []
    for item in items:
        hosts.extend(expand(head + item + tail))
    return hosts
