"""Large initialisation and weight decay (Figures 25 and 26, §C.9) and Theorems C.13–C.15: the closed-form
iterates without the ℓ1 term, one initialisation per configuration in the sparse kernels, the figure of
errors on two scales, against plain numpy."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from grokkit import data, plots, theory  # noqa: E402
from grokkit.kernels import fused, sparse  # noqa: E402


@pytest.fixture(scope="module")
def problem():
    return data.sparse.problem(20, 3, 8, variance="1/N", snr=1e4, seed=2)


def numpy_gradient_descent(X, y, b1, alpha, beta2, steps):
    """b(t+1) = b(t) - alpha (X^T (X b(t) - y) + beta2 b(t)), every iterate from b(1)."""
    b, out = b1.copy(), [b1.copy()]
    for _ in range(steps):
        b = b - alpha * (X.T @ (X @ b - y) + beta2 * b)
        out.append(b.copy())
    return np.array(out)


# ------------------------------------------------------------------ closed-form iterates (beta1 = 0)

@pytest.mark.parametrize("beta2", [0.0, 0.05])
def test_ridge_iterates_against_a_plain_loop(problem, beta2) -> None:
    X, y = problem.X, problem.y
    b1 = np.random.RandomState(0).randn(X.shape[1]) * 3.0
    alpha = 1.0 / np.linalg.norm(X, 2) ** 2
    loop = numpy_gradient_descent(X, y, b1, alpha, beta2, 300)
    t = np.array([0, 1, 2, 17, 300])
    np.testing.assert_allclose(theory.sparse.ridge_iterates(X, y, b1, alpha, beta2, t), loop[t], atol=1e-11)


def test_ridge_iterates_null_space_decays_like_one_minus_alpha_beta2(problem) -> None:
    X, y = problem.X, problem.y
    n = X.shape[1]
    _, _, Vt = np.linalg.svd(X)
    null = Vt[X.shape[0]:].T @ Vt[X.shape[0]:]          # projector on the null space of X
    b1 = null @ np.ones(n) * 10.0
    alpha, beta2, t = 0.1, 1e-3, 5000
    b = theory.sparse.ridge_iterates(X, y, b1, alpha, beta2, [t])[0]
    np.testing.assert_allclose(null @ b, (1 - alpha * beta2) ** t * b1, atol=1e-12)
    # at large t the iterate is the ridge solution, whatever the start
    far = theory.sparse.ridge_iterates(X, y, b1, alpha, beta2, [10**8])[0]
    np.testing.assert_allclose(far, data.sparse.least_squares(X, y, beta2), atol=1e-12)


def test_ridge_iterates_matches_the_kernel(problem) -> None:
    X, y = problem.X, problem.y
    traj = sparse.subgradient(X, y, alpha=0.05, beta1=0.0, beta2=1e-2, init_scale=5.0, init="constant",
                              steps=2000, record_b=True, dense=100, per_decade=10, device="cpu", progress=False)
    pred = theory.sparse.ridge_iterates(X, y, 5.0 * np.ones(X.shape[1]), 0.05, 1e-2, traj.steps)
    np.testing.assert_allclose(traj.b[0], pred, atol=1e-10)


@pytest.mark.parametrize("kwargs, message", [
    (dict(alpha=0.0), r"alpha must be in \(0.0, inf\), got 0.0"),
    (dict(beta2=-1.0), r"beta2 must be in \[0.0, inf\), got -1.0"),
    (dict(t=[-1]), r"t must be an integer in \[0, "),
    (dict(t=[[1, 2]]), r"t must be a scalar or 1-D"),
    (dict(b1=np.ones((2, 20))), r"b1 must have shape \(n,\)"),
    (dict(b1=np.ones(7)), r"X, y and b must have shapes"),
])
def test_ridge_iterates_bad_inputs(problem, kwargs, message) -> None:
    args = dict(b1=np.ones(20), alpha=0.1, beta2=0.0, t=[1]) | kwargs
    with pytest.raises(ValueError, match=message):
        theory.sparse.ridge_iterates(problem.X, problem.y, **args)


# ------------------------------------------------------------------ one initialisation per configuration

@pytest.mark.parametrize("device_path", ["fused", "torch"])
def test_batched_initialisations_equal_separate_runs(problem, device_path, monkeypatch) -> None:
    if device_path == "torch":
        monkeypatch.setattr(fused, "usable", lambda *problem: False)
    elif fused.library() is None:
        pytest.skip("the fused CPU steps cannot be built on this machine (no cc, or no AVX2/FMA)")
    X, y = problem.X, problem.y
    kw = dict(alpha=0.05, beta1=1e-3, init_scale=[2.0, 2.0], steps=500, seed=4, record_b=True,
              dense=50, per_decade=10, device="cpu", progress=False)
    both = sparse.subgradient(X, y, beta2=[1e-2, 1e-3], init=["constant", "random"], **kw)
    assert both.backend == device_path
    for g, (init, beta2) in enumerate((("constant", 1e-2), ("random", 1e-3))):
        one = sparse.subgradient(X, y, beta2=beta2, init=init, **kw | dict(init_scale=2.0))
        np.testing.assert_allclose(both.b[g], one.b[0], rtol=0, atol=1e-13)
        np.testing.assert_array_equal(both.b[g, 0], sparse.initial_point(X.shape[1], 2.0, init, seed=4))


def test_a_shared_grid_is_repeated_for_each_initialisation(problem) -> None:
    traj = sparse.subgradient(problem.X, problem.y, alpha=0.05, beta1=0.0, init_scale=3.0,
                              init=("constant", "random"), steps=10, device="cpu", progress=False)
    assert len(traj) == 2
    np.testing.assert_allclose(traj.l2[:, 0], [3.0 * np.sqrt(20),
                                               np.linalg.norm(sparse.initial_point(20, 3.0, "random"))])


@pytest.mark.parametrize("kwargs, message", [
    (dict(init=["constant", "random"], beta2=[0.0, 0.0, 0.0]),
     r"init must be one option or a sequence of one per configuration \(G = 3\), got 2 options"),
    (dict(init=["constant", "zeros"]), r"init must be one of 'random', 'constant', got 'zeros'"),
    (dict(init=[]), r"init must be one option or a non-empty sequence of options, got \[\]"),
])
def test_bad_initialisation_lists(problem, kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        sparse.subgradient(problem.X, problem.y, alpha=0.05, beta1=0.0, steps=10, **kwargs)


# ------------------------------------------------------------------ the figure of Figure 25

def test_error_scales_draws_the_run_on_two_scales(problem) -> None:
    traj = sparse.subgradient(problem.X, problem.y, b_star=problem.b_star, alpha=0.05, beta1=0.0, beta2=1e-2,
                              init_scale=[5.0, 1.0], steps=3000, dense=100, per_decade=20, device="cpu",
                              progress=False)
    fig = plots.error_scales(traj, problem.b_star, g=1, t1=50.0)
    main = [ax for ax in fig.axes if ax.get_ylabel() == "relative error"]
    twins = [ax for ax in fig.axes if ax not in main]
    assert [ax.get_yscale() for ax in main] == ["linear", "log"] == [ax.get_yscale() for ax in twins]
    keep = traj.steps >= 1
    for ax, norm, p in zip(twins, (traj.l2, traj.l1), (2, 1)):
        curve, reference = ax.get_lines()
        np.testing.assert_array_equal(curve.get_ydata(), norm[1][keep])
        assert reference.get_ydata()[0] == pytest.approx(np.linalg.norm(problem.b_star, p))
    np.testing.assert_array_equal(main[0].get_lines()[1].get_ydata(), traj.test_error[1][keep])
    plots.plt.close(fig)
