"""Lyu et al. (2024) additions: the classification data of Figure 1, the max-margin classifiers,
the time scale T±, the misgrokking population accuracy and the cosine metric."""
import math

import numpy as np
import pytest
from scipy.optimize import linprog, minimize

import grokkit as gk
from grokkit import baselines


# --- data ------------------------------------------------------------------------------------

def test_sparse_classification_properties():
    task = gk.data.background.sparse_classification(200, 3, 50, n_test=80, seed=4)
    assert task.X.shape == (50, 200) and task.X_test.shape == (80, 200) and (task.n, task.N) == (200, 50)
    assert set(np.unique(task.X)) == {-1.0, 1.0} and set(np.unique(task.X_test)) == {-1.0, 1.0}
    assert np.count_nonzero(task.w_star) == 3 and set(np.abs(task.w_star[:3])) == {1.0}
    assert not task.w_star[3:].any()
    np.testing.assert_array_equal(task.y, np.sign(task.X @ task.w_star))      # s odd: no tie
    np.testing.assert_array_equal(task.y_test, np.sign(task.X_test @ task.w_star))
    # the margins of the proofs of Theorems E.4 and E.5: 1/s in l1, 1/sqrt(s) in l2
    assert np.min(task.y * (task.X @ task.w_star)) / np.abs(task.w_star).sum() == pytest.approx(1 / 3)


def test_sparse_classification_even_ties_and_seeds():
    task = gk.data.background.sparse_classification(30, 2, 400, n_test=5, seed=0)
    ties = task.X @ task.w_star == 0
    assert ties.any() and np.all(task.y[ties] == -1.0)                          # the authors' rule
    same = gk.data.background.sparse_classification(30, 2, 400, n_test=5, seed=0)
    np.testing.assert_array_equal(task.X, same.X)
    assert not np.array_equal(task.X, gk.data.background.sparse_classification(30, 2, 400, n_test=5, seed=1).X)
    more_tests = gk.data.background.sparse_classification(30, 2, 400, n_test=50, seed=0)      # same training set
    np.testing.assert_array_equal(task.X, more_tests.X)
    np.testing.assert_array_equal(task.w_star, more_tests.w_star)
    np.testing.assert_array_equal(task.X_test, more_tests.X_test[:5])


def test_margin_classification_properties():
    gamma = 6.0
    task = gk.data.background.margin_classification(300, 40, gamma, n_test=60, seed=2)
    assert np.linalg.norm(task.w_star) == pytest.approx(1.0)
    # x = z + y (gamma/2) w*, y = sign<z, w*>: the margin along w* is |<z, w*>| + gamma/2
    for X, y in ((task.X, task.y), (task.X_test, task.y_test)):
        along = y * (X @ task.w_star)
        z = X - (gamma / 2) * y[:, None] * task.w_star
        np.testing.assert_allclose(along, np.abs(z @ task.w_star) + gamma / 2)
        np.testing.assert_array_equal(y, np.where(z @ task.w_star > 0, 1.0, -1.0))


@pytest.mark.parametrize("call, match", [
    (lambda: gk.data.background.sparse_classification(10, 11, 5), "s must be"),
    (lambda: gk.data.background.sparse_classification(10, 2, 0), "N must be"),
    (lambda: gk.data.background.sparse_classification(10, 2, 5, n_test=0), "n_test must be"),
    (lambda: gk.data.background.sparse_classification(10, 2, 5, seed=-1), "seed must be"),
    (lambda: gk.data.background.margin_classification(10, 5, -1.0), "gamma must be"),
    (lambda: gk.data.background.margin_classification(0, 5, 1.0), "n must be"),
])
def test_data_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- max-margin classifiers -------------------------------------------------------------------

@pytest.fixture(scope="module")
def task():
    return gk.data.background.sparse_classification(60, 3, 25, n_test=5, seed=1)


