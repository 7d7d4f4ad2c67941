"""Tests of grokkit.data: the problem generator, dictionaries, noise, least squares, coherence."""
import math

import numpy as np
import pytest

import grokkit.data as data
from grokkit import theory


def _variance_error(sample: np.ndarray, expected: float) -> float:
    return abs(sample.var() / expected - 1.0)


# --- regression values of the authors' generator --------------------------------------------


@pytest.fixture(scope="module")
def authors_problem():
    return data.sparse.problem(100, 5, 30, variance="1/N", seed=1)


def test_authors_regression_support_and_values(authors_problem):
    p = authors_problem
    support = np.flatnonzero(p.b_star)
    assert support.tolist() == [33, 80, 81, 84, 93]
    np.testing.assert_array_equal(np.round(math.sqrt(100) * p.b_star[support], 3),
                                  [0.960, 0.108, -0.127, 1.015, 0.699])
    assert p.n == 100 and p.N == 30 and p.s == 5


def test_authors_regression_spectrum_and_norms(authors_problem):
    p = authors_problem
    assert round(p.lambda_max, 5) == 7.11956
    assert round(float(np.abs(p.b_hat - p.b_star).max()), 7) == 0.0695479
    assert round(float(np.abs(p.b_star).sum()), 6) == 0.290884


def test_authors_regression_rho(authors_problem):
    X = authors_problem.X
    assert round(theory.sparse.rho_range(X, 0.1), 5) == 0.92665
    assert round(theory.sparse.rho(X, 0.1, p=1), 2) == 2.84
    assert theory.sparse.rho(X, 0.1) == pytest.approx(1.0, abs=1e-9)  # rho_2 = 1 because N < n


# --- determinism ----------------------------------------------------------------------------


