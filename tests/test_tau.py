"""Data selection by local coherence (τ, Appendix D.4 and D.10; Figures 45 and 46): the stacked
masks of a τ sweep, the sweep over the number of samples N, and the smallest sufficient N."""
from __future__ import annotations

import re

import numpy as np
import pytest

import grokkit.data as data
from grokkit import metrics
from grokkit.kernels import matrix as mk

TAUS = [0.0, 0.3, 0.5, 1.0]


def test_completion_masks_stack_one_mask_per_tau() -> None:
    A = data.matrix.low_rank_matrix(10, 10, 2, seed=0)
    masks, y = data.matrix.completion_masks(A, 70, TAUS, seed=0)
    assert masks.shape == (len(TAUS), 10, 10) and masks.dtype == bool
    assert y.shape == (len(TAUS), 70)
    for g, tau in enumerate(TAUS):
        expected = data.matrix.completion_mask(A, 70, tau, seed=0)
        np.testing.assert_array_equal(masks[g], expected)
        rows, cols = np.nonzero(expected)  # row-major order, as the kernels read a mask
        np.testing.assert_array_equal(y[g], A[rows, cols])
    # tau = 1 observes the 70 entries of largest mu_i + nu_j
    mu, nu = data.matrix.local_coherence(A)
    P = (mu[:, None] + nu[None, :]).ravel()
    assert P[masks[-1].ravel()].min() >= P[~masks[-1].ravel()].max()


def test_completion_masks_of_one_tau() -> None:
    A = data.matrix.low_rank_matrix(6, 5, 2, seed=3)
    masks, y = data.matrix.completion_masks(A, 12, 0.5, seed=3)
    assert masks.shape == (1, 6, 5) and y.shape == (1, 12)
    np.testing.assert_array_equal(masks[0], data.matrix.completion_mask(A, 12, 0.5, seed=3))


@pytest.mark.parametrize("call, message", [
    (lambda: data.matrix.completion_masks(np.ones((4, 3)), 13, [0.0]), "N must be an integer in [1, n1*n2] = [1, 12], got 13"),
    (lambda: data.matrix.completion_masks(np.ones((4, 3)), 5, [0.0, 1.5]), "tau must be in [0.0, 1.0], got 1.5"),
    (lambda: data.matrix.completion_masks(np.ones((4, 3)), 5, []), "tau must have at least one value"),
    (lambda: data.matrix.completion_masks(np.ones(4), 2, [0.0]), "A_star must be a matrix (2-d array), got shape (4,)"),
    (lambda: data.matrix.completion_masks(np.ones((4, 3)), 5, [0.0], seed=-1), "seed must be"),
])
def test_completion_masks_refuse_bad_input(call, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def numpy_subgradient(mask, A_star, alpha, beta_star, init_scale, steps):
    """Eq. (101) for completion, plain numpy: A <- A - alpha (M o (A - A*) + beta* U V^T), A(1) = zeta I."""
    A = init_scale * np.eye(*A_star.shape)
    for _ in range(steps):
        U, _, Vt = np.linalg.svd(A, full_matrices=False)
        A = A - alpha * (mask * (A - A_star) + beta_star * U @ Vt)
    return A


def test_completion_sweep_runs_each_N_as_one_batched_call() -> None:
    A = data.matrix.low_rank_matrix(6, 5, 2, seed=1)
    hyper = dict(alpha=0.7, beta_star=1e-2, steps=40, init_scale=1e-3, init="identity", device="cpu")
    runs = mk.completion_sweep(A, [12, 20], TAUS, seed=1, **hyper)
    assert list(runs) == [12, 20]
    for N, traj in runs.items():
        assert len(traj) == len(TAUS)
        for g, tau in enumerate(TAUS):
            mask = data.matrix.completion_mask(A, N, tau, seed=1)
            expected = numpy_subgradient(mask, A, 0.7, 1e-2, 1e-3, 40)
            np.testing.assert_allclose(traj.A_final[g], expected, rtol=1e-9, atol=1e-12)
            err = np.linalg.norm(expected - A) / np.linalg.norm(A)
            assert traj.test_error[g, -1] == pytest.approx(err, rel=1e-9)
        masks, y = data.matrix.completion_masks(A, N, TAUS, seed=1)
        direct = mk.subgradient(masks, y, A.shape, A_star=A, seed=1, **hyper)
        np.testing.assert_array_equal(direct.test_error, traj.test_error)


@pytest.mark.parametrize("kwargs, message", [
    (dict(N=[12, 12]), "N must be a grid of distinct values, got [12, 12]"),
    (dict(N=[12, 31]), "N must be an integer in [1, n1*n2] = [1, 30], got 31"),
    (dict(N=[12], tau=[2.0]), "tau must be in [0.0, 1.0], got 2.0"),
    (dict(N=[12], method="newton"), "method must be one of"),
])
def test_completion_sweep_refuses_bad_input_before_any_run(kwargs, message: str, monkeypatch) -> None:
    def no_run(*args, **kw):
        raise AssertionError("a kernel ran before the input was checked")

    monkeypatch.setitem(mk.METHODS, "subgradient", no_run)
    A = data.matrix.low_rank_matrix(6, 5, 2, seed=1)
    kwargs = {"tau": TAUS, **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        mk.completion_sweep(A, kwargs.pop("N"), kwargs.pop("tau"), alpha=1.0, beta_star=1e-3, steps=10, **kwargs)


def plain_smallest_sufficient(values, passed):
    values = np.asarray(values, dtype=float)
    out = []
    for g in range(passed.shape[1]):
        found = np.nan
        for v in sorted(values):
            larger = values >= v
            if passed[larger, g].all():
                found = v
                break
        out.append(found)
    return np.array(out)


def test_smallest_sufficient_against_a_plain_loop() -> None:
    values = [70, 40, 50, 60]  # any order
    passed = np.array([[True, True, True, False, True],    # 70
                       [False, True, False, False, False],  # 40
                       [False, True, True, False, True],    # 50 (column 4: 50 and 70 pass, 60 fails)
                       [True, True, True, False, False]])   # 60
    got = metrics.smallest_sufficient(values, passed)
    np.testing.assert_array_equal(got, [60.0, 40.0, 50.0, np.nan, 70.0])
    np.testing.assert_array_equal(got, plain_smallest_sufficient(values, passed))
    rng = np.random.default_rng(0)
    for _ in range(50):
        values = rng.permutation(np.arange(1, 9) * 10)
        passed = rng.random((8, 6)) < 0.7
        np.testing.assert_array_equal(metrics.smallest_sufficient(values, passed),
                                      plain_smallest_sufficient(values, passed))


@pytest.mark.parametrize("values, passed, message", [
    ([1, 2], np.array([True, False, True]), "values and passed must have shapes (K,) and (K, G)"),
    ([1, 2], np.array([[1, 0], [1, 1]]), "values and passed must have shapes (K,) and (K, G) booleans"),
    ([1, np.nan], np.array([True, False]), "values must be finite"),
])
def test_smallest_sufficient_refuses_bad_input(values, passed, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        metrics.smallest_sufficient(values, passed)
