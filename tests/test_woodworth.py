"""Woodworth et al. (2020), kernel and rich regimes: the implicit regulariser Q^D_α, its minimiser
under Xβ = y (dual Newton), the exact gradient-flow path, Theorem 2's bounds and the parameter-space
distance R_α, each against an independent computation (plain numpy gradient descent, cvxpy's
exponential cone, closed forms, scipy quadrature and minimisation)."""
import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq, minimize_scalar

from grokkit import baselines, data, theory


def problem(n=100, N=40, s=5, noise=None, seed=0):
    """[W] §4's sparse regression: x ~ N(0, I), β* s-sparse with entries 1/√s, noise variance 0.01."""
    b_star = data.background.flat_sparse_signal(n, s, seed)
    return data.sparse.signal_problem(b_star, N, variance=1.0, snr=None if noise is None else 1 / (N * noise), seed=seed)


P = problem()
PN = problem(noise=0.01, seed=1)
SMALL = problem(30, 12, 3, seed=2)


def gradient_descent(X, y, init_scale, depth, lr, steps):
    """Plain numpy gradient descent on ½‖X(w₊^D − w₋^D) − y‖² from w± = init_scale·1; β at ``steps``."""
    wp = np.full(X.shape[1], float(init_scale))
    wm = wp.copy()
    out, wanted = [], set(steps)
    for k in range(1, max(steps) + 1):
        g = X.T @ (X @ (wp ** depth - wm ** depth) - y)
        wp, wm = wp - lr * depth * g * wp ** (depth - 1), wm + lr * depth * g * wm ** (depth - 1)
        if k in wanted:
            out.append(wp ** depth - wm ** depth)
    return np.array(out)


# --- q, q_D, h_D --------------------------------------------------------------------------------

def test_q_closed_form_and_integral():
    z = np.array([-7.0, -0.3, 0.0, 0.2, 1.5, 40.0])
    direct = 2 - np.sqrt(4 + z * z) + z * np.arcsinh(z / 2)
    assert np.allclose(theory.background.q(z), direct, rtol=1e-13, atol=1e-15)
    for zi in z:
        assert theory.background.q(zi) == pytest.approx(quad(lambda u: np.arcsinh(u / 2), 0, zi)[0], rel=1e-10, abs=1e-14)


def test_q_series_limits():
    small = np.array([1e-9, 1e-6, 1e-4])
    assert np.allclose(theory.background.q(small), small ** 2 / 4, rtol=1e-7)  # q = z²/4 − z⁴/192 + …
    assert theory.background.q(1e-2) == pytest.approx(1e-4 / 4 - 1e-8 / 192, rel=1e-9)
    big = np.array([1e3, 1e6, 1e12, 1e100])
    # q(z) = |z| log|z| − |z| + 2 + O(1/|z|)
    assert np.allclose(theory.background.q(big) - (big * np.log(big) - big + 2), 0.0, atol=1e-14 * big * np.log(big) + 3 / big)
    assert theory.background.q(-5.0) == theory.background.q(5.0)


@pytest.mark.parametrize("depth", [3, 4, 7])
def test_q_depth_is_the_integral_of_the_inverse_link(depth):
    def inverse(t):
        return brentq(lambda u: theory.background.h_depth(u, depth) - t, -1 + 1e-15, 1 - 1e-15, xtol=1e-15)
    for z in (-3.0, 0.05, 0.8, 2.5, 30.0):
        assert theory.background.q_depth(z, depth) == pytest.approx(quad(inverse, 0, z)[0], rel=1e-8)


@pytest.mark.parametrize("depth", [3, 4, 6])
def test_q_depth_limits(depth):
    z = np.array([1e-8, 1e-5])
    assert np.allclose(theory.background.q_depth(z, depth), (depth - 2) / (4 * depth) * z ** 2, rtol=1e-6)
    big = np.array([1e6, 1e9])
    # q_D(z) = |z| + O(|z|^(2/D)): the ℓ1 limit without the logarithm of depth 2
    assert np.all(np.abs(theory.background.q_depth(big, depth) - big) < 10 * big ** (2 / depth))
    assert theory.background.q_depth(2, 2) == theory.background.q(2)


