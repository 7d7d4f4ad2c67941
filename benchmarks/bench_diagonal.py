"""Benchmark: the fused CPU steps of the background chapter's diagonal network
(grokkit.kernels.fused.DiagonalSteps) against the PyTorch steps, side by side in one run.

Shapes: Lyu et al.'s Figure 1b (misgrokking: logistic loss, N = 32, one X per seed, n from 1e3 to
1e5, three seeds) and Figure 1a's N = 256. Every run goes through ``grokkit.kernels.diagonal_net``
as the pages call it, with records only at 1, 10, 100, ... (the rate of the steps); ``fused.usable``
switched off gives the PyTorch steps. Interleaved repeats, median and range, wall time and this
process's CPU time (the CPU time is the steadier of the two where other jobs share the cores).

    python benchmarks/bench_diagonal.py [--steps 200] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time

import numpy as np
import torch

import grokkit as gk
from grokkit.kernels import fused

SHAPES = [(32, 1_000), (32, 10_000), (32, 100_000), (256, 10_000)]  # (N, n), three seeds each


def timed(X, y, steps: int, on_fused: bool) -> tuple[float, float, str]:
    usable = fused.usable
    if not on_fused:
        fused.usable = lambda *problem: False
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        traj = gk.kernels.diagonal_net(X, y, alpha=0.01, beta2=1e-3, init_scale=32.0 / np.sqrt(2 * X.shape[-1]),
                                       loss="logistic", steps=steps, dense=0, per_decade=1, device="cpu",
                                       progress=False)
        return time.perf_counter() - wall, time.process_time() - cpu, traj.backend
    finally:
        fused.usable = usable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.pop("GROKKIT_CACHE", None)  # time the runs, not the result cache
    if fused.library() is None:
        sys.exit("the fused CPU steps cannot be built here (no cc, or no AVX2/FMA)")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rng = np.random.default_rng(0)
    print(f"Diagonal network, logistic loss, 3 seeds (one X each), {args.steps} steps, median of {args.repeats} "
          f"interleaved repeats (range); torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{fused.threads(float('inf'))} core(s); load average {load:.2f} when it started\n")
    print(f"command: {' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}\n")
    print("| N | n | PyTorch: ms per configuration-step, wall (CPU) | fused: wall (CPU) "
          "| ratio, wall | ratio, CPU time |")
    print("|---|---|---|---|---|---|")
    for N, n in SHAPES:
        X = rng.standard_normal((3, N, n)) / np.sqrt(N)
        y = np.sign(rng.standard_normal((3, N)))
        timed(X, y, 2, True), timed(X, y, 2, False)  # warm-up: the checks, the first records
        runs = {True: [], False: []}
        for _ in range(args.repeats):
            for on_fused in (False, True):
                wall, cpu, backend = timed(X, y, args.steps, on_fused)
                assert backend == ("fused" if on_fused else "torch"), backend
                runs[on_fused].append((1e3 * wall / (3 * args.steps), 1e3 * cpu / (3 * args.steps)))
        (tw, tc), (fw, fc) = (np.median(np.array(runs[k]), axis=0) for k in (False, True))
        spread = {k: np.array(runs[k])[:, 0] for k in runs}
        print(f"| {N} | {n:.0e} | {tw:.3g} ({tc:.3g}), {spread[False].min():.3g}-{spread[False].max():.3g} "
              f"| {fw:.3g} ({fc:.3g}), {spread[True].min():.3g}-{spread[True].max():.3g} | {tw / fw:.1f} | {tc / fc:.1f} |")


if __name__ == "__main__":
    main()
