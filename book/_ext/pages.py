"""Sphinx extension: what the book adds to its pages.

* ``{scorecard}`` and ``{scorecard-totals}``: the scorecard table and its totals, rendered at
  build time from the JSON summaries beside the executed notebooks (:mod:`grokkit.scorecard`).
* A "Rerun this page" box on every executed notebook page: downloads of the executed
  ``.ipynb`` and of its MyST source, and the ``grokkit run`` commands of both presets.
* The paper's own numbers on ``sphinx-proof`` statements: the label ``thm-c-8`` numbers a
  ``{prf:theorem}`` "Theorem C.8" (and every ``{prf:ref}`` to it), instead of the book's count.
* Alt text of figures taken from their captions, as plain text.
* ``{paper-costs}``: the cost of each page's paper preset (``paper_costs.csv`` beside this file),
  the one source of what the pages and the benchmarks page state.
* Figure numbers: the book numbers the paper's figures as its submission text does; each figure
  page says the number arXiv 2506.05718 gives it, and ``{figure-numbers}`` renders the whole map
  (both from ``figure_numbers.csv`` beside this file).
* ``{record}`WHAT```: a number of the page's record in its prose (its discussion of the run at
  the paper's scale), read at build time.
* ``pages.js``: the search page typesets the TeX quoted in its results.
"""
from __future__ import annotations

import csv
import re
import statistics
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from pylatexenc.latex2text import LatexNodes2Text
from sphinx import addnodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from grokkit import checkpoint, pipeline, records, report, scorecard

logger = logging.getLogger(__name__)

# The submission's figure number -> (arXiv 2506.05718's number, how it was established).
FIGURE_NUMBERS = {int(row["submission"]): (row["arxiv"], row["basis"]) for row in
                  csv.DictReader((Path(__file__).with_name("figure_numbers.csv")).open(encoding="utf-8"))}
BASIS = {"heading": "read from the heading of the authors' code that draws it",
         "inferred": "inferred from the order and content of the authors' notebooks",
         "none": "no counterpart identified"}
FIGURE_PAGE = re.compile(r"fig(?P<number>\d+)-")
# A page's paper preset: its cost on the book's 2-core CPU and on one GPU where measured, in seconds,
# and how it was measured: the one source of the costs the pages and the benchmarks page state.
PAPER_COSTS = {row["stem"]: row for row in
               csv.DictReader((Path(__file__).with_name("paper_costs.csv")).open(encoding="utf-8"))}

GENERATED = pipeline.GENERATED.as_posix() + "/"
# sphinx-proof's statement kinds and the label prefix that carries the paper's number.
PROOF_PREFIXES = {"theorem": "thm", "lemma": "lem", "proposition": "prop", "corollary": "cor",
                  "definition": "def", "example": "ex", "remark": "rem", "assumption": "asm",
                  "conjecture": "conj"}
PAPER_LABEL = re.compile(r"(?P<prefix>[a-z]+)-(?P<number>(?:[a-z]-)?\d+(?:-\d+)*)")


def paper_number(label: str, kind: str) -> tuple[str, ...] | None:
    """The paper's number carried by a statement's label: ``thm-c-8`` -> ("C", "8"),
    ``thm-2-1`` -> ("2", "1"); None when the label does not follow the convention."""
    match = PAPER_LABEL.fullmatch(label)
    if match is None or match["prefix"] != PROOF_PREFIXES.get(kind):
        return None
    return tuple(part.upper() for part in match["number"].split("-"))


def number_as_in_paper(app: Any, env: Any) -> list[str]:
    """Replace the numbers Sphinx counted for sphinx-proof statements with the paper's
    (runs after Sphinx assigns figure numbers on ``env-get-updated``)."""
    for label, entry in getattr(env, "proof_list", {}).items():
        if entry.get("nonumber"):
            continue
        kind, counter, docname = entry["realtype"], entry["countertype"], entry["docname"]
        number = paper_number(label, kind)
        if number is None:
            logger.warning(f"{kind} label {label!r} does not carry the paper's number: label a {kind} "
                           f"'{PROOF_PREFIXES.get(kind, kind)}-<number>', e.g. "
                           f"'{PROOF_PREFIXES.get(kind, kind)}-c-8' for {kind.title()} C.8",
                           location=docname)
            continue
        numbers = env.toc_fignumbers.setdefault(docname, {}).setdefault(counter, {})
        for node_id in entry["ids"]:
            numbers[node_id] = number
    return []