def test_h_depth():
    z = np.array([-0.9, -0.1, 1e-9, 0.5, 0.99])
    for depth in (3, 5):
        p = depth / (depth - 2)
        assert np.allclose(theory.background.h_depth(z, depth), (1 - z) ** -p - (1 + z) ** -p, rtol=1e-12)
    assert theory.background.h_depth(1e-12, 3) == pytest.approx(2 * 3 * 1e-12, rel=1e-9)  # 2D/(D−2)·z, no cancellation
    assert np.allclose(theory.background.h_depth(z, 2), 2 * np.sinh(z))


def test_implicit_regulariser_limits():
    beta = P.b_star
    # kernel regime: Q ≈ ‖β‖²/(4α²) (D = 2), (D − 2)/(4D)‖β‖²/α^D (D ≥ 3)
    assert theory.background.implicit_regulariser(beta, 1e3) == pytest.approx(beta @ beta / 4e6, rel=1e-9)
    assert theory.background.implicit_regulariser(beta, 1e2, 3) == pytest.approx(beta @ beta / 12 / 1e6, rel=1e-6)
    # rich limit: α²q(β/α²) = |β|(log(|β|/α²) − 1) + O(α²), so Q/log(1/α²) → ‖β‖₁ (D = 2); Q → ‖β‖₁ (D = 3)
    l1, b = np.abs(beta).sum(), np.abs(beta[beta != 0])
    for a in (1e-20, 1e-250):  # 1e-250: α² underflows, the evaluation runs on log α
        expected = (b * (np.log(b) - 2 * math.log(a) - 1)).sum()
        assert theory.background.implicit_regulariser(beta, a) == pytest.approx(expected, rel=1e-12)
    assert theory.background.implicit_regulariser(beta, 1e-250) / (-2 * math.log(1e-250)) == pytest.approx(l1, rel=3e-3)
    assert theory.background.implicit_regulariser(beta, 1e-3, 3) == pytest.approx(l1, rel=0.02)
    # agrees with α² Σ q(β/α²) where that can be evaluated directly; a grid broadcasts
    grid = np.array([0.1, 1.0, 3.0])
    direct = [a * a * theory.background.q(beta / a ** 2).sum() for a in grid]
    assert np.allclose(theory.background.implicit_regulariser(beta, grid), direct, rtol=1e-12)


# --- the minimiser of Q^D_α under Xβ = y -----------------------------------------------------------

@pytest.mark.parametrize("init_scale", [1e-3, 1e-2, 0.1, 1.0, 10.0])
def test_dual_newton_matches_cvxpy_exponential_cone(init_scale):
    for prob in (P, PN):
        newton = theory.background.implicit_bias(prob.X, prob.y, init_scale)
        cone = baselines.implicit_bias_cvxpy(prob.X, prob.y, init_scale)
        assert np.linalg.norm(newton - cone.b) <= 3e-6 * np.linalg.norm(newton)
        assert theory.background.implicit_regulariser(newton, init_scale) == pytest.approx(cone.value, rel=1e-7)
        assert np.linalg.norm(prob.X @ newton - prob.y) <= 1e-10 * np.linalg.norm(prob.y)


@pytest.mark.parametrize("depth, init_scale", [(2, 0.3), (2, 0.1), (3, 0.5), (3, 0.3), (4, 0.5)])
def test_dual_newton_matches_gradient_descent(depth, init_scale):
    X, y = SMALL.X, SMALL.y
    beta_q = theory.background.implicit_bias(X, y, init_scale, depth)
    errors, ends = [], []
    for lr in (2e-3, 1e-3):  # continuous time 80: converged for these scales
        beta_gd = gradient_descent(X, y, init_scale, depth, lr, [round(80 / lr)])[0]
        assert np.linalg.norm(X @ beta_gd - y) < 1e-8 * np.linalg.norm(y)
        errors.append(np.linalg.norm(beta_gd - beta_q) / np.linalg.norm(beta_q))
        ends.append(beta_gd)
    assert errors[1] < 5e-3
    assert errors[0] / errors[1] == pytest.approx(2.0, rel=0.1)  # the gap is GD's O(lr) bias
    richardson = 2 * ends[1] - ends[0]
    assert np.linalg.norm(richardson - beta_q) < 2e-4 * np.linalg.norm(beta_q)


