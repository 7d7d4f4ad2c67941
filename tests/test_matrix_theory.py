"""Tests of the matrix-factorization theory (grokkit.theory, App. D) and the nuclear-norm baselines."""
import numpy as np
import pytest
import torch

from grokkit import baselines, theory
from grokkit.data.matrix import unvec, vec


def _low_rank(rng, n1, n2, r):
    return rng.standard_normal((n1, r)) @ rng.standard_normal((r, n2))


def _mask(rng, n1, n2, N):
    mask = np.zeros(n1 * n2, bool)
    mask[rng.choice(n1 * n2, N, replace=False)] = True
    return mask.reshape(n1, n2)


def _svt(B, gamma):
    U, s, Vt = np.linalg.svd(B, full_matrices=False)
    return (U * np.maximum(s - gamma, 0.0)) @ Vt


def _nuc(A):
    return np.linalg.svd(A, compute_uv=False).sum()


# --- the measurement operator -------------------------------------------------------------------


def test_vec_is_column_major_and_measurement_matrix_matches_the_operator():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((4, 3))
    a = vec(A)
    assert a[2 * 4 + 1] == A[1, 2]  # vec(A)_{j n1 + i} = A_ij
    np.testing.assert_array_equal(unvec(a, 4, 3), A)
    mask = _mask(rng, 4, 3, 7)
    X = theory.matrix.measurement_matrix(mask, (4, 3))
    assert X.shape == (7, 12)
    np.testing.assert_array_equal(X @ a, A[mask])  # completion: A[mask] order
    np.testing.assert_array_equal(X.T @ X, np.diag(vec(mask).astype(float)))
    S = rng.standard_normal((5, 12))
    np.testing.assert_array_equal(theory.matrix.measurement_matrix(S, (4, 3)), S)


# --- rho ------------------------------------------------------------------------------------------


def test_matrix_rho_against_the_gram_eigenvalues():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((8, 12)) / 3
    lam = np.linalg.eigvalsh(X.T @ X)
    for alpha, beta2 in [(0.1, 0.0), (0.3, 0.2), (0.05, 1.0)]:
        want = np.abs(1 - alpha * (lam + beta2)).max()
        assert theory.matrix.rho(X, (3, 4), alpha, beta2) == pytest.approx(want, rel=1e-12)
        # row space: the nonzero eigenvalues of XᵀX are those of XXᵀ (N = 8 < 12)
        lam_row = np.linalg.eigvalsh(X @ X.T)
        want_row = np.abs(1 - alpha * (lam_row + beta2)).max()
        assert theory.matrix.rho_range(X, (3, 4), alpha, beta2) == pytest.approx(want_row, rel=1e-12)
    # the caveat: beta2 = 0 and N < n1 n2 give rho_2 = 1 exactly; the row-space rho does not
    mask = _mask(rng, 10, 10, 80)
    assert theory.matrix.rho(mask, (10, 10), 0.5) == 1.0
    assert theory.matrix.rho_range(mask, (10, 10), 0.5) == pytest.approx(0.5, abs=1e-12)
    assert theory.matrix.rho(mask, (10, 10), 0.5, beta2=0.2) == pytest.approx(0.9, abs=1e-12)
    assert theory.matrix.rho(X, (3, 4), 0.1, p=1) == pytest.approx(
        np.abs(np.eye(12) - 0.1 * X.T @ X).sum(axis=0).max(), rel=1e-12)


# --- Theorem D.8 and the generalization delay -----------------------------------------------------


def _subgradient(X, y, shape, A, alpha, beta2, beta_star, steps):
    """Plain subgradient on f, thin-SVD h = UVᵀ (Appendix D); returns the iterates' vec, (steps + 1, n)."""
    out = [vec(A)]
    for _ in range(steps):
        U, _, Vt = np.linalg.svd(A, full_matrices=False)
        G = unvec(X.T @ (X @ vec(A) - y), *shape) + beta2 * A
        A = A - alpha * (G + beta_star * U @ Vt)
        out.append(vec(A))
    return np.array(out)


