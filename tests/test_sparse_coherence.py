"""Tests of the sparse-recovery preliminaries of Appendix C.1-C.5: the basis-pursuit sweep of
Figures 6-7, the coherences of Definition C.3, restricted isometry constants (Definitions C.1,
C.2), the reduction of Section C.3 and the Monte-Carlo estimators of Theorems C.1-C.2."""
import itertools
import math

import numpy as np
import pytest

from grokkit import baselines, data
from grokkit.baselines import RecoverySweep


# --- the basis-pursuit sweep (Figures 6 and 7) -------------------------------------------------


def test_sweep_recovers_at_full_measurement_and_fails_with_one():
    sw = baselines.sparse_recovery_sweep(12, [1, 3], [1, 12], [0.0, 1.0], 2, eps=None, seed=3)
    assert sw.error.shape == (2, 2, 2, 2)
    # N = n: a square Gaussian X, or a permutation of I (tau = 1): b* is the only solution
    assert sw.error[:, :, 1].max() < 1e-6
    # N = 1 and s = 3: one equation cannot determine three unknowns
    assert sw.error[:, 1, 0].min() > 0.1
    np.testing.assert_array_equal(sw.N_min, [[12, 12], [12, 12]])


def test_sweeps_share_the_draws_of_their_common_grid_values():
    a = baselines.sparse_recovery_sweep(10, [1, 2, 4], [3, 6, 10], [0.0, 0.5], 2, eps=None, seed=5)
    b = baselines.sparse_recovery_sweep(10, [2], [6], [0.5], 2, eps=None, seed=5)
    np.testing.assert_allclose(b.error[0, 0, 0], a.error[1, 1, 1], rtol=1e-6, atol=1e-12)
    c = baselines.sparse_recovery_sweep(10, [2], [6], [0.5], 2, eps=None, seed=6)
    assert not np.allclose(c.error, b.error)


def test_cone_program_matches_the_equality_program_up_to_its_slack():
    kw = dict(seed=2)
    eq = baselines.sparse_recovery_sweep(16, [2], [4, 16], [0.0], 1, eps=None, **kw)
    cone = baselines.sparse_recovery_sweep(16, [2], [4, 16], [0.0], 1, eps=1e-8, **kw)
    assert cone.eps == 1e-8 and eq.eps is None and cone.solver == "CLARABEL"
    assert eq.error[0, 0, 1, 0] < 1e-7 and cone.error[0, 0, 1, 0] < 1e-5
    np.testing.assert_array_equal(eq.N_min, cone.N_min)


def test_N_min_is_the_first_N_whose_mean_error_is_below_the_threshold():
    error = np.array([1.0, 2e-6, 1e-8, 1e-3, 1e-9])[None, None, :, None] * np.ones((1, 1, 1, 2))
    error[0, 0, 1, 1] = 0.0  # mean 1e-6: not below 1e-6
    sw = RecoverySweep(n=5, s=np.array([1]), N=np.array([1, 2, 3, 4, 5]), tau=np.array([0.0]), error=error,
                       threshold=1e-6, eps=None, solver="x", inaccurate=0)
    want = next(N for N, e in zip(sw.N, error[0, 0].mean(axis=1)) if e < 1e-6)
    assert sw.N_min[0, 0] == want == 3
    never = RecoverySweep(**{**sw.__dict__, "threshold": 1e-12})
    assert never.N_min[0, 0] == math.inf


BAD_SWEEP = [
    (dict(s_grid=[1, 11]), r"s_grid must be an integer in \[1, n\] = \[1, 10\], got 11"),
    (dict(N_grid=[4, 2]), r"N_grid must be a non-empty increasing list, got \[4, 2\]"),
    (dict(N_grid=[0, 2]), r"N_grid must be an integer in \[1, inf\), got 0"),
    (dict(tau_grid=[0.0, 1.5]), r"tau_grid must be in \[0\.0, 1\.0\], got 1\.5"),
    (dict(tau_grid=[]), r"tau_grid must be a non-empty increasing list, got \[\]"),
    (dict(trials=0), r"trials must be an integer in \[1, inf\), got 0"),
    (dict(eps=-1.0), r"eps must be in \[0\.0, inf\), got -1\.0"),
    (dict(variance="1/m"), r"variance must be one of '1/n', '1/N', got '1/m'"),
    (dict(threshold=0.0), r"threshold must be in \(0\.0, inf\), got 0\.0"),
    (dict(seed=-1), r"seed must be an integer in \[0, 2\*\*32 - 1\] \(a seed\), got -1"),
]


