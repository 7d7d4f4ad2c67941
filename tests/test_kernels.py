"""Tests of grokkit.kernels: the three update rules against plain numpy loops, batching,
convergence, determinism, early stop, logging schedule, divergence and argument checks."""
import importlib
import re

import numpy as np
import pytest
import torch

import grokkit as gk
from grokkit import data, theory

run_mod = importlib.import_module("grokkit.kernels.run")
fused_mod = importlib.import_module("grokkit.kernels.fused")
sparse_mod = importlib.import_module("grokkit.kernels.sparse")

METHODS = ("subgradient", "projected_subgradient", "ista")


@pytest.fixture(scope="module")
def prob():
    return data.sparse.problem(40, 3, 15, variance="1/N", seed=0)


# --- plain numpy references ---------------------------------------------------------------


def reference(method, X, y, b0, alpha, beta1, beta2, steps):
    """Every iterate b^(1..steps+1) of ``method`` as a (steps + 1, n) array (float64 numpy)."""
    P = np.linalg.pinv(X)
    b = np.array(b0, dtype=float)
    out = [b.copy()]
    for _ in range(steps):
        if method == "subgradient":
            b = b - alpha * (X.T @ (X @ b - y) + beta2 * b + beta1 * np.sign(b))
        elif method == "projected_subgradient":
            c = b - alpha * (beta2 * b + beta1 * np.sign(b))
            b = c - P @ (X @ c - y)
        else:
            z = b - alpha * (X.T @ (X @ b - y) + beta2 * b)
            b = np.sign(z) * np.maximum(np.abs(z) - alpha * beta1, 0.0)
        out.append(b.copy())
    return np.array(out)


def reference_metrics(B, X, y, b_star, beta1, beta2):
    """The curves of a Trajectory for iterates B (T, n)."""
    r = B @ X.T - y
    G = r @ X + beta2 * B
    return {
        "train_error": np.linalg.norm(r, axis=1) / np.linalg.norm(y),
        "test_error": np.linalg.norm(B - b_star, axis=1) / np.linalg.norm(b_star),
        "l1": np.abs(B).sum(1),
        "l2": np.linalg.norm(B, axis=1),
        "grad_ratio": np.linalg.norm(beta1 * np.sign(B), axis=1) / np.linalg.norm(G, axis=1),
    }


def assert_same_curves(method, a, ga, b, gb, what=""):
    """Curves of configuration ``ga`` of ``a`` and ``gb`` of ``b`` equal up to rounding (relative 1e-10).

    The gradient ratio of the projected subgradient is skipped: its iterates are feasible, so the
    denominator ||X^T(Xb - y)|| is rounding noise (~1e-16) and the ratio is not reproducible."""
    for name in run_mod.METRICS:
        if name == "grad_ratio" and method == "projected_subgradient":
            continue
        np.testing.assert_allclose(getattr(a, name)[ga], getattr(b, name)[gb], rtol=1e-10, atol=1e-12,
                                   err_msg=f"{name} {what}")


def solve(method, p, steps, **kwargs):
    kwargs.setdefault("device", "cpu")
    return gk.kernels.solve(method, p.X, p.y, b_star=p.b_star, steps=steps, **kwargs)


# --- each kernel against the numpy loop -------------------------------------------------------


@pytest.fixture(params=["fused", "torch"])
def backend(request, monkeypatch):
    """Run a test through the fused CPU steps and through the PyTorch steps."""
    if request.param == "torch":
        monkeypatch.setattr(fused_mod, "usable", lambda *problem: False)
    elif fused_mod.library() is None:
        pytest.skip("the fused CPU steps cannot be built on this machine (no cc, or no AVX2/FMA)")
    return request.param


