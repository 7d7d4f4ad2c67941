"""The persistent GPU kernels (grokkit.kernels.persistent) against the PyTorch steps, their matrix SVD
against LAPACK, and the ℓ* gradient without an SVD (grokkit.kernels.nets.polar) against the SVD.

Without a GPU the Triton kernels run on the CPU in Triton's interpreter (GROKKIT_PERSISTENT=interpret,
slowly: a few configurations, a few hundred steps); on a machine with CUDA the same tests run them
compiled on the GPU (benchmarks/gpu_check.sh)."""
from __future__ import annotations

import copy
import os

import numpy as np
import pytest
import torch

import grokkit as gk
from grokkit import data
from grokkit.kernels import fused, nets, persistent, sparse
from grokkit.kernels import matrix as mk
from grokkit.kernels.nets import polar
from test_nets import assert_batched_equals_single, one_at_a_time
from test_speed import assert_svd_of_every_kind

CUDA = torch.cuda.is_available()
if not CUDA:  # Triton reads it when it is first imported, and jits its own library then
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton", reason="the persistent kernels need Triton (make test installs it)")
DEVICE = "cuda" if CUDA else "cpu"
STEPS = 300


@pytest.fixture(autouse=True)
def no_result_cache(monkeypatch):
    """Run every kernel: a result cache ($GROKKIT_CACHE) would serve one path the other's run."""
    monkeypatch.delenv("GROKKIT_CACHE", raising=False)


@pytest.fixture
def on(monkeypatch):
    """A function running ``kernel(**kwargs)`` on the persistent kernels and on the PyTorch steps."""
    def both(kernel, *args, **kwargs):
        monkeypatch.setenv("GROKKIT_PERSISTENT", "1" if CUDA else "interpret")
        mine = kernel(*args, device=DEVICE, progress=False, **kwargs)
        monkeypatch.setenv("GROKKIT_PERSISTENT", "0")
        monkeypatch.setattr(fused, "usable", lambda *problem: False)  # the reference: the PyTorch steps
        monkeypatch.setattr(fused, "matrix_usable", lambda *problem: False)
        reference = kernel(*args, device=DEVICE, progress=False, **kwargs)
        assert (mine.backend, reference.backend) == ("persistent", "torch")
        return mine, reference
    return both


def _problem(N=7, n=12, s=3, G=None, seed=0):
    rng = np.random.default_rng(seed)
    shape = (N, n) if G is None else (G, N, n)
    X = rng.standard_normal(shape) / np.sqrt(N)
    b_star = np.zeros(n)
    b_star[:s] = rng.standard_normal(s)
    return X, X @ b_star, b_star


def _close(mine, reference, rtol=1e-12):
    """Every recorded iterate agrees to ``rtol`` of its largest entry, and so every curve (the
    projected method's training error is rounding noise, 1e-16: compared to its curve's largest)."""
    scale = np.abs(reference.b).max()
    np.testing.assert_allclose(mine.b, reference.b, rtol=0, atol=rtol * scale)
    for curve in ("train_error", "test_error", "l1", "l2"):
        ref = getattr(reference, curve)
        np.testing.assert_allclose(getattr(mine, curve), ref, rtol=0, atol=1e-10 * np.abs(ref).max())
    np.testing.assert_array_equal(mine.diverged, reference.diverged)


@pytest.mark.parametrize("method", sorted(persistent.METHODS))
def test_sparse_methods_equal_the_pytorch_steps(on, method):
    """Eq. (22), eq. (86) and §C.7 on one shared X (N = 7, n = 12: both padded to a power of 2),
    three configurations of α, β₁, β₂, 300 steps, every iterate recorded: 1e-12 of the largest."""
    X, y, b_star = _problem()
    lam = np.linalg.norm(X, 2) ** 2
    mine, reference = on(sparse.METHODS[method], X, y, alpha=np.array([0.5, 1.0, 1.5]) / lam,
                         beta1=[1e-3, 1e-2, 1e-1], beta2=[0.0, 1e-3, 0.0], steps=STEPS, b_star=b_star, dense=50,
                         per_decade=20, record_b=True, stop_periodic=False)
    _close(mine, reference)


