"""The scorecard (grokkit.scorecard) and the book's Sphinx extension (book/_ext/pages.py), on
summaries and pages the tests write."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import nbformat
import pytest
from docutils import nodes

from grokkit import pipeline, scorecard

sys.path.insert(0, str(pipeline.find_root(Path(__file__).parent) / "book" / "_ext"))
import pages  # noqa: E402  (book/_ext/pages.py, the Sphinx extension)

TOC = """format: jb-book
root: book/index
parts:
  - caption: A chapter
    chapters:
      - file: book/generated/chap/fig07-coherence
      - file: book/generated/chap/thm-c08-memorization
"""


def write_page(root: Path, stem: str, title: str, claims: list[bool], diffs: list[str],
               duration: float, preset: str = "quick") -> None:
    folder = root / "book" / "generated" / "chap"
    folder.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"(label)=\n# {title}\n\ntext")])
    text = nbformat.writes(nb) + "\n"
    (folder / f"{stem}.ipynb").write_text(text, encoding="utf-8")
    summary = {"preset": preset, "duration_s": duration,
               "claims": [{"name": f"c{i}", "value": 1.0, "expected": "<= 2", "pass": ok}
                          for i, ok in enumerate(claims)],
               "disagreements": [{"name": d, "paper": "p", "measured": "m"} for d in diffs],
               "page_sha256": hashlib.sha256(text.encode()).hexdigest()}
    (folder / f"{stem}.json").write_text(json.dumps(summary), encoding="utf-8")


@pytest.fixture
def book(tmp_path: Path) -> Path:
    (tmp_path / "_toc.yml").write_text(TOC, encoding="utf-8")
    write_page(tmp_path, "fig07-coherence", "Figure 7 — Coherence against τ", [True, True, False],
               ["N_min", "tau"], 12.5)
    write_page(tmp_path, "thm-c08-memorization", "Theorem C.8 — Memorization time", [True] * 4, [], 3.0)
    return tmp_path


def test_rows_follow_the_toc_and_the_summaries(book: Path) -> None:
    rows = scorecard.rows(book)
    assert [(r.item, r.docname) for r in rows] == [
        ("Figure 7", "book/generated/chap/fig07-coherence"),
        ("Theorem C.8", "book/generated/chap/thm-c08-memorization")]
    first = rows[0].run
    assert (first.preset, first.passed, first.total, first.duration_s) == ("quick", 2, 3, 12.5)
    assert first.disagreements == ["N_min: paper says p; measured m", "tau: paper says p; measured m"]
    assert rows[0].paper is None


def test_totals_are_the_sums_over_the_rows(book: Path) -> None:
    totals = scorecard.totals(scorecard.rows(book))
    assert (totals.pages, totals.passed, totals.claims, totals.disagreements) == (2, 6, 7, 2)
    assert totals.failing_pages == ["Figure 7"]
    assert totals.pages_at_paper_scale == 0


def test_setup_checks_are_counted_apart_from_the_papers_claims(book: Path) -> None:
    path = book / "book" / "generated" / "chap" / "thm-c08-memorization.json"
    data = json.loads(path.read_text())
    data["claims"][0]["kind"] = "setup"
    data["claims"][1].update(kind="setup", **{"pass": False})
    path.write_text(json.dumps(data))
    row = scorecard.rows(book)[1].run
    assert (row.passed, row.total, row.setup_passed, row.setup_total) == (2, 2, 1, 2)
    totals = scorecard.totals(scorecard.rows(book))
    assert (totals.passed, totals.claims, totals.setup_passed, totals.setup_checks) == (4, 5, 1, 2)
    assert totals.failing_pages == ["Figure 7", "Theorem C.8"]  # a broken set-up fails its page


def test_a_paper_scale_record_is_shown_beside_the_run(book: Path) -> None:
    (book / scorecard.PAPER_RUNS).mkdir(parents=True)
    (book / scorecard.PAPER_RUNS / "thm-c08-memorization.paper.json").write_text(json.dumps(
        {"preset": "paper", "duration_s": 1449.6, "claims": [{"pass": True}, {"pass": False}]}))
    rows = scorecard.rows(book)
    assert rows[1].paper is not None and (rows[1].paper.passed, rows[1].paper.total) == (1, 2)
    assert scorecard.totals(rows).pages_at_paper_scale == 1


def test_a_page_without_its_summary_is_refused(book: Path) -> None:
    page = book / "book" / "generated" / "chap" / "fig07-coherence.ipynb"
    page.write_text(page.read_text() + " ", encoding="utf-8")  # edited after its run
    with pytest.raises(ValueError, match="fig07-coherence.ipynb has no matching summary"):
        scorecard.rows(book)


@pytest.mark.parametrize(("title", "item"), [
    ("Figure 1 — Generalization time", "Figure 1"),
    ("Theorem C.8 — Memorization", "Theorem C.8"),
    ("Definition B.1: the deep network", "Definition B.1"),
])
def test_paper_item(title: str, item: str) -> None:
    assert scorecard.paper_item(title) == item


@pytest.mark.parametrize(("label", "kind", "number"), [
    ("thm-2-1", "theorem", ("2", "1")),
    ("thm-c-8", "theorem", ("C", "8")),
    ("lem-d-14", "lemma", ("D", "14")),
    ("def-b-1", "definition", ("B", "1")),
    ("cor-c-2", "corollary", ("C", "2")),
    ("thm-c-8", "lemma", None),        # a theorem's prefix on a lemma
    ("theorem-3", "theorem", None),     # sphinx-proof's own label: no paper number
    ("thm-memorization", "theorem", None),
])
def test_statement_labels_carry_the_paper_number(label: str, kind: str, number: tuple | None) -> None:
    assert pages.paper_number(label, kind) == number


def test_alt_text_is_plain() -> None:
    caption = nodes.caption("", "", nodes.Text("Delay "), nodes.math(text=r"\Delta t = t_2 - t_1"),
                            nodes.Text(" against "), nodes.math(text=r"\|\hat b\|_\infty/(\alpha\beta_1)"),
                            nodes.Text(", "), nodes.math(text=r"b^* \ne \hat b"))
    text = pages.plain(caption)
    assert text == "Delay Δt = t_2 - t_1 against ‖b̂‖_∞/(αβ_1), b^* ≠ b̂"
    assert "\\" not in text


def test_rerun_commands() -> None:
    assert scorecard.rerun_commands("fig01-generalization-time") == [
        "grokkit run fig01-generalization-time --preset quick",
        "grokkit run fig01-generalization-time --preset paper"]
