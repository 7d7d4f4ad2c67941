"""Benchmark: the matrix-completion kernels against a one-configuration-at-a-time numpy loop.

The Figure 5/42 grid (6 alpha x 6 beta*, 10 x 10, r = 2, N = 80, one shared mask, beta2 = 0,
A(1) = 1e-6 I, float64), subgradient descent (eq. 101) from the same initial point in every
implementation, measured side by side in one run, ``--repeats`` times: the lean numpy loop (one
configuration at a time, one Python iteration and one LAPACK SVD per step) on a diagonal of the
grid (its rate is per configuration-step), the batched kernel on the PyTorch steps
(``--torch-steps``: a batched torch.linalg.svd per step, slow enough to be timed on fewer steps)
and on the fused CPU steps (grokkit.kernels.fused, fused_matrix.c), then the fused proximal and
projected methods and a 4x larger grid. The kernels record their curves on the default logging
schedule. Prints, as a Markdown table, the median and range over the repeats of the
microseconds per configuration-step and of each ratio to the numpy loop of the same repeat, in
CPU time (every implementation runs on one thread, so CPU time is robust to other processes
sharing the machine) and in wall time, and the largest difference between the final iterates
of the fused run and the numpy loop.

    python benchmarks/bench_matrix.py [--steps 50000] [--torch-steps 2000] [--numpy-configs 6] [--repeats 3]

``--device cuda`` times the batched PyTorch steps on the GPU instead (wall time between
``torch.cuda.synchronize()`` calls, after a warm-up run of each grid size): the Figure 5/42 grid
(36 configurations) and the same grid tiled 4 and 16 times (144, 576), ``--torch-steps`` steps
each, next to the CPU in the same run (the numpy loop, the batched PyTorch steps and, where they
build, the fused CPU steps, at ``--steps`` steps), in microseconds per configuration-step of wall
time with the ratio to the numpy loop. Defaults on CUDA: ``--steps 5000 --torch-steps 3000
--repeats 1``, about a minute in all::

    python benchmarks/bench_matrix.py --device cuda [--steps 5000] [--torch-steps 3000] [--repeats 1]
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
from grokkit.kernels import matrix as mk

ALPHA = [0.0825, 0.1, 0.75, 0.825, 1.0, 1.5]
BETA_STAR = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]
INIT_SCALE = 1e-6


@contextmanager
def fused_path(enabled: bool):
    """Run the matrix kernels with or without the fused CPU steps (grokkit.kernels.fused)."""
    usable = fused.matrix_usable
    if not enabled:
        fused.matrix_usable = lambda *problem: False
    try:
        yield
    finally:
        fused.matrix_usable = usable


def numpy_loop(mask, Y, alpha, beta_star, A0, steps):
    """The authors' way without their bookkeeping: one configuration at a time, one Python
    iteration and one SVD per step, the gradient mask * (A - Y) of completion (eq. 101)."""
    A = A0.copy()
    for _ in range(steps):
        U, _, Vt = np.linalg.svd(A, full_matrices=False)
        A = A - alpha * (mask * (A - Y) + beta_star * (U @ Vt))
    return A


def timed(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with the CPU time and the wall time it took."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.process_time() - cpu, time.perf_counter() - wall


def one_repeat(problem, grid, subset, args) -> tuple[dict[str, tuple[float, float]], float]:
    """Microseconds per configuration-step (CPU, wall) of every implementation, measured one
    after the other, and the largest |A_fused - A_numpy| at the end."""
    G = grid["alpha"].size
    mask = problem.mask.astype(float)
    Y = np.where(problem.mask, problem.A_star, 0.0)
    A0 = INIT_SCALE * np.eye(problem.n1, problem.n2)
    kwargs = {"A_star": problem.A_star, "init": "identity", "init_scale": INIT_SCALE, "device": "cpu",
              "progress": False}
    out = {}
    finals, cpu, wall = timed(lambda: np.stack([numpy_loop(mask, Y, grid["alpha"][g], grid["beta_star"][g], A0,
                                                           args.steps) for g in subset]))
    out["numpy"] = (cpu, wall, subset.size * args.steps)
    with fused_path(False):
        traj, cpu, wall = timed(mk.subgradient, problem.mask, problem.y, (10, 10), **grid, steps=args.torch_steps,
                                **kwargs)
    assert traj.backend == "torch"
    out["torch"] = (cpu, wall, G * args.torch_steps)
    for method in ("subgradient", "proximal", "projected_subgradient"):
        traj, cpu, wall = timed(mk.METHODS[method], problem.mask, problem.y, (10, 10), **grid, steps=args.steps,
                                **kwargs)
        assert traj.backend == "fused"
        out[f"fused {method}"] = (cpu, wall, G * args.steps)
        if method == "subgradient":
            difference = np.abs(traj.A_final[subset] - finals).max()
    threads = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"  # grokkit.kernels.fused.threads: the fused steps on one core
    try:
        traj, cpu, wall = timed(mk.subgradient, problem.mask, problem.y, (10, 10), **grid, steps=args.steps, **kwargs)
    finally:
        os.environ.pop("OMP_NUM_THREADS") if threads is None else os.environ.__setitem__("OMP_NUM_THREADS", threads)
    out["fused subgradient, 1 thread"] = (cpu, wall, G * args.steps)
    big = {key: np.tile(v, 4) for key, v in grid.items()}
    traj, cpu, wall = timed(mk.subgradient, problem.mask, problem.y, (10, 10), **big, steps=args.steps // 4, **kwargs)
    out["fused subgradient, 144"] = (cpu, wall, 4 * G * (args.steps // 4))
    return {k: (1e6 * cpu / n, 1e6 * wall / n) for k, (cpu, wall, n) in out.items()}, difference


ROWS = [("numpy", "numpy loop, one configuration at a time (subgradient)"),
        ("torch", "batched, PyTorch steps (subgradient, {torch_steps} steps)"),
        ("fused subgradient, 1 thread", "batched, fused CPU steps (subgradient), one thread"),
        ("fused subgradient", "batched, fused CPU steps (subgradient), every core"),
        ("fused proximal", "batched, fused CPU steps (proximal, SVT)"),
        ("fused projected_subgradient", "batched, fused CPU steps (projected subgradient)"),
        ("fused subgradient, 144", "batched, fused CPU steps (subgradient), 144 configurations, {quarter} steps")]


def spread(values) -> str:
    values = np.asarray(values)
    return f"{np.median(values):.3g} ({values.min():.3g}–{values.max():.3g})"


def wall(fn, *args, device: torch.device, **kwargs):
    """``fn(*args, **kwargs)`` and its wall time, the device synchronized before and after."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return out, time.perf_counter() - start