def test_same_seed_gives_identical_problem():
    a = data.sparse.problem(50, 4, 20, tau=0.3, basis="dct", snr=5.0, seed=7)
    b = data.sparse.problem(50, 4, 20, tau=0.3, basis="dct", snr=5.0, seed=7)
    for name in ("X", "y", "b_star", "xi", "phi", "X_raw"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_different_seed_gives_different_problem():
    a = data.sparse.problem(50, 4, 20, basis="orthonormal", snr=5.0, seed=7)
    b = data.sparse.problem(50, 4, 20, basis="orthonormal", snr=5.0, seed=8)
    for name in ("X", "y", "b_star", "xi", "phi", "X_raw"):
        assert not np.array_equal(getattr(a, name), getattr(b, name)), name


# --- coherence parameter tau -----------------------------------------------------------------


def test_coherent_rows_uses_the_paper_floor():
    assert data.sparse.coherent_rows(0.7, 90, 100) == 63  # the authors' int(0.7 * 90) gives 62
    assert data.sparse.coherent_rows(0.0, 90, 100) == 0
    assert data.sparse.coherent_rows(1.0, 90, 100) == 90
    assert data.sparse.coherent_rows(1.0, 150, 100) == 100  # at most n atoms
    assert data.sparse.coherent_rows(0.5, 7, 100) == 3


def test_first_rows_are_distinct_canonical_vectors_for_identity():
    p = data.sparse.problem(100, 5, 90, tau=0.7, seed=3)
    n1 = 63
    head = p.X_raw[:n1]
    np.testing.assert_array_equal(np.sort(np.abs(head), axis=1)[:, :-1], 0.0)
    np.testing.assert_array_equal(head.max(axis=1), 1.0)
    positions = head.argmax(axis=1)
    assert len(set(positions.tolist())) == n1
    # the remaining rows are Gaussian, not atoms
    assert np.count_nonzero(p.X_raw[n1:]) == (90 - n1) * 100


@pytest.mark.parametrize("basis", ["orthonormal", "dct"])
def test_first_rows_are_distinct_atoms_of_the_basis(basis):
    n, N, tau = 32, 20, 0.5
    p = data.sparse.problem(n, 3, N, tau=tau, basis=basis, seed=2)
    n1 = data.sparse.coherent_rows(tau, N, n)
    head = p.X_raw[:n1]
    np.testing.assert_allclose(np.linalg.norm(head, axis=1), 1.0, atol=1e-12)
    # each row equals one column of phi, all columns distinct
    match = np.abs(head @ p.phi)  # (n1, n): 1 at the matching atom, 0 elsewhere
    cols = match.argmax(axis=1)
    np.testing.assert_allclose(match[np.arange(n1), cols], 1.0, atol=1e-12)
    np.testing.assert_allclose(head, p.phi[:, cols].T, atol=0)
    assert len(set(cols.tolist())) == n1
    # in the effective design X = X_raw phi these rows are canonical vectors
    np.testing.assert_allclose(p.X[:n1], np.eye(n)[cols], atol=1e-12)


def test_tau_one_gives_maximal_coherence():
    for basis in ("identity", "orthonormal", "dct"):
        p = data.sparse.problem(40, 3, 25, tau=1.0, basis=basis, seed=4)
        assert p.mu == pytest.approx(1.0, abs=1e-12), basis


def test_tau_zero_gives_incoherent_gaussian_rows():
    p = data.sparse.problem(200, 3, 50, tau=0.0, seed=4)
    assert p.mu < 0.5


@pytest.mark.parametrize("variance, expected", [("1/n", 1 / 200), ("1/N", 1 / 2000), (0.3, 0.3)])
def test_gaussian_rows_have_requested_variance(variance, expected):
    X = data.sparse.measurement_matrix(2000, np.eye(200), tau=0.0, variance=variance, seed=5)
    assert X.shape == (2000, 200)
    assert _variance_error(X, expected) < 0.03
    assert abs(X.mean()) < 0.01 * math.sqrt(expected)


def test_gaussian_rows_after_atoms_have_requested_variance():
    p = data.sparse.problem(200, 5, 1000, tau=0.1, variance=0.25, seed=6)
    assert _variance_error(p.X_raw[100:], 0.25) < 0.03


# --- dictionaries -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["identity", "orthonormal", "dct"])
def test_bases_are_orthonormal(kind):
    phi = data.sparse.dictionary(33, kind, seed=1)
    assert phi.shape == (33, 33)
    np.testing.assert_allclose(phi.T @ phi, np.eye(33), atol=1e-12)
    np.testing.assert_allclose(phi @ phi.T, np.eye(33), atol=1e-12)


def test_dct_first_atom_is_constant():
    phi = data.sparse.dictionary(16, "dct")
    np.testing.assert_allclose(phi[:, 0], 1 / math.sqrt(16), atol=1e-15)
    assert np.ptp(phi[:, 1]) > 0.1


def test_orthonormal_basis_depends_on_seed():
    assert not np.allclose(data.sparse.dictionary(8, "orthonormal", 0), data.sparse.dictionary(8, "orthonormal", 1))
    np.testing.assert_array_equal(data.sparse.dictionary(8, "orthonormal", 3), data.sparse.dictionary(8, "orthonormal", 3))


def test_identity_basis_gives_X_equal_X_raw():
    p = data.sparse.problem(30, 2, 10, seed=0)
    np.testing.assert_array_equal(p.X, p.X_raw)
    np.testing.assert_array_equal(p.y, p.X @ p.b_star)


# --- sparse signal ----------------------------------------------------------------------------


def test_sparse_signal_has_s_nonzeros():
    for s in (1, 3, 10):
        b = data.sparse.sparse_signal(50, s, seed=s)
        assert np.count_nonzero(b) == s


# --- noise ----------------------------------------------------------------------------------


def test_noise_none_is_zero():
    np.testing.assert_array_equal(data.sparse.noise(17, None, 0.3, seed=1), np.zeros(17))
    p = data.sparse.problem(30, 3, 12, snr=None, seed=1)
    np.testing.assert_array_equal(p.xi, 0.0)
    np.testing.assert_array_equal(p.y, p.X @ p.b_star)


def test_noise_power_matches_snr():
    N, snr, power = 200_000, 4.0, 0.05
    xi = data.sparse.noise(N, snr, power, seed=3)
    sigma2 = power / (N * snr)
    assert abs((xi @ xi / N) / sigma2 - 1.0) < 0.1
    assert abs((xi @ xi) / (power / snr) - 1.0) < 0.1  # E||xi||^2 = signal_power / snr


def test_noise_in_problem_uses_s_over_n_power():
    p = data.sparse.problem(100, 10, 20_000, snr=2.0, seed=3)
    assert abs((p.xi @ p.xi) / (10 / 100 / 2.0) - 1.0) < 0.1
    np.testing.assert_allclose(p.y, p.X @ p.b_star + p.xi, atol=1e-15)


def test_noise_stream_is_independent_of_measurement_stream():
    N, n, seed = 400, 50, 3
    p = data.sparse.problem(n, 5, N, snr=10.0, seed=seed)
    xi = p.xi
    standard = np.random.RandomState(seed).randn(N * n + N)
    candidates = [p.X_raw.ravel()[:N], p.X_raw.ravel()[-N:], standard[:N], *p.X_raw.T]
    for c in candidates:
        assert abs(np.corrcoef(xi, c)[0, 1]) < 0.3
        assert not np.allclose(xi / xi[0], c / c[0])  # not a scaled copy
    # deterministic per seed, different across seeds
    np.testing.assert_array_equal(data.sparse.noise(N, 10.0, 0.1, seed=seed), data.sparse.noise(N, 10.0, 0.1, seed=seed))
    assert not np.allclose(data.sparse.noise(N, 10.0, 0.1, seed=seed), data.sparse.noise(N, 10.0, 0.1, seed=seed + 1))


# --- least squares ----------------------------------------------------------------------------


@pytest.mark.parametrize("N", [15, 60])
def test_least_squares_is_minimum_norm_pinv_solution(N):
    p = data.sparse.problem(40, 3, N, snr=20.0, seed=2)
    np.testing.assert_allclose(data.sparse.least_squares(p.X, p.y), np.linalg.pinv(p.X) @ p.y, atol=1e-10)
    np.testing.assert_allclose(p.b_hat, np.linalg.pinv(p.X) @ p.y, atol=1e-10)


@pytest.mark.parametrize("N", [15, 60])
def test_least_squares_with_ridge(N):
    p = data.sparse.problem(40, 3, N, snr=20.0, seed=2)
    beta2 = 0.3
    ridge = np.linalg.solve(p.X.T @ p.X + beta2 * np.eye(40), p.X.T @ p.y)
    np.testing.assert_allclose(data.sparse.least_squares(p.X, p.y, beta2), ridge, atol=1e-10)


def test_b_hat_interpolates_when_N_below_n():
    p = data.sparse.problem(40, 3, 15, seed=2)
    np.testing.assert_allclose(p.X @ p.b_hat, p.y, atol=1e-12)


# --- coherence ----------------------------------------------------------------------------


def test_coherence_values():
    n = 64
    eye = np.eye(n)
    assert data.sparse.coherence(eye, eye) == pytest.approx(1.0, abs=1e-15)
    assert data.sparse.coherence(data.sparse.dictionary(n, "orthonormal", 2)) < 1e-12
    assert data.sparse.coherence(eye) == 0.0
    assert data.sparse.coherence(eye, data.sparse.dictionary(n, "dct")) == pytest.approx(math.sqrt(2 / n), rel=1e-3)


def test_coherence_is_scale_invariant():
    rs = np.random.RandomState(0)
    A, B = rs.randn(10, 4), rs.randn(10, 6)
    mu = data.sparse.coherence(A, B)
    assert data.sparse.coherence(3 * A, 0.1 * B) == pytest.approx(mu, rel=1e-12)
    An = A / np.linalg.norm(A, axis=0)
    Bn = B / np.linalg.norm(B, axis=0)
    assert mu == pytest.approx(np.abs(An.T @ Bn).max(), rel=1e-12)


# --- tensors ------------------------------------------------------------------------------


def test_tensors_round_trip():
    import torch

    p = data.sparse.problem(20, 2, 8, seed=0)
    X, y, b = p.tensors("cpu")
    assert X.dtype == torch.float64 and X.shape == (8, 20) and y.shape == (8,) and b.shape == (20,)
    np.testing.assert_array_equal(X.numpy(), p.X)
    np.testing.assert_array_equal(y.numpy(), p.y)


# --- bad inputs -------------------------------------------------------------------------------


@pytest.fixture
def no_compute(monkeypatch):
    """Make the draws of data.sparse.problem fail, so that a ValueError proves the check came first."""
    def computed(*args, **kwargs):
        raise AssertionError("data.sparse.problem drew data before validating its arguments")

    monkeypatch.setattr(data.sparse, "sparse_signal", computed)
    monkeypatch.setattr(data.sparse, "measurement_matrix", computed)


BAD_INPUTS = [
    (dict(n=10, s=11, N=5), r"s must be an integer in \[1, n\]"),
    (dict(n=10, s=0, N=5), r"s must be an integer in \[1, "),
    (dict(n=10, s=2, N=5, tau=1.5), r"tau must be in \[0\.0, 1\.0\]"),
    (dict(n=10, s=2, N=5, tau=-0.1), r"tau must be in \[0\.0, 1\.0\]"),
    (dict(n=10, s=2, N=5, basis="wavelet"), r"basis must be one of 'identity', 'orthonormal', 'dct', 'fourier'"),
    (dict(n=10, s=2, N=5, variance="1/s"), r"variance must be one of '1/n', '1/N'"),
    (dict(n=10, s=2, N=5, variance=-1.0), r"variance must be in \(0\.0, inf\)"),
    (dict(n=10, s=2, N=0), r"N must be an integer in \[1, inf\)"),
    (dict(n=0, s=1, N=5), r"n must be an integer in \[1, inf\)"),
    (dict(n=10, s=2.5, N=5), r"s must be an integer"),
]


@pytest.mark.parametrize("kwargs, message", BAD_INPUTS)
def test_bad_inputs_fail_before_compute(no_compute, kwargs, message):
    with pytest.raises(ValueError, match=message):
        data.sparse.problem(**kwargs)


def test_negative_snr_is_rejected():
    with pytest.raises(ValueError, match=r"snr must be in \(0\.0, inf\)"):
        data.sparse.problem(10, 2, 5, snr=-1.0)
    with pytest.raises(ValueError, match=r"snr must be in \(0\.0, inf\)"):
        data.sparse.noise(5, 0.0, 1.0)


def test_negative_snr_fails_before_compute(no_compute):
    with pytest.raises(ValueError, match=r"snr must be in \(0\.0, inf\)"):
        data.sparse.problem(10, 2, 5, snr=-1.0)


def test_lower_level_functions_validate():
    with pytest.raises(ValueError, match=r"s must be an integer in \[1, 10\]"):
        data.sparse.sparse_signal(10, 11)
    with pytest.raises(ValueError, match=r"basis must be one of"):
        data.sparse.dictionary(5, "haar")
    with pytest.raises(ValueError, match=r"tau must be in \[0\.0, 1\.0\]"):
        data.sparse.measurement_matrix(5, np.eye(5), tau=2.0)
