"""The bridge between Woodworth et al. and Lyu et al. (notebooks/background/bridge-time-and-scale.md):
distances of recorded iterates to reference solutions and the transition detector, against plain
numpy and hand-worked paths; the end point of the u² − v² network under weight decay, against cvxpy's
Lasso at the penalty the page derives; bad inputs."""
from __future__ import annotations

import numpy as np
import pytest

from grokkit import baselines, data, kernels, metrics


def test_solution_distances_against_a_plain_loop() -> None:
    rs = np.random.RandomState(0)
    b, refs = rs.randn(3, 7, 5), rs.randn(2, 5)
    out = metrics.solution_distances(b, refs)
    assert out.shape == (2, 3, 7)
    for k in range(2):
        for g in range(3):
            for t in range(7):
                assert out[k, g, t] == pytest.approx(np.sqrt(np.sum((b[g, t] - refs[k]) ** 2)), rel=1e-14)
    # one reference given as a vector
    np.testing.assert_array_equal(metrics.solution_distances(b, refs[1]), out[1:])


def path(weights, early, late):
    """Iterates (1 - w) early + w late, one row per weight: the crossing is at w = 1/2."""
    w = np.asarray(weights, dtype=float)[..., None]
    return (1 - w) * early + w * late


def test_transition_step_on_hand_worked_paths() -> None:
    early, late = np.array([1.0, 0.0, 0.0]), np.array([0.0, 2.0, 0.0])
    steps = np.array([0, 1, 2, 5, 10, 20])
    weights = np.array([
        [0.0, 0.1, 0.3, 0.6, 0.9, 1.0],   # crosses 1/2 between steps 2 and 5: 5
        [0.0, 0.6, 0.4, 0.7, 0.8, 1.0],   # crosses, comes back, crosses for good at 5
        [0.0, 0.1, 0.2, 0.3, 0.4, 0.45],  # never: NaN
        [0.0, 0.5, 0.9, 1.0, 1.0, 1.0],   # exactly equidistant counts as closer to late: 1
    ])
    got = metrics.transition_step(steps, path(weights, early, late), early, late)
    np.testing.assert_array_equal(got[[0, 1, 3]], [5.0, 5.0, 1.0])
    assert np.isnan(got[2])


def test_transition_step_off_the_segment() -> None:
    # the point closest to both is the bisecting hyperplane: a path across it at any offset
    early, late = np.array([0.0, 0.0]), np.array([2.0, 0.0])
    steps = np.arange(5)
    b = np.array([[[0.0, 3.0], [0.5, 3.0], [0.99, -4.0], [1.01, 7.0], [3.0, 0.0]]])
    assert metrics.transition_step(steps, b, early, late)[0] == 3.0


def test_the_weight_decay_end_point_is_the_lasso_at_half_the_weight_decay() -> None:
    """min over u² − v² = β of (β₂/2)(u² + v²) is (β₂/2)|β|: the network's objective at its minimum is
    ½‖Xβ − y‖² + (β₂/2)‖β‖₁, the Lasso with beta1 = β₂/2. Gradient descent from w± = ζ1 gets there."""
    b_star = np.zeros(20)
    b_star[[2, 9, 15]] = 1 / np.sqrt(3)
    problem = data.sparse.signal_problem(b_star, 10, variance=1.0, seed=3)
    X, y = problem.X, problem.y
    zeta, beta2, steps = 0.5, np.array([1.0, 1.5]), 8000
    alpha = 0.9 / (4 * zeta**2 * problem.lambda_max)  # 0.9 of the stability limit at the start
    run = kernels.diagonal_net(X, y, alpha=alpha, steps=steps, init_scale=zeta, beta2=beta2, device="cpu")
    assert (beta2 * alpha * steps > 30).all()  # the effective scale ζ exp(-β₂ t) is below 1e-13
    for g, b2 in enumerate(beta2):
        lasso = baselines.lasso(X, y, beta1=b2 / 2).b
        assert np.linalg.norm(run.b_final[g] - lasso) < 1e-5 * np.linalg.norm(lasso)
        # not the Lasso at the full weight decay: the factor 1/2 matters
        other = baselines.lasso(X, y, beta1=b2).b
        assert np.linalg.norm(run.b_final[g] - other) > 1e-2 * np.linalg.norm(lasso)


