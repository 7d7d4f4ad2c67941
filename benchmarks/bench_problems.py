"""Benchmark: the fused CPU steps of problems of their own (grokkit.kernels.fused.ProblemSteps, DeepSteps)
against the PyTorch steps, side by side in one run, on the shapes of the paper's stacked sweeps.

* Figures 13-24: 40 stacked problems (s in {1, 5, 10, 15} x N in {10, ..., 100}, n = 100), the
  three sparse methods, alpha = 0.1, beta1 = 1e-5.
* Figures 27-29: 110 stacked problems (11 tau x N in {10, ..., 100}, n = 100), subgradient,
  alpha = 0.1, beta1 = 1e-5.
* Figures 30-35: the deep diagonal network, depths 1-4 x 10 stacked N (n = 100), alpha = 0.1,
  beta1 = 0, beta2 = 1e-5, init_scale = 1e-2.

Every run goes through the public kernel (``grokkit.kernels.*``, curves recorded, no periodic stop)
as a notebook calls it; ``fused.usable`` switched off gives the PyTorch steps. Three runs of each,
interleaved, median over ``--repeats``: one step (the set-up: checks, lambda_max, the projection),
``--steps`` steps recorded only at 1, 10, 100, ... (the rate of the steps themselves, the set-up
subtracted), and a slice of ``--slice`` steps on the kernels' log schedule (every step up to 1000,
then 100 a decade: the rate a short run sees, set-up and records included). The projected wall
time of a paper preset is its set-up, its configuration-steps at the first rate and its records
(``log_schedule(steps)``) at the cost of a record in the slice; configurations that stop early
(periodic) would cost nothing after. The fused steps run on the cores the process has
(``OMP_NUM_THREADS`` caps them) and, for reference, on one thread.

    python benchmarks/bench_problems.py [--steps 5000] [--slice 3000] [--repeats 3]
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
from grokkit.kernels import fused, sparse

N_SWEEP = list(range(10, 101, 10))
# paper preset: (the shapes that run it, one per method, steps of each run, target in minutes on 2 cores)
PRESETS = {"Figs 13-24": ("Figs 13-24", 1_000_001, 15), "Figs 27-29": ("Figs 27-29", 10_000_001, 30),
           "Figs 30-32": ("Figs 30-35", 1_000_001, 5), "Figs 33-35": ("Figs 30-35", 100_000_001, 45)}


@contextmanager
def backend(name: str):
    """The kernels on the fused steps (``"fused"``: every core; ``"fused, 1 thread"``) or the PyTorch steps."""
    usable, threads = fused.usable, os.environ.get("OMP_NUM_THREADS")
    if name == "torch":
        fused.usable = lambda *problem: False
    elif name == "fused, 1 thread":
        os.environ["OMP_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        fused.usable = usable
        if threads is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = threads


def coherent(tau: float, i: int, N: int):
    """The problem of Figures 27-29 for (tau, the i-th N), as their notebook draws it; where its y is
    all zeros (tau = 1, N = 20: no atom of the support among the rows; the kernels refuse it) X drawn
    with x_seed + 100, for this benchmark only."""
    p = gk.data.sparse.problem(100, 5, N, tau=tau, variance="1/N", seed=1, x_seed=1 + i)
    return p if p.y.any() else gk.data.sparse.problem(100, 5, N, tau=tau, variance="1/N", seed=1, x_seed=1 + i + 100)


def shapes() -> dict:
    """name: (kernel, its arguments) for each benchmarked shape."""
    sn, _ = gk.data.sparse.sn_problems(100, [1, 5, 10, 15], N_SWEEP, variance="1/N", seed=1, x_seed=1)
    X, y, b_star = gk.data.sparse.stack_problems(sn)
    common = dict(alpha=0.1, beta1=1e-5, init_scale=1e-6, stop_periodic=False, device="cpu", progress=False)
    out = {f"Figs 13-24, {m}, 40 problems": (sparse.METHODS[m], (X, y), dict(b_star=b_star, **common))
           for m in ("subgradient", "ista", "projected_subgradient")}
    tau = [coherent(t, i, N) for t in np.linspace(0.0, 1.0, 11) for i, N in enumerate(N_SWEEP)]
    X, y, b_star = gk.data.sparse.stack_problems(tau)
    out["Figs 27-29, subgradient, 110 problems"] = (sparse.subgradient, (X, y), dict(b_star=b_star, **common))
    five, _ = gk.data.sparse.sn_problems(100, 5, N_SWEEP, variance="1/N", seed=1, x_seed=1)
    X, y, b_star = (np.tile(a, (4,) + (1,) * (a.ndim - 1)) for a in gk.data.sparse.stack_problems(five))
    deep = dict(common, beta1=0.0, beta2=1e-5, init_scale=1e-2, depth=np.repeat([1, 2, 3, 4], len(N_SWEEP)))
    out["Figs 30-35, deep L = 1-4, 40 problems"] = (sparse.deep, (X, y), dict(b_star=b_star, **deep))
    return out


def timed(kernel, args, kwargs, steps: int, **schedule):
    start = time.perf_counter()
    traj = kernel(*args, steps=steps, **kwargs, **schedule)
    return time.perf_counter() - start, traj


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000, help="steps of the runs that time the steps")
    parser.add_argument("--slice", type=int, default=3000, help="steps of the runs on the log schedule")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.pop("GROKKIT_CACHE", None)  # time the runs, not the result cache
    if fused.library() is None:  # compiled once, outside the timings
        sys.exit("the fused CPU steps cannot be built here (no cc, or no AVX2/FMA)")
    cores = fused.threads(float("inf"))
    names = ("torch", "fused", "fused, 1 thread") if cores > 1 else ("torch", "fused")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    records = gk.kernels.log_schedule(args.slice).size
    timings = {}  # (shape, backend): [(steps/s, seconds of a record)], the last run's final iterate, G
    for shape, (kernel, data, kwargs) in shapes().items():
        G = len(kernel(*data, steps=1, **kwargs))  # warm-up: the problem's checks, pinv, the first records
        for _ in range(args.repeats):
            for name in names:
                with backend(name):
                    setup, _ = timed(kernel, data, kwargs, 1, dense=0)
                    steps, traj = timed(kernel, data, kwargs, args.steps, dense=0, per_decade=1)
                    sliced, _ = timed(kernel, data, kwargs, args.slice)
                assert traj.backend == name.split(",")[0], (traj.backend, name)
                rate = G * args.steps / max(steps - setup, 1e-9)
                record = max(sliced - setup - G * args.slice / rate, 0.0) / records
                entry = timings.setdefault((shape, name), [[], None, G])
                entry[0].append((rate, G * args.slice / sliced, record, setup))
                entry[1] = traj.b_final

    print(f"Configuration-steps per second (median of {args.repeats} interleaved repeats, range in brackets): "
          f"{args.steps} steps recorded at 1, 10, 100, ...; a slice of {args.slice} steps on the log schedule "
          f"({records} records). n = 100, float64; torch {torch.__version__} (on one thread, on "
          f"{torch.get_num_threads()} for the 110 problems: above 1e6 multiply-adds a step), "
          f"{platform.processor() or platform.machine()}, {cores} core(s) for the fused steps; load average "
          f"{load:.2f} when it started (another job on the machine lowers the rates)\n")
    print(f"command: {' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}\n")
    print("| shape | steps | configuration-steps/s | µs per configuration-step | ratio to PyTorch "
          "| slice on the log schedule: configuration-steps/s | ms per record "
          "| final b: max difference to PyTorch / max |b| |")
    print("|---|---|---|---|---|---|---|---|")
    median = {}
    for (shape, name), (runs, final, G) in timings.items():
        rate, sliced, record, setup = (np.array(v) for v in zip(*runs))
        median[shape, name] = (np.median(rate), np.median(record), G, np.median(setup))
        reference = timings[shape, "torch"]
        ratio = np.median(rate) / np.median([run[0] for run in reference[0]])
        diff = np.abs(final - reference[1]).max() / np.abs(reference[1]).max()
        print(f"| {shape} | {name} | {np.median(rate):.3g} ({rate.min():.3g}-{rate.max():.3g}) "
              f"| {1e6 / np.median(rate):.3g} | {ratio:.1f} | {np.median(sliced):.3g} | {1e3 * np.median(record):.2g} "
              f"| {'reference' if name == 'torch' else f'{diff:.1e}'} |")

    print("\nProjected wall time of the paper presets, in minutes (set-up, configuration-steps at the rate above, "
          "and the records of their log schedule at the slice's cost of a record):\n")
    print("| paper preset | runs x configurations x steps | " + " | ".join(names) + " | target (2 cores) |")
    print("|---|---|" + "---|" * len(names) + "---|")
    for preset, (prefix, steps, target) in PRESETS.items():
        runs = sorted({s for s, _ in median if s.startswith(prefix)})
        T = gk.kernels.log_schedule(steps).size
        minutes = [sum(median[s, name][3] + median[s, name][2] * steps / median[s, name][0] + T * median[s, name][1]
                       for s in runs) / 60 for name in names]
        G = median[runs[0], "torch"][2]
        print(f"| {preset} | {len(runs)} x {G} x {steps:.3g} | " + " | ".join(f"{m:.3g}" for m in minutes)
              + f" | <= {target} |")

if __name__ == "__main__":
    main()
