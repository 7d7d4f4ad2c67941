"""Tests of the memorization bounds of Appendix D.6.1 (Lemma D.7, Theorem D.8, Corollary D.2 and their
sparse counterparts C.7, C.8, C.2) in grokkit.theory, and of metrics.stays_below_step."""
import math

import numpy as np
import pytest

from grokkit import metrics, theory


def _mask(rng, n1, n2, N):
    mask = np.zeros(n1 * n2, bool)
    mask[rng.choice(n1 * n2, N, replace=False)] = True
    return mask.reshape(n1, n2)


def _subgradient_loop(mask, Y, alpha, beta_star, beta2, A0, steps):
    """Plain numpy subgradient descent on completion (eq. 101), every iterate (steps + 1, n1, n2)."""
    out = [A0]
    A = A0
    for _ in range(steps):
        U, _, Vt = np.linalg.svd(A, full_matrices=False)
        A = A - alpha * (mask * (A - Y) + beta2 * A + beta_star * U @ Vt)
        out.append(A)
    return np.array(out)


# --- Lemma C.7 / D.7 ------------------------------------------------------------------------------


@pytest.mark.parametrize("rho", [0.0, 0.3, 0.95, 1.0, 1.2])
def test_distance_bound_unrolls_the_recurrence(rho):
    d0, alpha, beta1, n, p = 3.0, 0.1, 0.02, 50, 2
    c = alpha * beta1 * math.sqrt(n)
    d, want = d0, []
    for _ in range(40):
        want.append(d)
        d = rho * d + c  # eq. 46 with equality
    got = theory.sparse.distance_bound(d0, n, alpha, beta1, rho, np.arange(40), p)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_distance_bound_broadcasts_configurations_against_steps():
    got = theory.sparse.distance_bound([[1.0], [2.0]], 4, 0.5, 0.1, [[0.5], [1.0]], [0, 1, 2], p=1)
    np.testing.assert_allclose(got, [[1.0, 0.7, 0.55], [2.0, 2.2, 2.4]])


def test_matrix_distance_bound_holds_along_a_numpy_run():
    rng = np.random.default_rng(0)
    n1, n2, alpha, beta_star, beta2 = 6, 5, 0.3, 0.01, 0.1
    A_star = rng.standard_normal((n1, 2)) @ rng.standard_normal((2, n2))
    mask = _mask(rng, n1, n2, 20)
    A_hat = np.where(mask, A_star, 0.0) / (1 + beta2)
    run = _subgradient_loop(mask, np.where(mask, A_star, 0.0), alpha, beta_star, beta2,
                            1e-3 * rng.standard_normal((n1, n2)), 300)
    t = np.arange(run.shape[0])
    for p in (1, 2, math.inf):
        d = np.linalg.norm((run - A_hat).reshape(len(t), -1), ord=p, axis=1)
        rho = theory.matrix.rho(mask, (n1, n2), alpha, beta2, p)
        assert rho == pytest.approx(max(abs(1 - alpha * (1 + beta2)), abs(1 - alpha * beta2)))
        bound = theory.matrix.distance_bound(d[0], n1, n2, alpha, beta_star, rho, t, p)
        assert np.all(d <= bound * (1 + 1e-12))
        # the paper's indexing (a^(t) on the left, one update too many) fails at the first iterate
        printed = theory.matrix.distance_bound(d[0], n1, n2, alpha, beta_star, rho, t + 1, p)
        assert d[0] > printed[0]


# --- Corollary C.2 / D.2 ------------------------------------------------------------------------------


def _ball_entry_brute(d0, c, rho):
    """Smallest integer t >= 0 with rho^t d0 <= c / (1 - rho)."""
    t = 0
    while rho**t * d0 > c / (1 - rho):
        t += 1
    return t


@pytest.mark.parametrize("d0", [0.05, 1.0, 7.0, 300.0])
def test_ball_entry_time_is_the_first_step_of_the_geometric_bound(d0):
    n, alpha, beta1, rho = 25, 0.2, 0.01, 0.97
    c = alpha * beta1 * n**0.5
    assert theory.sparse.ball_entry_time(d0, n, alpha, beta1, rho) == _ball_entry_brute(d0, c, rho)
    assert theory.matrix.ball_entry_time(d0, 5, 5, alpha, beta1, rho) == _ball_entry_brute(d0, c, rho)


def test_printed_condition_of_corollary_d2_gives_a_negative_step_in_the_gap():
    n1 = n2 = 10
    alpha, beta_star, rho = 0.1, 0.1, 0.995
    for p in (1, 2):
        c = alpha * beta_star * (n1 * n2) ** (1 / p)
        d0 = 0.5 * (alpha * beta_star + c) / (1 - rho)  # between the printed and the corrected thresholds
        printed = theory.matrix.ball_entry_time(d0, n1, n2, alpha, beta_star, rho, p, condition="printed")
        assert printed == math.ceil(-math.log((1 - rho) * d0 / c) / math.log(rho)) < 0
        assert theory.matrix.ball_entry_time(d0, n1, n2, alpha, beta_star, rho, p) == 0
    # p = inf: n^(1/p) = 1, the two conditions coincide
    d0 = 3.0
    assert theory.matrix.ball_entry_time(d0, n1, n2, alpha, beta_star, rho, math.inf, condition="printed") == \
        theory.matrix.ball_entry_time(d0, n1, n2, alpha, beta_star, rho, math.inf) == \
        _ball_entry_brute(d0, alpha * beta_star, rho)


