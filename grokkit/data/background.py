r"""The data of the background chapter: the two papers the grokking paper builds on.

Woodworth et al. (2020), kernel and rich regimes: a flat sparse signal to measure with
:func:`grokkit.data.sparse.signal_problem`, and diagonal measurements of a matrix. Their rank-1
Gaussian target is ``grokkit.data.matrix.low_rank_matrix(d, d, 1, generator="gaussian")`` and their
masks are :func:`grokkit.data.matrix.completion_mask`'s.

Lyu et al. (2024), the dichotomy of early and late implicit biases: the two classification data
sets of their Figure 1 and the multiplication table of their Figure 3.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grokkit._checks import check_finite, check_int, check_range, check_seed
from grokkit.data.sparse import Design

# --- Woodworth et al. (2020) ------------------------------------------------------------------


def flat_sparse_signal(n: int, s: int, seed: int = 0) -> np.ndarray:
    r"""The planted predictor of Woodworth et al. §4: :math:`\beta^*` with ``s`` entries equal to
    :math:`1/\sqrt s` at random positions (so :math:`\|\beta^*\|_2 = 1`). Measure it with
    :func:`grokkit.data.sparse.signal_problem` (their :math:`x_n \sim \mathcal N(0, I)` is
    ``variance=1.0``; their noise variance 0.01 is ``snr = 100/N``, since the signal power is 1)."""
    n = check_int("n", n, 1)
    s = check_int("s", s, 1, n, high_name="n")
    rs = np.random.RandomState(check_seed("seed", seed))
    b_star = np.zeros(n)
    b_star[rs.choice(n, s, replace=False)] = 1 / np.sqrt(s)
    return b_star


def diagonal_measurements(X: np.ndarray) -> np.ndarray:
    r"""The sensing matrix (N, d²) of diagonal measurements :math:`X_n = \operatorname{diag}(x_n)`
    (Woodworth et al. §6, Theorem 4): :math:`\langle X_n, W\rangle = \sum_i x_{ni}W_{ii}`, on the
    column-major :math:`\operatorname{vec}W` (entry :math:`W_{ii}` at i(d + 1)), for a design X (N, d)
    whose rows are the :math:`x_n`. A matrix model trained on it sees only its diagonal, a
    d-dimensional regression on X."""
    check_finite("X", X)
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must be a matrix (N, d), got shape {X.shape}")
    N, d = X.shape
    out = np.zeros((N, d * d))
    out[:, np.arange(d) * (d + 1)] = X
    return out


# --- Lyu et al. (2024): linear classification with a diagonal network, and matrix completion ---
#
# The two data sets of Lyu et al.'s Figure 1 (§3.2.3): sparse classification on the hypercube
# (grokking, Figure 1a) and a Gaussian with a margin along a dense direction (misgrokking,
# Figure 1b). Their d, n, k are grokkit's n (dimension), N (training points) and s (sparsity).
# Labels are ±1 floats, inputs float64 (N, n); one ``RandomState(seed)`` draws everything.


@dataclass(frozen=True)
class ClassificationProblem(Design):
    r"""A binary linear classification task :math:`y = \operatorname{sign}\langle w^*, x\rangle`
    (numpy, float64): training inputs ``X`` (N, n) and labels ``y`` (N,) in {−1, +1}, a test set
    ``X_test``, ``y_test`` drawn the same way, the ground truth ``w_star`` (n,), the ``seed`` and a
    one-sentence ``note`` on where the data came from."""

    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    w_star: np.ndarray
    seed: int
    note: str = ""


def _labels(scores: np.ndarray) -> np.ndarray:
    """±1 labels of ``scores``: +1 where positive, −1 elsewhere (the authors' ``(s > 0) * 2 - 1``)."""
    return np.where(scores > 0, 1.0, -1.0)


def sparse_classification(n: int = 1000, s: int = 3, N: int = 100, *, n_test: int = 1000,
                          seed: int = 0) -> ClassificationProblem:
    r"""Lyu et al.'s sparse linear classification (§3.2.3, Figure 1a; Appendix E.2).

    Inputs :math:`x \sim \mathrm{Unif}\{\pm1\}^n`; the ground truth :math:`w^*` has its first
    ``s`` coordinates drawn from :math:`\mathrm{Unif}\{\pm1\}^s` and the others 0; labels
    :math:`y = \operatorname{sign}\langle w^*, x\rangle`. For odd ``s`` (Appendix E.2's assumption)
    no score is 0; for even ``s`` a score of 0 gets the label −1, as in the authors' code.
    :math:`w^*` has :math:`\ell_2` margin :math:`1/\sqrt s` and :math:`\ell_1` margin
    :math:`1/s` on every point (the proofs of Theorems E.4 and E.5).

    One ``RandomState(seed)`` draws the signs of :math:`w^*`, the ``N`` training inputs, then the
    ``n_test`` test inputs (so ``n_test`` leaves the training set unchanged). Every argument is
    checked before anything is drawn.
    """
    n = check_int("n", n, 1)
    s = check_int("s", s, 1, n, high_name="n")
    N = check_int("N", N, 1)
    n_test = check_int("n_test", n_test, 1)
    seed = check_seed("seed", seed)
    rs = np.random.RandomState(seed)
    w_star = np.zeros(n)
    w_star[:s] = rs.randint(0, 2, s) * 2.0 - 1.0
    X = rs.randint(0, 2, (N, n)) * 2.0 - 1.0
    X_test = rs.randint(0, 2, (n_test, n)) * 2.0 - 1.0
    return ClassificationProblem(
        X=X, y=_labels(X @ w_star), X_test=X_test, y_test=_labels(X_test @ w_star), w_star=w_star,
        seed=seed, note=f"x uniform on the hypercube {{-1, +1}}^{n}, labels sign<w*, x> with w* the first "
                        f"{s} coordinates random signs; {N} training and {n_test} test points, seed {seed}.")


def margin_classification(n: int = 10_000, N: int = 32, gamma: float = 25.0, *, n_test: int = 1000,
                          seed: int = 0) -> ClassificationProblem:
    r"""Lyu et al.'s misgrokking data (§3.2.3, Figure 1b): a Gaussian split by a margin γ.

    :math:`w^*` is a uniformly random unit vector (a normalised Gaussian); each point is
    :math:`z \sim \mathcal N(0, I_n)`, :math:`y = \operatorname{sign}\langle z, w^*\rangle` and
    :math:`x = z + y\frac{\gamma}{2}w^*`, so :math:`y\langle w^*, x\rangle \ge \gamma/2`: the
    classes are separated by an :math:`\ell_2` margin of at least γ/2 along a dense direction,
    while :math:`w^*/\|w^*\|_1` has an :math:`\ell_1` margin of only about
    :math:`\frac{\gamma}{2}\sqrt{\pi/(2n)}`. The population accuracy of any linear classifier
    has a closed form (:func:`grokkit.theory.background.margin_classification_accuracy`).

    One ``RandomState(seed)`` draws :math:`w^*`, the ``N`` training points, then the ``n_test``
    test points (the authors' order; ``n_test`` leaves the training set unchanged). Every argument
    is checked before anything is drawn.
    """
    n = check_int("n", n, 1)
    N = check_int("N", N, 1)
    gamma = check_range("gamma", gamma, 0.0, closed="left")
    n_test = check_int("n_test", n_test, 1)
    seed = check_seed("seed", seed)
    rs = np.random.RandomState(seed)
    w_star = rs.standard_normal(n)
    w_star /= np.linalg.norm(w_star)
    Z = rs.standard_normal((N, n))
    Z_test = rs.standard_normal((n_test, n))
    y, y_test = _labels(Z @ w_star), _labels(Z_test @ w_star)
    return ClassificationProblem(
        X=Z + (gamma / 2) * y[:, None] * w_star, y=y, X_test=Z_test + (gamma / 2) * y_test[:, None] * w_star,
        y_test=y_test, w_star=w_star, seed=seed,
        note=f"z ~ N(0, I_{n}), y = sign<z, w*> for a random unit w*, x = z + y (gamma/2) w* with gamma = "
             f"{gamma:g}; {N} training and {n_test} test points, seed {seed}.")


def multiplication_table(d: int) -> np.ndarray:
    r"""Lyu et al.'s multiplication table (§3.3.3, Figure 3): :math:`X^*_{ij} = ij/d^2` for
    i, j = 0, …, d − 1, that is :math:`X^* = uu^\top` with :math:`u = (0, 1/d, \dots, (d-1)/d)`,
    a symmetric matrix of rank 1, float64 (d, d); d ≥ 2 (d = 1 is the zero matrix)."""
    d = check_int("d", d, 2)
    u = np.arange(d) / d
    return np.outer(u, u)
