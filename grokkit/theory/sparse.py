r"""The theory's predicted quantities for sparse recovery (Theorem 2.1, Theorems C.6, C.8, C.9,
C.12, Lemma C.7, Corollary C.2, §C.6.2, §C.9, and the coherence and RIP of Appendix C.1–C.3).

Notation: :math:`A = \tilde X^\top\tilde X + \beta_2 I_n`, :math:`\lambda_k` the eigenvalues of
:math:`\tilde X^\top\tilde X` (the paper's :math:`\sigma_k`), :math:`\rho_p = \|I - \alpha A\|_{p\to p}`.
For N < n and :math:`\beta_2 = 0`, 0 is an eigenvalue, so :math:`\rho_2 = 1` and every bound
with :math:`1/(1-\rho_2)` is vacuous for the whole vector; the meaningful version restricts
to the row space of :math:`\tilde X` (:func:`rho_range`, :func:`range_projector`).

The hyper-parameters are checked as the kernels check them: :math:`\alpha > 0`,
:math:`\beta_1, \beta_2 \ge 0`, all finite; ``X`` must be finite.
"""
from __future__ import annotations

import math

import numpy as np

from grokkit._checks import check_finite, check_grid, check_int, check_option, check_range, check_seed
from grokkit.data.sparse import coherence, dictionary, least_squares
from grokkit.kernels.run import MAX_STEPS


def _hyper(alpha, beta1) -> tuple[np.ndarray, np.ndarray]:
    """``alpha`` in (0, inf) and ``beta1`` in [0, inf) as float arrays, checked as the kernels check them."""
    return check_grid("alpha", alpha, 0.0), check_grid("beta1", beta1, 0.0, closed="left")


def eigenvalues(X: np.ndarray) -> np.ndarray:
    r"""Eigenvalues of :math:`\tilde X^\top\tilde X`, descending (n of them)."""
    check_finite("X", X)
    return np.clip(np.linalg.eigvalsh(X.T @ X)[::-1], 0.0, None)


def step_size_limit(X: np.ndarray, beta2: float = 0.0) -> float:
    r"""Stability limit :math:`2/(\lambda_\max(\tilde X^\top\tilde X) + \beta_2)` of Theorem 2.1."""
    beta2 = check_range("beta2", beta2, 0.0, closed="left")
    return 2.0 / (eigenvalues(X)[0] + beta2)


def rho(X: np.ndarray, alpha: float, beta2: float = 0.0, p: float = 2) -> float:
    r""":math:`\rho_p = \|I_n - \alpha(\tilde X^\top\tilde X + \beta_2 I_n)\|_{p\to p}` for p in {1, 2, inf}."""
    check_option("p", p, (1, 2, math.inf))
    check_finite("X", X)
    alpha = check_range("alpha", alpha, 0.0, closed="neither")
    beta2 = check_range("beta2", beta2, 0.0, closed="left")
    M = np.eye(X.shape[1]) - alpha * (X.T @ X + beta2 * np.eye(X.shape[1]))
    return float(np.linalg.norm(M, {1: 1, 2: 2, math.inf: np.inf}[p]))


def rho_range(X: np.ndarray, alpha, beta2=0.0, tol: float = 1e-10):
    r""":math:`\rho_r = \max_{k \le r}|1 - \alpha(\lambda_k + \beta_2)|` over the r nonzero eigenvalues:
    the contraction of :math:`I - \alpha A` on the row space of :math:`\tilde X`. A float for scalar
    ``alpha`` and ``beta2``, else an array of their broadcast shape."""
    alpha, beta2 = np.broadcast_arrays(check_grid("alpha", alpha, 0.0),
                                       check_grid("beta2", beta2, 0.0, closed="left"))
    tol = check_range("tol", tol, 0.0, 1.0, closed="left")
    lam = eigenvalues(X)
    lam = lam[lam > tol * lam[0]]
    out = np.abs(1.0 - alpha[..., None] * (lam + beta2[..., None])).max(axis=-1)
    return float(out) if out.ndim == 0 else out


