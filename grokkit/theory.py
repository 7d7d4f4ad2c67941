r"""The theory's predicted quantities for sparse recovery (Theorem 2.1, Lemma C.7, Theorem C.8, §C.6.2)
and for matrix factorization (Theorem 2.2, Appendix D: Theorems D.8, D.9, D.12, Lemma D.14; the
section "Matrix factorization" below).

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
from grokkit.data import least_squares, unvec, vec
from grokkit.kernels.matrix import factor_gradients


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


def _d9_terms(operator, shape, A_star, beta2, noise_std, tol):
    X = measurement_matrix(operator, shape)
    check_finite("A_star", A_star)
    if np.shape(A_star) != _shape(shape):
        raise ValueError(f"A_star must have shape (n1, n2) = {_shape(shape)}, got {np.shape(A_star)}")
    beta2 = check_range("beta2", beta2, 0.0, closed="left")
    noise_std = check_range("noise_std", noise_std, 0.0, closed="left")
    tol = check_range("tol", tol, 0.0, 1.0, closed="left")
    lam, V = np.linalg.eigh(X.T @ X)
    keep = lam > tol * max(lam.max(), 0.0) if lam.max() > 0 else np.zeros(len(lam), bool)
    sigma, proj = lam[keep], V[:, keep].T @ vec(A_star)  # σ_i and (V_Xᵀ a*)_i, i ≤ r_X
    noise = noise_std**2 * (np.sum((beta2 / (sigma + beta2)) ** 2) + X.shape[0] - keep.sum())
    return sigma, proj, beta2, noise


def least_squares_residual_printed(operator, shape, A_star, beta2: float, noise_std: float = 0.0,
                                   tol: float = 1e-10) -> float:
    r"""Theorem D.9 **as printed**: :math:`\mathbb E_\xi\|X\hat a - y^*\|_2^2 = \sum_{i\le r_X}\big(\frac{\beta_2\sigma_i}{\sigma_i+\beta_2}\big)^2
    (V_X^\top a^*)_i^2 + \sigma_\xi^2\sum_{i\le r_X}\big(\frac{\beta_2}{\sigma_i+\beta_2}\big)^2 + \sigma_\xi^2(N - r_X)`,
    :math:`y^* = Xa^* + \xi`, Cov ξ = σ_ξ² I_N, σ_i the nonzero eigenvalues of :math:`X^\top X`, ``noise_std`` = σ_ξ.

    The first term is wrong (spec §2, §5 item 8): its factor :math:`\sigma_i^2` should be :math:`\sigma_i`
    (:func:`least_squares_residual_corrected`). The two agree when every nonzero σ_i is 1 (completion)
    or β₂ = 0."""
    sigma, proj, beta2, noise = _d9_terms(operator, shape, A_star, beta2, noise_std, tol)
    return float(np.sum((beta2 * sigma / (sigma + beta2)) ** 2 * proj**2) + noise)


def least_squares_residual_corrected(operator, shape, A_star, beta2: float, noise_std: float = 0.0,
                                     tol: float = 1e-10) -> float:
    r"""Theorem D.9 **corrected** (spec §2, §5 item 8): :math:`\mathbb E_\xi\|X\hat a - y^*\|_2^2 =
    \sum_{i\le r_X}\frac{\beta_2^2\sigma_i}{(\sigma_i+\beta_2)^2}(V_X^\top a^*)_i^2 + \sigma_\xi^2\sum_{i\le r_X}\big(\frac{\beta_2}{\sigma_i+\beta_2}\big)^2
    + \sigma_\xi^2(N - r_X)`. Differs from :func:`least_squares_residual_printed` only in the first term
    (:math:`\sigma_i` in place of :math:`\sigma_i^2`): with :math:`X = U_X\Sigma_X^{1/2}V_X^\top`, the signal part of the
    residual is :math:`U_X\operatorname{diag}(\beta_2\sqrt{\sigma_i}/(\sigma_i+\beta_2))V_X^\top a^*`."""
    sigma, proj, beta2, noise = _d9_terms(operator, shape, A_star, beta2, noise_std, tol)
    return float(np.sum(beta2**2 * sigma / (sigma + beta2) ** 2 * proj**2) + noise)


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


def nuclear_singular_values(sigma, alpha, steps: int, beta_star=1.0) -> np.ndarray:
    r"""Singular values under the pure nuclear-norm subgradient step :math:`A^{(t+1)} = A^{(t)} - \alpha\beta_* U^{(t)}V^{(t)\top}`
    (Theorem D.12, eq. 125; thin SVD, all min(n1, n2) singular vectors, as the code): row k is
    :math:`\sigma^{(k)}` after k updates, k = 0 … ``steps``, from the recursion :math:`\sigma_i^{(k+1)} = |\sigma_i^{(k)} - \alpha\beta_*|`.

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
    out = np.empty((steps + 1, sigma.size))
    out[0] = sigma
    for k in range(steps):
        out[k + 1] = np.abs(out[k] - step)
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
