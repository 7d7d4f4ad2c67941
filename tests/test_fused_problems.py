"""The fused CPU steps of problems of their own (grokkit.kernels.fused.ProblemSteps: X or y one per
configuration, as the stacked N sweeps of Figures 13-24 and 27-29), of the deep diagonal network
(fused.DeepSteps, Figures 30-35) and of the background chapter's diagonal network
(fused.DiagonalSteps) against the PyTorch steps: every recorded iterate and curve; the
same bits on 1, 2 or 3 threads and in the AVX-512 build; the periodic stop and a divergence on the
fused path; restore() from a checkpoint."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from grokkit import data
from grokkit.kernels import fused, matrix, run, sparse

pytestmark = pytest.mark.skipif(fused.library() is None,
                                reason="no fused CPU path on this machine (needs x86-64 with AVX2/FMA and cc)")

METHODS = ("subgradient", "ista", "projected_subgradient")
N_SWEEP = (8, 14, 20)


@pytest.fixture(autouse=True)
def no_result_cache(monkeypatch):
    """Run every kernel: a result cache ($GROKKIT_CACHE) would serve one path the other's run."""
    monkeypatch.delenv("GROKKIT_CACHE", raising=False)


def stacked(Ns=N_SWEEP, n: int = 30):
    """Problems of N rows each, stacked with zero rows (grokkit.data.sparse.stack_problems)."""
    problems = [data.sparse.problem(n, 3, N, variance="1/N", seed=1, x_seed=1 + i) for i, N in enumerate(Ns)]
    return data.sparse.stack_problems(problems)


def both(monkeypatch, kernel, *args, **kwargs):
    """``kernel`` run on the fused steps, then on the PyTorch steps (the reference)."""
    kwargs.update(device="cpu", progress=False)
    mine = kernel(*args, **kwargs)
    with monkeypatch.context() as patch:
        patch.setattr(fused, "usable", lambda *problem: False)
        reference = kernel(*args, **kwargs)
    assert (mine.backend, reference.backend) == ("fused", "torch")
    return mine, reference


def assert_close(mine, reference, skip=()) -> None:
    """Every recorded iterate, the final one and every curve within 1e-12 of its largest value."""
    for name in ("b", "b_final", *run.METRICS):
        if name not in skip:
            ref = getattr(reference, name)
            np.testing.assert_allclose(getattr(mine, name), ref, rtol=0, atol=1e-12 * np.nanmax(np.abs(ref)),
                                       err_msg=name)
    np.testing.assert_array_equal(mine.diverged, reference.diverged)
    np.testing.assert_array_equal(mine.stopped_at, reference.stopped_at)


def assert_same(a, b) -> None:
    for name in ("b_final", "stopped_at", "diverged", *run.METRICS):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("problem", ["stacked", "one y per configuration"])
def test_sparse_methods_equal_the_pytorch_steps(method, problem, monkeypatch) -> None:
    """Eq. (22), eq. (86) and §C.7 on stacked problems of N = 8, 14, 20 rows (each sweeps its own
    rows only), or on one X with one y per configuration; 2000 steps, every iterate recorded."""
    if problem == "stacked":
        X, y, b_star = stacked()
        rows = list(N_SWEEP)
    else:
        p = data.sparse.problem(30, 3, 14, variance="1/N", seed=2)
        X, y, b_star = p.X, np.stack([p.y, 2.0 * p.y, p.y + 0.01 * np.arange(p.N)]), p.b_star
        rows = [14, 14, 14]
    kernel = sparse.METHODS[method]
    mine, reference = both(monkeypatch, kernel, X, y, b_star=b_star, alpha=0.1, beta1=[1e-4, 1e-2, 1e-1],
                           beta2=[0.0, 1e-2, 0.0], steps=2000, dense=100, per_decade=20, record_b=True,
                           stop_periodic=False)
    assert_close(mine, reference, skip=("grad_ratio",) if method == "projected_subgradient" else ())
    # the steps the run took: a problem per configuration, each sweeping its own rows
    operands = {"X": torch.as_tensor(X), "y": torch.as_tensor(y)}
    if method == "projected_subgradient":
        operands["P"] = torch.linalg.pinv(operands["X"])
    config = {"alpha": np.full(3, 0.1), "beta1": np.zeros(3), "beta2": np.zeros(3)}
    steps = fused.sparse_steps(method, operands, config, torch.zeros(3, 30, dtype=torch.float64))
    assert isinstance(steps, fused.ProblemSteps) and steps.fields["rows"].tolist() == rows


