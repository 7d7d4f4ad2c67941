"""Tests of the realistic signals of §C.12 (Figures 36–41): the digit, the sinusoid in the real
Fourier basis, the sparse polynomial, the problems built on them, and the snapshot plot."""
import math

import matplotlib
import numpy as np
import pytest

import grokkit.data as data

matplotlib.use("Agg")


def test_digit_signal_has_the_papers_sparsity():
    from sklearn.datasets import load_digits

    b = data.sparse.digit_signal()
    digits = load_digits()
    assert digits.target[0] == 0 and b.shape == (64,)
    assert np.count_nonzero(b) == 22                      # the paper's s = 22 (34.38 %)
    raw = digits.images[0].ravel()
    expected = np.where(raw / 15.0 >= 0.5, raw / 15.0, 0.0)   # min 0, max 15 for this image
    np.testing.assert_allclose(b, expected, atol=1e-15)
    assert b[b > 0].min() >= 0.5 and b.max() == 1.0


@pytest.mark.parametrize("n", [7, 8, 100])
def test_fourier_dictionary_is_orthonormal_real_fourier(n):
    phi = data.sparse.dictionary(n, "fourier")
    np.testing.assert_allclose(phi.T @ phi, np.eye(n), atol=1e-12)
    j = np.arange(n)
    np.testing.assert_allclose(phi[:, 3], math.sqrt(2 / n) * np.cos(2 * np.pi * 2 * j / n), atol=1e-14)
    np.testing.assert_allclose(phi[:, 4], math.sqrt(2 / n) * np.sin(2 * np.pi * 2 * j / n), atol=1e-14)


def test_sinusoid_signal_matches_the_time_domain_formula():
    F, A = [10, 25, 40, 75, 95], [1.0, 0.8, 1.2, 1.5, 0.5]
    P = [0.0, np.pi / 4, 3 * np.pi / 8, 3 * np.pi / 4, np.pi]
    b = data.sparse.sinusoid_signal()
    t = np.arange(100)
    a = sum(Ak * np.cos(2 * np.pi * k * t / 100 + p) for k, Ak, p in zip(F, A, P))
    np.testing.assert_allclose(data.sparse.dictionary(100, "fourier") @ b, a, atol=1e-12)
    # hand-worked: 75 folds onto 25 (phase -3pi/4) and 95 onto 5 (phase -pi):
    # 0.8 cos(x + pi/4) + 1.5 cos(x - 3pi/4) = -0.7 cos(x + pi/4)
    r = math.sqrt(50)
    expected = {2 * 5 - 1: -0.5 * r, 2 * 10 - 1: r, 2 * 25 - 1: -0.7 * r * math.cos(np.pi / 4),
                2 * 25: 0.7 * r * math.sin(np.pi / 4), 2 * 40 - 1: 1.2 * r * math.cos(3 * np.pi / 8),
                2 * 40: -1.2 * r * math.sin(3 * np.pi / 8)}
    assert sorted(np.flatnonzero(b)) == sorted(expected)
    np.testing.assert_allclose([b[i] for i in expected], list(expected.values()), atol=1e-12)
    assert np.count_nonzero(np.abs(np.fft.fft(a)) > 1e-9) == 8   # the complex DFT: 8, not 5


def test_sinusoid_signal_rejects_bad_input():
    with pytest.raises(ValueError, match="same length"):
        data.sparse.sinusoid_signal(100, [1, 2], [1.0], [0.0])
    with pytest.raises(ValueError, match="n must be"):
        data.sparse.sinusoid_signal(1)
    with pytest.raises(ValueError, match="amplitudes must give a nonzero signal"):
        data.sparse.sinusoid_signal(100, [3], [0.0], [0.0])


def test_signal_problem_measures_the_given_signal():
    b = data.sparse.sinusoid_signal()
    p = data.sparse.signal_problem(b, 30, basis="fourier", variance="1/N", seed=4)
    phi = data.sparse.dictionary(100, "fourier")
    X_raw = data.sparse.measurement_matrix(30, phi, 0.0, "1/N", 4)
    np.testing.assert_allclose(p.X, X_raw @ phi)
    np.testing.assert_allclose(p.y, X_raw @ (phi @ b))       # measurements of a* = phi b*
    assert p.s == 6 and p.xi.sum() == 0
    with pytest.raises(ValueError, match="b_star must be a nonzero vector"):
        data.sparse.signal_problem(np.zeros(5), 3)
    with pytest.raises(ValueError, match="N must be"):
        data.sparse.signal_problem(b, 0)


def test_make_problem_unchanged_by_the_refactor():
    p = data.sparse.problem(100, 5, 30, variance="1/N", snr=1e8, seed=1)
    phi = np.eye(100)
    X = data.sparse.measurement_matrix(30, phi, 0.0, "1/N", 1)
    xi = data.sparse.noise(30, 1e8, 0.05, 1)
    np.testing.assert_array_equal(p.X, X)
    np.testing.assert_array_equal(p.y, X @ data.sparse.sparse_signal(100, 5, 1) + xi)


def test_polynomial_features_hand_worked():
    q = data.sparse.polynomial_features(np.array([[2.0, 3.0]]))
    np.testing.assert_array_equal(q, [[4.0, 6.0, 9.0, 2.0, 3.0]])   # x1², x1x2, x2², x1, x2
    with pytest.raises(ValueError, match="x must be a matrix"):
        data.sparse.polynomial_features(np.ones(3))


def test_polynomial_problem_values_are_the_polynomial():
    p = data.sparse.polynomial_problem(4, 3, 12, seed=2)
    assert p.n == 4 * 5 // 2 + 4 and p.s == 3 and p.N == 12
    x = np.random.default_rng([2, 3]).standard_normal((12, 4))
    a = p.b_star
    M = np.zeros((4, 4))
    M[np.triu_indices(4)] = a[:10]
    poly = np.einsum("ki,ij,kj->k", x, M, x) + x @ a[10:]       # p*(x) computed directly
    np.testing.assert_allclose(p.y * math.sqrt(12), poly, atol=1e-12)
    with pytest.raises(ValueError, match="s must be"):
        data.sparse.polynomial_problem(2, 6, 10)


def test_snapshots_draws_images_and_curves():
    from grokkit import plots

    fig = plots.snapshots(np.random.default_rng(0).random((3, 64)), ["a", "b", "c"], shape=(8, 8))
    images = [ax for ax in fig.axes if ax.images]
    assert len(images) == 3 and images[1].get_title() == "b"
    np.testing.assert_array_equal(images[0].images[0].get_array().shape, (8, 8))
    fig = plots.snapshots(np.zeros((2, 5)), ["x", "y"], reference=np.ones(5))
    assert len(fig.axes) == 2 and len(fig.axes[0].lines) == 2
    with pytest.raises(ValueError, match="one title per row"):
        plots.snapshots(np.zeros((2, 5)), ["x"])
