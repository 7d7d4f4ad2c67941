"""Tests of grokkit.metrics (event steps, fits) and grokkit.theory (predicted quantities)."""
import math

import numpy as np
import pytest

import grokkit as gk
from grokkit import data, metrics, theory


STEPS = np.array([0, 1, 2, 5, 10, 20, 50, 100, 200])


# --- metrics: event steps -------------------------------------------------------------------


def test_first_step_below_known_answers():
    curves = np.array([
        [1.0, 0.5, 0.2, 0.09, 0.05, 0.2, 0.01, 0.01, 0.01],  # first <= 0.1 at index 3 (step 5)
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.1],  # exactly at the threshold, last record
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],  # never
        [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],  # at step 0
        [np.nan] * 9,  # never (NaN is not below)
    ])
    got = metrics.first_step_below(STEPS, curves, 0.1)
    np.testing.assert_array_equal(got[[0, 1, 3]], [5.0, 200.0, 0.0])
    assert np.isnan(got[2]) and np.isnan(got[4])
    assert got.dtype == float


def test_first_step_below_accepts_one_curve():
    got = metrics.first_step_below(STEPS, np.linspace(1, 0, 9), 0.5)
    assert got.shape == (1,) and got[0] == 10.0


def test_plateau_step_known_answers():
    curves = np.array([
        [10.0, 5.0, 2.0, 1.04, 1.0, 0.98, 1.0, 1.0, 1.0],  # final 1.0; inside 5 % from index 3
        [10.0, 1.0, 5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],  # index 1 inside alone; M = 2 run from index 3
        [1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0],  # final 1/3; never within 5 %
    ])
    got = metrics.plateau_step(STEPS, curves)
    np.testing.assert_array_equal(got[:2], [5.0, 5.0])
    assert np.isnan(got[2])
    # M = 1 takes the isolated record, a tighter tolerance a later one
    assert metrics.plateau_step(STEPS, curves[1], M=1)[0] == 1.0
    assert metrics.plateau_step(STEPS, curves[0], tolerance=0.01)[0] == 50.0  # 0.98 is 2 % off
    # K sets the final value: the mean of the last K records
    ramp = np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.1]])
    assert metrics.plateau_step(STEPS, ramp, K=1, M=1)[0] == 200.0  # final 1.1: 1.0 is 9 % off
    assert metrics.plateau_step(STEPS, ramp, K=2, M=1)[0] == 100.0  # final 1.05: both within 5 %


def test_plateau_step_validates():
    with pytest.raises(ValueError, match=r"K must be an integer in \[1, T\] = \[1, 9\]"):
        metrics.plateau_step(STEPS, np.ones(9), K=0)
    with pytest.raises(ValueError, match=r"M must be an integer in \[1, T\] = \[1, 9\]"):
        metrics.plateau_step(STEPS, np.ones(9), M=0)
    with pytest.raises(ValueError, match=r"tolerance must be in \(0\.0, inf\)"):
        metrics.plateau_step(STEPS, np.ones(9), tolerance=0.0)


def test_value_at():
    curves = np.arange(18, dtype=float).reshape(2, 9)
    got = metrics.value_at(STEPS, curves, np.array([5.0, np.nan]))
    assert got[0] == 3.0 and np.isnan(got[1])
    np.testing.assert_array_equal(metrics.value_at(STEPS, curves, np.array([0.0, 200.0])), [0.0, 17.0])


def test_loglog_slope_recovers_exponent():
    x = np.array([1.0, 2.0, 5.0, 10.0, 100.0, 1e4])
    assert metrics.loglog_slope(x, 3 * x**-1.0) == pytest.approx(-1.0, abs=1e-12)
    assert metrics.loglog_slope(x, 0.5 * x**2.5) == pytest.approx(2.5, abs=1e-12)


def test_loglog_slope_ignores_nan_and_nonpositive():
    x = np.array([1.0, 2.0, 5.0, 10.0, 100.0, 3.0, 4.0, 0.0, -1.0, np.nan, 7.0])
    with np.errstate(divide="ignore"):
        y = 3 * np.abs(x) ** -1.0
    y[5], y[6], y[10] = np.nan, 0.0, -2.0
    assert metrics.loglog_slope(x, y) == pytest.approx(-1.0, abs=1e-12)
    assert metrics.loglog_slope(x.reshape(1, -1), y.reshape(1, -1)) == pytest.approx(-1.0, abs=1e-12)
    assert math.isnan(metrics.loglog_slope([1.0, np.nan], [2.0, 3.0]))


def test_relative_error():
    b_star = np.array([3.0, 4.0])
    np.testing.assert_allclose(metrics.relative_error(np.array([[3.0, 4.0], [0.0, 0.0], [6.0, 8.0]]), b_star),
                               [0.0, 1.0, 1.0])


