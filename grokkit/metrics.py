r"""Memorization and generalization steps, fits on measured curves and the effective rank of a spectrum

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

import itertools
import math
from dataclasses import dataclass

import numpy as np

from grokkit._checks import check_finite, check_grid, check_int, check_option, check_range, check_seed, show


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


def first_step_above(steps: np.ndarray, curve: np.ndarray, threshold: float) -> np.ndarray:
    """First recorded step at which ``curve >= threshold``, per row of ``curve`` (G, T); NaN if
    never: an accuracy reaching a level (the networks' memorization and generalization steps)."""
    threshold = check_range("threshold", threshold, -math.inf, math.inf, closed="neither")
    steps, curve = _records(steps, curve)
    return first_step_below(steps, -curve, -threshold)


def minimum_step(steps: np.ndarray, curve: np.ndarray) -> np.ndarray:
    """First recorded step at which ``curve`` equals its minimum over the run, per row of
    ``curve`` (G, T): the authors' :math:`t_2` for networks (the first evaluation where the test
    loss or error reaches its minimum). NaN for a row with a non-finite value."""
    steps, curve = _records(steps, curve)
    finite = np.isfinite(curve).all(axis=1)
    first = np.argmin(np.where(finite[:, None], curve, 0.0), axis=1)
    return np.where(finite, steps.astype(float)[first], np.nan)


def stays_below_step(steps: np.ndarray, curve: np.ndarray, threshold: float) -> np.ndarray:
    """First recorded step from which ``curve <= threshold`` at every later record, per row of
    ``curve`` (G, T): the measured counterpart of a bound that holds "for all t >= t1" (Theorem
    D.8, Corollary D.2); NaN if the last record is above ``threshold``. A time-dependent bound
    r(t) is read as ``curve - r(t) <= 0``."""
    threshold = check_range("threshold", threshold, -math.inf, math.inf, closed="neither")
    steps, curve = _records(steps, curve)
    above = ~(curve <= threshold)
    T = curve.shape[1]
    last = T - 1 - np.argmax(above[:, ::-1], axis=1)  # index of the last record above
    first = np.where(above.any(axis=1), last + 1, 0)
    return np.where(first < T, steps.astype(float)[np.minimum(first, T - 1)], np.nan)


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


def smallest_sufficient(values: np.ndarray, passed: np.ndarray) -> np.ndarray:
    r"""The smallest value of a grid from which every larger value of the grid passes, per column
    of ``passed`` (K, G) booleans, ``passed[k, g]`` the outcome of configuration g at
    ``values[k]`` (K,), in any order: e.g. the number of samples needed to generalize, for each
    τ (Appendix D.10). NaN where the largest value fails (the grid does not reach it); a value
    that passes below one that fails does not count."""
    values = np.asarray(values, dtype=float)
    passed = np.asarray(passed)
    if passed.ndim == 1:
        passed = passed[:, None]
    if values.ndim != 1 or values.size < 1 or passed.dtype != bool or passed.shape[:1] != values.shape \
            or passed.ndim != 2:
        raise ValueError(f"values and passed must have shapes (K,) and (K, G) booleans with K >= 1, got "
                         f"{values.shape} and {passed.dtype} {passed.shape}")
    check_finite("values", values)
    order = np.argsort(values)
    values, passed = values[order], passed[order]
    # suffix[k, g]: every value from k up passes
    suffix = np.flip(np.logical_and.accumulate(np.flip(passed, 0), axis=0), 0)
    first = suffix.argmax(axis=0)
    return np.where(suffix.any(axis=0), values[first], np.nan)


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


def sweep_summary(traj, train_threshold) -> dict[str, np.ndarray]:
    r"""What the summaries of a sweep read off each configuration of a run (Figures 14–16 and their
    projected and ISTA twins, as the authors' ``compressed_sensing.ipynb`` reads them), as (G,) arrays:

    * ``t1``: the first recorded step with relative training error <= ``train_threshold``, a
      number or one per configuration (G,) (the authors' thresholds depend on s), NaN if never;
    * ``t2``: :func:`plateau_step` of the relative recovery error (the authors' rule);
    * ``train_error_at_t1`` (NaN where t1 is), ``min_train_error``, ``min_test_error`` (the
      smallest recorded values, which the authors plot) and ``final_train_error``,
      ``final_test_error`` (the last record).

    Thresholds are finite and > 0."""
    G = len(traj.train_error)
    written = np.atleast_1d(np.asarray(train_threshold, dtype=object))
    if written.ndim != 1 or written.size not in (1, G):
        raise ValueError(f"train_threshold must be a number or one per configuration (G = {G}), "
                         f"got shape {np.shape(train_threshold)}")
    thresholds = np.broadcast_to([check_range("train_threshold", v, 0.0, closed="neither") for v in written], (G,))
    t1 = np.full(G, np.nan)
    for value in np.unique(thresholds):  # first_step_below takes one threshold
        rows = thresholds == value
        t1[rows] = first_step_below(traj.steps, traj.train_error[rows], value)
    return {"t1": t1, "t2": plateau_step(traj.steps, traj.test_error),
            "train_error_at_t1": value_at(traj.steps, traj.train_error, t1),
            "min_train_error": traj.train_error.min(axis=1), "min_test_error": traj.test_error.min(axis=1),
            "final_train_error": traj.train_error[:, -1], "final_test_error": traj.test_error[:, -1]}


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


def sign_flips(steps: np.ndarray, b: np.ndarray) -> np.ndarray:
    r"""The fraction of coordinates whose sign flips in one update, :math:`\#\{i: b_i^{(t+1)}b_i^{(t)} < 0\}/n`,
    at every record of the iterates ``b`` (G, T, n) recorded at ``steps`` (T,) that follows a record of
    the previous step (a run's :func:`~grokkit.kernels.log_schedule` records every step up to ``dense``):
    the oscillation of Theorem C.4 and Lemma C.5, where :math:`b^{(t+1)} \approx b^{(t)} - \alpha\beta_1h(b^{(t)})`
    overshoots 0. Shape (G, T); NaN at the first record and where the previous record is more than
    one step earlier. A coordinate that reaches or leaves exactly 0 does not flip."""
    steps, b = np.asarray(steps), np.asarray(b, dtype=float)
    if b.ndim != 3 or b.shape[1] < 1 or steps.shape != b.shape[1:2]:
        raise ValueError(f"steps and b must have shapes (T,) and (G, T, n) with T >= 1 records, "
                         f"got {steps.shape} and {b.shape}")
    out = np.full(b.shape[:2], np.nan)
    consecutive = np.flatnonzero(np.diff(steps) == 1) + 1
    out[:, consecutive] = (b[:, consecutive] * b[:, consecutive - 1] < 0).mean(axis=-1)
    return out


def loglog_slope(x: np.ndarray, y: np.ndarray) -> float:
    r"""Least-squares slope of :math:`\log y` against :math:`\log x` over the finite positive pairs."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def rank_trend(x: np.ndarray, rows: np.ndarray) -> float:
    r"""Mean over the rows of ``rows`` (k, m) of Spearman's rank correlation with ``x`` (m,):
    +1 when every row increases with x, -1 when every row decreases (Figure 42's "larger α
    or β* converges faster but to a worse error"). Ties get their average rank."""
    x = np.asarray(x, dtype=float)
    rows = np.atleast_2d(np.asarray(rows, dtype=float))
    if x.ndim != 1 or x.size < 2 or rows.shape[1] != x.size:
        raise ValueError(f"rows must have shape (k, {x.size}) for x of shape ({x.size},) with at least "
                         f"2 values, got x {x.shape} and rows {rows.shape}")
    check_finite("rows", rows)

    def ranks(v):
        order = np.argsort(v, kind="stable")
        r = np.empty(v.size)
        r[order] = np.arange(v.size)
        for value in np.unique(v):  # average rank of ties
            tie = v == value
            r[tie] = r[tie].mean()
        return r

    rx = ranks(x)
    return float(np.mean([np.corrcoef(rx, ranks(row))[0, 1] for row in rows]))


def effective_rank(singular_values: np.ndarray) -> np.ndarray:
    r"""Effective rank :math:`\exp(-\sum_i p_i\log p_i)`, :math:`p_i = \sigma_i/\sum_j\sigma_j`
    (Roy and Vetterli, 2007), along the last axis of ``singular_values`` (e.g. a
    :class:`~grokkit.kernels.matrix.MatrixTrajectory`'s (G, T, k)): between 1 and the number of
    nonzero singular values, equal to r for r equal ones. The values are finite, nonnegative and
    not all zero along the last axis."""
    sigma = np.asarray(singular_values, dtype=float)
    if sigma.ndim < 1 or sigma.shape[-1] < 1:
        raise ValueError(f"singular_values must have at least one entry along its last axis, got shape {sigma.shape}")
    check_finite("singular_values", sigma)
    if (sigma < 0).any():
        raise ValueError(f"singular_values must be >= 0, got {show(float(sigma.min()))}")
    total = sigma.sum(axis=-1, keepdims=True)
    if not (total > 0).all():
        raise ValueError("singular_values must not be all zero along the last axis (the rank of 0 is 0, "
                         "not an effective rank)")
    p = sigma / total
    return np.exp(-np.sum(p * np.log(np.where(p > 0, p, 1.0)), axis=-1))


MAX_SUPPORTS = 2_000_000  # supports that restricted_isometry enumerates at most


@dataclass(frozen=True)
class RestrictedIsometry:
    r"""The Gram matrices :math:`A_J^\top A_J` of C supports J of one size s (Definition C.1):
    ``supports`` (C, s) column indices, ``lambda_min`` and ``lambda_max`` (C,) their extreme
    eigenvalues, ``one_norm`` (C,) :math:`\|A_J^\top A_J - I_s\|_{1\to 1}` (Proposition C.3)."""

    supports: np.ndarray
    lambda_min: np.ndarray
    lambda_max: np.ndarray
    one_norm: np.ndarray

    @property
    def deltas(self) -> np.ndarray:
        r"""(C,) :math:`\|A_J^\top A_J - I_s\|_{2\to 2} = \max(1 - \lambda_\min, \lambda_\max - 1)` per support."""
        return np.maximum(1.0 - self.lambda_min, self.lambda_max - 1.0)

    @property
    def delta(self) -> float:
        r""":math:`\delta_s = \max_J\|A_J^\top A_J - I_s\|_{2\to 2}` over the supports: the restricted
        isometry constant when they are all the supports, a lower bound when they are a sample."""
        return float(self.deltas.max())

    @property
    def worst(self) -> np.ndarray:
        """The support that attains :attr:`delta`."""
        return self.supports[np.argmax(self.deltas)]

    @property
    def condition(self) -> float:
        r""":math:`\max_J\operatorname{cond}(A_J^\top A_J) = \max_J\lambda_\max/\lambda_\min` (inf if some
        :math:`A_J` is rank deficient)."""
        with np.errstate(divide="ignore"):
            return float(np.max(np.where(self.lambda_min > 0, self.lambda_max / self.lambda_min, np.inf)))


def _gram_spectra(A: np.ndarray, supports: np.ndarray) -> RestrictedIsometry:
    lo, hi, one = [], [], []
    for chunk in np.array_split(supports, max(1, len(supports) // 20_000)):
        sub = A[:, chunk].transpose(1, 0, 2)  # (C, m, s)
        gram = np.einsum("cmi,cmj->cij", sub.conj(), sub)
        lam = np.linalg.eigvalsh(gram)
        lo.append(lam[:, 0])
        hi.append(lam[:, -1])
        one.append(np.abs(gram - np.eye(chunk.shape[1])).sum(axis=1).max(axis=1))
    return RestrictedIsometry(supports=supports, lambda_min=np.concatenate(lo), lambda_max=np.concatenate(hi),
                              one_norm=np.concatenate(one))


def _matrix_and_size(A, s) -> tuple[np.ndarray, int]:
    check_finite("A", A)
    A = np.asarray(A)
    if A.ndim != 2:
        raise ValueError(f"A must be a matrix (2-d array), got shape {A.shape}")
    return A, check_int("s", s, 1, A.shape[1], high_name="n")


def restricted_isometry(A: np.ndarray, s: int) -> RestrictedIsometry:
    r"""Every support of size ``s`` of the columns of A (m, n), for the exact restricted isometry
    constant (Definition C.1)

    .. math:: \delta_s(A) = \max_{|J| = s}\|A_J^\top A_J - I_s\|_{2\to 2},

    the smallest δ with :math:`(1-\delta)\|x\|_2^2 \le \|Ax\|_2^2 \le (1+\delta)\|x\|_2^2` for every
    s-sparse x (:attr:`RestrictedIsometry.delta`). Enumerates :math:`\binom ns` supports, at most
    :data:`MAX_SUPPORTS`: for larger matrices, :func:`restricted_isometry_sample`."""
    A, s = _matrix_and_size(A, s)
    count = math.comb(A.shape[1], s)
    if count > MAX_SUPPORTS:
        raise ValueError(f"s must leave at most {MAX_SUPPORTS} supports to enumerate (C(n, s) = C({A.shape[1]}, {s}) "
                         f"= {count}); use restricted_isometry_sample, got s = {s}")
    supports = np.array(list(itertools.combinations(range(A.shape[1]), s)), dtype=int).reshape(count, s)
    return _gram_spectra(A, supports)


def restricted_isometry_sample(A: np.ndarray, s: int, draws: int, seed: int = 0) -> RestrictedIsometry:
    r"""``draws`` supports of size ``s`` drawn uniformly at random (seeded): a Monte-Carlo lower
    bound :math:`\max_{J \in \text{sample}}\|A_J^\top A_J - I_s\|_{2\to 2} \le \delta_s(A)` on the restricted
    isometry constant (Definition C.1, Theorem C.2), for matrices too large to enumerate."""
    A, s = _matrix_and_size(A, s)
    draws = check_int("draws", draws, 1)
    rs = np.random.RandomState(check_seed("seed", seed))
    supports = np.sort(np.argsort(rs.rand(draws, A.shape[1]), axis=1)[:, :s], axis=1)
    return _gram_spectra(A, supports)


def low_rank_isometry_ratios(F: np.ndarray, shape, r: int, draws: int, seed: int = 0) -> np.ndarray:
    r"""Monte-Carlo sample of :math:`\|\mathcal F(X)\|_2^2/\|X\|_F^2` over ``draws`` random matrices X of
    rank ``r`` and ``shape`` (n1, n2) (Definition C.2): :math:`X = UV^\top` with Gaussian factors,
    :math:`\mathcal F(X) = F\operatorname{vec}(X)` for F (q, n1·n2) on the column-major vec. Every
    ratio lies in :math:`[1-\delta_r, 1+\delta_r]`, so :math:`\max|\text{ratio} - 1|` is a lower
    bound on the rank-r restricted isometry constant :math:`\delta_r(\mathcal F)`."""
    check_finite("F", F)
    F = np.asarray(F)
    if not isinstance(shape, (tuple, list)) or len(shape) != 2:
        raise ValueError(f"shape must be a pair (n1, n2), got {show(shape)}")
    n1, n2 = check_int("n1", shape[0], 1), check_int("n2", shape[1], 1)
    if F.ndim != 2 or F.shape[1] != n1 * n2:
        raise ValueError(f"F must have shape (q, n1*n2) = (q, {n1 * n2}), got {F.shape}")
    r = check_int("r", r, 1, min(n1, n2), high_name="min(n1, n2)")
    draws = check_int("draws", draws, 1)
    rs = np.random.RandomState(check_seed("seed", seed))
    X = rs.randn(draws, n1, r) @ rs.randn(draws, r, n2)
    vecs = X.transpose(0, 2, 1).reshape(draws, n1 * n2)  # column-major vec of each X
    return np.sum((vecs @ F.T) ** 2, axis=1) / np.sum(vecs**2, axis=1)


def relative_error(b: np.ndarray, b_star: np.ndarray) -> np.ndarray:
    r""":math:`\|b - b^*\|_2/\|b^*\|_2` along the last axis; ``b_star`` finite and nonzero."""
    check_finite("b_star", b_star)
    norm = np.linalg.norm(b_star, axis=-1)
    if not np.all(norm > 0):
        raise ValueError("b_star must be nonzero: the relative error divides by its norm, got all zeros")
    return np.linalg.norm(b - b_star, axis=-1) / norm


def cosine(b: np.ndarray, reference: np.ndarray) -> np.ndarray:
    r""":math:`\cos\angle(b, w) = \langle b, w\rangle/(\|b\|_2\|w\|_2)` along the last axis of
    ``b`` (..., n), for a finite nonzero ``reference`` w (n,): how well recorded iterates point
    along a reference solution (Lyu et al.'s Corollaries 3.6 and 3.7 state convergence in
    direction). NaN where b = 0 (the diagonal network's β(0))."""
    b, reference = np.asarray(b, dtype=float), np.asarray(reference, dtype=float)
    if reference.ndim != 1 or b.shape[-1:] != reference.shape:
        raise ValueError(f"b and reference must have shapes (..., n) and (n,), got {b.shape} and {reference.shape}")
    check_finite("reference", reference)
    norm = np.linalg.norm(reference)
    if norm == 0:
        raise ValueError("reference must be nonzero: the cosine divides by its norm, got all zeros")
    lengths = np.linalg.norm(b, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(lengths > 0, (b @ reference) / (lengths * norm), np.nan)


def support_norms(b: np.ndarray, b_star: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The landscape coordinates of §C.6 (Figure 10): :math:`u = \|b_I\|_2` and
    :math:`v = \|b_{[n]\setminus I}\|_2`, :math:`I = \operatorname{supp}(b^*)`, along the last axis of
    ``b`` (..., n). ``b_star`` is (n,), or one ground truth per leading row of ``b`` (G, n) for
    ``b`` (G, ..., n) (an N sweep, each configuration with its own :math:`b^*`); finite and
    nonzero. Returns ``(u, v)``, each of ``b``'s shape without its last axis."""
    check_finite("b_star", b_star)
    b, b_star = np.asarray(b, dtype=float), np.asarray(b_star, dtype=float)
    if b_star.ndim not in (1, 2) or b.ndim < b_star.ndim or b.shape[-1] != b_star.shape[-1] \
            or (b_star.ndim == 2 and b.shape[0] != b_star.shape[0]):
        raise ValueError(f"b and b_star must have shapes (..., n) and (n,), or (G, ..., n) and (G, n), "
                         f"got {b.shape} and {b_star.shape}")
    if not (b_star != 0).any(axis=-1).all():
        raise ValueError("b_star must be nonzero: its support I defines the landscape, got all zeros")
    on = (b_star != 0).reshape(b_star.shape[:1] + (1,) * (b.ndim - 2) + b_star.shape[-1:]) \
        if b_star.ndim == 2 else b_star != 0
    return (np.sqrt(np.sum(np.where(on, b, 0.0) ** 2, axis=-1)),
            np.sqrt(np.sum(np.where(on, 0.0, b) ** 2, axis=-1)))


# --- background: training longer under weight decay against a smaller initialisation ---------------
#
# Lyu et al. (2024) show that a large initialisation and a small weight decay first hold the iterates
# at the kernel solution (their Theorem 3.9, problem (K2)) and later bring them to the rich one
# (Theorem 3.10, problem (R2)); for the u² − v² network these are the minimum-ℓ2 and the minimum-ℓ1
# interpolants, the two limits of Woodworth et al.'s Theorem 1. The measurements below read both
# phases off recorded iterates.

def _iterates(b) -> np.ndarray:
    b = np.asarray(b, dtype=float)
    if b.ndim < 1 or b.shape[-1] < 1:
        raise ValueError(f"b must have shape (..., n) with n >= 1, got {b.shape}")
    return b


def solution_distances(b, references) -> np.ndarray:
    r"""The distances :math:`\|b^{(t)} - r_k\|_2` of iterates ``b`` (..., n), e.g. a run's recorded
    (G, T, n), to each reference solution :math:`r_k`, the rows of ``references`` (K, n) (the
    minimum-ℓ2 and minimum-ℓ1 interpolants of Lyu et al.'s Theorems 3.9 and 3.10, a Lasso or ridge
    solution). Returns (K, ...): row k is the distance to :math:`r_k` at every iterate.
    ``references`` finite, of b's length n."""
    b = _iterates(b)
    references = np.asarray(references, dtype=float)
    if references.ndim == 1:
        references = references[None]
    if references.ndim != 2 or references.shape[1] != b.shape[-1]:
        raise ValueError(f"references must have shape (K, n) with n = {b.shape[-1]} (the length of b), "
                         f"got {references.shape}")
    check_finite("references", references)
    return np.stack([np.linalg.norm(b - r, axis=-1) for r in references])


def transition_step(steps, b, early, late) -> np.ndarray:
    r"""The end of the early phase: the first recorded step from which the iterate stays at least as
    close to ``late`` as to ``early``, :math:`\|b^{(t)} - r_{\rm late}\|_2 \le \|b^{(t)} - r_{\rm early}\|_2`
    at every later record; per configuration of ``b`` (G, T, n) recorded at ``steps`` (T,), NaN
    where the last record is still closer to ``early``. For a large initialisation and a small
    weight decay, ``early`` is the kernel solution (Lyu et al., Theorem 3.9) and ``late`` the rich
    one (Theorem 3.10), and the step is their transition, predicted at a time
    :math:`\approx\frac1\lambda\log\alpha`. ``early`` and ``late`` are finite, distinct, of length n."""
    b = _iterates(b)
    if b.ndim != 3:
        raise ValueError(f"b must have shape (G, T, n), got {b.shape}")
    early, late = np.asarray(early, dtype=float), np.asarray(late, dtype=float)
    for name, r in (("early", early), ("late", late)):
        if r.shape != b.shape[-1:]:
            raise ValueError(f"{name} must have shape ({b.shape[-1]},) (the length of b), got {r.shape}")
        check_finite(name, r)
    if not np.any(early != late):
        raise ValueError("early and late must differ: the transition moves from one to the other, got equal vectors")
    d_early, d_late = solution_distances(b, np.stack([early, late]))
    return stays_below_step(steps, d_late - d_early, 0.0)


def at_effective_scale(steps, b, *, alpha, init_scale, beta2, scales) -> np.ndarray:
    r"""The iterates of a diagonal-network run with weight decay at given effective initialisation
    scales: for configuration g and each scale :math:`s_k` of ``scales`` (K,), the iterate at the time
    where :math:`\zeta_g e^{-\beta_{2,g}\alpha_g t} = s_k` (interpolated linearly in t between the two
    records around it), from ``b`` (G, T, n) recorded at ``steps`` (T,). Returns (G, K, n), NaN
    where the scale is above :math:`\zeta_g` or was not reached by the last record.

    Why: on gradient flow with coupled weight decay :math:`\beta_2`, each branch of
    :math:`\beta = w_+^{\odot2} - w_-^{\odot2}` obeys :math:`\dot w_\pm = w_\pm\odot(\mp2\tilde X^\top r - \beta_2)`,
    so :math:`w_\pm(t) = \zeta e^{-\beta_2t}\exp(\mp2\tilde X^\top\!\int_0^t r)`: the form of the flow
    without weight decay (Woodworth et al., eq. 17) at the scale :math:`\zeta e^{-\beta_2t}`, the
    :math:`\alpha e^{-\lambda t}` of Lyu et al.'s analysis. Runs that meet a scale at different
    times then sit at nearly the same β.

    ``alpha`` (the learning rate), ``init_scale`` > 0 and ``beta2`` > 0 are numbers or one per
    configuration (G,); ``scales`` finite and > 0."""
    b = _iterates(b)
    steps = np.asarray(steps, dtype=float)
    if b.ndim != 3 or steps.shape != b.shape[1:2] or steps.size < 2:
        raise ValueError(f"steps and b must have shapes (T,) and (G, T, n) with T >= 2 records, got "
                         f"{steps.shape} and {b.shape}")
    G = b.shape[0]
    per = {}
    for name, value in (("alpha", alpha), ("init_scale", init_scale), ("beta2", beta2)):
        v = np.atleast_1d(check_grid(name, value, 0.0, math.inf, closed="neither"))
        if v.ndim != 1 or v.size not in (1, G):
            raise ValueError(f"{name} must be a number or one per configuration (G = {G}), got shape {np.shape(value)}")
        per[name] = np.broadcast_to(v, (G,))
    scales = np.atleast_1d(check_grid("scales", scales, 0.0, math.inf, closed="neither"))
    # the time t = log(ζ/s)/β₂ in steps, per configuration and scale
    when = np.log(per["init_scale"][:, None] / scales[None, :]) / (per["beta2"] * per["alpha"])[:, None]
    out = np.full((G, scales.size, b.shape[-1]), np.nan)
    ok = (when >= steps[0]) & (when <= steps[-1])
    g, k = np.nonzero(ok)
    right = np.clip(np.searchsorted(steps, when[g, k]), 1, steps.size - 1)
    left = right - 1
    width = steps[right] - steps[left]
    weight = ((when[g, k] - steps[left]) / np.where(width > 0, width, 1.0))[:, None]
    out[g, k] = (1 - weight) * b[g, left] + weight * b[g, right]
    return out