def _table(header: list[str], body: list[list[nodes.Node | str]], widths: list[int],
           classes: list[str]) -> nodes.table:
    table = nodes.table(classes=classes)
    group = nodes.tgroup(cols=len(header))
    table += group
    group.extend(nodes.colspec(colwidth=w) for w in widths)
    head, rows = nodes.thead(), nodes.tbody()
    for target, cells in ((head, [header]), (rows, body)):
        for cells_of_row in cells:
            row = nodes.row()
            for cell in cells_of_row:
                entry = nodes.entry()
                entry += cell if isinstance(cell, nodes.Node) else nodes.paragraph(text=cell)
                row += entry
            target += row
    group += head
    group += rows
    return table


def _doc_link(docname: str, text: str, fromdoc: str) -> nodes.paragraph:
    ref = addnodes.pending_xref("", nodes.inline(text=text), refdomain="std", reftype="doc",
                                reftarget="/" + docname, refexplicit=True, refdoc=fromdoc)
    return nodes.paragraph("", "", ref)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 3 * 3600:
        return f"{seconds / 3600:.0f} h"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def cost_text(stem: str) -> str:
    """The measured cost of a page's paper preset, from :data:`PAPER_COSTS`."""
    row = PAPER_COSTS.get(stem)
    if row is None:
        return "its cost at the paper preset is not measured yet"
    gpu = f", {_duration(float(row['gpu_s']))} on one GPU" if row["gpu_s"] else ""
    return f"its paper preset takes about {_duration(float(row['cpu_s']))} on the book's 2-core CPU{gpu} ({row['how']})"


class ScorecardDirective(SphinxDirective):
    """What the scorecard directives share: the rows and totals of the summaries, and the
    sentence of totals."""

    def load(self) -> tuple[list[scorecard.Row], scorecard.Totals]:
        root = Path(self.env.srcdir)
        table = scorecard.rows(root)
        for row in table:  # rebuild this page whenever a summary or a record changes
            self.env.note_dependency(str(root / GENERATED / f"{row.docname[len(GENERATED):]}.json"))
            chapter, stem = row.docname[len(GENERATED):].split("/")
            self.env.note_dependency(str(records.paths(root, chapter, stem)["summary"]))
        return table, scorecard.totals(table)

    def totals_paragraph(self, totals: scorecard.Totals) -> nodes.paragraph:
        failing = f" (failing: {', '.join(totals.failing_pages)})" if totals.failing_pages else ""
        text = (f"{_count(totals.pages, 'page')}; {totals.passed} of the paper's "
                f"{_count(totals.claims, 'claim')} pass, and {totals.setup_passed} of "
                f"{_count(totals.setup_checks, 'check')} of the pages' set-up{failing}; "
                f"{_count(totals.disagreements, 'disagreement')} with the paper; "
                f"{_count(totals.pages_at_paper_scale, 'page')} with a paper-scale record.")
        return nodes.paragraph(text=text, classes=["scorecard-totals"])

    def paper_paragraph(self, table: list[scorecard.Row], totals: scorecard.Totals) -> nodes.paragraph:
        """What holds at the paper's scale, what fails, and what is not yet run."""
        missing = [row for row in table if row.paper is None]
        costed = sorted((float(PAPER_COSTS[r.stem]["cpu_s"]), r.item) for r in missing if r.stem in PAPER_COSTS)
        text = (f"At the paper's own scale, {_count(totals.pages_at_paper_scale, 'page')} of {totals.pages} "
                f"{'has' if totals.pages_at_paper_scale == 1 else 'have'} a record: {totals.paper_passed} of "
                f"their {_count(totals.paper_claims, 'claim')} of the paper pass")
        text += (f"; claims fail on {', '.join(totals.paper_failing)}" if totals.paper_failing else
                 "; none fails")
        text += (f"; {_count(totals.paper_disagreements, 'disagreement')} with the paper"
                 if totals.paper_disagreements else "")
        text += (f". Stale (their page or code changed since they ran): {', '.join(totals.paper_stale)}"
                 if totals.paper_stale else "")
        text += (f". Not yet run: {_count(len(missing), 'page')}; the paper presets measured so far take from "
                 f"{_duration(costed[0][0])} ({costed[0][1]}) to {_duration(costed[-1][0])} ({costed[-1][1]}) on "
                 f"the book's 2-core CPU." if costed else f". Not yet run: {_count(len(missing), 'page')}.")
        return nodes.paragraph(text=text, classes=["paper-scale-totals"])


