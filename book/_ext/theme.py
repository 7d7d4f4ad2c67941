"""Sphinx extension: grokkit's fixes to the book's theme (sphinx-book-theme 1.3, pydata-sphinx-theme 0.17).

- MathJax on every page, not only on pages whose body has math: the search page typesets the
  formulas its results quote (``pages.js``).
- ``theme.js`` (deferred, so it runs before the themes' own scripts): makes the sidebar (☰) and
  page-contents toggles work again, see the file.
- ``theme.css``: the few Font Awesome icons the theme shows (buttons, admonitions), as inline SVG
  masks. The theme's 1.5 MB ``scripts/fontawesome.js`` (every Font Awesome icon) is replaced by
  the near-empty ``book/_static/scripts/fontawesome.js``: files in ``html_static_path`` overwrite
  the theme's files of the same name, and the theme's templates hard-code that script tag.
- No general index page (the book defines no index entries, so ``genindex.html`` was empty; with
  ``html_use_index`` off Sphinx neither writes nor links it).
- A default colour mode, ``auto``: without one, pydata-sphinx-theme logs "Got invalid theme mode"
  as a console error on a reader's first visit (nothing in localStorage yet).
"""
from __future__ import annotations

from typing import Any


def _defaults(app: Any, config: Any) -> None:
    config.html_use_index = False
    config.html_context = {"default_mode": "auto", **(config.html_context or {})}


def setup(app: Any) -> dict[str, Any]:
    app.set_html_assets_policy("always")
    app.connect("config-inited", _defaults)
    app.add_css_file("theme.css")
    app.add_js_file("theme.js", loading_method="defer")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
