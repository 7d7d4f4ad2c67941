r"""Fused CPU paths for the small-problem steps, in C compiled on first use: ``fused.c`` for
sparse recovery, ``fused_matrix.c`` for matrix completion.

Sparse recovery: on the CPU the PyTorch steps spend most of their time in two small float64
matrix products per step, (G x n)(n x N) and (G x N)(N x n), where MKL's fixed cost per call
dominates (about 10-20 µs each for the Figure 1 grid on a 2-core machine). ``fused.c`` runs
whole chunks of steps in C with a register-blocked AVX2/FMA product over the configuration
axis: 14.5 µs per step for those 36 configurations, about 3.5 times the PyTorch steps
(``benchmarks/bench_sparse.py``).

Problems of their own and the deep diagonal network: where X or y is one per configuration (the
stacked N sweeps of Figures 13–24 and 27–29, :func:`grokkit.data.sparse.stack_problems`), and for
the deep diagonal network (§C.11, eq. 88, Figures 30–35), :class:`ProblemSteps` and
:class:`DeepSteps` keep PyTorch's configuration-major layout and run one configuration at a time
for a whole chunk of steps, its problem in the core's caches. A step is one sweep of its rows for
both products (:math:`r = \tilde Xb - y^*` and :math:`\tilde X^\top r`, or :math:`Pr` for the
projection), up to its last nonzero row (the zero rows of a stack add exactly nothing): the
PyTorch steps' operations in their order, up to rounding (the sums run in another order, some
products are fused multiply-adds; the tests ask 1e-12 of the largest value of every record).
Subgradient steps on the 40 problems of Figures 13–24 (N = 10 to 100, n = 100): 0.66 µs per
configuration-step on one core of the development machine, 0.36 on two, where the PyTorch steps
take 4.5 µs; the deep network, 10 of them at depths 1 to 4 (Figures 30–35): 0.74 and 0.39 µs,
against 7.8 µs (``benchmarks/bench_problems.py``). The diagonal network of the background chapter
(:class:`DiagonalSteps`, square or logistic loss) sweeps X once a step for both products, a block
of columns at a time: where X outgrows the caches (Lyu et al.'s n = 1e5) the two products of the
PyTorch steps read it from memory twice.

Matrix completion: a PyTorch step is dominated by the batched ``torch.linalg.svd`` of the
iterates (23-28 µs per 10 x 10 matrix on that machine). ``fused_matrix.c`` runs whole chunks of
steps of the three matrix methods (subgradient eq. 101, proximal/SVT eq. 127, projected
subgradient §D.7) on completion problems, the mask shared or one per configuration, with one
AVX2 lane per configuration and a one-sided (Hestenes) Jacobi SVD of each iterate, whose
singular values agree with LAPACK's to rounding (``tests/test_speed.py``: 1e-12 ||A||_2, the
tiny ones included): 5.6 µs per configuration-step for the Figure 5/42 grid, about 9 times the
PyTorch steps and 10 times a lean numpy loop (``benchmarks/bench_matrix.py``). Each step is a
function of the iterate only, as in PyTorch, so the periodic stop keeps its meaning. Where the
two paths may differ:

* h(A) = UV^T is unique when A has full rank. Where a singular value vanishes (A = 0, or an
  exactly rank-deficient A) U is completed with the canonical basis vectors that keep the most
  of their norm, and LAPACK with others: both are subgradients of the nuclear norm, but the
  next iterates differ.
* h(A) is as sensitive as sigma_max/(sigma_{k-1} + sigma_k) (sigma_max/sigma_k for a
  rectangular A) to rounding in A, in both SVDs. Once the spurious singular values of a
  subgradient run reach their floor (about alpha beta*), the steps amplify rounding and the two
  paths drift apart there, by at most about 2 sqrt(n - r) alpha beta* in ||A||_F, while the leading
  directions, and so the errors, t1 and t2, agree (to 1e-6 relative up to t2 in the tests).
* The proximal map is nonexpansive: the paths stay within the sum of the rounding of each step.

Both need an x86-64 CPU with AVX2 and FMA and a C compiler (``cc``); without them, or with
``GROKKIT_FUSED=0``, the kernels use the PyTorch steps, which are the reference (the tests
check that both agree). Matrix sensing (a dense X) and matrices with min(n1, n2) above
:data:`MATRIX_MAX_SIDE` stay on the PyTorch steps.

Both use the cores this process is given: a long chunk of steps is split over :func:`threads`
threads, each with whole registers of configurations in arrays of its own (for problems of their
own: whole configurations, taken from a shared counter), and the sparse steps can be built for
AVX-512 (``GROKKIT_FUSED_ISA=avx512``, see :data:`AVX512`). Neither changes a number: every
configuration does the same arithmetic, in the same order, on any number of threads and at either
vector width (the tests check it bit for bit).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

METHODS = {"subgradient": 0, "ista": 1, "projected_subgradient": 2}
MATRIX_METHODS = {"subgradient": 0, "proximal": 1, "projected_subgradient": 2}
# Above this min(n1, n2) LAPACK's SVD beats the Jacobi sweeps (equal near 50, 4x faster at 100 on
# the development machine): larger matrices run on the PyTorch steps.
MATRIX_MAX_SIDE = 40
_SOURCES = {"sparse": Path(__file__).with_name("fused.c"), "matrix": Path(__file__).with_name("fused_matrix.c")}
DEEP = "deep"  # the method of the deep diagonal network's runs (grokkit.kernels.sparse.deep)
DIAGONAL = "diagonal_net"  # the method of the diagonal network's runs (grokkit.kernels.sparse.diagonal_net)
DIAGONAL_LOSSES = {"square": 4, "logistic": 5}  # its C methods
_D, _I = ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int)
_SIGNATURES = {  # name: (restype, argtypes)
    "grokkit_steps": (None, [ctypes.c_int] * 4 + [ctypes.c_long, ctypes.c_int] + [_D] * 11),
    "grokkit_problem_steps": (ctypes.c_int, [ctypes.c_int] * 6 + [ctypes.c_long, ctypes.c_int]
                              + [_D, ctypes.c_long] * 3 + [_I] * 3 + [_D] * 6),
    "grokkit_matrix_steps": (ctypes.c_int, [ctypes.c_int] * 4 + [ctypes.c_long, ctypes.c_int] + [_D] * 8),
    "grokkit_matrix_svd": (ctypes.c_int, [ctypes.c_int] * 3 + [_D] * 3),
    "grokkit_lanes": (ctypes.c_int, []),
}


def _cpu_flags() -> set[str]:
    try:
        return set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return set()


def _cpu_has_avx2_fma() -> bool:
    return {"avx2", "fma"} <= _cpu_flags()


FLAGS = ("-O3", "-mavx2", "-mfma", "-shared", "-fPIC", "-pthread")
# The sparse steps also build for AVX-512 (8 configurations a register) with GROKKIT_FUSED_ISA=avx512
# where the CPU has it; a lane computes the same numbers in both builds. It is not the default: on
# the development machine (an AMD EPYC that runs a 512-bit FMA on its two 256-bit units) the AVX2
# steps already run at the core's multiply-add peak, and the AVX-512 build measured as fast on one
# core and 22 % slower on two (it pads the Figure 1 grid from 36 configurations to 40);
# book/benchmarks.md.
AVX512 = ("-mavx512f",)


def _flags(kind: str) -> tuple[str, ...]:
    """The compiler flags of the ``kind`` library here: AVX2/FMA, or AVX-512 for the sparse steps
    where ``GROKKIT_FUSED_ISA=avx512`` asks for it and the CPU has it."""
    wide = (kind == "sparse" and "avx512f" in _cpu_flags()
            and os.environ.get("GROKKIT_FUSED_ISA", "").strip().lower() == "avx512")
    return FLAGS + AVX512 if wide else FLAGS


def _record(target: Path) -> Path:
    """The build record beside a library: its size and SHA-256, written after it."""
    return target.with_name(target.name + ".sha256")


def _fingerprint(path: Path) -> str:
    data = path.read_bytes()
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}"


def _verified(target: Path) -> bool:
    """Whether ``target`` is, byte for byte, the library its build recorded. A library damaged
    on disk (truncated, overwritten) can load and then die with SIGBUS on its first call, so it
    is checked before it is loaded."""
    try:
        return _record(target).read_text(encoding="utf-8").strip() == _fingerprint(target)
    except OSError:
        return False


def _build(compiler: str, source: Path = _SOURCES["sparse"], flags: tuple[str, ...] = FLAGS) -> Path | None:
    """Compile ``source`` with ``flags`` into the user's cache (keyed by the source and flags), once;
    a cached build that does not match its record (:func:`_verified`) is built again."""
    digest = hashlib.sha256(source.read_bytes() + " ".join(flags).encode()).hexdigest()[:16]
    for folder in (Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "grokkit",
                   Path(tempfile.gettempdir()) / f"grokkit-{os.getuid()}"):
        target = folder / f"{source.stem}-{digest}.so"
        if target.is_file() and _verified(target):
            return target
        try:
            folder.mkdir(parents=True, exist_ok=True)
            partial = folder / f"{source.stem}-{digest}.{os.getpid()}.tmp"
            if subprocess.run([compiler, *flags, "-o", str(partial), str(source)], capture_output=True).returncode:
                return None
            record = folder / f"{source.stem}-{digest}.{os.getpid()}.sha256.tmp"
            record.write_text(_fingerprint(partial) + "\n", encoding="utf-8")
            os.replace(partial, target)  # atomic: concurrent builds cannot leave a half-written library
            os.replace(record, _record(target))
            return target
        except OSError:
            continue
    return None


def _load(target: Path | None) -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(str(target)) if target is not None else None
    except OSError:
        return None


@functools.cache
def library(kind: str = "sparse") -> ctypes.CDLL | None:
    """The compiled ``fused.c`` (``kind="sparse"``) or ``fused_matrix.c`` (``"matrix"``), or None
    where it cannot be built or run here."""
    if os.environ.get("GROKKIT_FUSED", "1") == "0" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or not _cpu_has_avx2_fma():
        return None
    source, flags = _SOURCES[kind], _flags(kind)
    target = _build(compiler, source, flags)
    if target is None and flags != FLAGS:  # a compiler without AVX-512: the AVX2 build
        flags = FLAGS
        target = _build(compiler, source, flags)
    lib = _load(target)
    if target is not None and lib is None:  # a damaged cached build (truncated, say): rebuild it once
        target.unlink(missing_ok=True)
        lib = _load(_build(compiler, source, flags))
        if lib is None:
            warnings.warn(f"grokkit: the fused CPU steps in {target} could not be loaded or rebuilt; "
                          "using the PyTorch steps", RuntimeWarning, stacklevel=2)
    if lib is None:
        return None
    for name, (restype, argtypes) in _SIGNATURES.items():
        if hasattr(lib, name):
            getattr(lib, name).argtypes, getattr(lib, name).restype = argtypes, restype
    lib.lanes = lib.grokkit_lanes() if hasattr(lib, "grokkit_lanes") else 4  # the padding of G it needs
    return lib


# A chunk of steps is split over threads only when it has this many flops at least (about 1 ms on one
# core): starting and joining a thread costs some 50 µs, and the first records of a run are 1 step apart.
THREAD_WORK = 4e6


def threads(work: float) -> int:
    """Threads for a chunk of ``work`` flops: the cores this process may use (its CPU affinity),
    capped by ``OMP_NUM_THREADS`` where it is set (``grokkit run`` sets it to 1 when it runs one
    notebook per core, so that runs never oversubscribe the machine); 1 below :data:`THREAD_WORK`."""
    if work < THREAD_WORK:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    cap = os.environ.get("OMP_NUM_THREADS", "").strip()
    return max(1, min(cores, int(cap) if cap.isdigit() and int(cap) > 0 else cores))


def usable(method: str, X: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether the fused path can run ``method`` (a sparse method of :data:`METHODS`, :data:`DEEP` or :data:`DIAGONAL`)
    on this problem: X (N, n) or (G, N, n) and y (N,) or (G, N) on the CPU in float64."""
    return (method in (*METHODS, DEEP, DIAGONAL) and X.device.type == "cpu" and X.dtype == torch.float64
            and X.dim() in (2, 3) and y.dim() in (1, 2) and library() is not None)


