"""Lemma C.11 / Theorem C.12 (exact ℓ₁ dynamics), Theorems C.9, C.10 (least squares) and
Definitions B.1–B.3 (products, vectorisations, unfoldings)."""
from fractions import Fraction

import numpy as np
import pytest

from grokkit import data, theory

ALPHA = 2.0**-10


def _fraction_dynamics(b1: Fraction, alpha: Fraction, steps: int) -> list[Fraction]:
    """b <- b - alpha sign(b) in exact rational arithmetic."""
    out = [b1]
    for _ in range(steps):
        b = out[-1]
        out.append(b - alpha * ((b > 0) - (b < 0)))
    return out


def test_l1_iterates_are_exact_against_rational_arithmetic():
    b1 = data.sparse.binary_fractions((7, 5), ALPHA, max_ratio=12, integer_share=0.4, seed=3)
    got = theory.sparse.l1_iterates(b1, ALPHA, 20)
    assert got.shape == (21, 7, 5)
    for i, j in np.ndindex(7, 5):
        want = _fraction_dynamics(Fraction(b1[i, j]), Fraction(ALPHA), 20)
        assert [Fraction(v) for v in got[:, i, j]] == want


def test_l1_iterates_hand_worked():
    # 2.5 alpha: 2.5, 1.5, 0.5, -0.5, 0.5 (in units of alpha); 2 alpha: 2, 1, 0, 0
    got = theory.sparse.l1_iterates([2.5 * ALPHA, 2 * ALPHA, 0.0], ALPHA, 4) / ALPHA
    assert got[:, 0].tolist() == [2.5, 1.5, 0.5, -0.5, 0.5]
    assert got[:, 1].tolist() == [2.0, 1.0, 0.0, 0.0, 0.0]
    assert got[:, 2].tolist() == [0.0] * 5
    assert theory.sparse.l1_iterates(0.3, 0.1, 0).shape == (1,)


def test_l1_entry_time_exact_and_printed():
    b1 = np.array([0.0, 0.5, 1.0, 2.0, 2.5, -4.0, -4.25]) * ALPHA
    assert theory.sparse.l1_entry_time(b1, ALPHA).tolist() == [1, 1, 1, 2, 3, 4, 5]
    assert theory.sparse.l1_entry_time(b1, ALPHA, rule="printed").tolist() == [1, 1, 2, 3, 3, 5, 5]
    # against a brute-force first entry on the simulated iterates
    b1 = data.sparse.binary_fractions(2000, ALPHA, max_ratio=20, integer_share=0.3, seed=1)
    run = np.abs(theory.sparse.l1_iterates(b1, ALPHA, 25))
    first = np.argmax(run <= ALPHA, axis=0) + 1
    np.testing.assert_array_equal(first, theory.sparse.l1_entry_time(b1, ALPHA))


def test_binary_fractions():
    b = data.sparse.binary_fractions((100, 10), ALPHA, max_ratio=8, integer_share=0.5, bits=6, seed=2)
    assert b.shape == (100, 10) and np.abs(b).max() <= 8 * ALPHA
    m = b / (ALPHA * 2.0**-6)
    np.testing.assert_array_equal(m, np.round(m))
    share = np.mean(b / ALPHA == np.round(b / ALPHA))
    assert 0.45 < share < 0.6  # the rounded half, plus the integer draws by chance
    np.testing.assert_array_equal(b, data.sparse.binary_fractions((100, 10), ALPHA, 8, 0.5, 6, seed=2))
    assert not np.array_equal(b, data.sparse.binary_fractions((100, 10), ALPHA, 8, 0.5, 6, seed=3))
    assert data.sparse.binary_fractions(4, seed=0).shape == (4,)