class Scorecard(ScorecardDirective):
    """``{scorecard}``: the totals at both scales, then one row per page."""

    def run(self) -> list[nodes.Node]:
        table, totals = self.load()
        body = []
        for row in table:
            setup = f", set-up {row.run.setup_passed}/{row.run.setup_total}" if row.run.setup_total else ""
            claims = nodes.paragraph(text=f"{row.run.passed}/{row.run.total}{setup} ({row.run.preset}, "
                                          f"{_duration(row.run.duration_s)})")
            if row.paper is not None:
                stale = " stale" if row.paper.stale else ""
                resumed = _provenance(Path(self.env.srcdir), row).get("resumed_from_checkpoints")
                piece = "its last piece, resumed from a checkpoint, " if resumed else ""
                paper = nodes.paragraph(text=f"{row.paper.passed}/{row.paper.total}{stale} "
                                             f"({piece}{_duration(row.paper.duration_s)})"
                                             + (f"; {len(row.paper.disagreements)} disagreement(s)"
                                                if row.paper.disagreements else ""))
            else:
                cost = PAPER_COSTS.get(row.stem)
                paper = nodes.paragraph(text="not yet run" + (f" (about {_duration(float(cost['cpu_s']))} on 2 CPU cores)"
                                                              if cost else ""))
            diffs = nodes.bullet_list() if row.run.disagreements else nodes.paragraph(text="none")
            for text in row.run.disagreements:
                diffs += nodes.list_item("", nodes.paragraph(text=text))
            body.append([_doc_link(row.docname, row.item, self.env.docname), claims, paper, diffs])
        header = ["Page", "Quick: claims pass (run time)", "Paper's scale: claims pass (run time)",
                  "Disagreements with the paper"]
        return [self.totals_paragraph(totals), self.paper_paragraph(table, totals),
                _table(header, body, [15, 22, 23, 40], ["scorecard"])]


class ScorecardTotals(ScorecardDirective):
    """``{scorecard-totals}``: one paragraph of totals, linking the scorecard."""

    option_spec = {"link": directives.unchanged_required}

    def run(self) -> list[nodes.Node]:
        table, totals = self.load()
        paragraph = self.totals_paragraph(totals)
        if "link" in self.options:
            paragraph += nodes.Text(" Every page's row: ")
            paragraph += _doc_link(self.options["link"], "the scorecard", self.env.docname).children[0]
            paragraph += nodes.Text(".")
        return [paragraph, self.paper_paragraph(table, totals)]


def _claims_table(data: dict[str, Any]) -> nodes.table:
    """A record's claims (PASS/FAIL), disagreements (DIFF) and set-up checks (OK/BROKEN)."""
    def measured(c: dict[str, Any]) -> str:
        value = c.get("value")
        text = "None" if value is None else report.format_value(value, str(c.get("expected", "")))
        return text if c.get("seeds", 1) == 1 else f"worst of {c['seeds']} seeds: {text}"

    claims = [c for c in data.get("claims", []) if c.get("kind", "claim") == "claim"]
    setup = [c for c in data.get("claims", []) if c.get("kind", "claim") != "claim"]
    body = ([[c["name"] + (f" ({c['where']})" if c.get("where") else ""), measured(c), c.get("expected", ""),
              "PASS" if c.get("pass") else "FAIL"] for c in claims]
            + [[d["name"], d["measured"], d["paper"], "DIFF"] for d in data.get("disagreements", [])]
            + [["set-up: " + c["name"], measured(c), c.get("expected", ""), "OK" if c.get("pass") else "BROKEN"]
               for c in setup])
    return _table(["claim", "measured", "paper", "verdict"], body, [40, 20, 25, 15], ["claims", "paper-scale"])


def _machine(provenance: dict[str, Any]) -> str:
    m = provenance.get("machine") or {}
    gpu = m.get("gpu") or {}
    if gpu:
        return f"one {gpu.get('name')} (driver {gpu.get('driver') or '?'}) beside {m.get('cpu', 'a CPU')}"
    if m.get("cpu"):
        return f"{m['cpu']}, {m.get('cores', '?')} cores ({', '.join(m.get('vector_extensions', [])) or 'no vector extensions listed'})"
    device = m.get("device")
    return {"cuda": "a GPU (not recorded which)", "cpu": "a CPU (not recorded which)"}.get(device, "a machine not recorded")


