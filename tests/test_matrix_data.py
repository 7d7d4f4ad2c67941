"""Tests of grokkit.data's matrix-factorization problems (paper §2, Appendix D)."""
import math
import re

import numpy as np
import pytest

import grokkit.data as data


def _fields(p: data.matrix.Problem) -> dict:
    return {k: getattr(p, k) for k in ("A_star", "y_star", "y", "xi", "mask", "X", "X1", "X2")}


def _assert_same(p, q):
    for name, a in _fields(p).items():
        b = getattr(q, name)
        assert (a is None) == (b is None), name
        if a is not None:
            np.testing.assert_array_equal(a, b, err_msg=name)


# --- seeds -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["completion", "sensing"])
@pytest.mark.parametrize("generator", ["authors", "orthogonal"])
def test_same_seed_same_problem(kind, generator):
    kw = dict(kind=kind, generator=generator, tau=0.3, snr=100.0)
    _assert_same(data.matrix.problem(6, 5, 2, 12, seed=7, **kw),
                 data.matrix.problem(6, 5, 2, 12, seed=np.int64(7), **kw))
    other = data.matrix.problem(6, 5, 2, 12, seed=8, **kw)
    assert not np.array_equal(other.A_star, data.matrix.problem(6, 5, 2, 12, seed=7, **kw).A_star)


PINNED_ROW = [-2.435592780970966, 0.7050193540855798, 1.9647486534884198]  # seed 0, first run


def test_seed_reproduces_pinned_values():
    """Pinned draws of seed 0 (10 x 10, r = 2, N = 80: the Figure 4 setting): a change of RNG order fails here."""
    p = data.matrix.problem(10, 10, 2, 80, seed=0)
    np.testing.assert_allclose(np.linalg.svd(p.A_star, compute_uv=False)[:2], [8.16990525, 5.76651092], rtol=1e-8)
    np.testing.assert_allclose(p.A_star[0, :3], PINNED_ROW, rtol=1e-8)


def test_authors_generator_construction():
    """Spec §3.1: U0 then V0 ~ N(0, 1), W = U0 V0ᵀ/√r, A* = W √(n1 n2)/‖W‖_F (so ‖A*‖_F = 10 for 10 x 10)."""
    A = data.matrix.low_rank_matrix(10, 10, 2, generator="authors", seed=3)
    rs = np.random.RandomState(3)
    U0, V0 = rs.randn(10, 2), rs.randn(10, 2)
    W = U0 @ V0.T / math.sqrt(2)
    np.testing.assert_allclose(A, W * 10 / np.linalg.norm(W), rtol=1e-13)
    assert np.linalg.norm(A) == pytest.approx(10.0, rel=1e-13)
    assert np.linalg.matrix_rank(A) == 2
    assert A.dtype == np.float64


def test_authors_mask_rule_matches_their_rng_order():
    """Spec §3.2: τ = 0 takes np.random.seed(seed); permutation(n)[:N] over row-major positions."""
    A = data.matrix.low_rank_matrix(10, 10, 2, seed=0)
    state = np.random.get_state()
    try:
        np.random.seed(0)
        sel = np.random.permutation(100)[:80]
    finally:
        np.random.set_state(state)
    expected = np.zeros(100, dtype=bool)
    expected[sel] = True
    np.testing.assert_array_equal(data.matrix.completion_mask(A, 80, 0.0, seed=0), expected.reshape(10, 10))


# --- ground truth ------------------------------------------------------------------------------


@pytest.mark.parametrize("n1, n2, r", [(8, 5, 3), (5, 8, 1), (6, 6, 6)])
def test_orthogonal_model(n1, n2, r):
    """Definition D.1: orthonormal factors, rank r, singular values 1 by default."""
    A = data.matrix.low_rank_matrix(n1, n2, r, generator="orthogonal", seed=1)
    s = np.linalg.svd(A, compute_uv=False)
    np.testing.assert_allclose(s[:r], 1.0, atol=1e-12)
    assert np.all(s[r:] < 1e-12)
    assert np.linalg.matrix_rank(A) == r
    sigma = np.arange(1.0, r + 1.0)
    B = data.matrix.low_rank_matrix(n1, n2, r, generator="orthogonal", singular_values=sigma, seed=1)
    np.testing.assert_allclose(np.linalg.svd(B, compute_uv=False)[:r], sigma[::-1], atol=1e-12)


