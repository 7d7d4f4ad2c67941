"""The scorecard (grokkit.scorecard) and the book's Sphinx extension (book/_ext/pages.py), on
summaries and pages the tests write."""
from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path

import nbformat
import pytest
from docutils import nodes

from grokkit import pipeline, records, scorecard

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


def write_record(root: Path, stem: str, claims: list[bool], diffs: int = 0, **more: object) -> None:
    """A paper-scale record of ``chap/stem`` (grokkit.records), with one figure."""
    source = root / "notebooks" / "chap" / f"{stem}.md"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(f"# {stem}\n", encoding="utf-8")
    png = base64.b64encode(b"\x89PNG fake").decode()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("plot()", outputs=[
        nbformat.v4.new_output("display_data", data={"image/png": png})], metadata={
            "mystnb": {"figure": {"caption": "The curves at the paper's scale."}}})])
    summary = {"parameters": {"steps": 10**8},
               "claims": [{"name": f"c{i}", "value": 1.5, "expected": "<= 2", "pass": ok, "kind": "claim",
                           "where": "Section 2", "seeds": 1} for i, ok in enumerate(claims)],
               "disagreements": [{"name": f"d{i}", "paper": "p", "measured": "m"} for i in range(diffs)]}
    provenance = {"commit": "0123456789abcdef", "dirty_files": [], "started_at": "2026-11-27T10:00:00+00:00",
                  "wall_s": 1449.6, "machine": {"cpu": "AMD EPYC", "cores": 2, "vector_extensions": ["avx2"]},
                  "cached_runs": "0 of 1", **more}
    records.write(root, "chap", stem, source, nbformat.writes(nb), summary, provenance)


def test_a_paper_scale_record_is_shown_beside_the_run(book: Path) -> None:
    write_record(book, "thm-c08-memorization", [True, False], diffs=1)
    rows = scorecard.rows(book)
    assert rows[0].paper is None
    paper = rows[1].paper
    assert (paper.passed, paper.total, paper.duration_s, paper.stale) == (1, 2, 1449.6, [])
    totals = scorecard.totals(rows)
    assert (totals.pages_at_paper_scale, totals.paper_passed, totals.paper_claims) == (1, 1, 2)
    assert totals.paper_failing == ["Theorem C.8"] and totals.paper_disagreements == 1


def test_a_record_continued_from_a_checkpoint_says_its_time_is_only_the_end(book: Path) -> None:
    write_record(book, "fig07-coherence", [True], resumed_from_checkpoints=[
        {"label": "deep", "resumed_at": 64565423, "steps": 100000001}])
    _, text = section_text(book, "fig07-coherence")
    assert ("in 24 min (commit 0123456789; cached runs: 0 of 1). 1 of its 1 claims of the paper pass. That time "
            "is the end of a longer run: it continued from the checkpoint(s) of earlier runs (deep from step "
            "64,565,423 of 100,000,001), whose time it does not count.") in text
    write_record(book, "fig07-coherence", [True])
    assert "checkpoint" not in section_text(book, "fig07-coherence")[1]


def test_a_record_that_does_not_match_its_page_fails_the_scorecard(book: Path) -> None:
    write_record(book, "thm-c08-memorization", [True])
    (book / records.RECORDS / "chap" / "thm-c08-memorization-1.png").write_bytes(b"other")
    with pytest.raises(ValueError, match="does not match the SHA-256 it records"):
        scorecard.rows(book)


def section_text(book: Path, stem: str) -> tuple[nodes.section, str]:
    section = pages.paper_scale_section(book, f"book/generated/chap/{stem}")
    return section, " ".join(section.astext().split())


