"""The fused CPU steps of the matrix-completion kernels (grokkit.kernels.fused, fused_matrix.c):
their one-sided Jacobi SVD against LAPACK, and their runs against the PyTorch steps."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from grokkit import data
from grokkit.kernels import fused
from grokkit.kernels import matrix as mk
from grokkit.kernels.run import run
from grokkit.metrics import first_step_below

pytestmark = pytest.mark.skipif(fused.library("matrix") is None,
                                reason="no fused CPU path on this machine (needs x86-64 with AVX2/FMA and cc)")

FIG5_ALPHA = [0.0825, 0.1, 0.75, 0.825, 1.0, 1.5]


@pytest.fixture
def torch_steps(monkeypatch: pytest.MonkeyPatch):
    """A context in which the matrix kernels run the PyTorch steps."""
    def use():
        monkeypatch.setattr(fused, "matrix_usable", lambda *problem: False)
    return use


def both_paths(kernel, torch_steps, *args, **kwargs):
    """The same run through the fused CPU steps, then through the PyTorch steps."""
    fast = kernel(*args, **kwargs, device="cpu", progress=False)
    torch_steps()
    ref = kernel(*args, **kwargs, device="cpu", progress=False)
    assert (fast.backend, ref.backend) == ("fused", "torch")
    return fast, ref


def problem(n1: int = 10, n2: int = 10, N: int = 80, seed: int = 0):
    return data.matrix.problem(n1, n2, 2, N, seed=seed)


# --- the SVD ------------------------------------------------------------------------------------


def with_singular_values(rng: np.random.RandomState, shape, s) -> np.ndarray:
    k = min(shape)
    U = np.linalg.qr(rng.randn(shape[0], k))[0]
    V = np.linalg.qr(rng.randn(shape[1], k))[0]
    return (U * np.asarray(s, dtype=float)) @ V.T


def matrices_of_every_kind(shape) -> dict[str, np.ndarray]:
    rng = np.random.RandomState(sum(shape))
    k = min(shape)
    cases = {
        "random": rng.randn(*shape),
        "tiny random": 1e-9 * rng.randn(*shape),
        "huge random": 1e200 * rng.randn(*shape),
        "zero": np.zeros(shape),
        "identity": np.eye(*shape),
        "near-degenerate": with_singular_values(rng, shape, 1.0 + 1e-13 * np.arange(k)),
        "graded": with_singular_values(rng, shape, 10.0 ** -np.arange(k)),
    }
    if k >= 3:
        cases["rank 2"] = rng.randn(shape[0], 2) @ rng.randn(2, shape[1])
        cases["rank 2, exact zeros"] = np.pad(rng.randn(2, 2), ((0, shape[0] - 2), (0, shape[1] - 2)))
        cases["clusters and a tiny one"] = with_singular_values(rng, shape, [3, 3 + 1e-12] + [1e-3] * (k - 3) + [1e-11])
    return cases


def polar_condition(s: np.ndarray, shape) -> float:
    """How much h(A) = UV^T moves per unit of relative change of a full-rank A (s decreasing):
    sigma_max / (sigma_{k-1} + sigma_k) for a square A, sigma_max / sigma_k for a rectangular one."""
    return s[0] / (s[-2] + s[-1]) if shape[0] == shape[1] and s.size > 1 else s[0] / s[-1]


def assert_svd_of_every_kind(jacobi_svd, shape) -> None:
    """The Jacobi singular values agree with numpy.linalg.svd (LAPACK) to 1e-12 ||A||_2, the tiny
    ones included (eigh of A^T A would lose those below sqrt(eps) ||A||). h(A) is a partial
    isometry with <h(A), A> = ||A||_* (a subgradient of the nuclear norm, also where U is
    completed), equal to numpy's U V^T on the well-determined singular directions (sigma >= 1e-3
    sigma_max) to 1e-12, and everywhere to 100 eps times the polar factor's condition number
    when A has full rank (both SVDs are that accurate, no more: a 40-digit reference puts them
    within 1.2x of each other). ``jacobi_svd(A)`` returns S (decreasing) and H as numpy arrays."""
    eps = np.finfo(float).eps
    cases = matrices_of_every_kind(shape)
    S, H = jacobi_svd(np.stack(list(cases.values())))
    k = min(shape)
    for (name, M), s, h in zip(cases.items(), S, H):
        U, s_ref, Vt = np.linalg.svd(M, full_matrices=False)
        scale = max(s_ref[0], np.finfo(float).tiny)
        assert np.abs(s - s_ref).max() <= 1e-12 * scale, name
        np.testing.assert_allclose(h.T @ h if shape[0] >= shape[1] else h @ h.T, np.eye(k), atol=1e-13, err_msg=name)
        np.testing.assert_allclose(np.sum(h * M), s_ref.sum(), rtol=1e-12, atol=1e-300, err_msg=name)
        r = int(np.sum(s_ref >= 1e-3 * scale))
        np.testing.assert_allclose(U[:, :r].T @ h @ Vt[:r].T, np.eye(r), atol=1e-12, err_msg=name)
        if s_ref[-1] > 1e-10 * scale:
            assert np.abs(h - U @ Vt).max() <= max(1e-12, 100 * eps * polar_condition(s_ref, shape)), name


@pytest.mark.parametrize("shape", [(10, 10), (8, 12), (12, 8), (3, 3), (5, 1), (1, 4)])
def test_singular_values_match_lapack(shape) -> None:
    """The SVD of the fused steps (fused_matrix.c) on matrices of every kind (:func:`assert_svd_of_every_kind`)."""
    assert_svd_of_every_kind(fused.jacobi_svd, shape)


# --- runs: fused steps against the PyTorch steps ------------------------------------------------


@pytest.mark.parametrize("method", list(mk.METHODS))
def test_fused_steps_match_torch_steps(method: str, torch_steps) -> None:
    """500 steps of a 12-configuration grid (10 x 10, r = 2, N = 80) from a random start of scale
    0.3, where the singular values stay apart from 0 and from each other (gaps above 1e-5, except
    those SVT sets to 0 exactly): every recorded iterate agrees to 1e-10, and so every curve."""
    p = problem()
    grid = {"alpha": np.repeat([0.2, 0.5, 1.0], 4), "beta_star": np.tile(np.repeat([1e-3, 1e-2], 2), 3),
            "beta2": np.tile([0.0, 0.05], 6)}
    fast, ref = both_paths(mk.METHODS[method], torch_steps, p.mask, p.y, (10, 10), **grid, steps=500,
                           A_star=p.A_star, init_scale=0.3, record_A=True)
    assert np.abs(fast.A - ref.A).max() <= 1e-10
    for name in ("train_error", "test_error", "nuclear", "frobenius", "singular_values"):
        np.testing.assert_allclose(getattr(fast, name), getattr(ref, name), rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("shape", [(8, 12), (12, 8)])
def test_rectangular_matrices(shape, torch_steps) -> None:
    """The fused steps work on A^T when n1 < n2; both orientations agree with the PyTorch steps."""
    p = problem(*shape, N=60, seed=1)
    fast, ref = both_paths(mk.subgradient, torch_steps, p.mask, p.y, shape, alpha=[0.3, 0.9], beta_star=1e-3,
                           steps=300, A_star=p.A_star, init_scale=0.3)
    np.testing.assert_allclose(fast.A_final, ref.A_final, atol=1e-10)
    np.testing.assert_allclose(fast.singular_values, ref.singular_values, rtol=1e-9, atol=1e-12)


def test_recorded_curves_are_those_of_the_recorded_iterates() -> None:
    """The fused path records through the family's evaluate on the iterates it returns: checked
    against numpy on those iterates (singular values to 1e-12, errors, nuclear norm, ratio)."""
    p = problem()
    beta_star = np.array([1e-3, 1e-2, 1e-1])
    traj = mk.subgradient(p.mask, p.y, (10, 10), alpha=0.5, beta_star=beta_star, steps=3000, A_star=p.A_star,
                          record_A=True, dense=100, device="cpu", progress=False)
    assert traj.backend == "fused"
    for g in range(3):
        for j in range(0, traj.steps.size, 17):
            B = traj.A[g, j]
            sv = np.linalg.svd(B, compute_uv=False)
            np.testing.assert_allclose(traj.singular_values[g, j], sv, atol=1e-12 * sv[0])
            np.testing.assert_allclose(traj.nuclear[g, j], sv.sum(), rtol=1e-12)
            np.testing.assert_allclose(traj.train_error[g, j], np.linalg.norm(B[p.mask] - p.y) / np.linalg.norm(p.y),
                                       rtol=1e-10)
            np.testing.assert_allclose(traj.test_error[g, j], np.linalg.norm(B - p.A_star) / np.linalg.norm(p.A_star),
                                       rtol=1e-12)
            np.testing.assert_allclose(traj.grad_ratio[g, j], beta_star[g] * np.sqrt(10)
                                       / np.linalg.norm(np.where(p.mask, B - p.A_star, 0.0)), rtol=1e-9)


def test_errors_t1_and_t2_agree_with_the_torch_path(torch_steps) -> None:
    """The grokking measurements agree between the paths: Figure 4's setting (completion, 10 x 10,
    r = 2, N = 80, A(1) = 1e-6 I, beta2 = 0) at alpha = 0.1 with beta* = 3e-3 instead of 1e-4 so that
    t2 comes within 15 000 steps, and four configurations of the Figure 5/42 grid.

    t1 (training error) and t2 (recovery error) are the first records at or below 1e-2 and 1e-3
    (grokkit.metrics.first_step_below): equal. Up to the last of them the errors agree to 1e-6
    relative: the r = 2 leading directions contract. Later the n - r spurious singular values sit
    at their floor, below about alpha beta*, where the steps amplify rounding (chaotically: a
    1e-18 change of A can grow to 1e-3 in the torch path itself) and the two paths follow
    different rounding; each path's spurious part is at most sqrt(n - r) alpha beta* in Frobenius
    norm, so the errors differ by at most 2 sqrt(n - r) alpha beta* / ||A*||_F (recovery) and
    / ||y||_2 (training, whose sampling only shrinks that part) beyond 1e-6 relative."""
    p = problem()
    cfg = {"alpha": np.array([0.1, 1.0, 1.5, 0.0825, 0.825]), "beta_star": np.array([3e-3, 1e-3, 1e-2, 1e-2, 1e-1])}
    fast, ref = both_paths(mk.subgradient, torch_steps, p.mask, p.y, (10, 10), **cfg, steps=15000,
                           A_star=p.A_star, init="identity")
    times = []
    for curve in ("train_error", "test_error"):
        for threshold in (1e-2, 1e-3):
            t_ref = first_step_below(ref.steps, getattr(ref, curve), threshold)
            np.testing.assert_array_equal(first_step_below(fast.steps, getattr(fast, curve), threshold), t_ref)
            times.append(t_ref)
    times = np.array(times)
    assert times[2, 0] > 1e4 and np.isfinite(times[2, :3]).all() and np.isfinite(times).sum() >= 10  # grokking
    floor = 2 * np.sqrt(10 - 2) * cfg["alpha"] * cfg["beta_star"]
    for curve, norm in (("train_error", np.linalg.norm(p.y)), ("test_error", np.linalg.norm(p.A_star))):
        a, b = getattr(fast, curve), getattr(ref, curve)
        assert (np.abs(a - b) <= 1e-6 * b + (floor / norm)[:, None]).all(), curve
        for g in range(5):
            window = ref.steps <= np.nanmax(times[:, g], initial=0)
            np.testing.assert_allclose(a[g, window], b[g, window], rtol=1e-6, err_msg=f"{curve}, configuration {g}")


# --- the loop's features on the fused path ------------------------------------------------------


def test_configurations_do_not_mix() -> None:
    """Each configuration's arithmetic is the same whatever the batch (one AVX2 lane each, padding
    with copies): bit for bit."""
    p = problem()
    grid = {"alpha": np.repeat(FIG5_ALPHA, 2), "beta_star": np.tile([1e-4, 1e-2], 6)}
    together = mk.proximal(p.mask, p.y, (10, 10), **grid, steps=2000, device="cpu", progress=False)
    for g in (0, 7, 11):
        alone = mk.proximal(p.mask, p.y, (10, 10), alpha=grid["alpha"][g], beta_star=grid["beta_star"][g],
                            steps=2000, device="cpu", progress=False)
        np.testing.assert_array_equal(together.A_final[g], alone.A_final[0])
        np.testing.assert_array_equal(together.test_error[g], alone.test_error[0])


@pytest.mark.parametrize("method", ["subgradient", "proximal", "projected_subgradient"])
def test_fused_matrix_steps_on_several_threads_are_those_on_one_bit_for_bit(method: str,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The fused matrix steps split the groups of 4 configurations over the cores, each thread
    with its own work space (issue 23): the records are the same, bit for bit, on 1, 2 or 3 threads
    (12 configurations, 3 groups; every chunk split)."""
    p = problem()
    grid = {"alpha": np.repeat(FIG5_ALPHA, 2), "beta_star": np.tile([1e-4, 1e-2], 6)}
    monkeypatch.setattr(fused, "THREAD_WORK", 0.0)
    monkeypatch.setattr(fused.os, "sched_getaffinity", lambda pid: set(range(3)), raising=False)
    runs = {}
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("OMP_NUM_THREADS", threads)
        assert fused.threads(1.0) == int(threads)
        runs[threads] = getattr(mk, method)(p.mask, p.y, (10, 10), **grid, A_star=p.A_star, steps=1500,
                                            device="cpu", progress=False)
        assert runs[threads].backend == "fused"
    for threads in ("2", "3"):
        for name in ("A_final", "train_error", "test_error", "singular_values"):
            np.testing.assert_array_equal(getattr(runs[threads], name), getattr(runs["1"], name), err_msg=name)