def in_progress(root: Path, stem: str) -> str | None:
    """How far the checkpoints of a paper-preset run of ``stem`` have come (a run stopped at a
    deadline, or still running): those committed with the records (:data:`grokkit.records.CHECKPOINTS`),
    else those on this machine; None without any."""
    for base, where in ((root / records.CHECKPOINTS, f"checkpointed in the repository ({records.CHECKPOINTS.as_posix()})"),
                        (checkpoint.folder() or root / ".cache" / "checkpoints", "under way on this machine, checkpointed")):
        rows = [row for row in checkpoint.listing(base) if row.get("page") == f"{stem}:paper" and row.get("steps")]
        if rows:
            runs = "; ".join(f"{row['label']} at step {row['t']:,} of {row['steps']:,} "
                             f"({row['t'] / row['steps']:.0%}), saved {row['saved']}" for row in rows)
            return f"A run of its paper preset is {where}: {runs}. The same command continues it."
    return None


def paper_scale_section(root: Path, docname: str) -> nodes.section:
    """"At the paper's scale": a page's record (its figures, claims table, machine, date and
    duration, and whether it is stale), or, with none yet, what its paper preset costs."""
    chapter, stem = docname[len(GENERATED):].split("/")
    section = nodes.section(ids=["at-the-paper-s-scale"], classes=["paper-scale"])
    section += nodes.title(text="At the paper's scale")
    data = records.read(root, chapter, stem)
    command = f"grokkit run {stem} --preset paper --record"
    if data is None:
        para = nodes.paragraph(text=f"Not yet run at the paper's scale: {cost_text(stem)}. This records it: ")
        para += nodes.literal(text=command)
        section += para
        progress = in_progress(root, stem)
        if progress:
            section += nodes.paragraph(text=progress, classes=["paper-scale-progress"])
        return section
    problems = records.problems(root, chapter, stem, data)
    if problems:
        raise ValueError("; ".join(problems))
    prov, verdict = data.get("provenance") or {}, records.verdict(data)
    stale = records.stale(root, data)
    if stale:
        warning = nodes.warning()
        para = nodes.paragraph(text=f"This record is stale: {'; '.join(stale)}. It is shown as it ran; ")
        para += nodes.literal(text=command)
        para += nodes.Text(" replaces it.")
        warning += para
        section += warning
    commit = str(prov.get("commit", "not recorded"))
    dirty = prov.get("dirty_files")
    dirty_text = (f", with uncommitted changes to {', '.join(dirty)}" if isinstance(dirty, list) and dirty else
                  f" ({dirty})" if isinstance(dirty, str) else "")
    when = str(prov.get("started_at") or "an unrecorded date")[:10]
    outcome = (f"{verdict['passed']} of its {verdict['total']} claims of the paper pass"
               + (f", {verdict['total'] - verdict['passed']} fail (a finding, not an error of the build)"
                  if verdict["passed"] < verdict["total"] else "")
               + (f"; {verdict['disagreements']} disagreement(s) with the paper" if verdict["disagreements"] else ""))
    text = (f"The paper preset ran on {when} on {_machine(prov)}, in {_duration(prov.get('wall_s'))}"
            f" (commit {commit[:10]}{dirty_text}; cached runs: {prov.get('cached_runs', 'not recorded')}). "
            f"{outcome}.")
    resumed = [e for e in prov.get("resumed_from_checkpoints") or [] if isinstance(e, dict)]
    if resumed:
        runs = "; ".join(f"{e.get('label', 'a run')} from step {e.get('resumed_at', 0):,} of {e.get('steps', 0):,}"
                         for e in resumed)
        text += (f" That time is the end of a longer run: it continued from the checkpoint(s) of earlier runs "
                 f"({runs}), whose time it does not count.")
    if prov.get("converted_from"):
        text += (f" The record was converted from {prov['converted_from']}: what that format did not keep "
                 f"(the executed notebook, the machine's details) is marked as not recorded.")
    section += nodes.paragraph(text=text, classes=["paper-scale-summary"])
    for k, figure in enumerate((data.get("files") or {}).get("figures", []), 1):
        node = nodes.figure(ids=[f"paper-scale-figure-{k}"])  # Sphinx numbers a captioned figure by its id
        node += nodes.image(uri=f"/{records.RECORDS.as_posix()}/{chapter}/{figure['file']}",
                            alt=figure.get("caption") or f"{stem} at the paper's scale")
        if figure.get("caption"):
            node += nodes.caption(text=figure["caption"])
        section += node
    section += _claims_table(data)
    return section


