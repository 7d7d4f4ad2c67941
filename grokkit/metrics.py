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

Both return a float per configuration, NaN when the event never happens. A curve is
one row per configuration, (G, T), recorded at ``steps`` (T,), T the number of records.
"""
from __future__ import annotations

import math

import numpy as np

from grokkit._checks import check_finite, check_int, check_option, check_range, show


def _records(steps: np.ndarray, curve: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``steps`` (T,) and ``curve`` as (G, T), T >= 1, checking that they have one entry per record."""
    steps, curve = np.asarray(steps), np.atleast_2d(curve)
    if curve.ndim != 2 or curve.shape[1] < 1 or steps.shape != curve.shape[1:]:
        raise ValueError(f"steps and curve must have shapes (T,) and (G, T) with T >= 1 records, "
                         f"got {steps.shape} and {curve.shape}")
    return steps, curve


def first_step_below(steps: np.ndarray, curve: np.ndarray, threshold: float) -> np.ndarray:
    """First recorded step at which ``curve <= threshold``, per row of ``curve`` (G, T); NaN if never."""
    threshold = check_range("threshold", threshold, -math.inf, math.inf, closed="neither")
    steps, curve = _records(steps, curve)
    below = curve <= threshold
    hit = below.any(axis=1)
    return np.where(hit, steps.astype(float)[below.argmax(axis=1)], np.nan)


def plateau_step(steps: np.ndarray, curve: np.ndarray, K: int = 3, tolerance: float = 0.05,
                 M: int = 2) -> np.ndarray:
    """First recorded step from which ``M`` consecutive records lie within ``tolerance`` (relative)
    of the final value, the mean of the last ``K`` records; per row of ``curve`` (G, T).
    ``K`` and ``M`` are integers in [1, T]."""
    steps, curve = _records(steps, curve)
    T = curve.shape[1]
    K, M = check_int("K", K, 1, T, high_name="T"), check_int("M", M, 1, T, high_name="T")
    check_range("tolerance", tolerance, 0.0, closed="neither")
    final = curve[:, -K:].mean(axis=1, keepdims=True)
    inside = np.abs(curve - final) <= tolerance * np.abs(final)
    run = np.ones((curve.shape[0], T - M + 1), dtype=bool)
    for m in range(M):
        run &= inside[:, m:T - M + 1 + m]
    hit = run.any(axis=1)
    return np.where(hit, steps.astype(float)[run.argmax(axis=1)], np.nan)


def memorization_generalization(traj, rule: str = "threshold", train_threshold: float = 1e-3,
                                test_threshold: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`(t_1, t_2)` per configuration of a :class:`~grokkit.kernels.Trajectory`, by ``rule``
    ``"threshold"`` or ``"plateau"`` (module docstring); the thresholds are finite and > 0."""
    check_option("rule", rule, ("threshold", "plateau"))
    check_range("train_threshold", train_threshold, 0.0, closed="neither")
    check_range("test_threshold", test_threshold, 0.0, closed="neither")
    if rule == "threshold":
        return (first_step_below(traj.steps, traj.train_error, train_threshold),
                first_step_below(traj.steps, traj.test_error, test_threshold))
    return plateau_step(traj.steps, traj.train_error), plateau_step(traj.steps, traj.test_error)


def value_at(steps: np.ndarray, curve: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``curve[g]`` at the first recorded step at or after ``at[g]``: the record of step ``at[g]``
    when it was recorded (as the steps that :func:`first_step_below` and :func:`plateau_step`
    return), else the next record. NaN where ``at`` is NaN; ``at`` is one step per row of
    ``curve`` or one for all, never past the last recorded step."""
    steps, curve = _records(steps, curve)
    written = np.atleast_1d(np.asarray(at, dtype=object))
    if written.ndim != 1 or written.size not in (1, curve.shape[0]):
        raise ValueError(f"at must have one step per curve (G = {curve.shape[0]}) or one for all, "
                         f"got shape {np.shape(at)}")
    at = np.broadcast_to(written.astype(float), curve.shape[:1])
    late = np.flatnonzero(at > steps[-1])
    if late.size:
        raise ValueError(f"at must be at most the last recorded step {show(steps[-1])}, "
                         f"got {show(written[late[0] % written.size])}")
    out = np.full(curve.shape[0], np.nan)
    ok = np.isfinite(at)
    idx = np.searchsorted(steps, at[ok])
    out[ok] = curve[np.flatnonzero(ok), idx]
    return out


def best_so_far(curve: np.ndarray, largest: bool = False) -> np.ndarray:
    r"""The running minimum along the records of each row of ``curve`` (G, T) — Theorem D.4's
    :math:`f_{\rm best}^{(t)} = \min_{t' \le t}f(A^{(t')})` — or, with ``largest``, the running maximum
    (the :math:`L = \max_{t' \le t}\|F(A^{(t')})\|_F` of Theorems D.4 and D.13). NaN entries are skipped.

    On a run recorded at some steps only, the minimum over the records is at least the minimum over
    every step, and the maximum at most: a bound checked with both is checked conservatively."""
    curve = np.atleast_2d(np.asarray(curve, dtype=float))
    if curve.ndim != 2 or curve.shape[1] < 1:
        raise ValueError(f"curve must have shape (G, T) with T >= 1 records, got {curve.shape}")
    return (np.fmax if largest else np.fmin).accumulate(curve, axis=1)


def loglog_slope(x: np.ndarray, y: np.ndarray) -> float:
    r"""Least-squares slope of :math:`\log y` against :math:`\log x` over the finite positive pairs."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def relative_error(b: np.ndarray, b_star: np.ndarray) -> np.ndarray:
    r""":math:`\|b - b^*\|_2/\|b^*\|_2` along the last axis; ``b_star`` finite and nonzero."""
    check_finite("b_star", b_star)
    norm = np.linalg.norm(b_star, axis=-1)
    if not np.all(norm > 0):
        raise ValueError("b_star must be nonzero: the relative error divides by its norm, got all zeros")
    return np.linalg.norm(b - b_star, axis=-1) / norm