def test_one_mask_per_configuration(torch_steps) -> None:
    """(G, n1, n2) masks and (G, N) y (the tau sweeps): each configuration runs its own problem,
    as the PyTorch steps do (100 steps: before the spurious singular values reach their floor,
    where rounding is amplified, see test_errors_t1_and_t2_agree_with_the_torch_path)."""
    problems = [data.matrix.problem(10, 10, 2, 70, tau=tau, seed=0) for tau in (0.0, 0.5, 1.0)]
    masks, ys = np.stack([q.mask for q in problems]), np.stack([q.y for q in problems])
    assert len({m.tobytes() for m in masks}) == 3
    fast, ref = both_paths(mk.subgradient, torch_steps, masks, ys, (10, 10), alpha=0.5, beta_star=1e-3, steps=100,
                           init_scale=0.3, A_star=np.stack([q.A_star for q in problems]))
    np.testing.assert_allclose(fast.A_final, ref.A_final, atol=1e-10)
    np.testing.assert_allclose(fast.test_error, ref.test_error, rtol=1e-9)


def test_one_mask_per_configuration_bit_for_bit() -> None:
    """A batch of problems gives each configuration the numbers it gets alone."""
    problems = [data.matrix.problem(10, 10, 2, 70, tau=tau, seed=0) for tau in (0.0, 1.0)]
    masks, ys = np.stack([q.mask for q in problems]), np.stack([q.y for q in problems])
    both = mk.proximal(masks, ys, (10, 10), alpha=0.5, beta_star=1e-2, steps=1000, device="cpu", progress=False)
    for g, q in enumerate(problems):
        one = mk.proximal(q.mask, q.y, (10, 10), alpha=0.5, beta_star=1e-2, steps=1000, device="cpu", progress=False)
        assert (both.backend, one.backend) == ("fused", "fused")
        np.testing.assert_array_equal(both.A_final[g], one.A_final[0])