@pytest.mark.parametrize("shared", [True, False], ids=["shared X", "stacked X"])
@pytest.mark.parametrize("penalties", [False, True], ids=["beta 0", "beta1, beta2"])
def test_deep_network_equals_the_pytorch_steps(shared, penalties, monkeypatch) -> None:
    """Eq. (88) at depths 1 to 4 in one grid (factors of ones pad the shallower ones), on one X or
    on stacked problems of different N, with and without β₁ and β₂."""
    depth = [1, 2, 3, 4, 2, 3]
    if shared:
        p = data.sparse.problem(30, 3, 14, variance="1/N", seed=2)
        X, y, b_star = p.X, p.y, p.b_star
    else:
        X, y, b_star = stacked(N_SWEEP * 2)
    beta1 = [1e-3, 0.0, 1e-3, 1e-4, 0.0, 1e-3] if penalties else 0.0
    beta2 = [1e-3, 1e-2, 0.0, 1e-3, 1e-3, 0.0] if penalties else 0.0
    mine, reference = both(monkeypatch, sparse.deep, X, y, b_star=b_star, depth=depth, alpha=0.05, beta1=beta1,
                           beta2=beta2, init_scale=0.5, steps=1500, dense=100, per_decade=20, record_b=True,
                           stop_periodic=False)
    assert np.abs(reference.b_final - reference.b[:, 0]).max() > 0.1  # the factors moved
    assert_close(mine, reference)


@pytest.mark.parametrize("loss", ["square", "logistic"])
@pytest.mark.parametrize("shared", [True, False], ids=["shared X", "one X per configuration"])
def test_diagonal_network_equals_the_pytorch_steps(loss, shared, monkeypatch) -> None:
    """Woodworth et al.'s eq. 10 and Lyu et al.'s eq. 4 at depths 1 to 4 in one grid, with and without
    β₁ and β₂ (coupled weight decay), on one X or one per configuration (an n that is not a multiple
    of 4: the padding columns stay zero); labels ±1 for the logistic loss, with a test set."""
    rng = np.random.default_rng(3)
    n, N, G = 37, 12, 6
    X = rng.standard_normal((N, n) if shared else (G, N, n)) / np.sqrt(N)
    b_star = np.zeros(n)
    b_star[:3] = [1.0, -2.0, 0.5]
    y = X @ b_star
    extra = {"b_star": b_star}
    if loss == "logistic":
        y = np.sign(y)
        X_test = rng.standard_normal((40, n))
        extra = {"X_test": X_test, "y_test": np.sign(X_test @ b_star)}
    mine, reference = both(monkeypatch, sparse.diagonal_net, X, y, loss=loss, depth=[1, 2, 3, 4, 2, 2],
                           alpha=[0.05, 0.1, 0.05, 0.02, 0.1, 0.1] if loss == "square" else 0.5,
                           beta1=[0.0, 1e-3, 0.0, 1e-4, 0.0, 1e-3], beta2=[1e-3, 0.0, 1e-2, 0.0, 1e-3, 0.0],
                           init_scale=0.3, steps=1500, dense=100, per_decade=20, record_b=True,
                           stop_periodic=False, **extra)
    assert not reference.diverged.any() and np.abs(reference.b_final).max() > 0.1  # the network moved
    assert_close(mine, reference, skip=("grad_ratio",))
    operands = {"X": torch.as_tensor(X), "y": torch.as_tensor(y)}
    config = {"alpha": np.full(G, 0.1), "beta1": np.zeros(G), "beta2": np.zeros(G)}
    steps = fused.diagonal_steps(loss)("diagonal_net", operands, config,
                                       [torch.ones(G, 2, n, dtype=torch.float64), torch.full((G, 1), 2.0)])
    assert isinstance(steps, fused.DiagonalSteps) and steps.fields["rows"].tolist() == [N] * G