_AGGREGATES = {"min": min, "max": max, "median": statistics.median, "count": len}


def _number(value: Any) -> str:
    return f"{value:.3g}".replace("-", "−") if isinstance(value, float) else str(value)


def record_value(data: dict[str, Any], what: str) -> str:
    """The text of ``{record}`WHAT``` for a record: a claim (its name or the start of it) as its measured
    value and verdict; ``diff:NAME`` a disagreement's measurement; ``measured:KEY`` a measured number,
    or the range of a measured array or table, or ``measured:KEY:min|max|median|count`` (of its
    finite values); ``measured:KEY[ITEM]`` one item of it (a table's key, an array's index), and
    ``measured:KEY[A][B]`` an item of an item."""
    kind, _, rest = what.partition(":")
    if kind == "measured":
        key, _, aggregate = rest.partition(":")
        key, bracket, items = key.partition("[")
        if key not in data.get("measured", {}):
            raise KeyError(f"its record measures no {key!r}")
        value = data["measured"][key]
        for index in re.findall(r"\[([^\]]*)\]", bracket + items):  # KEY[A][B]: an item of an item
            try:
                value = value[int(index)] if isinstance(value, list) else value[index]
            except (KeyError, IndexError, ValueError, TypeError):
                raise KeyError(f"its measured {key!r} has no item {index!r} where {what!r} asks") from None
        if not isinstance(value, (list, dict)):
            return _number(value)
        flat, stack = [], [value]
        while stack:
            entry = stack.pop()
            if isinstance(entry, (list, dict)):
                stack.extend(entry.values() if isinstance(entry, dict) else entry)
            else:
                flat.append(entry)
        finite = [float(v) for v in flat if isinstance(v, (int, float)) and v == v and abs(v) != float("inf")]
        if aggregate:
            if aggregate not in _AGGREGATES:
                raise KeyError(f"{aggregate!r} is not one of {', '.join(_AGGREGATES)}")
            return _number(_AGGREGATES[aggregate](finite)) if finite or aggregate == "count" else "none finite"
        if not finite:
            return "none finite"
        low, high = _number(min(finite)), _number(max(finite))
        return low if low == high else f"{low} to {high}"
    if kind == "diff":
        found = [d for d in data.get("disagreements", []) if d.get("name", "").startswith(rest)]
        if len(found) != 1:
            raise KeyError(f"{len(found)} of its disagreements start with {rest!r}")
        return found[0]["measured"]
    found = [c for c in data.get("claims", []) if c.get("name", "").startswith(what)]
    if len(found) != 1:
        raise KeyError(f"{len(found)} of its claims start with {what!r}")
    claim = found[0]
    expected = str(claim.get("expected", "")).replace("<=", "≤").replace(">=", "≥").replace("-", "−")
    verdict = ("PASS" if claim.get("pass") else "FAIL") if claim.get("kind", "claim") == "claim" else (
        "OK" if claim.get("pass") else "BROKEN")
    value = claim.get("value")
    value = "None" if value is None else report.format_value(value, str(claim.get("expected", ""))).replace("-", "−")
    return f"{value} ({verdict}; needs {expected})"


def record_role(name: str, rawtext: str, text: str, lineno: int, inliner: Any, options: Any = None,
                content: Any = None) -> tuple[list[nodes.Node], list[nodes.Node]]:
    """``{record}`[STEM/]WHAT```: a number of the page's record (or of page STEM's, a page of the
    same chapter) in its prose, read at build time (:func:`record_value`), so that a page's discussion
    of its run at the paper's scale quotes the record as it is; a record or value it cannot find
    fails the build."""
    env = inliner.document.settings.env
    chapter, stem = (env.docname[len(GENERATED):].split("/") if env.docname.startswith(GENERATED)
                     else (None, None))
    root = Path(env.srcdir)
    target, _, what = text.partition("/")
    if not (chapter and (root / "notebooks" / chapter / f"{target}.md").is_file()):  # a "/" of a claim's name
        target, what = "", text
    stem = target or stem
    try:
        data = records.read(root, chapter, stem) if chapter else None
        if data is None:
            raise KeyError(f"{chapter}/{stem} has no record")
        env.note_dependency(str(records.paths(root, chapter, stem)["summary"]))
        value = record_value(data, what.strip())
    except (KeyError, ValueError, records.RecordError) as err:
        logger.warning(f"{{record}}`{text}`: {err.args[0] if err.args else err}", location=(env.docname, lineno))
        return [nodes.literal(rawtext, text)], []
    return [nodes.inline(rawtext, value, classes=["record-value"])], []