def test_matrix_memorization_time_against_brute_force_and_a_run():
    rng = np.random.default_rng(2)
    shape, N = (4, 5), 14
    X = rng.standard_normal((N, 20)) / 2
    y = X @ vec(_low_rank(rng, 4, 5, 1))
    alpha, beta2, beta_star = 0.05, 0.3, 1e-3
    A_hat = theory.matrix.least_squares(X, shape, y, beta2)
    np.testing.assert_allclose(vec(A_hat), np.linalg.solve(X.T @ X + beta2 * np.eye(20), X.T @ y), atol=1e-12)
    rho2 = theory.matrix.rho(X, shape, alpha, beta2)
    assert 0 < rho2 < 1
    A0 = 3.0 * np.eye(4, 5)
    dist0 = np.linalg.norm(vec(A0 - A_hat))
    t1 = theory.matrix.memorization_time(dist0, 4, 5, alpha, beta_star, rho2)
    # brute force: the first t with rho^t d0 + c(1-rho^t)/(1-rho) <= 2c(1-rho^t)/(1-rho), c = alpha beta* sqrt(n)
    c = alpha * beta_star * np.sqrt(20)
    t = np.arange(1, 5000)
    ok = rho2**t * dist0 + c * (1 - rho2**t) / (1 - rho2) <= 2 * c * (1 - rho2**t) / (1 - rho2)
    assert t1 == t[ok][0] and t1 > 50
    # the run: Lemma D.7 at every t, the D.8 radius from t1 on
    a = _subgradient(X, y, shape, A0, alpha, beta2, beta_star, int(t1) + 200)
    dist = np.linalg.norm(a - vec(A_hat), axis=1)
    steps = np.arange(len(dist))
    assert np.all(dist <= rho2**steps * dist0 + c * (1 - rho2**steps) / (1 - rho2) + 1e-12)
    radius = theory.matrix.memorization_radius(4, 5, alpha, beta_star, rho2, t=steps)
    assert np.all(dist[int(t1):] <= radius[int(t1):])
    assert dist[int(t1) // 2] > radius[int(t1) // 2]  # not yet memorized well before t1
    assert theory.matrix.memorization_radius(4, 5, alpha, beta_star, rho2) == pytest.approx(2 * c / (1 - rho2))
    # beta2 = 0, N < n: rho_2 = 1, t1 infinite
    assert theory.matrix.memorization_time(dist0, 4, 5, alpha, beta_star, theory.matrix.rho(X, shape, alpha)) == np.inf


def test_matrix_generalization_delay_against_numpy_svd():
    rng = np.random.default_rng(3)
    mask = _mask(rng, 6, 6, 20)
    A_star = _low_rank(rng, 6, 6, 2)
    A_hat = theory.matrix.least_squares(mask, (6, 6), A_star[mask])
    np.testing.assert_allclose(A_hat, np.where(mask, A_star, 0.0), atol=1e-12)  # LS completion: observed entries
    got = theory.matrix.generalization_delay(A_hat, [0.1, 0.5], 1e-3)
    np.testing.assert_allclose(got, np.linalg.svd(A_hat, compute_uv=False)[0] / (np.array([0.1, 0.5]) * 1e-3),
                               rtol=1e-12)
    assert theory.matrix.generalization_delay(A_hat, 0.1, 0.0) == np.inf
    assert theory.matrix.generalization_delay_code(A_hat, A_star, 0.1, 1e-3) == pytest.approx(
        np.linalg.svd(A_hat - A_star, compute_uv=False)[0] / 1e-4, rel=1e-12)


# --- Theorem D.9 ----------------------------------------------------------------------------------


def test_d9_corrected_matches_exact_and_monte_carlo_printed_does_not():
    rng = np.random.default_rng(4)
    shape, N, beta2, sd = (5, 8), 15, 0.3, 0.2
    X = rng.standard_normal((N, 40))
    A_star = rng.standard_normal(shape) / 2
    a = vec(A_star)
    R = np.eye(N) - X @ np.linalg.solve(X.T @ X + beta2 * np.eye(40), X.T)  # y - X â = R y
    exact = np.sum((R @ X @ a) ** 2) + sd**2 * np.sum(R**2)
    xi = sd * rng.standard_normal((20000, N))
    mc = np.sum(((X @ a + xi) @ R.T) ** 2, axis=1)
    corrected = theory.matrix.least_squares_residual_corrected(X, shape, A_star, beta2, sd)
    printed = theory.matrix.least_squares_residual_printed(X, shape, A_star, beta2, sd)
    assert corrected == pytest.approx(exact, rel=1e-10)
    assert abs(mc.mean() - exact) < 4 * mc.std() / np.sqrt(len(mc))
    assert abs(printed - mc.mean()) > 20 * mc.std() / np.sqrt(len(mc))  # eigenvalues ~ 40 ≠ 1: far off
    print(f"D.9: Monte-Carlo {mc.mean():.4f}, exact {exact:.4f}, corrected {corrected:.4f}, printed {printed:.4f}")
    # completion: every nonzero eigenvalue of XᵀX is 1, the two forms agree; beta2 = 0: noise only
    mask = _mask(rng, 5, 8, 15)
    assert theory.matrix.least_squares_residual_printed(mask, shape, A_star, beta2, sd) == pytest.approx(
        theory.matrix.least_squares_residual_corrected(mask, shape, A_star, beta2, sd), rel=1e-12)
    for f in (theory.matrix.least_squares_residual_printed, theory.matrix.least_squares_residual_corrected):
        assert f(X, shape, A_star, 0.0, sd) == pytest.approx(sd**2 * (N - 15), abs=1e-12)


# --- Theorem D.12 -------------------------------------------------------------------------------


def _nuclear_run(A, step, steps):
    out = [A]
    for _ in range(steps):
        U, _, Vt = np.linalg.svd(A, full_matrices=False)
        A = A - step * U @ Vt
        out.append(A)
    return out


def test_d12_recursion_against_the_iteration():
    rng = np.random.default_rng(5)
    A = rng.standard_normal((8, 6))
    alpha, beta_star, steps = 3.7, 0.1, 60  # step alpha beta* = 0.37
    run = _nuclear_run(A, alpha * beta_star, steps)
    measured = np.array([np.linalg.svd(M, compute_uv=False) for M in run])
    sigma = measured[0]
    predicted = theory.matrix.nuclear_singular_values(sigma, alpha, steps, beta_star)
    err = np.abs(np.sort(predicted, axis=1)[:, ::-1] - measured).max()
    assert err < 1e-12
    print(f"D.12: max |recursion - SVD of the iterate| = {err:.1e}")
    # closed form: sigma - k step until t_i, then alternating
    t_i = theory.matrix.nuclear_entry_step(sigma, alpha, beta_star)
    k = np.arange(steps + 1)[:, None]
    rest = sigma - t_i * 0.37
    closed = np.where(k <= t_i, sigma - k * 0.37, np.where((k - t_i) % 2 == 0, rest, 0.37 - rest))
    np.testing.assert_allclose(predicted, closed, atol=1e-12)
    # claim (2): sigma_max < step iff k >= max t_i updates
    T = int(t_i.max())
    assert np.all(measured[T:, 0] < 0.37) and np.all(measured[:T, 0] >= 0.37)
    # claim (1) fails: 2-periodic, not stationary
    for t in range(T, steps - 1):
        assert np.abs(run[t + 2] - run[t]).max() < 1e-12
        assert np.abs(run[t + 1] - run[t]).max() > 0.1


def test_d12_rank_claim_counts_the_vanishing_values():
    alpha = 0.25
    sigma = np.array([1.0, 0.6, 0.3])  # 1.0 / 0.25 = 4 is an integer, the others are not
    run = _nuclear_run(np.diag(sigma), alpha, 12)
    ranks = [np.linalg.matrix_rank(M, tol=1e-9) for M in run]
    late = ranks[int(theory.matrix.nuclear_entry_step(sigma, alpha).max()) + 1:]
    printed = int(np.sum(np.isclose(sigma / alpha, np.round(sigma / alpha))))  # claim (3) as printed: 1
    assert printed == 1 and min(late) == 2 and max(late) == 3  # survivors = #{sigma/alpha not integer} = 2
    np.testing.assert_allclose(theory.matrix.nuclear_singular_values(sigma, alpha, 12)[4:8, 0], [0, 0.25, 0, 0.25],
                               atol=1e-15)


# --- Lemma D.14 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("L", [1, 2, 3, 4])
def test_deep_gradients_against_autograd(L):
    gen = torch.Generator().manual_seed(L)
    dims = torch.randint(2, 6, (L + 1,), generator=gen).tolist()
    factors = [torch.randn(dims[k], dims[k + 1], generator=gen, dtype=torch.float64, requires_grad=True)
               for k in range(L)]
    X = torch.randn(7, dims[0] * dims[-1], generator=gen, dtype=torch.float64)
    y = torch.randn(7, generator=gen, dtype=torch.float64)

    def g(A):  # a non-quadratic g, with the column-major vec
        return 0.5 * ((X @ A.T.reshape(-1) - y) ** 2).sum() + torch.sin(A).sum()

    A = factors[0]
    for F in factors[1:]:
        A = A @ F
    g(A).backward()
    A_leaf = A.detach().clone().requires_grad_(True)
    g(A_leaf).backward()
    got = theory.matrix.deep_gradients([F.detach() for F in factors], A_leaf.grad)
    for F, G in zip(factors, got):
        assert G.shape == F.shape
        torch.testing.assert_close(G, F.grad, rtol=1e-12, atol=1e-12)
    # numpy in, numpy out, same numbers; a leading configuration axis broadcasts
    got_np = theory.matrix.deep_gradients([F.detach().numpy() for F in factors], A_leaf.grad.numpy())
    for F, G in zip(factors, got_np):
        np.testing.assert_allclose(G, F.grad.numpy(), rtol=1e-12, atol=1e-12)
    batched = theory.matrix.deep_gradients([torch.stack([F.detach()] * 2) for F in factors], torch.stack([A_leaf.grad] * 2))
    for F, G in zip(factors, batched):
        torch.testing.assert_close(G[1], F.grad, rtol=1e-12, atol=1e-12)


# --- convex baselines (P5) ----------------------------------------------------------------------


# (seed 0 at r = 1, N = 70 is a sampling failure: a smaller-norm completion exists, relative error 0.16)
@pytest.mark.parametrize("r, N, seed", [(1, 70, 1), (2, 90, 0)])
def test_nuclear_norm_min_recovers_a_low_rank_completion(r, N, seed):
    rng = np.random.default_rng(seed)
    A_star, mask = _low_rank(rng, 10, 10, r), _mask(rng, 10, 10, N)
    sol = baselines.nuclear_norm_min(mask, A_star[mask], (10, 10))
    assert sol.solver == "SCS" and sol.status == "optimal" and sol.tol == 1e-9
    assert np.linalg.norm(sol.A - A_star) / np.linalg.norm(A_star) < 1e-5
    assert np.abs(sol.A[mask] - A_star[mask]).max() < 1e-6
    assert sol.value == pytest.approx(_nuc(sol.A), rel=1e-6) and sol.value <= _nuc(A_star) + 1e-6


def test_nuclear_norm_min_sensing_and_its_failure_below_the_threshold():
    rng = np.random.default_rng(1)
    A_star = _low_rank(rng, 6, 6, 1)
    X = rng.standard_normal((24, 36)) / 6
    sol = baselines.nuclear_norm_min(X, X @ vec(A_star), (6, 6))
    assert np.linalg.norm(sol.A - A_star) / np.linalg.norm(A_star) < 1e-5
    # too few measurements: feasible, smaller nuclear norm, not A*
    few = baselines.nuclear_norm_min(X[:4], X[:4] @ vec(A_star), (6, 6))
    assert np.abs(X[:4] @ vec(few.A) - X[:4] @ vec(A_star)).max() < 1e-6
    assert np.linalg.norm(few.A - A_star) / np.linalg.norm(A_star) > 0.1


def _prox_gradient(X, y, shape, beta_star, beta2, steps):
    alpha = 1.0 / (np.linalg.eigvalsh(X.T @ X).max() + beta2)
    A = np.zeros(shape)
    for _ in range(steps):
        G = unvec(X.T @ (X @ vec(A) - y), *shape) + beta2 * A
        A = _svt(A - alpha * G, alpha * beta_star)
    return A


@pytest.mark.parametrize("problem", ["completion", "sensing"])
def test_nuclear_norm_regularized_is_the_svt_fixed_point(problem):
    rng = np.random.default_rng(6)
    A_star = _low_rank(rng, 8, 8, 2)
    op = _mask(rng, 8, 8, 45) if problem == "completion" else rng.standard_normal((40, 64)) / 8
    X = theory.matrix.measurement_matrix(op, (8, 8))
    y = X @ vec(A_star) + 0.05 * rng.standard_normal(X.shape[0])
    ref = _prox_gradient(X, y, (8, 8), beta_star=0.3, beta2=0.1, steps=3000)
    sol = baselines.nuclear_norm_regularized(op, y, (8, 8), beta_star=0.3, beta2=0.1)
    assert np.abs(sol.A - ref).max() < 1e-5
    f = lambda A: 0.5 * np.sum((X @ vec(A) - y) ** 2) + 0.05 * np.sum(A**2) + 0.3 * _nuc(A)
    assert sol.value == pytest.approx(f(ref), rel=1e-6)


def test_nuclear_norm_min_eps_form_is_the_penalised_form_at_its_residual():
    rng = np.random.default_rng(7)
    A_star = _low_rank(rng, 8, 8, 2)
    mask = _mask(rng, 8, 8, 40)
    y = A_star[mask] + 0.05 * rng.standard_normal(40)
    X = theory.matrix.measurement_matrix(mask, (8, 8))
    ref = _prox_gradient(X, y, (8, 8), beta_star=0.5, beta2=0.0, steps=20000)
    eps = np.linalg.norm(ref[mask] - y)
    sol = baselines.nuclear_norm_min(mask, y, (8, 8), eps=eps)
    assert np.linalg.norm(sol.A[mask] - y) <= eps * (1 + 1e-6)
    assert sol.value == pytest.approx(_nuc(ref), rel=1e-6)
    assert np.abs(sol.A - ref).max() < 1e-4


# --- bad inputs -----------------------------------------------------------------------------------

_MASK = np.ones((3, 4), bool)
_X = np.ones((5, 12))
BAD = [
    (lambda: theory.matrix.memorization_time(1.0, 3, 4, 0.1, -1e-3, 0.5), r"beta_star must be in \[0\.0, inf\), got -0\.001"),
    (lambda: theory.matrix.generalization_delay(np.eye(3), 0.1, -1.0), r"beta_star must be in \[0\.0, inf\), got -1\.0"),
    (lambda: theory.matrix.rho(_X, (3, 4), 0.0), r"alpha must be in \(0\.0, inf\), got 0\.0"),
    (lambda: theory.matrix.rho_range(_MASK, (3, 4), -0.1), r"alpha must be in \(0\.0, inf\), got -0\.1"),
    (lambda: theory.matrix.nuclear_singular_values([1.0], 0.0, 3), r"alpha must be in \(0\.0, inf\), got 0\.0"),
    (lambda: theory.matrix.rho(np.ones((4, 3), bool), (3, 4), 0.1), r"mask must have shape \(n1, n2\) = \(3, 4\), got \(4, 3\)"),
    (lambda: theory.matrix.rho(np.ones((5, 11)), (3, 4), 0.1), r"X must be a matrix with n1\*n2 = 12 columns, got shape \(5, 11\)"),
    (lambda: theory.matrix.measurement_matrix(_X, (3, 0)), r"n2 must be an integer in \[1, inf\), got 0"),
    (lambda: theory.matrix.least_squares_residual_printed(_X, (3, 4), np.ones((4, 3)), 0.1), r"A_star must have shape"),
    (lambda: theory.matrix.least_squares_residual_corrected(_X, (3, 4), np.ones((3, 4)), 0.1, -1.0), r"noise_std must be in"),
    (lambda: theory.matrix.deep_gradients([np.ones((2, 3)), np.ones((4, 2))], np.ones((2, 2))), r"factors\[1\] must have 3 rows"),
    (lambda: theory.matrix.deep_gradients([np.ones((2, 3))], np.ones((3, 2))), r"grad must have shape \(\.\.\., d_0, d_L\) = \(\.\.\., 2, 3\)"),
    (lambda: theory.matrix.deep_gradients([], np.ones((3, 2))), r"factors must be a non-empty sequence"),
    (lambda: baselines.nuclear_norm_regularized(_MASK, np.ones(12), (3, 4), beta_star=-1.0), r"beta_star must be in \[0\.0, inf\), got -1\.0"),
    (lambda: baselines.nuclear_norm_min(np.ones((3, 3), bool), np.ones(9), (3, 4)), r"mask must have shape \(n1, n2\) = \(3, 4\), got \(3, 3\)"),
    (lambda: baselines.nuclear_norm_min(np.ones((5, 13)), np.ones(5), (3, 4)), r"X must be a matrix with n1\*n2 = 12 columns, got shape \(5, 13\)"),
    (lambda: baselines.nuclear_norm_min(_X, np.ones(4), (3, 4)), r"y must have shape \(N,\) = \(5,\), got \(4,\)"),
    (lambda: baselines.nuclear_norm_min(_X, np.ones(5), (3, 4), eps=-1.0), r"eps must be in \[0\.0, inf\), got -1\.0"),
    (lambda: baselines.nuclear_norm_min(_X, np.full(5, np.nan), (3, 4)), r"y must be finite, got nan"),
]


@pytest.mark.parametrize("call, message", BAD)
def test_bad_inputs_are_refused(call, message, monkeypatch):
    import cvxpy as cp

    def no_solve(*args, **kwargs):
        raise AssertionError("solved before the check")

    monkeypatch.setattr(cp.Problem, "solve", no_solve)
    with pytest.raises(ValueError, match=message):
        call()