def test_orthogonal_factors_are_haar_like():
    """Q of a Gaussian with fixed signs: E[U Uᵀ] = (r/n1) I over many seeds (not a fixed subspace)."""
    P = np.mean([np.linalg.svd(data.matrix.low_rank_matrix(4, 4, 1, generator="orthogonal", seed=s))[0][:, :1]
                 @ np.linalg.svd(data.matrix.low_rank_matrix(4, 4, 1, generator="orthogonal", seed=s))[0][:, :1].T
                 for s in range(2000)], axis=0)
    # each entry of the mean of 2000 projections has sd ≤ 0.5/√2000 ≈ 0.011: 0.06 is > 5 sd
    np.testing.assert_allclose(P, np.eye(4) / 4, atol=0.06)


# --- local coherence (Definitions D.3, D.4) ---------------------------------------------------


def test_local_coherence_direct_formula():
    A = data.matrix.low_rank_matrix(9, 7, 3, seed=2)
    mu, nu = data.matrix.local_coherence(A)
    PU, PV = A @ np.linalg.pinv(A), np.linalg.pinv(A) @ A  # projections on the column / row spaces
    np.testing.assert_allclose(mu, 9 / 3 * np.diag(PU), atol=1e-12)
    np.testing.assert_allclose(nu, 7 / 3 * np.diag(PV), atol=1e-12)
    # Def D.3: the leverage scores ‖Uᵀeᵢ‖² sum to r, so Σμᵢ = n1, Σνⱼ = n2, 0 ≤ μᵢ ≤ n1/r
    assert np.sum(mu * 3 / 9) == pytest.approx(3.0) and mu.sum() == pytest.approx(9.0)
    assert nu.sum() == pytest.approx(7.0)
    assert np.all(mu >= 0) and np.all(mu <= 9 / 3 + 1e-12)


def test_local_coherence_change_of_basis():
    """Definition D.4 (eq. 98): μᵢ w.r.t. the basis P1 equals μᵢ(P1ᵀ A P2)."""
    A = data.matrix.low_rank_matrix(6, 5, 2, seed=4)
    rs = np.random.RandomState(0)
    P1, P2 = np.linalg.qr(rs.randn(6, 6))[0], np.linalg.qr(rs.randn(5, 5))[0]
    mu, nu = data.matrix.local_coherence(A, U_basis=P1, V_basis=P2)
    mu_t, nu_t = data.matrix.local_coherence(P1.T @ A @ P2)
    np.testing.assert_allclose(mu, mu_t, atol=1e-12)
    np.testing.assert_allclose(nu, nu_t, atol=1e-12)


# --- completion ----------------------------------------------------------------------------------


def _completion_X(mask):
    """The explicit X = X⁽²⁾ • X⁽¹⁾ (one 1 per row, at column j n1 + i), rows in row-major mask order."""
    n1, n2 = mask.shape
    rows, cols = np.nonzero(mask)
    X = np.zeros((rows.size, n1 * n2))
    X[np.arange(rows.size), cols * n1 + rows] = 1.0
    return X


@pytest.mark.parametrize("tau", [0.0, 0.4, 1.0])
def test_completion_mask_and_measurements(tau):
    p = data.matrix.problem(7, 5, 2, 17, tau=tau, seed=3)
    assert p.mask.shape == (7, 5) and p.mask.dtype == bool
    assert p.mask.sum() == 17 == p.N and p.X is None
    np.testing.assert_array_equal(p.y_star, p.A_star[p.mask])
    np.testing.assert_allclose(_completion_X(p.mask) @ data.matrix.vec(p.A_star), p.y_star, rtol=0, atol=0)
    np.testing.assert_array_equal(p.y, p.y_star)  # noiseless by default
    assert p.lambda_max == pytest.approx(np.linalg.eigvalsh(_completion_X(p.mask).T @ _completion_X(p.mask)).max())


def test_completion_full_mask():
    p = data.matrix.problem(4, 3, 1, 12, seed=0)
    assert p.mask.all()


def test_completion_least_squares():
    """Â = A* on the mask, 0 elsewhere (β2 = 0, noiseless), equal to (XᵀX + β2 I)† Xᵀ y for any β2 (Thm D.10)."""
    p = data.matrix.problem(6, 5, 2, 14, seed=1)
    np.testing.assert_array_equal(p.A_hat, np.where(p.mask, p.A_star, 0.0))
    X = _completion_X(p.mask)
    for beta2 in (0.0, 0.3):
        expected = data.matrix.unvec(np.linalg.pinv(X.T @ X + beta2 * np.eye(30)) @ X.T @ p.y, 6, 5)
        np.testing.assert_allclose(p.least_squares(beta2), expected, atol=1e-13)
    # Theorem D.10: ‖Â − A*‖²_F is the energy of the unobserved entries
    assert np.sum((p.A_hat - p.A_star) ** 2) == pytest.approx(np.sum(p.A_star[~p.mask] ** 2))