@pytest.mark.parametrize("method", METHODS)
def test_kernel_matches_numpy_loop_one_configuration(method, prob, backend):
    alpha, beta1, beta2, zeta, steps = 0.5 / prob.lambda_max, 1e-2, 0.05, 0.1, 300
    traj = solve(method, prob, steps, alpha=alpha, beta1=beta1, beta2=beta2, init="constant",
                 init_scale=zeta, record_b=True, stop_periodic=False)
    assert traj.backend == backend
    B = reference(method, prob.X, prob.y, zeta * np.ones(prob.n), alpha, beta1, beta2, steps)
    np.testing.assert_array_equal(traj.steps, np.arange(steps + 1))
    assert traj.b.shape == (1, steps + 1, prob.n)
    assert np.abs(traj.b[0] - B).max() <= 1e-12
    assert np.abs(traj.b_final[0] - B[-1]).max() <= 1e-12
    for name, curve in reference_metrics(B, prob.X, prob.y, prob.b_star, beta1, beta2).items():
        np.testing.assert_allclose(getattr(traj, name)[0], curve, rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("method", METHODS)
def test_kernel_matches_numpy_loop_batched_grid(method, prob, backend):
    steps, zeta = 300, 0.05
    cfg = gk.kernels.grid(alpha=np.array([0.3, 1.0, 1.6]) / (prob.lambda_max + 0.1),
                          beta1=[0.0, 1e-3, 3e-2], beta2=[0.0, 0.1])
    assert cfg["alpha"].size == 18
    traj = solve(method, prob, steps, **cfg, init="constant", init_scale=zeta, record_b=True)
    assert traj.b.shape == (18, steps + 1, prob.n)
    for g in range(18):
        a, b1, b2 = cfg["alpha"][g], cfg["beta1"][g], cfg["beta2"][g]
        B = reference(method, prob.X, prob.y, zeta * np.ones(prob.n), a, b1, b2, steps)
        assert np.abs(traj.b[g] - B).max() <= 1e-12, (g, a, b1, b2)
        assert np.abs(traj.b_final[g] - B[-1]).max() <= 1e-12
        np.testing.assert_allclose(traj.train_error[g], reference_metrics(B, prob.X, prob.y, prob.b_star, b1,
                                                                          b2)["train_error"], rtol=1e-9, atol=1e-12)


def test_random_init_is_scaled_gaussian(prob):
    steps, zeta, seed = 5, 0.2, 11
    traj = solve("subgradient", prob, steps, alpha=0.01, beta1=0.0, init_scale=zeta, seed=seed, record_b=True)
    z = torch.randn(prob.n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).numpy()
    b0 = zeta * z / np.sqrt(prob.n)
    np.testing.assert_allclose(traj.b[0, 0], b0, rtol=0, atol=1e-15)
    B = reference("subgradient", prob.X, prob.y, b0, 0.01, 0.0, 0.0, steps)
    assert np.abs(traj.b[0] - B).max() <= 1e-12


def test_grid_is_cartesian_product_first_axis_slowest():
    cfg = gk.kernels.grid(alpha=[0.01, 0.1], beta1=[1e-5, 1e-4, 1e-3])
    np.testing.assert_array_equal(cfg["alpha"], [0.01] * 3 + [0.1] * 3)
    np.testing.assert_array_equal(cfg["beta1"], [1e-5, 1e-4, 1e-3] * 2)


# --- batched equals one at a time -----------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_batched_equals_one_at_a_time(method, prob):
    steps = 800
    cfg = gk.kernels.grid(alpha=np.array([0.4, 0.9, 1.5]) / prob.lambda_max, beta1=[1e-3, 1e-2, 5e-2])
    batch = solve(method, prob, steps, **cfg, seed=3, record_b=True)
    assert batch.train_error.shape == (9, batch.steps.size)
    for g in range(9):
        one = solve(method, prob, steps, alpha=cfg["alpha"][g], beta1=cfg["beta1"][g], seed=3, record_b=True)
        np.testing.assert_array_equal(one.steps, batch.steps)
        assert_same_curves(method, batch, g, one, 0, f"of configuration {g}")
        assert np.abs(batch.b[g] - one.b[0]).max() <= 1e-12
        assert np.abs(batch.b_final[g] - one.b_final[0]).max() <= 1e-12


@pytest.mark.parametrize("method", METHODS)
def test_fused_steps_match_torch_steps(method, prob, monkeypatch):
    if fused_mod.library() is None:
        pytest.skip("the fused CPU steps cannot be built on this machine (no cc, or no AVX2/FMA)")
    cfg = gk.kernels.grid(alpha=np.array([0.3, 1.0, 1.6]) / (prob.lambda_max + 0.1), beta1=[1e-4, 3e-2],
                          beta2=[0.0, 0.1])
    fast = solve(method, prob, 3000, **cfg, record_b=True)
    monkeypatch.setattr(fused_mod, "usable", lambda *problem: False)
    ref = solve(method, prob, 3000, **cfg, record_b=True)
    assert (fast.backend, ref.backend) == ("fused", "torch")
    assert np.abs(fast.b - ref.b).max() <= 1e-12
    for g in range(len(fast)):
        assert_same_curves(method, fast, g, ref, g, what=f"configuration {g}")


@pytest.mark.parametrize("method", METHODS)
def test_shared_X_with_one_y_per_configuration(method, prob):
    """y of shape (G, N) with a shared X: each configuration fits its own measurements."""
    ys = np.stack([prob.y, 2.0 * prob.y, prob.y + 0.01 * np.arange(prob.N)])
    alpha = np.full(3, 0.5 / prob.lambda_max)
    together = gk.kernels.solve(method, prob.X, ys, alpha=alpha, beta1=1e-3, steps=400, device="cpu")
    for g in range(3):
        alone = gk.kernels.solve(method, prob.X, ys[g], alpha=alpha[g], beta1=1e-3, steps=400, device="cpu")
        assert np.abs(together.b_final[g] - alone.b_final[0]).max() <= 1e-12


@pytest.mark.parametrize("method", METHODS)
def test_fused_configurations_do_not_mix(method, prob):
    """In the fused layout each configuration's arithmetic is the same whatever the batch: bit for bit."""
    if fused_mod.library() is None:
        pytest.skip("the fused CPU steps cannot be built on this machine (no cc, or no AVX2/FMA)")
    cfg = gk.kernels.grid(alpha=np.array([0.3, 1.0]) / prob.lambda_max, beta1=[1e-4, 1e-2, 3e-2])
    grid_run = solve(method, prob, 2000, **cfg)
    alone = solve(method, prob, 2000, alpha=cfg["alpha"][4], beta1=cfg["beta1"][4])
    np.testing.assert_array_equal(grid_run.b_final[4], alone.b_final[0])


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("every_chunk", [False, True])
def test_fused_steps_on_two_threads_are_those_on_one_bit_for_bit(method, every_chunk, prob, monkeypatch):
    """The fused sparse steps split the configurations over the cores (issue 23): each thread
    owns whole blocks of 4 configurations, so the records are the same, bit for bit, on 1, 2 or
    3 threads (G = 36: 9 blocks, uneven over 2). Long chunks are split, short ones are not, unless
    ``every_chunk``."""
    if fused_mod.library() is None:
        pytest.skip("the fused CPU steps cannot be built on this machine (no cc, or no AVX2/FMA)")
    if every_chunk:
        monkeypatch.setattr(fused_mod, "THREAD_WORK", 0.0)
    monkeypatch.setattr(fused_mod.os, "sched_getaffinity", lambda pid: set(range(3)), raising=False)
    cfg = gk.kernels.grid(alpha=np.geomspace(0.1, 1.0, 6) / prob.lambda_max, beta1=np.geomspace(1e-4, 3e-2, 6))
    runs, splits = {}, []
    split = fused_mod.threads
    monkeypatch.setattr(fused_mod, "threads", lambda work: splits.append(split(work)) or splits[-1])
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("OMP_NUM_THREADS", threads)
        runs[threads] = solve(method, prob, 5000, **cfg)
        assert runs[threads].backend == "fused"
        assert max(splits) == int(threads) and (threads == "1" or (min(splits) == 1) != every_chunk)
        splits.clear()
    for threads in ("2", "3"):
        for name in ("b_final", "train_error", "test_error", "l1", "stopped_at"):
            np.testing.assert_array_equal(getattr(runs[threads], name), getattr(runs["1"], name), err_msg=name)


_WAIT_POLICY = """
import builtins, os, sys
seen = {}
load = builtins.__import__
def spy(name, *args, **kwargs):
    if name == "torch" and "torch" not in sys.modules:
        seen["policy"] = os.environ.get("OMP_WAIT_POLICY")
    return load(name, *args, **kwargs)
builtins.__import__ = spy
%s
import grokkit
print(seen.get("policy"), grokkit._threads_sleep)
"""


@pytest.mark.parametrize("first, env, expected", [
    ("", None, "PASSIVE True"),             # grokkit first: torch's threads sleep
    ("", "active", "active False"),         # the user's policy wins, and the kernels keep one thread
    ("import torch", None, "None False"),   # torch first: its policy is its default, one thread
])
def test_torch_threads_sleep_when_they_wait(first, env, expected):
    """OpenMP reads its wait policy once, when torch loads: ``import grokkit`` sets it first, and
    the kernels use torch's threads only where they sleep (spinning threads ran 20 times slower)."""
    import os
    import subprocess
    import sys

    environ = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if env is not None:
        environ["OMP_WAIT_POLICY"] = env
    out = subprocess.run([sys.executable, "-c", _WAIT_POLICY % first], env=environ, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    assert " ".join(out[-2:]) == expected


@pytest.mark.parametrize("method", METHODS)
def test_batch_of_problems_equals_each_problem(method):
    probs = [data.sparse.problem(40, 3, 15, variance="1/N", seed=s) for s in range(3)]
    X = np.stack([p.X for p in probs])
    y = np.stack([p.y for p in probs])
    b_star = np.stack([p.b_star for p in probs])
    alpha = np.array([0.5 / p.lambda_max for p in probs])
    beta1 = np.array([1e-3, 1e-2, 3e-2])
    steps = 800
    batch = gk.kernels.solve(method, X, y, b_star=b_star, alpha=alpha, beta1=beta1, beta2=0.01, steps=steps,
                             seed=1, device="cpu", record_b=True)
    assert batch.b.shape == (3, batch.steps.size, 40)
    for g, p in enumerate(probs):
        one = solve(method, p, steps, alpha=alpha[g], beta1=beta1[g], beta2=0.01, seed=1, record_b=True)
        assert_same_curves(method, batch, g, one, 0, f"of problem {g}")
        assert np.abs(batch.b[g] - one.b[0]).max() <= 1e-12


# --- convergence ------------------------------------------------------------------------------


def test_subgradient_without_l1_converges_to_least_squares_full_rank():
    p = data.sparse.problem(20, 3, 40, variance="1/N", seed=4)
    assert np.linalg.matrix_rank(p.X) == 20
    traj = solve("subgradient", p, 3000, alpha=1.0 / p.lambda_max, beta1=0.0, init_scale=1.0)
    assert np.abs(traj.b_final[0] - data.sparse.least_squares(p.X, p.y)).max() <= 1e-8
    assert traj.train_error[0, -1] < 1e-8  # noiseless: b_hat = b_star interpolates
    assert traj.test_error[0, -1] < 1e-7


def test_subgradient_without_l1_converges_on_the_row_space(prob):
    traj = solve("subgradient", prob, 3000, alpha=1.0 / prob.lambda_max, beta1=0.0, init_scale=1.0)
    P = theory.sparse.range_projector(prob.X)
    b = traj.b_final[0]
    assert np.abs(P @ (b - prob.b_hat)).max() <= 1e-8
    # the null-space component is never touched: it stays that of the initial point
    b0 = _random_init(prob.n, 1.0, seed=0)
    np.testing.assert_allclose((np.eye(prob.n) - P) @ b, (np.eye(prob.n) - P) @ b0, atol=1e-10)


def _random_init(n, zeta, seed):
    z = torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).numpy()
    return zeta * z / np.sqrt(n)


def lasso_kkt_residual(X, y, b, beta1, beta2):
    """Violation of the optimality conditions 0 in G_beta2(b) + beta1 d||b||_1."""
    g = X.T @ (X @ b - y) + beta2 * b
    on = b != 0
    return max(np.abs(g[on] + beta1 * np.sign(b[on])).max(initial=0.0),
               np.abs(g[~on]).max(initial=0.0) - beta1, 0.0)


def lasso_objective(X, y, b, beta1, beta2):
    return 0.5 * np.sum((X @ b - y) ** 2) + 0.5 * beta2 * b @ b + beta1 * np.abs(b).sum()


def test_ista_reaches_the_lasso_solution(prob):
    from grokkit import baselines

    beta1 = 1e-2
    traj = solve("ista", prob, 5000, alpha=1.0 / prob.lambda_max, beta1=beta1)
    sol = baselines.lasso(prob.X, prob.y, beta1)
    assert sol.solver == "CLARABEL"
    b = traj.b_final[0]
    assert np.abs(b - sol.b).max() <= 1e-6
    assert lasso_kkt_residual(prob.X, prob.y, b, beta1, 0.0) <= 1e-12
    assert 0 < np.count_nonzero(b) < prob.n  # the l1 term is active: a sparse, nonzero solution


def test_ista_with_ridge_reaches_the_elastic_net_solution(prob):
    """With beta2 > 0 CLARABEL's default tolerances give the minimiser only to ~1e-4 (its objective
    to ~1e-9), so ISTA is checked on the optimality conditions and the objective."""
    from grokkit import baselines

    beta1, beta2 = 1e-2, 0.1
    traj = solve("ista", prob, 5000, alpha=1.0 / (prob.lambda_max + beta2), beta1=beta1, beta2=beta2)
    sol = baselines.lasso(prob.X, prob.y, beta1, beta2)
    b = traj.b_final[0]
    assert lasso_kkt_residual(prob.X, prob.y, b, beta1, beta2) <= 1e-12
    assert lasso_objective(prob.X, prob.y, b, beta1, beta2) <= sol.value + 1e-12
    assert lasso_objective(prob.X, prob.y, b, beta1, beta2) == pytest.approx(sol.value, rel=1e-6)
    assert np.abs(b - sol.b).max() <= 1e-4


def test_projected_subgradient_stays_feasible(prob):
    cfg = gk.kernels.grid(alpha=[0.01, 0.1, 0.25], beta1=[1e-3, 1e-1], beta2=[0.0, 0.5])
    traj = solve("projected_subgradient", prob, 500, **cfg, init_scale=1.0, record_b=True)
    assert traj.train_error[:, 0].min() > 1e-3  # the initial point is not feasible
    assert traj.train_error[:, 1:].max() <= 1e-12
    residual = np.einsum("nk,gtk->gtn", prob.X, traj.b[:, 1:]) - prob.y
    assert np.abs(residual).max() <= 1e-12


# --- determinism ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_same_seed_identical_bits(method, prob):
    cfg = gk.kernels.grid(alpha=np.array([0.5, 1.5]) / prob.lambda_max, beta1=[1e-3, 1e-2])
    a = solve(method, prob, 400, **cfg, seed=5, init_scale=0.5)
    b = solve(method, prob, 400, **cfg, seed=5, init_scale=0.5)
    for name in (*run_mod.METRICS, "b_final", "steps", "stopped_at"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    c = solve(method, prob, 400, **cfg, seed=6, init_scale=0.5)
    assert not np.array_equal(a.b_final, c.b_final)
    assert not np.array_equal(a.l1, c.l1)


# --- early stop of exactly periodic configurations ---------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_stop_periodic_changes_nothing(method, prob):
    cfg = gk.kernels.grid(alpha=np.array([0.5, 1.0, 1.9]) / prob.lambda_max, beta1=[1e-2, 1e-1])
    steps = 4000
    on = solve(method, prob, steps, **cfg, stop_periodic=True, record_b=True, dense=200, per_decade=50)
    off = solve(method, prob, steps, **cfg, stop_periodic=False, record_b=True, dense=200, per_decade=50)
    np.testing.assert_array_equal(off.stopped_at, -1)
    for g in range(len(on)):
        assert_same_curves(method, on, g, off, g, f"of configuration {g}")
    assert np.abs(on.b - off.b).max() <= 1e-12
    assert np.abs(on.b_final - off.b_final).max() <= 1e-12
    if method == "ista":
        assert (on.stopped_at >= 0).any()  # the feature was exercised
        stopped = on.stopped_at >= 0
        assert (on.stopped_at[stopped] < steps).all()


def test_stop_periodic_handles_period_two_cycles(prob):
    """A configuration whose iterate alternates between two points, bit for bit."""
    X, y = (torch.as_tensor(a) for a in (prob.X, prob.y))
    config = run_mod.configurations(alpha=[0.1, 0.1], beta1=0.0, beta2=0.0, init_scale=1.0)
    b0 = torch.ones(2, prob.n, dtype=torch.float64)

    def step(b, X, y, alpha, beta1, beta2):
        flip = -b  # period 2 for every row
        return flip

    for steps in (1500, 1501):
        data = {"X": X, "y": y, "b_star": None}
        on = run_mod.run(run_mod.SPARSE, "flip", step, data, config, b0, steps, work=1.0, record=True,
                         progress=False)
        off = run_mod.run(run_mod.SPARSE, "flip", step, data, config, b0, steps, work=1.0, record=True,
                          stop_periodic=False, progress=False)
        # cycles are looked for past the dense part of the schedule only (t > dense = 1000)
        assert (on.stopped_at == on.steps[on.steps > 1000][0]).all()
        np.testing.assert_array_equal(on.b, off.b)
        np.testing.assert_array_equal(on.b_final, off.b_final)
        np.testing.assert_array_equal(on.b_final[0], (-1.0) ** steps * np.ones(prob.n))
        for name in ("train_error", "l1", "l2"):
            np.testing.assert_array_equal(getattr(on, name), getattr(off, name))


# --- logging schedule and trajectory shapes ---------------------------------------------------


def test_log_schedule_long_run():
    s = gk.kernels.log_schedule(10**8)
    assert s.size < 2000
    np.testing.assert_array_equal(s[:1001], np.arange(1001))
    assert (np.diff(s) > 0).all()
    assert s[-1] == 10**8
    assert s.dtype.kind == "i"


def test_log_schedule_short_run_is_every_step():
    np.testing.assert_array_equal(gk.kernels.log_schedule(1000), np.arange(1001))
    np.testing.assert_array_equal(gk.kernels.log_schedule(37), np.arange(38))
    np.testing.assert_array_equal(gk.kernels.log_schedule(20, dense=50), np.arange(21))
    s = gk.kernels.log_schedule(5000, dense=10, per_decade=10)
    np.testing.assert_array_equal(s[:11], np.arange(11))
    assert s[-1] == 5000 and (np.diff(s) > 0).all() and s.size < 50


@pytest.mark.parametrize("record_b", [False, True])
def test_trajectory_shapes(prob, record_b):
    cfg = gk.kernels.grid(alpha=[0.01, 0.02], beta1=[1e-3, 1e-2, 1e-1])
    traj = solve("ista", prob, 3000, **cfg, record_b=record_b)
    T = gk.kernels.log_schedule(3000).size
    assert len(traj) == 6
    np.testing.assert_array_equal(traj.steps, gk.kernels.log_schedule(3000))
    for name in run_mod.METRICS:
        assert getattr(traj, name).shape == (6, T)
    assert traj.b_final.shape == (6, prob.n)
    assert traj.diverged.shape == (6,) and not traj.diverged.any()
    assert traj.stopped_at.shape == (6,)
    assert traj.method == "ista" and traj.device == "cpu"
    np.testing.assert_allclose(traj.alpha_beta1, cfg["alpha"] * cfg["beta1"])
    if record_b:
        assert traj.b.shape == (6, T, prob.n)
        np.testing.assert_array_equal(traj.b[:, -1], traj.b_final)
    else:
        assert traj.b is None


def test_test_error_is_nan_without_b_star(prob):
    traj = gk.kernels.ista(prob.X, prob.y, alpha=0.01, beta1=1e-3, steps=10, device="cpu")
    assert np.isnan(traj.test_error).all()
    assert np.isfinite(traj.train_error).all()


# --- divergence -------------------------------------------------------------------------------


def test_divergence_is_reported(prob):
    X, y, b_star = prob.tensors("cpu")
    config = run_mod.configurations(alpha=[2.0, 0.5 / prob.lambda_max], beta1=1e-3, beta2=0.0, init_scale=1.0)
    b0 = torch.full((2, prob.n), 0.1, dtype=torch.float64)

    def step(b, X, y, alpha, beta1, beta2):
        # configuration 0 (marked by alpha > 1) overflows after two steps
        return torch.where(alpha > 1.0, b * 1e200, sparse_mod.subgradient_step(b, X, y, alpha, beta1, beta2))

    with pytest.warns(RuntimeWarning, match="diverged"):
        traj = run_mod.run(run_mod.SPARSE, "blowup", step, {"X": X, "y": y, "b_star": b_star}, config, b0, 200,
                           work=1.0, progress=False)
    np.testing.assert_array_equal(traj.diverged, [True, False])
    assert np.isfinite(traj.b_final[1]).all()
    for name in ("train_error", "test_error", "l1", "l2", "grad_ratio"):
        assert np.isfinite(getattr(traj, name)[1]).all(), name
    assert np.isfinite(traj.l1[0, :2]).all() and not np.isfinite(traj.l1[0, 2:]).any()
    # the healthy configuration ran exactly as it would alone
    B = reference("subgradient", prob.X, prob.y, np.full(prob.n, 0.1), config["alpha"][1], 1e-3, 0.0, 200)
    assert np.abs(traj.b_final[1] - B[-1]).max() <= 1e-12


# --- bad inputs -------------------------------------------------------------------------------


@pytest.fixture
def no_run(monkeypatch):
    def computed(*args, **kwargs):
        raise AssertionError("the kernel started iterating before validating its arguments")

    monkeypatch.setattr(sparse_mod, "run", computed)


def test_alpha_above_stability_limit(no_run, prob):
    beta2 = 0.5
    limit = 2.0 / (prob.lambda_max + beta2)
    for method in METHODS:
        with pytest.raises(ValueError, match=re.escape("alpha must be in (0, 2/(lambda_max + beta2))")) as err:
            solve(method, prob, 10, alpha=[0.1 * limit, 1.01 * limit], beta1=1e-3, beta2=beta2)
        assert f"(0, {limit:.6g})" in str(err.value)
    with pytest.raises(ValueError, match=re.escape("alpha must be in (0, 2/(lambda_max + beta2))")):
        solve("ista", prob, 10, alpha=limit, beta1=1e-3, beta2=beta2)  # the limit itself is excluded


BAD_KWARGS = [
    (dict(alpha=0.0, beta1=1e-3), r"alpha must be in \(0\.0, inf\)"),
    (dict(alpha=-0.01, beta1=1e-3), r"alpha must be in \(0\.0, inf\)"),
    (dict(alpha=0.01, beta1=-1e-3), r"beta1 must be in \[0\.0, inf\)"),
    (dict(alpha=0.01, beta1=[1e-3, float("nan")]), r"beta1 must be in \[0\.0, inf\)"),
    (dict(alpha=0.01, beta1=1e-3, beta2=-0.1), r"beta2 must be in \[0\.0, inf\)"),
    (dict(alpha=0.01, beta1=1e-3, init="zeros"), r"init must be one of 'random', 'constant'"),
    (dict(alpha=0.01, beta1=1e-3, device="tpu"), r"device must be one of 'auto', 'cpu', 'cuda'"),
    (dict(alpha=[0.01, 0.02], beta1=[1e-3, 1e-2, 1e-1]),
     r"alpha, beta1, beta2 and init_scale must be scalars or 1-D of one length G"),
    (dict(alpha=[[0.01, 0.02]], beta1=1e-3), r"must be scalars or 1-D of one length G"),
    (dict(alpha=0.01, beta1=1e-3, steps=0), r"steps must be an integer in \[1, 1000000000000000\]"),
]


@pytest.mark.parametrize("kwargs, message", BAD_KWARGS)
def test_bad_hyper_parameters_fail_before_compute(no_run, prob, kwargs, message):
    kwargs = {"steps": 10, **kwargs}
    for method in METHODS:
        with pytest.raises(ValueError, match=message):
            gk.kernels.solve(method, prob.X, prob.y, **{"device": "cpu", **kwargs})


def test_unknown_method(no_run, prob):
    with pytest.raises(ValueError, match=r"method must be one of 'subgradient', 'projected_subgradient', 'ista'"):
        gk.kernels.solve("foo", prob.X, prob.y, alpha=0.01, beta1=1e-3, steps=10)


def test_unknown_device():
    with pytest.raises(ValueError, match=r"device must be one of"):
        gk.kernels.resolve_device("gpu0")
    assert gk.kernels.resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"device must be 'auto' or 'cpu' on this machine"):
            gk.kernels.resolve_device("cuda")


def test_wrong_shapes_fail_before_compute(no_run, prob):
    kw = dict(alpha=0.01, beta1=1e-3, steps=10, device="cpu")
    with pytest.raises(ValueError, match=r"X must have shape \(N, n\) or \(G, N, n\)"):
        gk.kernels.ista(prob.X[0], prob.y, **kw)
    with pytest.raises(ValueError, match=r"X must have shape \(N, n\) or \(G, N, n\) with G = 2"):
        gk.kernels.ista(np.stack([prob.X] * 3), prob.y, **{**kw, "alpha": [0.01, 0.02]})
    with pytest.raises(ValueError, match=r"y must have shape \(N,\) or \(G, N\) with N = 15"):
        gk.kernels.ista(prob.X, prob.y[:-1], **kw)
    with pytest.raises(ValueError, match=r"y must have shape \(N,\) or \(G, N\) with N = 15"):
        gk.kernels.ista(prob.X, prob.y[:, None], **kw)
    with pytest.raises(ValueError, match=r"b_star must have shape \(n,\) or \(G, n\) with n = 40"):
        gk.kernels.ista(prob.X, prob.y, b_star=prob.b_star[:-1], **kw)


def test_y_with_wrong_number_of_rows_fails_before_compute(no_run, prob):
    with pytest.raises(ValueError, match=r"y must have shape \(N,\) or \(G, N\) with G = 2"):
        gk.kernels.ista(prob.X, np.stack([prob.y] * 3), alpha=[0.01, 0.02], beta1=1e-3, steps=10, device="cpu")


def test_single_row_y_broadcasts_over_configurations(prob):
    alpha = np.array([1.0, 0.5]) / prob.lambda_max
    a = gk.kernels.ista(prob.X, prob.y[None], alpha=alpha, beta1=0.05, steps=3000, device="cpu")
    b = gk.kernels.ista(prob.X, prob.y, alpha=alpha, beta1=0.05, steps=3000, device="cpu")
    np.testing.assert_array_equal(a.b_final, b.b_final)


def test_projected_needs_N_at_most_n(no_run):
    p = data.sparse.problem(20, 3, 40, variance="1/N", seed=4)
    with pytest.raises(ValueError, match=r"projected_subgradient needs rank\(X\) = N <= n.*N = 40, n = 20"):
        gk.kernels.projected_subgradient(p.X, p.y, alpha=0.01, beta1=1e-3, steps=10, device="cpu")


# --- the fused CPU steps' loader --------------------------------------------------------------


def test_fused_build_is_cached(tmp_path, monkeypatch):
    if fused_mod.library() is None:
        pytest.skip("the fused CPU steps cannot be built on this machine (no cc, or no AVX2/FMA)")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    compiler = fused_mod.shutil.which("cc") or fused_mod.shutil.which("gcc")
    first = fused_mod._build(compiler)
    assert first is not None and first.parent == tmp_path / "grokkit" and first.is_file()
    stamp = first.stat().st_mtime_ns
    assert fused_mod._build(compiler) == first and first.stat().st_mtime_ns == stamp
    assert not list(first.parent.glob("*.tmp"))


def test_fused_can_be_switched_off(monkeypatch, prob):
    monkeypatch.setenv("GROKKIT_FUSED", "0")
    fused_mod.library.cache_clear()
    try:
        assert fused_mod.library() is None
        assert solve("ista", prob, 50, alpha=0.01, beta1=1e-3).backend == "torch"
    finally:
        monkeypatch.delenv("GROKKIT_FUSED")
        fused_mod.library.cache_clear()


# --- problems of different sizes in one batch (the N sweeps) ----------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_stacked_problems_follow_their_own_iterates(method):
    """grokkit.data.sparse.stack_problems pads with zero rows: each configuration of the stack gives the
    curves and the final iterate of its problem run alone (the N sweeps of Figures 8–10, 13–24)."""
    problems = [data.sparse.problem(30, 3, N, variance="1/N", seed=1, x_seed=1 + i) for i, N in enumerate((8, 14, 20))]
    X, y, b_star = data.sparse.stack_problems(problems)
    assert X.shape == (3, 20, 30) and not X[0, 8:].any() and not y[1, 14:].any()
    kw = dict(alpha=0.1, beta1=1e-3, steps=300, dense=20, per_decade=10, init="random", device="cpu")
    stacked = gk.kernels.solve(method, X, y, b_star=b_star, **kw)
    for g, p in enumerate(problems):
        alone = gk.kernels.solve(method, p.X, p.y, b_star=p.b_star, **kw)
        assert_same_curves(method, stacked, g, alone, 0, f"problem {g}")
        np.testing.assert_allclose(stacked.b_final[g], alone.b_final[0], rtol=1e-10, atol=1e-13)


def test_make_problem_x_seed_draws_new_measurements_for_the_same_signal():
    base = data.sparse.problem(30, 3, 10, seed=1)
    other = data.sparse.problem(30, 3, 10, seed=1, x_seed=2)
    np.testing.assert_array_equal(other.b_star, base.b_star)
    np.testing.assert_array_equal(other.X, data.sparse.problem(30, 3, 10, seed=2).X)
    np.testing.assert_array_equal(data.sparse.problem(30, 3, 10, seed=1, x_seed=1).X, base.X)
    with pytest.raises(ValueError, match="x_seed"):
        data.sparse.problem(30, 3, 10, x_seed=-1)


def test_stack_problems_refuses_bad_input(prob):
    with pytest.raises(ValueError, match="at least one"):
        data.sparse.stack_problems([])
    with pytest.raises(ValueError, match=r"grokkit\.data\.sparse\.Problem instances"):
        data.sparse.stack_problems([prob, "x"])
    with pytest.raises(ValueError, match="share the dimension n"):
        data.sparse.stack_problems([prob, data.sparse.problem(20, 3, 10)])


def test_projected_method_refuses_a_rank_deficient_problem_in_a_stack():
    p = data.sparse.problem(30, 3, 10, seed=0)
    X, y, b_star = data.sparse.stack_problems([p, data.sparse.problem(30, 3, 12, seed=0)])
    X[1, 1] = X[1, 0]  # two equal rows: rank 11 < N = 12
    with pytest.raises(ValueError, match=r"rank\(X\) = N <= n.*N = 12, n = 30, rank 11.*configuration 1"):
        gk.kernels.projected_subgradient(X, y, b_star=b_star, alpha=0.1, beta1=1e-3, steps=5, device="cpu")


@pytest.mark.parametrize("method", METHODS)
def test_avx512_steps_are_the_avx2_steps_bit_for_bit(method, prob, monkeypatch):
    """The sparse steps use AVX-512 (8 configurations a register) where the CPU has it: each lane
    does the fused multiply-adds of the AVX2 build in the same order, so the records are the same,
    bit for bit (issue 23). G = 36 pads to 40 in one build and to 36 in the other."""
    if fused_mod.library() is None or "avx512f" not in fused_mod._cpu_flags():
        pytest.skip("no AVX-512 (or no fused CPU steps) on this machine")
    cfg = gk.kernels.grid(alpha=np.geomspace(0.1, 1.0, 6) / prob.lambda_max, beta1=np.geomspace(1e-4, 3e-2, 6))
    runs = {}
    for isa, lanes in (("avx512", 8), ("avx2", 4)):
        monkeypatch.setenv("GROKKIT_FUSED_ISA", isa)
        fused_mod.library.cache_clear()
        assert fused_mod.library().lanes == lanes
        runs[isa] = solve(method, prob, 3000, **cfg)
        assert runs[isa].backend == "fused"
    monkeypatch.delenv("GROKKIT_FUSED_ISA")
    fused_mod.library.cache_clear()
    for name in ("b_final", "train_error", "test_error", "l1", "stopped_at"):
        np.testing.assert_array_equal(runs["avx512"].__dict__[name], runs["avx2"].__dict__[name], err_msg=name)



def test_a_trajectory_says_how_long_its_steps_took(prob):
    """``step_seconds``: the time in the steps, the rest being the records and the set-up (the
    benchmarks page projects paper presets from both)."""
    traj = gk.kernels.subgradient(prob.X, prob.y, alpha=[0.01, 0.02], beta1=1e-3, steps=2000, device="cpu",
                                  progress=False)
    assert 0 < traj.step_seconds < traj.seconds
