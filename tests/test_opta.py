"""Decaying step sizes in the kernels' loop (Corollary D.1) and the convergence bounds of App. D.6
(Theorems D.4, D.5, D.13, Lemma D.6), against plain numpy."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from grokkit import data, metrics, theory
from grokkit.kernels import fused
from grokkit.kernels import matrix as mk
from grokkit.kernels import run as kr
from grokkit.kernels import sparse

N1, N2 = 6, 5


def vec(A: np.ndarray) -> np.ndarray:
    return A.reshape(-1, order="F")


def problems(seed: int = 0):
    """(operator, explicit X, y, A_star) for a completion and a sensing problem."""
    out = []
    for kind, N in (("completion", 20), ("sensing", 12)):
        p = data.matrix.problem(N1, N2, 2, N, kind=kind, seed=seed)
        X = theory.matrix.measurement_matrix(p.mask if kind == "completion" else p.X, (N1, N2))
        out.append((p.mask if kind == "completion" else p.X, X, p.y, p.A_star))
    return out


def numpy_h(A: np.ndarray) -> np.ndarray:
    U, _, Vt = np.linalg.svd(A, full_matrices=False)
    return U @ Vt


def numpy_F(X, y, A, beta_star, beta2=0.0):
    grad = (X.T @ (X @ vec(A) - y)).reshape(N2, N1).T + beta2 * A
    return grad + beta_star * numpy_h(A)


# ------------------------------------------------------------------ the decaying step in the loop

def test_step_size_is_a_over_b_plus_t() -> None:
    t = np.arange(1, 6)
    np.testing.assert_allclose(kr.step_size(0.3, 4.0, t), 0.3 * 5 / (4 + t), rtol=1e-15)
    np.testing.assert_allclose(kr.step_size(0.3, 0.0, t), 0.3 / t, rtol=1e-15)
    assert (kr.step_size(0.3, np.inf, t) == 0.3).all()  # constant, bit for bit
    assert kr.step_size(0.3, 7.0, 1) == 0.3  # alpha_1 = alpha


@pytest.mark.parametrize("which", [0, 1])
def test_decaying_steps_equal_a_numpy_loop(which: int) -> None:
    """400 steps of three configurations (constant, a/t, a/(10 + t)), every step recorded, against a
    numpy loop doing A <- A - alpha_t F(A) with alpha_t = alpha (1 + b)/(b + t)."""
    operator, X, y, A_star = problems()[which]
    lam = np.linalg.eigvalsh(X.T @ X).max()  # 1 for completion
    alphas = list(np.array([0.3, 0.5, 0.4]) / lam)
    decays, betas, ridges = [np.inf, 0.0, 10.0], [0.01, 0.02, 0.005], [0.0, 0.0, 0.1]
    steps = 400
    traj = mk.subgradient(operator, y, (N1, N2), alpha=alphas, beta_star=betas, beta2=ridges, alpha_decay=decays,
                          steps=steps, A_star=A_star, init_scale=1.0, record_A=True, dense=steps, device="cpu")
    assert traj.backend == "torch" and (traj.stopped_at == -1).all()
    np.testing.assert_array_equal(traj.config["alpha_decay"], decays)
    np.testing.assert_array_equal(traj.steps, np.arange(steps + 1))
    for g in range(3):
        B = traj.A[g, 0].copy()
        for t in range(1, steps + 1):
            step = alphas[g] * (1 + decays[g]) / (decays[g] + t) if np.isfinite(decays[g]) else alphas[g]
            B = B - step * numpy_F(X, y, B, betas[g], ridges[g])
            np.testing.assert_allclose(traj.A[g, t], B, atol=1e-10, rtol=0, err_msg=f"config {g}, step {t}")
        np.testing.assert_allclose(traj.A_final[g], B, atol=1e-10, rtol=0)


def test_constant_decay_is_the_constant_step_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the PyTorch steps, which run every decaying step (the fused CPU steps have constant
    steps only, and round differently)."""
    monkeypatch.setattr(fused, "matrix_usable", lambda *problem: False)
    operator, _, y, A_star = problems()[0]
    kw = dict(alpha=[0.2, 0.4], beta_star=0.05, steps=300, A_star=A_star, init_scale=0.1, device="cpu")
    plain = mk.subgradient(operator, y, (N1, N2), **kw)
    for decay in (np.inf, [np.inf, 3.0]):
        decayed = mk.subgradient(operator, y, (N1, N2), alpha_decay=decay, **kw)
        np.testing.assert_array_equal(decayed.A_final[0], plain.A_final[0])
    assert not np.array_equal(decayed.A_final[1], plain.A_final[1])


