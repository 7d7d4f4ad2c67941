"""The kernels on CUDA against the same kernels on the CPU, in float64 (issue 8).

Every test is marked ``gpu`` and skipped where ``torch.cuda.is_available()`` is false, so CI
(no GPU) skips this file at once. On a CUDA machine (``benchmarks/gpu_check.sh``)::

    PYTHONPATH=$PWD python3 -m pytest -q -m gpu tests/test_gpu.py

``GROKKIT_TEST_DEVICE`` (default ``cuda``) names the device compared with the CPU;
``GROKKIT_TEST_DEVICE=cpu`` runs the same comparisons on a machine without a GPU, to check the
tests themselves (not skipped then).

The reference is always the CPU run on the **PyTorch steps**: the fused CPU path
(:mod:`grokkit.kernels.fused`) is switched OFF on the reference side, so both sides run the
same operations and differ only in the libraries' rounding (MKL/OpenBLAS and LAPACK against
cuBLAS and cuSOLVER). The device side runs as a user would call it: on CUDA that is the
PyTorch steps too (the fused path is CPU-only); with ``GROKKIT_TEST_DEVICE=cpu`` the completion
problems and the sparse runs take the fused CPU steps there, a real change of rounding, which
is how the tolerances below were checked without a GPU (the fused path's own tests against the
PyTorch steps are tests/test_kernels.py and tests/test_speed.py).

Tolerances: curves (training and recovery errors, norms) to 1e-10 relative with a 1e-12
absolute floor (an error near an exact fit is rounding noise); the gradient ratio, whose
denominator is that residual, to 1e-10 + 1e-10/(training error) relative (:func:`assert_curves`;
skipped for the projected methods, whose residual is pure rounding); singular values to 1e-10
times the largest singular value of the record; final iterates, where compared, to 1e-10 times
the largest singular value (sparse: 1e-10 times max |b|); ``diverged`` equal. The long run of
Figure 4 (:func:`test_figure4_long_run_t1_t2`): t1, t2 within one record, errors to 1e-6
relative up to them and within the floor bound after.

Why not every iterate (the matrix kernels): :math:`h(A) = UV^\\top` and the SVD's singular
vectors are unique only where A has full rank. Where a singular value is 0 (or down at its
floor, about alpha beta*, where the subgradient steps push it back and forth), the singular
vectors of that value are any orthonormal completion (even their signs are free), LAPACK and
cuSOLVER choose differently, both valid, and the iterates of a run part by about alpha beta*
in those directions: rounding, amplified by sigma_max/sigma_min. So the subgradient and
projected runs below are chosen to keep full rank over the steps compared (a small beta*,
checked on the reference: ``assert_well_conditioned``) and their iterates are compared too;
the proximal method's iterates become exactly rank-deficient (SVT sets singular values to 0):
its iterate is unique all the same (the zero directions do not enter
:math:`U\\max(\\Sigma - \\gamma, 0)V^\\top`), but only its curves and singular values are
compared, not the iterates of its rank-deficient configurations: the final iterates are compared
only where the reference's last one has full rank (smallest singular value above 1e-6 sigma_max).

The whole file runs in well under two minutes on a GPU (a few hundred steps per kernel, one run
of 2e4 steps), the CPU references included.
"""
from __future__ import annotations

import os
from contextlib import contextmanager

import numpy as np
import pytest
import torch

import grokkit as gk
from grokkit import data, metrics
from grokkit.kernels import fused, persistent
from grokkit.kernels import matrix as mk
from grokkit.kernels.run import resolve_device

DEVICE = os.environ.get("GROKKIT_TEST_DEVICE", "cuda")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(DEVICE.startswith("cuda") and not torch.cuda.is_available(),
                       reason="no CUDA device (GROKKIT_TEST_DEVICE=cpu runs these comparisons on the CPU)"),
]

RTOL, ATOL = 1e-10, 1e-12