def test_closed_forms_at_both_limits():
    for prob in (P, PN):
        l2 = np.linalg.pinv(prob.X) @ prob.y
        l1 = baselines.basis_pursuit(prob.X, prob.y).b
        for depth in (2, 3, 4):
            big = theory.background.implicit_bias(prob.X, prob.y, 1e4 if depth == 2 else 1e3, depth)
            assert np.linalg.norm(big - l2) < 1e-6 * np.linalg.norm(l2)
        gaps = [np.linalg.norm(theory.background.implicit_bias(prob.X, prob.y, a) - l1) for a in (1e-20, 1e-100, 1e-300)]
        assert gaps[-1] < 1e-5 * np.linalg.norm(l1)
        # noisy data: the ℓ1 solution has N nonzeros and the gap closes like 1/log(1/α); noiseless and
        # sparse: it is at basis pursuit's own accuracy from α = 1e-20 on
        assert gaps[0] > gaps[1] > gaps[2] if prob is PN else max(gaps) < 1e-8
        for depth, a in ((3, 1e-4), (4, 1e-2)):
            near = theory.background.implicit_bias(prob.X, prob.y, a, depth)
            assert np.linalg.norm(near - l1) < 1e-3 * np.linalg.norm(l1)
    # noiseless and sparse: basis pursuit recovers β*, so does the rich limit
    assert np.linalg.norm(theory.background.implicit_bias(P.X, P.y, 1e-300) - P.b_star) < 1e-8


def test_implicit_bias_grid_and_kkt():
    grid = np.array([1e-30, 1e-4, 0.05, 2.0])
    B = theory.background.implicit_bias(PN.X, PN.y, grid)
    assert B.shape == (4, 100)
    for a, b in zip(grid, B):
        assert np.array_equal(b, theory.background.implicit_bias(PN.X, PN.y, a))
        # KKT: ∇Q = arcsinh(β/2α²) lies in the row space of X
        grad = np.arcsinh(b / (2 * a * a)) if a > 1e-10 else None
        if grad is not None:
            projected = PN.X.T @ np.linalg.lstsq(PN.X.T, grad, rcond=None)[0]
            assert np.linalg.norm(grad - projected) < 1e-6 * np.linalg.norm(grad)
    assert np.allclose(theory.background.implicit_bias(P.X, np.zeros(40), 0.1), 0.0)


# --- the exact gradient-flow path ----------------------------------------------------------------------

@pytest.mark.parametrize("depth, init_scale", [(2, 0.3), (3, 0.5)])
def test_diagonal_flow_is_the_limit_of_gradient_descent(depth, init_scale):
    X, y = SMALL.X, SMALL.y
    times = np.array([0.5, 2.0, 10.0])
    flow = theory.background.diagonal_flow(X, y, init_scale, depth, times)
    errors = []
    for lr in (2e-4, 1e-4):
        gd = gradient_descent(X, y, init_scale, depth, lr, list((times / lr).round().astype(int)))
        errors.append(np.linalg.norm(gd - flow, axis=1) / np.linalg.norm(flow, axis=1))
    assert np.all(errors[1] < 5e-4)
    assert np.allclose(errors[0] / errors[1], 2.0, rtol=0.05)  # first order in the step: GD → the flow
    # the path ends at the minimiser of Q (Theorems 1 and 3)
    assert np.linalg.norm(flow[-1] - theory.background.implicit_bias(X, y, init_scale, depth)) < 1e-8


def test_diagonal_flow_at_small_scale():
    # D = 3 at init_scale 0.01: a plateau at the saddle β = 0, then the escape; the ODE follows both
    X, y = SMALL.X, SMALL.y
    flow = theory.background.diagonal_flow(X, y, 0.01, 3, [0.0, 1.0, 1e6])
    assert np.all(flow[0] == 0)
    assert np.linalg.norm(X @ flow[1] - y) > 0.99 * np.linalg.norm(y)  # still on the plateau
    assert np.linalg.norm(flow[-1] - theory.background.implicit_bias(X, y, 0.01, 3)) < 1e-6 * np.linalg.norm(flow[-1])


