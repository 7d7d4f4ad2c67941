"""The s x N study of Figures 13-24: its problems, initial point, memorization-time bound,
per-configuration summary and the panels of curves against N."""
import math
from types import SimpleNamespace

import numpy as np
import pytest

import grokkit as gk
from grokkit import data, metrics, theory


def test_sn_problems_order_labels_and_nested_rows():
    problems, labels = data.sparse.sn_problems(30, [1, 4], [6, 10, 15], variance="1/N", seed=1, x_seed=1)
    np.testing.assert_array_equal(labels["s"], [1, 1, 1, 4, 4, 4])
    np.testing.assert_array_equal(labels["N"], [6, 10, 15, 6, 10, 15])
    for q, s, N in zip(problems, labels["s"], labels["N"]):
        ref = data.sparse.problem(30, s, N, variance="1/N", seed=1, x_seed=1)
        np.testing.assert_array_equal(q.X, ref.X)
        np.testing.assert_array_equal(q.y, ref.y)
        assert q.s == s and q.N == N
    # one b* per s for every N; the rows of a smaller N are the first rows of a larger one (variance 1/N)
    np.testing.assert_array_equal(problems[0].b_star, problems[2].b_star)
    assert not np.array_equal(problems[0].b_star, problems[3].b_star)
    np.testing.assert_allclose(problems[0].X * math.sqrt(6), problems[2].X[:6] * math.sqrt(15), rtol=1e-14)


def test_sn_problems_refuses_bad_grids_before_drawing():
    with pytest.raises(ValueError, match=r"s must be an integer in \[1, n\] = \[1, 30\], got 31"):
        data.sparse.sn_problems(30, [1, 31], [10])
    with pytest.raises(ValueError, match="s must be a grid of distinct integers"):
        data.sparse.sn_problems(30, [5, 5], [10])
    with pytest.raises(ValueError, match=r"N must be an integer in \[1, inf\), got 0"):
        data.sparse.sn_problems(30, [5], [0, 10])
    with pytest.raises(ValueError, match="N must be a grid of distinct integers"):
        data.sparse.sn_problems(30, [5], [10, 10])
    with pytest.raises(ValueError, match="variance"):
        data.sparse.sn_problems(30, [5], [10], variance="1/s")
    with pytest.raises(ValueError, match="x_seed"):
        data.sparse.sn_problems(30, [5], [10], x_seed=-1)


@pytest.mark.parametrize("init", ["random", "constant"])
def test_initial_point_is_the_kernels_first_iterate(init):
    p = data.sparse.problem(20, 3, 10, seed=2)
    traj = gk.kernels.subgradient(p.X, p.y, b_star=p.b_star, alpha=0.1, beta1=1e-3, steps=3, init=init,
                                  init_scale=0.5, seed=7, record_b=True, device="cpu")
    b1 = gk.kernels.initial_point(20, 0.5, init, 7)
    np.testing.assert_array_equal(traj.b[0, 0], b1)
    if init == "constant":
        np.testing.assert_array_equal(b1, np.full(20, 0.5))
    else:
        assert abs(np.linalg.norm(b1) - 0.5) < 0.25  # zeta N(0, I/n): norm about zeta
    with pytest.raises(ValueError, match="init_scale"):
        gk.kernels.initial_point(20, -1.0)
    with pytest.raises(ValueError, match="init must be one of"):
        gk.kernels.initial_point(20, 1.0, "zeros")


def _t1_numpy(X, y, b1, alpha, beta1):
    """Theorem C.8's t1 on the row space of X, p = 2, written out with numpy alone."""
    U, sv, Vt = np.linalg.svd(X, full_matrices=False)
    keep = sv > 1e-10 * sv[0]
    V, lam = Vt[keep].T, sv[keep] ** 2
    b_hat = V @ ((U[:, keep].T @ y) / sv[keep])  # minimum-norm least squares
    rho = np.abs(1 - alpha * lam).max()
    d0 = np.linalg.norm(V.T @ (b1 - b_hat))
    n = X.shape[1]
    return math.ceil(-math.log(1 + (1 - rho) * d0 / (alpha * beta1 * math.sqrt(n))) / math.log(rho))


