"""Tests of the pieces behind the sparse N-sweep pages (Figures 8–12, Theorem C.8, §C.6.2):
the landscape coordinates, the corrected and printed conditions of Corollary C.2, and the
heat-map and landscape plots."""
import math

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import grokkit as gk  # noqa: E402
from grokkit import metrics, theory  # noqa: E402


def test_support_norms_match_a_loop_over_the_support():
    rng = np.random.default_rng(0)
    b_star = np.zeros(7)
    b_star[[1, 4]] = [0.5, -2.0]
    b = rng.normal(size=(3, 5, 7))
    u, v = metrics.support_norms(b, b_star)
    assert u.shape == v.shape == (3, 5)
    for g in range(3):
        for k in range(5):
            on = [b[g, k, i] for i in range(7) if b_star[i] != 0]
            off = [b[g, k, i] for i in range(7) if b_star[i] == 0]
            assert u[g, k] == pytest.approx(math.sqrt(sum(x * x for x in on)), rel=1e-14)
            assert v[g, k] == pytest.approx(math.sqrt(sum(x * x for x in off)), rel=1e-14)
    # u² + v² = ‖b‖²
    np.testing.assert_allclose(u**2 + v**2, (b**2).sum(-1), rtol=1e-13)


def test_support_norms_take_one_ground_truth_per_configuration():
    rng = np.random.default_rng(1)
    b_star = np.zeros((2, 6))
    b_star[0, [0, 1]] = 1.0
    b_star[1, [5]] = -1.0
    b = rng.normal(size=(2, 4, 6))
    u, v = metrics.support_norms(b, b_star)
    np.testing.assert_allclose(u[0], np.linalg.norm(b[0, :, :2], axis=-1), rtol=1e-14)
    np.testing.assert_allclose(v[0], np.linalg.norm(b[0, :, 2:], axis=-1), rtol=1e-14)
    np.testing.assert_allclose(u[1], np.abs(b[1, :, 5]), rtol=1e-14)
    np.testing.assert_allclose(v[1], np.linalg.norm(b[1, :, :5], axis=-1), rtol=1e-14)
    # b* itself: u = ‖b*‖, v = 0
    u, v = metrics.support_norms(b_star, b_star)
    np.testing.assert_allclose(u, np.linalg.norm(b_star, axis=-1))
    np.testing.assert_array_equal(v, 0.0)


def test_support_norms_refuse_bad_input():
    with pytest.raises(ValueError, match="b_star must be nonzero"):
        metrics.support_norms(np.ones(3), np.zeros(3))
    with pytest.raises(ValueError, match="b_star must be nonzero"):
        metrics.support_norms(np.ones((2, 3)), np.array([[1.0, 0, 0], [0, 0, 0]]))
    with pytest.raises(ValueError, match="shapes"):
        metrics.support_norms(np.ones(4), np.ones(3))
    with pytest.raises(ValueError, match="shapes"):
        metrics.support_norms(np.ones((3, 5, 4)), np.ones((2, 4)))
    with pytest.raises(ValueError, match="b_star"):
        metrics.support_norms(np.ones(3), np.array([1.0, np.nan, 0.0]))


def test_ball_entry_time_printed_condition_gives_a_negative_step_in_the_gap():
    n, alpha, beta1, rho = 100, 0.1, 1e-3, 0.9
    low, high = alpha * beta1 / (1 - rho), alpha * beta1 * math.sqrt(n) / (1 - rho)
    d0 = math.sqrt(low * high)  # in the gap of the printed condition
    corrected = theory.sparse.ball_entry_time(d0, n, alpha, beta1, rho)
    printed = theory.sparse.ball_entry_time(d0, n, alpha, beta1, rho, condition="printed")
    # by hand: ceil(-ln((1 - rho) d0 / (alpha beta1 sqrt n)) / ln rho) = ceil(-ln(n^{-1/4}) / ln rho)
    assert float(corrected) == 0.0
    assert float(printed) == math.ceil(math.log(n ** 0.25) / math.log(rho)) < 0
    # above the gap both conditions agree; p = inf has no gap
    d_far = 10 * high
    assert float(theory.sparse.ball_entry_time(d_far, n, alpha, beta1, rho, condition="printed")) == \
        float(theory.sparse.ball_entry_time(d_far, n, alpha, beta1, rho)) == \
        math.ceil(-math.log((1 - rho) * d_far / (alpha * beta1 * math.sqrt(n))) / math.log(rho))
    assert float(theory.sparse.ball_entry_time(d0, n, alpha, beta1, rho, p=math.inf, condition="printed")) == \
        float(theory.sparse.ball_entry_time(d0, n, alpha, beta1, rho, p=math.inf))
    with pytest.raises(ValueError, match="condition"):
        theory.sparse.ball_entry_time(d0, n, alpha, beta1, rho, condition="paper")


