"""Benchmark: the batched subgradient kernel against a one-configuration-at-a-time numpy loop.

The Figure 1 grid (6 alpha x 6 beta1, n = 100, s = 5, N = 30, float64), the same steps from the
same initial point in both, measured side by side in one run; the numpy loop runs a diagonal of
the grid (its rate is per configuration-step), whose final iterates are compared. Prints
configuration-steps per second, the ratio and the largest difference, as a Markdown table.

    python benchmarks/bench_sparse.py [--steps 200000] [--numpy-configs 6] [--repeats 3] [--device auto]

On a CUDA device (``--device cuda``, or ``auto`` where there is one) it times the batched
PyTorch steps on the GPU (wall time between ``torch.cuda.synchronize()`` calls, after a warm-up
run of each grid size) for the grid and the grid tiled 4 and 16 times, every one ``--steps``
steps (default 20000 there), next to the numpy loop and the fused CPU steps in the same run.
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from contextlib import contextmanager

import numpy as np
import torch

import grokkit as gk
from grokkit.kernels import fused

ALPHA = [0.005, 0.01, 0.0275, 0.055, 0.0825, 0.1]
BETA1 = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]


@contextmanager
def fused_path(enabled: bool):
    """Run the kernels with or without the fused CPU steps (grokkit.kernels.fused)."""
    usable = fused.usable
    if not enabled:
        fused.usable = lambda *problem: False
    try:
        yield
    finally:
        fused.usable = usable


@contextmanager
def fused_variant(isa: str, threads: int):
    """The fused steps with the vector width ``isa`` ("avx2" or "avx512") on ``threads`` threads
    (through ``GROKKIT_FUSED_ISA`` and ``OMP_NUM_THREADS``, which :func:`grokkit.kernels.fused.threads` reads)."""
    names = ("GROKKIT_FUSED_ISA", "OMP_NUM_THREADS")
    before = {k: os.environ.get(k) for k in names}
    os.environ.update(GROKKIT_FUSED_ISA=isa, OMP_NUM_THREADS=str(threads))
    fused.library.cache_clear()
    try:
        yield fused.library()
    finally:
        for k, v in before.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        fused.library.cache_clear()


def numpy_loop(X, y, alpha, beta1, b0, steps):
    """The authors' way: one configuration at a time, one Python iteration per step."""
    b = b0.copy()
    for _ in range(steps):
        b = b - alpha * (X.T @ (X @ b - y) + beta1 * np.sign(b))
    return b