def cuda_main(args) -> None:
    """The batched PyTorch steps on the GPU, the CPU implementations side by side (module docstring)."""
    device = gk.kernels.resolve_device(args.device)
    cpu = torch.device("cpu")
    problem = gk.data.matrix.problem(10, 10, 2, 80, seed=0)
    grid = gk.kernels.grid(alpha=ALPHA, beta_star=BETA_STAR)
    G = grid["alpha"].size
    subset = np.linspace(0, G - 1, args.numpy_configs).round().astype(int)
    mask = problem.mask.astype(float)
    Y = np.where(problem.mask, problem.A_star, 0.0)
    A0 = INIT_SCALE * np.eye(problem.n1, problem.n2)
    kwargs = {"A_star": problem.A_star, "init": "identity", "init_scale": INIT_SCALE, "progress": False}
    have_fused = fused.library("matrix") is not None  # also compiles the fused steps once, outside the timings
    grids = {k: {key: np.tile(v, k) for key, v in grid.items()} for k in (1, 4, 16)}
    for big in grids.values():  # warm-up: CUDA context, cuBLAS/cuSOLVER handles and workspaces of each batch size
        mk.subgradient(problem.mask, problem.y, (10, 10), **big, steps=20, device=device, **kwargs)
    runs = []
    for _ in range(args.repeats):
        rows = {}
        _, seconds = wall(lambda: [numpy_loop(mask, Y, grid["alpha"][g], grid["beta_star"][g], A0, args.steps)
                                   for g in subset], device=cpu)
        rows["numpy"] = (f"numpy loop, one configuration at a time (CPU, {args.steps} steps, {subset.size} "
                         "configurations)", seconds / (subset.size * args.steps))
        with fused_path(False):
            traj, seconds = wall(mk.subgradient, problem.mask, problem.y, (10, 10), **grid, steps=args.torch_steps,
                                 device=cpu, **kwargs)
        assert traj.backend == "torch"
        rows["torch cpu"] = (f"batched, PyTorch steps (CPU, {args.torch_steps} steps), {G} configurations",
                             seconds / (G * args.torch_steps))
        if have_fused:
            traj, seconds = wall(mk.subgradient, problem.mask, problem.y, (10, 10), **grid, steps=args.steps,
                                 device=cpu, **kwargs)
            rows["fused"] = (f"batched, {traj.backend} CPU steps ({args.steps} steps), {G} configurations",
                             seconds / (G * args.steps))
        for k, big in grids.items():
            with fused_path(False):  # (the fused steps are CPU-only: this matters for a dry run on the CPU only)
                traj, seconds = wall(mk.subgradient, problem.mask, problem.y, (10, 10), **big,
                                     steps=args.torch_steps, device=device, **kwargs)
            assert traj.backend == "torch" and traj.device.startswith(device.type), (traj.backend, traj.device)
            rows[f"cuda {k}"] = (f"batched, PyTorch steps ({traj.device}, {args.torch_steps} steps), "
                                 f"{G * k} configurations", seconds / (G * k * args.torch_steps))
        runs.append(rows)

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "no GPU (a dry run on the CPU)"
    print(f"Figure 5/42 grid (subgradient, eq. 101): {G} configurations, 10 x 10, r = 2, N = 80, float64, "
          f"tiled 4 and 16 times on the GPU; median (range) over {args.repeats} repeat(s) of the wall time, "
          f"the GPU synchronized before and after each run, after a warm-up run of each grid size; each run "
          f"records its curves on the default logging schedule; torch {torch.__version__} (CUDA "
          f"{torch.version.cuda}), numpy {np.__version__}, {name}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs\n")
    print(f"command: {' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}\n")
    print("| implementation | µs per configuration-step, wall | ratio to the numpy loop, wall |")
    print("|---|---|---|")
    for key, (label, _) in runs[0].items():
        micro = [1e6 * r[key][1] for r in runs]
        ratio = "1" if key == "numpy" else spread([r["numpy"][1] / r[key][1] for r in runs])
        print(f"| {label} | {spread(micro)} | {ratio} |")
    if "fused" in runs[0]:
        print(f"\nGPU, 36 configurations, against the fused CPU steps: "
              f"{spread([r['fused'][1] / r['cuda 1'][1] for r in runs])} times faster (wall)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="default 50000 (CPU), 5000 (CUDA)")
    parser.add_argument("--torch-steps", type=int, default=None, help="default 2000 (CPU), 3000 (CUDA)")
    parser.add_argument("--numpy-configs", type=int, default=6,
                        help="configurations the numpy loop runs (a diagonal of the grid; its rate is per step)")
    parser.add_argument("--repeats", type=int, default=None, help="default 3 (CPU), 1 (CUDA)")
    parser.add_argument("--device", default="cpu",
                        help="cpu (default); cuda, cuda:K (or auto on a GPU machine): the PyTorch steps on the GPU")
    args = parser.parse_args()
    device = gk.kernels.resolve_device(args.device)  # refuses a CUDA device on a machine without one
    cuda = device.type == "cuda"
    defaults = {"steps": 5_000, "torch_steps": 3_000, "repeats": 1} if cuda else \
        {"steps": 50_000, "torch_steps": 2_000, "repeats": 3}
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if cuda:
        cuda_main(args)
        return

    if fused.library("matrix") is None:  # also compiles the fused steps once, outside the timings
        raise SystemExit("the fused CPU steps are not available here (GROKKIT_FUSED=0, no cc, or no AVX2/FMA)")
    problem = gk.data.matrix.problem(10, 10, 2, 80, seed=0)
    grid = gk.kernels.grid(alpha=ALPHA, beta_star=BETA_STAR)
    G = grid["alpha"].size
    subset = np.linspace(0, G - 1, args.numpy_configs).round().astype(int)
    runs, differences = [], []
    for _ in range(args.repeats):
        micro, difference = one_repeat(problem, grid, subset, args)
        runs.append(micro)
        differences.append(difference)

    print(f"Figure 5/42 grid: {G} configurations, 10 x 10, r = 2, N = 80, float64, {args.steps} steps (numpy loop: "
          f"{subset.size} of them; PyTorch steps: {args.torch_steps}); median (range) over {args.repeats} repeats; "
          f"torch {torch.__version__}, numpy {np.__version__}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end\n")
    print("| implementation | µs per configuration-step, CPU | ratio to the numpy loop, CPU | µs, wall "
          "| ratio, wall |")
    print("|---|---|---|---|---|")
    for key, name in ROWS:
        label = name.format(torch_steps=args.torch_steps, quarter=args.steps // 4)
        cells = []
        for k in (0, 1):
            ratio = "1" if key == "numpy" else spread([r["numpy"][k] / r[key][k] for r in runs])
            cells += [spread([r[key][k] for r in runs]), ratio]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print(f"\nfused against PyTorch steps (CPU): {spread([r['torch'][0] / r['fused subgradient'][0] for r in runs])} "
          f"times faster; every core against one (wall): "
          f"{spread([r['fused subgradient, 1 thread'][1] / r['fused subgradient'][1] for r in runs])} times faster; "
          f"max |A_fused - A_numpy| at step {args.steps}: {max(differences):.1e}")

if __name__ == "__main__":
    main()
