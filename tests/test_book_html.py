"""Checks of the built HTML book (``pytest -m book`` after ``grokkit book``)."""
from __future__ import annotations

import posixpath
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from grokkit import pipeline

pytestmark = pytest.mark.book

ROOT = pipeline.find_root(Path(__file__).parent)
HTML = ROOT / "_build" / "html"
MATHJAX = "_static/mathjax/tex-chtml-ams.js"
CDN_MARKERS = ("cdn.jsdelivr.net", "unpkg.com", "cdnjs.cloudflare.com")
# myst-nb renders an error output as <div class="output traceback ...">; papermill marks the
# failing cell of a partial notebook with a red "An Exception was encountered" heading.
ERROR_CLASSES = ({"output", "traceback"}, {"output", "error"})
ERROR_TEXT = "An Exception was encountered"


class Page(HTMLParser):
    """Images, links (all, and those in the page's <article>), scripts and element classes."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.images: list[str] = []
        self.links: list[str] = []
        self.article_links: list[str] = []
        self.article_depth = 0
        self.scripts: list[str] = []
        self.classes: list[set[str]] = []
        self.text = path.read_text(encoding="utf-8")
        self.feed(self.text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        self.classes.append(set(attributes.get("class", "").split()))
        if tag == "img":
            self.images.append(attributes.get("src", ""))
        elif tag == "article":
            self.article_depth += 1
        elif tag == "a" and "href" in attributes:
            self.links.append(attributes["href"])
            if self.article_depth:
                self.article_links.append(attributes["href"])
        elif tag == "script" and "src" in attributes:
            self.scripts.append(attributes["src"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "article":
            self.article_depth -= 1

    def target(self, url: str) -> Path:
        """The local file a relative URL of this page points to."""
        parts = urlsplit(url)
        assert not parts.scheme and not parts.netloc, f"{self.path.name}: non-local URL {url}"
        relative = self.path.parent.relative_to(HTML).as_posix()
        return HTML / posixpath.normpath(posixpath.join(relative, unquote(parts.path)))


def page_html(entry: Path) -> Path:
    """The HTML file of a toc entry (an executed notebook under book/generated)."""
    return HTML / entry.relative_to(ROOT).with_suffix(".html")


GENERATED = pipeline.generated_pages(ROOT)
IDS = [page.stem for page in GENERATED]


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    if not (HTML / "index.html").is_file():
        pytest.fail(f"{HTML / 'index.html'} is missing: run `grokkit book` first")


def test_toc_has_generated_pages() -> None:
    assert GENERATED, "_toc.yml lists no page under book/generated/"


@pytest.mark.parametrize("entry", GENERATED, ids=IDS)
def test_page_has_figure(entry: Path) -> None:
    page = Page(page_html(entry))
    images = [src for src in page.images if not src.startswith("data:")]
    assert images, f"{page.path.name} has no <img>"
    missing = [src for src in images if not page.target(src).is_file()]
    assert not missing, f"{page.path.name}: images without a file: {missing}"


@pytest.mark.parametrize("entry", GENERATED, ids=IDS)
def test_page_has_no_error_output(entry: Path) -> None:
    page = Page(page_html(entry))
    errors = [sorted(c) for c in page.classes if any(marker <= c for marker in ERROR_CLASSES)]
    assert not errors, f"{page.path.name} renders error outputs: {errors}"
    assert ERROR_TEXT not in page.text, f"{page.path.name} renders a papermill error cell"


@pytest.mark.parametrize("entry", GENERATED, ids=IDS)
def test_page_has_math(entry: Path) -> None:
    page = Page(page_html(entry))
    assert any("math" in c for c in page.classes), f"{page.path.name} has no math markup"


def test_every_page_uses_local_mathjax() -> None:
    pages = sorted(HTML.rglob("*.html"))
    assert pages
    for path in pages:
        page = Page(path)
        for marker in CDN_MARKERS:
            assert marker not in page.text, f"{path.relative_to(HTML)} references {marker}"
        if any("math" in c for c in page.classes):
            mathjax = [src for src in page.scripts if urlsplit(src).path.endswith(MATHJAX)]
            assert mathjax, f"{path.relative_to(HTML)} has math but does not load {MATHJAX}"
            assert page.target(mathjax[0]).is_file()


def test_index_links_every_page() -> None:
    """The landing page's text (not only the navigation) links every figure and theorem page."""
    index = Page(HTML / "book" / "index.html")
    linked = {index.target(url) for url in index.article_links if not urlsplit(url).scheme}
    missing = [entry.stem for entry in GENERATED if page_html(entry) not in linked]
    assert not missing, f"book/index.html does not link to {missing}"
