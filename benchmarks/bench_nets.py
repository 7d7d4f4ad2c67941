"""Benchmark: batched network training (grokkit.kernels.nets) against a loop of single-model
``torch.optim.Adam`` trainings of the same configurations, side by side in one run.

Two cases of issue 9, 18 configurations each, float32:

* teacher–student (Figures 47–49): the student MLP 100 -> 500 -> 2 on N = 100 examples, full
  batch, penalty l1, alpha 6 values x beta 3 values;
* modular addition (Figures 51–53): the authors' matrix-product MLP, p = 97, train fraction 0.4,
  mini-batches of 2048 in one shared order, penalty l2, alpha 3 values x beta 6 values.

Both implementations take the same ``--steps`` Adam updates of every configuration from the same
initialisation on the same batches; the batched run records its curves only at the first and last
step (two evaluations, included in its time). Prints, as a Markdown table, the median over
``--repeats`` of the configuration-steps per second of each, their ratio, and the arithmetic rate
(forward + backward ~ 3x the forward pass's multiply-adds x 2 FLOP) against the rate of a plain
large float32 matrix product on the same device, the practical limit. On the CPU everything runs
on one thread (the library's setting for these small networks, and the loop's here), on CUDA on
the GPU with ``torch.cuda.synchronize`` around each timing, the batched steps both replayed from
CUDA graphs (the default there) and launched one by one. On the CPU the loop is also timed with
``torch.optim.Adam(fused=True)``, the Adam implementation the batched run uses there, to show
what batching gains beyond it. ``--json PATH`` writes the numbers.

    python benchmarks/bench_nets.py [--device cpu] [--steps 200] [--repeats 3] [--case all] [--json out.json]
"""
from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
import time

import torch

import grokkit as gk
from grokkit.kernels import nets


def cases():
    """(name, task, model, penalty, grid, batch_size, forward multiply-adds per example)."""
    ts = gk.data.nets.teacher_student(d=100, width=500, c=2, n_train=100, n_test=1000, seed=0)
    ts_grid = gk.kernels.grid(alpha=[1e-4, 5.5e-4, 1e-3, 5.5e-3, 1e-2, 5.5e-2], beta=[1e-5, 1e-4, 1e-3])
    mod = gk.data.nets.modular_addition(97, 0.4, seed=0)
    mod_grid = gk.kernels.grid(alpha=[1e-3, 1e-2, 1e-1], beta=[1e-7, 5e-7, 1e-6, 5e-6, 1e-5, 5e-5])
    p, d, k = 97, 64, 8
    return [
        ("teacher-student (full batch, l1)", ts, nets.TwoLayerMLP(100, 500, 2, seed=0), "l1", ts_grid, None,
         100 * 500 + 500 * 2),
        ("modular addition (batch 2048, l2)", mod, nets.MatrixProductMLP(p, d, seed=0), "l2", mod_grid, 2048,
         2 * p * d + d * k + d * d + d * p),
    ]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def loop(task, model, penalty, grid, batch_size, steps, device, seed=42, fused=None):
    """One model per configuration, one after the other, with torch.optim.Adam (``fused=True``:
    its fused implementation, which the batched run uses on the CPU)."""
    task = task.to(device)
    N = task.X_train.shape[0]
    for alpha, beta in zip(grid["alpha"], grid["beta"]):
        m = copy.deepcopy(model).to(device)
        opt = torch.optim.Adam(m.parameters(), lr=float(alpha), fused=fused)
        batches = nets.Batches(N, batch_size, seed, device)  # on the device, as the batched run's
        for _ in range(steps):
            idx = batches.next()
            x, y = (task.X_train, task.y_train) if idx is None else (task.X_train[idx], task.y_train[idx])
            objective = nets.loss(task.kind, m(x), y) + float(beta) * nets.penalty(penalty, dict(m.named_parameters()))
            opt.zero_grad()
            objective.backward()
            opt.step()


