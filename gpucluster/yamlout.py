"""YAML as gpucluster writes it: plain (no anchors or aliases), deterministic, block style.

Rendered files are read, diffed and reviewed by people and GitOps tools; PyYAML would otherwise
write `&id001` / `*id001` wherever one Python object appears twice (a dict reused for requests
and limits, say), which hides a value from whoever reads the second place.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

_Base: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class PlainDumper(_Base):  # type: ignore[valid-type,misc]
    """SafeDumper that writes every repeated object out in full, and multi-line strings as blocks
    (config files inside Helm values stay readable)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


PlainDumper.add_representer(str, _str)


def dump(data: Any, *, sort_keys: bool = False, width: int = 110) -> str:
    """One YAML document, insertion order kept unless sort_keys."""
    text: str = yaml.dump(
        data, Dumper=PlainDumper, sort_keys=sort_keys, default_flow_style=False, width=width
    )
    return text


def dump_all(documents: Iterable[Any], *, sort_keys: bool = False, width: int = 110) -> str:
    """Several documents, each starting with `---`."""
    text: str = yaml.dump_all(
        list(documents),
        Dumper=PlainDumper,
        sort_keys=sort_keys,
        default_flow_style=False,
        explicit_start=True,
        width=width,
    )
    return text