def test_row_space_memorization_time_against_numpy_and_on_a_stack():
    problems, _ = data.sparse.sn_problems(40, [2, 5], [8, 20], variance="1/N", seed=3, x_seed=4)
    b1 = gk.kernels.initial_point(40, 1e-2, "random", 1)
    alone = [theory.sparse.row_space_memorization_time(q.X, q.y, b1, 0.1, 1e-3) for q in problems]
    assert alone == [_t1_numpy(q.X, q.y, b1, 0.1, 1e-3) for q in problems]
    X, y, _ = data.sparse.stack_problems(problems)  # zero rows change nothing
    np.testing.assert_array_equal(theory.sparse.row_space_memorization_time(X, y, b1, 0.1, 1e-3), alone)
    # a smaller alpha beta1 takes longer
    assert theory.sparse.row_space_memorization_time(problems[0].X, problems[0].y, b1, 0.1, 1e-5) > alone[0]


def _t1_authors(X, y, b1, alpha, beta1, beta2=0.0):
    """The authors' t_1_approx (compressed_sensing.ipynb, the summaries of the s x N sweeps), as they write it."""
    n = X.shape[1]
    _, Sigma, _ = np.linalg.svd(X.T @ X, full_matrices=True)
    r = np.linalg.matrix_rank(X.T @ X)
    rho = np.max(1 - alpha * (Sigma[:r] + beta2))
    a_LS = np.linalg.pinv(X.T @ X + beta2 * np.eye(n)) @ X.T @ y
    return -np.log(1 + (1 - rho) * np.linalg.norm(b1 - a_LS, ord=2) / (alpha * beta1)) / np.log(rho)


def test_code_memorization_time_is_the_authors_formula_and_above_the_theorems():
    problems, _ = data.sparse.sn_problems(40, [2, 5], [8, 20, 30], variance="1/N", seed=3, x_seed=4)
    b1 = gk.kernels.initial_point(40, 1e-2, "random", 1)
    alone = [theory.sparse.code_memorization_time(q.X, q.y, b1, 0.1, 1e-3) for q in problems]
    np.testing.assert_allclose(alone, [_t1_authors(q.X, q.y, b1, 0.1, 1e-3) for q in problems], rtol=1e-9)
    X, y, _ = data.sparse.stack_problems(problems)  # zero rows change nothing
    np.testing.assert_allclose(theory.sparse.code_memorization_time(X, y, b1, 0.1, 1e-3), alone, rtol=1e-12)
    # without n^{1/2} the authors' version lies above Theorem C.8's (same rho here: alpha lambda_max < 1)
    theorem = theory.sparse.row_space_memorization_time(X, y, b1, 0.1, 1e-3)
    assert np.all(np.asarray(alone) > theorem - 1)
    assert theory.sparse.code_memorization_time(X[0], y[0], b1, 0.1, 0.0) == math.inf
    with pytest.raises(ValueError, match="X, y and b1 must have shapes"):
        theory.sparse.code_memorization_time(X[0], y[0][:3], b1, 0.1, 1e-3)
    with pytest.raises(ValueError, match=r"alpha must be in \(0.0, inf\), got 0.0"):
        theory.sparse.code_memorization_time(X[0], y[0], b1, 0.0, 1e-3)