def test_the_fused_sparse_path_falls_back_to_the_torch_steps_for_a_decaying_step() -> None:
    """The loop runs a decaying step in PyTorch even where the fused CPU path would run (a shared
    float64 problem), and the iterates follow b <- b - alpha_t (X^T(Xb - y) + beta1 sign b)."""
    rng = np.random.RandomState(1)
    X, b_star = rng.randn(8, 12) / np.sqrt(8), np.zeros(12)
    b_star[[1, 5]] = [1.0, -2.0]
    y = X @ b_star
    config = kr.configurations(alpha=[0.3, 0.3], beta1=1e-2, beta2=0.0, init_scale=0.0, alpha_decay=[np.inf, 5.0])
    b0 = torch.full((2, 12), 0.01, dtype=torch.float64)
    data_ = {"X": torch.as_tensor(X), "y": torch.as_tensor(y), "b_star": torch.as_tensor(b_star)}
    traj = kr.run(kr.SPARSE, "subgradient", sparse.subgradient_step, data_, config, b0, 300, work=1.0)
    assert traj.backend == "torch"
    for g in range(2):
        b = np.full(12, 0.01)
        for t in range(1, 301):
            step = kr.step_size(0.3, config["alpha_decay"][g], t)
            b = b - step * (X.T @ (X @ b - y) + 1e-2 * np.sign(b))
        np.testing.assert_allclose(traj.b_final[g], b, atol=1e-10, rtol=0)


def test_a_decaying_configuration_runs_on_when_a_constant_one_stops() -> None:
    """A nearly pure nuclear-norm step (Theorem D.12: one small observed entry): the constant-step
    configuration becomes exactly 2-periodic and is stopped; the decaying one, whose step size is
    subset with it, runs every step and matches the numpy loop."""
    mask = np.ones((2, 2), dtype=bool)
    mask[1, 1] = False
    y = np.array([1e-3, 0.0, 0.0])  # one nonzero entry: the relative training error needs y != 0
    traj = mk.subgradient(mask, y, (2, 2), alpha=0.5, beta_star=1.0, alpha_decay=[np.inf, 50.0], steps=300,
                          init_scale=1.0, init="identity", dense=0, device="cpu")
    assert 0 < traj.stopped_at[0] < 300 and traj.stopped_at[1] == -1
    X = theory.matrix.measurement_matrix(mask, (2, 2))
    B = np.eye(2)
    for t in range(1, 301):
        grad = (X.T @ (X @ vec(B) - y)).reshape(2, 2).T
        B = B - kr.step_size(0.5, 50.0, t) * (grad + numpy_h(B))
    np.testing.assert_allclose(traj.A_final[1], B, atol=1e-10, rtol=0)


# ------------------------------------------------------------------ the objective and its subgradient