@pytest.mark.parametrize("change, message", BAD_SWEEP)
def test_sweep_refuses_bad_inputs(change, message):
    args = dict(n=10, s_grid=[1, 2], N_grid=[2, 4], tau_grid=[0.0], trials=1)
    with pytest.raises(ValueError, match=message):
        baselines.sparse_recovery_sweep(**{**args, **change})


# --- coherences (Definition C.3, Example C.1, Figure 6a) ---------------------------------------


def test_measurement_coherence_is_one_with_an_atom_row_and_seeded():
    mu = data.sparse.measurement_coherences(20, [1, 4, 10], [0.0, 0.2, 1.0], 3, seed=4)
    assert mu.shape == (3, 3, 3)
    # floor(tau N) >= 1: a row is an atom of Phi
    np.testing.assert_allclose(mu[1, 2], 1.0, atol=1e-12)  # floor(0.2 * 10) = 2
    np.testing.assert_allclose(mu[2], 1.0, atol=1e-12)
    assert (mu[0] < 1).all() and (mu[0] > 0).all() and (mu[1, :2] < 1).all()  # floor(0.2 * 4) = 0
    np.testing.assert_array_equal(mu, data.sparse.measurement_coherences(20, [1, 4, 10], [0.0, 0.2, 1.0], 3, seed=4))
    # an independent computation: the coherence of the rows of X with the columns of Phi, by loops
    phi = data.sparse.dictionary(20, "orthonormal", 4)
    key = np.random.SeedSequence([4, 2, 10, 0]).generate_state(1)[0]
    X = data.sparse.measurement_matrix(10, phi, 0.0, "1/N", int(key))
    brute = max(abs(X[i] @ phi[:, j]) / np.linalg.norm(X[i]) for i in range(10) for j in range(20))
    assert mu[0, 2, 2] == pytest.approx(brute, rel=1e-12)


def test_coherence_of_the_fourier_basis_uses_the_hermitian_product():
    n = 16
    F = np.fft.fft(np.eye(n)) / np.sqrt(n)
    assert data.sparse.coherence(np.eye(n), F) == pytest.approx(1 / np.sqrt(n), rel=1e-12)
    assert data.sparse.coherence(F) < 1e-12  # an orthonormal basis: mutual coherence 0
    assert data.sparse.one_coherence(np.hstack([np.eye(n), F]), 3) == pytest.approx(3 / np.sqrt(n), rel=1e-12)


def test_one_coherence_against_enumeration_of_supports():
    rs = np.random.RandomState(0)
    A = rs.randn(5, 7)
    An = A / np.linalg.norm(A, axis=0)
    G = np.abs(An.T @ An)
    for s in (1, 2, 4, 6):
        brute = max(sum(G[i, j] for j in J) for i in range(7)
                    for k in range(1, s + 1) for J in itertools.combinations([j for j in range(7) if j != i], k))
        assert data.sparse.one_coherence(A, s) == pytest.approx(brute, rel=1e-12)
        assert data.sparse.one_coherence(A, s) <= s * data.sparse.coherence(A) + 1e-12
    assert data.sparse.one_coherence(A, 1) == pytest.approx(data.sparse.coherence(A), rel=1e-12)
    with pytest.raises(ValueError, match=r"s must be an integer in \[1, n - 1\] = \[1, 6\], got 7"):
        data.sparse.one_coherence(A, 7)
    with pytest.raises(ValueError, match=r"A must be a matrix with at least 2 columns, got shape \(5, 1\)"):
        data.sparse.one_coherence(A[:, :1], 1)
    with pytest.raises(ValueError, match=r"A must be finite, got nan"):
        data.sparse.one_coherence(np.full((2, 2), np.nan), 1)