def test_the_page_section_shows_a_passing_a_failing_a_stale_record_and_none(book: Path) -> None:
    """"At the paper's scale" on four pages: a record whose claims pass, one whose claim fails (a
    finding, shown as FAIL), one whose page changed since it ran (stale), and none."""
    write_record(book, "fig07-coherence", [True, True])
    section, text = section_text(book, "fig07-coherence")
    assert text.startswith("At the paper's scale")
    assert "The paper preset ran on 2026-11-27 on AMD EPYC, 2 cores (avx2), in 24 min" in text
    assert "2 of its 2 claims of the paper pass." in text and "stale" not in text
    (image,) = section.findall(nodes.image)
    assert image["uri"] == "/book/paper_runs/chap/fig07-coherence-1.png"
    assert "The curves at the paper's scale." in text
    assert [row.astext().split("\n")[-1] for row in section.findall(nodes.row)][1:] == ["PASS", "PASS"]

    write_record(book, "thm-c08-memorization", [True, False])
    section, text = section_text(book, "thm-c08-memorization")
    assert "1 of its 2 claims of the paper pass, 1 fail (a finding, not an error of the build)" in text
    assert [row.astext().split("\n")[-1] for row in section.findall(nodes.row)][1:] == ["PASS", "FAIL"]

    source = book / "notebooks" / "chap" / "fig07-coherence.md"
    source.write_text(source.read_text() + "\nIts discussion.\n", encoding="utf-8")
    assert "stale" not in section_text(book, "fig07-coherence")[1]  # prose is not what ran
    source.write_text(source.read_text() + "\n```{code-cell} ipython3\nplot(2)\n```\n", encoding="utf-8")
    section, text = section_text(book, "fig07-coherence")
    assert next(section.findall(nodes.warning), None) is not None
    assert "This record is stale: the page's code (notebooks/chap/fig07-coherence.md) was edited" in text

    (book / records.RECORDS / "chap" / "fig07-coherence.json").unlink()
    _, text = section_text(book, "fig07-coherence")
    assert text.startswith("At the paper's scale Not yet run at the paper's scale: its cost at the paper "
                           "preset is not measured yet.")
    assert "grokkit run fig07-coherence --preset paper --record" in text
    _, text = section_text(book, "fig01-generalization-time")
    assert "its paper preset takes about 10 min on the book's 2-core CPU (projected" in text


def test_the_prose_of_a_page_quotes_its_record() -> None:
    """``{record}`WHAT```: a claim's value and verdict, a measured number or range, a disagreement."""
    data = {"claims": [{"name": "larger α converges faster: ρ", "value": -0.6953, "expected": "<= -0.9",
                        "pass": False, "kind": "claim"},
                       {"name": "larger β₁ converges faster: ρ", "value": -1.0, "expected": "<= -0.9",
                        "pass": True, "kind": "claim"},
                       {"name": "max over N of ρ_r", "value": 0.999997391, "expected": "<= 1", "pass": True,
                        "kind": "setup"}],
            "measured": {"t2": [3.0, float("nan"), 1.0e7, 2.0], "effect": 1.2143},
            "disagreements": [{"name": "final error set by αβ₁", "paper": "p", "measured": "6.5 to 8.3× worse"}]}
    assert pages.record_value(data, "larger α") == "−0.695 (FAIL; needs ≤ −0.9)"
    assert pages.record_value(data, "max over N of ρ_r") == "0.999997 (OK; needs ≤ 1)"  # not "1 (OK; needs ≤ 1)"
    assert pages.record_value(data, "measured:effect") == "1.21"
    assert pages.record_value(data, "measured:t2") == "2 to 1e+07"
    assert pages.record_value(data, "measured:t2:median") == "3" and pages.record_value(data, "measured:t2:count") == "3"
    assert pages.record_value(data, "diff:final error") == "6.5 to 8.3× worse"
    data["measured"]["rows"] = {"gaussian, N 10": [0.5, 2.0], "rademacher, N 10": [0.25, 1.0]}
    assert pages.record_value(data, "measured:rows") == "0.25 to 2"
    assert pages.record_value(data, "measured:rows[gaussian, N 10]") == "0.5 to 2"
    assert pages.record_value(data, "measured:t2[0]") == "3"
    assert pages.record_value(data, "measured:rows[rademacher, N 10]") == "0.25 to 1"
    data["measured"]["one"] = [0.06, 0.06]
    assert pages.record_value(data, "measured:one") == "0.06"  # not "0.06 to 0.06"
    data["measured"]["spreads"] = {"0": {"over (n, r)": {"N/n^2": 3.23, "N/(nr log n)": 3.09}}}
    assert pages.record_value(data, "measured:spreads[0][over (n, r)][N/(nr log n)]") == "3.09"
    assert pages.record_value(data, "measured:spreads[0][over (n, r)]") == "3.09 to 3.23"
    for what, message in (("larger", "2 of its claims start with 'larger'"), ("measured:t1", "measures no 't1'"),
                          ("measured:t2:mean", "'mean' is not one of min, max, median, count"),
                          ("measured:rows[uniform]", "has no item 'uniform'"),
                          ("measured:spreads[0][over n]", "has no item 'over n'")):
        with pytest.raises(KeyError, match=message):
            pages.record_value(data, what)


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
        "grokkit run fig01-generalization-time --preset paper --record"]


