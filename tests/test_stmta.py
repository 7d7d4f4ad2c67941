"""Tests of the helpers behind the statement pages of Appendix D (Definitions D.1–D.4, Theorems D.9,
D.10, D.12, Lemmas D.11, D.14): each against an independent plain numpy (or torch) computation."""
import numpy as np
import pytest
import torch

from grokkit import report, theory
from grokkit.data.matrix import unvec, vec
from grokkit.kernels.matrix import nuclear_iterates

# --- Theorem D.9: the Monte-Carlo estimator ---------------------------------------------------------


def test_d9_monte_carlo_against_the_exact_expectation():
    rng = np.random.default_rng(0)
    shape, N, sd = (4, 5), 12, 0.3
    X = rng.standard_normal((N, 20))
    A_star = rng.standard_normal(shape)
    a = vec(A_star)
    for beta2 in (0.0, 0.2, 2.0):
        # y - X a_hat = R y with R = I - X (X^T X + beta2 I)^+ X^T: E = ||R X a||^2 + sd^2 ||R||_F^2
        R = np.eye(N) - X @ np.linalg.pinv(X.T @ X + beta2 * np.eye(20)) @ X.T
        exact = np.sum((R @ X @ a) ** 2) + sd**2 * np.sum(R**2)
        mean, se = theory.matrix.least_squares_residual_monte_carlo(X, shape, A_star, beta2, sd, draws=20_000, seed=1)
        assert abs(mean - exact) < 4 * se + 1e-12
        assert theory.matrix.least_squares_residual_corrected(X, shape, A_star, beta2, sd) == pytest.approx(exact, rel=1e-9,
                                                                                                    abs=1e-12)
    # seeded: same seed, same numbers; another seed, other numbers
    one = theory.matrix.least_squares_residual_monte_carlo(X, shape, A_star, 0.2, sd, draws=100, seed=3)
    assert one == theory.matrix.least_squares_residual_monte_carlo(X, shape, A_star, 0.2, sd, draws=100, seed=3)
    assert one != theory.matrix.least_squares_residual_monte_carlo(X, shape, A_star, 0.2, sd, draws=100, seed=4)
    # noiseless: every draw is the same residual, standard error 0
    mean, se = theory.matrix.least_squares_residual_monte_carlo(X, shape, A_star, 0.2, 0.0, draws=10)
    R = np.eye(N) - X @ np.linalg.pinv(X.T @ X + 0.2 * np.eye(20)) @ X.T
    assert mean == pytest.approx(np.sum((R @ X @ a) ** 2), rel=1e-10) and se < 1e-12
    # completion: the mask operator
    mask = np.zeros(shape, bool)
    mask.flat[rng.choice(20, 9, replace=False)] = True
    mean, se = theory.matrix.least_squares_residual_monte_carlo(mask, shape, A_star, 0.5, sd, draws=20_000)
    exact = (0.5 / 1.5) ** 2 * (np.sum(A_star[mask] ** 2) + 9 * sd**2)  # each observed entry shrinks by 1/(1+beta2)
    assert abs(mean - exact) < 4 * se


# --- Lemma D.11: elements of the subdifferential ----------------------------------------------------


@pytest.mark.parametrize("shape, r", [((7, 5), 5), ((6, 6), 6), ((8, 6), 2), ((5, 9), 1)])
def test_nuclear_subgradients_are_in_the_subdifferential(shape, r):
    rng = np.random.default_rng(r)
    A = rng.standard_normal((shape[0], r)) @ rng.standard_normal((r, shape[1]))
    H = theory.matrix.nuclear_subgradients(A, 6, seed=2)
    assert H.shape == (7,) + shape
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    np.testing.assert_allclose(H[0], U @ Vt, atol=1e-12)  # the thin-SVD choice
    nuclear = s.sum()
    Ur, Vr = U[:, :r], Vt[:r].T
    for Hk in H:
        # H in the subdifferential: <H, A> = ||A||_* and ||H||_2 <= 1 (the dual characterisation)
        assert np.sum(Hk * A) == pytest.approx(nuclear, rel=1e-12)
        assert np.linalg.norm(Hk, 2) <= 1 + 1e-12
        W = Hk - Ur @ Vr.T
        assert np.abs(Ur.T @ W).max() < 1e-12 and np.abs(W @ Vr).max() < 1e-12
    if r == min(shape):  # full rank: the complement of a side is empty, the subdifferential a point
        np.testing.assert_allclose(H, np.broadcast_to(U @ Vt, H.shape), atol=1e-12)
    else:  # random contractions: distinct elements
        assert np.abs(H[1] - H[2]).max() > 1e-3
    np.testing.assert_array_equal(H, theory.matrix.nuclear_subgradients(A, 6, seed=2))


def test_nuclear_subgradients_of_zero_are_contractions():
    H = theory.matrix.nuclear_subgradients(np.zeros((4, 3)), 5, seed=0)
    norms = np.linalg.norm(H, 2, axis=(1, 2))
    assert np.all(norms <= 1 + 1e-12) and norms[1:].min() < 1 - 1e-6  # a scaled contraction, not only isometries