def _download(path: str, text: str, docname: str) -> addnodes.download_reference:
    return addnodes.download_reference("", "", nodes.literal(text=text), reftarget="/" + path,
                                       refdoc=docname, refexplicit=True, refdomain="", reftype="download")


def rerun_box(docname: str, srcdir: Path) -> nodes.admonition:
    """Downloads and the ``grokkit run`` commands of an executed notebook page."""
    chapter, stem = docname[len(GENERATED):].split("/")
    box = nodes.admonition(classes=["rerun"])
    box += nodes.title(text="Rerun this page")
    downloads = nodes.paragraph(text="Download ")
    downloads += _download(f"{docname}.ipynb", f"{stem}.ipynb", docname)
    downloads += nodes.Text(" (the executed notebook) or ")
    downloads += _download(f"notebooks/{chapter}/{stem}.md", f"{stem}.md", docname)
    downloads += nodes.Text(" (its MyST source), then run, from a clone of the repository:")
    box += downloads
    commands = "\n".join(scorecard.rerun_commands(stem))
    box += nodes.literal_block(commands, commands, language="bash")
    data = pipeline.read_json(srcdir / f"{docname}.json") or {}
    if data.get("duration_s") is not None:
        box += nodes.paragraph(text=f"This page is the {data.get('preset', '?')} preset's run; it took "
                                    f"{_duration(data['duration_s'])} on {data.get('device', '?')}.")
    return box


_LATEX = LatexNodes2Text()
# What pylatexenc drops: the norm bars and the negated relation.
_BEFORE_LATEX = ((re.compile(r"\\\|"), "‖"), (re.compile(r"\\ne(?![a-zA-Z])"), "≠"))


def plain(node: nodes.Node) -> str:
    """Text of a node with its math turned into plain Unicode (``\\alpha\\beta_1`` -> αβ_1)."""
    if isinstance(node, nodes.math):
        tex = node.astext()
        for pattern, text in _BEFORE_LATEX:
            tex = pattern.sub(text, tex)
        return _LATEX.latex_to_text(tex).strip()
    if isinstance(node, nodes.Text):
        return node.astext()
    return "".join(plain(child) for child in node.children)


def on_doctree_read(app: Any, doctree: nodes.document) -> None:
    docname = app.env.docname
    for figure in doctree.findall(nodes.figure):
        caption = next(iter(figure.findall(nodes.caption)), None)
        for image in figure.findall(nodes.image):
            if caption is not None and not image.get("alt"):
                image["alt"] = " ".join(plain(caption).split())
    if docname.startswith(GENERATED):
        section = next(iter(doctree.findall(nodes.section)), None)
        if section is not None:
            section.insert(1, rerun_box(docname, Path(app.env.srcdir)))
            note = arxiv_note(docname)
            if note is not None:
                section.insert(1, note)
            root = Path(app.env.srcdir)
            chapter, stem = docname[len(GENERATED):].split("/")
            app.env.note_dependency(str(records.paths(root, chapter, stem)["summary"]))
            claims = next((i for i, child in enumerate(section.children) if isinstance(child, nodes.section)
                           and child.next_node(nodes.title).astext().strip().startswith("Claims")), None)
            paper = paper_scale_section(root, docname)
            if claims is None:
                section += paper
            else:
                section.insert(claims + 1, paper)


def arxiv_note(docname: str) -> nodes.paragraph | None:
    """"In arXiv 2506.05718 this is Figure N" on a figure page (or that it has no counterpart)."""
    match = FIGURE_PAGE.match(docname.rsplit("/", 1)[-1])
    if match is None:
        return None
    arxiv, basis = FIGURE_NUMBERS[int(match["number"])]
    text = (f"In arXiv 2506.05718 (the ICML 2025 version) this is Figure {arxiv} ({BASIS[basis]}); "
            if arxiv else "No counterpart of this figure was identified in arXiv 2506.05718 (the ICML "
                          "2025 version); ")
    note = nodes.paragraph(text=text + "the book numbers figures as the submission does: see ",
                           classes=["arxiv-number"])
    note += _doc_link("book/figure-numbers", "Figure numbers", docname).children[0]
    note += nodes.Text(".")
    return note