@pytest.mark.parametrize("solver", ["CLARABEL", "HIGHS"])
def test_max_l1_margin_against_linprog(task, solver):
    """Against scipy's linprog on the epigraph form min 1ᵀt, -t <= w <= t (another formulation)."""
    X, y = task.X, task.y
    N, n = X.shape
    c = np.r_[np.zeros(n), np.ones(n)]
    A = np.block([[-(y[:, None] * X), np.zeros((N, n))], [np.eye(n), -np.eye(n)], [-np.eye(n), -np.eye(n)]])
    b = np.r_[-np.ones(N), np.zeros(2 * n)]
    ref = linprog(c, A_ub=A, b_ub=b, bounds=(None, None), method="highs-ipm")
    sol = baselines.max_margin.__wrapped__(X, y, 1, solver=solver)
    assert np.abs(sol.w).sum() == pytest.approx(1.0)
    assert sol.margin == pytest.approx(1 / ref.fun, rel=1e-6)                  # the optimal margin
    assert np.min(y * (X @ sol.w)) == pytest.approx(sol.margin)


def test_max_l2_margin_kkt(task):
    """KKT of min ½‖w‖² s.t. y_i<w, x_i> >= 1: w = Σ a_i y_i x_i with a >= 0 on the active set."""
    X, y = task.X, task.y
    sol = baselines.max_margin.__wrapped__(X, y, 2)
    assert np.linalg.norm(sol.w) == pytest.approx(1.0)
    w_bar = sol.w / sol.margin                                                # margin 1
    slack = y * (X @ w_bar)
    assert slack.min() == pytest.approx(1.0, abs=1e-6)
    active = slack < 1 + 1e-5
    a, *_ = np.linalg.lstsq((y[active, None] * X[active]).T, w_bar, rcond=None)
    np.testing.assert_allclose((y[active, None] * X[active]).T @ a, w_bar, atol=1e-5)
    assert a.min() > -1e-6


def test_max_l2_margin_against_scipy(task):
    X, y = task.X, task.y
    cons = {"type": "ineq", "fun": lambda w: y * (X @ w) - 1, "jac": lambda w: y[:, None] * X}
    ref = minimize(lambda w: 0.5 * w @ w, np.linalg.pinv(X) @ y * 2, jac=lambda w: w,
                   constraints=[cons], method="SLSQP", options={"ftol": 1e-12, "maxiter": 500})
    sol = baselines.max_margin.__wrapped__(X, y, 2)
    np.testing.assert_allclose(sol.w, ref.x / np.linalg.norm(ref.x), atol=1e-5)
    assert sol.margin == pytest.approx(1 / np.linalg.norm(ref.x), rel=1e-5)


def test_max_l1_margin_recovers_sparse_truth():
    task = gk.data.background.sparse_classification(300, 3, 80, n_test=5, seed=0)
    sol = baselines.max_margin.__wrapped__(task.X, task.y, 1)
    np.testing.assert_allclose(sol.w, task.w_star / 3, atol=1e-6)


@pytest.mark.parametrize("args, match", [
    ((np.ones((3, 2)), np.array([1.0, -1.0, 0.5]), 1), "y must hold labels"),
    ((np.ones((3, 2)), np.array([1.0, -1.0, 1.0]), 3), "p must be one of"),
    ((np.ones((3, 2)), np.array([1.0, -1.0]), 1), "X and y must have shapes"),
    ((np.full((2, 2), np.nan), np.array([1.0, -1.0]), 1), "X must be finite"),
    ((np.ones((2, 2)), np.array([1.0, -1.0]), 1), "linearly separable"),
    ((np.ones((2, 2)), np.array([1.0, -1.0]), 2), "linearly separable"),
])
def test_max_margin_bad_inputs(args, match):
    with pytest.raises(ValueError, match=match):
        baselines.max_margin.__wrapped__(*args)


def test_max_margin_bad_solver(task):
    with pytest.raises(ValueError, match="solver must be one of"):
        baselines.max_margin.__wrapped__(task.X, task.y, 2, solver="HIGHS")