def test_measurement_coherences_refuses_bad_inputs():
    with pytest.raises(ValueError, match=r"N_grid must be an integer in \[1, inf\), got 0"):
        data.sparse.measurement_coherences(10, [0], [0.0], 1)
    with pytest.raises(ValueError, match=r"tau_grid must be in \[0\.0, 1\.0\], got -0\.1"):
        data.sparse.measurement_coherences(10, [1], [-0.1], 1)
    with pytest.raises(ValueError, match=r"trials must be an integer in \[1, inf\), got 0"):
        data.sparse.measurement_coherences(10, [1], [0.0], 0)
    with pytest.raises(ValueError, match=r"basis must be one of 'identity', 'orthonormal', 'dct', 'fourier', got 'wavelet'"):
        data.sparse.measurement_coherences(10, [1], [0.0], 1, basis="wavelet")


# --- plots ---------------------------------------------------------------------------------------


def test_heat_map_and_curve_family():
    import matplotlib
    matplotlib.use("Agg")
    from grokkit import plots

    fig, ax = plots.new_figure()
    values = np.array([[1e-8, 1e-2, 1.0], [1e-3, 1e-1, 1.0]])
    mesh = plots.heat_map(ax, [1, 11, 31], [2, 5], values, xlabel="$N$", ylabel="$s$", label="error")
    np.testing.assert_array_equal(mesh.get_array().reshape(2, 3), values)
    assert mesh.norm.vmin == 1e-8 and mesh.norm.vmax == 1.0 and ax.get_xlim() == (-4.0, 41.0)
    assert len(fig.axes) == 2 and fig.axes[1].get_ylabel() == "error"
    np.testing.assert_array_equal(ax.get_xticks(), [1, 11, 31])
    np.testing.assert_array_equal(ax.get_yticks(), [2, 5])
    fig, ax = plots.new_figure()
    plots.curve_family(ax, [0, 1], [[0, 1], [1, 2], [2, 3]], [1, 10, 100], label="$N$", log=True)
    lines = ax.get_lines()
    assert len(lines) == 3 and lines[0].get_color() != lines[2].get_color()
    np.testing.assert_array_equal(lines[1].get_xydata(), [[0, 1], [1, 2]])
    assert fig.axes[1].get_ylabel() == "$N$"


# --- restricted isometry constants (Definitions C.1, C.2, Proposition C.1) ----------------------


def _delta_by_loops(A, s):
    """Plain numpy: max over every support J of the spectral norm of A_J^T A_J - I."""
    return max(np.linalg.norm(A[:, J].T @ A[:, J] - np.eye(s), 2)
               for J in map(list, itertools.combinations(range(A.shape[1]), s)))


def test_restricted_isometry_against_loops_and_hand_worked_cases():
    from grokkit import metrics

    rs = np.random.RandomState(1)
    A = rs.randn(4, 7) / 2
    for s in (1, 2, 3, 7):
        r = metrics.restricted_isometry(A, s)
        assert len(r.supports) == math.comb(7, s)
        assert r.delta == pytest.approx(_delta_by_loops(A, s), rel=1e-12)
        J = list(r.worst)
        assert np.linalg.norm(A[:, J].T @ A[:, J] - np.eye(s), 2) == pytest.approx(r.delta, rel=1e-12)
    np.testing.assert_allclose(metrics.restricted_isometry(A, 1).deltas, np.abs(np.sum(A**2, 0) - 1), atol=1e-14)
    # two equal unit columns: delta_2 = 1 (Gram [[1, 1], [1, 1]]), and cond is infinite
    twin = metrics.restricted_isometry(np.array([[1.0, 1.0], [0.0, 0.0]]), 2)
    assert twin.delta == pytest.approx(1.0) and twin.condition == math.inf
    # orthonormal columns: an isometry on every support
    Q = np.linalg.qr(rs.randn(6, 4))[0]
    assert metrics.restricted_isometry(Q, 3).delta < 1e-14
    one = metrics.restricted_isometry(A, 3).one_norm
    brute = [np.abs(A[:, J].T @ A[:, J] - np.eye(3)).sum(axis=0).max()
             for J in map(list, itertools.combinations(range(7), 3))]
    np.testing.assert_allclose(one, brute, rtol=1e-12)