@pytest.fixture(scope="module")
def grokking_run():
    p = data.sparse.problem(40, 3, 15, variance="1/N", seed=0)
    traj = gk.kernels.subgradient(p.X, p.y, b_star=p.b_star, alpha=1.0 / p.lambda_max, beta1=3e-4, steps=10_000,
                                  device="cpu")
    return p, traj


def test_memorization_before_generalization_threshold(grokking_run):
    _, traj = grokking_run
    t1, t2 = metrics.memorization_generalization(traj, train_threshold=1e-2, test_threshold=1e-2)
    assert np.isfinite(t1).all() and np.isfinite(t2).all()
    assert (t1 <= t2).all()
    assert (t2 - t1 > 1000).all()  # a delay: the model memorizes long before it generalizes
    assert t1[0] in traj.steps and t2[0] in traj.steps
    assert traj.train_error[0, np.searchsorted(traj.steps, t1[0])] <= 1e-2
    assert traj.train_error[0, np.searchsorted(traj.steps, t1[0]) - 1] > 1e-2


def test_memorization_before_generalization_plateau(grokking_run):
    _, traj = grokking_run
    t1, t2 = metrics.memorization_generalization(traj, rule="plateau")
    # both curves settle only once the recovery is done (the training error has a beta1 floor),
    # so the plateau rule gives no ordering; it must find both plateaus of this converged run
    assert np.isfinite(t1).all() and np.isfinite(t2).all()
    assert t1[0] > 1000 and t2[0] > 1000
    np.testing.assert_array_equal(t1, metrics.plateau_step(traj.steps, traj.train_error))
    np.testing.assert_array_equal(t2, metrics.plateau_step(traj.steps, traj.test_error))
    with pytest.raises(ValueError, match=r"rule must be one of 'threshold', 'plateau'"):
        metrics.memorization_generalization(traj, rule="knee")


# --- theory -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def X():
    return data.sparse.problem(30, 3, 12, variance="1/N", seed=2).X


@pytest.mark.parametrize("p, order", [(1, 1), (2, 2), (math.inf, np.inf)])
@pytest.mark.parametrize("beta2", [0.0, 0.3])
def test_rho_is_the_matrix_norm(X, p, order, beta2):
    alpha = 0.05
    M = np.eye(30) - alpha * (X.T @ X + beta2 * np.eye(30))
    assert theory.sparse.rho(X, alpha, beta2, p=p) == pytest.approx(np.linalg.norm(M, order), rel=1e-12)


def test_rho_rejects_other_p(X):
    with pytest.raises(ValueError, match=r"p must be one of 1, 2, inf"):
        theory.sparse.rho(X, 0.1, p=3)


def test_rho_range_contracts_below_the_limit(X):
    lam = np.linalg.norm(X, 2) ** 2
    for c in (0.1, 0.5, 1.0, 1.5, 1.99):
        assert theory.sparse.rho_range(X, c / lam) < 1.0
    assert theory.sparse.rho_range(X, 2.5 / lam) > 1.0
    # on the row space only: rho_2 of the full matrix is 1 (N < n), rho_range is not
    assert theory.sparse.rho(X, 1.0 / lam) == pytest.approx(1.0, abs=1e-12)
    nonzero = np.linalg.svd(X, compute_uv=False) ** 2
    expected = np.max(np.abs(1 - (1.0 / lam) * nonzero))
    assert theory.sparse.rho_range(X, 1.0 / lam) == pytest.approx(expected, rel=1e-10)


def test_range_projector(X):
    P = theory.sparse.range_projector(X)
    np.testing.assert_allclose(P, P.T, atol=1e-12)
    np.testing.assert_allclose(P @ P, P, atol=1e-12)
    assert np.trace(P) == pytest.approx(np.linalg.matrix_rank(X), abs=1e-10)
    np.testing.assert_allclose(P @ X.T, X.T, atol=1e-12)  # rows of X are in the range
    rank_deficient = np.vstack([X[:5], X[:5]])
    assert np.trace(theory.sparse.range_projector(rank_deficient)) == pytest.approx(5, abs=1e-10)


def test_eigenvalues(X):
    lam = theory.sparse.eigenvalues(X)
    assert lam.shape == (30,)
    assert (np.diff(lam) <= 0).all() and (lam >= 0).all()
    np.testing.assert_allclose(lam[:12], np.linalg.svd(X, compute_uv=False) ** 2, rtol=1e-10)


def test_memorization_radius():
    assert np.isinf(theory.sparse.memorization_radius(10, 0.1, 1e-3, 1.0))
    assert np.isinf(theory.sparse.memorization_radius(10, [0.1, 0.2], 1e-3, 1.3)).all()
    assert theory.sparse.memorization_radius(4, 0.1, 0.01, 0.5) == pytest.approx(2 * 0.1 * 0.01 * 2 / 0.5)
    assert theory.sparse.memorization_radius(8, 0.1, 0.01, 0.5, p=1) == pytest.approx(2 * 0.1 * 0.01 * 8 / 0.5)


