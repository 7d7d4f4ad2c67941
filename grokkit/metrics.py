r"""Memorization and generalization steps, and fits on measured curves (paper §2, spec §3.9).

Two rules are provided because the paper and the authors' code disagree:

* **threshold** (paper captions): :math:`t_1` is the first recorded step with relative
  training error :math:`\le` a threshold, :math:`t_2` the first with relative recovery
  error :math:`\le` a threshold. The captions say :math:`10^{-4}`; the code uses
  :math:`10^{-3}`, because :math:`10^{-4}` is never reached for :math:`\beta_1 = 10^{-5}`.
* **plateau** (authors' code, ``find_stable_step_final_value``): the first recorded step
  from which the curve stays within ±5 % of its final value (mean of the last K
  records) for M consecutive records. It needs no threshold but needs the run to have
  reached its final plateau.

Both return a float per configuration, NaN when the event never happens.
"""
from __future__ import annotations

import numpy as np

from grokkit._checks import check_int, check_option, check_range


def first_step_below(steps: np.ndarray, curve: np.ndarray, threshold: float) -> np.ndarray:
    """First recorded step at which ``curve <= threshold``, per row of ``curve`` (G, T); NaN if never."""
    curve = np.atleast_2d(curve)
    below = curve <= threshold
    hit = below.any(axis=1)
    return np.where(hit, np.asarray(steps, dtype=float)[below.argmax(axis=1)], np.nan)


def plateau_step(steps: np.ndarray, curve: np.ndarray, K: int = 3, tolerance: float = 0.05,
                 M: int = 2) -> np.ndarray:
    """First recorded step from which ``M`` consecutive records lie within ``tolerance`` (relative)
    of the final value, the mean of the last ``K`` records; per row of ``curve`` (G, T)."""
    K, M = check_int("K", K, 1), check_int("M", M, 1)
    check_range("tolerance", tolerance, 0.0, closed="neither")
    curve = np.atleast_2d(curve)
    final = curve[:, -K:].mean(axis=1, keepdims=True)
    inside = np.abs(curve - final) <= tolerance * np.abs(final)
    T = curve.shape[1]
    run = np.ones((curve.shape[0], T - M + 1), dtype=bool)
    for m in range(M):
        run &= inside[:, m:T - M + 1 + m]
    hit = run.any(axis=1)
    return np.where(hit, np.asarray(steps, dtype=float)[run.argmax(axis=1)], np.nan)


def memorization_generalization(traj, rule: str = "threshold", train_threshold: float = 1e-3,
                                test_threshold: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`(t_1, t_2)` per configuration of a :class:`~grokkit.kernels.Trajectory`, by ``rule``
    ``"threshold"`` or ``"plateau"`` (module docstring)."""
    check_option("rule", rule, ("threshold", "plateau"))
    if rule == "threshold":
        return (first_step_below(traj.steps, traj.train_error, train_threshold),
                first_step_below(traj.steps, traj.test_error, test_threshold))
    return plateau_step(traj.steps, traj.train_error), plateau_step(traj.steps, traj.test_error)


def value_at(steps: np.ndarray, curve: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``curve[g]`` at recorded step ``at[g]`` (NaN where ``at`` is NaN)."""
    curve = np.atleast_2d(curve)
    at = np.atleast_1d(at)
    out = np.full(curve.shape[0], np.nan)
    ok = np.isfinite(at)
    idx = np.searchsorted(steps, at[ok])
    out[ok] = curve[np.flatnonzero(ok), idx]
    return out


def loglog_slope(x: np.ndarray, y: np.ndarray) -> float:
    r"""Least-squares slope of :math:`\log y` against :math:`\log x` over the finite positive pairs."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def relative_error(b: np.ndarray, b_star: np.ndarray) -> np.ndarray:
    r""":math:`\|b - b^*\|_2/\|b^*\|_2` along the last axis."""
    return np.linalg.norm(b - b_star, axis=-1) / np.linalg.norm(b_star, axis=-1)