def test_component_map_draws_the_thresholded_values_on_a_log_time_axis():
    t = np.array([0, 1, 2, 5, 10, 100])
    values = np.array([[0.0, 0.0, 0.0], [1e-5, 0.2, -0.1], [3e-5, 0.1, -0.2], [2e-4, 0.1, -0.1],
                       [-5e-5, 0.1, -0.1], [0.0, 0.1, -0.1]])
    fig = gk.plots.component_map(t, values, reference=np.array([0.0, 0.1, -0.1]), threshold=1e-4)
    main = fig.axes[1]
    assert main.get_yscale() == "log"
    mesh = main.collections[0]
    drawn = np.asarray(mesh.get_array()).reshape(5, 3)  # the records t >= 1
    expected = np.where(np.abs(values[1:]) < 1e-4, 0.0, values[1:])
    np.testing.assert_array_equal(drawn, expected)
    strip = np.asarray(fig.axes[0].collections[0].get_array()).ravel()
    np.testing.assert_array_equal(strip, [0.0, 0.1, -0.1])
    matplotlib.pyplot.close(fig)


def test_landscape_draws_one_path_per_configuration_and_the_reference_points():
    u = np.array([[1e-3, 0.1, 0.2], [1e-3, 0.05, 0.3]])
    v = np.array([[1e-3, 0.2, 1e-4], [1e-3, 0.3, 0.2]])
    fig = gk.plots.landscape(u, v, [10, 100], "$N$", marks={"$t_0$": 0, "$t_1$": 2},
                             points={"$\\hat b$": ([0.1, 0.05], [0.2, 0.3], "X")})
    ax = fig.axes[0]
    paths = [line for line in ax.lines if line.get_linestyle() == "-"]
    assert len(paths) == 2
    np.testing.assert_array_equal(paths[1].get_xdata(), u[1])
    np.testing.assert_array_equal(paths[1].get_ydata(), v[1])
    assert ax.get_xscale() == ax.get_yscale() == "log"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["$t_0$", "$t_1$", "$\\hat b$"]
    matplotlib.pyplot.close(fig)


def test_gradient_bound_is_the_norm_of_A_times_twice_the_lemma_floor():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(6, 9)) / 3
    alpha, beta1, beta2, rho, t = 0.1, 1e-3, 0.05, 0.9, np.array([0, 1, 10, 100])
    lam_max = np.linalg.eigvalsh(X.T @ X).max()
    expected = (lam_max + beta2) * 2 * alpha * beta1 * 3.0 * (1 - rho**t) / (1 - rho)  # sqrt(9) = 3
    np.testing.assert_allclose(theory.sparse.gradient_bound(X, alpha, beta1, rho, t, beta2=beta2), expected, rtol=1e-12)
    A = X.T @ X + beta2 * np.eye(9)
    inf = np.abs(A).sum(axis=1).max() * 2 * alpha * beta1 * 1.0 * (1 - rho**t) / (1 - rho)
    np.testing.assert_allclose(theory.sparse.gradient_bound(X, alpha, beta1, rho, t, beta2=beta2, p=math.inf), inf,
                               rtol=1e-12)
    # it bounds ||G(b)|| for any b within the theorem's radius of b_hat
    y = rng.normal(size=6)
    b_hat = np.linalg.solve(A, X.T @ y)
    radius = 2 * alpha * beta1 * 3.0 / (1 - rho)
    direction = rng.normal(size=9)
    b = b_hat + radius * direction / np.linalg.norm(direction)
    G = X.T @ (X @ b - y) + beta2 * b
    assert np.linalg.norm(G) <= theory.sparse.gradient_bound(X, alpha, beta1, rho, 10**6, beta2=beta2) * (1 + 1e-12)
    with pytest.raises(ValueError, match="beta2"):
        theory.sparse.gradient_bound(X, alpha, beta1, rho, 1, beta2=-1.0)
    with pytest.raises(ValueError, match="X"):
        theory.sparse.gradient_bound(np.full((2, 2), np.nan), alpha, beta1, rho, 1)


def test_generalization_step_counts_the_shrinkage_of_the_largest_component():
    b = np.array([[0.3, -0.5, 0.1], [0.02, 0.0, -0.01]])
    steps = theory.sparse.generalization_step([10, 5], b, 0.1, 0.01)
    np.testing.assert_array_equal(steps, [10 + math.floor(0.5 / 1e-3), 5 + math.floor(0.02 / 1e-3)])
    # the bare shrinkage b <- b - alpha beta1 sign(b) reaches |b| <= alpha beta1 exactly then (Theorem C.12)
    x, k = b[0].copy(), 0
    while np.abs(x).max() > 1e-3:
        x -= 1e-3 * np.sign(x)
        k += 1
    assert k <= steps[0] - 10 <= k + 1
    assert np.isinf(theory.sparse.generalization_step(0, b[0], 0.1, 0.0))
    with pytest.raises(ValueError, match="t1"):
        theory.sparse.generalization_step(-1, b[0], 0.1, 0.01)


def test_bound_check_labels_its_y_axis():
    fig = gk.plots.bound_check(np.arange(5), {"g": np.ones(5)}, 2.0, ylabel="norm")
    assert fig.axes[0].get_ylabel() == "norm"
    matplotlib.pyplot.close(fig)