# --- theory -----------------------------------------------------------------------------------

def test_dichotomy_time():
    n, zeta, lam, lr = 1000, 128 / math.sqrt(2000), 1e-2, 0.01
    assert gk.theory.background.dichotomy_time(zeta, lam, n) == pytest.approx(math.log(128) / lam)
    assert gk.theory.background.dichotomy_time(zeta, lam, n, alpha=lr) == pytest.approx(math.log(128) / (lam * lr))
    assert gk.theory.background.dichotomy_time(zeta, lam, n, c=-0.5) == pytest.approx(0.5 * math.log(128) / lam)
    assert gk.theory.background.dichotomy_time(zeta, lam, n, c=0.25) == pytest.approx(1.25 * math.log(128) / lam)
    grid = gk.theory.background.dichotomy_time(np.array([1.0, 2.0]), np.array([0.1, 0.2]), 8)
    np.testing.assert_allclose(grid, [math.log(4) / 0.1, math.log(8) / 0.2])


@pytest.mark.parametrize("kwargs, match", [
    (dict(init_scale=0.1, beta2=1e-2, n=8), "init_scale must be"),      # ||theta(0)|| = 0.4 <= 1
    (dict(init_scale=1.0, beta2=0.0, n=8), "beta2 must be"),
    (dict(init_scale=1.0, beta2=1e-2, n=0), "n must be"),
    (dict(init_scale=1.0, beta2=1e-2, n=8, c=-1.0), "c must be"),
    (dict(init_scale=1.0, beta2=1e-2, n=8, alpha=0.0), "alpha must be"),
])
def test_dichotomy_time_bad_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gk.theory.background.dichotomy_time(**kwargs)


def test_margin_classification_accuracy_monte_carlo():
    gamma, n = 3.0, 50
    rs = np.random.RandomState(0)
    w_star = rs.standard_normal(n)
    w_star /= np.linalg.norm(w_star)
    W = np.stack([w_star + 0.3 * rs.standard_normal(n), rs.standard_normal(n), -w_star + 0.1 * rs.standard_normal(n)])
    exact = gk.theory.background.margin_classification_accuracy(W, w_star, gamma)
    Z = rs.standard_normal((400_000, n))
    y = np.where(Z @ w_star > 0, 1.0, -1.0)
    X = Z + (gamma / 2) * y[:, None] * w_star
    sampled = (y[:, None] * (X @ W.T) > 0).mean(axis=0)
    np.testing.assert_allclose(exact, sampled, atol=4 * 0.5 / math.sqrt(Z.shape[0]))


def test_margin_classification_accuracy_limits():
    w_star = np.array([0.6, 0.8])
    acc = gk.theory.background.margin_classification_accuracy(np.stack([w_star, -w_star, np.zeros(2)]), w_star, 2.0)
    np.testing.assert_allclose(acc, [1.0, 0.0, 0.5])
    # gamma = 0 and w orthogonal to w*: a fair coin
    assert gk.theory.background.margin_classification_accuracy(np.array([0.8, -0.6]), w_star, 0.0) == pytest.approx(0.5)


@pytest.mark.parametrize("args, match", [
    ((np.ones(3), np.array([1.0, 0.0]), 1.0), "w and w_star must have shapes"),
    ((np.ones(2), np.array([1.0, 1.0]), 1.0), "w_star must be a unit vector"),
    ((np.ones(2), np.array([1.0, 0.0]), -1.0), "gamma must be"),
    ((np.array([np.inf, 0.0]), np.array([1.0, 0.0]), 1.0), "w must be finite"),
])
def test_margin_classification_accuracy_bad_inputs(args, match):
    with pytest.raises(ValueError, match=match):
        gk.theory.background.margin_classification_accuracy(*args)


