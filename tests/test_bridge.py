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
    problem = data.signal_problem(b_star, 10, variance=1.0, seed=3)
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
])
def test_bad_inputs(call, message) -> None:
    with pytest.raises(ValueError, match=message):
        call()
