r"""The theory's predicted quantities for matrix factorization (Theorem 2.2, Appendix D: Theorems
D.5, D.8, D.9, D.12, Corollary D.2, Lemmas D.7, D.11, D.14, §D.11), most of them the sparse ones
of :mod:`grokkit.theory.sparse` on :math:`\operatorname{vec}A`.

Objective (§2 and App. D): :math:`f(A) = \tfrac12\|\mathcal X(A) - y^*\|^2 + \tfrac{\beta_2}2\|A\|_F^2 +
\beta_*\|A\|_*`, :math:`A \in \mathbb R^{n_1\times n_2}`. The measurement operator is passed as
``operator``: a boolean ``mask`` (n1, n2) for completion, :math:`\mathcal X(A)` = ``A[mask]`` (the
observed entries in numpy's row-major order), or a matrix ``X`` (N, n1·n2) for sensing, acting on
vec(A) = ``A.reshape(-1, order="F")`` (column-major, App. B). The functions build the explicit
(N, n1·n2) matrix: they are meant for small problems.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from grokkit import data
from grokkit._checks import check_finite, check_grid, check_int, check_option, check_range, check_seed
from grokkit.data.matrix import _check_shape, local_coherence, unvec, vec
from grokkit.kernels.matrix import factor_gradients, product
from grokkit.kernels.matrix import nuclear_subgradient as kernel_nuclear_subgradient
from grokkit.theory import sparse


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
    n1, n2, r = _check_shape(n1, n2, r)
    return r * (n1 + n2 - r)


def completion_sample_scale(n1: int, n2: int, r: int, power: float = 1.0) -> float:
    r""":math:`n^{\text{power}}\,r\log n` with :math:`n = \max(n_1, n_2)`: the sample sizes of Theorem D.1
    (power 5/4, or 6/5 for :math:`r \le n^{1/5}`; constants C left out, as in the paper) and the
    coupon-collector scale :math:`nr\log n` (power 1, App. D.4), below which some row or column is
    unobserved."""
    n1, n2, r = _check_shape(n1, n2, r)
    power = check_range("power", power, 0.0, closed="left")
    n = max(n1, n2)
    return float(n**power * r * math.log(n))


def coherent_sampling_probabilities(A_star: np.ndarray, c0: float = 1.0) -> np.ndarray:
    r"""The observation probabilities that Theorem D.3 (Chen et al. 2014) asks for, with the
    unspecified constant :math:`c_0` given:

    .. math:: p_{ij} = \max\Big\{\min\Big\{c_0\frac{(\mu_i + \nu_j)\,r\log^2(n_1+n_2)}{\min(n_1, n_2)}, 1\Big\},
              \min(n_1, n_2)^{-10}\Big\}

    with the local coherences of :math:`A^*` (:func:`grokkit.data.matrix.local_coherence`, rank r its
    numerical rank); their sum is the expected number of observed entries."""
    c0 = check_range("c0", c0, 0.0, closed="neither")
    mu, nu = local_coherence(A_star)
    n1, n2 = np.shape(A_star)
    r = int(np.linalg.matrix_rank(A_star))
    p = c0 * (mu[:, None] + nu[None, :]) * r * math.log(n1 + n2) ** 2 / min(n1, n2)
    return np.maximum(np.minimum(p, 1.0), float(min(n1, n2)) ** -10)


def rho(operator, shape, alpha: float, beta2: float = 0.0, p: float = 2) -> float:
    r""":math:`\rho_p = \|I_n - \alpha(X^\top X + \beta_2 I_n)\|_{p\to p}`, n = n1·n2 (Theorem 2.2, Lemma D.7);
    for p = 2 this is :math:`\sigma_\max(I - \alpha(\mathcal X^*\mathcal X + \beta_2 I))`.

    With :math:`\beta_2 = 0` and N < n1·n2 (every experiment of the paper), :math:`X^\top X` is
    singular and :math:`\rho_2 = 1` exactly: use :func:`rho_range`."""
    return sparse.rho(measurement_matrix(operator, shape), alpha, beta2, p)


def rho_range(operator, shape, alpha, beta2=0.0, tol: float = 1e-10):
    r""":math:`\rho_{\rm row} = \max_{\lambda \in \operatorname{eig}(X^\top X)\setminus\{0\}}|1 - \alpha(\lambda + \beta_2)|`:
    the contraction of :math:`I - \alpha(X^\top X + \beta_2 I)` on the row space of X, the meaningful
    ρ of Theorem 2.2 when N < n1·n2 and β₂ = 0 (the matrix analogue of :func:`rho_range`)."""
    return sparse.rho_range(measurement_matrix(operator, shape), alpha, beta2, tol)


def range_distance(operator, shape, A, A_hat, p: float = 2, tol: float = 1e-10) -> np.ndarray:
    r""":math:`\|P_V\operatorname{vec}(A - \hat A)\|_p` for every matrix of ``A`` (..., n1, n2): the distance to
    :math:`\hat A` of the component on the row space of X, the part that :func:`rho_range` contracts
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
    return np.linalg.norm(D @ sparse.range_projector(measurement_matrix(operator, shape), tol), ord=p, axis=-1)


