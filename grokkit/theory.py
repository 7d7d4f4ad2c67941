r"""The theory's predicted quantities for sparse recovery (Theorem 2.1, Theorem C.6, Lemma C.7,
Theorem C.8, Corollary C.2, §C.6.2, §C.9) and for matrix factorization (Theorem 2.2, Appendix D:
Theorems D.4, D.5, D.8, D.9, D.12, D.13, Corollaries D.1, D.2, Lemmas D.7, D.14; the section
"Matrix factorization" below).

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
import torch
from scipy import special

from grokkit._checks import check_finite, check_grid, check_int, check_option, check_range, check_seed, show
from grokkit.data import least_squares, unvec, vec
from grokkit.kernels.matrix import factor_gradients, product
from grokkit.kernels.matrix import nuclear_subgradient as kernel_nuclear_subgradient
from grokkit.kernels.run import MAX_STEPS, step_size


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
    X, y, b1 = _sparse_inputs(X, y, b1)
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
    return np.sum(b**2) - np.sum(np.where(keep, Vt @ b, 0.0) ** 2, axis=-1)


def _sparse_inputs(X, y, b) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def sparse_gradient(X, y, b, beta2=0.0) -> np.ndarray:
    r""":math:`G_{\beta_2}(b) = \nabla g_{\beta_2}(b) = \tilde X^\top(\tilde Xb - y^*) + \beta_2 b` (§C.6) for every
    vector of ``b`` (..., n); ``beta2`` a scalar or one per configuration (the leading axis of ``b``).
    Lemma C.5 compares its norm with :math:`\beta_1\|h(b)\|_2`; Theorem C.6 drives it to 0."""
    X, y, b = _sparse_inputs(X, y, b)
    beta2 = _per_configuration("beta2", beta2, b.shape[:-1])[..., None]
    return (b @ X.T - y) @ X + beta2 * b


def sparse_subgradient(X, y, b, beta1, beta2=0.0) -> np.ndarray:
    r""":math:`F(b) = G_{\beta_2}(b) + \beta_1h(b)`, :math:`h = \operatorname{sign}` (sign 0 = 0): the direction of
    the kernels' update :math:`b^{(t+1)} = b^{(t)} - \alpha_tF(b^{(t)})` (eq. 22), whose norm Theorem C.3's
    L bounds. ``b`` (..., n); ``beta1``, ``beta2`` scalars or one per configuration."""
    X, y, b = _sparse_inputs(X, y, b)
    beta1 = _per_configuration("beta1", beta1, b.shape[:-1])[..., None]
    return sparse_gradient(X, y, b, beta2) + beta1 * np.sign(b)


def sparse_objective(X, y, b, beta1, beta2=0.0) -> np.ndarray:
    r"""The objective of §C.6, :math:`f(b) = \tfrac12\|\tilde Xb - y^*\|_2^2 + \tfrac{\beta_2}2\|b\|_2^2 + \beta_1\|b\|_1`,
    for every vector of ``b`` (..., n): shape ``b.shape[:-1]``. ``beta1`` and ``beta2`` (>= 0) are scalars or
    one value per configuration (the leading axis of ``b``: a run's recorded iterates (G, T, n) with
    ``config["beta1"]``). At the ground truth, with :math:`y^* = \tilde Xb^* + \xi`, this is Theorem C.3's
    :math:`f^* = \beta_1\|b^*\|_1 + \tfrac{\beta_2}2\|b^*\|_2^2 + \tfrac12\|\xi\|_2^2` (the paper prints
    :math:`\|\xi\|_2^2`, spec §5 item 14)."""
    X, y, b = _sparse_inputs(X, y, b)
    beta1 = _per_configuration("beta1", beta1, b.shape[:-1])
    beta2 = _per_configuration("beta2", beta2, b.shape[:-1])
    return 0.5 * np.sum((b @ X.T - y) ** 2, axis=-1) + 0.5 * beta2 * np.sum(b**2, axis=-1) \
        + beta1 * np.abs(b).sum(axis=-1)


def l1_dominance_threshold(X, beta2=0.0) -> float:
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


def row_space_memorization_time(X, y, b1, alpha, beta1, beta2=0.0):
    r"""Theorem C.8's :math:`t_1` on the row space of :math:`\tilde X` (p = 2), the form that holds when
    N < n and :math:`\beta_2 = 0` (module docstring): :func:`memorization_time` with
    :math:`\rho_r` (:func:`rho_range`) and :math:`d_0 = \|P_V(b^{(1)} - \hat b)\|_2` (:func:`range_distance`),
    :math:`\hat b` the least-squares solution for ``beta2``.

    ``X`` (N, n) and ``y`` (N,) are one problem, or (G, N, n) and (G, N) a stack of problems
    (:func:`grokkit.data.stack_problems`: zero rows change neither :math:`P_V`, :math:`\rho_r` nor
    :math:`\hat b`); ``b1`` (n,) the initial iterate (:func:`grokkit.kernels.initial_point`). Returns
    a float, or one per problem (G,). (The authors' code, spec §5 item 5, uses the whole
    :math:`\|b^{(1)} - \hat b\|_2`, :math:`1 - \alpha(\lambda_{\min}^+ + \beta_2)` and no :math:`\sqrt n`.)"""
    X, y, b1 = np.asarray(X, dtype=float), np.asarray(y, dtype=float), np.asarray(b1, dtype=float)
    if X.ndim not in (2, 3) or y.shape != X.shape[:-1] or b1.shape != X.shape[-1:]:
        raise ValueError(f"X, y and b1 must have shapes (N, n), (N,) and (n,), or (G, N, n), (G, N) and (n,), "
                         f"got {X.shape}, {y.shape} and {b1.shape}")
    for name, a in (("X", X), ("y", y), ("b1", b1)):
        check_finite(name, a)
    alpha = check_range("alpha", alpha, 0.0, closed="neither")
    beta1 = check_range("beta1", beta1, 0.0, closed="left")
    beta2 = check_range("beta2", beta2, 0.0, closed="left")
    n = X.shape[-1]
    t1 = [memorization_time(range_distance(Xg, b1, least_squares(Xg, yg, beta2)), n, alpha, beta1,
                            rho_range(Xg, alpha, beta2))
          for Xg, yg in zip(X.reshape(-1, *X.shape[-2:]), y.reshape(-1, y.shape[-1]))]
    return float(t1[0]) if X.ndim == 2 else np.array(t1, dtype=float)


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
    and Lemma C.7 gives the ball. (The paper's condition lacks :math:`n^{1/p}`, spec §5 item 7: with it,
    the formula can return a negative step; see :func:`matrix_ball_entry_time`.) Infinite unless
    :math:`0 < \rho_p < 1` and :math:`\beta_1 > 0`; broadcasts over arrays.

    ``condition="printed"`` uses the formula when :math:`d_0 > \alpha\beta_1/(1-\rho_p)`, the paper's
    condition: for p < inf and :math:`\alpha\beta_1/(1-\rho_p) < d_0 \le \alpha\beta_1 n^{1/p}/(1-\rho_p)`
    it returns a negative step (as :func:`matrix_ball_entry_time`)."""
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
    :func:`grokkit.data.binary_fractions` draws them): every :math:`b - \alpha` is then computed without
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
    r"""The authors' code's prediction :math:`\|\hat b - b^*\|_\infty/(\alpha\beta_1)` (spec §5 item 6)."""
    check_finite("b_hat", b_hat)
    check_finite("b_star", b_star)
    alpha, beta1 = _hyper(alpha, beta1)
    with np.errstate(divide="ignore"):
        return np.abs(b_hat - b_star).max() / (alpha * beta1)


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
    :math:`\Phi` of a random orthonormal basis (:func:`grokkit.data.dictionary`, drawn once). Returns
    (draws,) arrays of the unnormalised :math:`\max_{i,j}|\langle X_{i,:}, \Phi_{:,j}\rangle|` and of the
    coherence :math:`\mu(X^\top, \Phi)` (Definition C.3, normalised: it does not depend on α)."""
    from grokkit.data import dictionary

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
    :math:`M = A^\top B` and :math:`\mu = \mu(A, B)` (:func:`grokkit.data.coherence`):

    * ``"a"``: :math:`\max(1/(m\sqrt s), 1/(s\sqrt m))\max_J\|M_{:,J}\|_{2\to2}/\mu`;
    * ``"b"``: :math:`\mu/(\min(\sqrt m, \sqrt n)\|M\|_{2\to2})`;
    * ``"c"``: :math:`\sqrt{\max(m, s)}\sqrt{1-\delta_s(M)}/(ms\mu)`;
    * ``"d"``: :math:`\mu/\sqrt{\min(m, n)(1+\delta_n(M))}`;
    * ``"e"``: :math:`\sqrt{1-\delta_s(M)}/((m+s)\mu/2)`.

    ``"c"`` and ``"e"`` are NaN where :math:`\delta_s(M) \ge 1` (the left side is not real). The
    proposition assumes unit-norm columns (it uses :math:`\mu = \max_{ij}|M_{ij}|`); the ratios are
    computed for any A, B, so that the need for it can be shown."""
    from grokkit.data import coherence
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


# --- background: Lyu et al. (2024), the diagonal network on linear classification ---------------
#
# Their α is the initial parameter norm ‖θ(0)‖₂ (their code, and "initial parameter norm 128" of
# Figure 1a); their λ is grokkit's beta2. For w₊(0) = w₋(0) = init_scale·1 in R^n,
# ‖θ(0)‖₂ = init_scale·√(2n).


def dichotomy_time(init_scale, beta2, n: int, *, c: float = 0.0, alpha=None):
    r"""Lyu et al.'s time scale :math:`T^\pm_c = \frac{1 \pm c}{\lambda}\log\alpha` (§3.2,
    Theorems 3.4 and 3.5, Corollaries 3.6 and 3.7): the kernel regime lasts until
    :math:`T^-_c`, the rich regime is reached by :math:`T^+_c`, so the transition is at
    :math:`\frac1\lambda\log\alpha` as α → ∞.

    Returns :math:`(1 + c)\ln(\alpha)/\lambda` with :math:`\alpha = \|\theta(0)\|_2 =`
    ``init_scale``·√(2n) and λ = ``beta2``: ``c`` in (0, 1) gives :math:`T^+_c`, ``-c`` gives
    :math:`T^-_c`, 0 the transition. This is gradient-flow time; with a learning rate
    ``alpha`` it is divided by ``alpha`` (a number of steps). ``init_scale``, ``beta2`` and
    ``alpha`` broadcast (numbers or grids); a float when all three are numbers.
    """
    n = check_int("n", n, 1)
    scale = check_grid("init_scale", init_scale, 1 / math.sqrt(2 * n), closed="neither")
    lam = check_grid("beta2", beta2, 0.0, closed="neither")
    c = check_range("c", c, -1.0, closed="neither")
    rate = 1.0 if alpha is None else check_grid("alpha", alpha, 0.0, closed="neither")
    t = (1 + c) * np.log(scale * math.sqrt(2 * n)) / lam / rate
    return float(t) if np.ndim(t) == 0 else t


def margin_classification_accuracy(w, w_star, gamma: float) -> np.ndarray:
    r"""Population accuracy of the linear classifiers ``w`` (..., n) on the misgrokking
    distribution of Lyu et al. (Figure 1b, :func:`grokkit.data.margin_classification`):
    :math:`x = z + y\frac\gamma2w^*`, :math:`y = \operatorname{sign}\langle z, w^*\rangle`,
    :math:`z \sim \mathcal N(0, I_n)`, :math:`\|w^*\|_2 = 1`.

    Write :math:`a = \langle z, w^*\rangle \sim \mathcal N(0, 1)`, :math:`c = \langle w, w^*\rangle`
    and :math:`r = \|w - cw^*\|_2`. Then :math:`y\langle w, x\rangle = (|a| + \frac\gamma2)c + g`
    with :math:`g \sim \mathcal N(0, r^2)` independent of a, so

    .. math:: P(y\langle w, x\rangle > 0) = 2\int_0^\infty \varphi(a)\,
              \Phi\Big(\big(a + \tfrac\gamma2\big)\frac cr\Big)\,da,

    computed by 128-point Gauss–Legendre quadrature on [0, 12] (error below 1e-12). A classifier
    along :math:`\pm w^*` (r = 0) scores 1 or 0; ``w`` = 0 scores 1/2 (ties count half).
    """
    w_star = np.asarray(w_star, dtype=float)
    w = np.asarray(w, dtype=float)
    if w_star.ndim != 1 or w.shape[-1:] != w_star.shape:
        raise ValueError(f"w and w_star must have shapes (..., n) and (n,), got {w.shape} and {w_star.shape}")
    check_finite("w", w)
    check_finite("w_star", w_star)
    if abs(np.linalg.norm(w_star) - 1.0) > 1e-9:
        raise ValueError(f"w_star must be a unit vector, got norm {np.linalg.norm(w_star):.6g}")
    gamma = check_range("gamma", gamma, 0.0, closed="left")
    c = w @ w_star
    r = np.sqrt(np.maximum(np.sum(w * w, axis=-1) - c * c, 0.0))
    nodes, weights = np.polynomial.legendre.leggauss(128)
    a, weights = 6.0 * (nodes + 1.0), 6.0 * weights            # [-1, 1] -> [0, 12]
    phi = np.exp(-a * a / 2) / math.sqrt(2 * math.pi)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(r > 0, c / np.where(r > 0, r, 1.0), np.sign(c) * np.inf)
    inner = special.ndtr((a + gamma / 2) * ratio[..., None])
    accuracy = 2.0 * (inner * phi * weights).sum(axis=-1)
    return np.where((r == 0) & (c == 0), 0.5, np.clip(accuracy, 0.0, 1.0))