def test_objective_gradient_and_subgradient_against_numpy() -> None:
    rng = np.random.RandomState(2)
    for operator, X, y, A_star in problems(2):
        A = rng.randn(3, 4, N1, N2)
        beta_star, beta2 = np.array([0.0, 0.5, 2.0]), np.array([0.1, 0.0, 0.3])
        f = theory.matrix.objective(operator, (N1, N2), A, y, beta_star, beta2)
        F = theory.matrix.subgradient(operator, (N1, N2), A, y, beta_star, beta2)
        G = theory.matrix.gradient(operator, (N1, N2), A, y, beta2)
        assert f.shape == (3, 4) and F.shape == A.shape
        for g in range(3):
            for k in range(4):
                B = A[g, k]
                want = (0.5 * np.sum((X @ vec(B) - y) ** 2) + beta2[g] / 2 * np.sum(B**2)
                        + beta_star[g] * np.linalg.norm(B, "nuc"))
                assert f[g, k] == pytest.approx(want, rel=1e-12)
                np.testing.assert_allclose(F[g, k], numpy_F(X, y, B, beta_star[g], beta2[g]), atol=1e-12)
                np.testing.assert_allclose(G[g, k], numpy_F(X, y, B, 0.0, beta2[g]), atol=1e-12)
        # f(A*) = beta* ||A*||_* + beta2/2 ||A*||_F^2 + 1/2 ||xi||^2 (Theorem D.4's f*, with the 1/2)
        xi = rng.randn(y.size) * 0.1
        fstar = theory.matrix.objective(operator, (N1, N2), A_star, X @ vec(A_star) + xi, 0.7, 0.2)
        assert fstar == pytest.approx(0.7 * np.linalg.norm(A_star, "nuc") + 0.1 * np.sum(A_star**2)
                                      + 0.5 * np.sum(xi**2), rel=1e-12)


def test_the_subgradient_is_the_kernels_update_direction() -> None:
    operator, _, y, A_star = problems(3)[1]
    traj = mk.subgradient(operator, y, (N1, N2), alpha=0.2, beta_star=0.1, beta2=0.05, steps=1, A_star=A_star,
                          init_scale=1.0, record_A=True, device="cpu")
    F = theory.matrix.subgradient(operator, (N1, N2), traj.A[0, 0], y, 0.1, 0.05)
    np.testing.assert_allclose(traj.A[0, 1], traj.A[0, 0] - 0.2 * F, atol=1e-13)


def test_h_has_frobenius_norm_sqrt_min_whatever_the_rank() -> None:
    """Lemma D.6's proof: ||UV^T||_F^2 counts the singular vectors used; the thin SVD uses min(n1, n2)
    of them even for a rank-1 matrix; ||UV^T||_* is that count too (not sqrt(min))."""
    rng = np.random.RandomState(4)
    A = np.stack([rng.randn(N1, N2), np.outer(rng.randn(N1), rng.randn(N2)), np.zeros((N1, N2))])
    h = theory.matrix.nuclear_subgradient(A)
    np.testing.assert_allclose(np.sum(h**2, axis=(1, 2)), min(N1, N2), rtol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(h, "nuc", axis=(1, 2)), min(N1, N2), rtol=1e-12)
    np.testing.assert_allclose(np.sum(h[0] * A[0]), np.linalg.norm(A[0], "nuc"), rtol=1e-12)  # <h, A> = ||A||_*


def test_dominance_threshold() -> None:
    completion, sensing = problems(5)
    assert theory.matrix.dominance_threshold(completion[0], (N1, N2)) == pytest.approx(1 / math.sqrt(5), rel=1e-12)
    X = sensing[1]
    want = (np.linalg.eigvalsh(X.T @ X).max() + 0.2) / math.sqrt(5)
    assert theory.matrix.dominance_threshold(sensing[0], (N1, N2), beta2=0.2) == pytest.approx(want, rel=1e-12)


# ------------------------------------------------------------------ the bounds of D.4, D.13 and Cor D.1

def test_step_size_sums_against_python_sums() -> None:
    T = np.array([1, 7, 2_500_001, 40])  # unsorted, and past one chunk
    s1, s2 = theory.convergence.step_size_sums([0.1, 0.5, 0.2], T, [np.inf, 10.0, 0.0])
    assert s1.shape == (3, 4)
    for g, (a, b) in enumerate(((0.1, np.inf), (0.5, 10.0), (0.2, 0.0))):
        for k, t_max in enumerate(T):
            t = np.arange(1, t_max + 1, dtype=float)
            steps = np.full(t.size, a) if np.isinf(b) else a * (1 + b) / (b + t)
            assert s1[g, k] == pytest.approx(steps.sum(), rel=1e-12)
            assert s2[g, k] == pytest.approx(np.sum(steps**2), rel=1e-12)
    one, _ = theory.convergence.step_size_sums(0.1, [3])
    assert one.shape == (1,) and one[0] == pytest.approx(0.3)


