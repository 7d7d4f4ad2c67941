"""The optimisation statements of Appendix C part 1 (Theorem C.3 and Corollary C.1, Theorem C.4 and
Lemma C.5, Theorem C.6): the sparse objective and its subgradient, the decaying step of the sparse
kernels, the dominance threshold and the per-step sign flips, against plain numpy."""
from __future__ import annotations

import numpy as np
import pytest

from grokkit import data, metrics, theory
from grokkit.kernels import run as kr
from grokkit.kernels import sparse


@pytest.fixture(scope="module")
def problem():
    return data.sparse.problem(20, 3, 8, variance="1/N", snr=10.0, seed=3)


def numpy_f(X, y, b, beta1, beta2):
    return 0.5 * np.sum((X @ b - y) ** 2) + beta2 / 2 * np.sum(b**2) + beta1 * np.sum(np.abs(b))


def numpy_F(X, y, b, beta1, beta2):
    return X.T @ (X @ b - y) + beta2 * b + beta1 * np.sign(b)


# ------------------------------------------------------------------ the objective and its subgradient

def test_objective_gradient_and_subgradient_against_numpy(problem) -> None:
    X, y = problem.X, problem.y
    rng = np.random.RandomState(0)
    b = rng.randn(3, 4, X.shape[1])
    b[0, 0, :5] = 0.0  # sign(0) = 0
    beta1, beta2 = np.array([0.0, 0.5, 2.0]), np.array([0.1, 0.0, 0.3])
    f = theory.sparse.objective(X, y, b, beta1, beta2)
    F = theory.sparse.subgradient(X, y, b, beta1, beta2)
    G = theory.sparse.gradient(X, y, b, beta2)
    assert f.shape == (3, 4) and F.shape == G.shape == b.shape
    for g in range(3):
        for k in range(4):
            assert f[g, k] == pytest.approx(numpy_f(X, y, b[g, k], beta1[g], beta2[g]), rel=1e-12)
            np.testing.assert_allclose(F[g, k], numpy_F(X, y, b[g, k], beta1[g], beta2[g]), atol=1e-12)
            np.testing.assert_allclose(G[g, k], numpy_F(X, y, b[g, k], 0.0, beta2[g]), atol=1e-12)
    # one vector, scalar coefficients
    assert theory.sparse.objective(X, y, b[1, 2], 0.5, 0.0) == pytest.approx(numpy_f(X, y, b[1, 2], 0.5, 0.0))


def test_f_star_has_half_the_noise_energy(problem) -> None:
    """Theorem C.3's f* = f(b*) = beta1 ||b*||_1 + beta2/2 ||b*||^2 + 1/2 ||xi||^2 (the paper prints ||xi||^2)."""
    X, y, b_star, xi = problem.X, problem.y, problem.b_star, problem.xi
    assert np.linalg.norm(xi) > 0
    f = theory.sparse.objective(X, y, b_star, 0.3, 0.2)
    assert f == pytest.approx(0.3 * np.abs(b_star).sum() + 0.1 * np.sum(b_star**2) + 0.5 * np.sum(xi**2), rel=1e-12)


def test_the_subgradient_is_the_kernels_update_direction(problem) -> None:
    traj = sparse.subgradient(problem.X, problem.y, alpha=0.2, beta1=0.05, beta2=0.1, steps=1, init_scale=1.0,
                              record_b=True, device="cpu")
    F = theory.sparse.subgradient(problem.X, problem.y, traj.b[0, 0], 0.05, 0.1)
    np.testing.assert_allclose(traj.b[0, 1], traj.b[0, 0] - 0.2 * F, atol=1e-13)


# ------------------------------------------------------------------ the decaying step of the sparse kernels

def test_decaying_steps_equal_a_numpy_loop(problem) -> None:
    """Three configurations (constant, a/t, a/(10 + t)) of the subgradient kernel, every step recorded,
    against b <- b - alpha_t F(b) with alpha_t = alpha (1 + b)/(b + t)."""
    X, y = problem.X, problem.y
    alphas, decays, betas = [0.2, 0.3, 0.25], [np.inf, 0.0, 10.0], [0.01, 0.02, 0.005]
    steps = 200
    traj = sparse.subgradient(X, y, alpha=alphas, beta1=betas, beta2=0.05, alpha_decay=decays, steps=steps,
                              init_scale=1.0, record_b=True, dense=steps, device="cpu")
    assert traj.backend == "torch"
    np.testing.assert_array_equal(traj.config["alpha_decay"], decays)
    for g in range(3):
        b = traj.b[g, 0].copy()
        for t in range(1, steps + 1):
            step = alphas[g] * (1 + decays[g]) / (decays[g] + t) if np.isfinite(decays[g]) else alphas[g]
            b = b - step * numpy_F(X, y, b, betas[g], 0.05)
            np.testing.assert_allclose(traj.b[g, t], b, atol=1e-10, rtol=0, err_msg=f"config {g}, step {t}")


def test_no_decay_is_the_constant_step_bit_for_bit(problem) -> None:
    kw = dict(alpha=0.3, beta1=0.01, steps=100, init_scale=1.0, device="cpu")
    plain = sparse.ista(problem.X, problem.y, **kw)
    assert "alpha_decay" not in plain.config
    for decay in (None, np.inf):
        again = sparse.ista(problem.X, problem.y, alpha_decay=decay, **kw)
        np.testing.assert_array_equal(again.b_final, plain.b_final)