def matmul_rate(device: torch.device, n: int = 2048, repeats: int = 5) -> float:
    """FLOP/s of a plain float32 n x n matrix product (TF32 off on CUDA: full float32, as the training)."""
    a, b = (torch.randn(n, n, device=device) for _ in range(2))
    torch.backends.cuda.matmul.allow_tf32 = False
    a @ b
    sync(device)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def timed(fn, device) -> float:
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    parser.add_argument("--case", choices=("all", "teacher-student", "modular-addition"), default="all")
    args = parser.parse_args()
    device = gk.kernels.resolve_device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    peak = matmul_rate(device, 2048 if device.type == "cpu" else 8192)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    print(f"device: {device} ({name}), torch {torch.__version__}, steps {args.steps}, repeats {args.repeats}, "
          f"float32 matmul {peak / 1e9:.1f} GFLOP/s")
    print()
    print("| case | G | batched (config-steps/s) | loop (config-steps/s) | batched / loop | "
          "batched GFLOP/s (% of matmul) | loop GFLOP/s |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for title, task, model, penalty, grid, batch_size, macs in cases():
        if args.case != "all" and not title.replace(" ", "-").startswith(args.case):
            continue
        G = grid["alpha"].size
        B = task.X_train.shape[0] if batch_size is None else min(batch_size, task.X_train.shape[0])
        flops = 3 * 2 * macs * B * G * args.steps
        batched, looped, looped_fused = [], [], []
        warm = dict(steps=2, dense=0, per_decade=1, device=device, progress=False)
        nets.train.__wrapped__(task, model, penalty, alpha=grid["alpha"], beta=grid["beta"], batch_size=batch_size, **warm)
        loop(task, model, penalty, {k: v[:1] for k, v in grid.items()}, batch_size, 2, device)
        def batched_run():
            nets.train.__wrapped__(task, model, penalty, alpha=grid["alpha"], beta=grid["beta"],
                                   batch_size=batch_size, steps=args.steps, dense=0, per_decade=1, device=device,
                                   progress=False)

        eager = []
        if device.type == "cuda":  # the batched steps without CUDA graphs, for comparison
            nets.CUDA_GRAPHS, graphs = False, nets.CUDA_GRAPHS
            eager = [timed(batched_run, device) for _ in range(args.repeats)]
            nets.CUDA_GRAPHS = graphs
        if device.type == "cuda" and nets.CUDA_GRAPHS and penalty in nets.GRAPH_PENALTIES:
            try:
                batched_run()  # the first run captures the graphs
            except RuntimeError as err:  # report it, and time the batched steps without graphs
                print(f"CUDA graphs failed ({type(err).__name__}: {err}); timing without them")
                nets.CUDA_GRAPHS = False
        for _ in range(args.repeats):
            batched.append(timed(batched_run, device))
            looped.append(timed(lambda: loop(task, model, penalty, grid, batch_size, args.steps, device), device))
            if device.type == "cpu":  # the loop with the fused Adam that the batched run uses there
                looped_fused.append(timed(lambda: loop(task, model, penalty, grid, batch_size, args.steps, device,
                                                       fused=True), device))
        tb, tl = statistics.median(batched), statistics.median(looped)
        row = {"case": title, "G": int(G), "steps": args.steps, "batched_s": tb, "loop_s": tl,
               "batched_config_steps_per_s": G * args.steps / tb, "loop_config_steps_per_s": G * args.steps / tl,
               "ratio": tl / tb, "ratio_range": [min(l / b for l, b in zip(looped, batched)),
                                                 max(l / b for l, b in zip(looped, batched))],
               "batched_gflops": flops / tb / 1e9, "loop_gflops": flops / tl / 1e9, "matmul_gflops": peak / 1e9}
        if looped_fused:
            row["loop_fused_config_steps_per_s"] = G * args.steps / statistics.median(looped_fused)
            row["loop_fused_ratio"] = statistics.median(looped_fused) / tb
        if eager:
            row["eager_config_steps_per_s"] = G * args.steps / statistics.median(eager)
            row["eager_ratio"] = tl / statistics.median(eager)
        rows.append(row)
        print(f"| {title} | {G} | {row['batched_config_steps_per_s']:.0f} | {row['loop_config_steps_per_s']:.0f} | "
              f"{row['ratio']:.2f}x ({row['ratio_range'][0]:.2f}–{row['ratio_range'][1]:.2f}) | "
              f"{row['batched_gflops']:.2f} ({100 * flops / tb / peak:.0f} %) | {row['loop_gflops']:.2f} |")
        if looped_fused:
            print(f"| · against the loop with torch.optim.Adam(fused=True) | {G} | | "
                  f"{row['loop_fused_config_steps_per_s']:.0f} | {row['loop_fused_ratio']:.2f}x | | |")
        if eager:
            print(f"| · the same, batched without CUDA graphs | {G} | {row['eager_config_steps_per_s']:.0f} | | "
                  f"{row['eager_ratio']:.2f}x | | |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"device": str(device), "name": name, "torch": torch.__version__, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