def least_squares(operator, shape, y: np.ndarray, beta2: float = 0.0) -> np.ndarray:
    r""":math:`\hat A = \operatorname{unvec}((X^\top X + \beta_2 I_n)^\dagger X^\top y^*)` (App. D.6.1), shape (n1, n2):
    :func:`grokkit.data.sparse.least_squares` on the measurement matrix.

    (The authors' ``sparse_recovery/matrix_factorization.py`` adds β₂ to every entry of :math:`X^\top X`; this adds
    :math:`\beta_2 I`.)"""
    X = measurement_matrix(operator, shape)
    y = np.asarray(y, dtype=float)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape (N,) = ({X.shape[0]},), got {y.shape}")
    return unvec(data.sparse.least_squares(X, y, beta2), *_shape(shape))


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


def objective(operator, shape, A, y, beta_star, beta2=0.0) -> np.ndarray:
    r"""The objective of App. D.6, :math:`f(A) = \tfrac12\|X\operatorname{vec}A - y^*\|_2^2 +
    \tfrac{\beta_2}2\|A\|_F^2 + \beta_*\|A\|_*`, for every matrix of ``A`` (..., n1, n2): shape ``A.shape[:-2]``.

    ``beta_star`` and ``beta2`` (≥ 0) are scalars or one value per configuration (the leading axis of
    ``A``: a run's recorded iterates (G, T, n1, n2) with ``config["beta_star"]``). At the ground truth,
    with :math:`y^* = X\operatorname{vec}A^* + \xi`, this is Theorem D.4's
    :math:`f^* = \beta_*\|A^*\|_* + \tfrac{\beta_2}2\|A^*\|_F^2 + \tfrac12\|\xi\|_2^2` (the paper writes
    :math:`\|\xi\|_2^2`: the noise enters the objective with its ½)."""
    A = _matrices(A, shape)
    beta_star, beta2 = _per_matrix("beta_star", beta_star, A)[..., 0, 0], _per_matrix("beta2", beta2, A)[..., 0, 0]
    _, r = _residual(operator, shape, A, y)
    return (0.5 * np.sum(r**2, axis=-1) + 0.5 * beta2 * np.sum(A**2, axis=(-2, -1))
            + beta_star * np.linalg.svd(A, compute_uv=False).sum(axis=-1))