def matrix_usable(method: str, op, y: torch.Tensor) -> bool:
    """Whether the fused path can run the matrix ``method`` on this problem: completion (a mask,
    shared or one per configuration) of matrices with min(n1, n2) <= :data:`MATRIX_MAX_SIDE`, y on
    the CPU in float64."""
    return (method in MATRIX_METHODS and op.kind == "completion" and min(op.shape) <= MATRIX_MAX_SIDE
            and y.device.type == "cpu" and y.dtype == torch.float64 and library("matrix") is not None)


def _columns(a, G: int, Gp: int) -> np.ndarray:
    """Per-configuration values ``a`` (G, ...) as a C-contiguous (entries, Gp) array,
    configuration-contiguous, padded with copies of the last configuration."""
    a = np.asarray(a, dtype=np.float64)
    a = a.reshape(G, math.prod(a.shape[1:]))
    return np.ascontiguousarray(np.concatenate([a, np.repeat(a[-1:], Gp - G, axis=0)]).T)


def _checkpoint(name: str, t: torch.Tensor, shape: tuple) -> np.ndarray:
    """An iterate ``t`` given to ``restore`` as a numpy array, checked to have the running iterate's ``shape``."""
    if tuple(t.shape) != shape:
        raise ValueError(f"{name} must have shape {shape} (the running configurations' iterate), got {tuple(t.shape)}")
    return t.detach().cpu().numpy()