# --- Matrix factorization (Appendix D) ---------------------------------------------------------
#
# Objective (Sec. 2 and App. D): f(A) = ½‖𝒳(A) − y*‖² + β₂/2‖A‖²_F + β*‖A‖_*, A ∈ R^{n1×n2}. The
# measurement operator is passed as ``operator``: a boolean ``mask`` (n1, n2) for completion,
# 𝒳(A) = A[mask] (the observed entries in numpy's row-major order), or a matrix ``X`` (N, n1·n2)
# for sensing, acting on vec(A) = A.reshape(-1, order="F") (column-major, App. B). The functions
# below build the explicit (N, n1n2) matrix: they are meant for small problems.


def _shape(shape) -> tuple[int, int]:
    if not isinstance(shape, (tuple, list)) or len(shape) != 2:
        raise ValueError(f"shape must be a pair (n1, n2) of integers >= 1, got {shape!r}")
    return check_int("n1", shape[0], 1), check_int("n2", shape[1], 1)


def measurement_matrix(operator, shape) -> np.ndarray:
    r"""The matrix :math:`X \in \mathbb R^{N\times n_1n_2}` of the operator :math:`\mathcal X`, with
    :math:`\mathcal X(A) = X\operatorname{vec}A` (column-major vec, App. B).

    ``operator`` is a boolean mask of shape ``shape`` (completion, D.4: row s of X is the canonical
    vector of the s-th observed entry in ``A[mask]`` order, so :math:`X^\top X = \operatorname{diag}
    (\operatorname{vec} M)`) or a float matrix with n1·n2 columns (sensing, D.4), returned as float64."""
    n1, n2 = _shape(shape)
    op = np.asarray(operator)
    if op.dtype == bool:
        if op.shape != (n1, n2):
            raise ValueError(f"mask must have shape (n1, n2) = {(n1, n2)}, got {op.shape}")
        i, j = np.nonzero(op)
        X = np.zeros((len(i), n1 * n2))
        X[np.arange(len(i)), j * n1 + i] = 1.0
        return X
    if op.ndim != 2 or op.shape[1] != n1 * n2:
        raise ValueError(f"X must be a matrix with n1*n2 = {n1 * n2} columns, got shape {op.shape}")
    check_finite("X", op)
    return op.astype(float)


def completion_degrees_of_freedom(n1: int, n2: int, r: int) -> int:
    r"""Dimension :math:`r(n_1 + n_2 - r)` of the rank-r matrices in :math:`\mathbb R^{n_1\times n_2}` (App. D.4):
    with fewer observed entries, a rank-r :math:`A^*` is not determined by them (Theorem D.1's trivial bound)."""
    from grokkit.data import _check_shape

    n1, n2, r = _check_shape(n1, n2, r)
    return r * (n1 + n2 - r)


def completion_sample_scale(n1: int, n2: int, r: int, power: float = 1.0) -> float:
    r""":math:`n^{\text{power}}\,r\log n` with :math:`n = \max(n_1, n_2)`: the sample sizes of Theorem D.1
    (power 5/4, or 6/5 for :math:`r \le n^{1/5}`; constants C left out, as in the paper) and the
    coupon-collector scale :math:`nr\log n` (power 1, App. D.4), below which some row or column is
    unobserved."""
    from grokkit.data import _check_shape

    n1, n2, r = _check_shape(n1, n2, r)
    power = check_range("power", power, 0.0, closed="left")
    n = max(n1, n2)
    return float(n**power * r * math.log(n))


def coherent_sampling_probabilities(A_star: np.ndarray, c0: float = 1.0) -> np.ndarray:
    r"""The observation probabilities that Theorem D.3 (Chen et al. 2014) asks for, with the
    unspecified constant :math:`c_0` given:

    .. math:: p_{ij} = \max\Big\{\min\Big\{c_0\frac{(\mu_i + \nu_j)\,r\log^2(n_1+n_2)}{\min(n_1, n_2)}, 1\Big\},
              \min(n_1, n_2)^{-10}\Big\}

    with the local coherences of :math:`A^*` (:func:`grokkit.data.local_coherence`, rank r its
    numerical rank); their sum is the expected number of observed entries."""
    from grokkit.data import local_coherence

    c0 = check_range("c0", c0, 0.0, closed="neither")
    mu, nu = local_coherence(A_star)
    n1, n2 = np.shape(A_star)
    r = int(np.linalg.matrix_rank(A_star))
    p = c0 * (mu[:, None] + nu[None, :]) * r * math.log(n1 + n2) ** 2 / min(n1, n2)
    return np.maximum(np.minimum(p, 1.0), float(min(n1, n2)) ** -10)


def matrix_rho(operator, shape, alpha: float, beta2: float = 0.0, p: float = 2) -> float:
    r""":math:`\rho_p = \|I_n - \alpha(X^\top X + \beta_2 I_n)\|_{p\to p}`, n = n1·n2 (Theorem 2.2, Lemma D.7);
    for p = 2 this is :math:`\sigma_\max(I - \alpha(\mathcal X^*\mathcal X + \beta_2 I))`.

    With :math:`\beta_2 = 0` and N < n1·n2 (every experiment of the paper), :math:`X^\top X` is
    singular and :math:`\rho_2 = 1` exactly (spec §2 caveat, §5 item 4): use :func:`matrix_rho_row`."""
    return rho(measurement_matrix(operator, shape), alpha, beta2, p)


def matrix_rho_row(operator, shape, alpha, beta2=0.0, tol: float = 1e-10):
    r""":math:`\rho_{\rm row} = \max_{\lambda \in \operatorname{eig}(X^\top X)\setminus\{0\}}|1 - \alpha(\lambda + \beta_2)|`:
    the contraction of :math:`I - \alpha(X^\top X + \beta_2 I)` on the row space of X, the meaningful
    ρ of Theorem 2.2 when N < n1·n2 and β₂ = 0 (the matrix analogue of :func:`rho_range`)."""
    return rho_range(measurement_matrix(operator, shape), alpha, beta2, tol)


def matrix_range_distance(operator, shape, A, A_hat, p: float = 2, tol: float = 1e-10) -> np.ndarray:
    r""":math:`\|P_V\operatorname{vec}(A - \hat A)\|_p` for every matrix of ``A`` (..., n1, n2): the distance to
    :math:`\hat A` of the component on the row space of X, the part that :func:`matrix_rho_row` contracts
    (Lemma D.7 and Theorem D.8 restricted to the row space when N < n1·n2 and β₂ = 0). For completion
    :math:`P_V = \operatorname{diag}(\operatorname{vec}M)`: the observed entries of :math:`A - \hat A`.
    Returns an array of the leading shape of ``A``; ``p`` in {1, 2, inf}."""
    n1, n2 = _shape(shape)
    check_option("p", p, (1, 2, math.inf))
    A, A_hat = np.asarray(A, dtype=float), np.asarray(A_hat, dtype=float)
    if A.ndim < 2 or A.shape[-2:] != (n1, n2) or A_hat.shape != (n1, n2):
        raise ValueError(f"A and A_hat must have shapes (..., {n1}, {n2}) and ({n1}, {n2}), "
                         f"got {A.shape} and {A_hat.shape}")
    check_finite("A", A)
    check_finite("A_hat", A_hat)
    D = np.swapaxes(A - A_hat, -1, -2).reshape(*A.shape[:-2], n1 * n2)  # column-major vec of each matrix
    return np.linalg.norm(D @ range_projector(measurement_matrix(operator, shape), tol), ord=p, axis=-1)


def matrix_least_squares(operator, shape, y: np.ndarray, beta2: float = 0.0) -> np.ndarray:
    r""":math:`\hat A = \operatorname{unvec}((X^\top X + \beta_2 I_n)^\dagger X^\top y^*)` (App. D.6.1), shape (n1, n2):
    :func:`grokkit.data.least_squares` on the measurement matrix.

    (The authors' code adds β₂ to every entry of :math:`X^\top X`, spec §5 item 31; this adds
    :math:`\beta_2 I`.)"""
    X = measurement_matrix(operator, shape)
    y = np.asarray(y, dtype=float)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape (N,) = ({X.shape[0]},), got {y.shape}")
    return unvec(least_squares(X, y, beta2), *_shape(shape))


def _matrices(A, shape) -> np.ndarray:
    """``A`` as a finite float array of matrices (..., n1, n2)."""
    n1, n2 = _shape(shape)
    A = np.asarray(A, dtype=float)
    if A.ndim < 2 or A.shape[-2:] != (n1, n2):
        raise ValueError(f"A must have shape (..., n1, n2) = (..., {n1}, {n2}), got {A.shape}")
    check_finite("A", A)
    return A


def _per_matrix(name: str, value, A: np.ndarray, low_closed: str = "left") -> np.ndarray:
    """A coefficient given as a scalar or one value per configuration (the leading axis of ``A``, or
    its leading axes), as an array broadcasting against the matrices of ``A`` (..., n1, n2)."""
    v = check_grid(name, value, 0.0, closed=low_closed)
    if v.ndim > A.ndim - 2 or v.shape != A.shape[:v.ndim]:
        raise ValueError(f"{name} must be a scalar or have the leading shape of A {A.shape[:-2]}, "
                         f"got shape {v.shape}")
    return v.reshape(v.shape + (1,) * (A.ndim - v.ndim))


def _residual(operator, shape, A: np.ndarray, y) -> tuple[np.ndarray, np.ndarray]:
    r"""The explicit X and :math:`X\operatorname{vec}A - y^*` for every matrix of ``A`` (..., n1, n2)."""
    X = measurement_matrix(operator, shape)
    y = np.asarray(y, dtype=float)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape (N,) = ({X.shape[0]},), got {y.shape}")
    check_finite("y", y)
    return X, np.swapaxes(A, -1, -2).reshape(A.shape[:-2] + (-1,)) @ X.T - y


def matrix_objective(operator, shape, A, y, beta_star, beta2=0.0) -> np.ndarray:
    r"""The objective of App. D.6, :math:`f(A) = \tfrac12\|X\operatorname{vec}A - y^*\|_2^2 +
    \tfrac{\beta_2}2\|A\|_F^2 + \beta_*\|A\|_*`, for every matrix of ``A`` (..., n1, n2): shape ``A.shape[:-2]``.

    ``beta_star`` and ``beta2`` (≥ 0) are scalars or one value per configuration (the leading axis of
    ``A``: a run's recorded iterates (G, T, n1, n2) with ``config["beta_star"]``). At the ground truth,
    with :math:`y^* = X\operatorname{vec}A^* + \xi`, this is Theorem D.4's
    :math:`f^* = \beta_*\|A^*\|_* + \tfrac{\beta_2}2\|A^*\|_F^2 + \tfrac12\|\xi\|_2^2` (the paper writes
    :math:`\|\xi\|_2^2`, spec §5 item 9)."""
    A = _matrices(A, shape)
    beta_star, beta2 = _per_matrix("beta_star", beta_star, A)[..., 0, 0], _per_matrix("beta2", beta2, A)[..., 0, 0]
    _, r = _residual(operator, shape, A, y)
    return (0.5 * np.sum(r**2, axis=-1) + 0.5 * beta2 * np.sum(A**2, axis=(-2, -1))
            + beta_star * np.linalg.svd(A, compute_uv=False).sum(axis=-1))


def matrix_gradient(operator, shape, A, y, beta2=0.0) -> np.ndarray:
    r""":math:`G_{\beta_2}(A) = \nabla g_{\beta_2}(A) = \operatorname{unvec}(X^\top(X\operatorname{vec}A - y^*)) + \beta_2A`
    (eq. 100) for every matrix of ``A`` (..., n1, n2); ``beta2`` a scalar or one per configuration."""
    A = _matrices(A, shape)
    beta2 = _per_matrix("beta2", beta2, A)
    X, r = _residual(operator, shape, A, y)
    return np.swapaxes((r @ X).reshape(A.shape[:-2] + A.shape[:-3:-1]), -1, -2) + beta2 * A