def test_periodic_stop_changes_no_record() -> None:
    """A configuration whose iterate stops changing (proximal: a threshold alpha beta* = 10 above
    every singular value gives A = 0 for good) is stopped; its records are those of the full
    run, bit for bit, and the configurations that keep running are not disturbed."""
    p = problem()
    kwargs = {"alpha": [0.5, 0.5, 1.0], "beta_star": [1e-3, 20.0, 1e-2], "steps": 20000, "A_star": p.A_star,
              "record_A": True, "device": "cpu", "progress": False}
    stopped = mk.proximal(p.mask, p.y, (10, 10), **kwargs, stop_periodic=True)
    full = mk.proximal(p.mask, p.y, (10, 10), **kwargs, stop_periodic=False)
    assert stopped.backend == "fused" and stopped.stopped_at[1] > 0 and stopped.stopped_at[[0, 2]].tolist() == [-1, -1]
    assert (full.stopped_at == -1).all() and not full.A_final[1].any()
    for name in ("A", "A_final", "train_error", "test_error", "nuclear", "singular_values", "grad_ratio"):
        np.testing.assert_array_equal(getattr(stopped, name), getattr(full, name), err_msg=name)


def test_divergence_is_reported_and_the_others_run_on() -> None:
    """A configuration whose data are not finite (bypassing the kernel's checks, through the loop
    itself) is reported as diverged and dropped; the others' records equal a run without it."""
    p = problem()
    ys = np.stack([p.y, p.y, p.y])
    args = (p.mask, ys, (10, 10), None, "subgradient", [0.1, 0.5, 1.0], 1e-3, 0.0, 1e-6, None, "random", 0, "cpu")
    data_, config, (A0,) = mk._prepare(*args)
    data_["y"][1, 3] = np.nan
    with pytest.warns(RuntimeWarning, match=r"1 configuration\(s\) diverged .*#1 \(alpha=0.5"):
        traj = run(mk.MATRIX, "subgradient", mk.subgradient_step, data_, config, A0, 3000, work=0.0)
    clean = mk.subgradient(p.mask, p.y, (10, 10), alpha=[0.1, 1.0], beta_star=1e-3, steps=3000, device="cpu",
                           progress=False)
    assert traj.backend == "fused" and traj.diverged.tolist() == [False, True, False]
    assert np.isnan(traj.A_final[1]).all() and np.isnan(traj.train_error[1, 2:]).all()
    np.testing.assert_array_equal(traj.A_final[[0, 2]], clean.A_final)
    np.testing.assert_array_equal(traj.train_error[[0, 2]], clean.train_error)