def test_tau_zero_is_uniform():
    """Over 2000 seeds, each of the 25 entries is kept with probability N/n = 0.2: count ~ Bin(2000, 0.2),
    mean 400, sd 17.9. A tolerance of 5 sd (90) has a false-alarm probability < 25 · 6e-7 (union bound)."""
    A = data.matrix.low_rank_matrix(5, 5, 1, seed=0)
    counts = sum(data.matrix.completion_mask(A, 5, 0.0, seed=s).astype(int) for s in range(2000))
    assert counts.sum() == 5 * 2000
    assert np.abs(counts - 400).max() < 90


def test_tau_one_takes_the_most_coherent_entries():
    """Paper L166–168 / D.4: the ⌊τN⌋ entries with the largest μᵢ + νⱼ are taken, for every seed."""
    A = data.matrix.low_rank_matrix(8, 6, 2, generator="orthogonal", seed=5)
    mu, nu = data.matrix.local_coherence(A)
    P = mu[:, None] + nu[None, :]
    top = np.zeros(48, dtype=bool)
    top[np.argsort(-P, axis=None, kind="stable")[:10]] = True
    for seed in range(5):
        np.testing.assert_array_equal(data.matrix.completion_mask(A, 10, 1.0, seed=seed), top.reshape(8, 6))
    # τ = 1 selects more coherent entries than τ = 0 on average
    m0 = np.mean([P[data.matrix.completion_mask(A, 10, 0.0, seed=s)].mean() for s in range(50)])
    assert P[top.reshape(8, 6)].mean() > m0


def test_tau_mixture():
    """τ = 0.5, N = 10: the 5 most coherent entries always, the other 5 uniform among the 43 others:
    each kept with probability 5/43 over 3000 seeds (count mean 348.8, sd 17.6; tolerance 5 sd = 88)."""
    A = data.matrix.low_rank_matrix(8, 6, 2, generator="orthogonal", seed=5)
    mu, nu = data.matrix.local_coherence(A)
    order = np.argsort(-(mu[:, None] + nu[None, :]), axis=None, kind="stable")
    counts = sum(data.matrix.completion_mask(A, 10, 0.5, seed=s).reshape(-1).astype(int) for s in range(3000))
    assert np.all(counts[order[:5]] == 3000)
    rest = counts[order[5:]]
    assert np.abs(rest - 3000 * 5 / 43).max() < 88


# --- sensing -------------------------------------------------------------------------------------


def test_sensing_measurements_use_column_major_vec():
    """y_s = X⁽¹⁾ₛᵀ A* X⁽²⁾ₛ = (X⁽²⁾ₛ ⊗ X⁽¹⁾ₛ)ᵀ vec(A*) with the column-major vec (Lemma D.14)."""
    p = data.matrix.problem(4, 3, 2, 9, kind="sensing", seed=2)
    assert p.mask is None and p.X.shape == (9, 12) and p.X1.shape == (9, 4) and p.X2.shape == (9, 3)
    np.testing.assert_allclose(p.y_star, np.einsum("si,ij,sj->s", p.X1, p.A_star, p.X2), rtol=1e-12)
    np.testing.assert_allclose(p.X, np.stack([np.kron(p.X2[s], p.X1[s]) for s in range(9)]), rtol=0)
    np.testing.assert_allclose(p.X @ p.A_star.reshape(-1, order="F"), p.y_star, rtol=1e-12)
    assert data.matrix.vec(p.A_star)[1] == p.A_star[1, 0]  # column-major
    np.testing.assert_array_equal(data.matrix.unvec(data.matrix.vec(p.A_star), 4, 3), p.A_star)


@pytest.mark.parametrize("variance, v1, v2", [("1/n_k", 1 / 40, 1 / 30), ("1/n_k^2", 1 / 1600, 1 / 900),
                                              ("1/N", 1 / 4000, 1 / 4000), (0.5, 0.5, 0.5)])
def test_sensing_variance(variance, v1, v2):
    """Rows i.i.d. N(0, v): with 4000 x 40 draws the sample variance is within 3 % (sd 0.35 %)."""
    X1, X2 = data.matrix.sensing_matrices(data.matrix.low_rank_matrix(40, 30, 2, seed=0), 4000, variance=variance, seed=0)
    assert abs(X1.var() / v1 - 1) < 0.03 and abs(X2.var() / v2 - 1) < 0.03
    assert abs(X1.mean()) < 0.03 * math.sqrt(v1) * 5