def nuclear_subgradient(A) -> np.ndarray:
    r""":math:`h(A) = UV^\top \in \partial\|A\|_*` (App. D.6) for every matrix of ``A`` (..., n1, n2), from
    the thin SVD with all min(n1, n2) singular vectors, those of zero singular values included (the
    kernels' :func:`grokkit.kernels.matrix.nuclear_subgradient`, whose checked numpy front this is). So
    :math:`\|h(A)\|_F^2 = \|h(A)\|_* = \min(n_1, n_2)` whatever the rank of A (Lemma D.6's proof, spec §5 item 6)."""
    A = np.asarray(A, dtype=float)
    if A.ndim < 2:
        raise ValueError(f"A must have shape (..., n1, n2), got {A.shape}")
    check_finite("A", A)
    return kernel_nuclear_subgradient(torch.as_tensor(A)).numpy()


def matrix_subgradient(operator, shape, A, y, beta_star, beta2=0.0) -> np.ndarray:
    r""":math:`F(A) = G_{\beta_2}(A) + \beta_*h(A)` (App. D.6, eq. 101: the kernels' update is
    :math:`A^{(t+1)} = A^{(t)} - \alpha_tF(A^{(t)})`) for every matrix of ``A`` (..., n1, n2);
    :func:`matrix_gradient` plus ``beta_star`` times :func:`nuclear_subgradient`."""
    A = _matrices(A, shape)
    beta_star = _per_matrix("beta_star", beta_star, A)
    return matrix_gradient(operator, shape, A, y, beta2) + beta_star * nuclear_subgradient(A)


def nuclear_dominance_threshold(operator, shape, beta2=0.0) -> float:
    r"""The threshold of Theorem D.5 (Lemma D.6 with :math:`L = \sigma_\max(X^\top X) + \beta_2`):
    :math:`(\sigma_\max(X^\top X) + \beta_2)/\sqrt{\min(n_1, n_2)}`, above which the paper predicts
    that :math:`\beta_*h` dominates the updates (:math:`1/\sqrt{10} \approx 0.316` for 10×10 completion,
    where :math:`\sigma_\max(X^\top X) = 1`)."""
    n1, n2 = _shape(shape)
    beta2 = check_range("beta2", beta2, 0.0, closed="left")
    return float((eigenvalues(measurement_matrix(operator, shape))[0] + beta2) / math.sqrt(min(n1, n2)))


def _matrix_hyper(alpha, beta_star) -> tuple[np.ndarray, np.ndarray]:
    return check_grid("alpha", alpha, 0.0), check_grid("beta_star", beta_star, 0.0, closed="left")


def matrix_memorization_time(dist0, n1: int, n2: int, alpha, beta_star, rho_p, p: float = 2):
    r"""The memorization step of Theorem D.8,
    :math:`t_1 = \lceil -\ln(1 + (1-\rho_p)\|a^{(1)}-\hat a\|_p/(\alpha\beta_* n^{1/p}))/\ln\rho_p\rceil`, n = n1·n2.

    Reading (spec §2): t counts updates from the initial iterate :math:`a^{(1)}` (the kernels' step 0),
    ``dist0`` is :math:`\|a^{(1)}-\hat a\|_p`; then Lemma D.7 reads
    :math:`\|a^{(t)}-\hat a\|_p \le \rho_p^t\|a^{(1)}-\hat a\|_p + \alpha\beta_* n^{1/p}(1-\rho_p^t)/(1-\rho_p)`
    (Lemma D.11 gives :math:`\|\operatorname{vec}h\|_p \le n^{1/p}`) and for every t ≥ t₁,
    :math:`\|a^{(t)}-\hat a\|_p \le 2\alpha\beta_* n^{1/p}(1-\rho_p^t)/(1-\rho_p)` (:func:`matrix_memorization_radius`).
    Infinite unless :math:`0 < \rho_p < 1` (so for β₂ = 0, N < n1·n2 and p = 2) and for β* = 0."""
    n1, n2 = check_int("n1", n1, 1), check_int("n2", n2, 1)
    alpha, beta_star = _matrix_hyper(alpha, beta_star)
    return memorization_time(dist0, n1 * n2, alpha, beta_star, rho_p, p)


def matrix_memorization_radius(n1: int, n2: int, alpha, beta_star, rho_p, p: float = 2, t=None):
    r"""Radius of Theorem 2.2 / D.8 after t₁: :math:`2\alpha\beta_* n^{1/p}(1-\rho_p^t)/(1-\rho_p)`, n = n1·n2,
    or its limit :math:`2\alpha\beta_* n^{1/p}/(1-\rho_p)` for ``t=None``; infinite where :math:`\rho_p \ge 1`."""
    n1, n2 = check_int("n1", n1, 1), check_int("n2", n2, 1)
    alpha, beta_star = _matrix_hyper(alpha, beta_star)
    radius = memorization_radius(n1 * n2, alpha, beta_star, rho_p, p)
    if t is None:
        return radius
    t = check_grid("t", t, 0.0, closed="left")
    return np.where(np.isfinite(radius), radius * (1.0 - np.asarray(rho_p, dtype=float) ** t), np.inf)


def matrix_distance_bound(dist0, n1: int, n2: int, alpha, beta_star, rho_p, t, p: float = 2):
    r"""Lemma D.7: :math:`\|a^{(t+1)}-\hat a\|_p \le \rho_p^t\|a^{(1)}-\hat a\|_p + \alpha\beta_* n^{1/p}(1-\rho_p^t)/(1-\rho_p)`,
    n = n1·n2, after t updates from :math:`a^{(1)}` (``dist0`` = :math:`\|a^{(1)}-\hat a\|_p`); Lemma D.11 gives
    :math:`\|\operatorname{vec}h\|_p \le n^{1/p}`. The right-hand side, :func:`distance_bound`: for
    :math:`\rho_p = 1` (β₂ = 0, N < n1·n2) it is :math:`d_0 + \alpha\beta_* n^{1/p}t`, no ball. The paper writes
    :math:`a^{(t)}` on the left, one update too many: at t = 1 that reads :math:`d_0 \le \rho_p d_0 + \alpha\beta_* n^{1/p}`,
    false whenever :math:`d_0 > \alpha\beta_* n^{1/p}/(1-\rho_p)`."""
    n1, n2 = check_int("n1", n1, 1), check_int("n2", n2, 1)
    alpha, beta_star = _matrix_hyper(alpha, beta_star)
    return distance_bound(dist0, n1 * n2, alpha, beta_star, rho_p, t, p)


def matrix_ball_entry_time(dist0, n1: int, n2: int, alpha, beta_star, rho_p, p: float = 2,
                           condition: str = "corrected"):
    r""":math:`\tilde t_1` of Corollary D.2: after :math:`\tilde t_1` updates,
    :math:`\|a^{(t+1)}-\hat a\|_p \le 2\alpha\beta_* n^{1/p}/(1-\rho_p)` for good, n = n1·n2
    (:func:`ball_entry_time`, ``dist0`` = :math:`\|a^{(1)}-\hat a\|_p`).

    ``condition="corrected"`` uses the formula when :math:`d_0 > \alpha\beta_* n^{1/p}/(1-\rho_p)`, else 0.
    ``condition="printed"`` uses it when :math:`d_0 > \alpha\beta_*/(1-\rho_p)`, the paper's condition
    without :math:`n^{1/p}` (spec §5 item 7): for p < inf and
    :math:`\alpha\beta_*/(1-\rho_p) < d_0 \le \alpha\beta_* n^{1/p}/(1-\rho_p)` it returns a negative step (the
    logarithm's argument is at most 1), where the corrected condition gives 0."""
    n1, n2 = check_int("n1", n1, 1), check_int("n2", n2, 1)
    alpha, beta_star = _matrix_hyper(alpha, beta_star)
    check_option("condition", condition, ("corrected", "printed"))
    return _ball_entry_time(dist0, n1 * n2, alpha, beta_star, rho_p, p, printed=condition == "printed")


def matrix_residual_bound(operator, shape, y, A_hat, alpha, beta_star, rho_p, p: float = 2, t=None):
    r"""The training-residual bound of Theorem D.8 (eq. 115, with X where the paper writes :math:`\tilde X`):
    for :math:`t \ge t_1` updates,

    .. math:: \|Xa^{(t+1)} - y^*\|_p \le \frac{2\alpha\beta_* n^{1/p}(1-\rho_p^t)}{1-\rho_p}\|X\|_{p\to p}
              + \|X\hat a - y^*\|_p,

    or, for ``t=None``, its limit with :math:`2\alpha\beta_* n^{1/p}/(1-\rho_p)` (:func:`matrix_memorization_radius`).
    ``y`` (N,) and ``A_hat`` (n1, n2); infinite where :math:`\rho_p \ge 1`; broadcasts over arrays."""
    n1, n2 = _shape(shape)
    X = measurement_matrix(operator, shape)
    y, A_hat = np.asarray(y, dtype=float), np.asarray(A_hat, dtype=float)
    if y.shape != (X.shape[0],) or A_hat.shape != (n1, n2):
        raise ValueError(f"y and A_hat must have shapes ({X.shape[0]},) and ({n1}, {n2}), got {y.shape} and {A_hat.shape}")
    check_finite("y", y)
    check_finite("A_hat", A_hat)
    radius = matrix_memorization_radius(n1, n2, alpha, beta_star, rho_p, p, t)
    order = {1: 1, 2: 2, math.inf: np.inf}[p]
    return radius * np.linalg.norm(X, order) + np.linalg.norm(X @ vec(A_hat) - y, order)


def matrix_generalization_delay(A_hat: np.ndarray, alpha, beta_star):
    r"""Predicted delay :math:`\Delta t = \sigma_\max(\hat A)/(\alpha\beta_*)` (Theorem 2.2, up to a constant,
    from Theorem D.12 with step αβ*); infinite for β* = 0."""
    check_finite("A_hat", A_hat)
    alpha, beta_star = _matrix_hyper(alpha, beta_star)
    with np.errstate(divide="ignore"):
        return np.linalg.norm(np.asarray(A_hat, dtype=float), 2) / (alpha * beta_star)


def matrix_generalization_delay_code(A_hat: np.ndarray, A_star: np.ndarray, alpha, beta_star):
    r"""The authors' code's prediction :math:`\|\hat A - A^*\|_{2\to2}/(\alpha\beta_*)` (spec §5 item 22)."""
    check_finite("A_hat", A_hat)
    check_finite("A_star", A_star)
    alpha, beta_star = _matrix_hyper(alpha, beta_star)
    with np.errstate(divide="ignore"):
        return np.linalg.norm(np.asarray(A_hat, float) - A_star, 2) / (alpha * beta_star)


def _d9_inputs(operator, shape, A_star, beta2, noise_std):
    """X, the vector a* (or b*), β₂ and σ_ξ of Theorems D.9 and C.9, checked. With ``shape`` a pair
    (n1, n2): ``operator`` a mask or a sensing matrix and ``A_star`` (n1, n2), vectorised (D.9). With
    ``shape=None``: ``operator`` the matrix X̃ (N, n) and ``A_star`` the vector b* (n,) (C.9)."""
    if shape is None:
        X, b = np.asarray(operator, dtype=float), np.asarray(A_star, dtype=float)
        if X.ndim != 2 or b.shape != X.shape[1:]:
            raise ValueError(f"with shape None, X and b_star must have shapes (N, n) and (n,), "
                             f"got {X.shape} and {b.shape}")
        check_finite("X", X)
        check_finite("b_star", b)
    else:
        X = measurement_matrix(operator, shape)
        check_finite("A_star", A_star)
        if np.shape(A_star) != _shape(shape):
            raise ValueError(f"A_star must have shape (n1, n2) = {_shape(shape)}, got {np.shape(A_star)}")
        b = vec(np.asarray(A_star, dtype=float))
    beta2 = check_range("beta2", beta2, 0.0, closed="left")
    noise_std = check_range("noise_std", noise_std, 0.0, closed="left")
    return X, b, beta2, noise_std


def _d9_terms(operator, shape, A_star, beta2, noise_std, tol):
    X, a, beta2, noise_std = _d9_inputs(operator, shape, A_star, beta2, noise_std)
    tol = check_range("tol", tol, 0.0, 1.0, closed="left")
    lam, V = np.linalg.eigh(X.T @ X)
    keep = lam > tol * max(lam.max(), 0.0) if lam.max() > 0 else np.zeros(len(lam), bool)
    sigma, proj = lam[keep], V[:, keep].T @ a  # σ_i and (V_Xᵀ a*)_i, i ≤ r_X
    noise = noise_std**2 * (np.sum((beta2 / (sigma + beta2)) ** 2) + X.shape[0] - keep.sum())
    return sigma, proj, beta2, noise


