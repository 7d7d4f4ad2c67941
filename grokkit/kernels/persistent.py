r"""Persistent GPU kernels (Triton) for the small-problem steps: one program per configuration,
its iterate and its problem in registers, every step of a record interval in one launch.

On a GPU the PyTorch steps of these small problems are bound by latency, not arithmetic: each
step is a dozen kernel launches, about 94 µs on an H200 whatever the grid (``book/benchmarks.md``),
while Figure 1's whole paper preset is about 2e13 multiply-adds, a second of the card's float64
rate. Here a step costs two reductions inside one program (:math:`r = \tilde Xc - y^*`, then
:math:`\tilde X^\top r` or :math:`Pr`), and the configurations of a grid run side by side on the
multiprocessors. The loop of :func:`grokkit.kernels.run.run` records its curves from the iterates
a launch returns, as it does for the fused CPU steps (:mod:`grokkit.kernels.fused`): the two share
one interface (``advance(k)``, ``iterate(age)``, ``keep(mask)``) and each step is a function of
the iterate only, so the periodic stop keeps its meaning.

* :class:`SparseSteps`: the three sparse-recovery methods (eq. 22, eq. 86, §C.7), X shared or one
  per configuration (Figures 8–10, 13–24, 27–29 stack their problems).
* :class:`DeepSteps`: the deep diagonal network :math:`b = B_1\odot\cdots\odot B_L` (§C.11, eq. 88),
  depths mixed in one grid.
* :class:`MatrixSteps`: matrix completion, the three methods of Appendix D (eq. 101, eq. 127, §D.7),
  with the one-sided Jacobi SVD of the fused CPU steps (``fused_matrix.c``) at every step, the
  matrix in registers.

They run on CUDA tensors where Triton is installed, and on CPU tensors under Triton's interpreter
with ``GROKKIT_PERSISTENT=interpret`` (slowly): that is how the tests check them against the
PyTorch steps on a machine without a GPU. The Triton source is :mod:`grokkit.kernels.persistent_kernels`. Float64 throughout, with no matrix units (``tl.dot``) involved: the
arithmetic is that of the PyTorch steps in another order of summation, so the iterates agree to
rounding (the tests ask 1e-12 relative over hundreds of steps). ``GROKKIT_PERSISTENT=0`` turns the
path off (the PyTorch steps then run everything on the GPU).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import torch

METHODS = {"subgradient": 0, "ista": 1, "projected_subgradient": 2}
MATRIX_METHODS = {"subgradient": 0, "proximal": 1, "projected_subgradient": 2}
# The largest matrices a program takes (its shorter and longer sides); larger ones run on the PyTorch steps.
MATRIX_MAX_SIDES = (32, 64)
# A program keeps its problem in registers up to this many float64 entries (X, and P for the
# projected method), 64 a thread at 8 warps; a larger one is read from the cache at every step.
RESIDENT = 8192
# The largest padded problem a program takes at all (entries of X); larger ones run on the PyTorch steps.
MAX_ENTRIES = 1 << 16


def available(device: torch.device) -> bool:
    """Whether the persistent kernels run the steps on ``device``: Triton installed, and a CUDA
    device (unless ``GROKKIT_PERSISTENT=0``), or the CPU with ``GROKKIT_PERSISTENT=interpret``
    (Triton's interpreter: the tests)."""
    mode = os.environ.get("GROKKIT_PERSISTENT", "1")
    if mode == "0" or importlib.util.find_spec("triton") is None:
        return False
    return device.type == "cuda" or (device.type == "cpu" and mode == "interpret")


def _pow2(k: int) -> int:
    return 1 << max(int(k) - 1, 0).bit_length()


def kernels():
    """The module of jitted kernels (:mod:`grokkit.kernels.persistent_kernels`), imported on first
    use; with ``GROKKIT_PERSISTENT=interpret`` Triton's interpreter runs them (set before that import)."""
    if os.environ.get("GROKKIT_PERSISTENT") == "interpret":
        if os.environ.get("TRITON_INTERPRET") != "1":
            if "triton" in sys.modules:  # its own library was jitted for the GPU when it was imported
                raise RuntimeError("GROKKIT_PERSISTENT=interpret needs TRITON_INTERPRET=1 before Triton is first "
                                   "imported: set both in the environment")
            os.environ["TRITON_INTERPRET"] = "1"
        _patch_interpreter()
    return importlib.import_module("grokkit.kernels.persistent_kernels")


def _patch_interpreter() -> None:
    """Triton's interpreter turns a loop bound into an int with ``int(array)``, which numpy >= 2.4
    refuses for a one-element 1-D array; ``.item()`` works with every numpy."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "grokkit", False):
        return

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    patched.grokkit = True
    interpreter._patch_lang_tensor = patched


def _warps(entries: int) -> int:
    """Warps of a program holding ``entries`` float64 values of its problem: about 16 a thread, up to
    8 warps (on an H100 the Figure 1 problem, 4096 entries, took 1.02 µs a step at 8 warps, 1.74 at 4,
    1.36 at 2 and 2.37 at 1: book/benchmarks.md)."""
    return _pow2(min(8, max(1, entries // 512)))


class _Persistent:
    """The iterates of G configurations on the device, ``x`` (G, ...), with the two before them and
    per-configuration tensors ``fields`` (hyper-parameters, data), all shrunk together by :meth:`keep`."""

    backend = "persistent"
    source = Path(__file__).with_name("persistent_kernels.py")  # the Triton kernels, imported on first use

    def _load(self, x0: torch.Tensor, fields: dict[str, torch.Tensor]) -> None:
        self.x = x0.to(torch.float64).contiguous().clone()
        self.x1, self.x2 = self.x.clone(), self.x.clone()
        self.fields = {k: v.contiguous() for k, v in fields.items()}

    def iterate(self, age: int = 0) -> torch.Tensor:
        """The iterate ``age`` updates ago (0, 1 or 2), shape (G, ...)."""
        return (self.x, self.x1, self.x2)[age]

    def restore(self, x: torch.Tensor, x1: torch.Tensor, x2: torch.Tensor) -> None:
        """Set the iterate and the two before it (G, ...) of the running configurations: a checkpoint's."""
        self.x, self.x1, self.x2 = (v.to(torch.float64).contiguous().clone() for v in (x, x1, x2))

    def keep(self, keep: np.ndarray) -> None:
        """Continue with the configurations in the boolean mask ``keep`` only."""
        rows = torch.as_tensor(np.flatnonzero(keep), device=self.x.device)
        self.x, self.x1, self.x2 = (v[rows].contiguous() for v in (self.x, self.x1, self.x2))
        self.fields = {k: v if k in self.shared else v[rows].contiguous() for k, v in self.fields.items()}

    def advance(self, k: int) -> None:
        """``k`` updates of every configuration, in one launch."""
        if k and self.x.shape[0]:
            self._launch(int(k))


def _column(value, G: int, device) -> torch.Tensor:
    return torch.as_tensor(np.broadcast_to(np.asarray(value, dtype=np.float64), (G,)).copy(), device=device)


class SparseSteps(_Persistent):
    """Sparse recovery: the iterates b (G, n); X (N, n) or (G, N, n), y, and P = X^† for the projected method."""

    def __init__(self, method: str, X: torch.Tensor, y: torch.Tensor, alpha, beta1, beta2, b0: torch.Tensor,
                 P: torch.Tensor | None = None):
        self.method = METHODS[method]
        self.N, self.n = X.shape[-2:]
        G, device = b0.shape[0], b0.device
        M = X if P is None else P.mT  # (N, n): X itself, or P^T for the projection
        fields = {"X": X, "M": M, "y": y}
        self.shared = {k for k, v in fields.items() if v.dim() == (1 if k == "y" else 2)}
        self._load(b0, {**fields, **{k: _column(v, G, device) for k, v in
                                     (("alpha", alpha), ("beta1", beta1), ("beta2", beta2))}})
        self.block = (_pow2(self.N), _pow2(self.n))
        entries = self.block[0] * self.block[1] * (2 if self.method == 2 else 1)
        self.resident = entries <= RESIDENT
        self.warps = _warps(entries)

    def _launch(self, k: int) -> None:
        f = self.fields
        stride = {name: 0 if name in self.shared else f[name][0].numel() for name in ("X", "M", "y")}
        kernels().sparse_kernel[(self.x.shape[0],)](
            f["X"], f["M"], f["y"], f["alpha"], f["beta1"], f["beta2"], self.x, self.x1, self.x2, k,
            stride["X"], stride["M"], stride["y"], N=self.N, n=self.n, BN=self.block[0], BNn=self.block[1],
            METHOD=self.method, KEEP=self.resident, num_warps=self.warps)


class DeepSteps(_Persistent):
    """The deep diagonal network: the factors (G, L, n); configuration g moves its first ``depth[g]``."""

    def __init__(self, X: torch.Tensor, y: torch.Tensor, alpha, beta1, beta2, depth, B0: torch.Tensor):
        self.N, self.n = X.shape[-2:]
        G, self.L, device = B0.shape[0], B0.shape[1], B0.device
        self.shared = {k for k, v in (("X", X), ("y", y)) if v.dim() == (1 if k == "y" else 2)}
        depth = torch.as_tensor(np.broadcast_to(np.asarray(depth), (G,)).astype(np.int32), device=device)
        self._load(B0, {"X": X, "y": y, "depth": depth, **{k: _column(v, G, device) for k, v in
                                                          (("alpha", alpha), ("beta1", beta1), ("beta2", beta2))}})
        self.block = (_pow2(self.N), _pow2(self.n), _pow2(self.L))
        entries = self.block[0] * self.block[1] + 4 * self.block[2] * self.block[1]
        self.resident = entries <= RESIDENT
        self.warps = _warps(entries)

    def _launch(self, k: int) -> None:
        f = self.fields
        stride = {name: 0 if name in self.shared else f[name][0].numel() for name in ("X", "y")}
        kernels().deep_kernel[(self.x.shape[0],)](
            f["X"], f["y"], f["alpha"], f["beta1"], f["beta2"], f["depth"], self.x, self.x1, self.x2, k,
            stride["X"], stride["y"], N=self.N, n=self.n, L=self.L, BN=self.block[0], BNn=self.block[1],
            BL=self.block[2], KEEP=self.resident, num_warps=self.warps)


def _fits(X: torch.Tensor) -> bool:
    N, n = X.shape[-2:]
    return X.dtype == torch.float64 and _pow2(N) * _pow2(n) <= MAX_ENTRIES


def sparse_steps(method: str, data: dict, config: dict, x0: torch.Tensor) -> SparseSteps | None:
    """The persistent steps of a sparse-recovery run (:data:`grokkit.kernels.run.SPARSE`), or None
    where they cannot run it (:func:`available`, a problem above :data:`MAX_ENTRIES`)."""
    X = data["X"]
    if method not in METHODS or not available(X.device) or not _fits(X):
        return None
    return SparseSteps(method, X, data["y"], config["alpha"], config["beta1"], config["beta2"], x0, data.get("P"))


def deep_steps(method: str, data: dict, config: dict, x0: torch.Tensor) -> DeepSteps | None:
    """The persistent steps of a deep diagonal run (:data:`grokkit.kernels.sparse.SPARSE_DEEP`), or None."""
    X = data["X"]
    if not available(X.device) or not _fits(X) or x0.shape[1] > 8:
        return None
    return DeepSteps(X, data["y"], config["alpha"], config["beta1"], config["beta2"], config["depth"], x0)


def pairs(q: int) -> np.ndarray:
    """The q(q-1)/2 pairs of columns (i < j) in the round-robin order of ``fused_matrix.c``: rounds
    of floor(q/2) disjoint pairs (an odd q plays with a dummy column q), as an int32 array (pairs, 2)."""
    m, out = q + (q & 1), []
    for round_ in range(m - 1):
        for x in range(m // 2):
            i = 0 if x == 0 else 1 + (round_ + x - 1) % (m - 1)
            j = 1 + (round_ + m - 2 - x) % (m - 1)
            i, j = min(i, j), max(i, j)
            if j < q:
                out.append((i, j))
    return np.array(out, dtype=np.int32).reshape(-1, 2)


class _Shape:
    """An n1 x n2 matrix as the kernels work on it: the P x Q matrix A, or A^T when n1 < n2 (P >= Q),
    padded to powers of 2, with the pairs of its columns."""

    def __init__(self, n1: int, n2: int, device):
        P, self.Q = max(n1, n2), min(n1, n2)
        self.order = torch.as_tensor(pairs(self.Q).ravel(), device=device)
        self.kwargs = dict(n1=n1, n2=n2, P=P, Q=self.Q, TRANS=n1 < n2, BP=_pow2(P), BQ=_pow2(self.Q),
                           PAIRS=self.Q * (self.Q - 1) // 2, num_warps=_warps(_pow2(P) * _pow2(self.Q)))


class MatrixSteps(_Persistent):
    """Matrix completion: the iterates A (G, n1, n2), the mask and y dense per configuration (0/1, and
    y at the observed entries, (G, n1 n2))."""

    def __init__(self, method: str, op, y: torch.Tensor, alpha, beta_star, beta2, A0: torch.Tensor):
        self.method = MATRIX_METHODS[method]
        G, n1, n2 = A0.shape
        device = A0.device
        index = op.index.expand(G, -1)
        mask = torch.zeros(G, n1 * n2, dtype=torch.float64, device=device).scatter_(1, index, 1.0)
        dense_y = torch.zeros(G, n1 * n2, dtype=torch.float64, device=device).scatter_(
            1, index, y.to(torch.float64).expand(G, -1))
        self.shared = set()
        self._load(A0, {"mask": mask, "y": dense_y, **{k: _column(v, G, device) for k, v in
                                                       (("alpha", alpha), ("beta_star", beta_star), ("beta2", beta2))}})
        self.shape = _Shape(n1, n2, device)

    def _launch(self, k: int) -> None:
        f = self.fields
        kernels().matrix_kernel[(self.x.shape[0],)](
            self.x, self.x1, self.x2, f["mask"], f["y"], f["alpha"], f["beta_star"], f["beta2"], self.shape.order, k,
            METHOD=self.method, **self.shape.kwargs)


def matrix_steps(method: str, data: dict, config: dict, x0: torch.Tensor) -> MatrixSteps | None:
    """The persistent steps of a matrix run (:data:`grokkit.kernels.matrix.MATRIX`), or None where
    they cannot run it: sensing, matrices above :data:`MATRIX_MAX_SIDES`, :func:`available`."""
    op, y = data["op"], data["y"]
    if (method not in MATRIX_METHODS or op.kind != "completion" or not available(x0.device)
            or y.dtype != torch.float64 or min(op.shape) > MATRIX_MAX_SIDES[0] or max(op.shape) > MATRIX_MAX_SIDES[1]):
        return None
    return MatrixSteps(method, op, y, config["alpha"], config["beta_star"], config["beta2"], x0)


def jacobi_svd(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The singular values (decreasing) and :math:`h(A) = UV^\top` of every matrix of ``A`` (G, n1, n2),
    float64, by the SVD of :class:`MatrixSteps` (for the tests, as :func:`grokkit.kernels.fused.jacobi_svd`)."""
    G, n1, n2 = A.shape
    A = A.to(torch.float64).contiguous()
    shape = _Shape(n1, n2, A.device)
    H, S = torch.empty_like(A), torch.empty(G, shape.Q, dtype=torch.float64, device=A.device)
    kernels().svd_kernel[(G,)](A, H, S, shape.order, **{k: v for k, v in shape.kwargs.items() if k != "num_warps"})
    return -torch.sort(-S, dim=1).values, H