@pytest.fixture(autouse=True)
def no_result_cache(monkeypatch: pytest.MonkeyPatch):
    """Run every kernel: a result cache ($GROKKIT_CACHE) would serve one device the other's run."""
    monkeypatch.delenv("GROKKIT_CACHE", raising=False)


@contextmanager
def torch_steps():
    """The kernels without the fused CPU path (the reference side)."""
    usable, matrix_usable = fused.usable, fused.matrix_usable
    fused.usable = fused.matrix_usable = lambda *problem: False
    try:
        yield
    finally:
        fused.usable, fused.matrix_usable = usable, matrix_usable


def both(kernel, *args, **kwargs):
    """``kernel`` on the CPU (PyTorch steps: the reference) and on ``DEVICE``."""
    kwargs.setdefault("progress", False)
    with torch_steps():
        ref = kernel(*args, **kwargs, device="cpu")
    dev = kernel(*args, **kwargs, device=DEVICE)
    assert ref.backend == "torch" and ref.device == "cpu"
    assert dev.device.startswith(DEVICE.split(":")[0]), dev.device
    if DEVICE.startswith("cuda"):  # the sparse methods run on the persistent kernels where Triton is installed
        sparse = isinstance(dev, gk.kernels.Trajectory) and persistent.available(torch.device(DEVICE))
        assert dev.backend == ("persistent" if sparse else "torch")
    np.testing.assert_array_equal(dev.steps, ref.steps)
    return ref, dev


def assert_curves(ref, dev, names, rows=None, skip=(), what=""):
    """The curves ``names`` to 1e-10 relative, 1e-12 absolute. The gradient ratio divides by
    ||G||, at beta2 = 0 the data residual (||y|| times the training error): its rounding is that of
    the iterate (1e-14 to 1e-12 absolute: the proximal steps accumulate it) relative to a residual
    of ~1e-6 near a fit, so it gets 1e-10 plus 1e-10 / training error relative."""
    rows = np.arange(len(ref)) if rows is None else rows
    for name in names:
        if name in skip:
            continue
        a, b = getattr(ref, name)[rows], getattr(dev, name)[rows]
        if name == "grad_ratio":
            np.testing.assert_array_equal(np.isnan(b), np.isnan(a), err_msg=f"{what}: {name} NaN")
            bound = np.abs(a) * (RTOL + 1e-10 / ref.train_error[rows]) + ATOL
            ok = np.isnan(a) | (a == b) | (np.abs(b - a) <= bound)
            assert ok.all(), f"{what}: {name} differs by {np.nanmax(np.abs(b - a) / bound):.2g} of its tolerance"
            continue
        np.testing.assert_allclose(b, a, rtol=RTOL, atol=ATOL, err_msg=f"{what}: {name}")


# --- sparse recovery --------------------------------------------------------------------------------

SPARSE_CURVES = ("train_error", "test_error", "l1", "l2", "grad_ratio")