def test_a_page_without_a_record_says_how_far_its_checkpointed_run_has_come(book: Path, monkeypatch) -> None:
    from grokkit import checkpoint

    monkeypatch.setenv(checkpoint.ENV, str(book / "checkpoints"))
    monkeypatch.setenv(checkpoint.PAGE_ENV, "fig07-coherence:paper")
    with checkpoint.scope("grokkit.kernels.sparse.subgradient", "abc", None):
        checkpoint.Checkpoint("subgradient, 40 configurations", ()).save({"x": 1}, t=500, steps=1000)
    _, text = section_text(book, "fig07-coherence")
    assert ("A run of its paper preset is under way on this machine, checkpointed: subgradient, 40 "
            "configurations at step 500 of 1,000 (50%)") in text
    monkeypatch.setenv(checkpoint.PAGE_ENV, "fig07-coherence:quick")  # a quick run's checkpoint is not shown
    (book / "checkpoints").rename(book / "old")
    with checkpoint.scope("grokkit.kernels.sparse.subgradient", "abc", None):
        checkpoint.Checkpoint("subgradient", ()).save({"x": 1}, t=5, steps=10)
    assert "under way" not in section_text(book, "fig07-coherence")[1]
    # committed with the records, a run stopped on one machine shows on every build of the book
    monkeypatch.setenv(checkpoint.ENV, str(book / records.CHECKPOINTS))
    monkeypatch.setenv(checkpoint.PAGE_ENV, "fig07-coherence:paper")
    with checkpoint.scope("grokkit.kernels.sparse.subgradient", "abc", None):
        checkpoint.Checkpoint("subgradient, 40 configurations", ()).save({"x": 1}, t=250, steps=1000)
    monkeypatch.delenv(checkpoint.ENV)
    assert ("A run of its paper preset is checkpointed in the repository (book/paper_runs/checkpoints): "
            "subgradient, 40 configurations at step 250 of 1,000 (25%)") in section_text(book, "fig07-coherence")[1]


def test_the_cost_table_takes_a_records_wall_time_else_the_projection(book: Path, monkeypatch) -> None:
    """``{paper-costs}``: one source for the pages and the benchmarks page."""
    monkeypatch.setitem(pages.PAPER_COSTS, "thm-c08-memorization",
                        {"cpu_s": "600", "gpu_s": "30", "how": "projected from a 5 % slice"})
    body, unknown = pages.cost_rows(book, scorecard.rows(book))
    assert body == [["Theorem C.8", "10 min", "30 s", "projected from a 5 % slice"]] and unknown == 1
    write_record(book, "thm-c08-memorization", [True])
    body, _ = pages.cost_rows(book, scorecard.rows(book))
    assert body == [["Theorem C.8", "24 min", "30 s", "measured: the whole preset, its record of 2026-11-27"]]
    resumed = [{"label": "deep", "resumed_at": 10, "steps": 100}]
    write_record(book, "thm-c08-memorization", [True], resumed_from_checkpoints=resumed)
    body, _ = pages.cost_rows(book, scorecard.rows(book))  # its time is the end of the run: the projection stands
    assert body == [["Theorem C.8", "10 min", "30 s", "projected from a 5 % slice; its record of 2026-11-27 "
                     "continued the run from a checkpoint, so its time covers only the end"]]
    monkeypatch.delitem(pages.PAPER_COSTS, "thm-c08-memorization")
    body, _ = pages.cost_rows(book, scorecard.rows(book))
    assert body == [["Theorem C.8", "24 min", "—", "measured: the end of the run, continued from a checkpoint "
                     "(no projection of the whole), its record of 2026-11-27"]]
