"""Benchmark: the batched subgradient kernel against a one-configuration-at-a-time numpy loop.

The Figure 1 grid (6 alpha x 6 beta1, n = 100, s = 5, N = 30, float64), the same steps from the
same initial point in both, measured side by side in one run. Prints configuration-steps per
second, the ratio and the largest difference between the final iterates, as a Markdown table.

    python benchmarks/bench_sparse.py [--steps 20000] [--device auto]
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import torch

import grokkit as gk

ALPHA = [0.005, 0.01, 0.0275, 0.055, 0.0825, 0.1]
BETA1 = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]


def numpy_loop(X, y, alpha, beta1, b0, steps):
    """The authors' way: one configuration at a time, one Python iteration per step."""
    b = b0.copy()
    for _ in range(steps):
        b = b - alpha * (X.T @ (X @ b - y) + beta1 * np.sign(b))
    return b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--numpy-steps", type=int, default=None, help="steps per configuration of the numpy loop")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    np_steps = args.numpy_steps or args.steps

    problem = gk.data.make_problem(100, 5, 30, variance="1/N", seed=1)
    grid = gk.kernels.grid(alpha=ALPHA, beta1=BETA1)
    G = grid["alpha"].size
    b0 = np.full(problem.n, 1e-6)

    t = time.perf_counter()
    finals = np.stack([numpy_loop(problem.X, problem.y, a, b1, b0, np_steps)
                       for a, b1 in zip(grid["alpha"], grid["beta1"])])
    numpy_rate = G * np_steps / (time.perf_counter() - t)

    rows = []
    for stop in (False, True):
        traj = gk.kernels.subgradient(problem.X, problem.y, b_star=problem.b_star, **grid, steps=args.steps,
                                      init="constant", init_scale=1e-6, stop_periodic=stop, device=args.device,
                                      progress=False)
        rate = G * args.steps / traj.seconds
        if np_steps == args.steps:
            diff = f"{np.abs(traj.b_final - finals).max():.1e}"
        else:
            diff = "n/a"
        rows.append((f"batched torch ({traj.device}, traces logged{', periodic stop' if stop else ''})", rate, diff))

    for k in (4, 16):  # the same grid repeated: how throughput grows with the number of configurations
        big = {key: np.tile(v, k) for key, v in grid.items()}
        traj = gk.kernels.subgradient(problem.X, problem.y, b_star=problem.b_star, **big, steps=args.steps,
                                      init="constant", init_scale=1e-6, device=args.device, progress=False)
        rate = G * k * args.steps / traj.seconds
        rows.append((f"batched torch ({traj.device}, traces logged), {G * k} configurations", rate, "n/a"))

    print(f"Figure 1 grid: {G} configurations, n = 100, N = 30, float64; {args.steps} steps "
          f"(numpy loop: {np_steps}); torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}\n")
    print("| implementation | configuration-steps/s | ratio to numpy loop | max abs difference of final b |")
    print("|---|---|---|---|")
    print(f"| numpy loop, one configuration at a time | {numpy_rate:.3g} | 1 | reference |")
    for name, rate, diff in rows:
        print(f"| {name} | {rate:.3g} | {rate / numpy_rate:.1f} | {diff} |")


if __name__ == "__main__":
    main()
