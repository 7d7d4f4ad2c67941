"""Browser check of the built book (issue 7 §3): ``pytest -m browser tests`` after ``grokkit book``.

Headless Chromium (driven by selenium) opens every page of ``_build/html``, served over HTTP
from 127.0.0.1 (never file://), at a desktop and a phone width, and fails a page that

* logs a console error (level SEVERE),
* requests anything from another host than 127.0.0.1/localhost,
* has an image that does not load,
* leaves a formula untypeset (a ``span.math``/``div.math`` without MathJax output) or shows a
  MathJax error,
* shows raw TeX (``\\alpha``, ``\\|``, ``$...$``, ``\\(``...) in its title or visible text,
* is wider than the screen (horizontal scrolling), or clips a formula (hidden by an ancestor
  that hides overflow, or off the viewport); at the desktop width a display formula must also
  fit its column without scrolling.

At the phone width the navigation buttons must open their panels (book contents, page contents).

One Chromium for the module; every page is loaded once per width, as a first-time visitor (local
and session storage are cleared before every document), and each check is a test of its own
(``test_page[400-book/index.html-console]``) so a failure names the page, the width and the check.
The check functions take the collected facts of one page load and return readable problems;
``test_checks_catch_a_bad_page`` proves on a deliberately broken page that each of them fires.
"""
from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

import pytest
import yaml

from grokkit import pipeline

try:
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
except ImportError:  # pragma: no cover - selenium is in requirements.txt
    webdriver = None


def _find(name: str) -> str | None:
    """An executable on PATH, or the Debian location."""
    found = shutil.which(name)
    if found:
        return found
    debian = Path("/usr/bin") / name
    return str(debian) if debian.is_file() else None


CHROMIUM = _find("chromium")
CHROMEDRIVER = _find("chromedriver")
_MISSING = [what for what, path in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER))
            if path is None] + (["selenium (pip)"] if webdriver is None else [])

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        bool(_MISSING),
        reason=f"{' and '.join(_MISSING)} not found: the browser check needs Chromium, chromedriver "
               "and selenium (Debian: apt-get install chromium chromium-driver)"),
]

ROOT = pipeline.find_root(Path(__file__).parent)
HTML = ROOT / "_build" / "html"
# The book's MathJax bundle, which the self-test pages load too.
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
MATHJAX = "/_static/" + CONFIG["sphinx"]["config"]["mathjax_path"]

# Window sizes (width, height): a desktop (the three-column layout) and a phone (sidebars
# hidden behind the ☰ buttons). With --headless=new the window width is the viewport width.
WIDTHS = {1400: 900, 400: 860}
WIDE = 1400  # at this width a display formula must fit its column without scrolling
TIMEOUT_S = 30  # the longest wait for a page load, for MathJax, for the images, for the fonts
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
# The visible width we tolerate beyond an edge: layout is in fractional pixels.
TOLERANCE_PX = 1


def _pages() -> list[str]:
    """Every HTML page of the build, relative to _build/html, in a stable order.

    Left out, and why:
    * _static/**: the theme ships Jinja macro templates (webpack-macros.html) there, not pages;
    * redirect stubs (a meta refresh, e.g. the root index.html -> book/index.html): they have
      no content, and loading one races the redirect; their target is checked as a page.
    search.html and genindex.html are checked: they are ordinary pages of the layout (sidebar
    with the page titles, header, footer), reachable from the search box.
    """
    if not HTML.is_dir():
        return []
    pages = []
    for path in sorted(HTML.rglob("*.html")):
        relative = path.relative_to(HTML).as_posix()
        if relative.startswith("_static/"):
            continue
        if re.search(r"<meta[^>]+http-equiv=\"?refresh", path.read_text(encoding="utf-8"), re.I):
            continue
        pages.append(relative)
    return pages


PAGES = _pages()


def _toggle_page() -> str | None:
    """The page for the navigation toggles: the landing page if it has a page TOC, else the
    first page that has one (the secondary toggle needs page contents to show)."""
    landing = "book/index.html"
    ordered = sorted(PAGES, key=lambda page: page != landing)
    for page in ordered:
        text = (HTML / page).read_text(encoding="utf-8")
        toc = text.find('id="pst-page-toc-nav"')
        if toc >= 0 and "toc-entry" in text[toc:toc + 2000]:
            return page
    return None


# --------------------------------------------------------------------------------------------
# The server and the browser
# --------------------------------------------------------------------------------------------

class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