def least_squares_residual_printed(operator, shape, A_star, beta2: float, noise_std: float = 0.0,
                                   tol: float = 1e-10) -> float:
    r"""Theorem D.9 **as printed**: :math:`\mathbb E_\xi\|X\hat a - y^*\|_2^2 = \sum_{i\le r_X}\big(\frac{\beta_2\sigma_i}{\sigma_i+\beta_2}\big)^2
    (V_X^\top a^*)_i^2 + \sigma_\xi^2\sum_{i\le r_X}\big(\frac{\beta_2}{\sigma_i+\beta_2}\big)^2 + \sigma_\xi^2(N - r_X)`,
    :math:`y^* = Xa^* + \xi`, Cov ξ = σ_ξ² I_N, σ_i the nonzero eigenvalues of :math:`X^\top X`, ``noise_std`` = σ_ξ.

    The first term is wrong (spec §2, §5 item 8): its factor :math:`\sigma_i^2` should be :math:`\sigma_i`
    (:func:`least_squares_residual_corrected`). The two agree when every nonzero σ_i is 1 (completion)
    or β₂ = 0.

    ``shape=None``: Theorem C.9, the sparse statement it copies (the same formula and the same error,
    with :math:`\lambda_i` for σ_i), with ``operator`` = X̃ (N, n) and ``A_star`` = b* (n,)."""
    sigma, proj, beta2, noise = _d9_terms(operator, shape, A_star, beta2, noise_std, tol)
    return float(np.sum((beta2 * sigma / (sigma + beta2)) ** 2 * proj**2) + noise)


def least_squares_residual_corrected(operator, shape, A_star, beta2: float, noise_std: float = 0.0,
                                     tol: float = 1e-10) -> float:
    r"""Theorem D.9 **corrected** (spec §2, §5 item 8): :math:`\mathbb E_\xi\|X\hat a - y^*\|_2^2 =
    \sum_{i\le r_X}\frac{\beta_2^2\sigma_i}{(\sigma_i+\beta_2)^2}(V_X^\top a^*)_i^2 + \sigma_\xi^2\sum_{i\le r_X}\big(\frac{\beta_2}{\sigma_i+\beta_2}\big)^2
    + \sigma_\xi^2(N - r_X)`. Differs from :func:`least_squares_residual_printed` only in the first term
    (:math:`\sigma_i` in place of :math:`\sigma_i^2`): with :math:`X = U_X\Sigma_X^{1/2}V_X^\top`, the signal part of the
    residual is :math:`U_X\operatorname{diag}(\beta_2\sqrt{\sigma_i}/(\sigma_i+\beta_2))V_X^\top a^*`. The same for
    Theorem C.9 (the proof's last line) with ``shape=None``, ``operator`` = X̃ (N, n), ``A_star`` = b* (n,)."""
    sigma, proj, beta2, noise = _d9_terms(operator, shape, A_star, beta2, noise_std, tol)
    return float(np.sum(beta2**2 * sigma / (sigma + beta2) ** 2 * proj**2) + noise)


def least_squares_residual_monte_carlo(operator, shape, A_star, beta2: float, noise_std: float, *,
                                       draws: int = 10_000, seed: int = 0) -> tuple[float, float]:
    r"""Monte-Carlo estimate of the left-hand side of Theorem D.9, :math:`\mathbb E_\xi\|X\hat a - y^*\|_2^2`,
    without the theorem's algebra: ``draws`` noise vectors :math:`\xi \sim \mathcal N(0, \sigma_\xi^2 I_N)`
    (``noise_std`` = σ_ξ) from ``RandomState(seed)``, :math:`y^* = Xa^* + \xi`,
    :math:`\hat a = (X^\top X + \beta_2 I_n)^\dagger X^\top y^*` (:func:`grokkit.data.least_squares`, one
    solve for all draws), and the squared residual of each draw. Returns (mean, standard error of
    the mean), to compare with :func:`least_squares_residual_printed` and
    :func:`least_squares_residual_corrected`. ``shape=None``: Theorem C.9, ``operator`` = X̃ (N, n) and
    ``A_star`` = b* (n,)."""
    X, a, beta2, noise_std = _d9_inputs(operator, shape, A_star, beta2, noise_std)
    draws = check_int("draws", draws, 2)
    rs = np.random.RandomState(check_seed("seed", seed))
    Y = (X @ a)[:, None] + noise_std * rs.randn(X.shape[0], draws)  # (N, draws): y* = Xa* + ξ
    residual = np.sum((X @ least_squares(X, Y, beta2) - Y) ** 2, axis=0)
    return float(residual.mean()), float(residual.std(ddof=1) / math.sqrt(draws))


NUCLEAR_SVDS = ("thin", "compact")


def nuclear_subgradients(A: np.ndarray, count: int = 0, *, seed: int = 0, tol: float = 1e-10) -> np.ndarray:
    r"""Elements of the subdifferential of the nuclear norm at A (Lemma D.11),

    .. math:: \partial\|A\|_* = \{U_rV_r^\top + W : U_r^\top W = 0,\ WV_r = 0,\ \|W\|_{2\to2} \le 1\},

    :math:`A = U_r\Sigma_rV_r^\top` the compact SVD (singular values above ``tol`` times the largest).
    Returns ``1 + count`` matrices (1 + count, n1, n2): element 0 is :math:`h(A) = UV^\top` of the thin
    SVD, all min(n1, n2) singular vectors (the kernels' and the authors' choice, eq. 101: it is
    :math:`U_rV_r^\top` plus a partial isometry on the complement); elements 1 … count are
    :math:`U_rV_r^\top + cW/\|W\|_{2\to2}` with :math:`W = (I - U_rU_r^\top)G(I - V_rV_r^\top)`, G with
    i.i.d. :math:`\mathcal N(0, 1)` entries and c uniform in [0, 1], drawn from ``RandomState(seed)``
    (W = 0 where the complement is empty: a full-rank square A has :math:`\partial\|A\|_* = \{UV^\top\}`)."""
    check_finite("A", A)
    A = np.asarray(A, dtype=float)
    if A.ndim != 2:
        raise ValueError(f"A must be a matrix (2-d array), got shape {A.shape}")
    count = check_int("count", count, 0)
    rs = np.random.RandomState(check_seed("seed", seed))
    tol = check_range("tol", tol, 0.0, 1.0, closed="left")
    U, sv, Vt = np.linalg.svd(A, full_matrices=False)
    r = int(np.sum(sv > tol * sv[0])) if sv.size and sv[0] > 0 else 0
    Ur, Vr = U[:, :r], Vt[:r].T
    out = np.empty((1 + count,) + A.shape)
    out[0] = U @ Vt
    left, right = np.eye(A.shape[0]) - Ur @ Ur.T, np.eye(A.shape[1]) - Vr @ Vr.T
    for k in range(1, count + 1):
        W = left @ rs.randn(*A.shape) @ right
        norm = np.linalg.norm(W, 2)
        out[k] = Ur @ Vr.T + (rs.uniform() * W / norm if norm > tol else 0.0)
    return out


def nuclear_entry_step(sigma, alpha, beta_star=1.0) -> np.ndarray:
    r""":math:`t_i = \lfloor\sigma_i^{(1)}/(\alpha\beta_*)\rfloor` (Theorem D.12): the number of updates after which
    :math:`\sigma_i` has entered :math:`[0, \alpha\beta_*)`. So :math:`\|A^{(t)}\|_{2\to2} < \alpha\beta_*` iff
    :math:`t \ge \max_i t_i` updates (claim (2) of D.12; with the paper's 1-based :math:`A^{(1)}`: iff
    :math:`t > \lfloor\|A^{(1)}\|_{2\to2}/\alpha\beta_*\rfloor`), except when :math:`\sigma_\max/\alpha\beta_*` is an integer,
    where σ alternates between 0 and exactly αβ*."""
    check_finite("sigma", sigma)
    sigma = check_grid("sigma", sigma, 0.0, closed="left")
    alpha, beta_star = check_range("alpha", alpha, 0.0, closed="neither"), \
        check_range("beta_star", beta_star, 0.0, closed="neither")
    return np.floor(sigma / (alpha * beta_star))


def nuclear_singular_values(sigma, alpha, steps: int, beta_star=1.0, svd: str = "thin",
                            tol: float = 1e-9) -> np.ndarray:
    r"""Singular values under the pure nuclear-norm subgradient step :math:`A^{(t+1)} = A^{(t)} - \alpha\beta_* U^{(t)}V^{(t)\top}`
    (Theorem D.12, eq. 125): row k is :math:`\sigma^{(k)}` after k updates, k = 0 … ``steps``, from the
    recursion :math:`\sigma_i^{(k+1)} = |\sigma_i^{(k)} - \alpha\beta_*|`. ``svd="thin"``: U, V hold all
    min(n1, n2) singular vectors (the kernels and the authors' code), so a zero singular value is
    kicked to αβ* like any other; ``svd="compact"``: only the nonzero ones (the theorem's compact
    SVD), so a singular value that reaches 0 stays there; as in
    :func:`grokkit.kernels.matrix.nuclear_iterates`, values at most ``tol`` times αβ* count as 0
    (rounding: in floating point 0.3 − 3·0.1 is 5.6e-17, and an SVD returns ~1e-16 for a zero).
    ``sigma`` lists all min(n1, n2) singular values, zeros included.

    In closed form: :math:`\sigma_i^{(k)} = \sigma_i - k\alpha\beta_*` for :math:`k \le t_i` (:func:`nuclear_entry_step`),
    then it alternates :math:`\sigma_i^\circ \leftrightarrow \alpha\beta_* - \sigma_i^\circ`,
    :math:`\sigma_i^\circ = \sigma_i - t_i\alpha\beta_*`. What the theorem's claims become (spec §5 item 10):
    (1) "A stationary iff σ_max < αβ*" fails: that set is invariant but the map is **2-periodic** there,
    :math:`A^{(t+2)} = A^{(t)} \ne A^{(t+1)}`; (2) holds (generic σ); (3) the rank formula
    :math:`|\{i: \sigma_i/\alpha\beta_* \in \mathbb Z\}|` counts the singular values that vanish (at alternate
    steps); the survivors are :math:`\{i: \sigma_i/\alpha\beta_* \notin \mathbb Z\}`.
    Unsorted: column i follows the initial :math:`\sigma_i` (sort each row to compare with an SVD)."""
    steps = check_int("steps", steps, 0)
    sigma = check_grid("sigma", sigma, 0.0, closed="left").ravel()
    step = check_range("alpha", alpha, 0.0, closed="neither") * \
        check_range("beta_star", beta_star, 0.0, closed="neither")
    check_option("svd", svd, NUCLEAR_SVDS)
    tol = check_range("tol", tol, 0.0, 1.0, closed="left")
    out = np.empty((steps + 1, sigma.size))
    out[0] = sigma
    for k in range(steps + 1):
        if svd == "compact":
            out[k][out[k] <= tol * step] = 0.0
        if k < steps:
            out[k + 1] = np.where(out[k] > 0.0, np.abs(out[k] - step), 0.0) if svd == "compact" \
                else np.abs(out[k] - step)
    return out


