"""Slurm hostlist expressions (`gpu[001-128,130]`, `r[01-08]n[01-18]`), via python-hostlist.

Slurm's parser (22.05, checked with `scontrol show hostnames`) accepts ranges only when the
expression ends with a bracket: `r[01-02]n[01-03]` is valid, `su[1-4]-leaf` and `a[1-2]b3` are
not. python-hostlist folds on any number in a name, so its tokens are kept only where Slurm can
read them; the others are folded again on the trailing number alone (or listed as they are).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import hostlist

_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")


def slurm_parsable(token: str) -> bool:
    """True when Slurm reads this single hostlist token (no comma at the top level)."""
    return "[" not in token or token.endswith("]")


def split_top_level(expression: str) -> list[str]:
    """A comma list split at its top-level commas (those inside brackets belong to a hostlist)."""
    tokens, depth, start = [], 0, 0
    for index, char in enumerate(expression):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            tokens.append(expression[start:index])
            start = index + 1
    tokens.append(expression[start:])
    return [t for t in tokens if t]


def _fold_trailing(names: list[str]) -> list[str]:
    """Fold only on each name's trailing number: always a form Slurm reads."""
    groups: dict[str, list[str]] = {}
    literal: list[str] = []
    for name in names:
        if _TRAILING_NUMBER.match(name):
            prefix = _TRAILING_NUMBER.match(name).group(1)  # type: ignore[union-attr]
            groups.setdefault(prefix, []).append(name)
        else:
            literal.append(name)
    tokens = list(literal)
    for members in groups.values():
        tokens.extend(split_top_level(str(hostlist.collect_hostlist(members))))
    return tokens


def _fold_uniform(names: list[str]) -> str | None:
    """The common case, done without the general algorithm: one prefix and equal-width trailing
    numbers (gpu0001..gpu4096, leaf switch members). None when names are not of that shape."""
    first = _TRAILING_NUMBER.match(names[0])
    if first is None:
        return None
    prefix, width = first.group(1), len(first.group(2))
    numbers: list[int] = []
    for name in names:
        digits = name[len(prefix) :]
        if not name.startswith(prefix) or len(digits) != width or not digits.isdigit():
            return None
        numbers.append(int(digits))
    if len(numbers) == 1:
        return names[0]
    runs = []
    for low, high in number_runs(numbers):
        start, end = str(low).zfill(width), str(high).zfill(width)
        runs.append(start if low == high else f"{start}-{end}")
    return f"{prefix}[{','.join(runs)}]"


def number_runs(numbers: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted distinct numbers as runs of consecutive ones: [1, 2, 3, 7] -> [(1, 3), (7, 7)]."""
    ordered = sorted(set(numbers))
    runs: list[tuple[int, int]] = []
    for number in ordered:
        if runs and number == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], number)
        else:
            runs.append((number, number))
    return runs


def compress(hosts: Iterable[str]) -> str:
    """Compact Slurm hostlist of the given names (order-independent, deterministic)."""
    names = sorted(set(hosts))
    if not names:
        return ""
    uniform = _fold_uniform(names)
    if uniform is not None:
        return uniform
    tokens: list[str] = []
    for token in split_top_level(str(hostlist.collect_hostlist(names))):
        if slurm_parsable(token):
            tokens.append(token)
        else:
            tokens.extend(_fold_trailing(list(hostlist.expand_hostlist(token))))
    return ",".join(sorted(tokens, key=hostlist.numeric_sort_key))


def expand(expression: str) -> list[str]:
    """Every name a Slurm hostlist expression stands for."""
    return list(hostlist.expand_hostlist(expression))