def test_at_effective_scale_on_a_path_linear_in_time() -> None:
    """b(t) = (log ζ − β₂αt, 1, t): linear in t, so the interpolation is exact; at scale s the first
    entry is log s, whatever (ζ, β₂, α)."""
    steps = np.array([0.0, 3.0, 10.0, 40.0, 100.0])
    zeta, beta2, alpha = np.array([1.0, 4.0]), np.array([0.05, 0.01]), np.array([0.2, 0.5])
    t = steps[None, :]
    b = np.stack([np.log(zeta)[:, None] - (beta2 * alpha)[:, None] * t, np.ones((2, 5)),
                  np.broadcast_to(t, (2, 5))], axis=-1)
    scales = np.array([5.0, 0.9, 0.5, 0.3, 0.1])
    out = metrics.at_effective_scale(steps, b, alpha=alpha, init_scale=zeta, beta2=beta2, scales=scales)
    assert out.shape == (2, 5, 3)
    # ζ = 1: ζe^(-0.01 t) in [e^(-1), 1] = [0.37, 1]; ζ = 4: 4e^(-0.005 t) in [2.4, 4]
    reached = np.array([[False, True, True, False, False], [False, False, False, False, False]])
    np.testing.assert_array_equal(~np.isnan(out[..., 0]), reached)
    for g in range(2):
        k = reached[g]
        np.testing.assert_allclose(out[g, k, 0], np.log(scales[k]), rtol=0, atol=1e-12)
        np.testing.assert_allclose(out[g, k, 2], np.log(zeta[g] / scales[k]) / (beta2[g] * alpha[g]), rtol=1e-12)


def test_runs_meet_at_equal_effective_scale() -> None:
    """Gradient descent from ζ = 2 and from ζ = 1 under the same weight decay: at equal ζe^(−β₂t)
    both sit at the same β (the flow's identity w± = ζe^(−β₂t)exp(∓2Xᵀ∫r)), long after the start, while
    β itself moves far between those scales."""
    b_star = np.zeros(20)
    b_star[[2, 9, 15]] = 1 / np.sqrt(3)
    problem = data.sparse.signal_problem(b_star, 10, variance="1/N", seed=3)
    zeta, beta2 = np.array([2.0, 1.0]), 0.2
    alpha = 0.5 / (4 * zeta**2 * problem.lambda_max)
    run = kernels.diagonal_net(problem.X, problem.y, alpha=alpha, steps=6000, init_scale=zeta, beta2=beta2,
                               record_b=True, device="cpu")
    scales = np.geomspace(0.5, 0.005, 7)
    out = metrics.at_effective_scale(run.steps, run.b, alpha=alpha, init_scale=zeta, beta2=beta2, scales=scales)
    assert not np.isnan(out).any()
    gap = np.linalg.norm(out[0] - out[1], axis=-1)
    travel = np.linalg.norm(out[0, 0] - out[0, -1])
    assert travel > 0.1
    assert gap.max() < 0.02 * travel


@pytest.mark.parametrize("call, message", [
    (lambda: metrics.solution_distances(np.zeros((2, 3)), np.zeros((2, 4))), "references must have shape"),
    (lambda: metrics.solution_distances(np.zeros((2, 3)), np.full(3, np.nan)), "references must be finite"),
    (lambda: metrics.solution_distances(np.float64(1.0), np.zeros(1)), "b must have shape"),
    (lambda: metrics.transition_step(np.arange(2), np.zeros((2, 3)), np.zeros(3), np.ones(3)),
     r"b must have shape \(G, T, n\)"),
    (lambda: metrics.transition_step(np.arange(2), np.zeros((1, 2, 3)), np.zeros(2), np.ones(3)),
     r"early must have shape \(3,\)"),
    (lambda: metrics.transition_step(np.arange(2), np.zeros((1, 2, 3)), np.zeros(3), np.array([1, np.inf, 0])),
     "late must be finite"),
    (lambda: metrics.transition_step(np.arange(2), np.zeros((1, 2, 3)), np.ones(3), np.ones(3)),
     "early and late must differ"),
    (lambda: metrics.transition_step(np.arange(3), np.zeros((1, 2, 3)), np.zeros(3), np.ones(3)),
     "steps and curve must have shapes"),
    (lambda: metrics.at_effective_scale(np.arange(1), np.zeros((1, 1, 2)), alpha=1.0, init_scale=1.0, beta2=1.0,
                                        scales=0.5), "T >= 2 records"),
    (lambda: metrics.at_effective_scale(np.arange(3), np.zeros((2, 3, 2)), alpha=0.0, init_scale=1.0, beta2=1.0,
                                        scales=0.5), r"alpha must be in \(0.0, inf\)"),
    (lambda: metrics.at_effective_scale(np.arange(3), np.zeros((2, 3, 2)), alpha=1.0, init_scale=[1.0, 2.0, 3.0],
                                        beta2=1.0, scales=0.5), r"init_scale must be a number or one per configuration"),
    (lambda: metrics.at_effective_scale(np.arange(3), np.zeros((2, 3, 2)), alpha=1.0, init_scale=1.0, beta2=1.0,
                                        scales=[0.5, -1.0]), r"scales must be in \(0.0, inf\)"),
])
def test_bad_inputs(call, message) -> None:
    with pytest.raises(ValueError, match=message):
        call()