def test_restricted_isometry_sample_is_a_lower_bound_and_seeded():
    from grokkit import metrics

    A = np.random.RandomState(2).randn(5, 9) / np.sqrt(5)
    exact = metrics.restricted_isometry(A, 3)
    small = metrics.restricted_isometry_sample(A, 3, 5, seed=1)
    assert small.supports.shape == (5, 3) and (np.diff(small.supports, axis=1) > 0).all()
    assert small.delta <= exact.delta + 1e-14
    big = metrics.restricted_isometry_sample(A, 3, 3000, seed=1)  # every one of the 84 supports, w.h.p.
    assert big.delta == pytest.approx(exact.delta, rel=1e-12)
    np.testing.assert_array_equal(small.deltas, metrics.restricted_isometry_sample(A, 3, 5, seed=1).deltas)


def test_low_rank_isometry_ratios_against_explicit_vec():
    from grokkit import metrics

    rs = np.random.RandomState(3)
    F = rs.randn(7, 12)
    ratios = metrics.low_rank_isometry_ratios(F, (3, 4), 2, 6, seed=5)
    draw = np.random.RandomState(5)
    X = draw.randn(6, 3, 2) @ draw.randn(6, 2, 4)
    want = [np.sum((F @ x.flatten(order="F")) ** 2) / np.sum(x**2) for x in X]
    np.testing.assert_allclose(ratios, want, rtol=1e-12)
    assert all(np.linalg.matrix_rank(x) == 2 for x in X)
    assert np.allclose(metrics.low_rank_isometry_ratios(np.eye(12), (3, 4), 1, 4), 1.0)


BAD_RIP = [
    (lambda m: m.restricted_isometry(np.ones((2, 3)), 4), r"s must be an integer in \[1, n\] = \[1, 3\], got 4"),
    (lambda m: m.restricted_isometry(np.ones(3), 1), r"A must be a matrix \(2-d array\), got shape \(3,\)"),
    (lambda m: m.restricted_isometry(np.full((2, 2), np.inf), 1), r"A must be finite, got inf"),
    (lambda m: m.restricted_isometry(np.ones((2, 60)), 30), r"s must leave at most 2000000 supports to enumerate"),
    (lambda m: m.restricted_isometry_sample(np.ones((2, 3)), 2, 0), r"draws must be an integer in \[1, inf\), got 0"),
    (lambda m: m.restricted_isometry_sample(np.ones((2, 3)), 2, 1, seed=1.5), r"seed must be an integer in \[0, 2\*\*32 - 1\] \(a seed\), got 1\.5"),
    (lambda m: m.low_rank_isometry_ratios(np.ones((2, 6)), (2, 3), 3, 1), r"r must be an integer in \[1, min\(n1, n2\)\] = \[1, 2\], got 3"),
    (lambda m: m.low_rank_isometry_ratios(np.ones((2, 5)), (2, 3), 1, 1), r"F must have shape \(q, n1\*n2\) = \(q, 6\), got \(2, 5\)"),
    (lambda m: m.low_rank_isometry_ratios(np.ones((2, 6)), 6, 1, 1), r"shape must be a pair \(n1, n2\), got 6"),
]


@pytest.mark.parametrize("call, message", BAD_RIP)
def test_restricted_isometry_refuses_bad_inputs(call, message):
    from grokkit import metrics

    with pytest.raises(ValueError, match=message):
        call(metrics)