@pytest.mark.parametrize("resident", [True, False])
def test_stacked_problems_and_the_projection_equal_the_pytorch_steps(on, monkeypatch, resident):
    """One X per configuration, zero rows padding the shorter ones (as grokkit.data.sparse.stack_problems
    does), the projection P = X^† per configuration; with the problem in registers or read at every
    step (above persistent.RESIDENT entries)."""
    if not resident:
        monkeypatch.setattr(persistent, "RESIDENT", 0)
    X, _, b_star = _problem(N=6, n=12, G=3)
    X[0, 4:] = 0.0  # configuration 0 measures 4 rows
    y = X @ b_star
    mine, reference = on(sparse.projected_subgradient, X, y, alpha=0.05, beta1=[1e-3, 1e-2, 1e-1], beta2=1e-4,
                         steps=STEPS, b_star=b_star, dense=50, per_decade=20, record_b=True, stop_periodic=False)
    _close(mine, reference)
    mine, reference = on(sparse.subgradient, X, y, alpha=0.1, beta1=[1e-3, 1e-2, 1e-1], steps=STEPS, b_star=b_star,
                         dense=50, per_decade=20, record_b=True, stop_periodic=False)
    _close(mine, reference)


def test_periodic_stop_sees_the_same_cycles(on):
    """ISTA reaches its fixed point: the stop needs the two iterates before the last (iterate(1),
    iterate(2)), which the kernel returns; the records after the stop are filled from the cycle."""
    X, y, b_star = _problem(N=10, n=12)
    lam = np.linalg.norm(X, 2) ** 2
    mine, reference = on(sparse.ista, X, y, alpha=1.0 / lam, beta1=[1e-2, 1e-1], steps=3000, b_star=b_star,
                         dense=20, per_decade=10, record_b=True)
    assert (reference.stopped_at > 0).all()
    np.testing.assert_array_equal(mine.stopped_at, reference.stopped_at)
    _close(mine, reference)


def test_deep_diagonal_network_equals_the_pytorch_steps(on):
    """Eq. (88) with depths 1, 2 and 3 in one grid (factors of ones pad the shallower ones), with
    and without β₂; one configuration diverges (a large step for its depth) and is dropped
    (``keep``) while the others go on."""
    X, y, b_star = _problem()
    with pytest.warns(RuntimeWarning, match="1 configuration"):
        mine, reference = on(sparse.deep, X, y, depth=[1, 2, 3, 3], alpha=[0.05, 0.05, 0.05, 0.4], beta1=1e-4,
                             beta2=[0.0, 1e-4, 0.0, 0.0], init_scale=[0.5, 0.5, 0.5, 5.0], steps=STEPS,
                             b_star=b_star, dense=50, per_decade=20, record_b=True, stop_periodic=False)
    assert reference.diverged.tolist() == [False, False, False, True]
    ok = ~reference.diverged
    scale = np.abs(reference.b[ok]).max()
    np.testing.assert_allclose(mine.b[ok], reference.b[ok], rtol=0, atol=1e-12 * scale)
    np.testing.assert_array_equal(mine.diverged, reference.diverged)


def test_a_problem_too_large_stays_on_the_pytorch_steps(monkeypatch):
    monkeypatch.setenv("GROKKIT_PERSISTENT", "1" if CUDA else "interpret")
    monkeypatch.setattr(persistent, "MAX_ENTRIES", 64)
    X, y, b_star = _problem()
    assert sparse.subgradient(X, y, alpha=0.01, beta1=1e-3, steps=5, device=DEVICE, progress=False).backend == "torch"


# --- matrix completion --------------------------------------------------------------------------
# Small matrices: Triton's interpreter takes about 0.1 s for a Jacobi SVD of 4 x 3 (the GPU check
# runs these tests compiled, benchmarks/gpu_check.sh).