def test_gap_bounds_formulas() -> None:
    T = np.array([1, 10, 1000])
    dist0, L, alpha, b = np.array([2.0, 3.0]), np.array([[1.0, 2.0, 2.0], [4.0, 4.0, 5.0]]), 0.2, [np.inf, 5.0]
    bound = theory.convergence.subgradient_gap_bound(dist0, L, alpha, T, b)
    s1, s2 = theory.convergence.step_size_sums(alpha, T, b)
    np.testing.assert_allclose(bound, (dist0[:, None] ** 2 + L**2 * s2) / (2 * s1), rtol=1e-14)
    np.testing.assert_allclose(bound[0], (4 + L[0] ** 2 * 0.04 * T) / (0.4 * T), rtol=1e-12)  # eq. 104
    np.testing.assert_allclose(theory.convergence.subgradient_gap_limit([2.0, 2.0], alpha, b), [0.4, 0.0])
    nuc = theory.convergence.norm_gap_bound(dist0, L, alpha, T, [0.5, 2.0], b, xi_norm=0.3, beta2=[0.1, 0.0], A_star_norm=2.0)
    np.testing.assert_allclose(nuc, (bound + 0.5 * (0.09 + np.array([[0.4], [0.0]]))) / np.array([[0.5], [2.0]]),
                               rtol=1e-14)
    # per-configuration dist0 and L with one scalar alpha (G = K = 3: no mix-up of the axes)
    per = theory.convergence.subgradient_gap_bound([1.0, 2.0, 3.0], [[1.0] * 3, [2.0] * 3, [3.0] * 3], 0.1, [1, 2, 3])
    np.testing.assert_allclose(per[2], (9 + 9 * 0.01 * np.arange(1, 4)) / (0.2 * np.arange(1, 4)), rtol=1e-14)
    # the constant-step bound tends to L^2 alpha / 2 (Corollary D.1)
    far = theory.convergence.subgradient_gap_bound(1.0, 3.0, 0.1, [10**7])
    assert far[0] == pytest.approx(theory.convergence.subgradient_gap_limit(3.0, 0.1), rel=1e-5)


def test_theorems_d4_and_d13_hold_on_a_run_every_step_recorded() -> None:
    """The inequalities, with f_best and L over every iterate, for a constant and a decaying step."""
    operator, X, y, A_star = problems(6)[0]
    traj = mk.subgradient(operator, y, (N1, N2), alpha=[0.5, 0.5], beta_star=0.3, alpha_decay=[np.inf, 5.0],
                          steps=500, A_star=A_star, init_scale=2.0, record_A=True, dense=500, device="cpu")
    f = theory.matrix.objective(operator, (N1, N2), traj.A, y, 0.3)
    F = np.linalg.norm(theory.matrix.subgradient(operator, (N1, N2), traj.A, y, 0.3), axis=(-2, -1))
    L = metrics.best_so_far(F, largest=True)
    dist0 = np.linalg.norm(traj.A[:, 0] - A_star, axis=(-2, -1))
    T = traj.steps + 1
    gap = metrics.best_so_far(f) - theory.matrix.objective(operator, (N1, N2), A_star, y, 0.3)
    assert (gap <= theory.convergence.subgradient_gap_bound(dist0, L, 0.5, T, [np.inf, 5.0])).all()
    lhs = metrics.best_so_far(traj.nuclear) - np.linalg.norm(A_star, "nuc")
    assert (lhs <= theory.convergence.norm_gap_bound(dist0, L, 0.5, T, 0.3, [np.inf, 5.0])).all()
    np.testing.assert_allclose(traj.nuclear, np.linalg.norm(traj.A, "nuc", axis=(-2, -1)), rtol=1e-12)