# --- Theorem 2 ------------------------------------------------------------------------------------------

def test_theorem_2_bounds():
    B1, B2, d = 2.0, 0.8, 100
    for eps in (0.5, 1.0, 3.0):
        printed = min((2 * (1 + eps) * B1) ** (-(2 + eps) / (2 * eps)), math.exp(-d / (eps * B1)))
        assert theory.background.l1_init_scale_bound(B1, d, eps) == pytest.approx(printed, rel=1e-12)
        assert theory.background.l2_init_scale_bound(B2, eps) == pytest.approx(math.sqrt(2 * (1 + eps) * (1 + 2 / eps) * B2))
        e = eps / (2 + eps)
        assert theory.background.l2_init_scale_bound(B2, eps, "proof") == pytest.approx(
            math.sqrt((1 + 2 * eps) * B2) * (1 + e ** -0.25))
    # the proof's ℓ2 bound is above the printed one at ε = 1, below it at ε = 0.1
    assert theory.background.l2_init_scale_bound(1.0, 1.0, "proof") ** 2 == pytest.approx(3 * (1 + 3 ** 0.25) ** 2)
    assert theory.background.l2_init_scale_bound(1.0, 1.0, "proof") > theory.background.l2_init_scale_bound(1.0, 1.0)
    assert theory.background.l2_init_scale_bound(1.0, 0.1, "proof") < theory.background.l2_init_scale_bound(1.0, 0.1)


def test_theorem_2_holds_on_the_solver():
    l1 = np.abs(baselines.basis_pursuit(PN.X, PN.y).b).sum()
    l2 = np.linalg.pinv(PN.X) @ PN.y
    for eps in (0.5, 1.0, 2.0):
        for version in ("printed", "proof"):
            a = theory.background.l1_init_scale_bound(l1, 100, eps, version)
            assert np.abs(theory.background.implicit_bias(PN.X, PN.y, a)).sum() <= (1 + eps) * l1
            a = theory.background.l2_init_scale_bound(np.linalg.norm(l2), eps, version)
            b = theory.background.implicit_bias(PN.X, PN.y, a)
            assert b @ b <= (1 + eps) * (l2 @ l2)


# --- r and R_α ----------------------------------------------------------------------------------------

def test_r_is_the_distance_and_the_smaller_root():
    for z in (-4.0, -0.5, 1e-3, 0.7, 3.0, 25.0):
        def distance(b):
            return (math.sqrt(z + b * b) - 1) ** 2 + (b - 1) ** 2
        low = math.sqrt(max(-z, 0.0)) + 1e-12
        brute = minimize_scalar(distance, bounds=(low, 10 + abs(z)), method="bounded",
                                options=dict(xatol=1e-13)).fun
        assert theory.background.r(z) == pytest.approx(brute, rel=1e-8, abs=1e-14)
        roots = np.roots([1, -6, 12 - 2 * z * z, -(8 + 10 * z * z), z * z + z ** 4])
        real = np.sort(roots[np.abs(roots.imag) < 1e-9].real)
        assert real.size == 2  # two real roots, not "the unique real root"
        assert theory.background.r(z) == pytest.approx(real[0], rel=1e-9, abs=1e-14)
        assert real[1] > brute + 1  # the larger root is not the distance
    assert theory.background.r(1e-6) == pytest.approx(1e-12 / 8, rel=1e-6)


def test_r_equals_q4_and_R_differs_from_Q():
    z = np.array([-30.0, -1.0, 0.01, 0.5, 4.0, 1e4])
    assert np.allclose(theory.background.r(z), theory.background.q_depth(z, 4), rtol=1e-9)
    beta = PN.b_star + 0.1
    assert theory.background.parameter_distance_regulariser(beta, 0.3) == pytest.approx(
        theory.background.implicit_regulariser(beta, math.sqrt(0.3), 4), rel=1e-9)
    assert abs(theory.background.parameter_distance_regulariser(beta, 0.3) / theory.background.implicit_regulariser(beta, 0.3) - 1) > 0.05