def test_theorem_c3_holds_on_a_run_every_step_recorded(problem) -> None:
    """f_best^(T) - f(b*) <= (R^2 + L^2 sum alpha_t^2)/(2 sum alpha_t) at every T, for both step rules,
    with R = ||b^(1) - b*|| and L the largest ||F(b^(t))|| so far."""
    X, y, b_star = problem.X, problem.y, problem.b_star
    steps = 400
    traj = sparse.subgradient(X, y, alpha=[0.3, 0.3], beta1=0.05, alpha_decay=[np.inf, 5.0], steps=steps,
                              init_scale=1.0, record_b=True, dense=steps, device="cpu")
    f = theory.sparse.objective(X, y, traj.b, 0.05)
    F = np.linalg.norm(theory.sparse.subgradient(X, y, traj.b, 0.05), axis=-1)
    T = traj.steps + 1
    f_best, L = metrics.best_so_far(f), metrics.best_so_far(F, largest=True)
    R = np.linalg.norm(traj.b[:, 0] - b_star, axis=-1)
    bound = theory.convergence.subgradient_gap_bound(R, L, 0.3, T, [np.inf, 5.0])
    gap = f_best - theory.sparse.objective(X, y, b_star, 0.05)
    assert (gap <= bound).all()
    # the same bound by hand at the last T
    for g, decay in enumerate((np.inf, 5.0)):
        a = np.array([kr.step_size(0.3, decay, t) for t in range(1, T[-1] + 1)])
        want = (R[g] ** 2 + L[g, -1] ** 2 * np.sum(a**2)) / (2 * np.sum(a))
        assert bound[g, -1] == pytest.approx(want, rel=1e-12)


# ------------------------------------------------------------------ Theorem C.4 and Lemma C.5

def test_l1_dominance_threshold(problem) -> None:
    X = problem.X
    lam = np.linalg.eigvalsh(X.T @ X).max()
    assert theory.sparse.dominance_threshold(X) == pytest.approx(lam / np.sqrt(20), rel=1e-12)
    assert theory.sparse.dominance_threshold(X, 0.5) == pytest.approx((lam + 0.5) / np.sqrt(20), rel=1e-12)


def test_sign_flips_known_answer() -> None:
    steps = np.array([0, 1, 2, 5, 6])
    b = np.array([[[1.0, -1.0, 0.0, 2.0],
                   [-1.0, -1.0, 1.0, 2.0],    # one flip (coordinate 0; 0 -> 1 is no flip)
                   [1.0, 1.0, -1.0, -2.0],    # four flips
                   [1.0, 1.0, 1.0, 1.0],      # after 3 steps: not one update
                   [-1.0, 1.0, 0.0, 1.0]]])   # one flip (0: 1 -> -1); 1 -> 0 is no flip
    got = metrics.sign_flips(steps, b)
    assert got.shape == (1, 5)
    assert np.isnan(got[0, 0]) and np.isnan(got[0, 3])
    np.testing.assert_array_equal(got[0, [1, 2, 4]], [0.25, 1.0, 0.25])


def test_sign_flips_against_a_loop_on_a_run(problem) -> None:
    """A large l1 coefficient: b <- b - alpha beta1 sign(b) overshoots 0 at every step, every coordinate."""
    traj = sparse.subgradient(problem.X, problem.y, alpha=0.1, beta1=[1e-4, 5.0], steps=300, init_scale=1e-6,
                              record_b=True, dense=200, per_decade=10, device="cpu")
    got = metrics.sign_flips(traj.steps, traj.b)
    want = np.full(got.shape, np.nan)
    for j in range(1, traj.steps.size):
        if traj.steps[j] - traj.steps[j - 1] == 1:
            want[:, j] = [np.mean(np.sign(traj.b[g, j]) * np.sign(traj.b[g, j - 1]) == -1) for g in range(2)]
    np.testing.assert_array_equal(got, want)
    assert np.nanmean(got[1, 10:]) > 0.9 and np.nanmean(got[0, :20]) < 0.2


# ------------------------------------------------------------------ bad inputs

@pytest.mark.parametrize("call, message", [
    (lambda p: theory.sparse.objective(p.X, p.y[:-1], p.b_star, 0.1), r"X, y and b must have shapes \(N, n\)"),
    (lambda p: theory.sparse.objective(p.X, p.y, p.b_star[:-1], 0.1), r"X, y and b must have shapes"),
    (lambda p: theory.sparse.objective(p.X, p.y, p.b_star, -0.1), r"beta1 must be in \[0.0, inf\), got -0.1"),
    (lambda p: theory.sparse.objective(p.X, p.y, np.ones((2, 20)), [0.1, 0.2, 0.3]),
     r"beta1 must be a scalar or have the leading shape of b \(2,\), got shape \(3,\)"),
    (lambda p: theory.sparse.gradient(p.X, p.y, p.b_star * np.nan), r"b must be finite"),
    (lambda p: theory.sparse.gradient(p.X, p.y, p.b_star, beta2=float("inf")), r"beta2 must be"),
    (lambda p: theory.sparse.subgradient(p.X * np.inf, p.y, p.b_star, 0.1), r"X must be finite"),
    (lambda p: theory.sparse.dominance_threshold(p.X, -1.0), r"beta2 must be in \[0.0, inf\), got -1.0"),
    (lambda p: metrics.sign_flips(np.arange(3), np.ones((3, 20))), r"steps and b must have shapes \(T,\) and \(G, T, n\)"),
    (lambda p: metrics.sign_flips(np.arange(4), np.ones((1, 3, 20))), r"steps and b must have shapes"),
    (lambda p: sparse.subgradient(p.X, p.y, alpha=0.1, beta1=0.1, steps=5, alpha_decay=-1.0),
     r"alpha_decay must be in \[0.0, inf\], got -1.0"),
    (lambda p: sparse.ista(p.X, p.y, alpha=[0.1, 0.2], beta1=0.1, steps=5, alpha_decay=[1.0, 2.0, 3.0]),
     r"must be scalars or 1-D of one length G"),
])
def test_bad_inputs_are_refused(problem, call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(problem)