def test_coherence_rip_ratios_against_loops():
    from grokkit import theory

    rs = np.random.RandomState(4)
    A, B = rs.randn(9, 4), rs.randn(9, 5)
    A, B = A / np.linalg.norm(A, axis=0), B / np.linalg.norm(B, axis=0)
    M = A.T @ B
    mu = np.abs(M).max()  # unit-norm columns
    for s in (1, 2, 3):
        got = theory.sparse.coherence_rip_ratios(A, B, s)
        top = max(np.linalg.norm(M[:, list(J)], 2) for J in itertools.combinations(range(5), s))
        assert got["a"] == pytest.approx(max(1 / (4 * np.sqrt(s)), 1 / (s * 2)) * top / mu, rel=1e-12)
        assert got["b"] == pytest.approx(mu / (2 * np.linalg.norm(M, 2)), rel=1e-12)
        d_s, d_n = _delta_by_loops(M, s), _delta_by_loops(M, 5)
        assert got["d"] == pytest.approx(mu / np.sqrt(4 * (1 + d_n)), rel=1e-12)
        if d_s < 1:
            assert got["c"] == pytest.approx(np.sqrt(max(4, s)) / (4 * s) * np.sqrt(1 - d_s) / mu, rel=1e-12)
            assert got["e"] == pytest.approx(np.sqrt(1 - d_s) / ((4 + s) / 2 * mu), rel=1e-12)
        else:
            assert math.isnan(got["c"]) and math.isnan(got["e"])
        assert max(v for v in got.values() if not math.isnan(v)) <= 1
    with pytest.raises(ValueError, match=r"A and B must be matrices with the same number of rows, got shapes \(9, 4\) and \(8, 5\)"):
        theory.sparse.coherence_rip_ratios(A, B[:8], 1)
    with pytest.raises(ValueError, match=r"s must be an integer in \[1, n\] = \[1, 5\], got 6"):
        theory.sparse.coherence_rip_ratios(A, B, 6)


# --- the reduction of Section C.3 ---------------------------------------------------------------


def test_orthonormal_reduction_keeps_the_signal_and_loses_sparsity_unless_atoms_are_orthogonal():
    rs = np.random.RandomState(6)
    phi = rs.randn(9, 6)
    b = np.zeros(6)
    b[[1, 4]] = [1.0, -2.0]
    phi_t, b_t = data.sparse.orthonormal_reduction(phi, b)
    np.testing.assert_allclose(phi_t.T @ phi_t, np.eye(9), atol=1e-12)
    np.testing.assert_allclose(phi_t @ b_t, phi @ b, atol=1e-12)
    # independent: b~* = [(Phi^T Phi)^(1/2) b*; 0] with scipy's matrix square root
    from scipy.linalg import sqrtm
    np.testing.assert_allclose(b_t, np.r_[np.real(sqrtm(phi.T @ phi)) @ b, np.zeros(3)], atol=1e-10)
    assert np.count_nonzero(np.abs(b_t) > 1e-12) == 6
    D = rs.uniform(0.5, 2, 6)
    Q = np.linalg.qr(rs.randn(9, 6))[0]
    phi_t, b_t = data.sparse.orthonormal_reduction(Q * D, b)
    np.testing.assert_allclose(b_t, np.r_[D * b, np.zeros(3)], atol=1e-12)  # orthogonal atoms: same support
    with pytest.raises(ValueError, match=r"phi must be an n x m matrix with m <= n, got shape \(3, 4\)"):
        data.sparse.orthonormal_reduction(np.ones((3, 4)), np.ones(4))
    with pytest.raises(ValueError, match=r"b_star must have shape \(m,\) = \(6,\), got \(5,\)"):
        data.sparse.orthonormal_reduction(phi, np.ones(5))
    with pytest.raises(ValueError, match=r"phi must have linearly independent columns \(rank m = 2\), got rank 1"):
        data.sparse.orthonormal_reduction(np.ones((3, 2)), np.ones(2))


# --- Theorem C.1 -----------------------------------------------------------------------------------