class FigureNumbers(SphinxDirective):
    """``{figure-numbers}``: the submission's figure numbers against arXiv 2506.05718's."""

    def run(self) -> list[nodes.Node]:
        body = [[str(number), arxiv or "—", BASIS[basis]] for number, (arxiv, basis) in FIGURE_NUMBERS.items()]
        return [_table(["Submission (the book)", "arXiv 2506.05718", "How it was established"], body,
                       [20, 30, 50], ["figure-numbers"])]


def _provenance(root: Path, row: scorecard.Row) -> dict[str, Any]:
    """The provenance of the row's paper-scale record; {} where it has none."""
    if row.paper is None:
        return {}
    chapter = row.docname[len(GENERATED):].split("/")[0]
    return (records.read(root, chapter, row.stem) or {}).get("provenance") or {}


def cost_rows(root: Path, table: list[scorecard.Row]) -> tuple[list[list[str]], int]:
    """The cost of each page's paper preset, as the pages state it: the wall time of its record
    where it has one (a run of the whole preset, in the GPU column where it ran on one), else the
    projection of :data:`PAPER_COSTS`, which also stands for a record that continued its run from a
    checkpoint (its time is only the end); and the number of pages with neither."""
    body, unknown = [], 0
    for row in table:
        cost = PAPER_COSTS.get(row.stem)
        cpu = _duration(float(cost["cpu_s"])) if cost else "—"
        gpu = _duration(float(cost["gpu_s"])) if cost and cost["gpu_s"] else "—"
        prov = _provenance(root, row)
        if prov.get("resumed_from_checkpoints") and cost is not None:
            # the record's time is the end of a run continued from a checkpoint: the projection stands
            body.append([row.item, cpu, gpu, f"{cost['how']}; its record of {str(prov.get('started_at', '?'))[:10]} "
                         f"continued the run from a checkpoint, so its time covers only the end"])
        elif row.paper is not None and row.paper.duration_s is not None:
            machine = prov.get("machine") or {}
            if machine.get("gpu") or machine.get("device") == "cuda":
                gpu = _duration(row.paper.duration_s)
            else:
                cpu = _duration(row.paper.duration_s)
            cached = str(prov.get("cached_runs", ""))
            reused = (f", {cached} runs read from the result cache"
                      if cached[:1].isdigit() and not cached.startswith("0 ") else "")
            whole = ("the end of the run, continued from a checkpoint (no projection of the whole)"
                     if prov.get("resumed_from_checkpoints") else "the whole preset")
            body.append([row.item, cpu, gpu, f"measured: {whole}, its record of "
                         f"{str(prov.get('started_at', '?'))[:10]}{reused}" + (" (stale)" if row.paper.stale else "")])
        elif cost is not None:
            body.append([row.item, cpu, gpu, cost["how"]])
        else:
            unknown += 1
    return body, unknown


class PaperCosts(ScorecardDirective):
    """``{paper-costs}``: :func:`cost_rows` as a table, and the pages with no cost yet."""

    def run(self) -> list[nodes.Node]:
        table, _ = self.load()
        body, unknown = cost_rows(Path(self.env.srcdir), table)
        note = nodes.paragraph(text=f"{_count(unknown, 'page')} without a record or a projection yet.")
        return [_table(["page", "2-core CPU", "one GPU", "how it was measured"], body, [22, 12, 12, 54],
                       ["paper-costs"]), note]


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("figure-numbers", FigureNumbers)
    app.add_directive("paper-costs", PaperCosts)
    app.add_directive("scorecard", Scorecard)
    app.add_directive("scorecard-totals", ScorecardTotals)
    app.add_role("record", record_role)
    # Before Sphinx's download collector (priority 500) reads the download nodes of the box.
    app.connect("doctree-read", on_doctree_read, priority=400)
    # After Sphinx's toctree collector (priority 500) counted the statements.
    app.connect("env-get-updated", number_as_in_paper, priority=900)
    app.add_css_file("pages.css")
    app.add_js_file("pages.js")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