@pytest.mark.parametrize("init_scale", [0.01, 0.1, 1.0])
def test_parameter_distance_bias(init_scale):
    X, y = PN.X, PN.y
    b = theory.background.parameter_distance_bias(X, y, init_scale)
    assert np.linalg.norm(X @ b - y) < 1e-10 * np.linalg.norm(y)
    # R_α = Q^4_√α (r = q_4): the depth-4 dual Newton solve is an independent solver of the same program
    assert np.linalg.norm(b - theory.background.implicit_bias(X, y, math.sqrt(init_scale), 4)) < 1e-6 * np.linalg.norm(b)
    # and it is not gradient flow's solution
    assert np.linalg.norm(b - theory.background.implicit_bias(X, y, init_scale)) > 1e-3 * np.linalg.norm(b)


# --- bad inputs ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: theory.background.q([1.0, np.nan]), "z must be finite"),
    (lambda: theory.background.h_depth(1.0, 3), r"z must be in \(-1, 1\) for depth >= 3, got 1.0"),
    (lambda: theory.background.q_depth(0.5, 1), r"depth must be an integer in \[2, inf\), got 1"),
    (lambda: theory.background.q_depth(0.5, 2.5), r"depth must be an integer in \[2, inf\), got 2.5"),
    (lambda: theory.background.implicit_regulariser(1.0, 0.1), "beta must be a vector"),
    (lambda: theory.background.implicit_regulariser([1.0], 0.0), r"init_scale must be in \(0.0, inf\), got 0.0"),
    (lambda: theory.background.implicit_bias(P.X, P.y, 1e-301), r"init_scale must be in \[1e-300, 1e\+100\] for depth 2"),
    (lambda: theory.background.implicit_bias(P.X, P.y, 1e-5, 3), r"init_scale must be in \[0.0001, 2.15e\+33\] for depth 3"),
    (lambda: theory.background.implicit_bias(P.X, P.y, 1e-3, 4), r"init_scale must be in \[0.01, 1e\+25\] for depth 4 .*, got 0.001"),
    (lambda: theory.background.implicit_bias(P.X, P.y, -1.0), r"init_scale must be in \(0.0, inf\), got -1.0"),
    (lambda: theory.background.implicit_bias(P.X, P.y, [[0.1]]), "init_scale must be a number or a 1-D grid"),
    (lambda: theory.background.implicit_bias(P.X, P.y[:5], 0.1), r"y shape \(N,\)"),
    (lambda: theory.background.implicit_bias(np.vstack([P.X, P.X[:1]]), np.append(P.y, 0.0), 0.1), "full row rank"),
    (lambda: theory.background.implicit_bias(P.X, P.y, 0.1, tol=0.0), r"tol must be in \(0.0, 1.0\)"),
    (lambda: theory.background.diagonal_flow(P.X, P.y, 0.1, 2, [1.0, 0.5]), "times must be a non-decreasing"),
    (lambda: theory.background.diagonal_flow(P.X, P.y, 0.1, 2, [-1.0]), r"times must be in \[0.0, inf\)"),
    (lambda: theory.background.diagonal_flow(P.X, P.y, [0.1, 0.2], 2, [1.0]), "init_scale must be one number"),
    (lambda: theory.background.l1_init_scale_bound(1.0, 10, 10.0), r"eps must be in \(0.0, 10\)"),
    (lambda: theory.background.l2_init_scale_bound(0.0, 1.0), r"l2_norm must be in \(0.0, inf\)"),
    (lambda: theory.background.l2_init_scale_bound(1.0, 1.0, "corrected"), "version must be one of 'printed', 'proof'"),
    (lambda: theory.background.r(1e61), r"z must be in \[-1e60, 1e60\]"),
    (lambda: theory.background.parameter_distance_bias(P.X, P.y, 0.0), r"init_scale must be in \(0.0, inf\)"),
    (lambda: baselines.implicit_bias_cvxpy(P.X, P.y, 0.0), r"init_scale must be in \(0.0, inf\)"),
    (lambda: data.background.flat_sparse_signal(10, 11), r"s must be an integer in \[1, n\] = \[1, 10\], got 11"),
])
def test_bad_inputs(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_largest_recovering_scale():
    X, y, b = P.X, P.y, P.b_star
    for depth in (2, 3):
        a = theory.background.largest_recovering_scale(X, y, b, depth, 0.025)
        assert np.linalg.norm(theory.background.implicit_bias(X, y, a, depth) - b) <= 0.025
        assert np.linalg.norm(theory.background.implicit_bias(X, y, a * 1.01, depth) - b) > 0.025
    few = problem(N=15)  # below basis pursuit's sample size: no scale recovers
    assert math.isnan(theory.background.largest_recovering_scale(few.X, few.y, few.b_star, 2, 0.025))
    assert theory.background.largest_recovering_scale(X, y, b, 2, 10.0) == 1e3
    with pytest.raises(ValueError, match=r"threshold must be in \(0.0, inf\)"):
        theory.background.largest_recovering_scale(X, y, b, 2, 0.0)
    with pytest.raises(ValueError, match=r"b_star must have shape \(100,\)"):
        theory.background.largest_recovering_scale(X, y, b[:5], 2, 0.1)


def test_largest_recovering_scale_near_the_smallest_scale():
    # seed 7 at basis pursuit's sample size: the bracket reaches 1e-300, where sqrt(low * high) underflows
    b_star = data.background.flat_sparse_signal(100, 5, 7)
    big = data.sparse.signal_problem(b_star, 40, variance=1.0, seed=7)
    N = theory.background.smallest_recovering_rows(big.X, big.y, b_star, 0.025)
    a = theory.background.largest_recovering_scale(big.X[:N], big.y[:N], b_star, 3, 0.025)
    assert 0 < a < 1


def test_smallest_recovering_rows():
    b_star = P.b_star
    N = theory.background.smallest_recovering_rows(P.X, P.y, b_star, 0.025)
    assert 1 <= N <= 40
    # the rows of signal_problem are nested: its first N rows are the problem with N rows
    sub = data.sparse.signal_problem(b_star, N, variance=1.0, seed=0)
    assert np.array_equal(sub.X, P.X[:N])
    ok = [np.linalg.norm(baselines.basis_pursuit(P.X[:k], P.y[:k]).b - b_star) <= 0.025 for k in range(N - 3, N + 4)]
    assert ok == [False] * 3 + [True] * 4
    assert theory.background.smallest_recovering_rows(P.X[:N - 1], P.y[:N - 1], b_star, 0.025) == N
    with pytest.raises(ValueError, match=r"threshold must be in \(0.0, inf\)"):
        theory.background.smallest_recovering_rows(P.X, P.y, b_star, 0.0)
    with pytest.raises(ValueError, match="b_star"):
        theory.background.smallest_recovering_rows(P.X, P.y, b_star[:5], 0.1)


def test_kernel_diagonal_net_ends_at_the_minimiser_and_follows_the_flow():
    # gk.kernels.diagonal_net, batched over depth and init_scale in one call
    from grokkit import kernels

    X, y = SMALL.X, SMALL.y
    depth, scale = np.array([2, 3, 4]), np.array([0.3, 0.5, 0.6])
    lam = np.linalg.norm(X, 2) ** 2
    lr = 0.25 / (depth ** 2 * lam)
    runs = kernels.diagonal_net(X, y, alpha=lr, steps=12_000, depth=depth, init_scale=scale, record_b=True,
                                device="cpu")
    for g, (D, a) in enumerate(zip(depth, scale)):
        beta_q = theory.background.implicit_bias(X, y, a, D)
        assert np.linalg.norm(runs.b_final[g] - beta_q) < 3e-3 * np.linalg.norm(beta_q)
        t = lr[g] * runs.steps[1::40]
        flow = theory.background.diagonal_flow(X, y, a, D, t)
        assert np.abs(flow - runs.b[g, 1::40]).max() < 5e-3
