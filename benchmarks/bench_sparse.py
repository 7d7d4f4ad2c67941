"""Benchmark: the batched subgradient kernel against a one-configuration-at-a-time numpy loop.

The Figure 1 grid (6 alpha x 6 beta1, n = 100, s = 5, N = 30, float64), the same steps from the
same initial point in both, measured side by side in one run; the numpy loop runs a diagonal of
the grid (its rate is per configuration-step), whose final iterates are compared. Prints
configuration-steps per second, the ratio and the largest difference, as a Markdown table.

    python benchmarks/bench_sparse.py [--steps 200000] [--numpy-configs 6] [--device auto]

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

    t = time.perf_counter()
    finals = np.stack([numpy_loop(problem.X, problem.y, grid["alpha"][g], grid["beta1"][g], b0, args.steps)
                       for g in subset])
    numpy_rate = subset.size * args.steps / (time.perf_counter() - t)

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
