"""Benchmark: the batched subgradient kernel against a one-configuration-at-a-time numpy loop.

The Figure 1 grid (6 alpha x 6 beta1, n = 100, s = 5, N = 30, float64), the same steps from the
same initial point in both, measured side by side in one run; the numpy loop runs a diagonal of
the grid (its rate is per configuration-step), whose final iterates are compared. Prints
configuration-steps per second, the ratio and the largest difference, as a Markdown table.

    python benchmarks/bench_sparse.py [--steps 200000] [--numpy-configs 6] [--device auto]
"""
from __future__ import annotations

import argparse
import platform
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--numpy-configs", type=int, default=6,
                        help="configurations the numpy loop runs (a diagonal of the grid; its rate is per step)")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()

    fused.library()  # compile the fused steps once, outside the timings
    problem = gk.data.make_problem(100, 5, 30, variance="1/N", seed=1)
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
