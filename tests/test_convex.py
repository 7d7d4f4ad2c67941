"""Tests of the exact-recovery studies of nuclear-norm minimisation (Theorems D.1-D.3): coherent
generators, coherences, Bernoulli sampling, the phase-transition sweep and the sample-size scales."""
import math

import numpy as np
import pytest

from grokkit import baselines, data, theory


def _leverage(A, r):
    """Plain numpy local coherences: (n/r)·squared row norms of the top-r singular vectors."""
    U, _, Vt = np.linalg.svd(A)
    return A.shape[0] / r * np.sum(U[:, :r] ** 2, 1), A.shape[1] / r * np.sum(Vt[:r].T ** 2, 1)


# --- generators -----------------------------------------------------------------------------------


@pytest.mark.parametrize("generator", ["orthogonal", "power_law", "spiky"])
def test_structured_generators_have_rank_r_and_the_given_singular_values(generator):
    sigma = np.array([3.0, 2.0, 0.5])
    A = data.matrix.low_rank_matrix(9, 7, 3, generator=generator, singular_values=sigma, seed=4)
    np.testing.assert_allclose(np.linalg.svd(A, compute_uv=False)[:3], sigma, rtol=1e-12)
    assert np.linalg.matrix_rank(A) == 3
    np.testing.assert_array_equal(A, data.matrix.low_rank_matrix(9, 7, 3, generator=generator,
                                                          singular_values=sigma, seed=4))


def test_power_law_is_orthogonal_at_decay_zero_and_more_coherent_as_decay_grows():
    for seed in range(3):
        np.testing.assert_array_equal(data.matrix.low_rank_matrix(8, 6, 2, generator="power_law", decay=0.0, seed=seed),
                                      data.matrix.low_rank_matrix(8, 6, 2, generator="orthogonal", seed=seed))
    # independent construction: Q of diag(k^-decay) G, signs fixed, U drawn before V
    rs = np.random.RandomState(5)
    G1, G2 = rs.randn(8, 2), rs.randn(6, 2)
    Us = []
    for G, n in ((G1, 8), (G2, 6)):
        q, R = np.linalg.qr(G * np.arange(1, n + 1.0)[:, None] ** -1.5)
        Us.append(q * np.sign(np.diag(R)))
    np.testing.assert_allclose(data.matrix.low_rank_matrix(8, 6, 2, generator="power_law", decay=1.5, seed=5),
                               Us[0] @ Us[1].T, atol=1e-14)
    mu0 = [np.mean([data.matrix.coherence_parameters(data.matrix.low_rank_matrix(
        30, 30, 2, generator="power_law", decay=d, seed=s))[0] for s in range(20)]) for d in (0.0, 0.5, 1.0, 2.0)]
    assert np.all(np.diff(mu0) > 0)


def test_spiky_has_r_unit_entries_on_distinct_rows_and_columns():
    A = data.matrix.low_rank_matrix(10, 12, 3, generator="spiky", seed=7)
    rows, cols = np.nonzero(A)
    assert len(rows) == 3 and len(set(rows)) == 3 and len(set(cols)) == 3
    np.testing.assert_array_equal(A[rows, cols], 1.0)
    rs = np.random.RandomState(7)
    assert set(rows) == set(rs.choice(10, 3, replace=False)) and set(cols) == set(rs.choice(12, 3, replace=False))


# --- coherences -----------------------------------------------------------------------------------


@pytest.mark.parametrize("generator", ["orthogonal", "authors", "power_law", "spiky"])
def test_coherence_parameters_against_numpy_and_mu1_at_most_mu0_sqrt_r(generator):
    for seed in range(5):
        A = data.matrix.low_rank_matrix(9, 13, 3, generator=generator, seed=seed)
        mu, nu = _leverage(A, 3)
        U, _, Vt = np.linalg.svd(A)
        mu1 = math.sqrt(9 * 13 / 3) * np.abs(U[:, :3] @ Vt[:3]).max()
        mu0_got, mu1_got = data.matrix.coherence_parameters(A)
        assert mu0_got == pytest.approx(max(mu.max(), nu.max()), rel=1e-12)
        assert mu1_got == pytest.approx(mu1, rel=1e-12)
        assert 1.0 - 1e-12 <= mu0_got <= 13 / 3 + 1e-12  # 1 <= mu0 <= max(n1, n2)/r
        assert mu1_got <= mu0_got * math.sqrt(3) * (1 + 1e-12)