@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3), (4, 1), (1, 3)])
def test_matrix_svd_matches_lapack(monkeypatch, shape):
    """The one-sided Jacobi SVD of the matrix kernel on the matrices of every kind that the fused CPU
    SVD is tested on (zero, tiny, huge, rank-deficient with U completed, clustered; test_speed.py)."""
    monkeypatch.setenv("GROKKIT_PERSISTENT", "1" if CUDA else "interpret")

    def svd(A):
        S, H = persistent.jacobi_svd(torch.as_tensor(A, device=DEVICE))
        return S.cpu().numpy(), H.cpu().numpy()
    assert_svd_of_every_kind(svd, shape)


@pytest.mark.parametrize("method", sorted(persistent.MATRIX_METHODS))
def test_matrix_methods_equal_the_pytorch_steps(on, method):
    """Eq. (101), eq. (127) and §D.7 on a 4 x 3 completion problem (rank 1, 8 observed entries),
    three configurations of α, β*, β₂, 20 steps, every iterate recorded: 1e-12 of the largest."""
    p = data.matrix.problem(4, 3, 1, 8, seed=0)
    mine, reference = on(mk.METHODS[method], p.mask, p.y, (4, 3), alpha=[0.2, 0.5, 1.0],
                         beta_star=[1e-3, 1e-2, 1e-2], beta2=[0.0, 0.05, 0.0], steps=20, A_star=p.A_star,
                         init_scale=0.3, record_A=True)
    np.testing.assert_allclose(mine.A, reference.A, rtol=0, atol=1e-12 * np.abs(reference.A).max())
    for name in ("train_error", "test_error", "nuclear", "singular_values"):
        np.testing.assert_allclose(getattr(mine, name), getattr(reference, name), rtol=1e-10, atol=1e-14,
                                   err_msg=name)


def test_wide_matrices_and_masks_per_configuration(on):
    """n1 < n2 (the kernel works on A^T) with one mask per configuration."""
    problems = [data.matrix.problem(3, 4, 1, 7, seed=s) for s in (1, 2)]
    mask = np.stack([q.mask for q in problems])
    y = np.stack([q.y for q in problems])
    A_star = np.stack([q.A_star for q in problems])
    mine, reference = on(mk.subgradient, mask, y, (3, 4), alpha=0.5, beta_star=1e-2, steps=20, A_star=A_star,
                         init_scale=0.3, record_A=True)
    np.testing.assert_allclose(mine.A, reference.A, rtol=0, atol=1e-12 * np.abs(reference.A).max())


def test_sensing_and_large_matrices_stay_on_the_pytorch_steps(monkeypatch):
    monkeypatch.setenv("GROKKIT_PERSISTENT", "1" if CUDA else "interpret")
    sensing = data.matrix.problem(3, 3, 1, 6, kind="sensing", seed=0)
    assert mk.subgradient(sensing.X, sensing.y, (3, 3), alpha=0.1, beta_star=1e-3, steps=2, device=DEVICE,
                          progress=False).backend == "torch"
    monkeypatch.setattr(persistent, "MATRIX_MAX_SIDES", (2, 64))
    p = data.matrix.problem(4, 3, 1, 8, seed=0)
    assert mk.subgradient(p.mask, p.y, (4, 3), alpha=0.1, beta_star=1e-3, steps=2, device=DEVICE,
                          progress=False).backend == "torch"


