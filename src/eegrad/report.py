"""The reproduction report: one paragraph per claim of the paper, written as Markdown and HTML
from the studies' tables (every number in it comes from the run that wrote it). Each study's
module writes its paragraph (:mod:`eegrad.studies`); :func:`report_from_results` rebuilds the
report from a results folder alone."""

from __future__ import annotations

import base64
from pathlib import Path

from ._extras import require_cli
from .results import atomic_write_bytes
from .studies import Section, Study, all_studies, load_study, study_kind

__all__ = ["Section", "claims", "report_from_results", "write_report"]


def claims(studies: dict[str, tuple[Study, str]]) -> list[Section]:
    """Sections for the studies given as name -> (study, image path relative to the report)."""
    return [study_kind(study.config.study).section(study, image) for study, image in studies.values()]


def report_from_results(root: str | Path, command: str = "") -> list[Section]:
    """Rewrite ``report.md`` and ``report.html`` in ``root`` from the study folders under it
    (each with ``metadata.json`` and its tables, as ``eegrad reproduce all`` writes them), in the
    registry's order; returns the sections."""
    root = Path(root)
    studies = {}
    for folder in sorted(p.parent for p in root.glob("*/metadata.json")):
        study = load_study(folder)
        studies[folder.name] = (study, f"{folder.name}/{study.config.name}.png")
    order = {kind.name: i for i, kind in enumerate(all_studies())}
    ordered = dict(sorted(studies.items(), key=lambda kv: order[kv[1][0].config.study]))
    sections = claims(ordered)
    write_report(root, sections, command or f"eegrad report {root}")
    return sections


def _md_table(rows: list[list[str]]) -> str:
    if not rows:
        return ""
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines) + "\n"


def write_report(folder: str | Path, sections: list[Section], command: str) -> None:
    """Write ``report.md`` and ``report.html`` (figures embedded; Markdown rendered by
    markdown-it-py) into ``folder``."""
    require_cli("eegrad's report")
    from markdown_it import MarkdownIt

    folder = Path(folder)

    def document(image_src) -> str:
        md = ["# EE-Grad: reproduction report\n", f"Produced by `{command}`.\n"]
        for s in sections:
            md.append(f"## {s.title}\n")
            md.extend(p + "\n" for p in s.paragraphs)
            if s.table:
                md.append(_md_table(s.table))
            if s.image:
                md.append(f"![{s.title}]({image_src(s.image)})\n")
        return "\n".join(md)

    atomic_write_bytes(folder / "report.md", document(lambda path: path).encode("utf-8"))

    def embedded(path: str) -> str:
        return "data:image/png;base64," + base64.b64encode((folder / path).read_bytes()).decode()

    body = MarkdownIt("commonmark").enable("table").render(document(embedded))
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>EE-Grad reproduction"
            "</title><style>body{font-family:sans-serif;max-width:1100px;margin:auto;}"
            "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:3px 8px}"
            "img{max-width:100%}</style></head><body>\n" + body + "</body></html>\n")  # fmt: skip
    atomic_write_bytes(folder / "report.html", page.encode("utf-8"))