@pytest.mark.parametrize("method", list(gk.kernels.METHODS))
def test_sparse_kernels(method: str) -> None:
    """A 24-configuration grid (alpha x beta1 x beta2), 600 steps, recorded every step to 100 then
    50 per decade, with the periodic stop on: the curves and the final iterates agree to 1e-10;
    ``diverged`` is the same (none diverges: alpha is below the stability limit).

    ``stopped_at`` is the same where the stop is exact whatever the rounding: beta1 = 1 is above
    max |X^T y| (0.25), so ISTA's soft threshold sets b to exactly 0 and stays there (checked for
    ISTA; the subgradient methods have no such exact stop). Elsewhere a
    run may reach an exact fixed point (or 2-cycle) of its floating-point map, or not, depending
    on the last bits of its steps (the fused CPU steps and the PyTorch steps differ there on this
    very grid: configurations 16 and 20 of ISTA), so it may stop at another record or not at all;
    the stop only fills the later records from the cycle, equal to a full run's up to rounding,
    so the curves are compared all the same."""
    prob = data.sparse.problem(40, 3, 15, variance="1/N", seed=0)
    cfg = gk.kernels.grid(alpha=np.array([0.3, 1.0, 1.6]) / (prob.lambda_max + 0.1), beta1=[0.0, 1e-3, 3e-2, 1.0],
                          beta2=[0.0, 0.1])
    ref, dev = both(gk.kernels.METHODS[method], prob.X, prob.y, b_star=prob.b_star, **cfg, steps=600, dense=100,
                    per_decade=50, init_scale=0.1, seed=1)
    # the projected iterates fit the data exactly: the ratio's denominator is rounding noise
    skip = ("grad_ratio",) if method == "projected_subgradient" else ()
    assert_curves(ref, dev, SPARSE_CURVES, skip=skip, what=method)
    assert np.abs(dev.b_final - ref.b_final).max() <= RTOL * np.abs(ref.b_final).max()
    np.testing.assert_array_equal(dev.diverged, ref.diverged)
    assert not ref.diverged.any()
    if method == "ista":
        exact_zero = cfg["beta1"] == 1.0
        assert (ref.stopped_at[exact_zero] > 0).all()  # the stop was exercised
        np.testing.assert_array_equal(dev.stopped_at[exact_zero], ref.stopped_at[exact_zero])


# --- matrix factorization ---------------------------------------------------------------------------

MATRIX_CURVES = ("train_error", "test_error", "nuclear", "frobenius", "grad_ratio")


def assert_singular_values(ref, dev, rows=None, what=""):
    """Every recorded singular value to 1e-10 times the record's largest (NaN where diverged)."""
    rows = np.arange(len(ref)) if rows is None else rows
    a, b = ref.singular_values[rows], dev.singular_values[rows]
    scale = a[..., :1]
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=f"{what}: NaN singular values")
    ok = np.isnan(a) | (np.abs(b - a) <= RTOL * scale)
    assert ok.all(), f"{what}: singular values differ by {np.nanmax(np.abs(b - a) / scale):.2e} of sigma_max"


def full_rank(ref, floor=1e-6, last=True) -> np.ndarray:
    """Configurations whose smallest singular value is above ``floor`` sigma_max at the last
    record (``last``) or at every record."""
    sv = ref.singular_values[:, -1:] if last else ref.singular_values
    return np.nanmin(sv[..., -1] / sv[..., 0], axis=1) > floor


def assert_matrix_runs_agree(ref, dev, method, what, iterates=True):
    skip = ("grad_ratio",) if method == "projected_subgradient" else ()  # exact fit: ratio of rounding noise
    assert_curves(ref, dev, MATRIX_CURVES, skip=skip, what=what)
    assert_singular_values(ref, dev, what=what)
    np.testing.assert_array_equal(dev.diverged, ref.diverged)
    if iterates:
        rows = full_rank(ref)  # the last iterate of full rank; SVT's zeros excluded
        scale = ref.singular_values[rows, -1, :1][..., None]
        assert (np.abs(dev.A_final[rows] - ref.A_final[rows]) <= RTOL * scale).all(), f"{what}: final iterates"


def assert_well_conditioned(ref, method, what):
    """The subgradient steps keep full rank here, so h(A) is unique at every step (module
    docstring). On completion the smallest singular value dips to ~1e-6 sigma_max while the
    observed entries move to y (near step 8 or 70); h(A) moves by rounding / sigma_min ~ 1e-10
    there, and the iterate by alpha beta* <= 5e-5 times that: harmless. It must not reach 0
    (below ~1e-9), where even the sign of its singular vectors is free."""
    if method != "proximal":
        assert full_rank(ref, 1e-9, last=False).all(), f"{what}: a singular value came near 0, h(A) is not unique"


def shared_completion():
    return data.matrix.problem(10, 10, 2, 80, seed=0)


# alpha x beta* x beta2: alpha beta* <= 5e-5, so in 300 steps no spurious singular value comes down
# to its floor (the smallest of A_hat's is about 0.019)
GRID = gk.kernels.grid(alpha=[0.1, 0.3, 0.5], beta_star=[1e-5, 1e-4], beta2=[0.0, 0.05])