# Every kernel compiled to a cubin for an H100 (sm_90) with Triton's own ptxas: no GPU needed, so
# that CI finds what the interpreter lets pass and the compiler refuses (types of loop-carried
# values, unsupported operations). In a subprocess: here Triton may be in interpreter mode.
COMPILE = r"""
import itertools, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from grokkit.kernels import persistent_kernels as pk
P = "*fp64"
def build(fn, signature, constexprs):
    signature = {**signature, **{k: "constexpr" for k in constexprs}}
    kernel = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs),
                            target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    assert kernel.asm["cubin"], fn.__name__
sparse = dict(X=P, M=P, Y=P, alpha=P, beta1=P, beta2=P, B=P, B1=P, B2=P, steps="i32", sx="i32", sm="i32", sy="i32")
for method, keep in itertools.product((0, 1, 2), (True, False)):
    build(pk.sparse_kernel, sparse, dict(N=30, n=100, BN=32, BNn=128, METHOD=method, KEEP=keep))
deep = dict(X=P, Y=P, alpha=P, beta1=P, beta2=P, depth="*i32", B=P, B1=P, B2=P, steps="i32", sx="i32", sy="i32")
build(pk.deep_kernel, deep, dict(N=30, n=100, L=4, BN=32, BNn=128, BL=4, KEEP=True))
shapes = [dict(n1=10, n2=10, P=10, Q=10, TRANS=False, BP=16, BQ=16, PAIRS=45),
          dict(n1=8, n2=12, P=12, Q=8, TRANS=True, BP=16, BQ=8, PAIRS=28)]
matrix = dict(A=P, A1=P, A2=P, M=P, Y=P, alpha=P, beta_star=P, beta2=P, order="*i32", steps="i32")
for method, shape in itertools.product((0, 1, 2), shapes):
    build(pk.matrix_kernel, matrix, dict(shape, METHOD=method))
build(pk.svd_kernel, dict(A=P, H=P, S=P, order="*i32"), shapes[1])
print("compiled")
"""


def test_the_kernels_compile_for_an_h100():
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "GROKKIT_PERSISTENT")}
    done = subprocess.run([sys.executable, "-c", COMPILE], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "compiled" in done.stdout, done.stderr[-3000:]


# --- the l* gradient without an SVD ------------------------------------------------------------

def _conditioned(m, n, kappa, G=4, seed=0):
    """G matrices (m, n) with singular values log-spaced from 1 to 1/kappa, and their exact U V^T."""
    g = torch.Generator().manual_seed(seed)
    r = min(m, n)
    U = torch.linalg.qr(torch.randn(G, m, m, generator=g, dtype=torch.float64))[0][..., :r]
    V = torch.linalg.qr(torch.randn(G, n, n, generator=g, dtype=torch.float64))[0][..., :r]
    s = torch.logspace(0, -np.log10(kappa), r, dtype=torch.float64)
    return U @ torch.diag_embed(s) @ V.mT, U @ V.mT


@pytest.mark.parametrize("shape", [(97, 64), (64, 97), (8, 8)])
@pytest.mark.parametrize("kappa", [1e1, 1e4, 1e8])
def test_polar_reaches_the_svd_accuracy(shape, kappa):
    """U V^T from the Newton–Schulz iterations is as close to the exact one as LAPACK's SVD gives
    it (both lose about eps·κ, the conditioning of U V^T itself), up to κ = POLAR_CONDITION."""
    W, exact = _conditioned(*shape, kappa)
    U, _, Vh = torch.linalg.svd(W, full_matrices=False)
    error = torch.linalg.matrix_norm(nets.polar(W) - exact, 2).max().item()
    svd_error = torch.linalg.matrix_norm(U @ Vh - exact, 2).max().item()
    assert error <= 2 * svd_error + 1e-14


def test_a_truncated_polar_iteration_is_not_a_subgradient():
    """Stopped early, the iterations shrink the small singular values: the count matters."""
    W, exact = _conditioned(64, 64, 1e6)
    short = nets.polar(W, iterations=nets.polar_iterations(1e2, 64))
    assert torch.linalg.matrix_norm(short - exact, 2).max().item() > 0.5
    assert nets.polar_iterations(1e8, 64) > nets.polar_iterations(1e2, 64)


def _tasks():
    return {"mlp": (gk.data.nets.teacher_student(d=8, width=20, c=2, n_train=40, n_test=60, seed=1),
                    nets.TwoLayerMLP(8, 20, 2, seed=0), 16),
            "matrix_product": (gk.data.nets.modular_addition(7, 0.5, seed=2), nets.MatrixProductMLP(7, 16, seed=0), 10),
            "lstm": (gk.data.nets.modular_addition(7, 0.5, encoding="sequence", seed=2),
                     nets.LSTMClassifier(9, 7, 6, 8, seed=0), None)}


def test_nuclear_training_with_polar_equals_the_svd_gradient(monkeypatch):
    """The ℓ* steps with β U V^T from polar() (the GPU's, here on the CPU) against one model per
    configuration trained by torch.optim.Adam through autograd's SVD (float32 weights)."""
    calls = []
    monkeypatch.setattr(nets, "POLAR_DEVICES", ("cpu", "cuda"))
    monkeypatch.setattr(nets, "polar", lambda W: calls.append(W.shape) or polar(W))
    task, model, batch = _tasks()["mlp"]
    assert_batched_equals_single(task, model, "nuclear", steps=200, batch_size=batch)
    assert calls  # the gradient came from polar()


@pytest.mark.parametrize("name", ["mlp", "matrix_product", "lstm"])
def test_polar_gradients_equal_autograd_through_the_svd(monkeypatch, name):
    """At weights trained 150 steps with ℓ*, the gradients of every parameter from polar() and from
    autograd through the SVD agree to float32 rounding. (Whole runs part on these models: Adam
    moves a coordinate whose gradient is zero up to rounding by a full step of either sign.)"""
    task, model, batch = _tasks()[name]
    trained = copy.deepcopy(model)
    flat = one_at_a_time(task, model, "nuclear", 1e-2, 1e-3, 150, batch, 3)
    torch.nn.utils.vector_to_parameters(torch.as_tensor(flat, dtype=torch.float32), trained.parameters())
    params, _ = torch.func.stack_module_state([trained] * 2)
    names = list(params)
    setup = nets.Setup(template=copy.deepcopy(trained).to("meta"), names=names, kind=task.kind, penalty="nuclear",
                       task=task, batches=nets.Batches(task.X_train.shape[0], batch, 3))
    beta = torch.tensor([1e-3, 1e-2])
    stacked = [params[k].detach() for k in names]
    by_svd = setup.gradients(stacked, beta, None)
    monkeypatch.setattr(nets, "POLAR_DEVICES", ("cpu", "cuda"))
    assert setup.polar
    by_polar = setup.gradients(stacked, beta, None)
    for key, a, b in zip(names, by_polar, by_svd):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5 * b.abs().max().item(), msg=key)


