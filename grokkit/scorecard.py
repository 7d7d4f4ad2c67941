"""The book's scorecard: one row per page, read from the JSON summaries that ``grokkit run``
publishes beside each executed notebook, so that the scorecard can never disagree with them.

The Sphinx extension ``book/_ext/pages.py`` renders :func:`rows` and :func:`totals` at build
time (the page ``book/scorecard`` and the totals on the landing page); ``grokkit status``
reads the same summaries.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from grokkit import pipeline, records


@dataclass
class Record:
    """What one run of a page came to: its preset, the paper's claims passed out of the total,
    the checks of its set-up passed out of theirs (counted apart: they hold by construction),
    the one-line text of each disagreement with the paper, and how long it ran."""

    preset: str
    passed: int
    total: int
    disagreements: list[str]
    duration_s: float | None
    setup_passed: int = 0
    setup_total: int = 0
    stale: list[str] = field(default_factory=list)  # a paper-scale record: what changed since it ran

    @classmethod
    def from_summary(cls, data: dict[str, Any]) -> Record:
        claims = [c for c in data.get("claims", []) if c.get("kind", "claim") == "claim"]
        setup = [c for c in data.get("claims", []) if c.get("kind", "claim") != "claim"]
        return cls(preset=str(data.get("preset", "?")),
                   passed=sum(bool(c.get("pass")) for c in claims), total=len(claims),
                   disagreements=[f"{d['name']}: paper says {d['paper']}; measured {d['measured']}"
                                  for d in data.get("disagreements", [])],
                   duration_s=data.get("duration_s"),
                   setup_passed=sum(bool(c.get("pass")) for c in setup), setup_total=len(setup))


@dataclass
class Row:
    """One page of the book: the paper's item it covers ("Figure 1", "Theorem C.8"), its
    title, the book document it is, and the record of its run (and of a paper-scale run)."""

    stem: str
    item: str
    title: str
    docname: str
    run: Record
    paper: Record | None = None


@dataclass
class Totals:
    pages: int = 0
    passed: int = 0
    claims: int = 0
    setup_passed: int = 0
    setup_checks: int = 0
    disagreements: int = 0
    pages_at_paper_scale: int = 0
    failing_pages: list[str] = field(default_factory=list)
    # At the paper's scale: the recorded pages' claims, the pages with a failed claim, stale records.
    paper_passed: int = 0
    paper_claims: int = 0
    paper_disagreements: int = 0
    paper_failing: list[str] = field(default_factory=list)
    paper_stale: list[str] = field(default_factory=list)


def page_title(page: Path) -> str:
    """The first ``# `` heading of an executed notebook's markdown cells."""
    for cell in nbformat.read(page, as_version=4).cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return page.stem


def paper_item(title: str) -> str:
    """The paper's item a page covers, from the title convention "<item> — <what it shows>":
    "Figure 1", "Theorem 2.1", "Theorem C.8"."""
    return re.split(r"\s+[—–]\s+|:\s", title, maxsplit=1)[0].strip()


def rows(root: Path, folder: Path | None = None) -> list[Row]:
    """One row per page that ``_toc.yml`` lists under ``book/generated``, in the book's order,
    read from the summary beside each page (``folder``: another set of executed pages).

    Raises ``ValueError`` naming a page whose summary is missing or does not match it: the
    scorecard shows only what a complete run recorded.
    """
    out = []
    for page in pipeline.generated_pages(root, folder):
        data = pipeline.matching_summary(page, page.with_suffix(".json"))
        if data is None:
            raise ValueError(f"{pipeline.relative(page, root)} has no matching summary: "
                             f"rerun `grokkit run {page.stem}`")
        if data.get("placeholder"):  # a page missing from `grokkit book --from`
            continue
        title = page_title(page)
        out.append(Row(stem=page.stem, item=paper_item(title), title=title,
                       docname=f"{pipeline.GENERATED.as_posix()}/{page.parent.name}/{page.stem}",
                       run=Record.from_summary(data), paper=paper_record(root, page.parent.name, page.stem)))
    return out


def paper_record(root: Path, chapter: str, stem: str) -> Record | None:
    """The page's paper-scale record (:mod:`grokkit.records`), None where it has none.

    Raises ``ValueError`` for a record that does not match its page (the book refuses it), never
    for its verdict."""
    data = records.read(root, chapter, stem)
    if data is None:
        return None
    problems = records.problems(root, chapter, stem, data)
    if problems:
        raise ValueError("; ".join(problems))
    record = Record.from_summary({**data, "duration_s": (data.get("provenance") or {}).get("wall_s")})
    record.stale = records.stale(root, data)
    return record


def totals(table: list[Row]) -> Totals:
    """Pages, the paper's claims passed out of the total, set-up checks passed out of theirs and
    disagreements, summed over the rows' runs; the same at the paper's scale over the records."""
    result = Totals()
    for row in table:
        result.pages += 1
        result.passed += row.run.passed
        result.claims += row.run.total
        result.setup_passed += row.run.setup_passed
        result.setup_checks += row.run.setup_total
        result.disagreements += len(row.run.disagreements)
        if row.run.passed < row.run.total or row.run.setup_passed < row.run.setup_total:
            result.failing_pages.append(row.item)
        if row.paper is not None:
            result.pages_at_paper_scale += 1
            result.paper_passed += row.paper.passed
            result.paper_claims += row.paper.total
            result.paper_disagreements += len(row.paper.disagreements)
            if row.paper.passed < row.paper.total:
                result.paper_failing.append(row.item)
            if row.paper.stale:
                result.paper_stale.append(row.item)
    return result


def rerun_commands(stem: str) -> list[str]:
    """The commands that regenerate one page, at the quick and at the paper preset."""
    return [f"grokkit run {stem} --preset quick", f"grokkit run {stem} --preset paper --record"]