# --- Theorem D.12: the pure nuclear dynamics -------------------------------------------------------


def _numpy_dynamics(A, step, steps, compact_tol=None):
    out = [A]
    for _ in range(steps):
        U, s, Vt = np.linalg.svd(A, full_matrices=False)
        if compact_tol is not None:
            keep = s > compact_tol * step
            U, Vt = U[:, keep], Vt[keep]
        A = A - step * U @ Vt
        out.append(A)
    return np.array(out)


def test_nuclear_iterates_against_a_numpy_loop():
    rng = np.random.default_rng(5)
    A = rng.standard_normal((7, 5))
    got = nuclear_iterates(A, 2.0, 40, beta_star=0.15)
    want = _numpy_dynamics(A, 0.3, 40)
    assert got.shape == (41, 7, 5)
    np.testing.assert_allclose(got, want, atol=1e-10)
    measured = np.linalg.svd(got, compute_uv=False)
    predicted = np.sort(theory.matrix.nuclear_singular_values(measured[0], 2.0, 40, 0.15), axis=1)[:, ::-1]
    assert np.abs(measured - predicted).max() < 1e-12


def test_compact_dynamics_keep_the_vanished_values_at_zero():
    # sigma / step = 4, 3 (integers: vanish), 2.4, 1.2, 0.4 (survive), and a zero singular value
    sigma = np.array([1.0, 0.75, 0.6, 0.3, 0.1, 0.0])
    rng = np.random.default_rng(6)
    U = np.linalg.qr(rng.standard_normal((8, 6)))[0]
    V = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    A = (U * sigma) @ V.T
    for svd, late in (("compact", {3}), ("thin", {4, 5})):
        got = nuclear_iterates(A, 0.25, 14, svd=svd)
        want = _numpy_dynamics(A, 0.25, 14, compact_tol=1e-9 if svd == "compact" else None)
        if svd == "compact":
            np.testing.assert_allclose(got, want, atol=1e-12)
        else:  # the singular vectors of a zero singular value are not unique: LAPACK builds pick their own
            np.testing.assert_allclose(np.linalg.svd(got, compute_uv=False), np.linalg.svd(want, compute_uv=False),
                                       atol=1e-12)
        ranks = [np.linalg.matrix_rank(M, tol=1e-9) for M in got]
        assert set(ranks[5:]) == late
        predicted = theory.matrix.nuclear_singular_values(sigma, 0.25, 14, svd=svd)
        assert [int(np.sum(p > 1e-9)) for p in predicted] == ranks
    # the compact recursion by hand: values reaching 0 stay at 0
    np.testing.assert_allclose(theory.matrix.nuclear_singular_values([1.0, 0.3, 0.0], 0.25, 6, svd="compact"),
                               [[1, .3, 0], [.75, .05, 0], [.5, .2, 0], [.25, .05, 0], [0, .2, 0], [0, .05, 0],
                                [0, .2, 0]], atol=1e-15)
    np.testing.assert_allclose(theory.matrix.nuclear_singular_values([0.3, 0.0], 0.1, 4, svd="compact")[3:], [[0, 0]] * 2)


# --- Lemma D.14: the Kronecker Jacobian, autograd and finite differences ---------------------------


def _factors(seed, L):
    rng = np.random.default_rng(seed)
    dims = rng.integers(2, 6, L + 1)
    return [rng.standard_normal((dims[k], dims[k + 1])) for k in range(L)]


@pytest.mark.parametrize("L", [1, 2, 3, 4])
def test_product_jacobian_is_the_autograd_jacobian(L):
    factors = _factors(L, L)
    A = np.linalg.multi_dot(factors) if L > 1 else factors[0]
    for k in range(1, L + 1):
        J = theory.matrix.product_jacobian(factors, k)
        np.testing.assert_allclose(J @ vec(factors[k - 1]), vec(A), atol=1e-12)

        def vec_product(Fk, k=k):  # column-major vec of the product as a function of factor k
            F = [torch.as_tensor(M) for M in factors]
            F[k - 1] = Fk
            P = F[0]
            for M in F[1:]:
                P = P @ M
            return P.T.reshape(-1)

        Jt = torch.autograd.functional.jacobian(vec_product, torch.as_tensor(factors[k - 1]))
        # d vec(A) / d vec(A_k): reorder the factor's axes column-major
        d0dL, (rows, cols) = Jt.shape[0], factors[k - 1].shape
        want = Jt.numpy().transpose(0, 2, 1).reshape(d0dL, rows * cols)
        np.testing.assert_allclose(J, want, atol=1e-12)