@pytest.mark.parametrize("kernel", ["subgradient", "deep"])
def test_a_run_stopped_at_the_deadline_continues_bit_identical(kernel, monkeypatch, tmp_path):
    """Checkpoints on the persistent kernels (grokkit.checkpoint): a run stopped at its 20th record
    and continued from its checkpoint ends where an uninterrupted run ends, bit for bit."""
    import time

    from grokkit import checkpoint
    from test_checkpoint import same

    monkeypatch.setenv("GROKKIT_PERSISTENT", "1" if CUDA else "interpret")
    monkeypatch.setenv(checkpoint.ENV, str(tmp_path))
    X, y, b_star = _problem()
    kwargs = dict(alpha=[0.05, 0.1], beta1=1e-3, steps=STEPS, b_star=b_star, dense=20, per_decade=20,
                  device=DEVICE, progress=False)
    call = (lambda: gk.kernels.subgradient(X, y, **kwargs)) if kernel == "subgradient" else \
        (lambda: gk.kernels.deep(X, y, depth=[1, 2], **kwargs))
    whole = call()
    assert whole.backend == "persistent"
    with monkeypatch.context() as m:
        ticks = iter(range(10**9))
        m.setattr(checkpoint, "_now", lambda: 1e9 + next(ticks))
        m.setenv(checkpoint.DEADLINE_ENV, time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(1e9 + 20)))
        with pytest.raises(checkpoint.DeadlineReached):
            call()
    assert len(list(tmp_path.rglob("*.ckpt"))) == 1
    again = call()
    assert not list(tmp_path.rglob("*.ckpt")) and checkpoint.events()[-1]["resumed_at"] > 0
    same(whole, again)