@pytest.mark.parametrize("call, message", [
    (lambda: theory.sparse.l1_iterates([1.0, np.nan], 0.1, 3), r"b1 must be finite"),
    (lambda: theory.sparse.l1_iterates([1.0], 0.0, 3), r"alpha must be in"),
    (lambda: theory.sparse.l1_iterates([1.0], 0.1, -1), r"steps must be"),
    (lambda: theory.sparse.l1_entry_time([1.0], 0.1, rule="floor"), r"rule must be one of"),
    (lambda: theory.sparse.l1_entry_time([1.0], -0.1), r"alpha must be in"),
    (lambda: data.sparse.binary_fractions(5, alpha=0.1), r"alpha must be a power of two, got 0.1"),
    (lambda: data.sparse.binary_fractions((5, 0)), r"shape must be"),
    (lambda: data.sparse.binary_fractions(5, max_ratio=0), r"max_ratio must be"),
    (lambda: data.sparse.binary_fractions(5, integer_share=1.5), r"integer_share must be in"),
    (lambda: data.sparse.binary_fractions(5, bits=31), r"bits must be"),
    (lambda: data.sparse.binary_fractions(5, seed=-1), r"seed must be"),
])
def test_bad_inputs(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("N", [30, 150])
def test_c9_sparse_formula_against_the_exact_expectation(N):
    prob = data.sparse.problem(100, 5, N, variance="1/N", seed=1)
    X, b = prob.X, prob.b_star
    for beta2, sd in ((0.5, 0.05), (0.0, 0.05), (3.0, 0.2)):
        # E||(H - I)(Xb + xi)||^2 = ||(H - I)Xb||^2 + sd^2 tr((H - I)^T (H - I)), H the hat matrix
        H = X @ np.linalg.pinv(X.T @ X + beta2 * np.eye(100)) @ X.T
        M = H - np.eye(N)
        exact = np.sum((M @ X @ b) ** 2) + sd**2 * np.trace(M.T @ M)
        got = theory.sparse.least_squares_residual_corrected(X, b, beta2, sd)
        assert got == pytest.approx(exact, rel=1e-8, abs=1e-14)
        # the matrix statement on a 1 x n "matrix" is the same computation
        assert got == pytest.approx(theory.matrix.least_squares_residual_corrected(X, (1, 100), b[None], beta2, sd),
                                    rel=1e-12, abs=1e-15)
    mean, se = theory.sparse.least_squares_residual_monte_carlo(X, b, 0.5, 0.05, draws=20_000, seed=2)
    assert abs(mean - theory.sparse.least_squares_residual_corrected(X, b, 0.5, 0.05)) < 4 * se
    if N == 30:  # the bias term matters (for N = 150 the noise floor hides it)
        assert abs(mean - theory.sparse.least_squares_residual_printed(X, b, 0.5, 0.05)) > 20 * se


@pytest.mark.parametrize("call, message", [
    (lambda: theory.sparse.least_squares_residual_corrected(np.ones((3, 4)), np.ones(3), 0.1), r"shapes \(N, n\)"),
    (lambda: theory.sparse.least_squares_residual_printed(np.ones(4), np.ones(4), 0.1), r"shapes \(N, n\)"),
    (lambda: theory.sparse.least_squares_residual_monte_carlo(np.ones((3, 4)), np.full(4, np.nan), 0.1, 0.2),
     r"b_star must be finite"),
    (lambda: theory.sparse.least_squares_residual_corrected(np.ones((3, 4)), np.ones(4), -0.1), r"beta2 must be"),
])
def test_c9_bad_inputs(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_null_space_energy_against_an_explicit_projector_and_batched():
    rs = np.random.RandomState(0)
    b = rs.randn(12)
    Xs = rs.randn(4, 5, 12)
    Xs[3, 4] = Xs[3, 0] + Xs[3, 1]  # rank 4
    got = theory.sparse.null_space_energy(Xs, b)
    for X, g in zip(Xs, got):
        P = X.T @ np.linalg.pinv(X.T)  # projector on the row space
        assert g == pytest.approx(np.sum((b - P @ b) ** 2), rel=1e-10)
        assert theory.sparse.null_space_energy(X, b) == pytest.approx(g, rel=1e-12)
    # noiseless least squares reaches the bound (Theorem C.10, beta2 = 0)
    X = Xs[0]
    b_hat = data.sparse.least_squares(X, X @ b)
    assert np.sum((b_hat - b) ** 2) == pytest.approx(got[0], rel=1e-10)
    assert abs(theory.sparse.null_space_energy(rs.randn(20, 12), b)) < 1e-12 * np.sum(b**2)  # full column rank
    with pytest.raises(ValueError, match=r"shapes \(\.\.\., N, n\)"):
        theory.sparse.null_space_energy(Xs, b[:5])
    with pytest.raises(ValueError, match=r"b must be finite"):
        theory.sparse.null_space_energy(X, np.full(12, np.inf))


def test_products_and_vectorisations_against_loops():
    rs = np.random.RandomState(0)
    A, B = rs.randn(2, 3), rs.randn(4, 3)
    want = np.column_stack([np.kron(A[:, i], B[:, i]) for i in range(3)])
    np.testing.assert_array_equal(data.matrix.khatri_rao(A, B), want)
    np.testing.assert_array_equal(data.matrix.face_splitting(A.T, B.T), want.T)
    M = rs.randn(3, 4)
    K = data.matrix.commutation_matrix(3, 4)
    np.testing.assert_array_equal(K @ data.matrix.vec(M), M.T.reshape(-1, order="F"))
    assert data.matrix.vecr(M).tolist() == [M[i, j] for i in range(3) for j in range(4)]
    assert sorted(K.sum(axis=0).tolist()) == [1.0] * 12  # a permutation


def test_unfold_mode_product_and_cp_against_index_formulas():
    rs = np.random.RandomState(1)
    m, n, p, R = 2, 3, 4, 3
    A, B, C = rs.randn(m, R), rs.randn(n, R), rs.randn(p, R)
    T = data.matrix.cp_tensor(A, B, C)
    np.testing.assert_allclose(T, np.einsum("ir,jr,kr->ijk", A, B, C), rtol=1e-14)
    U1F, U1C, U2F = data.matrix.unfold(T, 1), data.matrix.unfold(T, 1, "C"), data.matrix.unfold(T, 2)
    for i, j, k in np.ndindex(m, n, p):
        assert U1F[i, j + k * n] == T[i, j, k]      # Kolda and Bader
        assert U1C[i, j * p + k] == T[i, j, k]      # rows vecr(T_i::)
        assert U2F[j, i + k * m] == T[i, j, k]
        assert data.matrix.vec(T)[k * m * n + j * m + i] == T[i, j, k]
        assert data.matrix.vecr(T)[i * n * p + j * p + k] == T[i, j, k]
    np.testing.assert_allclose(U1F, A @ data.matrix.khatri_rao(C, B).T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(U2F, B @ data.matrix.khatri_rao(C, A).T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(data.matrix.unfold(T, 2, "C"), B @ data.matrix.khatri_rao(A, C).T, rtol=1e-12, atol=1e-12)
    Q = rs.randn(5, p)
    P = data.matrix.mode_product(T, Q, 3)
    assert P.shape == (m, n, 5)
    np.testing.assert_allclose(P, np.einsum("qk,ijk->ijq", Q, T), rtol=1e-12)
    assert data.matrix.cp_tensor(A, B).shape == (m, n)


@pytest.mark.parametrize("call, message", [
    (lambda: data.matrix.khatri_rao(np.ones((2, 3)), np.ones((2, 4))), r"same number of columns"),
    (lambda: data.matrix.commutation_matrix(0, 2), r"m must be"),
    (lambda: data.matrix.unfold(np.ones((2, 3)), 3), r"mode must be"),
    (lambda: data.matrix.unfold(np.ones((2, 3)), 1, order="K"), r"order must be one of"),
    (lambda: data.matrix.unfold(np.ones(3), 1), r"order >= 2"),
    (lambda: data.matrix.mode_product(np.ones((2, 3)), np.ones((4, 2)), 2), r"M must be a matrix with 3 columns"),
    (lambda: data.matrix.cp_tensor(np.ones((2, 3))), r"at least 2"),
    (lambda: data.matrix.cp_tensor(np.ones((2, 3)), np.ones((2, 2))), r"same number of columns"),
])
def test_appendix_b_bad_inputs(call, message):
    with pytest.raises(ValueError, match=message):
        call()
