"""Ansible inventory host patterns such as `gpu[001:128]` or `rack[a:c]-n[1:4]`.

Same rules as Ansible's own expansion (numeric ranges keep the begin width, letters range
over single characters, an optional third field is the step); tests compare against Ansible.
Where Ansible silently expands to nothing (`n[5:1]`) or crashes (`n[a:5]`), this refuses with a
message instead.
"""

from __future__ import annotations

import itertools
import math
import re
import string
from collections.abc import Callable, Iterable

_RANGE = re.compile(r"^(?P<head>[^\[]*)\[(?P<body>[^\]]*)\](?P<tail>.*)$")
_NEXT = re.compile(r"(?P<head>[^\[]*)\[(?P<body>[^\]]*)\]")  # the next range of a tail

# Most host names a pattern, and a whole inventory, may stand for: 16 times the largest
# inventory benchmarked (16,384 nodes) and well above any GPU cluster built so far. Ansible
# expands whatever it is given; `gpu[1:99999999]` took a minute and gigabytes before this.
# The count is known before anything is expanded.
MAX_HOSTS = 262_144


class HostPatternError(ValueError):
    """A host pattern that Ansible would refuse."""


def is_pattern(name: str) -> bool:
    # Ansible treats any name with "[" as a range pattern.
    return "[" in name


def _number(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:  # "²" is a digit to str.isdigit(), and int() refuses over 4,300 digits
        raise HostPatternError(f"host range {name!r}: {text[:20]!r} is not a usable number") from None


def _items(name: str, body: str) -> tuple[int, Callable[[], Iterable[str]]]:
    """How many items one `[begin:end(:step)]` stands for, and a way to list them (not yet)."""
    fields = body.split(":")
    if len(fields) not in (2, 3):
        raise HostPatternError(f"host range {name!r} needs [begin:end] or [begin:end:step]")
    begin, end = fields[0], fields[1]
    step = 1
    if len(fields) == 3:
        if not fields[2].isdigit() or _number(name, fields[2]) < 1:
            raise HostPatternError(f"host range {name!r} has a step that is not a positive number")
        step = _number(name, fields[2])
    if not begin:
        begin = "0"
    if not end:
        raise HostPatternError(f"host range {name!r} has no end")
    if begin.isdigit() and end.isdigit():
        width = len(begin) if begin.startswith("0") and len(begin) > 1 else 0
        if width and len(begin) != len(end):
            raise HostPatternError(f"host range {name!r}: zero-padded begin and end must have equal width")
        first, last = _number(name, begin), _number(name, end)
        if first > last:
            raise HostPatternError(f"host range {name!r}: begin is after end")
        return (last - first) // step + 1, lambda: (str(i).zfill(width) for i in range(first, last + 1, step))
    if len(begin) == 1 and len(end) == 1 and begin.isalpha() and end.isalpha():
        letters = string.ascii_letters
        if begin not in letters or end not in letters:
            raise HostPatternError(
                f"host range {name!r}: begin and end must both be numbers or single letters"
            )
        lo, hi = letters.index(begin), letters.index(end)
        if lo > hi:
            raise HostPatternError(f"host range {name!r}: begin is after end")
        chosen = letters[lo : hi + 1 : step]
        return len(chosen), lambda: chosen
    raise HostPatternError(f"host range {name!r}: begin and end must both be numbers or single letters")


def expand(name: str) -> list[str]:
    """All host names a pattern stands for, in Ansible's order; at most MAX_HOSTS of them."""
    if not is_pattern(name):
        return [name]
    # Ansible expands the first range, then each resulting name again: the product of the ranges,
    # the first varying slowest. Every range is checked, and the hosts counted, before any is listed.
    match = _RANGE.match(name)
    if not match:
        raise HostPatternError(f"malformed host range {name!r}")
    literals = [match.group("head")]
    ranges = [_items(name, match.group("body"))]
    tail, position = match.group("tail"), 0
    while tail.find("[", position) >= 0:  # read from a position: linear in the length of the name
        following = _NEXT.match(tail, position)
        if not following:
            raise HostPatternError(f"malformed host range {name!r}")
        literals.append(following.group("head"))
        ranges.append(_items(name, following.group("body")))
        position = following.end()
    rest = tail[position:]
    count = math.prod(n for n, _ in ranges)
    if count > MAX_HOSTS:
        raise HostPatternError(
            f"host range {name!r} stands for {count:,} hosts, more than the {MAX_HOSTS:,} an inventory may have"
        )
    return [
        "".join(literal + item for literal, item in zip(literals, combination, strict=True)) + rest
        for combination in itertools.product(*(listing() for _, listing in ranges))
    ]