def test_memorization_time_worked_example():
    # t1 = ceil(-ln(1 + (1 - rho) d / (alpha beta1 sqrt n)) / ln rho)
    #    = ceil(-ln(1 + 0.5 * 1 / 0.002) / ln 0.5) = ceil(ln 251 / ln 2) = ceil(7.97) = 8
    assert theory.sparse.memorization_time(1.0, 4, 0.1, 0.01, 0.5) == 8
    np.testing.assert_array_equal(theory.sparse.memorization_time(1.0, 4, np.array([0.1, 0.1]), np.array([0.01, 1.0]),
                                                           0.5), [8, math.ceil(math.log(1 + 0.5 / 0.2) / math.log(2))])
    assert np.isinf(theory.sparse.memorization_time(1.0, 4, 0.1, 0.01, 1.0))
    assert np.isinf(theory.sparse.memorization_time(1.0, 4, 0.1, 0.01, 0.0))


def test_generalization_delay():
    b_hat = np.array([0.1, -0.4, 0.2])
    assert theory.sparse.generalization_delay(b_hat, 0.1, 1e-3) == pytest.approx(0.4 / 1e-4)
    np.testing.assert_allclose(theory.sparse.generalization_delay(b_hat, np.array([0.1, 0.2]), 1e-3), [4000.0, 2000.0])
    b_star = np.array([0.1, -0.1, 0.0])
    assert theory.sparse.generalization_delay_code(b_hat, b_star, 0.1, 1e-3) == pytest.approx(0.3 / 1e-4)


def test_step_size_limit(X):
    lam = np.linalg.norm(X, 2) ** 2
    assert theory.sparse.step_size_limit(X) == pytest.approx(2 / lam, rel=1e-12)
    assert theory.sparse.step_size_limit(X, 0.7) == pytest.approx(2 / (lam + 0.7), rel=1e-12)


def test_step_size_limit_agrees_with_the_kernels(X):
    y = X @ np.ones(30)
    limit = theory.sparse.step_size_limit(X, 0.2)
    gk.kernels.ista(X, y, alpha=0.999 * limit, beta1=0.0, beta2=0.2, steps=1, device="cpu")
    with pytest.raises(ValueError, match=r"alpha must be in \(0, 2/\(lambda_max \+ beta2\)\)"):
        gk.kernels.ista(X, y, alpha=1.001 * limit, beta1=0.0, beta2=0.2, steps=1, device="cpu")


def test_range_distance_ignores_the_null_space():
    rs = np.random.RandomState(0)
    X = rs.randn(5, 12)
    b_hat = np.linalg.pinv(X) @ rs.randn(5)
    null = np.eye(12) - np.linalg.pinv(X) @ X
    b = b_hat + null @ rs.randn(12)  # differs from b_hat only in the null space of X
    assert theory.sparse.range_distance(X, b, b_hat) <= 1e-12
    row = X.T @ rs.randn(5)
    np.testing.assert_allclose(theory.sparse.range_distance(X, np.stack([b_hat + row, b + row]), b_hat),
                               np.linalg.norm(row), rtol=1e-10)


def test_rank_trend_is_mean_spearman():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(0)
    x = np.array([1e-4, 1e-3, 1e-2, 1e-1, 0.3])
    rows = rng.normal(size=(4, 5))
    rows[0, 1] = rows[0, 3]  # a tie
    expected = np.mean([spearmanr(x, row).statistic for row in rows])
    assert metrics.rank_trend(x, rows) == pytest.approx(expected, abs=1e-12)
    assert metrics.rank_trend(x, [10 - x, 5 - 2 * x]) == pytest.approx(-1.0)
    assert metrics.rank_trend(x, x**2) == pytest.approx(1.0)


def test_rank_trend_validates():
    with pytest.raises(ValueError, match="rows must have shape"):
        metrics.rank_trend([1.0, 2.0], [[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="rows"):
        metrics.rank_trend([1.0, 2.0], [[1.0, np.nan]])


def test_first_step_above_and_minimum_step():
    steps = np.array([0, 1, 2, 5, 10])
    acc = np.array([[0.1, 0.5, 0.95, 1.0, 1.0], [0.1, 0.2, 0.3, 0.4, 0.5]])
    np.testing.assert_array_equal(gk.metrics.first_step_above(steps, acc, 0.9), [2.0, np.nan])
    loss = np.array([[3.0, 1.0, 0.5, 0.5, 0.7], [1.0, np.nan, 0.1, 0.1, 0.1]])
    np.testing.assert_array_equal(gk.metrics.minimum_step(steps, loss), [2.0, np.nan])
    with pytest.raises(ValueError, match=r"threshold must be"):
        gk.metrics.first_step_above(steps, acc, np.nan)