@pytest.mark.parametrize("method", list(mk.METHODS))
def test_matrix_completion_shared_mask(method: str) -> None:
    """10 x 10, r = 2, N = 80 (Figures 4, 5), one mask for the 12 configurations, A(1) = 0.3 I, 300 steps."""
    p = shared_completion()
    ref, dev = both(mk.METHODS[method], p.mask, p.y, (10, 10), **GRID, steps=300, A_star=p.A_star,
                    init="identity", init_scale=0.3)
    assert_well_conditioned(ref, method, method)
    assert_matrix_runs_agree(ref, dev, method, f"{method}, shared mask")


TAUS = ((0.0, 0), (0.5, 0), (0.0, 1))


@pytest.mark.parametrize("method", list(mk.METHODS))
def test_matrix_completion_one_mask_per_configuration(method: str) -> None:
    """Three problems of 70 entries sampled with tau = 0, 0.5 (Appendix D.10; two draws of tau = 0),
    one per configuration: (G, n1, n2) masks and (G, N) y, 300 steps. (Not tau = 1: its mask
    observes five whole rows, and the projected iterate soon has a singular value of 1e-17.)"""
    problems = [data.matrix.problem(10, 10, 2, 70, tau=tau, seed=seed) for tau, seed in TAUS]
    masks, ys, stars = (np.stack([getattr(q, k) for q in problems]) for k in ("mask", "y", "A_star"))
    ref, dev = both(mk.METHODS[method], masks, ys, (10, 10), alpha=[0.1, 0.3, 0.5], beta_star=[1e-4, 1e-5, 1e-4],
                    steps=300, A_star=stars, init="identity", init_scale=0.3)
    assert_well_conditioned(ref, method, method)
    assert_matrix_runs_agree(ref, dev, method, f"{method}, one mask per configuration")


@pytest.mark.parametrize("method", list(mk.METHODS))
def test_matrix_sensing(method: str) -> None:
    """6 x 5, r = 2, N = 24 Gaussian measurements (a dense X, always the PyTorch steps), 300 steps."""
    p = data.matrix.problem(6, 5, 2, 24, kind="sensing", seed=0)
    ref, dev = both(mk.METHODS[method], p.X, p.y, (6, 5), alpha=np.array([0.2, 0.5, 0.9]) / p.lambda_max,
                    beta_star=[1e-3, 1e-2, 1e-3], beta2=[0.0, 0.05, 0.0], steps=300, A_star=p.A_star,
                    init="identity", init_scale=0.3)
    assert_well_conditioned(ref, method, method)
    assert_matrix_runs_agree(ref, dev, method, f"{method}, sensing")


@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize("kind", mk.KINDS)
def test_deep(depth: int, kind: str) -> None:
    """The deep factorization (eqs. 128-130), 6 x 5, 300 steps: from the identity with beta* > 0
    (the factors stay well conditioned, h(A_k) unique) and from a random start at beta* = 0
    (tests/test_deep.py: random factors' smallest singular values reach 1e-7 under the nuclear
    term, where h(A_k) amplifies rounding)."""
    p = data.matrix.problem(6, 5, 2, 20 if kind == "completion" else 24, kind=kind, seed=0)
    operator = p.mask if kind == "completion" else p.X
    scale = 1.0 / p.lambda_max  # lambda_max = 1 for completion
    common = dict(depth=depth, steps=300, A_star=p.A_star, dense=100, per_decade=20)
    for init, beta_star in (("identity", [1e-2, 1e-3]), ("random", [0.0, 0.0])):
        ref, dev = both(mk.deep, operator, p.y, (6, 5), alpha=np.array([0.05, 0.02]) * scale, beta_star=beta_star,
                        beta2=[0.0, 0.05], init_scale=[1.0, 0.6], init=init, seed=3, **common)
        what = f"deep, depth {depth}, {kind}, {init}"
        assert not ref.diverged.any()
        assert_curves(ref, dev, mk.DEEP_CURVES, what=what)
        assert_matrix_runs_agree(ref, dev, "deep", what)


