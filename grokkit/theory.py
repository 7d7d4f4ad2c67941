r"""The theory's predicted quantities for sparse recovery (Theorem 2.1, Lemma C.7, Theorem C.8, §C.6.2).

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

from grokkit._checks import check_finite, check_grid, check_int, check_option, check_range


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