def step_size_sums(alpha, T, alpha_decay=None) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\sum_{t=1}^T\alpha_t` and :math:`\sum_{t=1}^T\alpha_t^2` for the kernels' steps
    :math:`\alpha_t = \alpha(1+b)/(b+t)` (``alpha_decay`` = b in [0, inf], :func:`grokkit.kernels.run.step_size`;
    None or inf: the constant step α), the sums of Theorems D.4 and D.13 and Corollary D.1.

    ``T`` (K,) counts updates (integers ≥ 1); ``alpha`` and ``alpha_decay`` are scalars or one per
    configuration (G,). Returns two arrays of shape (G, K) (or (K,) for scalars). Exact sums of the
    same float64 steps as the kernels, accumulated in chunks of 10⁶ terms: the cost is O(G max T),
    like the run itself."""
    alpha = check_grid("alpha", alpha, 0.0)
    decay = np.full_like(alpha, np.inf) if alpha_decay is None else check_grid("alpha_decay", alpha_decay, 0.0,
                                                                                  closed="both")
    alpha, decay = np.broadcast_arrays(alpha, decay)
    if alpha.ndim > 1:
        raise ValueError(f"alpha and alpha_decay must be scalars or one per configuration (G,), "
                         f"got shape {alpha.shape}")
    T_array = np.atleast_1d(np.asarray(T))
    T = np.array([check_int("T", t, 1, MAX_STEPS) for t in T_array.ravel()], dtype=np.int64).reshape(T_array.shape)
    if T.ndim != 1:
        raise ValueError(f"T must be a scalar or 1-D (K,), got shape {T.shape}")
    flat_a, flat_b = np.atleast_1d(alpha), np.atleast_1d(decay)
    sums = np.zeros((2, flat_a.size, T.size))
    order = np.argsort(T)
    total, done, chunk = np.zeros((2, flat_a.size)), 0, 10**6
    for k in order:  # T ascending: extend the running sums to T[k]
        while done < T[k]:
            t = np.arange(done + 1, min(done + chunk, T[k]) + 1, dtype=float)
            steps = step_size(flat_a[:, None], flat_b[:, None], t)
            total += [steps.sum(axis=1), (steps**2).sum(axis=1)]
            done = int(t[-1])
        sums[:, :, k] = total
    sums = sums.reshape((2,) + alpha.shape + T.shape)
    return sums[0], sums[1]


def _column(v: np.ndarray) -> np.ndarray:
    """A per-configuration array (G,) as a (G, 1) column against the T axis; scalars and (G, K) as they are."""
    return v[:, None] if v.ndim == 1 else v


def _bound_inputs(dist0, L, alpha, T, alpha_decay):
    """``dist0`` and ``L`` checked, as columns (:func:`_column`), with the step sums (K,) or (G, K)."""
    dist0 = check_grid("dist0", dist0, 0.0, closed="left")
    L = check_grid("L", L, 0.0, closed="left")
    if dist0.ndim > 1 or L.ndim > 2:
        raise ValueError(f"dist0 must be a scalar or (G,) and L a scalar, (G,) or (G, K), got shapes "
                         f"{dist0.shape} and {L.shape}")
    s1, s2 = step_size_sums(alpha, T, alpha_decay)
    return _column(dist0), _column(L), s1, s2


def subgradient_gap_bound(dist0, L, alpha, T, alpha_decay=None) -> np.ndarray:
    r"""Theorem D.4: :math:`f_{\rm best}^{(T)} - f(A^*) \le \dfrac{\|A^{(1)} - A^*\|_F^2 + L^2\sum_{t\le T}\alpha_t^2}
    {2\sum_{t\le T}\alpha_t}`, with :math:`f_{\rm best}^{(T)} = \min_{t\le T}f(A^{(t)})` over the iterates
    :math:`A^{(1)}, \dots, A^{(T)}` and :math:`L \ge \max_{t\le T}\|F(A^{(t)})\|_F` (all the proof uses).

    ``dist0`` = :math:`\|A^{(1)} - A^*\|_F` (any reference point A* in place of the ground truth: the
    proof only uses the subgradient inequality at it); ``T`` (K,) the number of iterates (the kernels'
    record at step k holds :math:`A^{(k+1)}`, so T = k + 1); ``alpha``, ``alpha_decay`` as
    :func:`step_size_sums`; ``dist0`` a scalar or (G,), ``L`` a scalar, (G,) or (G, K) (one
    configuration's L along T is (1, K)). Shape (G, K), or (K,) when every input is per T or scalar."""
    dist0, L, s1, s2 = _bound_inputs(dist0, L, alpha, T, alpha_decay)
    return (dist0**2 + L**2 * s2) / (2.0 * s1)


def subgradient_gap_limit(L, alpha, alpha_decay=None) -> np.ndarray:
    r"""Corollary D.1, the limit T → ∞ of :func:`subgradient_gap_bound`: :math:`L^2\alpha/2` for the
    constant step (eq. 104; ``alpha_decay`` None or inf), 0 for the square-summable but not summable
    steps :math:`\alpha_t = \alpha(1+b)/(b+t)` (eq. 105). Broadcasts over (G,) arrays."""
    L, alpha = check_grid("L", L, 0.0, closed="left"), check_grid("alpha", alpha, 0.0)
    decay = np.inf if alpha_decay is None else check_grid("alpha_decay", alpha_decay, 0.0, closed="both")
    return np.where(np.isinf(decay), L**2 * alpha / 2.0, 0.0)


def nuclear_gap_bound(dist0, L, alpha, T, beta_star, alpha_decay=None, xi_norm=0.0, beta2=0.0,
                      A_star_norm=0.0) -> np.ndarray:
    r"""Theorem D.13: :math:`\min_{t\le T}(\|A^{(t)}\|_* - \|A^*\|_*) \le
    \dfrac{\|A^{(1)} - A^*\|_F^2 + L^2\sum_{t\le T}\alpha_t^2}{2\beta_*\sum_{t\le T}\alpha_t}
    + \dfrac{\|\xi\|_2^2 + \beta_2\|A^*\|_F^2}{2\beta_*}`, with :math:`L = \max_{t\le T}\|F(A^{(t)})\|_F`
    (the paper's :math:`\max_t\|\nabla_Af(A^{(t)})\|_F`). With :math:`\beta_1`, :math:`\|b\|_1` and
    :math:`\|b^*\|_2` in place of :math:`\beta_*`, :math:`\|A\|_*` and :math:`\|A^*\|_F` it is Theorem C.13,
    its vector analogue (the same formula).

    It is :func:`subgradient_gap_bound` divided by β* plus the second term, because
    :math:`\beta_*\|A\|_* \le f(A)` and :math:`f(A^*) = \beta_*\|A^*\|_* + \tfrac{\beta_2}2\|A^*\|_F^2 + \tfrac12\|\xi\|_2^2`.
    ``xi_norm`` = :math:`\|\xi\|_2`, ``A_star_norm`` = :math:`\|A^*\|_F`; ``beta_star`` > 0 and ``beta2``
    scalars or (G,); the other arguments as :func:`subgradient_gap_bound`. Shape (G, K)."""
    beta_star = check_grid("beta_star", beta_star, 0.0)
    beta2 = check_grid("beta2", beta2, 0.0, closed="left")
    xi_norm = check_range("xi_norm", xi_norm, 0.0, closed="left")
    A_star_norm = check_range("A_star_norm", A_star_norm, 0.0, closed="left")
    gap = subgradient_gap_bound(dist0, L, alpha, T, alpha_decay)
    return (gap + 0.5 * (xi_norm**2 + _column(beta2) * A_star_norm**2)) / _column(beta_star)


def deep_gradients(factors, grad):
    r"""Lemma D.14: for :math:`f(\mathcal A_1, \dots, \mathcal A_L) = g(\mathcal A_1\cdots\mathcal A_L)`,
    :math:`\partial f/\partial\mathcal A_k = (\prod_{i<k}\mathcal A_i)^\top\,\nabla g(A)\,(\prod_{i>k}\mathcal A_i)^\top`
    (empty products = I), for k = 1 … L; ``grad`` is :math:`\nabla g(A)` at the product A.

    ``factors``: a sequence of L ≥ 1 numpy arrays or torch tensors :math:`\mathcal A_k` of shape
    (..., d_{k-1}, d_k) (leading axes, e.g. the configuration axis, broadcast); ``grad`` of shape
    (..., d_0, d_L). Returns the list of the L gradients, of the factors' shapes and type."""
    factors = list(factors)
    if not factors:
        raise ValueError("factors must be a non-empty sequence of matrices (L >= 1), got []")
    for k, F in enumerate(factors):
        if F.ndim < 2:
            raise ValueError(f"factors[{k}] must be a matrix (ndim >= 2), got shape {tuple(F.shape)}")
        check_finite(f"factors[{k}]", F)
        if k and F.shape[-2] != factors[k - 1].shape[-1]:
            raise ValueError(f"factors[{k}] must have {factors[k - 1].shape[-1]} rows (the columns of "
                             f"factors[{k - 1}]), got shape {tuple(F.shape)}")
    want = (factors[0].shape[-2], factors[-1].shape[-1])
    if grad.ndim < 2 or tuple(grad.shape[-2:]) != want:
        raise ValueError(f"grad must have shape (..., d_0, d_L) = (..., {want[0]}, {want[1]}), got {tuple(grad.shape)}")
    check_finite("grad", grad)
    return factor_gradients(factors, grad)


def product_jacobian(factors, k: int) -> np.ndarray:
    r"""The matrix of eq. (132), proof of Lemma D.14: :math:`\operatorname{vec}A = \big((\prod_{i>k}\mathcal A_i)^\top
    \otimes \prod_{i<k}\mathcal A_i\big)\operatorname{vec}\mathcal A_k` for :math:`A = \mathcal A_1\cdots\mathcal A_L`, with the
    column-major vec of :func:`grokkit.data.vec` (empty products = I). ``factors``: L numpy matrices
    :math:`\mathcal A_k` of shape (d_{k-1}, d_k); ``k`` in 1 … L as in the paper. Returns the
    (d_0 d_L, d_{k-1} d_k) Jacobian of :math:`\operatorname{vec}A` with respect to :math:`\operatorname{vec}\mathcal A_k`."""
    factors = [np.asarray(F, dtype=float) for F in factors]
    if not factors:
        raise ValueError("factors must be a non-empty sequence of matrices (L >= 1), got []")
    k = check_int("k", k, 1, len(factors), high_name="L")
    for i, F in enumerate(factors):
        if F.ndim != 2:
            raise ValueError(f"factors[{i}] must be a matrix (2-d array), got shape {F.shape}")
        check_finite(f"factors[{i}]", F)
        if i and F.shape[0] != factors[i - 1].shape[1]:
            raise ValueError(f"factors[{i}] must have {factors[i - 1].shape[1]} rows (the columns of "
                             f"factors[{i - 1}]), got shape {F.shape}")
    before = product(factors[:k - 1]) if k > 1 else np.eye(factors[0].shape[0])
    after = product(factors[k:]) if k < len(factors) else np.eye(factors[-1].shape[1])
    return np.kron(after.T, before)


def autograd_gradients(loss, *arrays) -> list[np.ndarray]:
    r"""The gradients of the scalar ``loss(*tensors)`` with respect to each of ``arrays`` by PyTorch's
    reverse-mode autograd, in float64: the reference that the closed forms (Lemma D.14,
    :func:`deep_gradients`) are checked against. ``loss`` takes torch tensors; ``arrays`` are
    numpy arrays or tensors; the gradients come back as numpy arrays of their shapes."""
    import torch

    if not callable(loss):
        raise ValueError(f"loss must be a function of torch tensors returning a scalar, got {loss!r}")
    if not arrays:
        raise ValueError("arrays must hold at least one array to differentiate with respect to, got none")
    for i, x in enumerate(arrays):
        check_finite(f"arrays[{i}]", x)
    leaves = [torch.tensor(np.asarray(x, dtype=float), requires_grad=True) for x in arrays]
    value = loss(*leaves)
    if value.numel() != 1:
        raise ValueError(f"loss must return a scalar, got shape {tuple(value.shape)}")
    return [g.numpy() for g in torch.autograd.grad(value, leaves)]


def finite_difference_gradient(loss, x, eps: float = 1e-6) -> np.ndarray:
    r"""Central finite differences :math:`(\ell(x + \epsilon e_j) - \ell(x - \epsilon e_j))/(2\epsilon)` for every
    entry j of ``x``: a derivative-free reference for the closed forms (Lemma D.14), with error
    :math:`O(\epsilon^2)` plus rounding :math:`O(10^{-16}/\epsilon)`. ``loss`` takes one torch float64
    tensor of the shape of ``x`` and returns a scalar; returns a numpy array of that shape."""
    import torch

    if not callable(loss):
        raise ValueError(f"loss must be a function of a torch tensor returning a scalar, got {loss!r}")
    check_finite("x", x)
    eps = check_range("eps", eps, 0.0, closed="neither")
    x = np.asarray(x, dtype=float)
    out = np.empty(x.size)
    with torch.no_grad():
        for j in range(x.size):
            step = np.zeros(x.size)
            step[j] = eps
            step = step.reshape(x.shape)
            out[j] = (float(loss(torch.as_tensor(x + step))) - float(loss(torch.as_tensor(x - step)))) / (2 * eps)
    return out.reshape(x.shape)


def deep_step_size_limit(sigma_max, depth: int, lambda_max: float = 1.0):
    r"""The step below which gradient descent on the deep factorization (eqs. 128–130, β* = β₂ = 0)
    is stable near a balanced factorization of a matrix whose largest singular value is
    ``sigma_max`` :math:`\sigma_1`: :math:`\alpha < 2/(\lambda_\max L\sigma_1^{2(L-1)/L})`.

    At an exact fit the Hessian of :math:`\tfrac12\|\mathcal X(\mathcal A_1\cdots\mathcal A_L) - y\|^2` in the
    factors is :math:`J^\top J`, :math:`J(d\mathcal A_1, \dots, d\mathcal A_L) = \mathcal X(\sum_k
    (\prod_{i<k}\mathcal A_i)\,d\mathcal A_k(\prod_{i>k}\mathcal A_i))` (Lemma D.14). With balanced factors (each
    with singular values :math:`\sigma_i^{1/L}`) every product of L − 1 of them has norm
    :math:`\sigma_1^{(L-1)/L}`, so its largest eigenvalue is at most :math:`\lambda_\max L\sigma_1^{2(L-1)/L}`,
    with equality when :math:`\mathcal X` preserves the norm of :math:`u_1v_1^\top` (full observation):
    the end-to-end preconditioner of deep linear networks (Arora, Cohen and Hazan, 2018). L = 1 is
    the shallow bound :math:`2/\lambda_\max`. ``sigma_max`` > 0 (a scalar or an array), ``depth`` ≥ 1,
    ``lambda_max`` > 0 (1 for completion)."""
    sigma = check_grid("sigma_max", sigma_max, 0.0)
    depth = check_int("depth", depth, 1)
    lambda_max = check_range("lambda_max", lambda_max, 0.0, closed="neither")
    limit = 2.0 / (lambda_max * depth * sigma ** (2.0 * (depth - 1) / depth))
    return float(limit) if np.ndim(sigma_max) == 0 else limit


# --- background: Woodworth et al. (2020), kernel and rich regimes ------------------------------
#
# [W] = Woodworth, Gunasekar, Lee, Moroshko, Savarese, Golan, Soudry, Srebro, "Kernel and Rich
# Regimes in Overparametrized Models", COLT 2020. Their α, the initialisation scale, is
# ``init_scale`` here (``alpha`` stays the learning rate) and their D is ``depth``. The model is
# the diagonal network β = w₊^D − w₋^D ([W] eqs. 3 and 10) from w₊(0) = w₋(0) = init_scale·1,
# trained by gradient flow on ½‖Xβ − y‖² (:func:`grokkit.kernels.diagonal_net`'s loss; [W]'s
# Σ(f − y)² is twice it, the same path at twice the speed).
#
# Every depth has one link h_D: on the flow, β(t) = α^D h_D(Xᵀν(t)) for a ν(t) ∈ R^N ([W] eqs. 17
# and 57), so a zero-error limit is β = α^D h_D(Xᵀν), the KKT point of min Q^D_α s.t. Xβ = y with
# q_D' = h_D⁻¹. For D = 2 the link is h_2(z) = 2 sinh z (then q_2 = q, [W] Theorem 1); for D ≥ 3
# it is h_D(z) = (1 − z)^(−D/(D−2)) − (1 + z)^(−D/(D−2)) on (−1, 1) ([W] Theorem 3). The scale of ν
# (the 4 of [W] eq. 17 against the 2 of the ½-loss) only rescales time: the minimiser does not
# depend on it, Q's argument β/α^D does not either.

def _woodworth_depth(depth) -> int:
    return check_int("depth", depth, 2)


def _exponents(depth: int) -> tuple[float, float]:
    """p = D/(D − 2) of h_D and k = 2/(D − 2) of its antiderivative H_D (D ≥ 3)."""
    return depth / (depth - 2), 2.0 / (depth - 2)


def q(z):
    r"""[W] Theorem 1: :math:`q(z) = \int_0^z \operatorname{arcsinh}(u/2)\,du = 2 - \sqrt{4 + z^2}
    + z\operatorname{arcsinh}(z/2)`, the coordinate function of the depth-2 implicit regulariser
    :math:`Q_\alpha(\beta) = \alpha^2\sum_i q(\beta_i/\alpha^2)`. Limits: :math:`q(z) = z^2/4 + O(z^4)`
    (the kernel regime, ℓ2) and :math:`q(z) = |z|\log|z| - |z| + 2 + O(1/|z|)` (the rich limit, ℓ1; [W]
    §4 print the remainder as O(1/|z|), dropping :math:`-|z| + 2`). Computed
    as :math:`z\operatorname{arcsinh}(z/2) - z^2/(2 + \sqrt{4 + z^2})`, accurate at small and at huge |z|.
    ``z`` a finite number or array; returns the same shape."""
    check_finite("z", z)
    z = np.asarray(z, dtype=float)
    out = z * np.arcsinh(z / 2) - z * (z / (2 + np.hypot(2.0, z)))
    return float(out) if out.ndim == 0 else out


def h_depth(z, depth: int):
    r"""The link :math:`h_D` of the depth-D diagonal network ([W] Theorem 3, eq. 59):
    :math:`h_D(z) = (1 - z)^{-D/(D-2)} - (1 + z)^{-D/(D-2)}` on (−1, 1) for D ≥ 3, increasing from −∞
    to ∞; for D = 2 the link of [W] eq. 17, :math:`h_2(z) = 2\sinh z` on the whole line. On the
    gradient-flow path :math:`\beta(t) = \alpha^D h_D(X^\top\nu(t))`, and :math:`q_D' = h_D^{-1}`.
    ``z`` finite (in (−1, 1) for D ≥ 3), ``depth`` an integer ≥ 2."""
    depth = _woodworth_depth(depth)
    check_finite("z", z)
    z = np.asarray(z, dtype=float)
    if depth == 2:
        out = 2 * np.sinh(z)
    else:
        if np.any(np.abs(z) >= 1):
            raise ValueError(f"z must be in (-1, 1) for depth >= 3, got {show(z[np.abs(z) >= 1].flat[0])}")
        out = _h_stable(z, depth)
    return float(out) if out.ndim == 0 else out


def _h_inverse(z: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    r"""u = h_D⁻¹(|z|) ∈ [0, 1) and a = 1 − u, each accurate (D ≥ 3): bisection on u for |z| ≤ 1
    (:math:`u \le |z|/(2p)` by convexity, :math:`h_D'(0) = 2p`) and on a for |z| > 1
    (:math:`a^{-p} - 1 \le h_D \le a^{-p}` brackets it in :math:`[(|z| + 1)^{-1/p}, |z|^{-1/p}]`); 200
    halvings, so the bracket shrinks to rounding."""
    p, _ = _exponents(depth)
    x = np.abs(z)
    small = x <= 1
    h_u = lambda u: _h_stable(u, depth)             # noqa: E731
    h_a = lambda a: a ** -p - (2 - a) ** -p        # noqa: E731
    lo = np.where(small, 0.0, (x + 1) ** (-1 / p))
    hi = np.where(small, np.minimum(x / (2 * p), 0.5), np.minimum(1.0, np.maximum(x, 1.0) ** (-1 / p)))
    for _ in range(200):
        mid = (lo + hi) / 2
        # u increases h_D, a decreases it: move the bound on the side of the root
        with np.errstate(divide="ignore"):
            above = np.where(small, h_u(mid) > x, h_a(mid) < x)
        hi, lo = np.where(above, mid, hi), np.where(above, lo, mid)
    root = (lo + hi) / 2
    return np.where(small, root, 1 - root), np.where(small, 1 - root, root)


def q_depth(z, depth: int):
    r""":math:`q_D = \int_0^z h_D^{-1}`, the coordinate function of the depth-D implicit regulariser
    :math:`Q^D_\alpha(\beta) = \alpha^D\sum_i q_D(\beta_i/\alpha^D)` ([W] Theorem 3, eq. 60). By parts,
    with :math:`u = h_D^{-1}(z)` and :math:`H_D = \int h_D`,

    .. math:: q_D(z) = zu - H_D(u) + H_D(0), \qquad
              H_D(u) = \tfrac{D-2}{2}\big((1-u)^{-2/(D-2)} + (1+u)^{-2/(D-2)}\big),

    the Legendre transform of :math:`H_D` (no quadrature); :math:`H_D(u) - H_D(0)` is summed with
    ``expm1``, and below u = 1e-3 by its even power series (the two powers cancel there). Limits: :math:`q_D(z) = \frac{D-2}{4D}z^2 + O(z^4)` (ℓ2) and
    :math:`q_D(z) = |z| + O(|z|^{2/D})` (ℓ1). ``depth = 2`` is :func:`q` (:math:`h_2 = 2\sinh`).
    ``z`` finite, ``depth`` an integer ≥ 2."""
    depth = _woodworth_depth(depth)
    if depth == 2:
        return q(z)
    check_finite("z", z)
    z = np.asarray(z, dtype=float)
    u, a = _h_inverse(z, depth)
    _, k = _exponents(depth)
    with np.errstate(divide="ignore"):
        log_a = np.where(np.abs(z) <= 1, np.log1p(-u), np.log(a))  # from the variable bisected, to full precision
    rise = (depth - 2) / 2 * (np.expm1(-k * log_a) + np.expm1(-k * np.log1p(u)))
    # below u = 1e-3 the two terms cancel to O(u²): the even series 2Σ C(k+j−1, j)u^j, j = 2, 4, …, 10
    series = sum(2 * special.binom(k + j - 1, j) * u ** j for j in range(2, 12, 2))
    rise = np.where(u < 1e-3, (depth - 2) / 2 * series, rise)
    out = np.abs(z) * u - rise
    return float(out) if out.ndim == 0 else out


def _q2_scaled(beta: np.ndarray, log_scale: np.ndarray) -> np.ndarray:
    r""":math:`\alpha^2 q(\beta/\alpha^2) = |\beta|\operatorname{arcsinh}(|\beta|/2\alpha^2) - \beta^2/(\sqrt{4\alpha^4 + \beta^2}
    + 2\alpha^2)` from :math:`\log\alpha` (so that :math:`\alpha^2` may underflow): the arcsinh of
    :math:`e^L` is :math:`L + \log(1 + \sqrt{1 + e^{-2L}})` for large L."""
    b = np.abs(beta)
    a2 = np.exp(2 * log_scale)
    with np.errstate(divide="ignore"):
        L = np.log(b) - np.log(2.0) - 2 * log_scale
    big = L > 20
    asinh = np.where(big, L + np.log1p(np.sqrt(1 + np.exp(-2 * np.where(big, L, 20.0)))),
                     np.arcsinh(np.exp(np.minimum(L, 20.0))))
    return b * asinh - b * (b / (np.sqrt(4 * a2 * a2 + b * b) + 2 * a2 + (b == 0)))


def implicit_regulariser(beta, init_scale, depth: int = 2):
    r"""The implicit regulariser of gradient flow on the depth-D diagonal network ([W] Theorems 1
    and 3): :math:`Q^D_\alpha(\beta) = \alpha^D\sum_i q_D(\beta_i/\alpha^D)` (:func:`q_depth`; for D = 2,
    :math:`Q_\alpha = \alpha^2\sum_i q(\beta_i/\alpha^2)`), α = ``init_scale``. Kernel regime:
    :math:`Q^D_\alpha(\beta) \approx \frac{D-2}{4D}\|\beta\|_2^2/\alpha^D` (D = 2: :math:`\|\beta\|_2^2/4\alpha^2`);
    rich limit: :math:`Q_\alpha/\log(1/\alpha^2) \to \|\beta\|_1` (D = 2), :math:`Q^D_\alpha \to \|\beta\|_1` (D ≥ 3).

    ``beta`` (..., n) finite; ``init_scale`` > 0, a number or an array broadcasting against
    ``beta.shape[:-1]`` (a grid (G,) against one β (n,) gives G values).
    D = 2 is evaluated from :math:`\log\alpha`, so any positive float works. Returns the sum over
    the last axis."""
    depth = _woodworth_depth(depth)
    check_finite("beta", beta)
    beta = np.asarray(beta, dtype=float)
    if beta.ndim == 0:
        raise ValueError(f"beta must be a vector (..., n), got a scalar {show(beta)}")
    scale = check_grid("init_scale", init_scale, 0.0)
    if depth == 2:
        out = _q2_scaled(beta, np.log(scale)[..., None]).sum(axis=-1)
    else:
        aD = scale[..., None] ** depth
        out = (aD * q_depth(beta / aD, depth)).sum(axis=-1)
    return float(out) if np.ndim(out) == 0 else out


# The init_scale range of implicit_bias and diagonal_flow. D = 2 runs in log space, from 1e-300
# (α² underflows, log α² does not) to 1e100. For D ≥ 3, near the rich limit the dual variable
# λ = Xᵀν sits at 1 − λ ≈ (α^D/|β_i|)^((D−2)/D) from the boundary, and rounding of λ (≈ 1e-16)
# is amplified by 1/(1 − λ) in β: init_scale^(D−2) ≥ 1e-4 keeps the residual reachable to ≈ 1e-11
# (≈ 6e-10 at 1e-6, measured), below the default tol 1e-10.
WOODWORTH_MIN_SCALE_D2 = 1e-300
WOODWORTH_MAX_SCALE = 1e100
WOODWORTH_MIN_POWER = 1e-4


def woodworth_scale_range(depth: int) -> tuple[float, float]:
    r"""The ``init_scale`` interval where :func:`implicit_bias` and :func:`diagonal_flow` work in float64:
    [1e-300, 1e100] for D = 2; :math:`\alpha^{D-2} \ge 10^{-4}` and :math:`\alpha^D \le 10^{100}` for D ≥ 3
    (1e-4 to 2e33 for D = 3, 1e-2 to 1e25 for D = 4), see :data:`WOODWORTH_MIN_POWER`."""
    depth = _woodworth_depth(depth)
    if depth == 2:
        return WOODWORTH_MIN_SCALE_D2, WOODWORTH_MAX_SCALE
    return WOODWORTH_MIN_POWER ** (1 / (depth - 2)), WOODWORTH_MAX_SCALE ** (1 / depth)


def _check_scales(init_scale, depth: int) -> np.ndarray:
    scale = check_grid("init_scale", init_scale, 0.0)
    if scale.ndim > 1:
        raise ValueError(f"init_scale must be a number or a 1-D grid, got shape {scale.shape}")
    low, high = woodworth_scale_range(depth)
    bad = (scale < low) | (scale > high)
    if bad.any():
        raise ValueError(f"init_scale must be in [{low:.3g}, {high:.3g}] for depth {depth} (float64 range of "
                         f"the dual solution, woodworth_scale_range), got {show(scale[bad].flat[0])}")
    return scale


def _interpolation_problem(X, y) -> tuple[np.ndarray, np.ndarray]:
    check_finite("X", X)
    check_finite("y", y)
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must have shape (N, n) and y shape (N,), got {X.shape} and {y.shape}")
    if np.linalg.matrix_rank(X) != X.shape[0]:
        raise ValueError(f"X must have full row rank N = {X.shape[0]} <= n (every y interpolated), got rank "
                         f"{np.linalg.matrix_rank(X)} with n = {X.shape[1]}")
    return X, y


def _h_stable(lam: np.ndarray, depth: int) -> np.ndarray:
    r""":math:`h_D(\lambda)` (D ≥ 3) as :math:`(1+\lambda)^{-p}\operatorname{expm1}(2p\operatorname{artanh}\lambda)`,
    without the cancellation of the two powers at small λ (the kernel regime)."""
    p, _ = _exponents(depth)
    return (1 + lam) ** -p * np.expm1(2 * p * np.arctanh(lam))


def _link(lam: np.ndarray, log_scale: float, depth: int):
    r"""β = α^D h_D(λ), log of the weights w = α^D h_D'(λ) (the Hessian's diagonal) and the dual
    potential Σ α^D (H_D(λ) − H_D(0)) (H_D' = h_D), at λ = Xᵀν; infinite potential outside (−1, 1) for
    D ≥ 3. D = 2 runs in log space (α²e^{|λ|} = exp(|λ| + 2 log α)); both avoid cancellation at small
    λ (large α): :math:`2\sinh m = e^m(-\operatorname{expm1}(-2m))`, :math:`2\cosh m - 2 = e^m\operatorname{expm1}(-m)^2`."""
    if depth == 2:
        m = np.abs(lam)
        with np.errstate(over="ignore"):
            e = np.exp(m + 2 * log_scale)
        return (np.sign(lam) * e * -np.expm1(-2 * m), m + 2 * log_scale + np.log1p(np.exp(-2 * m)),
                float(np.sum(e * np.expm1(-m) ** 2)))
    if np.any(np.abs(lam) >= 1):
        return None, None, math.inf
    p, k = _exponents(depth)
    aD = math.exp(depth * log_scale)
    log_w = depth * log_scale + np.log(p * ((1 - lam) ** (-p - 1) + (1 + lam) ** (-p - 1)))
    rise = np.expm1(-k * np.log1p(-lam)) + np.expm1(-k * np.log1p(lam))
    return aD * _h_stable(lam, depth), log_w, float(aD * (depth - 2) / 2 * np.sum(rise))


def _solve_scaled(X: np.ndarray, log_w: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, float]:
    r"""d and c with :math:`(X\operatorname{diag}(w)X^\top)^{-1}g = e^{c}d`: the weights normalised by the
    largest (they underflow at tiny α); least squares where the matrix is numerically singular."""
    top = float(log_w.max())
    H = (X * np.exp(log_w - top)) @ X.T
    try:
        return np.linalg.solve(H, g), -top
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(H, g, rcond=None)[0], -top


def _dual_newton(X: np.ndarray, y: np.ndarray, log_scale: float, depth: int, tol: float, max_iter: int,
                 nu: np.ndarray):
    r"""ν with :math:`X\alpha^Dh_D(X^\top\nu) = y` by damped Newton on the convex dual
    :math:`\phi(\nu) = \sum_i\alpha^DH_D((X^\top\nu)_i) - y^\top\nu` (gradient Xβ − y, Hessian
    :math:`X\operatorname{diag}(w)X^\top`). The Hessian is normalised by its largest weight (it
    underflows at tiny α); a step moves :math:`X^\top\nu` by at most 30 (D = 2) or 0.99 of the way to
    the boundary ±1 (D ≥ 3), then halves until φ decreases (Armijo). Starts from ``nu``; returns
    β, ν and the log-weights there."""
    y_norm = np.linalg.norm(y)
    beta, log_w, potential = _link(X.T @ nu, log_scale, depth)
    phi = potential - y @ nu
    for _ in range(max_iter):
        g = X @ beta - y
        if np.linalg.norm(g) <= tol * y_norm:
            return beta, nu, log_w
        d, log_step = _solve_scaled(X, log_w, -g)
        delta = X.T @ d
        largest = np.abs(delta).max()
        if largest == 0:
            break
        # the Newton step is d e^{-top}; cap it
        if depth == 2:
            log_t = min(log_step, math.log(30.0 / largest))
        else:
            lam = X.T @ nu
            room = np.where(delta > 0, 1 - lam, 1 + lam) / np.maximum(np.abs(delta), 1e-300)
            log_t = min(log_step, math.log(0.99 * room.min()))
        t = math.exp(log_t)
        slope = float(g @ d)
        for _ in range(80):
            beta_new, log_w_new, potential = _link(X.T @ (nu + t * d), log_scale, depth)
            phi_new = potential - y @ (nu + t * d)
            if phi_new <= phi + 1e-4 * t * slope or (
                    beta_new is not None and phi_new <= phi + 1e-12 * abs(phi)
                    and np.linalg.norm(X @ beta_new - y) < np.linalg.norm(g)):
                break
            t /= 2
        else:
            break
        nu = nu + t * d
        beta, log_w, phi = beta_new, log_w_new, phi_new
    residual = np.linalg.norm(X @ beta - y) / y_norm
    raise RuntimeError(f"implicit_bias did not converge for init_scale {math.exp(log_scale):.3g}, depth {depth}: "
                       f"relative residual {residual:.3g} > tol {tol:g}")


def implicit_bias(X, y, init_scale, depth: int = 2, *, tol: float = 1e-10, max_iter: int = 500) -> np.ndarray:
    r"""The limit of gradient flow on the depth-D diagonal network from :math:`w_\pm(0) = \alpha\mathbf 1`
    ([W] Theorems 1 and 3): :math:`\beta^\infty_{\alpha,D} = \operatorname{argmin}_{X\beta = y} Q^D_\alpha(\beta)`
    (:func:`implicit_regulariser`), α = ``init_scale``.

    Solved in the dual: the KKT conditions are :math:`\beta = \alpha^Dh_D(X^\top\nu)` (:func:`h_depth`;
    :math:`2\alpha^2\sinh(X^\top\nu)` for D = 2) and :math:`X\beta = y`, the N equations of a damped Newton
    method on a convex function of ν (:math:`\|X^\top\nu\|_\infty < 1` kept for D ≥ 3, [W] Lemma 8),
    run to a relative residual :math:`\|X\beta - y\|/\|y\| \le` ``tol``. Float64 over the interval
    :func:`woodworth_scale_range` (D = 2: 1e-300 to 1e100, computed in log space; D ≥ 3:
    :math:`\alpha^{D-2} \ge 10^{-4}`), a ``ValueError`` outside it; a ``RuntimeError`` if Newton stalls.

    ``X`` (N, n) of full row rank N ≤ n, ``y`` (N,), both finite; ``init_scale`` a number (returns β,
    (n,)) or a 1-D grid (returns (G, n), one solve per scale); ``depth`` an integer ≥ 2."""
    depth = _woodworth_depth(depth)
    X, y = _interpolation_problem(X, y)
    scale = _check_scales(init_scale, depth)
    tol = check_range("tol", tol, 0.0, 1.0, closed="neither")
    max_iter = check_int("max_iter", max_iter, 1)
    if not y.any():
        return np.zeros(scale.shape + X.shape[1:])
    out = np.array([_implicit_bias(X, y, math.log(a), depth, tol, max_iter) for a in scale.ravel()])
    return out.reshape(scale.shape + X.shape[1:])


CONTINUATION_LOG_SCALE = math.log(1e-20)  # below it, D = 2 is reached by continuation in log α
CONTINUATION_STEP = 50.0                  # the largest decrease of log α per continuation step


def _implicit_bias(X, y, log_scale: float, depth: int, tol: float, max_iter: int) -> np.ndarray:
    r"""One solve of :func:`implicit_bias`. For D = 2 below α = 1e-20, Newton from ν = 0 slows down (the
    Hessian's weights spread over hundreds of orders of magnitude): solve at 1e-20, then lower
    :math:`s = \log\alpha` in steps of at most 50, each started from the tangent
    :math:`d\nu/ds = -2(XWX^\top)^{-1}y` (differentiate :math:`Xe^{2s}h_2(X^\top\nu) = y` in s; a
    pseudo-inverse, the weights off the support being negligible), kept where the dual is finite; a step
    whose Newton solve fails is halved."""
    start = max(log_scale, CONTINUATION_LOG_SCALE) if depth == 2 else log_scale
    beta, nu, log_w = _dual_newton(X, y, start, depth, tol, max_iter, np.zeros(X.shape[0]))
    s, step = start, CONTINUATION_STEP
    while s > log_scale:
        s_new = max(s - step, log_scale)
        top = float(log_w.max())
        tangent = np.linalg.lstsq((X * np.exp(log_w - top)) @ X.T, y, rcond=1e-12)[0]
        guess = nu - 2 * (s_new - s) * math.exp(-top) * tangent
        try:
            beta, nu, log_w = _dual_newton(X, y, s_new, depth, tol, max_iter,
                                           guess if math.isfinite(_link(X.T @ guess, s_new, depth)[2]) else nu)
        except RuntimeError:
            if step < 1.0:
                raise
            step /= 2  # a shorter step from the same point
            continue
        s = s_new
    return beta


def diagonal_flow(X, y, init_scale, depth: int, times) -> np.ndarray:
    r"""The exact gradient-flow path of the depth-D diagonal network :math:`\beta = w_+^D - w_-^D` on
    :math:`\tfrac12\|X\beta - y\|^2` from :math:`w_\pm(0) = \alpha\mathbf 1` (the continuous time of
    :func:`grokkit.kernels.diagonal_net`, ``alpha * steps``), as an N-dimensional ODE.

    With :math:`s(t) = \int_0^t r`, :math:`r = X\beta - y`, the weights are closed-form in s
    ([W] App. D eqs. 15–17 and App. F eqs. 51, 56–57; the ½-loss halves their constants):
    :math:`w_\pm = \alpha e^{\mp2X^\top s}` for D = 2, :math:`w_\pm^{2-D} = \alpha^{2-D} \pm D(D-2)X^\top s`
    for D ≥ 3. So :math:`\beta(t) = \alpha^Dh_D(X^\top\nu(t))` (:func:`h_depth`) with :math:`\nu = -c_Ds`,
    :math:`c_2 = 4`, :math:`c_D = D(D-2)\alpha^{D-2}`, and

    .. math:: \dot\nu = c_D\,(y - X\alpha^Dh_D(X^\top\nu)), \qquad \nu(0) = 0,

    integrated by ``scipy.integrate.solve_ivp`` (LSODA, which switches to a stiff BDF method where the
    flow is stiff, with the Jacobian :math:`-c_DX\operatorname{diag}(\alpha^Dh_D'(X^\top\nu))X^\top`; rtol
    1e-10: 3 to 10 times faster than Radau or BDF here, to the same end point). Its limit is
    :func:`implicit_bias`. ``X`` (N, n), ``y`` (N,) finite; ``init_scale`` a number in
    :func:`woodworth_scale_range`; ``depth`` ≥ 2; ``times`` non-decreasing, ≥ 0. Returns β (T, n)."""
    from scipy.integrate import solve_ivp

    depth = _woodworth_depth(depth)
    check_finite("X", X)
    check_finite("y", y)
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must have shape (N, n) and y shape (N,), got {X.shape} and {y.shape}")
    scale = _check_scales(init_scale, depth)
    if scale.ndim != 0:
        raise ValueError(f"init_scale must be one number, got shape {scale.shape}")
    times = check_grid("times", times, 0.0, closed="left")
    if times.ndim != 1 or np.any(np.diff(times) < 0):
        raise ValueError(f"times must be a non-decreasing 1-D array, got {show(times.tolist())}")
    log_scale = math.log(float(scale))
    c = 4.0 if depth == 2 else depth * (depth - 2) * float(scale) ** (depth - 2)

    def rhs(_, nu):
        beta = _link(X.T @ nu, log_scale, depth)[0]
        return c * (y - X @ beta) if beta is not None else np.full_like(nu, np.nan)

    def jac(_, nu):
        log_w = _link(X.T @ nu, log_scale, depth)[1]
        return -c * (X * np.exp(log_w)) @ X.T

    sol = solve_ivp(rhs, (0.0, float(times[-1])), np.zeros(X.shape[0]), method="LSODA", t_eval=times,
                    jac=jac, rtol=1e-10, atol=1e-12)
    if not sol.success:
        raise RuntimeError(f"diagonal_flow: solve_ivp failed ({sol.message})")
    return np.array([_link(X.T @ nu, log_scale, depth)[0] for nu in sol.y.T])


THEOREM_2_VERSIONS = ("printed", "proof")


def l1_init_scale_bound(l1_norm, d: int, eps, version: str = "printed"):
    r"""[W] Theorem 2, ℓ1 part: :math:`\alpha \le \min\{(2(1+\epsilon)\|\beta^*_{\ell_1}\|_1)^{-(2+\epsilon)/(2\epsilon)},
    \exp(-d/(\epsilon\|\beta^*_{\ell_1}\|_1))\}` implies :math:`\|\beta^\infty_\alpha\|_1 \le (1+\epsilon)\|\beta^*_{\ell_1}\|_1`
    (D = 2): an exponentially small init_scale.

    ``version="proof"`` is what the proof (App. E, eqs. 44–46) uses: Lemma 5's
    :math:`\alpha_1(\epsilon', B, d) = \min\{1, \sqrt B, (2B)^{-1/(2\epsilon')}, \exp(-d/(2\epsilon'B))\}` at
    :math:`\epsilon' = \epsilon/(2+\epsilon)`, :math:`B = (1+2\epsilon)\|\beta^*_{\ell_1}\|_1`. Its first term has
    :math:`1 + 2\epsilon` where the statement prints :math:`1 + \epsilon`, so for
    :math:`2(1+\epsilon)\|\beta^*_{\ell_1}\|_1 > 1` the printed term is the larger (the proof does not cover it);
    its exponential is the smaller. ``l1_norm`` > 0, ``eps`` in (0, d) (numbers or arrays, broadcast),
    ``d`` ≥ 1."""
    check_option("version", version, THEOREM_2_VERSIONS)
    d = check_int("d", d, 1)
    B = check_grid("l1_norm", l1_norm, 0.0)
    eps = check_grid("eps", eps, 0.0, d)
    if version == "printed":
        out = np.minimum((2 * (1 + eps) * B) ** (-(2 + eps) / (2 * eps)), np.exp(-d / (eps * B)))
    else:
        e, B = eps / (2 + eps), (1 + 2 * eps) * B
        out = np.minimum.reduce([np.ones_like(B), np.sqrt(B), (2 * B) ** (-1 / (2 * e)), np.exp(-d / (2 * e * B))])
    return float(out) if out.ndim == 0 else out


def l2_init_scale_bound(l2_norm, eps, version: str = "printed"):
    r"""[W] Theorem 2, ℓ2 part: :math:`\alpha \ge \sqrt{2(1+\epsilon)(1+2/\epsilon)\|\beta^*_{\ell_2}\|_2}` implies
    :math:`\|\beta^\infty_\alpha\|_2^2 \le (1+\epsilon)\|\beta^*_{\ell_2}\|_2^2` (D = 2): a polynomially large one.

    ``version="proof"`` is what the proof (eqs. 47–49) uses: Lemma 7's
    :math:`\alpha_2(\epsilon', B) = \sqrt B(1 + \epsilon'^{-1/4})` at :math:`\epsilon' = \epsilon/(2+\epsilon)`,
    :math:`B = (1+2\epsilon)\|\beta^*_{\ell_2}\|_2`; it is above the printed bound for ε ≳ 0.7 (at ε = 1,
    :math:`\alpha_2^2 = 16.1\|\beta^*_{\ell_2}\|_2` against 12), below it for small ε. ``l2_norm`` > 0,
    ``eps`` > 0 (numbers or arrays, broadcast)."""
    check_option("version", version, THEOREM_2_VERSIONS)
    B = check_grid("l2_norm", l2_norm, 0.0)
    eps = check_grid("eps", eps, 0.0)
    if version == "printed":
        out = np.sqrt(2 * (1 + eps) * (1 + 2 / eps) * B)
    else:
        out = np.sqrt((1 + 2 * eps) * B) * (1 + (eps / (2 + eps)) ** -0.25)
    return float(out) if out.ndim == 0 else out


R_MAX_Z = 1e60  # the quartic's coefficients hold z⁴: beyond it they overflow


def _quartic(u, z):
    """p_z(u) = u⁴ − 6u³ + (12 − 2z²)u² − (8 + 10z²)u + z² + z⁴ and its derivatives in u and in z."""
    z2 = z * z
    value = (((u - 6) * u + 12 - 2 * z2) * u - 8 - 10 * z2) * u + z2 + z2 * z2
    du = ((4 * u - 18) * u + 2 * (12 - 2 * z2)) * u - 8 - 10 * z2
    dz = z * (-4 * u * u - 20 * u + 2 + 4 * z2)
    return value, du, dz


def _r_and_slope(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""r(z) and r'(z) = −∂_z p / ∂_u p (implicit differentiation of the quartic)."""
    z2 = z.ravel() * z.ravel()
    companion = np.zeros((z2.size, 4, 4))
    companion[:, 0] = np.stack([np.full_like(z2, 6.0), -(12 - 2 * z2), 8 + 10 * z2, -(z2 + z2 * z2)], axis=1)
    companion[:, [1, 2, 3], [0, 1, 2]] = 1.0
    roots = np.linalg.eigvals(companion)
    # two real roots and a complex pair: the two closest to the real line, then the smaller
    real = np.take_along_axis(roots, np.argsort(np.abs(roots.imag), axis=1)[:, :2], axis=1).real
    u, zf = real.min(axis=1), z.ravel()
    for _ in range(3):  # polish: the eigenvalues carry an absolute error ≈ eps·|z|², the root may be ≈ z²/8
        value, du, _ = _quartic(u, zf)
        u = u - np.where(du != 0, value / np.where(du != 0, du, 1.0), 0.0)
    value, du, dz = _quartic(u, zf)
    slope = np.where(du != 0, -dz / np.where(du != 0, du, 1.0), 0.0)
    return np.maximum(u, 0.0).reshape(z.shape), slope.reshape(z.shape)


def r(z):
    r"""[W] eq. 9 for w₀ = 1, one coordinate: :math:`r(z) = \min\{(a-1)^2 + (b-1)^2 : a^2 - b^2 = z\}`, the
    squared distance in parameter space from the initialisation (1, 1) to the weights that give
    β/α² = z. [W] write it as "the unique real root" of

    .. math:: p_z(u) = u^4 - 6u^3 + (12 - 2z^2)u^2 - (8 + 10z^2)u + z^2 + z^4;

    p_z has **two** real roots (and a complex pair): r(z) is the smaller (spec §1.1). Computed from the
    eigenvalues of p_z's companion matrices, polished by Newton. :math:`r(z) = z^2/8 + O(z^4)` and
    :math:`r(z) = |z| - 2\sqrt{|z|} + O(1)`: algebraic, where :func:`q` is transcendental. (It equals
    :func:`q_depth` at D = 4, see :func:`parameter_distance_regulariser`.) ``z`` finite with
    :math:`|z| \le 10^{60}`."""
    check_finite("z", z)
    z = np.asarray(z, dtype=float)
    if np.any(np.abs(z) > R_MAX_Z):
        raise ValueError(f"z must be in [-1e60, 1e60] (z⁴ in float64), got {show(z[np.abs(z) > R_MAX_Z].flat[0])}")
    out = _r_and_slope(z)[0]
    return float(out) if out.ndim == 0 else out


def parameter_distance_regulariser(beta, init_scale):
    r"""[W] eqs. 8–9 for w₀ = 1: :math:`R_\alpha(\beta) = \min_w\|w - \alpha\mathbf 1\|_2^2` s.t.
    :math:`w_+^2 - w_-^2 = \beta`, which separates into :math:`R_\alpha(\beta) = \alpha^2\sum_i r(\beta_i/\alpha^2)`
    (:func:`r`), with the spec's two corrections: the factor α², missing from [W]'s text, and r the
    smaller real root of the quartic. The same Lagrange condition as [W] eq. 57 at D = 4 gives
    :math:`r' = h_4^{-1}`, so :math:`r = q_4` and :math:`R_\alpha = Q^4_{\sqrt\alpha}`: the nearest solution in
    parameter space of the depth-2 network is the gradient-flow solution of the depth-4 one at
    init_scale √α (our observation, tested). ``beta`` (..., n) finite, ``init_scale`` > 0 (a number or
    an array broadcasting against ``beta.shape[:-1]``). Returns the sum over the last axis."""
    check_finite("beta", beta)
    beta = np.asarray(beta, dtype=float)
    if beta.ndim == 0:
        raise ValueError(f"beta must be a vector (..., n), got a scalar {show(beta)}")
    a2 = check_grid("init_scale", init_scale, 0.0)[..., None] ** 2
    out = (a2 * r(beta / a2)).sum(axis=-1)
    return float(out) if np.ndim(out) == 0 else out


def parameter_distance_bias(X, y, init_scale, *, tol: float = 1e-12) -> np.ndarray:
    r""":math:`\beta^R_\alpha = \operatorname{argmin}_{X\beta = y}R_\alpha(\beta)` ([W] eq. 8,
    :func:`parameter_distance_regulariser`): the interpolant closest to the initialisation in parameter
    space, which [W] show is not where gradient flow goes (:func:`implicit_bias`). Solved by scipy's BFGS on
    the null space of X, :math:`\beta = \beta_{\ell_2} + Zc`, with the gradient
    :math:`\nabla R_\alpha = r'(\beta/\alpha^2)` from the quartic by implicit differentiation, to a
    gradient norm ``tol`` (scaled by α²). ``X`` (N, n) of full row rank N ≤ n, ``y`` (N,) finite;
    ``init_scale`` > 0 with :math:`\max|\beta|/\alpha^2` ≤ 1e60 along the way, a number (returns (n,)) or a
    1-D grid (returns (G, n))."""
    from scipy.linalg import null_space
    from scipy.optimize import minimize

    X, y = _interpolation_problem(X, y)
    scale = check_grid("init_scale", init_scale, 0.0)
    if scale.ndim > 1:
        raise ValueError(f"init_scale must be a number or a 1-D grid, got shape {scale.shape}")
    tol = check_range("tol", tol, 0.0, 1.0, closed="neither")
    Z, b0 = null_space(X), np.linalg.pinv(X) @ y

    def solve(a2: float) -> np.ndarray:
        def value_and_gradient(c):  # R_α/α² at β = b0 + α²Zc, so z = β/α² = b0/α² + Zc
            z = b0 / a2 + Z @ c
            if np.abs(z).max() > R_MAX_Z:
                return math.inf, np.zeros_like(c)
            u, slope = _r_and_slope(z)
            return float(u.sum()), Z.T @ slope

        res = minimize(value_and_gradient, np.zeros(Z.shape[1]), jac=True, method="BFGS",
                       options=dict(gtol=tol, maxiter=20_000))
        return b0 + a2 * (Z @ res.x)

    out = np.array([solve(a * a) for a in scale.ravel()])
    return out.reshape(scale.shape + X.shape[1:])


def largest_recovering_scale(X, y, b_star, depth: int, threshold: float, *, rtol: float = 1e-3) -> float:
    r"""The largest ``init_scale`` α whose gradient-flow limit (:func:`implicit_bias`) recovers ``b_star`` to
    :math:`\|\beta^\infty_{\alpha,D} - \beta^*\|_2 \le` ``threshold``: the y axis of [W] Figures 1c and 3c
    (there as :math:`\alpha^D`). Bisection on :math:`\log\alpha` over :func:`woodworth_scale_range` (capped at
    1e-300 … 1e3), to a ratio ``rtol`` between the bracket's ends, assuming the error grows with α (it does
    between the ℓ1 and ℓ2 limits on [W]'s problems: checked on the page's sweeps). NaN when even the
    smallest scale fails (the ℓ1 limit itself does not recover), the cap when the largest passes.
    ``X`` (N, n), ``y`` (N,), ``b_star`` (n,) finite; ``threshold`` > 0, ``rtol`` in (0, 1)."""
    depth = _woodworth_depth(depth)
    X, y = _interpolation_problem(X, y)
    check_finite("b_star", b_star)
    b_star = np.asarray(b_star, dtype=float)
    if b_star.shape != X.shape[1:]:
        raise ValueError(f"b_star must have shape ({X.shape[1]},), got {b_star.shape}")
    threshold = check_range("threshold", threshold, 0.0, closed="neither")
    rtol = check_range("rtol", rtol, 0.0, 1.0, closed="neither")
    low, high = woodworth_scale_range(depth)
    low, high = max(low, 1e-300), min(high, 1e3)

    def passes(a: float) -> bool:
        return bool(np.linalg.norm(implicit_bias(X, y, a, depth) - b_star) <= threshold)

    if not passes(low):
        return math.nan
    if passes(high):
        return high
    while high / low > 1 + rtol:
        mid = math.sqrt(low * high)
        low, high = (mid, high) if passes(mid) else (low, mid)
    return low