def range_projector(X: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    r""":math:`P_V = VV^\top`, the orthogonal projector onto the row space of :math:`\tilde X`."""
    check_finite("X", X)
    tol = check_range("tol", tol, 0.0, 1.0, closed="left")
    _, sv, Vt = np.linalg.svd(X, full_matrices=False)
    V = Vt[sv > tol * sv[0]].T
    return V @ V.T


def range_distance(X: np.ndarray, b: np.ndarray, b_hat: np.ndarray) -> np.ndarray:
    r""":math:`\|P_V(b - \hat b)\|_2` along the last axis of ``b``: the distance to :math:`\hat b`
    of the component on the row space of :math:`\tilde X`, the quantity that Lemma C.7 and
    Theorem C.8 bound when N < n."""
    return np.linalg.norm((np.asarray(b) - b_hat) @ range_projector(X), axis=-1)


def ridge_iterates(X, y, b1, alpha: float, beta2: float, t) -> np.ndarray:
    r"""The iterates of gradient descent without the :math:`\ell_1` term (:math:`\beta_1 = 0`, Theorem C.6) in
    closed form: :math:`\hat b_{\beta_2}` is a fixed point, so

    .. math:: b^{(t+1)} = \hat b_{\beta_2} + (I_n - \alpha A)^t(b^{(1)} - \hat b_{\beta_2}),
       \qquad A = \tilde X^\top\tilde X + \beta_2 I_n,\quad \hat b_{\beta_2} = A^\dagger\tilde X^\top y^*.

    On the null space of :math:`\tilde X`, :math:`I_n - \alpha A = (1 - \alpha\beta_2)I_n`: what a large
    initialisation puts there decays only like :math:`(1 - \alpha\beta_2)^t`, on the time scale
    :math:`1/(\alpha\beta_2)` (§C.9, Figures 25 and 26), towards :math:`\hat b_{\beta_2}`, not :math:`b^*`.

    ``X`` (N, n), ``y`` (N,), ``b1`` (n,) finite; ``alpha > 0``, ``beta2 >= 0`` scalars; ``t`` (K,) numbers of
    updates, integers in [0, 1e15]. Returns :math:`b^{(t+1)}` for each t, shape (K, n), through the
    eigendecomposition of :math:`\tilde X^\top\tilde X` (exact for any t, no loop)."""
    X, y, b1 = _inputs(X, y, b1)
    if b1.ndim != 1:
        raise ValueError(f"b1 must have shape (n,), got {b1.shape}")
    alpha = check_range("alpha", alpha, 0.0, closed="neither")
    beta2 = check_range("beta2", beta2, 0.0, closed="left")
    t = np.atleast_1d(np.asarray(t))
    if t.ndim != 1:
        raise ValueError(f"t must be a scalar or 1-D (K,), got shape {t.shape}")
    t = np.array([check_int("t", k, 0, MAX_STEPS) for k in t], dtype=float)
    lam, Q = np.linalg.eigh(X.T @ X)
    factor = 1.0 - alpha * (np.clip(lam, 0.0, None) + beta2)
    b_hat = least_squares(X, y, beta2)
    return b_hat + (factor ** t[:, None] * ((b1 - b_hat) @ Q)) @ Q.T


def null_space_energy(X, b, tol: float = 1e-10) -> np.ndarray:
    r""":math:`\|(I_n - VV^\top)b\|_2^2`, the energy of ``b`` (n,) outside the row space of :math:`\tilde X`: the
    lower bound of Theorem C.10 on :math:`\|\hat b - b^*\|_2^2`, reached by noiseless least squares with
    :math:`\beta_2 = 0`. ``X`` (..., N, n): one value per matrix (a stack of draws is one batched SVD),
    singular values at most ``tol`` times the largest counted as 0."""
    X, b = np.asarray(X, dtype=float), np.asarray(b, dtype=float)
    if X.ndim < 2 or b.shape != X.shape[-1:]:
        raise ValueError(f"X and b must have shapes (..., N, n) and (n,), got {X.shape} and {b.shape}")
    check_finite("X", X)
    check_finite("b", b)
    tol = check_range("tol", tol, 0.0, 1.0, closed="left")
    _, sv, Vt = np.linalg.svd(X, full_matrices=False)
    keep = sv > tol * sv[..., :1]
    inside = np.einsum("...kn,...k->...n", Vt, np.where(keep, Vt @ b, 0.0))   # VV^T b
    return np.sum((b - inside) ** 2, axis=-1)   # the residual's norm: never below 0 by rounding


def _inputs(X, y, b) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``X`` (N, n), ``y`` (N,) and ``b`` (..., n), finite, as float arrays, with matching sizes."""
    X, y, b = (np.asarray(v, dtype=float) for v in (X, y, b))
    if X.ndim != 2 or y.shape != X.shape[:1] or b.ndim < 1 or b.shape[-1] != X.shape[1]:
        raise ValueError(f"X, y and b must have shapes (N, n), (N,) and (..., n), got {X.shape}, {y.shape} "
                         f"and {b.shape}")
    for name, value in (("X", X), ("y", y), ("b", b)):
        check_finite(name, value)
    return X, y, b


def _per_configuration(name: str, value, lead: tuple) -> np.ndarray:
    """A coefficient >= 0 given as a scalar or one value per configuration (the leading axes ``lead``
    of the iterates, or the first of them), shaped to broadcast against an array of shape ``lead``."""
    v = check_grid(name, value, 0.0, closed="left")
    if v.ndim > len(lead) or v.shape != lead[:v.ndim]:
        raise ValueError(f"{name} must be a scalar or have the leading shape of b {lead}, got shape {v.shape}")
    return v.reshape(v.shape + (1,) * (len(lead) - v.ndim))


def gradient(X, y, b, beta2=0.0) -> np.ndarray:
    r""":math:`G_{\beta_2}(b) = \nabla g_{\beta_2}(b) = \tilde X^\top(\tilde Xb - y^*) + \beta_2 b` (§C.6) for every
    vector of ``b`` (..., n); ``beta2`` a scalar or one per configuration (the leading axis of ``b``).
    Lemma C.5 compares its norm with :math:`\beta_1\|h(b)\|_2`; Theorem C.6 drives it to 0."""
    X, y, b = _inputs(X, y, b)
    beta2 = _per_configuration("beta2", beta2, b.shape[:-1])[..., None]
    return (b @ X.T - y) @ X + beta2 * b


def subgradient(X, y, b, beta1, beta2=0.0) -> np.ndarray:
    r""":math:`F(b) = G_{\beta_2}(b) + \beta_1h(b)`, :math:`h = \operatorname{sign}` (sign 0 = 0): the direction of
    the kernels' update :math:`b^{(t+1)} = b^{(t)} - \alpha_tF(b^{(t)})` (eq. 22), whose norm Theorem C.3's
    L bounds. ``b`` (..., n); ``beta1``, ``beta2`` scalars or one per configuration."""
    X, y, b = _inputs(X, y, b)
    beta1 = _per_configuration("beta1", beta1, b.shape[:-1])[..., None]
    return gradient(X, y, b, beta2) + beta1 * np.sign(b)


def objective(X, y, b, beta1, beta2=0.0) -> np.ndarray:
    r"""The objective of §C.6, :math:`f(b) = \tfrac12\|\tilde Xb - y^*\|_2^2 + \tfrac{\beta_2}2\|b\|_2^2 + \beta_1\|b\|_1`,
    for every vector of ``b`` (..., n): shape ``b.shape[:-1]``. ``beta1`` and ``beta2`` (>= 0) are scalars or
    one value per configuration (the leading axis of ``b``: a run's recorded iterates (G, T, n) with
    ``config["beta1"]``). At the ground truth, with :math:`y^* = \tilde Xb^* + \xi`, this is Theorem C.3's
    :math:`f^* = \beta_1\|b^*\|_1 + \tfrac{\beta_2}2\|b^*\|_2^2 + \tfrac12\|\xi\|_2^2` (the paper prints
    :math:`\|\xi\|_2^2`: the noise enters the objective with its ½)."""
    X, y, b = _inputs(X, y, b)
    beta1 = _per_configuration("beta1", beta1, b.shape[:-1])
    beta2 = _per_configuration("beta2", beta2, b.shape[:-1])
    return 0.5 * np.sum((b @ X.T - y) ** 2, axis=-1) + 0.5 * beta2 * np.sum(b**2, axis=-1) \
        + beta1 * np.abs(b).sum(axis=-1)


def dominance_threshold(X, beta2=0.0) -> float:
    r"""The threshold of Theorem C.4 (Lemma C.5 with :math:`L = \lambda_\max(\tilde X^\top\tilde X) + \beta_2`, the
    Lipschitz constant of :math:`G_{\beta_2}`): :math:`(\lambda_\max + \beta_2)/\sqrt n`, above which the paper
    predicts that :math:`\beta_1h` dominates the updates (0.712 for the data of Figure 2)."""
    beta2 = check_range("beta2", beta2, 0.0, closed="left")
    lam = eigenvalues(X)
    return float((lam[0] + beta2) / math.sqrt(lam.size))


def memorization_radius(n: int, alpha, beta1, rho_p, p: float = 2):
    r"""Radius of Theorem 2.1 / C.8: :math:`\|b^{(t)} - \hat b\|_p \le 2\alpha\beta_1 n^{1/p}/(1-\rho_p)`
    for :math:`t \ge t_1` (infinite where :math:`\rho_p \ge 1`); broadcasts over arrays."""
    n, p = check_int("n", n, 1), check_option("p", p, (1, 2, math.inf))
    alpha, beta1, rho_p = np.broadcast_arrays(*_hyper(alpha, beta1),
                                              check_grid("rho_p", rho_p, 0.0, closed="left"))
    with np.errstate(divide="ignore"):
        return np.where(rho_p < 1, 2.0 * alpha * beta1 * n ** (1.0 / p) / (1.0 - rho_p), np.inf)


def memorization_time(dist0, n: int, alpha, beta1, rho_p, p: float = 2):
    r""":math:`t_1 = \lceil -\ln(1 + (1-\rho_p)\|b^{(1)}-\hat b\|_p/(\alpha\beta_1 n^{1/p}))/\ln\rho_p\rceil`
    (Theorem C.8; infinite unless :math:`0 < \rho_p < 1`, and for :math:`\beta_1 = 0`); broadcasts over arrays."""
    n, p = check_int("n", n, 1), check_option("p", p, (1, 2, math.inf))
    dist0, alpha, beta1, rho_p = np.broadcast_arrays(
        check_grid("dist0", dist0, 0.0, closed="left"), *_hyper(alpha, beta1),
        check_grid("rho_p", rho_p, 0.0, closed="left"))
    ok = (rho_p > 0) & (rho_p < 1)
    r = np.where(ok, rho_p, 0.5)
    with np.errstate(divide="ignore"):
        t1 = np.ceil(-np.log1p((1.0 - r) * dist0 / (alpha * beta1 * n ** (1.0 / p))) / np.log(r))
    return np.where(ok, t1, np.inf)


def _memorization_inputs(X, y, b1, alpha, beta1, beta2):
    """The checked inputs of the memorization times: one problem (N, n), (N,) or a stack (G, N, n),
    (G, N); ``b1`` (n,); ``alpha`` > 0, ``beta1``, ``beta2`` ≥ 0."""
    X, y, b1 = np.asarray(X, dtype=float), np.asarray(y, dtype=float), np.asarray(b1, dtype=float)
    if X.ndim not in (2, 3) or y.shape != X.shape[:-1] or b1.shape != X.shape[-1:]:
        raise ValueError(f"X, y and b1 must have shapes (N, n), (N,) and (n,), or (G, N, n), (G, N) and (n,), "
                         f"got {X.shape}, {y.shape} and {b1.shape}")
    for name, a in (("X", X), ("y", y), ("b1", b1)):
        check_finite(name, a)
    return (X, y, b1, check_range("alpha", alpha, 0.0, closed="neither"),
            check_range("beta1", beta1, 0.0, closed="left"), check_range("beta2", beta2, 0.0, closed="left"))


def row_space_memorization_time(X, y, b1, alpha, beta1, beta2=0.0):
    r"""Theorem C.8's :math:`t_1` on the row space of :math:`\tilde X` (p = 2), the form that holds when
    N < n and :math:`\beta_2 = 0` (module docstring): :func:`memorization_time` with
    :math:`\rho_r` (:func:`rho_range`) and :math:`d_0 = \|P_V(b^{(1)} - \hat b)\|_2` (:func:`range_distance`),
    :math:`\hat b` the least-squares solution for ``beta2``.

    ``X`` (N, n) and ``y`` (N,) are one problem, or (G, N, n) and (G, N) a stack of problems
    (:func:`grokkit.data.sparse.stack_problems`: zero rows change neither :math:`P_V`, :math:`\rho_r` nor
    :math:`\hat b`); ``b1`` (n,) the initial iterate (:func:`grokkit.kernels.initial_point`). Returns
    a float, or one per problem (G,). (The authors' code, :func:`code_memorization_time`, uses the whole
    :math:`\|b^{(1)} - \hat b\|_2`, :math:`1 - \alpha(\lambda_{\min}^+ + \beta_2)` and no :math:`\sqrt n`.)"""
    X, y, b1, alpha, beta1, beta2 = _memorization_inputs(X, y, b1, alpha, beta1, beta2)
    n = X.shape[-1]
    t1 = [memorization_time(range_distance(Xg, b1, least_squares(Xg, yg, beta2)), n, alpha, beta1,
                            rho_range(Xg, alpha, beta2))
          for Xg, yg in zip(X.reshape(-1, *X.shape[-2:]), y.reshape(-1, y.shape[-1]))]
    return float(t1[0]) if X.ndim == 2 else np.array(t1, dtype=float)


def code_memorization_time(X, y, b1, alpha, beta1, beta2=0.0, tol: float = 1e-10):
    r"""The memorization time that the authors' code draws beside the measured :math:`t_1` in the
    summaries of the s × N sweeps (``compressed_sensing.ipynb``, the cells that compute ``t_1_approx``
    for Figures 14, 16, 18, 20, 22 and 24):

    .. math:: -\ln\!\big(1 + (1-\rho)\|b^{(1)} - \hat b\|_2/(\alpha\beta_1)\big)\big/\ln\rho,
              \qquad \rho = 1 - \alpha(\lambda^+_{\min} + \beta_2),

    :math:`\lambda^+_{\min}` the smallest nonzero eigenvalue of :math:`\tilde X^\top\tilde X` and
    :math:`\hat b` the least-squares solution for ``beta2``: Theorem C.8's formula without its
    :math:`n^{1/p}`, without the ceiling, on the whole vector, with :math:`1 - \alpha\lambda^+_{\min}`
    in place of :math:`\rho_r` (equal to it when :math:`\alpha(\lambda_{\min}^+ + \lambda_\max) \le 2`).
    It is :math:`\ln(\sqrt n)/(-\ln\rho)` steps or more above :func:`row_space_memorization_time`
    when the two ρ agree. Shapes and checks as :func:`row_space_memorization_time`; infinite where
    :math:`\rho \notin (0, 1)` or :math:`\beta_1 = 0`."""
    X, y, b1, alpha, beta1, beta2 = _memorization_inputs(X, y, b1, alpha, beta1, beta2)
    tol = check_range("tol", tol, 0.0, 1.0, closed="left")
    out = []
    for Xg, yg in zip(X.reshape(-1, *X.shape[-2:]), y.reshape(-1, y.shape[-1])):
        lam = eigenvalues(Xg)
        r = 1.0 - alpha * (lam[lam > tol * lam[0]].min() + beta2)
        dist0 = np.linalg.norm(b1 - least_squares(Xg, yg, beta2))
        ok = 0.0 < r < 1.0 and beta1 > 0.0
        out.append(-math.log1p((1.0 - r) * dist0 / (alpha * beta1)) / math.log(r) if ok else math.inf)
    return out[0] if X.ndim == 2 else np.array(out, dtype=float)


def distance_bound(dist0, n: int, alpha, beta1, rho_p, t, p: float = 2):
    r"""The right-hand side of Lemma C.7 (and D.7) after ``t`` updates,
    :math:`\rho_p^t\|b^{(1)}-\hat b\|_p + \alpha\beta_1 n^{1/p}\sum_{k<t}\rho_p^k`, that is
    :math:`\rho_p^t d_0 + \alpha\beta_1 n^{1/p}(1-\rho_p^t)/(1-\rho_p)` for :math:`\rho_p \ne 1` and
    :math:`d_0 + \alpha\beta_1 n^{1/p}\,t` for :math:`\rho_p = 1`.

    It unrolls :math:`\|b^{(k+1)}-\hat b\|_p \le \rho_p\|b^{(k)}-\hat b\|_p + \alpha\beta_1 n^{1/p}` (eq. 46) from
    the initial iterate :math:`b^{(1)}` (``dist0`` = :math:`d_0 = \|b^{(1)}-\hat b\|_p`): the bound on the
    iterate after t updates, :math:`b^{(t+1)}` (the paper's statement writes :math:`b^{(t)}`, one update
    too many). It holds for every :math:`\rho_p \ge 0`; it is a ball only for :math:`\rho_p < 1`.
    Broadcasts over arrays (``t`` >= 0 the number of updates)."""
    n, p = check_int("n", n, 1), check_option("p", p, (1, 2, math.inf))
    dist0, alpha, beta1, rho_p, t = np.broadcast_arrays(
        check_grid("dist0", dist0, 0.0, closed="left"), *_hyper(alpha, beta1),
        check_grid("rho_p", rho_p, 0.0, closed="left"), check_grid("t", t, 0.0, closed="left"))
    one = rho_p == 1
    with np.errstate(over="ignore"):
        geometric = np.where(one, t, (1.0 - rho_p**t) / np.where(one, 0.5, 1.0 - rho_p))
    return rho_p**t * dist0 + alpha * beta1 * n ** (1.0 / p) * geometric


def ball_entry_time(dist0, n: int, alpha, beta1, rho_p, p: float = 2, condition: str = "corrected"):
    r""":math:`\tilde t_1` of Corollary C.2 (and D.2), corrected: the number of updates after which
    :math:`\|b^{(t+1)}-\hat b\|_p \le 2\alpha\beta_1 n^{1/p}/(1-\rho_p)` for good,

    .. math:: \tilde t_1 = \Big\lceil -\ln\frac{(1-\rho_p)d_0}{\alpha\beta_1 n^{1/p}}\Big/\ln\rho_p\Big\rceil
              \ \text{ if } d_0 > \frac{\alpha\beta_1 n^{1/p}}{1-\rho_p}, \text{ else } 0,

    :math:`d_0 = \|b^{(1)}-\hat b\|_p` (``dist0``): from there :math:`\rho_p^t d_0 \le \alpha\beta_1 n^{1/p}/(1-\rho_p)`,
    and Lemma C.7 gives the ball. (The paper's condition lacks :math:`n^{1/p}`: with it,
    the formula can return a negative step; see :func:`grokkit.theory.matrix.ball_entry_time`.) Infinite unless
    :math:`0 < \rho_p < 1` and :math:`\beta_1 > 0`; broadcasts over arrays.

    ``condition="printed"`` uses the formula when :math:`d_0 > \alpha\beta_1/(1-\rho_p)`, the paper's
    condition: for p < inf and :math:`\alpha\beta_1/(1-\rho_p) < d_0 \le \alpha\beta_1 n^{1/p}/(1-\rho_p)`
    it returns a negative step (as :func:`grokkit.theory.matrix.ball_entry_time`)."""
    check_option("condition", condition, ("corrected", "printed"))
    return _ball_entry_time(dist0, n, alpha, beta1, rho_p, p, printed=condition == "printed")


def _ball_entry_time(dist0, n, alpha, beta1, rho_p, p, printed: bool):
    n, p = check_int("n", n, 1), check_option("p", p, (1, 2, math.inf))
    dist0, alpha, beta1, rho_p = np.broadcast_arrays(
        check_grid("dist0", dist0, 0.0, closed="left"), *_hyper(alpha, beta1),
        check_grid("rho_p", rho_p, 0.0, closed="left"))
    ok = (rho_p > 0) & (rho_p < 1) & (beta1 > 0)
    r, scale = np.where(ok, rho_p, 0.5), np.where(ok, alpha * beta1 * n ** (1.0 / p), 1.0)
    condition = (alpha * beta1 if printed else scale) / (1.0 - r)
    with np.errstate(divide="ignore"):
        t = np.ceil(-np.log((1.0 - r) * dist0 / scale) / np.log(r))
    return np.where(ok, np.where(dist0 > condition, t, 0.0), np.inf)


def gradient_bound(X: np.ndarray, alpha, beta1, rho_p, t, beta2: float = 0.0, p: float = 2):
    r"""§C.6.2, eqs. (77)–(78): after :math:`t \ge t_1` updates (Theorem C.8),
    :math:`\|G_{\beta_2}(b^{(t+1)})\|_p \le \|\tilde X^\top\tilde X + \beta_2 I_n\|_{p\to p}\,
    2\alpha\beta_1 n^{1/p}(1-\rho_p^t)/(1-\rho_p)`, since :math:`G_{\beta_2}(\hat b) = 0` and
    :math:`G_{\beta_2}` is linear (for p = 2 the norm is :math:`\lambda_\max + \beta_2`). Broadcasts
    over ``alpha``, ``beta1``, ``rho_p`` and ``t`` (updates, >= 0) as :func:`distance_bound`."""
    check_finite("X", X)
    beta2 = check_range("beta2", beta2, 0.0, closed="left")
    check_option("p", p, (1, 2, math.inf))
    A = X.T @ X + beta2 * np.eye(X.shape[1])
    norm = float(np.linalg.norm(A, {1: 1, 2: 2, math.inf: np.inf}[p]))
    return norm * 2.0 * distance_bound(0.0, X.shape[1], alpha, beta1, rho_p, t, p)


def generalization_step(t1, b_t1: np.ndarray, alpha, beta1):
    r"""The paper's generalization step (§C.6.2, after eq. 79):
    :math:`t_2 = t_1 + \lfloor\|b^{(t_1)}\|_\infty/(\alpha\beta_1)\rfloor`, the steps that the bare
    shrinkage :math:`b \leftarrow b - \alpha\beta_1 h(b)` (Theorem C.12) needs to bring every component
    of :math:`b^{(t_1)}` (last axis of ``b_t1``) into :math:`[-\alpha\beta_1, \alpha\beta_1]`; infinite for
    :math:`\beta_1 = 0`. Broadcasts over arrays."""
    check_finite("b_t1", b_t1)
    t1 = check_grid("t1", t1, 0.0, closed="left")
    alpha, beta1 = _hyper(alpha, beta1)
    with np.errstate(divide="ignore"):
        return t1 + np.floor(np.abs(np.asarray(b_t1)).max(axis=-1) / (alpha * beta1))


L1_ENTRY_RULES = ("exact", "printed")


def l1_iterates(b1, alpha, steps: int) -> np.ndarray:
    r"""The bare ℓ₁ subgradient dynamics of Lemma C.11 (a scalar) and Theorem C.12 (coordinate-wise),
    :math:`b^{(t+1)} = b^{(t)} - \alpha h(b^{(t)})` with :math:`h = \operatorname{sign}` (sign 0 = 0): the update
    of §C.6.2 after memorization, with α for αβ₁. Returns an array of shape (``steps`` + 1, \*b1.shape)
    whose row t − 1 is :math:`b^{(t)}`, t = 1 … ``steps`` + 1 (row 0 is :math:`b^{(1)}`, the paper's
    1-based start).

    Exact in float64 when α and every :math:`b^{(1)}_i` are multiples of one power of two
    :math:`2^{-k}` with :math:`|b^{(1)}_i| 2^k < 2^{53}` (binary fractions, as
    :func:`grokkit.data.sparse.binary_fractions` draws them): every :math:`b - \alpha` is then computed without
    rounding, so an integer ratio :math:`b^{(1)}_i/\alpha` reaches 0 exactly."""
    b = np.asarray(b1, dtype=float)
    check_finite("b1", b)
    alpha = check_range("alpha", alpha, 0.0, closed="neither")
    steps = check_int("steps", steps, 0, MAX_STEPS)
    out = np.empty((steps + 1,) + b.shape)
    out[0] = b
    for t in range(steps):
        out[t + 1] = out[t] - alpha * np.sign(out[t])
    return out


def l1_entry_time(b1, alpha, rule: str = "exact") -> np.ndarray:
    r"""The first t ≥ 1 with :math:`|b^{(t)}| \le \alpha` under :func:`l1_iterates`, per entry of ``b1``
    (Lemma C.11 (2); for a vector, the largest entry's is Theorem C.12 (2)'s time for
    :math:`\|b^{(t)}\|_\infty \le \alpha`, since :math:`[-\alpha, \alpha]` is invariant).

    ``rule="exact"``: :math:`\max(1, \lceil|b^{(1)}|/\alpha\rceil)`, since :math:`|b^{(t)}| = |b^{(1)}| - (t-1)\alpha`
    until then. ``rule="printed"``: the lemma's ":math:`|b^{(t)}| \le \alpha` iff :math:`t > \lfloor|b^{(1)}|/\alpha\rfloor`",
    i.e. :math:`\lfloor|b^{(1)}|/\alpha\rfloor + 1`: one step late when the ratio is a positive integer
    (then :math:`|b^{(t)}| = \alpha` at :math:`t = |b^{(1)}|/\alpha`), equal otherwise."""
    b = np.asarray(b1, dtype=float)
    check_finite("b1", b)
    alpha = check_range("alpha", alpha, 0.0, closed="neither")
    check_option("rule", rule, L1_ENTRY_RULES)
    ratio = np.abs(b) / alpha
    return np.maximum(1.0, np.ceil(ratio)) if rule == "exact" else np.floor(ratio) + 1.0


def generalization_delay(b_hat: np.ndarray, alpha, beta1):
    r"""Predicted delay :math:`\Delta t = \|\hat b\|_\infty/(\alpha\beta_1)` (Theorem 2.1, up to a constant);
    infinite for :math:`\beta_1 = 0`."""
    check_finite("b_hat", b_hat)
    alpha, beta1 = _hyper(alpha, beta1)
    with np.errstate(divide="ignore"):
        return np.abs(b_hat).max() / (alpha * beta1)


def generalization_delay_code(b_hat: np.ndarray, b_star: np.ndarray, alpha, beta1):
    r"""The authors' code's prediction :math:`\|\hat b - b^*\|_\infty/(\alpha\beta_1)` (``sparse_recovery/compressed_sensing.py``)."""
    check_finite("b_hat", b_hat)
    check_finite("b_star", b_star)
    alpha, beta1 = _hyper(alpha, beta1)
    with np.errstate(divide="ignore"):
        return np.abs(b_hat - b_star).max() / (alpha * beta1)


def _residual_inputs(X, b_star, beta2, noise_std):
    """X̃ (N, n), b* (n,), β₂ and σ_ξ of Theorem C.9, checked."""
    X, b = np.asarray(X, dtype=float), np.asarray(b_star, dtype=float)
    if X.ndim != 2 or b.shape != X.shape[1:]:
        raise ValueError(f"X and b_star must have shapes (N, n) and (n,), got {X.shape} and {b.shape}")
    check_finite("X", X)
    check_finite("b_star", b)
    beta2 = check_range("beta2", beta2, 0.0, closed="left")
    noise_std = check_range("noise_std", noise_std, 0.0, closed="left")
    return X, b, beta2, noise_std


def _residual_terms(X, b_star, beta2, noise_std, tol):
    """The nonzero eigenvalues λ_i of X̃ᵀX̃, the coordinates (V_Xᵀ b*)_i, β₂ and the noise terms of Theorem C.9."""
    X, b, beta2, noise_std = _residual_inputs(X, b_star, beta2, noise_std)
    tol = check_range("tol", tol, 0.0, 1.0, closed="left")
    lam, V = np.linalg.eigh(X.T @ X)
    keep = lam > tol * max(lam.max(), 0.0) if lam.max() > 0 else np.zeros(len(lam), bool)
    lam, proj = lam[keep], V[:, keep].T @ b  # λ_i and (V_Xᵀ b*)_i, i ≤ r_X
    noise = noise_std**2 * (np.sum((beta2 / (lam + beta2)) ** 2) + X.shape[0] - keep.sum())
    return lam, proj, beta2, noise


def least_squares_residual_printed(X, b_star, beta2: float, noise_std: float = 0.0, tol: float = 1e-10) -> float:
    r"""Theorem C.9 **as printed**: :math:`\mathbb E_\xi\|\tilde X\hat b - y^*\|_2^2 = \sum_{i\le r_X}
    \big(\frac{\beta_2\lambda_i}{\lambda_i+\beta_2}\big)^2(V_X^\top b^*)_i^2 + \sigma_\xi^2\sum_{i\le r_X}
    \big(\frac{\beta_2}{\lambda_i+\beta_2}\big)^2 + \sigma_\xi^2(N - r_X)`, :math:`y^* = \tilde Xb^* + \xi`,
    Cov ξ = σ_ξ² I_N, :math:`\lambda_i` the nonzero eigenvalues of :math:`\tilde X^\top\tilde X`,
    ``noise_std`` = σ_ξ, ``X`` = X̃ (N, n), ``b_star`` (n,).

    The first term is wrong (the proof's last line has the right one): its factor :math:`\lambda_i^2` should be :math:`\lambda_i`
    (:func:`least_squares_residual_corrected`). The two agree when every nonzero λ_i is 1 or β₂ = 0.
    Theorem D.9 is the same statement on vec A (:func:`grokkit.theory.matrix.least_squares_residual_printed`)."""
    lam, proj, beta2, noise = _residual_terms(X, b_star, beta2, noise_std, tol)
    return float(np.sum((beta2 * lam / (lam + beta2)) ** 2 * proj**2) + noise)


def least_squares_residual_corrected(X, b_star, beta2: float, noise_std: float = 0.0, tol: float = 1e-10) -> float:
    r"""Theorem C.9 **corrected** (the proof's last line): :math:`\mathbb E_\xi\|\tilde X\hat b
    - y^*\|_2^2 = \sum_{i\le r_X}\frac{\beta_2^2\lambda_i}{(\lambda_i+\beta_2)^2}(V_X^\top b^*)_i^2 +
    \sigma_\xi^2\sum_{i\le r_X}\big(\frac{\beta_2}{\lambda_i+\beta_2}\big)^2 + \sigma_\xi^2(N - r_X)`. Differs from
    :func:`least_squares_residual_printed` only in the first term (:math:`\lambda_i` in place of
    :math:`\lambda_i^2`): with :math:`\tilde X = U_X\Lambda_X^{1/2}V_X^\top`, the signal part of the residual
    is :math:`U_X\operatorname{diag}(\beta_2\sqrt{\lambda_i}/(\lambda_i+\beta_2))V_X^\top b^*`."""
    lam, proj, beta2, noise = _residual_terms(X, b_star, beta2, noise_std, tol)
    return float(np.sum(beta2**2 * lam / (lam + beta2) ** 2 * proj**2) + noise)


def least_squares_residual_monte_carlo(X, b_star, beta2: float, noise_std: float, *, draws: int = 10_000,
                                       seed: int = 0) -> tuple[float, float]:
    r"""Monte-Carlo estimate of the left-hand side of Theorem C.9, :math:`\mathbb E_\xi\|\tilde X\hat b - y^*\|_2^2`,
    without the theorem's algebra: ``draws`` noise vectors :math:`\xi \sim \mathcal N(0, \sigma_\xi^2 I_N)`
    (``noise_std`` = σ_ξ) from ``RandomState(seed)``, :math:`y^* = \tilde Xb^* + \xi`,
    :math:`\hat b = (\tilde X^\top\tilde X + \beta_2 I_n)^\dagger\tilde X^\top y^*`
    (:func:`grokkit.data.sparse.least_squares`, one solve for all draws), and the squared residual of
    each draw. Returns (mean, standard error of the mean), to compare with
    :func:`least_squares_residual_printed` and :func:`least_squares_residual_corrected`."""
    X, b, beta2, noise_std = _residual_inputs(X, b_star, beta2, noise_std)
    draws = check_int("draws", draws, 2)
    rs = np.random.RandomState(check_seed("seed", seed))
    Y = (X @ b)[:, None] + noise_std * rs.randn(X.shape[0], draws)  # (N, draws): y* = X̃b* + ξ
    residual = np.sum((X @ least_squares(X, Y, beta2) - Y) ** 2, axis=0)
    return float(residual.mean()), float(residual.std(ddof=1) / math.sqrt(draws))


def gaussian_coherence_bound(n: int, N: int, alpha: float, beta) -> tuple[np.ndarray, np.ndarray]:
    r"""Theorem C.1 as stated: for :math:`X \in \mathbb R^{N\times n}` with :math:`n^\alpha X_{ij}`
    i.i.d. :math:`\mathcal N(0, 1)` and orthonormal columns :math:`\Phi \in \mathbb R^{n\times m}`,
    :math:`\mu(X^\top, \Phi) \le 2\beta\sqrt{\ln(nN)}/n^\alpha` with probability at least
    :math:`1 - 1/(nN)^{2\beta^2-1}`. Returns (the bound, the failure probability
    :math:`(nN)^{1-2\beta^2}`) for each ``beta`` > 0 (the theorem assumes β > 1; below, the
    "probability" exceeds 1 from :math:`\beta = 1/\sqrt 2` down); α > 0."""
    n, N = check_int("n", n, 1), check_int("N", N, 1)
    alpha = check_range("alpha", alpha, 0.0, closed="neither")
    beta = check_grid("beta", beta, 0.0)
    return 2 * beta * math.sqrt(math.log(n * N)) / n**alpha, float(n * N) ** (1 - 2 * beta**2)


def gaussian_coherence_exceedance(n: int, N: int, m: int, beta) -> np.ndarray:
    r"""The exact probability that :math:`\max_{i,j}|\langle X_{i,:}, \Phi_{:,j}\rangle|` exceeds the bound
    :math:`2\beta\sqrt{\ln(nN)}/n^\alpha` of Theorem C.1 (the inner products unnormalised): for
    orthonormal columns they are N·m independent :math:`\mathcal N(0, n^{-2\alpha})` variables, so it is

    .. math:: 1 - \big(1 - \operatorname{erfc}(\beta\sqrt{2\ln(nN)})\big)^{Nm},

    whatever α. ``beta`` > 0, a number or an array."""
    from scipy.special import erfc

    n, N = check_int("n", n, 1), check_int("N", N, 1)
    m = check_int("m", m, 1, n, high_name="n")
    beta = check_grid("beta", beta, 0.0)
    return -np.expm1(N * m * np.log1p(-erfc(beta * np.sqrt(2 * np.log(n * N)))))


def gaussian_coherence_monte_carlo(n: int, N: int, m: int, alpha: float, draws: int,
                                   seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""Monte-Carlo sample for Theorem C.1: ``draws`` matrices :math:`X \in \mathbb R^{N\times n}` with
    :math:`n^\alpha X_{ij}` i.i.d. :math:`\mathcal N(0, 1)`, against the first m columns
    :math:`\Phi` of a random orthonormal basis (:func:`grokkit.data.sparse.dictionary`, drawn once). Returns
    (draws,) arrays of the unnormalised :math:`\max_{i,j}|\langle X_{i,:}, \Phi_{:,j}\rangle|` and of the
    coherence :math:`\mu(X^\top, \Phi)` (Definition C.3, normalised: it does not depend on α)."""
    n, N = check_int("n", n, 1), check_int("N", N, 1)
    m = check_int("m", m, 1, n, high_name="n")
    alpha = check_range("alpha", alpha, 0.0, closed="neither")
    draws = check_int("draws", draws, 1)
    seed = check_seed("seed", seed)
    phi = dictionary(n, "orthonormal", seed)[:, :m]
    rs = np.random.RandomState([seed, 1])
    raw, normalised = [], []
    for chunk in np.array_split(np.arange(draws), max(1, draws * N * n // 2_000_000)):
        X = rs.randn(len(chunk), N, n) / n**alpha
        inner = np.abs(X @ phi)
        raw.append(inner.max(axis=(1, 2)))
        normalised.append((inner / np.linalg.norm(X, axis=2, keepdims=True)).max(axis=(1, 2)))
    return np.concatenate(raw), np.concatenate(normalised)


ENSEMBLES = ("gaussian", "bernoulli")


def rip_monte_carlo(n: int, s_grid, N_grid, supports: int, *, ensemble: str = "gaussian",
                    seed: int = 0) -> np.ndarray:
    r"""Monte-Carlo lower bounds on the restricted isometry constant :math:`\delta_s(X)` (Definition
    C.1) of random measurement matrices :math:`X \in \mathbb R^{N\times n}` normalised so that
    :math:`\mathbb E\|Xx\|_2^2 = \|x\|_2^2` (Theorem C.2): ``ensemble`` ``"gaussian"`` (entries
    :math:`\mathcal N(0, 1/N)`, the authors' code's variance) or ``"bernoulli"`` (:math:`\pm 1/\sqrt N`).
    One matrix per N (seeded from ``seed`` and N), shared by every s; for each s the maximum over
    ``supports`` random supports (:func:`grokkit.metrics.restricted_isometry_sample`). Returns an
    array (len(s_grid), len(N_grid))."""
    from grokkit.metrics import restricted_isometry_sample

    n = check_int("n", n, 1)
    s_grid = [check_int("s_grid", s, 1, n, high_name="n") for s in np.atleast_1d(s_grid)]
    N_grid = [check_int("N_grid", N, 1) for N in np.atleast_1d(N_grid)]
    if not s_grid or not N_grid:
        raise ValueError(f"s_grid and N_grid must be non-empty, got {s_grid} and {N_grid}")
    supports = check_int("supports", supports, 1)
    check_option("ensemble", ensemble, ENSEMBLES)
    seed = check_seed("seed", seed)
    out = np.empty((len(s_grid), len(N_grid)))
    for j, N in enumerate(N_grid):
        rs = np.random.RandomState([seed, N])
        X = rs.randn(N, n) if ensemble == "gaussian" else rs.choice([-1.0, 1.0], size=(N, n))
        X /= math.sqrt(N)
        for i, s in enumerate(s_grid):
            out[i, j] = restricted_isometry_sample(X, s, supports, seed=seed).delta
    return out


def coherence_rip_ratios(A: np.ndarray, B: np.ndarray, s: int) -> dict[str, float]:
    r"""Proposition C.4 on one pair (A, B) and one support size ``s``: each inequality as the ratio
    of its left side to its right side (at most 1 when it holds), the worst over every support
    :math:`|J| = s` (enumerated, :func:`grokkit.metrics.restricted_isometry`), with
    :math:`M = A^\top B` and :math:`\mu = \mu(A, B)` (:func:`grokkit.data.sparse.coherence`):

    * ``"a"``: :math:`\max(1/(m\sqrt s), 1/(s\sqrt m))\max_J\|M_{:,J}\|_{2\to2}/\mu`;
    * ``"b"``: :math:`\mu/(\min(\sqrt m, \sqrt n)\|M\|_{2\to2})`;
    * ``"c"``: :math:`\sqrt{\max(m, s)}\sqrt{1-\delta_s(M)}/(ms\mu)`;
    * ``"d"``: :math:`\mu/\sqrt{\min(m, n)(1+\delta_n(M))}`;
    * ``"e"``: :math:`\sqrt{1-\delta_s(M)}/((m+s)\mu/2)`.

    ``"c"`` and ``"e"`` are NaN where :math:`\delta_s(M) \ge 1` (the left side is not real). The
    proposition assumes unit-norm columns (it uses :math:`\mu = \max_{ij}|M_{ij}|`); the ratios are
    computed for any A, B, so that the need for it can be shown."""
    from grokkit.metrics import restricted_isometry

    check_finite("A", A)
    check_finite("B", B)
    A, B = np.asarray(A, dtype=float), np.asarray(B, dtype=float)
    if A.ndim != 2 or B.ndim != 2 or A.shape[0] != B.shape[0]:
        raise ValueError(f"A and B must be matrices with the same number of rows, got shapes {A.shape} and {B.shape}")
    m, n = A.shape[1], B.shape[1]
    s = check_int("s", s, 1, n, high_name="n")
    M = A.T @ B
    mu = coherence(A, B)
    rip = restricted_isometry(M, s)
    low = math.sqrt(1 - rip.delta) if rip.delta < 1 else math.nan
    return {"a": max(1 / (m * math.sqrt(s)), 1 / (s * math.sqrt(m))) * math.sqrt(rip.lambda_max.max()) / mu,
            "b": mu / (min(math.sqrt(m), math.sqrt(n)) * np.linalg.norm(M, 2)),
            "c": math.sqrt(max(m, s)) / (m * s) * low / mu,
            "d": mu / math.sqrt(min(m, n) * (1 + restricted_isometry(M, n).delta)),
            "e": low / ((m + s) / 2 * mu)}
