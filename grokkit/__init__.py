"""grokkit: the computations behind the companion to *Grokking Beyond the Euclidean
Norm of Model Parameters* (Tikeng Notsawo, Dumas, Rabusseau, ICML 2025).

``import grokkit`` loads numpy and torch only; ``grokkit.plots`` (matplotlib) and
``grokkit.baselines`` (cvxpy) load on first use.
"""
from __future__ import annotations

import importlib

from grokkit import data, kernels, metrics, theory
from grokkit.report import Report, resolve

__version__ = "0.1.0"
__all__ = ["data", "kernels", "metrics", "theory", "plots", "baselines", "Report", "resolve"]


def __getattr__(name: str):
    if name in ("plots", "baselines"):
        return importlib.import_module(f"grokkit.{name}")
    raise AttributeError(f"module 'grokkit' has no attribute {name!r}")
