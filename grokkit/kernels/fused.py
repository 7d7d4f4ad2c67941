r"""A fused CPU path for the sparse-recovery steps: ``fused.c``, compiled on first use.

On the CPU the PyTorch steps spend most of their time in two small float64 matrix
products per step, (G x n)(n x N) and (G x N)(N x n), where MKL's fixed cost per call
dominates (about 10-20 µs each for the Figure 1 grid on a 2-core machine). ``fused.c`` runs
whole chunks of steps in C with a register-blocked AVX2/FMA product over the configuration
axis: 14.5 µs per step for those 36 configurations, about 3.5 times the PyTorch steps
(``benchmarks/bench_sparse.py``). It needs an x86-64 CPU with AVX2 and FMA and a C compiler
(``cc``); without them, or with ``GROKKIT_FUSED=0``, the kernels use the PyTorch steps,
which are the reference (the tests check that both agree to 1e-12).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
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
_SOURCE = Path(__file__).with_name("fused.c")
_D = ctypes.POINTER(ctypes.c_double)


def _cpu_has_avx2_fma() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx2" in flags and " fma" in flags


FLAGS = ("-O3", "-mavx2", "-mfma", "-shared", "-fPIC")


def _build(compiler: str) -> Path | None:
    """Compile ``fused.c`` into the user's cache (keyed by the source and flags), once."""
    digest = hashlib.sha256(_SOURCE.read_bytes() + " ".join(FLAGS).encode()).hexdigest()[:16]
    for folder in (Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "grokkit",
                   Path(tempfile.gettempdir()) / f"grokkit-{os.getuid()}"):
        target = folder / f"fused-{digest}.so"
        if target.is_file():
            return target
        try:
            folder.mkdir(parents=True, exist_ok=True)
            partial = folder / f"fused-{digest}.{os.getpid()}.tmp"
            if subprocess.run([compiler, *FLAGS, "-o", str(partial), str(_SOURCE)], capture_output=True).returncode:
                return None
            os.replace(partial, target)  # atomic: concurrent builds cannot leave a half-written library
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
def library() -> ctypes.CDLL | None:
    """The compiled ``fused.c``, or None where it cannot be built or run here."""
    if os.environ.get("GROKKIT_FUSED", "1") == "0" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or not _cpu_has_avx2_fma():
        return None
    target = _build(compiler)
    lib = _load(target)
    if target is not None and lib is None:  # a damaged cached build (truncated, say): rebuild it once
        target.unlink(missing_ok=True)
        lib = _load(_build(compiler))
        if lib is None:
            warnings.warn(f"grokkit: the fused CPU steps in {target} could not be loaded or rebuilt; "
                          "using the PyTorch steps", RuntimeWarning, stacklevel=2)
    if lib is None:
        return None
    lib.grokkit_steps.argtypes = [ctypes.c_int] * 4 + [ctypes.c_long] + [_D] * 11
    lib.grokkit_steps.restype = None
    return lib


def usable(method: str, X: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether the fused path can run ``method`` on this problem (CPU, float64, X and y shared)."""
    return (method in METHODS and X.device.type == "cpu" and X.dtype == torch.float64 and X.dim() == 2
            and y.dim() == 1 and library() is not None)


def _pad(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape)
    out[tuple(slice(0, s) for s in a.shape)] = a
    return out


class FusedSteps:
    """The iterates of G configurations in the fused layout (n x G, G padded to a multiple of 4), advanced in C."""

    def __init__(self, method: str, X: torch.Tensor, y: torch.Tensor, alpha, beta1, beta2, b0: torch.Tensor,
                 P: torch.Tensor | None = None):
        self.method = METHODS[method]
        self.N, self.n = X.shape
        self.X = np.ascontiguousarray(X.numpy())
        self.M = np.ascontiguousarray(P.numpy() if P is not None else X.numpy().T)
        self.y = np.ascontiguousarray(y.numpy())
        self._load(np.asarray(alpha), np.asarray(beta1), np.asarray(beta2), b0.numpy())

    def _load(self, alpha, beta1, beta2, b0) -> None:
        G = b0.shape[0]
        self.G, self.Gp = G, -(-G // 4) * 4
        self.params = [_pad(np.ravel(v), (self.Gp,)) for v in (alpha, beta1, beta2)]
        self.B = _pad(b0.T, (self.n, self.Gp))
        self.B1, self.B2 = self.B.copy(), self.B.copy()
        self.R, self.D = np.zeros((self.N, self.Gp)), np.zeros((self.n, self.Gp))
        self.pointers = [a.ctypes.data_as(_D) for a in (self.X, self.M, self.y, *self.params, self.B, self.B1,
                                                         self.B2, self.R, self.D)]

    def advance(self, k: int) -> None:
        """``k`` updates of every configuration."""
        if k:
            library().grokkit_steps(self.method, self.N, self.n, self.Gp, k, *self.pointers)

    def iterate(self, age: int = 0) -> torch.Tensor:
        """The iterate ``age`` updates ago (0, 1 or 2), shape (G, n)."""
        A = (self.B, self.B1, self.B2)[age]
        return torch.from_numpy(np.ascontiguousarray(A[:, :self.G].T))

    def keep(self, keep: np.ndarray) -> None:
        """Continue with the configurations in the boolean mask ``keep`` only."""
        alpha, beta1, beta2 = (v[:self.G][keep] for v in self.params)
        B, B1, B2 = (A[:, :self.G][:, keep] for A in (self.B, self.B1, self.B2))
        self._load(alpha, beta1, beta2, B.T)
        self.B1[:, :B1.shape[1]], self.B2[:, :B2.shape[1]] = B1, B2