def test_gaussian_coherence_monte_carlo_against_loops_and_the_exact_probability():
    from grokkit import theory

    raw, mu = theory.sparse.gaussian_coherence_monte_carlo(12, 3, 5, 0.7, 4, seed=2)
    phi = data.sparse.dictionary(12, "orthonormal", 2)[:, :5]
    rs = np.random.RandomState([2, 1])
    for k in range(4):
        X = rs.randn(3, 12) / 12**0.7
        assert raw[k] == pytest.approx(max(abs(X[i] @ phi[:, j]) for i in range(3) for j in range(5)), rel=1e-12)
        assert mu[k] == pytest.approx(data.sparse.coherence(X.T, phi), rel=1e-12)
    raw2, mu2 = theory.sparse.gaussian_coherence_monte_carlo(12, 3, 5, 0.2, 4, seed=2)
    np.testing.assert_allclose(raw2, raw * 12 ** 0.5, rtol=1e-12)  # scale n^-alpha
    np.testing.assert_allclose(mu2, mu, rtol=1e-12)  # the coherence is scale free
    # exact probability: N m independent standard normals against 2 beta sqrt(ln nN)
    from scipy.stats import norm
    u = 2 * 0.8 * np.sqrt(np.log(36))
    assert float(theory.sparse.gaussian_coherence_exceedance(12, 3, 5, 0.8)) == pytest.approx(
        1 - (1 - 2 * norm.sf(u)) ** 15, rel=1e-10)
    big = theory.sparse.gaussian_coherence_monte_carlo(20, 4, 20, 0.5, 4000, seed=1)[0]
    freq = (big > 2 * 0.7 * np.sqrt(np.log(80)) / 20**0.5).mean()
    exact = float(theory.sparse.gaussian_coherence_exceedance(20, 4, 20, 0.7))
    assert abs(freq - exact) < 4 * np.sqrt(exact * (1 - exact) / 4000)
    bound, prob = theory.sparse.gaussian_coherence_bound(20, 4, 0.5, 1.2)
    assert bound == pytest.approx(2.4 * np.sqrt(np.log(80)) / np.sqrt(20)) and prob == pytest.approx(80 ** (1 - 2 * 1.44))
    with pytest.raises(ValueError, match=r"beta must be in \(0\.0, inf\), got 0\.0"):
        theory.sparse.gaussian_coherence_bound(20, 4, 0.5, 0.0)
    with pytest.raises(ValueError, match=r"m must be an integer in \[1, n\] = \[1, 12\], got 13"):
        theory.sparse.gaussian_coherence_monte_carlo(12, 3, 13, 0.5, 2)
    with pytest.raises(ValueError, match=r"alpha must be in \(0\.0, inf\), got 0\.0"):
        theory.sparse.gaussian_coherence_monte_carlo(12, 3, 5, 0.0, 2)


# --- Theorem C.2 -----------------------------------------------------------------------------------


def test_rip_monte_carlo_against_the_sampled_supports_of_the_seeded_matrices():
    from grokkit import metrics, theory

    got = theory.sparse.rip_monte_carlo(15, [1, 3], [4, 9], 50, ensemble="gaussian", seed=3)
    for j, N in enumerate([4, 9]):
        X = np.random.RandomState([3, N]).randn(N, 15) / np.sqrt(N)
        for i, s in enumerate([1, 3]):
            assert got[i, j] == pytest.approx(metrics.restricted_isometry_sample(X, s, 50, seed=3).delta, rel=1e-12)
    # Bernoulli columns have unit norm: delta_1 = 0 exactly
    bern = theory.sparse.rip_monte_carlo(15, [1, 2], [4, 9], 50, ensemble="bernoulli", seed=3)
    assert np.abs(bern[0]).max() < 1e-12 and (bern[1] > 0).all()
    with pytest.raises(ValueError, match=r"ensemble must be one of 'gaussian', 'bernoulli', got 'rademacher'"):
        theory.sparse.rip_monte_carlo(15, [1], [4], 5, ensemble="rademacher")
    with pytest.raises(ValueError, match=r"s_grid must be an integer in \[1, n\] = \[1, 15\], got 16"):
        theory.sparse.rip_monte_carlo(15, [16], [4], 5)
    with pytest.raises(ValueError, match=r"supports must be an integer in \[1, inf\), got 0"):
        theory.sparse.rip_monte_carlo(15, [1], [4], 0)