def test_grokkit_fused_0_sensing_decay_and_large_matrices_use_the_torch_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    p = problem()
    kwargs = {"alpha": 0.5, "beta_star": 1e-3, "steps": 20, "device": "cpu", "progress": False}
    assert mk.subgradient(p.mask, p.y, (10, 10), **kwargs).backend == "fused"
    sensing = data.matrix.problem(6, 5, 2, 24, kind="sensing", seed=0)
    assert mk.subgradient(sensing.X, sensing.y, (6, 5), **{**kwargs, "alpha": 0.1}).backend == "torch"
    assert mk.subgradient(p.mask, p.y, (10, 10), **kwargs, alpha_decay=10.0).backend == "torch"
    assert mk.subgradient(p.mask, p.y, (10, 10), **kwargs, alpha_decay=np.inf).backend == "fused"
    side = fused.MATRIX_MAX_SIDE
    for shape, backend in (((side, side + 5), "fused"), ((side + 1, side + 1), "torch")):
        q = data.matrix.problem(*shape, 2, 3 * side, seed=0)
        assert mk.subgradient(q.mask, q.y, shape, **{**kwargs, "steps": 2}).backend == backend
    monkeypatch.setenv("GROKKIT_FUSED", "0")
    fused.library.cache_clear()
    try:
        assert fused.library("matrix") is None
        assert mk.subgradient(p.mask, p.y, (10, 10), **kwargs).backend == "torch"
        with pytest.raises(RuntimeError, match="not available"):
            fused.jacobi_svd(np.eye(3)[None])
    finally:
        monkeypatch.delenv("GROKKIT_FUSED")
        fused.library.cache_clear()
    assert mk.subgradient(p.mask, p.y, (10, 10), **kwargs).backend == "fused"