def test_deep_divergence() -> None:
    """alpha = 1 at depth 3 overflows (tests/test_deep.py): diverged on both devices (the SVDs of
    the overflowing factors, made finite by nan_to_num, must not raise on cuSOLVER either), and
    the other configuration runs on as on the CPU."""
    p = data.matrix.problem(6, 5, 2, 20, seed=0)
    with pytest.warns(RuntimeWarning, match="diverged"):
        ref, dev = both(mk.deep, p.mask, p.y, (6, 5), depth=3, alpha=[1.0, 0.02], beta_star=1e-2, init_scale=1.0,
                        init="identity", steps=300, A_star=p.A_star, dense=100, per_decade=20)
    assert ref.diverged.tolist() == [True, False]
    np.testing.assert_array_equal(dev.diverged, ref.diverged)
    assert np.isnan(dev.A_final[0]).all()
    assert_curves(ref, dev, mk.DEEP_CURVES, rows=np.array([1]), what="deep, next to a diverged configuration")
    assert_singular_values(ref, dev, rows=np.array([1]), what="deep, next to a diverged configuration")


def test_figure4_long_run_t1_t2() -> None:
    """Figure 4's setting (10 x 10 completion, r = 2, N = 80, A(1) = 1e-6 I, beta2 = 0, the paper's
    alpha = 0.1, beta* = 1e-4) for 2e4 steps, with a second configuration at beta* = 3e-3 whose t2
    comes within them (tests/test_speed.py), both in one batched run.

    t1 and t2 (grokkit.metrics.memorization_generalization, the threshold rule at 1e-4 as in
    Figure 4, and at 1e-2 and 1e-3) are equal on both devices, or one record apart. Why not
    always equal: they are the first records at or below a threshold of curves that differ by
    rounding; up to the last of them the errors agree to 1e-6 relative (the r = 2 leading
    directions contract), but later the spurious singular values sit at their floor, about
    alpha beta*, where the steps amplify rounding chaotically and the two devices follow
    different rounding: the errors can then differ by up to 2 sqrt(n - r) alpha beta* / ||A*||_F
    (recovery) or / ||y|| (training), so a threshold crossed at a record by less than that may be
    crossed one record later on the other device. (At beta* = 1e-4, t2 at 1e-4 is ~3.7e5 steps:
    NaN on both here; its t1 is 90.)"""
    p = shared_completion()
    cfg = {"alpha": np.array([0.1, 0.1]), "beta_star": np.array([1e-4, 3e-3])}
    ref, dev = both(mk.subgradient, p.mask, p.y, (10, 10), **cfg, steps=20_000, A_star=p.A_star, init="identity",
                    init_scale=1e-6)
    times = []
    for threshold in (1e-2, 1e-3, 1e-4):
        t_ref = metrics.memorization_generalization(ref, "threshold", threshold, threshold)
        t_dev = metrics.memorization_generalization(dev, "threshold", threshold, threshold)
        for a, b in zip(t_ref, t_dev):
            np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=f"threshold {threshold}")
            ia, ib = (np.searchsorted(ref.steps, np.nan_to_num(t, nan=-1)) for t in (a, b))
            assert (np.abs(ia - ib) <= 1).all(), f"threshold {threshold}: {a} on the CPU, {b} on {DEVICE}"
        times.append(np.concatenate(t_ref))
    times = np.array(times)  # (threshold, t1/t2 x configuration)
    assert times[2, 0] == 90 and np.isnan(times[2, 2])  # Figure 4: t1 = 90, t2 far beyond 2e4 steps
    # memorization in both (at beta* = 3e-3 the training error stays above 1e-4), grokking at beta* = 3e-3
    assert np.isfinite(times[:, 0]).all() and np.isfinite(times[:2, [1, 3]]).all()
    floor = 2 * np.sqrt(10 - 2) * cfg["alpha"] * cfg["beta_star"]
    for curve, norm in (("train_error", np.linalg.norm(p.y)), ("test_error", np.linalg.norm(p.A_star))):
        a, b = getattr(dev, curve), getattr(ref, curve)
        assert (np.abs(a - b) <= 1e-6 * b + (floor / norm)[:, None]).all(), curve
        for g in range(2):
            last = np.nanmax(times[:, [g, 2 + g]], initial=0)
            window = ref.steps <= last
            np.testing.assert_allclose(a[g, window], b[g, window], rtol=1e-6, err_msg=f"{curve}, configuration {g}")


