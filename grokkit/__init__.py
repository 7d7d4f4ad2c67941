"""grokkit: the computations behind the companion to *Grokking Beyond the Euclidean
Norm of Model Parameters* (Tikeng Notsawo, Dumas, Rabusseau, ICML 2025).

``import grokkit`` loads numpy and torch only; ``grokkit.plots`` (matplotlib) and
``grokkit.baselines`` (cvxpy) load on first use.
"""
from __future__ import annotations

import importlib
import os
import sys

# Before torch loads its OpenMP runtime: threads waiting at the end of a parallel region sleep
# instead of spinning. With spinning threads, a kernel on two threads ran 10 to 25 times slower
# than on one whenever anything else used the cores (another notebook, a compiler, a browser).
# The user's own setting wins; where torch was loaded before grokkit, the policy is the one it
# started with, and the kernels keep to one CPU thread unless it is "passive"
# (:func:`grokkit.kernels.run.cpu_threads`).
if "torch" not in sys.modules:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
_threads_sleep = os.environ.get("OMP_WAIT_POLICY", "").strip().upper() == "PASSIVE"

from grokkit import data, kernels, metrics, theory
from grokkit.report import Report, resolve

__version__ = "0.1.0"
__all__ = ["data", "kernels", "metrics", "theory", "plots", "baselines", "Report", "resolve"]


def __getattr__(name: str):
    if name in ("plots", "baselines"):
        return importlib.import_module(f"grokkit.{name}")
    raise AttributeError(f"module 'grokkit' has no attribute {name!r}")