def test_sensing_tau_rows_are_singular_vectors():
    """D.4: the first min(⌊τN⌋, n_k) rows are the first columns of U* (resp. V*), the rest Gaussian."""
    A = data.matrix.low_rank_matrix(6, 4, 2, seed=1)
    U, _, Vt = np.linalg.svd(A)
    X1, X2 = data.matrix.sensing_matrices(A, 10, tau=0.5, seed=1)
    np.testing.assert_array_equal(X1[:5], U[:, :5].T)
    np.testing.assert_array_equal(X2[:4], Vt[:4])  # min(5, n2 = 4)
    assert not np.allclose(np.linalg.norm(X1[5:], axis=1), 1.0)


def test_sensing_least_squares_is_minimum_norm():
    """N < n: Â solves X vec Â = y exactly and is numpy's minimum-norm lstsq solution."""
    p = data.matrix.problem(5, 4, 2, 12, kind="sensing", snr=50.0, seed=6)
    a_hat = data.matrix.vec(p.A_hat)
    np.testing.assert_allclose(p.X @ a_hat, p.y, atol=1e-10)
    np.testing.assert_allclose(a_hat, np.linalg.lstsq(p.X, p.y, rcond=None)[0], atol=1e-10)
    # every other solution a_hat + null-space vector is longer
    null = np.linalg.svd(p.X)[2][12:]
    assert np.linalg.norm(a_hat + null[0]) > np.linalg.norm(a_hat)
    beta2 = 0.2
    expected = np.linalg.solve(p.X.T @ p.X + beta2 * np.eye(20), p.X.T @ p.y)
    np.testing.assert_allclose(data.matrix.vec(p.least_squares(beta2)), expected, atol=1e-10)
    assert p.lambda_max == pytest.approx(np.linalg.eigvalsh(p.X.T @ p.X).max(), rel=1e-12)
    np.testing.assert_allclose(p.apply(p.A_star), p.y_star, rtol=1e-12)


# --- noise ---------------------------------------------------------------------------------------


def test_noise_from_snr():
    """ξ ~ N(0, ‖A*‖²_F/(N snr)): the mean of snr ‖ξ‖²/‖A*‖²_F over 50 problems is 1 (sd √(2/4000) = 0.022)."""
    ratios = []
    for s in range(50):
        p = data.matrix.problem(10, 10, 2, 80, snr=20.0, seed=s)
        np.testing.assert_allclose(p.y, p.y_star + p.xi, rtol=0)
        ratios.append(20.0 * np.sum(p.xi**2) / np.sum(p.A_star**2))
    assert abs(np.mean(ratios) - 1) < 0.1
    assert not data.matrix.problem(10, 10, 2, 80, seed=0).xi.any()
    p = data.matrix.problem(10, 10, 2, 80, snr=20.0, seed=0)
    np.testing.assert_array_equal(p.A_hat[p.mask], p.y)


# --- bad input, before any compute -----------------------------------------------------------------