@dataclass
class Server:
    root: Path
    httpd: http.server.ThreadingHTTPServer = field(init=False)

    def __post_init__(self) -> None:
        handler = functools.partial(_QuietHandler, directory=str(self.root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# Every new document starts as a first-time visitor's: the theme stores the colour mode in
# localStorage and the sidebar scroll in sessionStorage, so without this a page's console (and
# layout) would depend on which pages were opened before it.
FRESH_VISITOR_JS = "try { localStorage.clear(); sessionStorage.clear(); } catch (e) {}"


class Browser:
    """One headless Chromium for the module; ``visit`` loads a page and collects its facts."""

    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="grokkit-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                     "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--disable-extensions",
                     "--disable-dev-shm-usage", "--mute-audio",
                     f"--user-data-dir={self.profile}",
                     # No DNS: any other host fails at once (offline, deterministic); its
                     # request is still in the performance log, which is what we check.
                     "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, "
                     "EXCLUDE localhost"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
        options.add_experimental_option("perfLoggingPrefs",
                                        {"enableNetwork": True, "enablePage": False})
        try:
            self.driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        except Exception:
            shutil.rmtree(self.profile, ignore_errors=True)
            raise
        self.driver.set_page_load_timeout(TIMEOUT_S)
        self.driver.set_script_timeout(TIMEOUT_S + 10)
        self.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument",
                                    {"source": FRESH_VISITOR_JS})
        self.width = 0

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)

    def resize(self, width: int) -> None:
        if width != self.width:
            self.driver.set_window_size(width, WIDTHS.get(width, 900))
            self.width = width

    def drain_logs(self) -> tuple[list[dict], list[dict]]:
        return self.driver.get_log("browser"), self.driver.get_log("performance")

    def load(self, url: str, width: int) -> None:
        """Open url at width in a clean state: no log entry of an earlier page is kept."""
        self.resize(width)
        self.driver.get("about:blank")  # the earlier page is gone, with all it logs
        self.drain_logs()
        self.driver.get(url)
        # chromedriver sometimes returns from get() before the new document has even replaced
        # about:blank (a script run then would check about:blank), or before its load event.
        deadline = time.monotonic() + TIMEOUT_S
        while self.driver.execute_script("return [location.href, document.readyState]") != [
                url, "complete"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load within {TIMEOUT_S} s")
            time.sleep(0.05)

    def visit(self, url: str, width: int) -> Visit:
        self.load(url, width)
        facts = self.driver.execute_async_script(COLLECT_JS, {
            "timeoutMs": TIMEOUT_S * 1000, "displayMustFit": width >= WIDE,
            "tolerance": TOLERANCE_PX})
        console, performance = self.drain_logs()
        if "error" in facts:
            raise RuntimeError(f"{url} at {width} px: the collecting script failed: "
                               f"{facts['error']}")
        assert facts["url"] == url, f"checked {facts['url']} instead of {url}"
        requests = []
        for entry in performance:
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                requests.append(message["params"]["request"]["url"])
            elif message.get("method") == "Network.webSocketCreated":
                requests.append(message["params"]["url"])
        return Visit(url=url, width=width, facts=facts, console=console, requests=requests)


# --------------------------------------------------------------------------------------------
# What one page load shows: everything is collected by one script, after MathJax, the images
# and the fonts are done (layout is final), so that the checks only read it.
# --------------------------------------------------------------------------------------------

COLLECT_JS = r"""
const opts = arguments[0], done = arguments[arguments.length - 1];
const within = (promise, ms) => Promise.race(
  [promise, new Promise(resolve => setTimeout(() => resolve('timeout'), ms))]);

// "tag#id.class1.class2.class3 in section#nearest-ancestor-with-an-id"
function describe(el, context = true) {
  let s = el.tagName.toLowerCase();
  if (el.id) s += '#' + el.id;
  const cls = Array.from(el.classList).slice(0, 3);
  if (cls.length) s += '.' + cls.join('.');
  const anchor = context && !el.id && el.parentElement && el.parentElement.closest('[id]');
  if (anchor) s += ' in ' + anchor.tagName.toLowerCase() + '#' + anchor.id;
  return s;
}
const round = x => Math.round(x * 10) / 10;
const rectOf = el => { const r = el.getBoundingClientRect();
  return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; };
// The box that clips el's content: its padding box (inside the borders and scrollbars).
function clipBox(el) {
  const r = el.getBoundingClientRect();
  const left = r.left + el.clientLeft, top = r.top + el.clientTop;
  return {left, top, right: left + el.clientWidth, bottom: top + el.clientHeight};
}
const intersect = (a, b) => ({left: Math.max(a.left, b.left), top: Math.max(a.top, b.top),
  right: Math.min(a.right, b.right), bottom: Math.min(a.bottom, b.bottom)});
const outside = (box, clip) => ({
  x: Math.max(0, clip.left - box.left) + Math.max(0, box.right - clip.right),
  y: Math.max(0, clip.top - box.top) + Math.max(0, box.bottom - clip.bottom)});
const hides = o => o === 'hidden' || o === 'clip';
// overflow applies to boxes that hold blocks (block, flex, grid, inline-block...), not to inline
// boxes or display: contents, whose computed overflow is ignored.
const clips = (el, cs) => (cs.overflowX !== 'visible' || cs.overflowY !== 'visible') &&
  cs.display !== 'inline' && cs.display !== 'contents';
const scrolls = o => o === 'auto' || o === 'scroll';

(async () => {
  const out = {};
  const started = performance.now();

  // 1. The page has loaded, and MathJax has typeset it (its startup promise resolves after the
  // first typeset). Its script is async: wait for it to have run rather than trust the load event.
  await within(new Promise(resolve => document.readyState === 'complete' ? resolve()
    : window.addEventListener('load', resolve, {once: true})), opts.timeoutMs);
  const mathjaxStarted = () => window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
  if (document.querySelector('script[src*="mathjax" i]')) {
    await within(new Promise(resolve => { const poll = () => mathjaxStarted() ? resolve() : setTimeout(poll, 25); poll(); }),
                 opts.timeoutMs);
  }
  const mj = window.MathJax;
  if (mj && mj.startup && mj.startup.promise) {
    out.mathjax = await within(
      mj.startup.promise.then(() => 'ok', e => 'failed: ' + (e && e.message || e)), opts.timeoutMs);
  } else {
    out.mathjax = mj ? 'loaded no MathJax component (window.MathJax has no startup)' : 'absent';
  }

  // 2. Every image has loaded or failed: lazy ones are made eager (as scrolling to them would).
  const images = Array.from(document.images);
  for (const img of images) if (img.loading === 'lazy') img.loading = 'eager';
  await within(Promise.all(images.filter(img => !img.complete).map(img => new Promise(resolve => {
    img.addEventListener('load', resolve, {once: true});
    img.addEventListener('error', resolve, {once: true});
  }))), opts.timeoutMs);
  // 3. Fonts (MathJax's included) and two frames: the layout is final.
  await within(document.fonts.ready, opts.timeoutMs);
  await within(new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))), 500);

  out.url = location.href;
  out.title = document.title;
  out.viewport = {width: window.innerWidth, height: window.innerHeight,
                  clientWidth: document.documentElement.clientWidth,
                  scrollWidth: document.documentElement.scrollWidth};
  out.images = images.map(img => ({
    src: img.getAttribute('src') === null ? '(no src attribute)' : (img.currentSrc || img.getAttribute('src')),
    ok: img.complete && img.naturalWidth > 0, where: describe(img)}));

  // 4. Formulas: each span.math/div.math (Sphinx) holds MathJax output; MathJax errors.
  const texOf = new Map();
  try { for (const item of mj.startup.document.math) texOf.set(item.typesetRoot, item.math); }
  catch (e) { /* no MathJax document */ }
  const tex = el => (texOf.get(el) || (el.closest('.math') || el).textContent || '').trim();
  const formulas = Array.from(document.querySelectorAll('span.math, div.math'));
  out.formulas = formulas.length;
  out.untypeset = formulas.filter(el => !el.querySelector('mjx-container'))
    .map(el => ({tex: el.textContent.trim(), where: describe(el)}));
  const containers = Array.from(document.querySelectorAll('mjx-container'));
  out.containers = containers.length;
  out.mathErrors = containers.filter(c => c.querySelector('mjx-merror')).map(c => ({
    tex: tex(c), error: c.querySelector('mjx-merror').getAttribute('data-mjx-error') || ''}));

  // 5. Text as shown (code, scripts and MathJax output left out), one string per block. Text
  // under visibility: hidden counts (the closed phone sidebar shows it once opened); text under
  // display: none does not.
  const SKIP = 'script, style, noscript, template, pre, code, kbd, samp, textarea, ' +
               'mjx-container, mjx-assistive-mml, math, svg';
  const blockOf = new Map(), texts = new Map();
  const block = el => {
    for (let a = el; a; a = a.parentElement) {
      if (!blockOf.has(a)) blockOf.set(a, getComputedStyle(a).display.startsWith('inline'));
      if (!blockOf.get(a)) return a;
    }
    return document.body;
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || !node.data.trim() || parent.closest(SKIP) || !parent.checkVisibility()) continue;
    const b = block(parent);
    texts.set(b, (texts.get(b) || '') + node.data);
  }
  out.texts = Array.from(texts, ([el, text]) => ({where: describe(el), text}));

  // 6. Horizontal overflow: the element reaching furthest right of the viewport whose overflow
  // no ancestor contains (fixed elements do not scroll the page).
  out.overflow = null;
  if (out.viewport.scrollWidth > window.innerWidth) {
    let worst = null;
    for (const el of document.body.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      const right = r.right + window.scrollX;
      if (right <= window.innerWidth + opts.tolerance || (worst && right <= worst.right)) continue;
      let escapes = true;
      for (let a = el; a && a !== document.body; a = a.parentElement) {
        const cs = getComputedStyle(a);
        if (cs.position === 'fixed' || (a !== el && clips(a, cs))) { escapes = false; break; }
      }
      if (escapes) worst = {where: describe(el), right: round(right), width: round(r.width),
                            beyond: round(right - window.innerWidth)};
    }
    out.overflow = worst;
  }

  // 7. Formula geometry. A formula (the box of its mjx-math) is clipped where it extends beyond
  // an ancestor that hides overflow (hidden/clip), or beyond the viewport's left/right edge
  // when no horizontal scroll container holds it. A scroll container lets the reader scroll to it, so
  // beyond it only the container's own box has to stay visible. At the desktop width a display
  // formula must also fit its column (the block around it) without scrolling.
  out.clipped = [];
  for (const c of containers) {
    if (!c.checkVisibility({visibilityProperty: true})) continue;  // e.g. the closed phone sidebar
    const math = c.querySelector(':scope > mjx-math') || c;
    const full = rectOf(math);
    let box = full;
    const display = c.getAttribute('display') === 'true';
    const wrapper = c.parentElement.closest('.math') || c.parentElement;
    const report = (problem, px) => out.clipped.push(
      {tex: tex(c), where: describe(wrapper), display, problem, px: round(px)});
    const by = (a, cs, axis) => (a === wrapper ? 'its own ' + describe(a, false) : describe(a)) +
      ` (overflow-${axis}: ${axis === 'x' ? cs.overflowX : cs.overflowY})`;
    if (display && opts.displayMustFit) {
      const column = c.parentElement.closest('div.math') || c.parentElement;
      const cs = getComputedStyle(column), cb = clipBox(column);
      const content = {left: cb.left + parseFloat(cs.paddingLeft), top: -Infinity,
                       right: cb.right - parseFloat(cs.paddingRight), bottom: Infinity};
      const wider = outside(full, content).x;
      if (wider > opts.tolerance)
        report(`is ${round(wider)} px wider than its column ${describe(column, false)} ` +
               `(${round(content.right - content.left)} px): split it`, wider);
    }
    let scrolledX = false;
    for (let a = c; a && a !== document.body && a !== document.documentElement; a = a.parentElement) {
      const cs = getComputedStyle(a);
      if (!clips(a, cs)) continue;
      const clip = clipBox(a), hidden = outside(box, clip);
      if (hides(cs.overflowX) && hidden.x > opts.tolerance)
        report(`has ${round(hidden.x)} px cut off horizontally by ${by(a, cs, 'x')}`, hidden.x);
      if (hides(cs.overflowY) && hidden.y > opts.tolerance)
        report(`has ${round(hidden.y)} px cut off vertically by ${by(a, cs, 'y')}`, hidden.y);
      if (scrolls(cs.overflowX)) scrolledX = true;
      box = intersect(box, clip);
    }
    if (!scrolledX) {
      const left = Math.max(0, -(box.left + window.scrollX));
      const right = Math.max(0, box.right - document.documentElement.clientWidth);
      if (left + right > opts.tolerance)
        report(`extends ${round(left + right)} px beyond the viewport (no scroll container holds it)`, left + right);
    }
  }
  out.ms = Math.round(performance.now() - started);
  done(out);
})().catch(e => done({error: String(e && e.stack || e)}));
"""


@dataclass
class Visit:
    url: str
    width: int
    facts: dict[str, Any]
    console: list[dict]
    requests: list[str]


# --------------------------------------------------------------------------------------------
# The checks: each returns its problems with one page load, as readable lines.
# --------------------------------------------------------------------------------------------

def _short(text: str, limit: int = 200) -> str:
    """text on one line, at most limit characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _is_favicon_probe(entry: dict, visit: Visit) -> bool:
    # Allowed: the 404 of /favicon.ico at the server root. Chromium requests it by itself (not
    # the page) when a page declares no icon, once per session (it remembers the failure), so it
    # would be pinned on whichever page happened to load first; and a book published under a
    # sub-path does not own the site's root. A page that declares an icon that fails to load is
    # still caught (the 404 names the page's own URL).
    origin = "{0.scheme}://{0.netloc}/favicon.ico".format(urlsplit(visit.url))
    return entry.get("source") == "network" and entry.get("message", "").startswith(origin + " ")


def console_errors(visit: Visit) -> list[str]:
    return [f"console error ({entry.get('source', '?')}): {_short(entry.get('message', ''), 300)}"
            for entry in visit.console
            if entry.get("level") == "SEVERE" and not _is_favicon_probe(entry, visit)]


def foreign_requests(visit: Visit) -> list[str]:
    problems = []
    for url in visit.requests:
        parts = urlsplit(url)
        if parts.scheme in ("http", "https", "ws", "wss", "ftp") and parts.hostname not in LOCAL_HOSTS:
            problems.append(f"request to another host: {_short(url)}")
    return sorted(set(problems))


def broken_images(visit: Visit) -> list[str]:
    return [f"image does not load: {_short(image['src'], 150)} ({image['where']})"
            for image in visit.facts["images"] if not image["ok"]]


def untypeset_math(visit: Visit) -> list[str]:
    facts = visit.facts
    problems = []
    if facts["formulas"] and facts["mathjax"] != "ok":
        problems.append(f"{facts['formulas']} formulas but MathJax is {facts['mathjax']}")
    if facts["untypeset"]:
        first = facts["untypeset"][0]
        problems.append(
            f"{len(facts['untypeset'])} of {facts['formulas']} formulas untypeset "
            f"(no mjx-container; {facts['containers']} in the page), first: "
            f"`{_short(first['tex'], 120)}` ({first['where']})")
    problems += [f"MathJax error \"{_short(error['error'], 120)}\" in `{_short(error['tex'], 120)}`"
                 for error in facts["mathErrors"]]
    return problems


# Raw TeX in text: a control word (\alpha, \ell, \frac; two letters or more, so that a stray
# "\n" is not one), a control symbol (\|, \{, \(, \[, \,), $$, $...$ around something only
# TeX has (a backslash, ^, _ or braces) or around a single letter ($x$), and TeX's braced sub-
# and superscripts outside math (n^{1/p}, vecr(M)_{jm+i}, ‖·‖_{1->1}). Prices ("$5 and $10"),
# shell variables ("$HOME"), identifiers (grid_alpha) and ASCII powers (2^10, X^T) do not match.
RAW_TEX = re.compile(r"""
      \\[A-Za-z]{2,}
    | \\[|{}()\[\],;!_^]
    | \$\$
    | \$(?=[^\s$])[^$\n]{0,300}?[\\^_{}][^$\n]{0,300}?(?<=[^\s$])\$
    | \$[A-Za-z]\$
    | [\w)\]|‖][_^]\{
""", re.X)


def _tex_in(text: str) -> str | None:
    match = RAW_TEX.search(text)
    if not match:
        return None
    start, end = max(0, match.start() - 40), min(len(text), match.end() + 40)
    return f"`{match.group()}` in \"…{_short(text[start:end], 160)}…\""


def raw_tex(visit: Visit) -> list[str]:
    problems = []
    found = _tex_in(visit.facts["title"])
    if found:
        problems.append(f"raw TeX in the title: {found}")
    for block in visit.facts["texts"]:
        found = _tex_in(block["text"])
        if found:
            problems.append(f"raw TeX in the text of {block['where']}: {found}")
    return problems


def overflow(visit: Visit) -> list[str]:
    viewport, worst = visit.facts["viewport"], visit.facts["overflow"]
    if viewport["scrollWidth"] <= viewport["width"]:
        return []
    culprit = (f"; the widest element is {worst['where']} ({worst['width']} px wide, "
               f"{worst['beyond']} px beyond the right edge)" if worst else
               "; no single element found (a transform or pseudo-element?)")
    return [f"the page is {viewport['scrollWidth']} px wide on a {viewport['width']} px screen "
            f"(scrolls sideways by {viewport['scrollWidth'] - viewport['width']} px){culprit}"]


def clipped_formulas(visit: Visit) -> list[str]:
    return [f"{'display' if item['display'] else 'inline'} formula `{_short(item['tex'], 100)}` "
            f"({item['where']}) {item['problem']}" for item in visit.facts["clipped"]]


CHECKS: dict[str, Callable[[Visit], list[str]]] = {
    "console": console_errors,
    "requests": foreign_requests,
    "images": broken_images,
    "math": untypeset_math,
    "raw-tex": raw_tex,
    "overflow": overflow,
    "formulas": clipped_formulas,
}


# --------------------------------------------------------------------------------------------
# Fixtures and tests
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    instance = Browser()
    try:
        yield instance
    finally:
        instance.close()


@pytest.fixture(scope="module")
def book() -> Iterator[Server]:
    if not (HTML / "index.html").is_file():
        pytest.fail(f"{HTML / 'index.html'} is missing: run `grokkit book` first")
    server = Server(HTML)
    yield server
    server.close()


class _Visits:
    """The last page load, shared by that page's checks (the tests run page by page)."""

    key: tuple[str, int] | None = None
    result: Visit | BaseException | None = None


@pytest.fixture(scope="module")
def visits() -> _Visits:
    return _Visits()


def _visit(browser: Browser, book: Server, visits: _Visits, page: str, width: int) -> Visit:
    if visits.key != (page, width):
        visits.key = (page, width)
        try:
            visits.result = browser.visit(book.base + page, width)
        except Exception as error:  # reported by each check of this page, not retried
            visits.result = error
    if isinstance(visits.result, BaseException):
        raise visits.result
    assert visits.result.facts["viewport"]["width"] == width, (
        f"the window is {width} px wide but the page sees {visits.result.facts['viewport']['width']} px")
    return visits.result


def test_book_has_pages() -> None:
    assert (HTML / "index.html").is_file(), f"{HTML} has no index.html: run `grokkit book` first"
    assert PAGES, f"no HTML page under {HTML}"


# --------------------------------------------------------------------------------------------
# The check checks itself: a page with one of each fault, and a clean one.
# --------------------------------------------------------------------------------------------

BAD_PAGE = r"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Bad page \(\alpha\)</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<script async src="MATHJAX"></script></head>
<body style="margin: 8px">
<p>Untypeset: <span class="math mathjax_ignore">\(\alpha\)</span></p>
<p><img alt="no src"> <img src="http://example.invalid/logo.png" alt="remote"></p>
<div style="width: 900px; height: 10px">wide</div>
<div style="width: 120px; overflow: hidden"><span class="math">\(x_1 + x_2 + x_3 + x_4 + x_5 + x_6 + x_7 + x_8 + x_9\)</span></div>
<div class="math" style="width: 200px">\[\sum_{i=1}^{n} a_i b_i c_i d_i e_i f_i g_i h_i j_i k_i l_i m_i n_i o_i p_i q_i r_i\]</div>
<h2>The missing n^{1/p}</h2>
<figure><img src="data:," alt="a figure"><figcaption>Distance divided by 2αβ n^{1/p}</figcaption></figure>
<table><tr><td>vecr(M)_{jm+i} = M_ij</td><td>x^{2}</td></tr></table>
<script>console.error("boom");</script>
</body></html>
""".replace("MATHJAX", MATHJAX)

GOOD_PAGE = r"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Good page</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<script async src="MATHJAX"></script></head>
<body>
<p>It costs $5 and $10; 2^10 steps of grid_alpha, X^T y; a formula <span class="math">\(\alpha\beta_1\)</span>; code
<code>\alpha $x_1$ \(</code></p>
<pre>C:\Users\me $HOME \|x\|</pre>
<div class="math">\[\|\hat b\|_\infty\]</div>
</body></html>
""".replace("MATHJAX", MATHJAX)


@pytest.fixture(scope="module")
def fixture_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    site = tmp_path_factory.mktemp("site")
    (site / "bad.html").write_text(BAD_PAGE, encoding="utf-8")
    (site / "good.html").write_text(GOOD_PAGE, encoding="utf-8")
    (site / "_static").symlink_to(HTML / "_static")  # the book's vendored MathJax
    server = Server(site)
    yield server
    server.close()


def test_checks_catch_a_bad_page(browser: Browser, fixture_site: Server,
                                 visits: _Visits) -> None:
    if not (HTML / "_static" / "mathjax").is_dir():
        pytest.fail(f"{HTML / '_static/mathjax'} is missing: run `grokkit book` first")
    visits.key = None
    narrow = browser.visit(fixture_site.base + "bad.html", 400)
    found = {name: "\n".join(check(narrow)) for name, check in CHECKS.items()}
    assert "boom" in found["console"] and "example.invalid" in found["console"]
    assert found["requests"] == "request to another host: http://example.invalid/logo.png"
    assert "(no src attribute)" in found["images"] and "example.invalid" in found["images"]
    assert "1 of 3 formulas untypeset" in found["math"] and r"`\(\alpha\)`" in found["math"]
    assert r"raw TeX in the title: `\(`" in found["raw-tex"]
    assert r"raw TeX in the text of p: `\(`" in found["raw-tex"]
    for where, tex in (("h2", "n^{"), ("figcaption", "n^{"), ("td", ")_{"), ("td", "x^{")):
        assert f"raw TeX in the text of {where}: `{tex}`" in found["raw-tex"], (where, tex, found["raw-tex"])
    assert "scrolls sideways by 508 px" in found["overflow"]
    assert "widest element is div (900 px wide" in found["overflow"]
    assert "`x_1 + x_2 + x_3 + x_4 + x_5 + x_6 + x_7 + x_8 + x_9` (span.math) has" in found["formulas"]
    assert "cut off horizontally by div (overflow-x: hidden)" in found["formulas"]
    wide = browser.visit(fixture_site.base + "bad.html", WIDE)
    assert "wider than its column div.math" in "\n".join(clipped_formulas(wide))
    assert not overflow(wide)


def test_checks_pass_a_clean_page(browser: Browser, fixture_site: Server,
                                  visits: _Visits) -> None:
    visits.key = None
    for width in WIDTHS:
        visit = browser.visit(fixture_site.base + "good.html", width)
        problems = {name: check(visit) for name, check in CHECKS.items()}
        assert not any(problems.values()), f"good.html at {width} px: {problems}"


# Width-major order: the window is resized once per width; each page is loaded once per width.
CASES = [(width, page, check) for width in WIDTHS for page in PAGES for check in CHECKS]


@pytest.mark.parametrize("width, page, check", CASES,
                         ids=[f"{w}-{p}-{c}" for w, p, c in CASES])
def test_page(browser: Browser, book: Server, visits: _Visits,
              width: int, page: str, check: str) -> None:
    visit = _visit(browser, book, visits, page, width)
    problems = CHECKS[check](visit)
    assert not problems, (f"{page} at {width} px, {check}: {len(problems)} problem(s)\n  - "
                          + "\n  - ".join(problems))


# Navigation at phone width: the ☰ button opens the book contents (primary sidebar), the
# page-contents button opens the page TOC (secondary sidebar). A panel is open when its
# navigation is rendered (not display:none, visibility:hidden or transparent), at least half of
# it (and 100 px) is inside the viewport horizontally, and it is on top: the element at the
# centre of its visible part belongs to its panel (not to a backdrop or to the page behind).
PANELS = {"primary": ("nav.bd-docs-nav", "the book contents"),
          "secondary": ("#pst-page-toc-nav", "the page contents")}

PANEL_STATE_JS = r"""
const nav = document.querySelector(arguments[0]);
if (!nav) return {open: false, state: 'not in the page'};
const panel = nav.closest('dialog, .bd-sidebar-primary, .bd-sidebar-secondary') || nav;
const r = nav.getBoundingClientRect(), cs = getComputedStyle(panel);
const left = Math.max(0, r.left), right = Math.min(window.innerWidth, r.right);
const top = Math.max(0, r.top), bottom = Math.min(window.innerHeight, r.bottom);
const shown = right - left, rendered = nav.checkVisibility({visibilityProperty: true, opacityProperty: true});
let onTop = false, hit = null;
if (shown > 0 && bottom > top) {
  hit = document.elementFromPoint((left + right) / 2, (top + Math.min(bottom, top + 200)) / 2);
  onTop = !!hit && panel.contains(hit);
}
const open = rendered && shown >= Math.min(100, r.width) && shown >= r.width / 2 && bottom > top && onTop;
const dialogs = Array.from(document.querySelectorAll('dialog'))
  .map(d => `dialog#${d.id} ${d.open ? 'open' : 'closed'}`).join(', ');
return {open, state: `${nav.tagName.toLowerCase()} in ${panel.tagName.toLowerCase()}#${panel.id || '?'}` +
  ` at x=${Math.round(r.left)}..${Math.round(r.right)} (viewport 0..${window.innerWidth}),` +
  ` visibility ${cs.visibility}, display ${cs.display}, rendered ${rendered},` +
  ` on top ${onTop}${hit && !onTop ? ' (covered by ' + hit.tagName.toLowerCase() + (hit.className ? '.' + String(hit.className).split(' ')[0] : '') + ')' : ''}; ${dialogs || 'no dialog'}`};
"""

TOGGLE_PAGE = _toggle_page()


def test_panels_shown_on_desktop(browser: Browser, book: Server, visits: _Visits) -> None:
    """At 1400 px both sidebars are part of the layout, and PANEL_STATE_JS sees them open (so a
    failing toggle test is the toggle's fault, not a condition that never holds)."""
    assert TOGGLE_PAGE, "no page of the book has a page TOC"
    visits.key = None
    browser.load(book.base + TOGGLE_PAGE, WIDE)
    for selector, name in PANELS.values():
        state = browser.driver.execute_script(PANEL_STATE_JS, selector)
        assert state["open"], f"{TOGGLE_PAGE} at {WIDE} px: {name} is not shown: {state['state']}"


@pytest.mark.parametrize("which", list(PANELS))
def test_toggle_opens_panel(browser: Browser, book: Server, visits: _Visits, which: str) -> None:
    assert TOGGLE_PAGE, "no page of the book has a page TOC to test the toggles on"
    width, (selector, name) = 400, PANELS[which]
    visits.key = None  # the page is changed by the click
    browser.load(book.base + TOGGLE_PAGE, width)
    driver = browser.driver
    where = f"{TOGGLE_PAGE} at {width} px"
    before = driver.execute_script(PANEL_STATE_JS, selector)
    assert not before["open"], f"{where}: {name} is open before any click: {before['state']}"
    buttons = driver.find_elements(By.CSS_SELECTOR, f".{which}-toggle")
    visible = [button for button in buttons if button.is_displayed()]
    assert visible, (f"{where}: none of the {len(buttons)} .{which}-toggle buttons is visible")
    button = visible[0]
    label = button.get_attribute("aria-label") or button.get_attribute("title") or button.text
    try:
        button.click()
    except WebDriverException as error:
        pytest.fail(f"{where}: clicking .{which}-toggle ({label!r}) failed: {error.msg}")
    deadline = time.monotonic() + 3  # the theme animates the sidebars (about 0.3 s)
    state = driver.execute_script(PANEL_STATE_JS, selector)
    while not state["open"] and time.monotonic() < deadline:
        time.sleep(0.1)
        state = driver.execute_script(PANEL_STATE_JS, selector)
    assert state["open"], (f"{where}: clicking the visible .{which}-toggle ({label!r}, "
                           f"{len(buttons)} in the page) did not open {name} within 3 s: "
                           f"{state['state']}")


def test_primary_toggle_hides_and_shows_the_sidebar_on_desktop(browser: Browser, book: Server,
                                                                visits: _Visits) -> None:
    """At 1400 px the book contents sit beside the text: ☰ hides them, and a second click shows them."""
    assert TOGGLE_PAGE, "no page of the book has a page TOC to test the toggles on"
    selector, name = PANELS["primary"]
    visits.key = None  # the page is changed by the clicks
    browser.load(book.base + TOGGLE_PAGE, WIDE)
    driver, where = browser.driver, f"{TOGGLE_PAGE} at {WIDE} px"
    button = next((b for b in driver.find_elements(By.CSS_SELECTOR, ".primary-toggle") if b.is_displayed()), None)
    assert button is not None, f"{where}: no visible .primary-toggle"
    for click, expected in ((1, False), (2, True)):
        button.click()
        deadline = time.monotonic() + 3  # the sidebar slides (about 0.3 s)
        state = driver.execute_script(PANEL_STATE_JS, selector)
        while state["open"] != expected and time.monotonic() < deadline:
            time.sleep(0.1)
            state = driver.execute_script(PANEL_STATE_JS, selector)
        assert state["open"] == expected, (f"{where}: after click {click} on ☰, {name} should be "
                                           f"{'shown' if expected else 'hidden'}: {state['state']}")