def cuda_main(args, device: torch.device) -> None:
    """The batched PyTorch steps on the GPU next to the CPU implementations (module docstring)."""
    problem = gk.data.sparse.problem(100, 5, 30, variance="1/N", seed=1)
    grid = gk.kernels.grid(alpha=ALPHA, beta1=BETA1)
    G = grid["alpha"].size
    b0 = np.full(problem.n, 1e-6)
    subset = np.linspace(0, G - 1, args.numpy_configs).round().astype(int)
    kwargs = dict(b_star=problem.b_star, init="constant", init_scale=1e-6, stop_periodic=False, progress=False)
    have_fused = fused.library() is not None  # compile the fused steps once, outside the timings
    grids = {k: {key: np.tile(v, k) for key, v in grid.items()} for k in (1, 4, 16)}
    with fused_path(False):
        for big in grids.values():  # warm-up: CUDA context, cuBLAS handles, each batch size once
            gk.kernels.subgradient(problem.X, problem.y, **big, steps=20, device=device, **kwargs)

    def timed(fn):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        out = fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return out, time.perf_counter() - start

    finals, seconds = timed(lambda: np.stack([numpy_loop(problem.X, problem.y, grid["alpha"][g], grid["beta1"][g],
                                                         b0, args.steps) for g in subset]))
    numpy_rate = subset.size * args.steps / seconds
    rows = []
    if have_fused:
        traj, seconds = timed(lambda: gk.kernels.subgradient(problem.X, problem.y, **grid, steps=args.steps,
                                                             device="cpu", **kwargs))
        rows.append((f"batched, {traj.backend} steps (cpu), {G} configurations", G * args.steps / seconds,
                     f"{np.abs(traj.b_final[subset] - finals).max():.1e}"))
    for k, big in grids.items():
        with fused_path(False):  # (CPU-only: matters for a dry run on the CPU only)
            traj, seconds = timed(lambda: gk.kernels.subgradient(problem.X, problem.y, **big, steps=args.steps,
                                                                 device=device, **kwargs))
        assert traj.backend == "torch" and traj.device.startswith(device.type), (traj.backend, traj.device)
        diff = f"{np.abs(traj.b_final[subset] - finals).max():.1e}" if k == 1 else "n/a"
        rows.append((f"batched, PyTorch steps ({traj.device}), {G * k} configurations", G * k * args.steps / seconds,
                     diff))

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "no GPU (a dry run on the CPU)"
    print(f"Figure 1 grid: {G} configurations, n = 100, N = 30, float64, {args.steps} steps in every run (numpy "
          f"loop: {subset.size} configurations), tiled 4 and 16 times on the GPU; wall time, the GPU synchronized "
          f"before and after each run, after a warm-up run of each grid size; curves logged; torch "
          f"{torch.__version__} (CUDA {torch.version.cuda}), {name}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs\n")
    print(f"command: {' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}\n")
    print("| implementation | configuration-steps/s | µs per configuration-step | ratio to numpy loop "
          "| max abs difference of final b |")
    print("|---|---|---|---|---|")
    print(f"| numpy loop, one configuration at a time (cpu) | {numpy_rate:.3g} | {1e6 / numpy_rate:.3g} | 1 "
          f"| reference ({subset.size} configurations) |")
    for label, rate, diff in rows:
        print(f"| {label} | {rate:.3g} | {1e6 / rate:.3g} | {rate / numpy_rate:.1f} | {diff} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="default 200000 (CPU), 20000 (CUDA)")
    parser.add_argument("--numpy-configs", type=int, default=6,
                        help="configurations the numpy loop runs (a diagonal of the grid; its rate is per step)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the fused variants and the numpy loop")
    args = parser.parse_args()
    device = gk.kernels.resolve_device(args.device)  # refuses a CUDA device on a machine without one
    if args.steps is None:
        args.steps = 20_000 if device.type == "cuda" else 200_000
    if device.type == "cuda":
        cuda_main(args, device)
        return

    fused.library()  # compile the fused steps once, outside the timings
    problem = gk.data.sparse.problem(100, 5, 30, variance="1/N", seed=1)
    grid = gk.kernels.grid(alpha=ALPHA, beta1=BETA1)
    G = grid["alpha"].size
    b0 = np.full(problem.n, 1e-6)
    subset = np.linspace(0, G - 1, args.numpy_configs).round().astype(int)

    kwargs = dict(b_star=problem.b_star, init="constant", init_scale=1e-6, device=args.device, progress=False)
    numpy_rates, fused_rates = [], {}
    cores = os.cpu_count() or 1
    variants = [(isa, k) for isa in ("avx2", "avx512") for k in (1, cores)] if fused.library() is not None else []
    for _ in range(args.repeats):  # side by side, interleaved: the numpy loop, then each fused variant
        t = time.perf_counter()
        finals = np.stack([numpy_loop(problem.X, problem.y, grid["alpha"][g], grid["beta1"][g], b0, args.steps)
                           for g in subset])
        numpy_rates.append(subset.size * args.steps / (time.perf_counter() - t))
        for isa, threads in variants:
            with fused_variant(isa, threads) as lib:
                t = time.perf_counter()  # wall time, the loop's recording included
                traj = gk.kernels.subgradient(problem.X, problem.y, **grid, steps=args.steps, stop_periodic=False,
                                              **kwargs)
                rate = G * args.steps / (time.perf_counter() - t)
            name = f"fused, {'AVX-512' if lib.lanes == 8 else 'AVX2'}, {threads} thread{'s' * (threads > 1)}"
            fused_rates.setdefault(name, []).append((rate, np.abs(traj.b_final[subset] - finals).max()))
    numpy_rate = float(np.median(numpy_rates))

    print(f"Figure 1 grid, the fused steps by vector width and threads: {G} configurations x {args.steps} steps, "
          f"{args.repeats} repeats interleaved, wall time (median and range); the leanest numpy loop, one "
          f"configuration at a time, {numpy_rate:.3g} steps/s (range {min(numpy_rates):.3g}-{max(numpy_rates):.3g})\n")
    print("| fused steps | configuration-steps/s (median) | ratio to the numpy loop: median (range) "
          "| max abs difference of final b |")
    print("|---|---|---|---|")
    for name, runs in fused_rates.items():
        rates = np.array([r for r, _ in runs])
        ratios = rates / np.array(numpy_rates)
        print(f"| {name} | {np.median(rates):.3g} | {np.median(ratios):.1f} ({ratios.min():.1f}-{ratios.max():.1f}) "
              f"| {max(d for _, d in runs):.1e} |")
    print()

    rows = []
    for backend, stop in (("torch", False), ("fused", False), ("fused", True)):
        with fused_path(backend == "fused"):
            traj = gk.kernels.subgradient(problem.X, problem.y, b_star=problem.b_star, **grid, steps=args.steps,
                                          init="constant", init_scale=1e-6, stop_periodic=stop,
                                          device=args.device, progress=False)
        rate = G * args.steps / traj.seconds
        diff = f"{np.abs(traj.b_final[subset] - finals).max():.1e}"
        rows.append((f"batched, {traj.backend} steps ({traj.device}, traces logged"
                     f"{', periodic stop' if stop else ''})", rate, diff))
    for k in (4, 16):  # the same grid repeated: how throughput grows with the number of configurations
        big = {key: np.tile(v, k) for key, v in grid.items()}
        steps = args.steps // k
        traj = gk.kernels.subgradient(problem.X, problem.y, b_star=problem.b_star, **big, steps=steps,
                                      init="constant", init_scale=1e-6, device=args.device, progress=False)
        rows.append((f"batched, {traj.backend} steps ({traj.device}, traces logged), {G * k} configurations, "
                     f"{steps} steps", G * k * steps / traj.seconds, "n/a"))

    print(f"Figure 1 grid: {G} configurations, n = 100, N = 30, float64, {args.steps} steps (numpy loop: "
          f"{subset.size} of them); torch {torch.__version__}, {platform.processor() or platform.machine()}\n")
    print("| implementation | configuration-steps/s | ratio to numpy loop | max abs difference of final b |")
    print("|---|---|---|---|")
    print(f"| numpy loop, one configuration at a time | {numpy_rate:.3g} | 1 | reference ({subset.size} configurations) |")
    for name, rate, diff in rows:
        print(f"| {name} | {rate:.3g} | {rate / numpy_rate:.1f} | {diff} |")


if __name__ == "__main__":
    main()