def test_row_space_memorization_time_refuses_bad_input():
    q = data.sparse.problem(20, 3, 10)
    b1 = np.zeros(20)
    with pytest.raises(ValueError, match="X, y and b1 must have shapes"):
        theory.sparse.row_space_memorization_time(q.X, q.y[:5], b1, 0.1, 1e-3)
    with pytest.raises(ValueError, match="X, y and b1 must have shapes"):
        theory.sparse.row_space_memorization_time(q.X, q.y, b1[:5], 0.1, 1e-3)
    with pytest.raises(ValueError, match=r"alpha must be in \(0.0, inf\), got 0.0"):
        theory.sparse.row_space_memorization_time(q.X, q.y, b1, 0.0, 1e-3)
    with pytest.raises(ValueError, match="beta1 must be in"):
        theory.sparse.row_space_memorization_time(q.X, q.y, b1, 0.1, -1.0)
    with pytest.raises(ValueError, match="b1 must be finite|b1"):
        theory.sparse.row_space_memorization_time(q.X, q.y, np.full(20, np.nan), 0.1, 1e-3)


def test_sweep_summary_hand_worked():
    steps = np.array([0, 1, 2, 3, 4, 5, 6, 7])
    train = np.array([[1.0, 0.5, 0.05, 0.01, 0.01, 0.01, 0.01, 0.01],
                      [1.0, 0.5, 0.3, 0.2, 0.005, 0.002, 0.001, 0.001]])
    test = np.array([[1.0, 0.9, 0.9, 0.5, 0.1, 0.02, 0.02, 0.02],
                     [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]])
    traj = SimpleNamespace(steps=steps, train_error=train, test_error=test)
    out = metrics.sweep_summary(traj, [0.1, 0.01])
    np.testing.assert_array_equal(out["t1"], [2, 4])
    np.testing.assert_array_equal(out["t2"], [5, 0])
    np.testing.assert_array_equal(out["train_error_at_t1"], [0.05, 0.005])
    np.testing.assert_array_equal(out["min_train_error"], [0.01, 0.001])
    np.testing.assert_array_equal(out["min_test_error"], [0.02, 1.0])
    np.testing.assert_array_equal(out["final_train_error"], [0.01, 0.001])
    np.testing.assert_array_equal(out["final_test_error"], [0.02, 1.0])
    never = metrics.sweep_summary(traj, 1e-4)  # one threshold for all; never reached
    assert np.isnan(never["t1"]).all() and np.isnan(never["train_error_at_t1"]).all()
    with pytest.raises(ValueError, match=r"train_threshold must be a number or one per configuration \(G = 2\)"):
        metrics.sweep_summary(traj, [0.1, 0.1, 0.1])
    with pytest.raises(ValueError, match=r"train_threshold must be in \(0.0, inf\), got -0.1"):
        metrics.sweep_summary(traj, [0.1, -0.1])


def test_sweep_summary_on_a_run_matches_the_rules():
    problems, labels = data.sparse.sn_problems(30, [2, 4], [10, 20], variance="1/N", seed=1)
    X, y, b_star = data.sparse.stack_problems(problems)
    traj = gk.kernels.subgradient(X, y, b_star=b_star, alpha=0.1, beta1=1e-3, steps=400, dense=50,
                                  per_decade=20, device="cpu")
    thresholds = np.where(labels["s"] == 2, 0.1, 0.05)
    out = metrics.sweep_summary(traj, thresholds)
    for g in range(4):
        np.testing.assert_array_equal(out["t1"][g], metrics.first_step_below(traj.steps, traj.train_error[g],
                                                                             thresholds[g])[0])
    np.testing.assert_array_equal(out["t2"], metrics.plateau_step(traj.steps, traj.test_error))


def test_against_grid_draws_one_panel_per_entry_and_one_legend():
    plots = pytest.importorskip("grokkit.plots")
    x = [10, 20, 30]
    panels = {f"s = {s}": {"$t_1$": [1, 2, 3], "bound": [2, 3, 4]} for s in (1, 5, 10)}
    right = {"s = 1": {"error": [0.1, 0.01, 0.001]}}
    fig = plots.against_grid(x, panels, right, xlabel="$N$", left_label="step", right_label="error")
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert titles == ["s = 1", "s = 5", "s = 10"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["$t_1$", "bound", "error"]
    assert sum(ax.get_visible() for ax in fig.axes) == 4  # three panels and one twin axis