# --- the device ---------------------------------------------------------------------------------------


def test_auto_resolves_to_the_gpu() -> None:
    """``device="auto"`` is CUDA where there is one, and the trajectory says so."""
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    p = shared_completion()
    traj = mk.subgradient(p.mask, p.y, (10, 10), alpha=0.1, beta_star=1e-4, steps=20, device="auto", progress=False)
    assert traj.device.startswith(expected), traj.device
    prob = data.sparse.problem(40, 3, 15, variance="1/N", seed=0)
    traj = gk.kernels.ista(prob.X, prob.y, alpha=0.5 / prob.lambda_max, beta1=1e-3, steps=20, device="auto",
                           progress=False)
    assert traj.device.startswith(expected), traj.device
    if expected == "cuda":
        assert traj.backend == ("persistent" if persistent.available(torch.device("cuda")) else "torch")


# --- networks (grokkit.kernels.nets, float32) ---------------------------------------------------

NET_CASES = {
    "student": (lambda: data.nets.teacher_student(d=8, width=20, c=2, n_train=40, n_test=60, seed=1),
                lambda: gk.kernels.nets.TwoLayerMLP(8, 20, 2, seed=0), 16),
    "matrix_product": (lambda: data.nets.modular_addition(7, 0.5, seed=2),
                       lambda: gk.kernels.nets.MatrixProductMLP(7, 16, seed=0), 10),
    "lstm": (lambda: data.nets.modular_addition(7, 0.5, encoding="sequence", seed=2),
             lambda: gk.kernels.nets.LSTMClassifier(9, 7, 6, 8, seed=0), None),
}


@pytest.mark.parametrize("case, penalty", [("student", p) for p in ("l1", "l2", "nuclear", "sobolev")]
                         + [(c, p) for c in ("matrix_product", "lstm") for p in ("l1", "l2", "nuclear")])
def test_network_training_on_the_device_equals_the_cpu(case, penalty):
    """Batched training on the device against the CPU: the same 100 Adam steps of three
    configurations agree to float32 rounding, amplified by Adam's normalisation over the steps
    (5e-4 of the largest weight; the CPU's own batched-against-single test holds 2e-5 at 200
    steps). The nuclear coefficients keep every singular value clear of 0 (tests/test_nets.py)."""
    make_task, make_model, batch = NET_CASES[case]
    task, model = make_task(), make_model()
    beta = [1e-3, 1e-4, 2e-3] if penalty == "nuclear" else [1e-3, 1e-4, 1e-2]
    kw = dict(alpha=[1e-3, 1e-2, 3e-3], beta=beta, steps=100, batch_size=batch, seed=3, progress=False)
    ref = gk.kernels.nets.train(task, model, penalty, device="cpu", **kw)
    dev = gk.kernels.nets.train(task, model, penalty, device=DEVICE, **kw)
    assert dev.device.startswith(DEVICE.split(":")[0])
    assert not ref.diverged.any() and not dev.diverged.any()
    scale = np.abs(ref.params_final).max()
    np.testing.assert_allclose(dev.params_final, ref.params_final, rtol=0, atol=5e-4 * scale)
    np.testing.assert_allclose(dev.train_loss, ref.train_loss, rtol=1e-3, atol=1e-6)
