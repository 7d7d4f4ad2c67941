r"""The theory of the background chapter: the two papers the grokking paper builds on.

Woodworth et al. (2020), "Kernel and Rich Regimes in Overparametrized Models": the implicit
regulariser Q of the diagonal network at every depth (their Theorems 1 and 3), its minimiser under
interpolation (:func:`implicit_bias`), the exact gradient flow, Theorem 2's scales and the
parameter-distance regulariser R. Lyu et al. (2024), "Dichotomy of Early and Late Phase Implicit
Biases": the time of the switch between the kernel and the rich regime, and the test accuracy of a
linear classifier on their misgrokking data.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import special

from grokkit._checks import check_finite, check_grid, check_int, check_option, check_range, show


# --- Woodworth et al. (2020): kernel and rich regimes -----------------------------------------
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

    p_z has **two** real roots (and a complex pair): r(z) is the smaller. Computed from the
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
    (:func:`r`), with two corrections: the factor α², missing from [W]'s text, and r the
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
        mid = math.sqrt(low) * math.sqrt(high)  # not sqrt(low * high), which underflows to 0 near 1e-300
        low, high = (mid, high) if passes(mid) else (low, mid)
    return low


def smallest_recovering_rows(X, y, b_star, threshold: float, *, solver: str = "CLARABEL") -> int:
    r"""The smallest number of leading rows N of ``X``, ``y`` for which basis pursuit (the minimum-ℓ1
    interpolant, :func:`grokkit.baselines.basis_pursuit`) recovers ``b_star`` to
    :math:`\|\beta - \beta^*\|_2 \le` ``threshold``: the dashed line of [W] Figures 1c and 3c. A bisection
    on N, exact because the rows are nested: with more rows the feasible set shrinks and still holds
    β*, so once β* is the minimum-ℓ1 interpolant it stays so. ``X`` (M, n), ``y`` (M,), ``b_star`` (n,)
    finite, ``threshold`` > 0. Returns M + 1 when all M rows do not recover ``b_star``."""
    from grokkit.baselines import basis_pursuit

    check_finite("X", X)
    check_finite("y", y)
    check_finite("b_star", b_star)
    X, y, b_star = (np.asarray(v, dtype=float) for v in (X, y, b_star))
    if X.ndim != 2 or y.shape != X.shape[:1] or b_star.shape != X.shape[1:]:
        raise ValueError(f"X must be (M, n), y (M,) and b_star (n,), got {X.shape}, {y.shape}, {b_star.shape}")
    threshold = check_range("threshold", threshold, 0.0, closed="neither")

    def passes(N: int) -> bool:
        return bool(np.linalg.norm(basis_pursuit(X[:N], y[:N], solver=solver).b - b_star) <= threshold)

    low, high = 0, X.shape[0] + 1           # passes(low) is False, passes(high) taken as True
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if passes(mid) else (mid, high)
    return high


# --- Lyu et al. (2024): the diagonal network on linear classification -------------------------
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
    distribution of Lyu et al. (Figure 1b, :func:`grokkit.data.background.margin_classification`):
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
    return margin_classification_accuracy_of(w @ w_star, np.linalg.norm(w, axis=-1), gamma)


def margin_classification_accuracy_of(c, norm, gamma: float) -> np.ndarray:
    r"""The accuracy of :func:`margin_classification_accuracy` from :math:`c = \langle w, w^*\rangle`
    and :math:`\|w\|_2` alone (``c`` and ``norm`` of one shape), as a run that records only the
    projection of its weight on :math:`w^*` gives them (``projections`` of
    :func:`grokkit.kernels.diagonal_net`): :math:`r^2 = \|w\|_2^2 - c^2`."""
    c, norm = np.asarray(c, dtype=float), np.asarray(norm, dtype=float)
    if c.shape != norm.shape:
        raise ValueError(f"c and norm must have one shape, got {c.shape} and {norm.shape}")
    check_finite("c", c)
    check_finite("norm", norm)
    bad = np.abs(c) > norm * (1 + 1e-9)                          # Cauchy-Schwarz, with a unit w*
    if bad.any():
        raise ValueError(f"norm must be at least |c| (w* is a unit vector), got c = {c[bad].ravel()[0]:.6g} "
                         f"with norm {norm[bad].ravel()[0]:.6g}")
    gamma = check_range("gamma", gamma, 0.0, closed="left")
    r = np.sqrt(np.maximum(norm * norm - c * c, 0.0))
    nodes, weights = np.polynomial.legendre.leggauss(128)
    a, weights = 6.0 * (nodes + 1.0), 6.0 * weights            # [-1, 1] -> [0, 12]
    phi = np.exp(-a * a / 2) / math.sqrt(2 * math.pi)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(r > 0, c / np.where(r > 0, r, 1.0), np.sign(c) * np.inf)
    inner = special.ndtr((a + gamma / 2) * ratio[..., None])
    accuracy = 2.0 * (inner * phi * weights).sum(axis=-1)
    return np.where((r == 0) & (c == 0), 0.5, np.clip(accuracy, 0.0, 1.0))