def test_ball_entry_time_is_infinite_without_contraction():
    assert np.isinf(theory.sparse.ball_entry_time(1.0, 10, 0.1, 0.1, 1.0))
    assert np.isinf(theory.sparse.ball_entry_time(1.0, 10, 0.1, 0.0, 0.5))


# --- row space, residual bound -------------------------------------------------------------------------


def test_matrix_range_distance_completion_and_sensing():
    rng = np.random.default_rng(2)
    n1, n2 = 4, 3
    A = rng.standard_normal((7, n1, n2))
    A_hat = rng.standard_normal((n1, n2))
    mask = _mask(rng, n1, n2, 5)
    for p in (1, 2, math.inf):
        want = np.linalg.norm(((A - A_hat) * mask).reshape(7, -1), ord=p, axis=1)
        np.testing.assert_allclose(theory.matrix.range_distance(mask, (n1, n2), A, A_hat, p), want, rtol=1e-12)
    X = rng.standard_normal((5, n1 * n2))
    P = np.linalg.pinv(X) @ X  # projector onto the row space
    D = np.stack([(M - A_hat).reshape(-1, order="F") for M in A])
    np.testing.assert_allclose(theory.matrix.range_distance(X, (n1, n2), A, A_hat),
                               np.linalg.norm(D @ P, axis=1), rtol=1e-10)


def test_matrix_residual_bound_against_its_formula():
    rng = np.random.default_rng(3)
    n1, n2, alpha, beta_star, rho = 4, 3, 0.1, 0.01, 0.9
    X = rng.standard_normal((6, n1 * n2))
    y = rng.standard_normal(6)
    A_hat = rng.standard_normal((n1, n2))
    a_hat = A_hat.reshape(-1, order="F")
    for p, order in ((1, 1), (2, 2), (math.inf, np.inf)):
        c = 2 * alpha * beta_star * (n1 * n2) ** (1 / p) / (1 - rho)
        tail = np.linalg.norm(X @ a_hat - y, order)
        got = theory.matrix.residual_bound(X, (n1, n2), y, A_hat, alpha, beta_star, rho, p)
        assert got == pytest.approx(c * np.linalg.norm(X, order) + tail, rel=1e-12)
        got_t = theory.matrix.residual_bound(X, (n1, n2), y, A_hat, alpha, beta_star, rho, p, t=[0, 3])
        np.testing.assert_allclose(got_t, c * (1 - rho ** np.array([0, 3])) * np.linalg.norm(X, order) + tail)
    mask = _mask(rng, n1, n2, 5)  # completion: ||X||_{p->p} = 1
    got = theory.matrix.residual_bound(mask, (n1, n2), A_hat[mask], np.zeros((n1, n2)), alpha, beta_star, rho, 1)
    assert got == pytest.approx(2 * alpha * beta_star * 12 / (1 - rho) + np.abs(A_hat[mask]).sum())


# --- metrics ----------------------------------------------------------------------------------------------


def test_stays_below_step_against_a_loop():
    rng = np.random.default_rng(4)
    steps = np.array([0, 1, 2, 5, 10, 20])
    curve = rng.uniform(0, 2, size=(50, 6))
    curve[0] = [3, 2, 0.5, 0.2, 0.1, 0.0]  # enters at step 2
    curve[1] = [0.1, 0.1, 0.1, 0.1, 0.1, 3]  # ends above: NaN
    curve[2] = 0.0  # always below: step 0
    got = metrics.stays_below_step(steps, curve, 1.0)
    for g in range(50):
        want = np.nan
        for j in range(6):
            if np.all(curve[g, j:] <= 1.0):
                want = steps[j]
                break
        assert (np.isnan(got[g]) and np.isnan(want)) or got[g] == want
    assert got[0] == 2 and np.isnan(got[1]) and got[2] == 0


# --- bad inputs ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, match", [
    (lambda: theory.sparse.distance_bound(-1.0, 10, 0.1, 0.1, 0.5, [0, 1]), "dist0"),
    (lambda: theory.sparse.distance_bound(1.0, 10, 0.1, 0.1, 0.5, [-1]), "t must"),
    (lambda: theory.sparse.distance_bound(1.0, 10, 0.1, 0.1, 0.5, [1], p=3), "p must"),
    (lambda: theory.sparse.ball_entry_time(1.0, 0, 0.1, 0.1, 0.5), "n must"),
    (lambda: theory.matrix.distance_bound(1.0, 3, 3, 0.0, 0.1, 0.5, [1]), "alpha"),
    (lambda: theory.matrix.ball_entry_time(1.0, 3, 3, 0.1, -1.0, 0.5), "beta_star"),
    (lambda: theory.matrix.ball_entry_time(1.0, 3, 3, 0.1, 0.1, 0.5, condition="paper"), "condition"),
    (lambda: theory.matrix.range_distance(np.ones((3, 3), bool), (3, 3), np.zeros((2, 3, 4)), np.zeros((3, 3))),
     "A and A_hat"),
    (lambda: theory.matrix.range_distance(np.ones((3, 3), bool), (3, 3), np.full((3, 3), np.nan), np.zeros((3, 3))),
     "A must be finite"),
    (lambda: theory.matrix.residual_bound(np.ones((3, 3), bool), (3, 3), np.zeros(8), np.zeros((3, 3)), 0.1, 0.1, 0.5),
     "y and A_hat"),
    (lambda: metrics.stays_below_step([0, 1], [[1.0, 2.0]], math.nan), "threshold"),
    (lambda: metrics.stays_below_step([0, 1, 2], [[1.0, 2.0]], 1.0), "steps and curve"),
])
def test_bad_inputs_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