def gradient(operator, shape, A, y, beta2=0.0) -> np.ndarray:
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
    :math:`\|h(A)\|_F^2 = \|h(A)\|_* = \min(n_1, n_2)` whatever the rank of A (Lemma D.6's proof)."""
    A = np.asarray(A, dtype=float)
    if A.ndim < 2:
        raise ValueError(f"A must have shape (..., n1, n2), got {A.shape}")
    check_finite("A", A)
    return kernel_nuclear_subgradient(torch.as_tensor(A)).numpy()


def subgradient(operator, shape, A, y, beta_star, beta2=0.0) -> np.ndarray:
    r""":math:`F(A) = G_{\beta_2}(A) + \beta_*h(A)` (App. D.6, eq. 101: the kernels' update is
    :math:`A^{(t+1)} = A^{(t)} - \alpha_tF(A^{(t)})`) for every matrix of ``A`` (..., n1, n2);
    :func:`gradient` plus ``beta_star`` times :func:`nuclear_subgradient`."""
    A = _matrices(A, shape)
    beta_star = _per_matrix("beta_star", beta_star, A)
    return gradient(operator, shape, A, y, beta2) + beta_star * nuclear_subgradient(A)


def dominance_threshold(operator, shape, beta2=0.0) -> float:
    r"""The threshold of Theorem D.5 (Lemma D.6 with :math:`L = \sigma_\max(X^\top X) + \beta_2`):
    :math:`(\sigma_\max(X^\top X) + \beta_2)/\sqrt{\min(n_1, n_2)}`, above which the paper predicts
    that :math:`\beta_*h` dominates the updates (:math:`1/\sqrt{10} \approx 0.316` for 10×10 completion,
    where :math:`\sigma_\max(X^\top X) = 1`)."""
    n1, n2 = _shape(shape)
    beta2 = check_range("beta2", beta2, 0.0, closed="left")
    return float((sparse.eigenvalues(measurement_matrix(operator, shape))[0] + beta2) / math.sqrt(min(n1, n2)))


def _hyper(alpha, beta_star) -> tuple[np.ndarray, np.ndarray]:
    return check_grid("alpha", alpha, 0.0), check_grid("beta_star", beta_star, 0.0, closed="left")


def memorization_time(dist0, n1: int, n2: int, alpha, beta_star, rho_p, p: float = 2):
    r"""The memorization step of Theorem D.8,
    :math:`t_1 = \lceil -\ln(1 + (1-\rho_p)\|a^{(1)}-\hat a\|_p/(\alpha\beta_* n^{1/p}))/\ln\rho_p\rceil`, n = n1·n2.

    Reading: t counts updates from the initial iterate :math:`a^{(1)}` (the kernels' step 0),
    ``dist0`` is :math:`\|a^{(1)}-\hat a\|_p`; then Lemma D.7 reads
    :math:`\|a^{(t)}-\hat a\|_p \le \rho_p^t\|a^{(1)}-\hat a\|_p + \alpha\beta_* n^{1/p}(1-\rho_p^t)/(1-\rho_p)`
    (Lemma D.11 gives :math:`\|\operatorname{vec}h\|_p \le n^{1/p}`) and for every t ≥ t₁,
    :math:`\|a^{(t)}-\hat a\|_p \le 2\alpha\beta_* n^{1/p}(1-\rho_p^t)/(1-\rho_p)` (:func:`memorization_radius`).
    Infinite unless :math:`0 < \rho_p < 1` (so for β₂ = 0, N < n1·n2 and p = 2) and for β* = 0."""
    n1, n2 = check_int("n1", n1, 1), check_int("n2", n2, 1)
    alpha, beta_star = _hyper(alpha, beta_star)
    return sparse.memorization_time(dist0, n1 * n2, alpha, beta_star, rho_p, p)


def memorization_radius(n1: int, n2: int, alpha, beta_star, rho_p, p: float = 2, t=None):
    r"""Radius of Theorem 2.2 / D.8 after t₁: :math:`2\alpha\beta_* n^{1/p}(1-\rho_p^t)/(1-\rho_p)`, n = n1·n2,
    or its limit :math:`2\alpha\beta_* n^{1/p}/(1-\rho_p)` for ``t=None``; infinite where :math:`\rho_p \ge 1`."""
    n1, n2 = check_int("n1", n1, 1), check_int("n2", n2, 1)
    alpha, beta_star = _hyper(alpha, beta_star)
    radius = sparse.memorization_radius(n1 * n2, alpha, beta_star, rho_p, p)
    if t is None:
        return radius
    t = check_grid("t", t, 0.0, closed="left")
    return np.where(np.isfinite(radius), radius * (1.0 - np.asarray(rho_p, dtype=float) ** t), np.inf)


def distance_bound(dist0, n1: int, n2: int, alpha, beta_star, rho_p, t, p: float = 2):
    r"""Lemma D.7: :math:`\|a^{(t+1)}-\hat a\|_p \le \rho_p^t\|a^{(1)}-\hat a\|_p + \alpha\beta_* n^{1/p}(1-\rho_p^t)/(1-\rho_p)`,
    n = n1·n2, after t updates from :math:`a^{(1)}` (``dist0`` = :math:`\|a^{(1)}-\hat a\|_p`); Lemma D.11 gives
    :math:`\|\operatorname{vec}h\|_p \le n^{1/p}`. The right-hand side, :func:`distance_bound`: for
    :math:`\rho_p = 1` (β₂ = 0, N < n1·n2) it is :math:`d_0 + \alpha\beta_* n^{1/p}t`, no ball. The paper writes
    :math:`a^{(t)}` on the left, one update too many: at t = 1 that reads :math:`d_0 \le \rho_p d_0 + \alpha\beta_* n^{1/p}`,
    false whenever :math:`d_0 > \alpha\beta_* n^{1/p}/(1-\rho_p)`."""
    n1, n2 = check_int("n1", n1, 1), check_int("n2", n2, 1)
    alpha, beta_star = _hyper(alpha, beta_star)
    return sparse.distance_bound(dist0, n1 * n2, alpha, beta_star, rho_p, t, p)


def ball_entry_time(dist0, n1: int, n2: int, alpha, beta_star, rho_p, p: float = 2,
                           condition: str = "corrected"):
    r""":math:`\tilde t_1` of Corollary D.2: after :math:`\tilde t_1` updates,
    :math:`\|a^{(t+1)}-\hat a\|_p \le 2\alpha\beta_* n^{1/p}/(1-\rho_p)` for good, n = n1·n2
    (:func:`ball_entry_time`, ``dist0`` = :math:`\|a^{(1)}-\hat a\|_p`).

    ``condition="corrected"`` uses the formula when :math:`d_0 > \alpha\beta_* n^{1/p}/(1-\rho_p)`, else 0.
    ``condition="printed"`` uses it when :math:`d_0 > \alpha\beta_*/(1-\rho_p)`, the paper's condition
    without :math:`n^{1/p}`: for p < inf and
    :math:`\alpha\beta_*/(1-\rho_p) < d_0 \le \alpha\beta_* n^{1/p}/(1-\rho_p)` it returns a negative step (the
    logarithm's argument is at most 1), where the corrected condition gives 0."""
    n1, n2 = check_int("n1", n1, 1), check_int("n2", n2, 1)
    alpha, beta_star = _hyper(alpha, beta_star)
    check_option("condition", condition, ("corrected", "printed"))
    return sparse._ball_entry_time(dist0, n1 * n2, alpha, beta_star, rho_p, p, printed=condition == "printed")


def residual_bound(operator, shape, y, A_hat, alpha, beta_star, rho_p, p: float = 2, t=None):
    r"""The training-residual bound of Theorem D.8 (eq. 115, with X where the paper writes :math:`\tilde X`):
    for :math:`t \ge t_1` updates,

    .. math:: \|Xa^{(t+1)} - y^*\|_p \le \frac{2\alpha\beta_* n^{1/p}(1-\rho_p^t)}{1-\rho_p}\|X\|_{p\to p}
              + \|X\hat a - y^*\|_p,

    or, for ``t=None``, its limit with :math:`2\alpha\beta_* n^{1/p}/(1-\rho_p)` (:func:`memorization_radius`).
    ``y`` (N,) and ``A_hat`` (n1, n2); infinite where :math:`\rho_p \ge 1`; broadcasts over arrays."""
    n1, n2 = _shape(shape)
    X = measurement_matrix(operator, shape)
    y, A_hat = np.asarray(y, dtype=float), np.asarray(A_hat, dtype=float)
    if y.shape != (X.shape[0],) or A_hat.shape != (n1, n2):
        raise ValueError(f"y and A_hat must have shapes ({X.shape[0]},) and ({n1}, {n2}), got {y.shape} and {A_hat.shape}")
    check_finite("y", y)
    check_finite("A_hat", A_hat)
    radius = memorization_radius(n1, n2, alpha, beta_star, rho_p, p, t)
    order = {1: 1, 2: 2, math.inf: np.inf}[p]
    return radius * np.linalg.norm(X, order) + np.linalg.norm(X @ vec(A_hat) - y, order)


def generalization_delay(A_hat: np.ndarray, alpha, beta_star):
    r"""Predicted delay :math:`\Delta t = \sigma_\max(\hat A)/(\alpha\beta_*)` (Theorem 2.2, up to a constant,
    from Theorem D.12 with step αβ*); infinite for β* = 0."""
    check_finite("A_hat", A_hat)
    alpha, beta_star = _hyper(alpha, beta_star)
    with np.errstate(divide="ignore"):
        return np.linalg.norm(np.asarray(A_hat, dtype=float), 2) / (alpha * beta_star)


def generalization_delay_code(A_hat: np.ndarray, A_star: np.ndarray, alpha, beta_star):
    r"""The authors' code's prediction :math:`\|\hat A - A^*\|_{2\to2}/(\alpha\beta_*)` (``sparse_recovery/matrix_factorization.py``)."""
    check_finite("A_hat", A_hat)
    check_finite("A_star", A_star)
    alpha, beta_star = _hyper(alpha, beta_star)
    with np.errstate(divide="ignore"):
        return np.linalg.norm(np.asarray(A_hat, float) - A_star, 2) / (alpha * beta_star)


def _vectorised(operator, shape, A_star) -> tuple[np.ndarray, np.ndarray]:
    """The explicit X (N, n1·n2) of ``operator`` and vec A*, checked (Theorem D.9 is Theorem C.9 on them)."""
    X = measurement_matrix(operator, shape)
    check_finite("A_star", A_star)
    if np.shape(A_star) != _shape(shape):
        raise ValueError(f"A_star must have shape (n1, n2) = {_shape(shape)}, got {np.shape(A_star)}")
    return X, vec(np.asarray(A_star, dtype=float))


def least_squares_residual_printed(operator, shape, A_star, beta2: float, noise_std: float = 0.0,
                                   tol: float = 1e-10) -> float:
    r"""Theorem D.9 **as printed**: :math:`\mathbb E_\xi\|X\hat a - y^*\|_2^2 = \sum_{i\le r_X}\big(\frac{\beta_2\sigma_i}{\sigma_i+\beta_2}\big)^2
    (V_X^\top a^*)_i^2 + \sigma_\xi^2\sum_{i\le r_X}\big(\frac{\beta_2}{\sigma_i+\beta_2}\big)^2 + \sigma_\xi^2(N - r_X)`,
    :math:`y^* = Xa^* + \xi`, Cov ξ = σ_ξ² I_N, σ_i the nonzero eigenvalues of :math:`X^\top X`, ``noise_std`` = σ_ξ:
    Theorem C.9 (:func:`grokkit.theory.sparse.least_squares_residual_printed`) for X and :math:`a^* = \operatorname{vec}A^*`.

    The first term is wrong (the proof's last line has the right one): its factor :math:`\sigma_i^2` should be :math:`\sigma_i`
    (:func:`least_squares_residual_corrected`). The two agree when every nonzero σ_i is 1 (completion)
    or β₂ = 0."""
    return sparse.least_squares_residual_printed(*_vectorised(operator, shape, A_star), beta2, noise_std, tol)


def least_squares_residual_corrected(operator, shape, A_star, beta2: float, noise_std: float = 0.0,
                                     tol: float = 1e-10) -> float:
    r"""Theorem D.9 **corrected** (the proof's last line): :math:`\mathbb E_\xi\|X\hat a - y^*\|_2^2 =
    \sum_{i\le r_X}\frac{\beta_2^2\sigma_i}{(\sigma_i+\beta_2)^2}(V_X^\top a^*)_i^2 + \sigma_\xi^2\sum_{i\le r_X}\big(\frac{\beta_2}{\sigma_i+\beta_2}\big)^2
    + \sigma_\xi^2(N - r_X)`: :func:`grokkit.theory.sparse.least_squares_residual_corrected` for X and vec A*.
    Differs from :func:`least_squares_residual_printed` only in the first term (:math:`\sigma_i` in place
    of :math:`\sigma_i^2`)."""
    return sparse.least_squares_residual_corrected(*_vectorised(operator, shape, A_star), beta2, noise_std, tol)


def least_squares_residual_monte_carlo(operator, shape, A_star, beta2: float, noise_std: float, *,
                                       draws: int = 10_000, seed: int = 0) -> tuple[float, float]:
    r"""Monte-Carlo estimate of the left-hand side of Theorem D.9, :math:`\mathbb E_\xi\|X\hat a - y^*\|_2^2`:
    :func:`grokkit.theory.sparse.least_squares_residual_monte_carlo` for X and vec A* (``draws`` noise
    vectors from ``RandomState(seed)``). Returns (mean, standard error of the mean)."""
    return sparse.least_squares_residual_monte_carlo(*_vectorised(operator, shape, A_star), beta2, noise_std,
                                                     draws=draws, seed=seed)


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
    :math:`\sigma_i^\circ = \sigma_i - t_i\alpha\beta_*`. What the theorem's claims become:
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
    column-major vec of :func:`grokkit.data.matrix.vec` (empty products = I). ``factors``: L numpy matrices
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