class _Layout:
    """The iterates of G configurations in the fused layout: (entries, Gp) arrays, G padded to a
    multiple of ``lanes`` (4; 8 for the AVX-512 sparse steps), with the two previous iterates (for the periodic stop) and per-configuration
    arrays ``fields`` (hyper-parameters, data), all shrunk together by :meth:`keep`. A subclass
    sets ``_pointers`` (the C arguments) and ``advance``."""

    lanes = 4  # the configurations of one register: G is padded to a multiple of it

    def _load(self, x0: np.ndarray, fields: dict[str, np.ndarray]) -> None:
        G = x0.shape[0]
        self.G, self.Gp, self.shape = G, -(-G // self.lanes) * self.lanes, x0.shape[1:]
        self.fields = {k: _columns(v, G, self.Gp) for k, v in fields.items()}
        self.B = _columns(x0, G, self.Gp)
        self.B1, self.B2 = self.B.copy(), self.B.copy()

    def iterate(self, age: int = 0) -> torch.Tensor:
        """The iterate ``age`` updates ago (0, 1 or 2), shape (G, ...)."""
        A = (self.B, self.B1, self.B2)[age]
        return torch.from_numpy(np.ascontiguousarray(A[:, :self.G].T).reshape(self.G, *self.shape))

    def restore(self, x: torch.Tensor, x1: torch.Tensor, x2: torch.Tensor) -> None:
        """Continue from the iterate ``x`` (G, ...), ``x1`` and ``x2`` the iterates 1 and 2 updates
        before it (those :meth:`iterate` gave: a checkpoint of the configurations running)."""
        for name, A, t in (("x", self.B, x), ("x1", self.B1, x1), ("x2", self.B2, x2)):
            A[...] = _columns(_checkpoint(name, t, (self.G, *self.shape)), self.G, self.Gp)

    def keep(self, keep: np.ndarray) -> None:
        """Continue with the configurations in the boolean mask ``keep`` only."""
        fields = {k: v[:, :self.G][:, keep].T for k, v in self.fields.items()}
        B, B1, B2 = (A[:, :self.G][:, keep] for A in (self.B, self.B1, self.B2))
        self._load(B.T.reshape(-1, *self.shape), fields)
        self.B1[:, :B1.shape[1]], self.B2[:, :B2.shape[1]] = B1, B2
        self._pointers()


class FusedSteps(_Layout):
    """Sparse recovery (``fused.c``): the iterates b (n x Gp) advanced in C."""

    source = _SOURCES["sparse"]

    def __init__(self, method: str, X: torch.Tensor, y: torch.Tensor, alpha, beta1, beta2, b0: torch.Tensor,
                 P: torch.Tensor | None = None):
        self.method = METHODS[method]
        self.lanes = library().lanes
        self.N, self.n = X.shape
        self.X = np.ascontiguousarray(X.numpy())
        self.M = np.ascontiguousarray(P.numpy() if P is not None else X.numpy().T)
        self.y = np.ascontiguousarray(y.numpy())
        self._load(b0.numpy(), {"alpha": alpha, "beta1": beta1, "beta2": beta2})
        self._pointers()

    def _pointers(self) -> None:
        self.R, self.D = np.zeros((self.N, self.Gp)), np.zeros((self.n, self.Gp))
        f = self.fields
        self.pointers = [a.ctypes.data_as(_D) for a in (self.X, self.M, self.y, f["alpha"], f["beta1"], f["beta2"],
                                                         self.B, self.B1, self.B2, self.R, self.D)]

    def advance(self, k: int) -> None:
        """``k`` updates of every configuration, on :func:`threads` threads when the chunk is long
        enough to pay for them (the iterates are the same on any number of threads)."""
        if k:
            work = 4.0 * k * self.N * self.n * self.Gp  # multiply-adds of the two products, times 2
            library().grokkit_steps(self.method, self.N, self.n, self.Gp, k, threads(work), *self.pointers)


def _aligned(a: np.ndarray, ld: int) -> np.ndarray:
    """The rows of ``a`` (..., m, n) as a C-contiguous float64 array (..., m, ``ld``) starting on a
    cache line (64 bytes), zero columns after the n-th."""
    a = np.asarray(a, dtype=np.float64)
    shape = a.shape[:-1] + (ld,)
    raw = np.zeros(math.prod(shape) + 8)
    start = -raw.ctypes.data % 64 // 8
    out = raw[start:start + math.prod(shape)].reshape(shape)
    out[..., :a.shape[-1]] = a
    return out


class _Problems:
    """The iterates of G configurations in PyTorch's layout (G, ...), configuration-major, with the
    two previous ones, advanced by ``grokkit_problem_steps`` (``fused.c``) one configuration at a
    time; each configuration has its hyper-parameters and its problem: X (N, n) and y (N,) shared
    or one per configuration (the stride between two configurations' is then 0), each configuration
    sweeping only its rows up to the last nonzero one (the zero rows with y = 0 that
    :func:`grokkit.data.sparse.stack_problems` appends change nothing). :meth:`keep` shrinks them
    all together."""

    source = _SOURCES["sparse"]

    def _load(self, method: int, X: torch.Tensor, y: torch.Tensor, x0: torch.Tensor, hyper: dict, depth=1,
              M: torch.Tensor | None = None) -> None:
        self.method, self.G, (self.N, self.n) = method, x0.shape[0], X.shape[-2:]
        self.L = x0.shape[1] if x0.dim() == 3 else 1
        self.ld = -(-self.n // 4) * 4  # rows of whole 256-bit vectors
        X, y = X.numpy(), y.numpy()
        nonzero = np.broadcast_to((X != 0).any(axis=-1) | (y != 0), (self.G, self.N))
        rows = np.where(nonzero.any(axis=1), self.N - nonzero[:, ::-1].argmax(axis=1), 0)
        # per configuration: X (G, N, ld), M (G, N, ld) and y (G, N), or shared: (N, ld), (N,)
        self.problem = {"X": _aligned(X, self.ld), "M": None if M is None else _aligned(M.numpy(), self.ld),
                        "y": np.ascontiguousarray(y)}
        self.fields = {k: np.ascontiguousarray(np.broadcast_to(v, (self.G,)), dtype=np.float64)
                       for k, v in hyper.items()}
        self.fields.update(rows=rows.astype(np.int32),
                           depth=np.ascontiguousarray(np.broadcast_to(depth, (self.G,)), dtype=np.int32))
        self.B = np.array(x0.numpy(), dtype=np.float64, order="C")
        self.B1, self.B2 = self.B.copy(), self.B.copy()
        self._pointers()

    def _pointers(self) -> None:
        f, p = self.fields, self.problem
        # the longest configurations first, so that the threads finish together
        self.order = np.argsort(-(2 * f["rows"] + 4 * f["depth"]), kind="stable").astype(np.int32)
        X, M, y = p["X"], p["X"] if p["M"] is None else p["M"], p["y"]
        self.args = [X.ctypes.data_as(_D), int(X[0].size) if X.ndim == 3 else 0,  # strides, 0: shared
                     M.ctypes.data_as(_D), int(M[0].size) if M.ndim == 3 else 0,
                     y.ctypes.data_as(_D), int(y[0].size) if y.ndim == 2 else 0,
                     *(a.ctypes.data_as(_I) for a in (f["rows"], f["depth"], self.order)),
                     *(a.ctypes.data_as(_D) for a in (f["alpha"], f["beta1"], f["beta2"], self.B, self.B1, self.B2))]
        self.work = 4.0 * self.n * float(f["rows"].sum())  # the multiply-adds of a step's sweep, times 2

    def advance(self, k: int) -> None:
        """``k`` updates of every configuration, on :func:`threads` threads when the chunk is long
        enough to pay for them (the iterates are the same on any number of threads)."""
        if k and self.G:
            if not library().grokkit_problem_steps(self.method, self.G, self.N, self.n, self.ld, self.L, k,
                                                   threads(k * self.work), *self.args):
                raise MemoryError("the fused steps could not allocate their work space")

    def iterate(self, age: int = 0) -> torch.Tensor:
        """The iterate ``age`` updates ago (0, 1 or 2), shape (G, ...) (a copy)."""
        return torch.from_numpy((self.B, self.B1, self.B2)[age].copy())

    def restore(self, x: torch.Tensor, x1: torch.Tensor, x2: torch.Tensor) -> None:
        """Continue from the iterate ``x`` (G, ...), ``x1`` and ``x2`` the iterates 1 and 2 updates
        before it (those :meth:`iterate` gave: a checkpoint of the configurations running)."""
        for name, A, t in (("x", self.B, x), ("x1", self.B1, x1), ("x2", self.B2, x2)):
            A[...] = _checkpoint(name, t, A.shape)

    def keep(self, keep: np.ndarray) -> None:
        """Continue with the configurations in the boolean mask ``keep`` only."""
        keep = np.asarray(keep, dtype=bool)
        self.B, self.B1, self.B2 = (np.ascontiguousarray(A[keep]) for A in (self.B, self.B1, self.B2))
        self.fields = {k: np.ascontiguousarray(v[keep]) for k, v in self.fields.items()}
        self.problem = {k: v if v is None or v.ndim == (1 if k == "y" else 2) else _aligned(v[keep], v.shape[-1])
                        for k, v in self.problem.items()}  # those of the configurations kept, or shared
        self.G = self.B.shape[0]
        self._pointers()


class ProblemSteps(_Problems):
    """Sparse recovery with a problem per configuration (``fused.c``, ``grokkit_problem_steps``):
    the iterates b (G, n); X (G, N, n) stacked (the N sweeps of Figures 13–24 and 27–29) or shared
    with y (G, N) one per configuration, and P = X^† for the projected method."""

    def __init__(self, method: str, X: torch.Tensor, y: torch.Tensor, alpha, beta1, beta2, b0: torch.Tensor,
                 P: torch.Tensor | None = None):
        self._load(METHODS[method], X, y, b0, {"alpha": alpha, "beta1": beta1, "beta2": beta2},
                   M=None if P is None else P.mT)


class DeepSteps(_Problems):
    """The deep diagonal network (§C.11, eq. 88; ``fused.c``, ``grokkit_problem_steps``): the factors
    (G, L, n), configuration g moving its first ``depth[g]`` (the others are ones), X and y shared or
    one per configuration (Figures 30–35 stack the N sweep)."""

    def __init__(self, X: torch.Tensor, y: torch.Tensor, alpha, beta1, beta2, depth, B0: torch.Tensor):
        self._load(3, X, y, B0, {"alpha": alpha, "beta1": beta1, "beta2": beta2}, depth)


class DiagonalSteps(_Problems):
    """The diagonal network of Woodworth et al. (eq. 10) and Lyu et al. (eq. 4) (``fused.c``,
    ``grokkit_problem_steps``): the branches W (G, 2, n), β = w₊^D − w₋^D with configuration g's
    depth ``depth[g]``, the square or the logistic loss, X and y shared or one per configuration.
    Its iterate is the kernel's, ``[W, depth]``."""

    def __init__(self, loss: str, X: torch.Tensor, y: torch.Tensor, alpha, beta1, beta2, x0: list):
        W0, depth = x0
        self._load(DIAGONAL_LOSSES[loss], X, y, W0, {"alpha": alpha, "beta1": beta1, "beta2": beta2},
                   depth.reshape(-1).numpy().astype(np.int32))
        # X by columns, (ld, N rounded up to 4): the steps read it once a step, in order
        columns = np.zeros((*X.shape[:-2], self.ld, self.N))
        columns[..., :self.n, :] = X.numpy().swapaxes(-1, -2)
        self.problem["X"] = _aligned(columns, -(-self.N // 4) * 4)
        self._pointers()

    def iterate(self, age: int = 0) -> list[torch.Tensor]:
        """``[W, depth]`` ``age`` updates ago (0, 1 or 2): W (G, 2, n) (a copy), depth (G, 1)."""
        return [super().iterate(age), torch.from_numpy(self.fields["depth"].astype(np.float64)[:, None])]

    def restore(self, x: list, x1: list, x2: list) -> None:
        super().restore(x[0], x1[0], x2[0])


class MatrixSteps(_Layout):
    """Matrix completion (``fused_matrix.c``): the iterates A (n1 n2 x Gp, row-major entries)
    advanced in C, with the mask and y dense per configuration (0/1, and y at the observed entries)."""

    source = _SOURCES["matrix"]

    def __init__(self, method: str, op, y: torch.Tensor, alpha, beta_star, beta2, A0: torch.Tensor):
        self.method = MATRIX_METHODS[method]
        G, n1, n2 = A0.shape
        index, ys = op.index.cpu().numpy(), np.atleast_2d(y.numpy())  # (1 or G, N) each
        index = np.broadcast_to(index, (G, index.shape[1]))
        mask, dense_y = np.zeros((G, n1 * n2)), np.zeros((G, n1 * n2))
        np.put_along_axis(mask, index, 1.0, axis=1)
        np.put_along_axis(dense_y, index, np.broadcast_to(ys, index.shape), axis=1)
        self._load(A0.numpy(), {"alpha": alpha, "beta_star": beta_star, "beta2": beta2, "mask": mask, "y": dense_y})
        self._pointers()

    def _pointers(self) -> None:
        f = self.fields
        self.pointers = [a.ctypes.data_as(_D) for a in (f["mask"], f["y"], f["alpha"], f["beta_star"], f["beta2"],
                                                         self.B, self.B1, self.B2)]

    def advance(self, k: int) -> None:
        """``k`` updates of every configuration, on :func:`threads` threads when the chunk is long
        enough to pay for them (the iterates are the same on any number of threads)."""
        n1, n2 = self.shape
        work = 10.0 * k * self.Gp * n1 * n2 * min(n1, n2) ** 2  # a Jacobi SVD per step, some sweeps
        if k and not library("matrix").grokkit_matrix_steps(self.method, n1, n2, self.Gp, k, threads(work),
                                                            *self.pointers):
            raise MemoryError("the fused matrix steps could not allocate their work space")


def sparse_steps(method: str, data: dict, config: dict, x0: torch.Tensor) -> FusedSteps | ProblemSteps | None:
    """The fused steps of a sparse-recovery run (:data:`grokkit.kernels.run.SPARSE`): X and y shared
    by every configuration, :class:`FusedSteps`; X or y one per configuration, :class:`ProblemSteps`;
    None where the PyTorch steps must run it (:func:`usable`)."""
    X, y = data["X"], data["y"]
    if not usable(method, X, y):
        return None
    steps = FusedSteps if X.dim() == 2 and y.dim() == 1 else ProblemSteps
    return steps(method, X, y, config["alpha"], config["beta1"], config["beta2"], x0, data.get("P"))


def deep_steps(method: str, data: dict, config: dict, x0: torch.Tensor) -> DeepSteps | None:
    """The fused steps of a deep diagonal run (:data:`grokkit.kernels.sparse.SPARSE_DEEP`), or None
    where the PyTorch steps must run it (:func:`usable`)."""
    if not usable(method, data["X"], data["y"]):
        return None
    return DeepSteps(data["X"], data["y"], config["alpha"], config["beta1"], config["beta2"], config["depth"], x0)


def diagonal_steps(loss: str):
    """The fused steps of a diagonal-network run with ``loss`` (:data:`grokkit.kernels.sparse.DIAGONAL_NETS`),
    a ``fused`` hook: None where the PyTorch steps must run it (:func:`usable`)."""
    def steps(method: str, data: dict, config: dict, x0: list) -> DiagonalSteps | None:
        if not usable(method, data["X"], data["y"]):
            return None
        return DiagonalSteps(loss, data["X"], data["y"], config["alpha"], config["beta1"], config["beta2"], x0)
    return steps


def matrix_steps(method: str, data: dict, config: dict, x0: torch.Tensor) -> MatrixSteps | None:
    """The fused steps of a matrix run (:data:`grokkit.kernels.matrix.MATRIX`), or None where
    the PyTorch steps must run it (:func:`matrix_usable`: sensing, large matrices, a GPU, no
    compiler)."""
    if not matrix_usable(method, data["op"], data["y"]):
        return None
    return MatrixSteps(method, data["op"], data["y"], config["alpha"], config["beta_star"], config["beta2"], x0)


def jacobi_svd(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The singular values (decreasing) and :math:`h(A) = UV^\top` of every matrix of ``A``
    (G, n1, n2), float64, by the one-sided Jacobi SVD of the fused matrix steps (``fused_matrix.c``).
    Raises ``RuntimeError`` where the fused path is not available (:func:`library`)."""
    lib = library("matrix")
    if lib is None:
        raise RuntimeError("the fused matrix steps are not available here (GROKKIT_FUSED=0, no cc, or no AVX2/FMA)")
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 3 or 0 in A.shape[1:]:
        raise ValueError(f"A must have shape (G, n1, n2) with n1, n2 >= 1, got shape {A.shape}")
    G, n1, n2 = A.shape
    Gp = -(-G // 4) * 4
    cols = _columns(A, G, Gp)
    S, H = np.zeros((min(n1, n2), Gp)), np.zeros_like(cols)
    if not lib.grokkit_matrix_svd(n1, n2, Gp, *(a.ctypes.data_as(_D) for a in (cols, S, H))):
        raise MemoryError("the fused matrix SVD could not allocate its work space")
    return -np.sort(-S[:, :G].T, axis=1), H[:, :G].T.reshape(G, n1, n2)