@pytest.mark.parametrize("kernel", ["ista", "projected_subgradient", "deep", "diagonal_net"])
def test_the_same_bits_on_one_two_and_three_threads(kernel, monkeypatch) -> None:
    """The threads take whole configurations from a shared counter: 7 of them over 1, 2 or 3
    threads give the same records, bit for bit (every chunk split: THREAD_WORK = 0)."""
    monkeypatch.setattr(fused, "THREAD_WORK", 0.0)
    monkeypatch.setattr(fused.os, "sched_getaffinity", lambda pid: set(range(3)), raising=False)
    splits = []
    split = fused.threads
    monkeypatch.setattr(fused, "threads", lambda work: splits.append(split(work)) or splits[-1])
    X, y, b_star = stacked((8, 14, 20, 11, 17, 9, 20))
    extra = ({"depth": [1, 2, 3, 4, 2, 3, 4], "init_scale": 0.5, "alpha": 0.05} if kernel in ("deep", "diagonal_net")
             else {"alpha": 0.1})
    runs = {}
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("OMP_NUM_THREADS", threads)
        runs[threads] = getattr(sparse, kernel)(X, y, b_star=b_star, beta1=np.geomspace(1e-4, 1e-1, 7), steps=3000,
                                                dense=100, per_decade=20, device="cpu", progress=False, **extra)
        assert runs[threads].backend == "fused" and max(splits) == int(threads)
        splits.clear()
    assert_same(runs["2"], runs["1"])
    assert_same(runs["3"], runs["1"])


def test_the_periodic_stop_drops_configurations_of_stacked_problems() -> None:
    """ISTA reaches its fixed points, bit for bit: the configurations that do are dropped (``keep``:
    the others go on with their own problems) and their records filled from the cycle, the same
    numbers as a run that never stops."""
    X, y, b_star = stacked((8, 14, 20, 11))
    kw = dict(b_star=b_star, alpha=0.1, beta1=[1e-1, 1e-4, 3e-2, 1e-1], steps=6000, dense=100, per_decade=20,
              record_b=True, device="cpu", progress=False)
    on = sparse.ista(X, y, **kw)
    off = sparse.ista(X, y, stop_periodic=False, **kw)
    assert on.backend == off.backend == "fused"
    assert (on.stopped_at > 0).any() and (on.stopped_at == -1).any() and (off.stopped_at == -1).all()
    for name in ("b", "b_final", "train_error", "test_error", "l1", "l2", "grad_ratio"):
        np.testing.assert_array_equal(getattr(on, name), getattr(off, name), err_msg=name)


def test_a_diverging_deep_configuration_is_dropped(monkeypatch) -> None:
    """A step too large for depth 3 from a large initialisation overflows: that configuration is
    reported and dropped, the others run on as they do alone (bit for bit) and as the PyTorch steps."""
    X, y, b_star = stacked((8, 14, 20, 11))
    kw = dict(b_star=b_star, depth=[1, 2, 3, 3], alpha=[0.05, 0.05, 0.05, 0.2], beta1=1e-4, beta2=[0.0, 1e-4, 0.0, 0.0],
              init_scale=[0.5, 0.5, 0.5, 10.0], steps=1500, dense=100, per_decade=20, record_b=True)
    with pytest.warns(RuntimeWarning, match=r"deep: 1 configuration\(s\) diverged .*#3"):
        mine, reference = both(monkeypatch, sparse.deep, X, y, **kw)
    assert mine.diverged.tolist() == reference.diverged.tolist() == [False, False, False, True]
    ok = ~reference.diverged
    np.testing.assert_allclose(mine.b[ok], reference.b[ok], rtol=0, atol=1e-12 * np.abs(reference.b[ok]).max())
    alone = sparse.deep(X[:3], y[:3], device="cpu", progress=False,
                        **{k: v[:3] if isinstance(v, (list, np.ndarray)) else v for k, v in kw.items()})
    for name in ("b", "b_final", "train_error", "test_error", "l1"):
        np.testing.assert_array_equal(getattr(mine, name)[:3], getattr(alone, name), err_msg=name)