def test_best_so_far_against_a_loop() -> None:
    rng = np.random.RandomState(7)
    curve = rng.randn(3, 50)
    curve[1, :4] = np.nan
    curve[2, 20] = np.nan
    low, high = metrics.best_so_far(curve), metrics.best_so_far(curve, largest=True)
    for g in range(3):
        for t in range(50):
            seen = curve[g, :t + 1][~np.isnan(curve[g, :t + 1])]
            want = (seen.min(), seen.max()) if seen.size else (np.nan, np.nan)
            np.testing.assert_array_equal([low[g, t], high[g, t]], want)


# ------------------------------------------------------------------ bad inputs, before any compute

@pytest.mark.parametrize(("call", "message"), [
    (lambda p: mk.subgradient(p[0], p[2], (N1, N2), alpha=0.1, beta_star=0.1, steps=5, alpha_decay=-1.0),
     r"alpha_decay must be in \[0.0, inf\], got -1.0"),
    (lambda p: mk.subgradient(p[0], p[2], (N1, N2), alpha=0.1, beta_star=0.1, steps=5, alpha_decay=float("nan")),
     r"alpha_decay must be in \[0.0, inf\], got nan"),
    (lambda p: mk.subgradient(p[0], p[2], (N1, N2), alpha=[0.1, 0.2], beta_star=0.1, steps=5,
                              alpha_decay=[1.0, 2.0, 3.0]), "must be scalars or 1-D of one length G"),
    (lambda p: mk.subgradient(p[0], p[2], (N1, N2), alpha=2.5, beta_star=0.1, steps=5, alpha_decay=1.0),
     "alpha must be in .* for stability"),
    (lambda p: theory.convergence.step_size_sums(0.1, [0, 5]), r"T must be an integer in \[1, "),
    (lambda p: theory.convergence.step_size_sums(0.1, [5], alpha_decay=-2.0), r"alpha_decay must be in \[0.0, inf\]"),
    (lambda p: theory.convergence.step_size_sums(0.0, [5]), r"alpha must be in \(0.0, inf\)"),
    (lambda p: theory.convergence.subgradient_gap_bound(-1.0, 1.0, 0.1, [5]), r"dist0 must be in \[0.0, inf\)"),
    (lambda p: theory.convergence.subgradient_gap_bound(1.0, float("inf"), 0.1, [5]), r"L must be in \[0.0, inf\)"),
    (lambda p: theory.convergence.norm_gap_bound(1.0, 1.0, 0.1, [5], 0.0), r"beta_star must be in \(0.0, inf\)"),
    (lambda p: theory.convergence.subgradient_gap_bound(np.ones((2, 2)), 1.0, 0.1, [5]), r"dist0 must be a scalar or \(G,\)"),
    (lambda p: theory.matrix.objective(p[0], (N1, N2), np.zeros((N2, N1)), p[2], 0.1),
     r"A must have shape \(\.\.\., n1, n2\) = \(\.\.\., 6, 5\)"),
    (lambda p: theory.matrix.objective(p[0], (N1, N2), np.zeros((3, N1, N2)), p[2], [0.1, 0.2]),
     "beta_star must be a scalar or have the leading shape of A"),
    (lambda p: theory.matrix.gradient(p[0], (N1, N2), np.zeros((N1, N2)), p[2][:-1]), r"y must have shape \(N,\)"),
    (lambda p: theory.matrix.subgradient(p[0], (N1, N2), np.full((N1, N2), np.nan), p[2], 0.1), "A must be finite"),
    (lambda p: theory.matrix.nuclear_subgradient(np.ones(3)), r"A must have shape \(\.\.\., n1, n2\)"),
    (lambda p: theory.matrix.dominance_threshold(p[0], (N1, N2), beta2=-1.0), r"beta2 must be in \[0.0, inf\)"),
    (lambda p: metrics.best_so_far(np.zeros((2, 0))), r"curve must have shape \(G, T\)"),
])
def test_bad_inputs_are_refused(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(problems()[0])