def test_autograd_and_finite_differences_against_known_gradients():
    rng = np.random.default_rng(7)
    A, B = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))

    def loss(A, B):
        return 0.5 * ((A @ B) ** 2).sum() + torch.sin(A).sum()

    gA, gB = theory.matrix.autograd_gradients(loss, A, B)
    np.testing.assert_allclose(gA, A @ B @ B.T + np.cos(A), atol=1e-12)
    np.testing.assert_allclose(gB, A.T @ A @ B, atol=1e-12)
    fd = theory.matrix.finite_difference_gradient(lambda M: loss(M, torch.as_tensor(B)), A, eps=1e-5)
    np.testing.assert_allclose(fd, A @ B @ B.T + np.cos(A), atol=1e-8)
    # the deep-gradient formula against both references on a sensing loss
    factors = _factors(9, 3)
    d0, dL = factors[0].shape[0], factors[-1].shape[1]
    X, y = rng.standard_normal((6, d0 * dL)), rng.standard_normal(6)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)

    def g(P):
        return 0.5 * ((Xt @ P.T.reshape(-1) - yt) ** 2).sum()

    P = np.linalg.multi_dot(factors)
    grad = unvec(X.T @ (X @ vec(P) - y), d0, dL)
    auto = theory.matrix.autograd_gradients(lambda *F: g(F[0] @ F[1] @ F[2]), *factors)
    formula = theory.matrix.deep_gradients(factors, grad)
    for k, (a, f) in enumerate(zip(auto, formula)):
        np.testing.assert_allclose(f, a, atol=1e-11)
        fd = theory.matrix.finite_difference_gradient(
            lambda Fk, k=k: g(torch.linalg.multi_dot([Fk if i == k else torch.as_tensor(M)
                                                      for i, M in enumerate(factors)])), factors[k])
        np.testing.assert_allclose(fd, f, atol=1e-6)


# --- bad inputs --------------------------------------------------------------------------------------

_X = np.ones((5, 12))
BAD = [
    (lambda: theory.matrix.least_squares_residual_monte_carlo(_X, (3, 4), np.ones((3, 4)), 0.1, 0.2, draws=1),
     r"draws must be an integer in \[2, inf\), got 1"),
    (lambda: theory.matrix.least_squares_residual_monte_carlo(_X, (3, 4), np.ones((3, 4)), 0.1, -0.2),
     r"noise_std must be in \[0\.0, inf\), got -0\.2"),
    (lambda: theory.matrix.least_squares_residual_monte_carlo(_X, (3, 4), np.ones((3, 4)), 0.1, 0.2, seed=-1),
     r"seed must be an integer in \[0, 2\*\*32 - 1\]"),
    (lambda: theory.matrix.nuclear_subgradients(np.ones(3)), r"A must be a matrix \(2-d array\), got shape \(3,\)"),
    (lambda: theory.matrix.nuclear_subgradients(np.eye(3), -1), r"count must be an integer in \[0, inf\), got -1"),
    (lambda: theory.matrix.nuclear_subgradients(np.full((2, 2), np.nan)), r"A must be finite, got nan"),
    (lambda: theory.matrix.nuclear_singular_values([1.0], 0.1, 3, svd="full"), r"svd must be one of 'thin', 'compact'"),
    (lambda: nuclear_iterates(np.eye(3), 0.0, 3), r"alpha must be in \(0\.0, inf\), got 0\.0"),
    (lambda: nuclear_iterates(np.eye(3), 0.1, -1), r"steps must be an integer in \[0, "),
    (lambda: nuclear_iterates(np.ones(3), 0.1, 2), r"A must be a matrix \(2-d array\), got shape \(3,\)"),
    (lambda: nuclear_iterates(np.eye(3), 0.1, 2, svd="full"), r"svd must be one of 'thin', 'compact'"),
    (lambda: theory.matrix.product_jacobian([np.ones((2, 3)), np.ones((3, 2))], 3), r"k must be an integer in \[1, L\] = \[1, 2\], got 3"),
    (lambda: theory.matrix.product_jacobian([np.ones((2, 3)), np.ones((2, 2))], 1), r"factors\[1\] must have 3 rows"),
    (lambda: theory.matrix.product_jacobian([], 1), r"factors must be a non-empty sequence"),
    (lambda: theory.matrix.autograd_gradients(3.0, np.eye(2)), r"loss must be a function"),
    (lambda: theory.matrix.autograd_gradients(lambda A: A, np.eye(2)), r"loss must return a scalar, got shape \(2, 2\)"),
    (lambda: theory.matrix.autograd_gradients(lambda: 0.0), r"arrays must hold at least one array"),
    (lambda: theory.matrix.finite_difference_gradient(lambda A: A.sum(), np.eye(2), eps=0.0), r"eps must be in \(0\.0, inf\), got 0\.0"),
    (lambda: theory.matrix.finite_difference_gradient(lambda A: A.sum(), np.array([np.inf])), r"x must be finite, got inf"),
    (lambda: report.check_parameters({"draws": 1}), r"draws must be an integer in \[2, inf\), got 1"),
    (lambda: report.check_parameters({"noise_std": -0.1}), r"noise_std must be in \[0\.0, inf\), got -0\.1"),
]


@pytest.mark.parametrize("call, message", BAD)
def test_bad_inputs_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
