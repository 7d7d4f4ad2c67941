"""Static checks of the page sources (``notebooks/**/*.md``) and the book's own pages: a reader
can check everything a page cites. The project's specification and the cell numbers of the
authors' notebooks are not public; a page cites the paper (section, figure, equation) and the
authors' code by file and function in their public repository."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "notebooks").rglob("*.md")) + sorted((ROOT / "book").glob("*.md"))

UNCHECKABLE = [
    (re.compile(r"\bspec(?:ification)?(?:'s)?\b", re.I), "the project's specification"),
    (re.compile(r"(?<![\w\]])(?:\[G\]|\[P L\d|\[C:\d|\[M\]|\[U\])"), "a tag of the project's specification"),
    (re.compile(r"our copy of the paper|\bOCR\b|seed (?:text|file|dump)|shared/", re.I),
     "our copy of the paper (cite the paper itself)"),
    (re.compile(r"\bcells? \d+", re.I), "a cell number of the authors' notebooks (cite the file and function)"),
]


def uncheckable(text: str) -> list[str]:
    """``line N: what`` for each line of a page that cites something a reader cannot check."""
    return [f"line {i}: cites {what}: {line.strip()[:120]}"
            for i, line in enumerate(text.splitlines(), 1)
            for pattern, what in UNCHECKABLE if pattern.search(line)]


@pytest.mark.parametrize("source", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_a_page_cites_only_what_a_reader_can_check(source: Path) -> None:
    found = uncheckable(source.read_text(encoding="utf-8"))
    assert not found, f"{source.relative_to(ROOT)}:\n" + "\n".join(found)


LIBRARY = sorted((ROOT / "grokkit").rglob("*.py")) + sorted((ROOT / "grokkit").rglob("*.c"))


def test_the_library_cites_only_what_a_reader_can_check() -> None:
    """The docstrings are the library's reference: the same rule as the pages."""
    found = [f"{path.relative_to(ROOT)} {line}" for path in LIBRARY
             for line in uncheckable(path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("text, hits", [
    ("the step (spec §5 item 30)", 1),
    ("the specification's proposal", 1),
    ("This is the background of [G]'s deep networks", 1),
    ("the authors' cell 57 draws it", 1),
    ("in our copy of the paper", 1),
    ("the spectrum of X, a special case, `compressed_sensing.ipynb`, Section 3.3.3", 0),
])
def test_the_check_finds_each_kind_of_citation(text: str, hits: int) -> None:
    assert len(uncheckable(text)) == hits