def test_margin_classification_accuracy_of_projection_and_norm():
    """The accuracy from c = <w, w*> and ||w|| alone is the one from w."""
    rs = np.random.RandomState(1)
    w_star = rs.standard_normal(40)
    w_star /= np.linalg.norm(w_star)
    W = np.stack([w_star + s * rs.standard_normal(40) for s in (0.0, 0.05, 0.3, 3.0)])
    np.testing.assert_allclose(
        gk.theory.background.margin_classification_accuracy_of(W @ w_star, np.linalg.norm(W, axis=1), 2.0),
        gk.theory.background.margin_classification_accuracy(W, w_star, 2.0), atol=1e-12)
    with pytest.raises(ValueError, match="norm must be at least"):
        gk.theory.background.margin_classification_accuracy_of(np.array([1.0]), np.array([0.5]), 2.0)
    with pytest.raises(ValueError, match="c and norm must have one shape"):
        gk.theory.background.margin_classification_accuracy_of(np.ones(2), np.ones(3), 2.0)


def test_diagonal_net_projections_are_those_of_its_iterates():
    """``directions`` records <beta, d_k> at every record: the same numbers as the recorded iterates give."""
    tasks = [gk.data.background.margin_classification(300, 16, 5.0, n_test=50, seed=k) for k in range(2)]
    X, y = np.stack([t.X for t in tasks]), np.stack([t.y for t in tasks])
    D = np.stack([np.stack([t.w_star, np.ones(300) / np.sqrt(300)]) for t in tasks])      # (G, 2, n)
    run = gk.kernels.diagonal_net(X, y, alpha=0.1, beta2=1e-2, init_scale=0.5, loss="logistic", steps=200,
                                  directions=D, record_b=True, dense=0, per_decade=10, device="cpu")
    assert run.projections.shape == (2, len(run.steps), 2)
    np.testing.assert_allclose(run.projections, np.einsum("gtn,gkn->gtk", run.b, D), atol=1e-12)
    with pytest.raises(ValueError, match="directions must have shape"):
        gk.kernels.diagonal_net(X, y, alpha=0.1, steps=2, loss="logistic", directions=D[:, :, :5], device="cpu")


# --- metrics ----------------------------------------------------------------------------------

def test_cosine():
    b = np.array([[[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]])
    out = gk.metrics.cosine(b, np.array([2.0, 0.0]))
    np.testing.assert_allclose(out[0, :2], [1.0, 1 / math.sqrt(2)])
    assert np.isnan(out[0, 2])
    with pytest.raises(ValueError, match="reference must be nonzero"):
        gk.metrics.cosine(b, np.zeros(2))
    with pytest.raises(ValueError, match="shapes"):
        gk.metrics.cosine(b, np.ones(3))


# --- the kernel on Lyu et al.'s data: a short grokking run ------------------------------------

def test_diagonal_net_groks_on_sparse_classification():
    """Figure 1a at a tiny scale: the plateau is w2*'s, the end w1*'s direction."""
    task = gk.data.background.sparse_classification(200, 3, 40, n_test=300, seed=0)
    w = {q: baselines.max_margin.__wrapped__(task.X, task.y, q).w for q in (1, 2)}
    zeta, lam, lr = 32 / math.sqrt(400), 0.08, 0.05
    T = gk.theory.background.dichotomy_time(zeta, lam, 200, alpha=lr)
    run = gk.kernels.diagonal_net(task.X, task.y, alpha=lr, beta2=lam, init_scale=zeta, loss="logistic",
                                  X_test=task.X_test, y_test=task.y_test, steps=int(4 * T), record_b=True,
                                  device="cpu")
    early = np.searchsorted(run.steps, 0.2 * T)
    assert run.train_error[0, early] == 0.0
    assert gk.metrics.cosine(run.b[0, early], w[2]) > 0.95
    assert gk.metrics.cosine(run.b_final[0], w[1]) > 0.95 > gk.metrics.cosine(run.b_final[0], w[2])
    assert run.test_error[0, -1] < 0.05 < 0.2 < run.test_error[0, early]
