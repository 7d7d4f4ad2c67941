"""Sphinx extension: load MathJax on every page, not only on pages whose body has math.

Page titles with math (e.g. "Figure 1 — ... $\\alpha\\beta_1$") appear in the navigation
sidebar of every page; without MathJax a page shows them as raw TeX.
"""
from __future__ import annotations

from typing import Any


def setup(app: Any) -> dict[str, Any]:
    app.set_html_assets_policy("always")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