def _sparse(kind: str):
    X, y, _ = stacked((8, 14, 20, 11))
    X, y = torch.as_tensor(X), torch.as_tensor(y)
    hyper = {"alpha": np.full(4, 0.1), "beta1": np.array([1e-3, 1e-2, 1e-1, 1e-3]), "beta2": np.array([0, 1e-2, 0, 0])}
    if kind == "deep":
        depth = np.array([1, 2, 3, 4])
        B0 = torch.as_tensor(sparse.deep_factors(30, depth, 0.5))
        return fused.deep_steps("deep", {"X": X, "y": y}, {**hyper, "alpha": np.full(4, 0.05), "depth": depth}, B0)
    if kind == "diagonal":
        x0 = [torch.full((4, 2, 30), 0.5, dtype=torch.float64), torch.tensor([[1.0], [2.0], [3.0], [2.0]])]
        return fused.diagonal_steps("logistic")("diagonal_net", {"X": X, "y": torch.sign(y)}, hyper, x0)
    b0 = torch.as_tensor(sparse.initial_point(30, 0.1)).expand(4, -1)
    if kind == "stacked":
        return fused.sparse_steps("projected_subgradient", {"X": X, "y": y, "P": torch.linalg.pinv(X)}, hyper, b0)
    return fused.sparse_steps("subgradient", {"X": X[2], "y": y[2]}, hyper, b0)


def _matrix():
    rng = np.random.default_rng(0)
    mask = torch.as_tensor(rng.permutation(36).reshape(6, 6) < 20)
    op = matrix.Measurements("completion", (6, 6), mask=mask)
    A0 = torch.as_tensor(rng.standard_normal((4, 6, 6)))
    y = torch.as_tensor(rng.standard_normal(20))
    config = {"alpha": np.full(4, 0.1), "beta_star": np.array([1e-3, 1e-2, 1e-1, 0]), "beta2": np.zeros(4)}
    return fused.matrix_steps("subgradient", {"op": op, "y": y}, config, A0)


BUILDERS = {"stacked, projected": lambda: _sparse("stacked"), "deep": lambda: _sparse("deep"),
            "diagonal network": lambda: _sparse("diagonal"),
            "shared X (FusedSteps)": lambda: _sparse("shared"), "matrix completion": _matrix}


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_restore_from_a_checkpoint_continues_the_run(kind) -> None:
    """restore(x, x1, x2) with the iterate and the two before it (after a configuration was dropped)
    then the same steps: the same iterates, bit for bit, and the same two before them."""
    make = BUILDERS[kind]
    keep = np.array([True, False, True, True])
    first = make()
    first.advance(5)
    first.keep(keep)
    first.advance(30)
    checkpoint = [first.iterate(age) for age in (0, 1, 2)]
    first.advance(40)
    second = make()
    second.keep(keep)
    second.restore(*checkpoint)
    second.advance(1)
    for age, expected in ((1, checkpoint[0]), (2, checkpoint[1])):
        torch.testing.assert_close(second.iterate(age), expected, rtol=0, atol=0)
    second.advance(39)
    for age in (0, 1, 2):
        torch.testing.assert_close(second.iterate(age), first.iterate(age), rtol=0, atol=0)
    short = [x[:2] for x in checkpoint[1]] if isinstance(checkpoint[1], list) else checkpoint[1][:2]
    with pytest.raises(ValueError, match=r"x1 must have shape \(3, "):
        second.restore(checkpoint[0], short, checkpoint[2])


@pytest.mark.parametrize("kernel", ["subgradient", "deep", "diagonal_net"])
def test_the_avx512_build_gives_the_same_bits(kernel, monkeypatch) -> None:
    """The steps of problems of their own use 256-bit vectors in either build (GROKKIT_FUSED_ISA)."""
    if "avx512f" not in fused._cpu_flags():
        pytest.skip("no AVX-512 on this machine")
    X, y, b_star = stacked()
    extra = ({"depth": [1, 2, 3], "init_scale": 0.5, "alpha": 0.05} if kernel in ("deep", "diagonal_net")
             else {"alpha": 0.1})
    runs = {}
    for isa, lanes in (("avx512", 8), ("avx2", 4)):
        monkeypatch.setenv("GROKKIT_FUSED_ISA", isa)
        fused.library.cache_clear()
        assert fused.library().lanes == lanes
        runs[isa] = getattr(sparse, kernel)(X, y, b_star=b_star, beta1=[1e-4, 1e-3, 1e-2], steps=2000, device="cpu",
                                            progress=False, **extra)
        assert runs[isa].backend == "fused"
    monkeypatch.delenv("GROKKIT_FUSED_ISA")
    fused.library.cache_clear()
    assert_same(runs["avx512"], runs["avx2"])