def test_spiky_matrices_attain_the_coherence_bounds():
    mu0, mu1 = data.matrix.coherence_parameters(data.matrix.low_rank_matrix(10, 10, 2, generator="spiky", seed=1))
    assert mu0 == pytest.approx(10 / 2, rel=1e-12)
    assert mu1 == pytest.approx(mu0 * math.sqrt(2), rel=1e-12)


# --- Bernoulli sampling ---------------------------------------------------------------------------


def test_uniform_probabilities_and_local_coherence_water_filling():
    A = data.matrix.low_rank_matrix(8, 10, 2, generator="power_law", decay=1.5, seed=2)
    np.testing.assert_allclose(data.matrix.sampling_probabilities(A, 20, "uniform"), np.full((8, 10), 0.25))
    mu, nu = _leverage(A, 2)
    w = mu[:, None] + nu[None, :]
    for N in (5, 30, 60, 79):
        p = data.matrix.sampling_probabilities(A, N, "local_coherence")
        # the reference: bisection on c for sum(min(1, c w)) = N
        lo, hi = 0.0, 1e6
        for _ in range(200):
            c = 0.5 * (lo + hi)
            lo, hi = (c, hi) if np.minimum(1, c * w).sum() < N else (lo, c)
        np.testing.assert_allclose(p, np.minimum(1, c * w), atol=1e-9)
        assert p.sum() == pytest.approx(N, rel=1e-12)
    assert (data.matrix.sampling_probabilities(A, 79, "local_coherence") == 1.0).sum() > 0  # capping happens
    np.testing.assert_allclose(data.matrix.sampling_probabilities(A, 80, "local_coherence"), 1.0)


def test_bernoulli_masks_are_seeded_nested_and_have_the_right_frequencies():
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 1, (30, 40))
    m1, m2 = data.matrix.bernoulli_mask(p, seed=3), data.matrix.bernoulli_mask(np.minimum(1, 1.5 * p), seed=3)
    np.testing.assert_array_equal(m1, np.random.RandomState(3).random_sample((30, 40)) < p)
    assert np.all(m2[m1])  # larger probabilities, same seed: a superset
    freq = np.mean([data.matrix.bernoulli_mask(np.full((20, 20), 0.3), seed=s) for s in range(200)])
    assert abs(freq - 0.3) < 4 * math.sqrt(0.3 * 0.7 / (200 * 400))


# --- (P5) exact recovery --------------------------------------------------------------------------


def test_a_spike_is_recovered_exactly_when_it_is_observed():
    A = np.zeros((6, 6))
    A[2, 4] = 1.0
    rng = np.random.default_rng(1)
    for observed in (True, False):
        mask = rng.uniform(size=(6, 6)) < 0.8
        mask[2, 4] = observed
        sol = baselines.nuclear_norm_min(mask, A[mask], (6, 6), tol=1e-8)
        want = A if observed else np.zeros((6, 6))
        assert np.abs(sol.A - want).max() < 1e-6