BAD = [
    ("r > min(n1, n2)", lambda: data.matrix.problem(4, 3, 4, 5),
     r"r must be an integer in [1, min(n1, n2)] = [1, 3], got 4"),
    ("r = 0", lambda: data.matrix.low_rank_matrix(4, 3, 0), r"r must be an integer in [1, min(n1, n2)] = [1, 3], got 0"),
    ("N > n1 n2", lambda: data.matrix.problem(4, 3, 1, 13),
     r"N must be an integer in [1, n1*n2] = [1, 12], got 13"),
    ("N > n1 n2 mask", lambda: data.matrix.completion_mask(np.ones((4, 3)), 13),
     r"N must be an integer in [1, n1*n2] = [1, 12], got 13"),
    ("N = 0", lambda: data.matrix.problem(4, 3, 1, 0, kind="sensing"), r"N must be an integer in [1, inf), got 0"),
    ("tau > 1", lambda: data.matrix.problem(tau=1.5), r"tau must be in [0.0, 1.0], got 1.5"),
    ("tau < 0", lambda: data.matrix.completion_mask(np.ones((4, 3)), 5, tau=-0.1), r"tau must be in [0.0, 1.0], got -0.1"),
    ("tau sensing", lambda: data.matrix.sensing_matrices(np.ones((4, 3)), 5, tau=2), r"tau must be in [0.0, 1.0], got 2"),
    ("kind", lambda: data.matrix.problem(kind="denoising"),
     r"kind must be one of 'completion', 'sensing', got 'denoising'"),
    ("generator", lambda: data.matrix.problem(generator="qr"),
     r"generator must be one of 'authors', 'orthogonal', 'power_law', 'spiky', 'gaussian', got 'qr'"),
    ("generator low-level", lambda: data.matrix.low_rank_matrix(3, 3, 1, generator=None),
     r"generator must be one of 'authors', 'orthogonal', 'power_law', 'spiky', 'gaussian', got None"),
    ("mask shape", lambda: data.matrix.completion_measurements(np.ones((4, 3)), np.ones((3, 4), dtype=bool)),
     r"mask must be a boolean array of shape (n1, n2) = (4, 3), got bool array of shape (3, 4)"),
    ("mask dtype", lambda: data.matrix.completion_measurements(np.ones((4, 3)), np.ones((4, 3))),
     r"mask must be a boolean array of shape (n1, n2) = (4, 3), got float64 array of shape (4, 3)"),
    ("variance", lambda: data.matrix.problem(kind="sensing", variance="1/n"),
     r"variance must be one of '1/n_k', '1/n_k^2', '1/N', got '1/n'"),
    ("variance 0", lambda: data.matrix.sensing_matrices(np.ones((4, 3)), 5, variance=0.0),
     r"variance must be in (0.0, inf), got 0.0"),
    ("snr", lambda: data.matrix.problem(snr=0), r"snr must be in (0.0, inf), got 0"),
    ("seed", lambda: data.matrix.problem(seed=-1), r"seed must be an integer in [0, 2**32 - 1] (a seed), got -1"),
    ("n1", lambda: data.matrix.problem(n1=0), r"n1 must be an integer in [1, inf), got 0"),
    ("singular values shape", lambda: data.matrix.low_rank_matrix(4, 3, 2, generator="orthogonal", singular_values=[1.0]),
     r"singular_values must have shape (r,) = (2,), got shape (1,)"),
    ("singular values sign", lambda: data.matrix.low_rank_matrix(4, 3, 2, generator="orthogonal",
                                                          singular_values=[1.0, -1.0]),
     r"singular_values must be in (0.0, inf), got -1.0"),
    ("singular values authors", lambda: data.matrix.low_rank_matrix(4, 3, 1, singular_values=[1.0]),
     r"singular_values must be None for generator 'authors', got [1.0]"),
    ("A_star non-finite", lambda: data.matrix.completion_mask(np.array([[1.0, np.nan]]), 1),
     r"A_star must be finite, got nan at index (0, 1) (1 non-finite entry)"),
    ("local coherence basis", lambda: data.matrix.local_coherence(np.eye(3), U_basis=np.eye(2)),
     r"U_basis must be a matrix with 3 rows, got shape (2, 2)"),
    ("beta2", lambda: data.matrix.problem(4, 3, 1, 5).least_squares(-1.0),
     r"beta2 must be in [0.0, inf), got -1.0"),
]


@pytest.mark.parametrize("name, call, message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_refused(name, call, message):
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        call()


def test_checks_run_before_any_draw(monkeypatch):
    """An invalid tau is refused before A* is drawn (low_rank_matrix is never reached)."""
    monkeypatch.setattr(data.matrix, "low_rank_matrix", lambda *a, **k: pytest.fail("drew A* before checking"))
    with pytest.raises(ValueError, match="tau"):
        data.matrix.problem(tau=2.0)
    with pytest.raises(ValueError, match="snr"):
        data.matrix.problem(snr=-1.0)


def test_stack_puts_each_seeds_problem_on_its_configurations():
    problems = [data.matrix.problem(6, 5, 2, 12, seed=s) for s in (3, 4)]
    batch = data.matrix.stack(problems, [0, 0, 1])
    assert batch["operator"].shape == (3, 6, 5) and batch["operator"].dtype == bool
    assert batch["y"].shape == (3, 12) and batch["A_star"].shape == (3, 6, 5)
    np.testing.assert_array_equal(batch["operator"][2], problems[1].mask)
    np.testing.assert_array_equal(batch["y"][1], problems[0].y)
    np.testing.assert_array_equal(data.matrix.stack(problems)["A_star"][1], problems[1].A_star)
    sensing = data.matrix.stack([data.matrix.problem(4, 3, 1, 7, kind="sensing", seed=s) for s in (0, 1)])
    assert sensing["operator"].shape == (2, 7, 12)


@pytest.mark.parametrize("problems, index", [
    ([], None),
    ("abc", None),
    ([data.matrix.problem(6, 5, 2, 12, seed=0), data.matrix.problem(6, 5, 2, 13, seed=1)], None),
    ([data.matrix.problem(6, 5, 2, 12, seed=0)], [1]),
    ([data.matrix.problem(6, 5, 2, 12, seed=0)], [0.5]),
])
def test_stack_checks_its_arguments(problems, index):
    with pytest.raises(ValueError):
        data.matrix.stack(problems, index)
