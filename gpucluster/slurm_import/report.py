"""What `gpucluster import` prints: where every setting went, the counts, the lines before and
after, and (with --check) the comparison; as text or as one JSON document (import.schema.json)."""

from __future__ import annotations

from typing import Any

from gpucluster.slurm_import.adopt import ImportResult
from gpucluster.slurm_import.compactyaml import content_lines
from gpucluster.slurm_import.importer import KINDS

KIND_WORDS = {
    "native": "native",
    "extra": "in extra",
    "mapped": "mapped",
    "dropped": "dropped",
    "default": "Slurm's default",
    "assumed": "assumed",
    "refused": "refused",
}


def text_lines(result: ImportResult, source: str) -> list[str]:
    lines = [
        f"read {len(result.files)} file(s) of {source}: {', '.join(result.files)}",
        "where every setting went:",
    ]
    for placement in result.placements:
        lines.append(f"  {placement}")
    counts = ", ".join(f"{result.counts.get(kind, 0)} {KIND_WORDS[kind]}" for kind in KINDS)
    lines.append(f"settings: {counts}")
    hosts, cluster = content_lines(result.hosts_yml), content_lines(result.cluster_yml)
    lines.append(
        f"lines: slurm.conf {result.original_lines} -> inventory {hosts + cluster} (hosts.yml {hosts} + cluster.yml {cluster})"
    )
    if result.written_to is not None:
        lines.append(f"wrote {result.written_to} (hosts.yml, group_vars/all/cluster.yml)")
    if result.comparison is not None:
        comparison = result.comparison
        seen = ", ".join(f"{count} {what}" for what, count in comparison.counts.items())
        lines += [f"  changed on purpose (see above): {d}" for d in comparison.adjusted]
        lines += [f"  not compared: {what}" for what in comparison.not_compared]
        if comparison.same:
            lines.append(f"check: no difference as Slurm {result.version} reads them ({seen})")
        else:
            lines.append(
                f"check: {len(comparison.differences)} difference(s) as Slurm {result.version} reads them ({seen}):"
            )
            lines += [f"  {difference}" for difference in comparison.differences]
    return lines


def json_doc(result: ImportResult, source: str) -> dict[str, Any]:
    hosts, cluster = content_lines(result.hosts_yml), content_lines(result.cluster_yml)
    check: dict[str, Any] | None = None
    if result.comparison is not None:
        check = {
            "same": result.comparison.same,
            "compared": dict(result.comparison.counts),
            "differences": [_difference(d) for d in result.comparison.differences],
            "adjusted": [_difference(d) for d in result.comparison.adjusted],
            "not_compared": list(result.comparison.not_compared),
        }
    return {
        "ok": result.comparison is None or result.comparison.same,
        "source": source,
        "slurm_version": result.version,
        "out": None if result.written_to is None else str(result.written_to),
        "files": list(result.files),
        "placements": [
            {"where": p.where, "written": p.written, "kind": p.kind, "target": p.target, "reason": p.reason}
            for p in result.placements
        ],
        "counts": {kind: result.counts.get(kind, 0) for kind in KINDS},
        "lines": {
            "slurm_conf": result.original_lines,
            "hosts_yml": hosts,
            "cluster_yml": cluster,
            "inventory": hosts + cluster,
        },
        "check": check,
    }


def _difference(d: Any) -> dict[str, str]:
    return {"section": d.section, "name": d.name, "key": d.key, "site": d.left, "rendered": d.right}