def test_completion_success_fully_observed_recovers_and_below_the_degrees_of_freedom_fails():
    n, r = 6, 2
    dof = theory.matrix.completion_degrees_of_freedom(n, n, r)
    grid = [dof - 4, dof - 1, n * n]
    sweep = baselines.completion_success(n, n, r, grid, 3, search="full", seed=1)
    assert sweep.solver == "SCS" and sweep.solves == 9 and sweep.threshold == 1e-3
    np.testing.assert_array_equal(sweep.observed, np.repeat(np.array(grid)[:, None], 3, 1))
    assert np.all(sweep.error[-1] < 1e-5)  # every entry observed: A* itself
    assert np.all(sweep.error[:2] > 1e-2)  # fewer entries than degrees of freedom
    np.testing.assert_array_equal(sweep.rate, [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(sweep.N_min, [n * n] * 3)
    # the trials' matrices: mu0 of each, as data.matrix.coherence_parameters gives it
    seeds = np.random.RandomState(1).randint(0, 2**31 - 1, size=(2, 3))[0]
    for s, mu0 in zip(seeds, sweep.mu0):
        A = data.matrix.low_rank_matrix(n, n, r, generator="orthogonal", seed=int(s))
        assert mu0 == pytest.approx(max(x.max() for x in _leverage(A, r)), rel=1e-12)


@pytest.mark.parametrize("sampling, generator, tau", [("uniform", "orthogonal", None),
                                                      ("local_coherence", "power_law", None),
                                                      ("tau", "power_law", 1.0)])
def test_bisection_finds_what_solving_every_point_finds(sampling, generator, tau):
    grid = np.arange(8, 50, 6)
    kw = dict(generator=generator, sampling=sampling, tau=tau, seed=2)
    full = baselines.completion_success(7, 7, 1, grid, 3, search="full", **kw)
    fast = baselines.completion_success(7, 7, 1, grid, 3, **kw)
    assert np.all(np.diff(full.success.astype(int), axis=0) >= 0)  # nested masks: monotone
    np.testing.assert_array_equal(fast.success, full.success)
    np.testing.assert_array_equal(fast.observed, full.observed)
    solved = ~np.isnan(fast.error)
    np.testing.assert_allclose(fast.error[solved], full.error[solved], rtol=1e-9)
    assert fast.solves < full.solves == grid.size * 3
    N_min = [grid[np.argmax(s)] if s.any() else np.inf for s in full.success.T]
    np.testing.assert_array_equal(fast.N_min, N_min)


def test_bernoulli_sweep_counts_and_empty_masks():
    sweep = baselines.completion_success(5, 5, 1, [1, 25], 4, sampling="bernoulli", search="full", seed=3)
    masks = [data.matrix.bernoulli_mask(np.full((5, 5), 1 / 25), int(s))
             for s in np.random.RandomState(3).randint(0, 2**31 - 1, size=(2, 4))[1]]
    np.testing.assert_array_equal(sweep.observed[0], [m.sum() for m in masks])
    empty = sweep.observed[0] == 0
    np.testing.assert_array_equal(sweep.error[0][empty], 1.0)
    np.testing.assert_array_equal(sweep.observed[1], 25)


# --- scales ---------------------------------------------------------------------------------------


def test_degrees_of_freedom_and_sample_scales():
    assert theory.matrix.completion_degrees_of_freedom(10, 12, 3) == 3 * 19
    assert theory.matrix.completion_sample_scale(10, 20, 2) == pytest.approx(20 * 2 * math.log(20))
    assert theory.matrix.completion_sample_scale(20, 10, 2, power=1.25) == pytest.approx(20**1.25 * 2 * math.log(20))


# --- bad inputs -----------------------------------------------------------------------------------

_A = np.outer(np.arange(1.0, 5.0), np.ones(3))
BAD = [
    (lambda: data.matrix.low_rank_matrix(4, 4, 1, generator="orthogonal", decay=1.0), r"decay must be None for generator 'orthogonal', got 1\.0"),
    (lambda: data.matrix.low_rank_matrix(4, 4, 1, generator="power_law", decay=-1.0), r"decay must be in \[0\.0, inf\), got -1\.0"),
    (lambda: data.matrix.low_rank_matrix(4, 4, 1, generator="spiky", singular_values=[0.0]), r"singular_values must be in \(0\.0, inf\), got 0\.0"),
    (lambda: data.matrix.coherence_parameters(_A, r=5), r"r must be an integer in \[1, min\(n1, n2\)\] = \[1, 3\], got 5"),
    (lambda: data.matrix.sampling_probabilities(_A, 13, "uniform"), r"N must be in \(0\.0, 12\], got 13"),
    (lambda: data.matrix.sampling_probabilities(_A, 4, "leverage"), r"sampling must be one of 'uniform', 'local_coherence', got 'leverage'"),
    (lambda: data.matrix.sampling_probabilities(np.diag([1.0, 0, 0]), 6, "local_coherence"), r"N must be at most the number of entries with mu_i \+ nu_j > 0 = 5 for sampling 'local_coherence', got 6"),
    (lambda: data.matrix.bernoulli_mask(np.full((2, 2), 1.5)), r"probabilities must be in \[0, 1\], got entries in \[1\.5, 1\.5\]"),
    (lambda: data.matrix.bernoulli_mask(np.ones(3)), r"probabilities must be a non-empty matrix \(2-d array\), got shape \(3,\)"),
    (lambda: data.matrix.bernoulli_mask(np.ones((2, 2)), seed=-1), r"seed must be an integer in \[0, 2\*\*32 - 1\] \(a seed\), got -1"),
    (lambda: theory.matrix.completion_degrees_of_freedom(4, 3, 4), r"r must be an integer in \[1, min\(n1, n2\)\] = \[1, 3\], got 4"),
    (lambda: theory.matrix.completion_sample_scale(4, 3, 1, power=-1), r"power must be in \[0\.0, inf\), got -1"),
    (lambda: baselines.completion_success(4, 4, 1, [3, 17], 2), r"N_grid must be an integer in \[1, n1\*n2\] = \[1, 16\], got 17"),
    (lambda: baselines.completion_success(4, 4, 1, [5, 3], 2), r"N_grid must be a non-empty increasing list of integers, got \[5, 3\]"),
    (lambda: baselines.completion_success(4, 4, 1, [], 2), r"N_grid must be a non-empty increasing list of integers, got \[\]"),
    (lambda: baselines.completion_success(4, 4, 1, [3], 0), r"trials must be an integer in \[1, inf\), got 0"),
    (lambda: baselines.completion_success(4, 4, 1, [3], 1, sampling="coherent"), r"sampling must be one of 'uniform', 'tau', 'bernoulli', 'local_coherence', got 'coherent'"),
    (lambda: baselines.completion_success(4, 4, 1, [3], 1, sampling="tau"), r"tau must be a number in \[0, 1\] for sampling 'tau' and None otherwise, got None"),
    (lambda: baselines.completion_success(4, 4, 1, [3], 1, tau=0.5), r"tau must be a number in \[0, 1\] for sampling 'tau' and None otherwise, got 0\.5"),
    (lambda: baselines.completion_success(4, 4, 1, [3], 1, sampling="tau", tau=0.5), r"search must be 'full' for sampling 'tau' with 0 < tau < 1 \(masks not nested\), got 'bisect'"),
    (lambda: baselines.completion_success(4, 4, 1, [3], 1, search="linear"), r"search must be one of 'bisect', 'full', got 'linear'"),
    (lambda: baselines.completion_success(4, 4, 1, [3], 1, threshold=0.0), r"threshold must be in \(0\.0, inf\), got 0\.0"),
    (lambda: baselines.completion_success(4, 4, 1, [3], 1, tol=1.0), r"tol must be in \(0\.0, 1\.0\), got 1\.0"),
    (lambda: baselines.completion_success(4, 4, 1, [3], 1, generator="spiky", decay=1.0), r"decay must be None for generator 'spiky', got 1\.0"),
    (lambda: baselines.completion_success(4, 4, 1, [16], 1, generator="spiky", sampling="local_coherence"), r"N must be at most the number of entries with mu_i \+ nu_j > 0 = 7 for sampling 'local_coherence', got 16"),
]


@pytest.mark.parametrize("call, message", BAD)
def test_bad_inputs_are_refused_before_any_solve(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_random_coherences_are_those_of_the_seeded_draws():
    got = data.matrix.random_coherences(7, 9, 2, 4, generator="power_law", decay=0.5, seed=10)
    want = [data.matrix.coherence_parameters(data.matrix.low_rank_matrix(7, 9, 2, generator="power_law", decay=0.5, seed=s), 2)
            for s in range(10, 14)]
    np.testing.assert_array_equal(got, np.array(want))
    with pytest.raises(ValueError, match=r"draws must be an integer in \[1, inf\), got 0"):
        data.matrix.random_coherences(7, 9, 2, 0)
    with pytest.raises(ValueError, match=r"seed \+ draws - 1 must be an integer in \[0, 2\*\*32 - 1\] \(a seed\), got 4294967296"):
        data.matrix.random_coherences(7, 9, 2, 2, seed=2**32 - 1)


def test_success_curves_draws_one_step_curve_per_label():
    import matplotlib
    matplotlib.use("Agg")
    from grokkit import plots

    fig, ax = plots.new_figure()
    plots.success_curves(ax, {"a": ([1, 2, 3], [0.0, 0.5, 1.0]), "b": ([2, 4], [0.0, 1.0])}, "$N$")
    lines = ax.get_lines()
    assert [l.get_label() for l in lines] == ["a", "b"] and lines[0].get_drawstyle() == "steps-post"
    np.testing.assert_array_equal(lines[1].get_xydata(), [[2, 0.0], [4, 1.0]])
    assert ax.get_xlabel() == "$N$" and ax.get_ylim() == (-0.04, 1.04)


def test_theorem_d3_probabilities():
    A = data.matrix.low_rank_matrix(6, 9, 2, generator="power_law", decay=1.0, seed=3)
    mu, nu = _leverage(A, 2)
    for c0 in (1e-3, 0.05, 1.0):
        want = np.maximum(np.minimum(c0 * (mu[:, None] + nu) * 2 * np.log(15) ** 2 / 6, 1), 6.0**-10)
        np.testing.assert_allclose(theory.matrix.coherent_sampling_probabilities(A, c0), want, rtol=1e-12)
    # the floor min(n1, n2)^-10 where mu_i + nu_j = 0
    spike = data.matrix.low_rank_matrix(5, 5, 1, generator="spiky", seed=0)
    assert theory.matrix.coherent_sampling_probabilities(spike).min() == pytest.approx(5.0**-10)
    with pytest.raises(ValueError, match=r"c0 must be in \(0\.0, inf\), got 0\.0"):
        theory.matrix.coherent_sampling_probabilities(A, 0.0)
