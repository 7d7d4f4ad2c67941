"""Benchmark: the persistent GPU kernels (grokkit.kernels.persistent) against the PyTorch steps on
the same GPU, side by side in one run, and the ℓ* network step with polar() against the SVD.

Sparse: the Figure 1 problem (n = 100, N = 30, float64) at 36, 144 and 576 configurations (the
6 x 6 grid tiled), the three methods, stacked problems (Figures 8-10: N from 10 to 100, padded)
and the deep diagonal network; each row times ``advance`` of the kernel's steps between
``torch.cuda.synchronize()`` calls after a warm-up, against the PyTorch step function in a loop.
Matrix completion: the Figure 5/42 problem (10 x 10, rank 2, 80 observed entries) on its 6 x 6 grid
of α and β* (36 configurations) and tiled to 144, the three methods, a Jacobi SVD per step.
Networks: the modular-addition MLP of Figure 53 (p = 97, d = 64, batch 2048, 18 configurations)
with ℓ*, ``nets.train`` with the gradient from polar() in a CUDA graph, against autograd through
cuSOLVER's SVD. Prints Markdown tables, then projections of paper presets from the rates.

    python benchmarks/bench_persistent.py [--steps 20000] [--torch-steps 2000]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

import grokkit as gk
from grokkit.kernels import matrix as mk
from grokkit.kernels import nets, persistent, sparse
from grokkit.kernels.run import configurations

ALPHA = [0.005, 0.01, 0.0275, 0.055, 0.0825, 0.1]
BETA1 = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _grid(tiles: int) -> dict:
    g = gk.kernels.grid(alpha=ALPHA, beta1=BETA1)
    return {k: np.tile(v, tiles) for k, v in g.items()}


def _timed(advance, steps: int) -> float:
    advance(min(steps, 100))  # warm-up: compilation, first launch
    _sync()
    start = time.perf_counter()
    advance(steps)
    _sync()
    return (time.perf_counter() - start) / steps


def sparse_rates(X, y, method: str, config: dict, steps: int, torch_steps: int, P=None, warps=None):
    """µs per step of the persistent kernel and of the PyTorch steps for G = len(config["alpha"])."""
    G = config["alpha"].size
    b0 = torch.full((G, X.shape[-1]), 1e-6, dtype=torch.float64, device=X.device)
    mine = persistent.SparseSteps(method, X, y, config["alpha"], config["beta1"], np.zeros(G), b0, P)
    if warps:
        mine.warps = warps
    t_mine = _timed(mine.advance, steps)
    col = {k: torch.as_tensor(config[k], device=X.device)[:, None] for k in ("alpha", "beta1")}
    step = {"subgradient": sparse.subgradient_step, "ista": sparse.ista_step}.get(method)
    state = {"b": b0.clone()}

    def advance(k):
        for _ in range(k):
            if step is None:
                state["b"] = sparse.projected_subgradient_step(state["b"], X, y, col["alpha"], col["beta1"], None, P)
            else:
                state["b"] = step(state["b"], X, y, col["alpha"], col["beta1"], None)
    return t_mine, _timed(advance, torch_steps) if torch_steps else float("nan")


def deep_rates(X, y, G: int, depth: int, steps: int, torch_steps: int):
    config = configurations(alpha=np.full(G, 0.01), beta1=np.full(G, 1e-4), beta2=np.zeros(G))
    B0 = torch.full((G, depth, X.shape[-1]), 0.1, dtype=torch.float64, device=X.device)
    mine = persistent.DeepSteps(X, y, config["alpha"], config["beta1"], config["beta2"], np.full(G, depth), B0)
    t_mine = _timed(mine.advance, steps)
    col = {k: torch.as_tensor(config[k], device=X.device)[:, None] for k in ("alpha", "beta1")}
    active = torch.ones(G, depth, 1, dtype=torch.float64, device=X.device)
    state = {"B": B0.clone()}

    def advance(k):
        for _ in range(k):
            state["B"] = sparse.deep_step(state["B"], X, y, col["alpha"], col["beta1"], None, active)
    return t_mine, _timed(advance, torch_steps)


FIG5_ALPHA = [0.0825, 0.1, 0.75, 0.825, 1.0, 1.5]
FIG5_BETA_STAR = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]


def matrix_rates(method: str, tiles: int, steps: int, torch_steps: int, device, first=None):
    """µs per step of the persistent matrix kernel and of the PyTorch steps on the Figure 5/42 grid
    (its ``first`` configurations only, if given: the interpreter's smoke run)."""
    p = gk.data.matrix.problem(10, 10, 2, 80, seed=0)
    g = gk.kernels.grid(alpha=FIG5_ALPHA, beta_star=FIG5_BETA_STAR)
    config = {k: np.tile(v, tiles)[:first] for k, v in g.items()}
    G = config["alpha"].size
    op = mk.Measurements("completion", (10, 10), mask=torch.as_tensor(p.mask, device=device))
    y = torch.as_tensor(p.y, device=device)
    A0 = 1e-6 * torch.randn(G, 10, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).to(device)
    mine = persistent.MatrixSteps(method, op, y, config["alpha"], config["beta_star"], np.zeros(G), A0)
    t_mine = _timed(mine.advance, steps)
    col = {k: torch.as_tensor(config[k], device=device)[:, None, None] for k in ("alpha", "beta_star")}
    step = {"subgradient": mk.subgradient_step, "proximal": mk.proximal_step,
            "projected_subgradient": mk.projected_subgradient_step}[method]
    state = {"A": A0.clone()}

    def advance(k):
        for _ in range(k):
            state["A"] = step(state["A"], op, y, col["alpha"], col["beta_star"], None)
    return t_mine, _timed(advance, torch_steps) if torch_steps else float("nan")


def nuclear_rates(steps: int, device: str):
    """Seconds per step of Figure 53's ℓ* training: the gradient from polar() (graphed) against the SVD."""
    task = gk.data.nets.modular_addition(97, 0.4, seed=0)
    out = {}
    for label, devices in (("polar", ("cpu", "cuda")), ("svd", ())):
        nets.POLAR_DEVICES = devices
        kw = dict(alpha=np.repeat([1e-3, 1e-2, 1e-1], 6), beta=np.tile([5e-8, 1e-7, 1e-6, 1e-5, 5e-5, 1e-4], 3),
                  batch_size=2048, seed=0, device=device, progress=False, dense=0, per_decade=1)
        nets.train(task, nets.MatrixProductMLP(97, 64, seed=0), "nuclear", steps=min(steps, 20), **kw)  # warm-up
        _sync()
        start = time.perf_counter()
        traj = nets.train(task, nets.MatrixProductMLP(97, 64, seed=0), "nuclear", steps=steps, **kw)
        _sync()
        out[label] = ((time.perf_counter() - start) / steps, traj)
    nets.POLAR_DEVICES = ("cuda",)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--torch-steps", type=int, default=2000)
    parser.add_argument("--net-steps", type=int, default=300)
    parser.add_argument("--smoke", action="store_true",
                        help="without a GPU: run every row for a few steps in Triton's interpreter (no timing value)")
    args = parser.parse_args()
    if args.smoke:
        os.environ.update(GROKKIT_PERSISTENT="interpret", TRITON_INTERPRET="1")
        args.steps, args.torch_steps, args.net_steps = 4, 4, 3
    elif not torch.cuda.is_available():
        parser.error("bench_persistent.py needs a CUDA device (or --smoke)")
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    name = torch.cuda.get_device_name(0) if dev.type == "cuda" else "CPU (Triton's interpreter, --smoke)"
    print(f"device: {name}, torch {torch.__version__}")
    problem = gk.data.sparse.problem(n=100, s=5, N=30, variance="1/N", seed=0)
    X, y = torch.as_tensor(problem.X, device=dev), torch.as_tensor(problem.y, device=dev)
    P = torch.linalg.pinv(X)
    rows = []
    for tiles in (1, 4, 16):
        config = _grid(tiles)
        mine, ref = sparse_rates(X, y, "subgradient", config, args.steps, args.torch_steps)
        rows.append((f"subgradient, Figure 1 problem, G = {36 * tiles}", 36 * tiles, mine, ref))
    for warps in (1, 2, 4, 8):
        mine, ref = sparse_rates(X, y, "subgradient", _grid(1), args.steps, 0, warps=warps)
        rows.append((f"subgradient, G = 36, {warps} warps a program", 36, mine, ref))
    for method in ("ista", "projected_subgradient"):
        mine, ref = sparse_rates(X, y, method, _grid(1), args.steps, args.torch_steps, P=P)
        rows.append((f"{method}, G = 36", 36, mine, ref))
    stacks = []
    for N in range(10, 101, 10):
        Xn = gk.data.sparse.problem(n=100, s=5, N=N, variance="1/N", seed=N).X
        stacks.append(np.vstack([Xn, np.zeros((100 - N, 100))]))
    Xs = torch.as_tensor(np.stack(stacks * 4), device=dev)
    ys = Xs @ torch.ones(100, dtype=torch.float64, device=dev)
    config = configurations(alpha=np.full(40, 0.01), beta1=np.full(40, 1e-4))
    mine, ref = sparse_rates(Xs, ys, "subgradient", config, args.steps // 4, args.torch_steps)
    rows.append(("subgradient, stacked N = 10..100 (n = 100, not resident), G = 40", 40, mine, ref))
    for depth in (2, 4):
        mine, ref = deep_rates(X, y, 40, depth, args.steps, args.torch_steps)
        rows.append((f"deep diagonal, L = {depth}, G = 40", 40, mine, ref))
    for method, tiles in (("subgradient", 1), ("subgradient", 4), ("proximal", 1), ("projected_subgradient", 1)):
        G = 2 if args.smoke else 36 * tiles  # the interpreter takes seconds for one 10 x 10 SVD
        mine, ref = matrix_rates(method, tiles, max(args.steps // 10, 1), max(args.torch_steps // 10, 1), dev,
                                 first=G)
        rows.append((f"matrix {method}, Figure 5/42 problem, G = {G}", G, mine, ref))
    print("\n| run | persistent µs/step | PyTorch µs/step | ratio | persistent µs/config-step |")
    print("| --- | --- | --- | --- | --- |")
    for label, G, mine, ref in rows:
        print(f"| {label} | {mine * 1e6:.2f} | {ref * 1e6:.1f} | {ref / mine:.1f} | {mine * 1e6 / G:.4f} |")
    nuclear = nuclear_rates(args.net_steps, dev.type)
    (tp, traj_p), (ts, traj_s) = nuclear["polar"], nuclear["svd"]
    print("\n| Figure 53 (18 configurations, batch 2048) | ms/step |")
    print("| --- | --- |")
    print(f"| ℓ* gradient from polar(), CUDA graph | {tp * 1e3:.2f} |")
    print(f"| ℓ* gradient by autograd through the SVD | {ts * 1e3:.2f} |")
    print(f"final train loss, polar vs SVD (max abs difference over configurations): "
          f"{np.nanmax(np.abs(traj_p.train_loss[:, -1] - traj_s.train_loss[:, -1])):.3g}")
    fig1 = rows[0][2] * 1e8
    fig5 = next(mine for label, _, mine, _ in rows if label.startswith("matrix subgradient")) * 1e7
    print(f"\nprojection: Figure 1 paper preset (36 x 1e8 steps): {fig1 / 60:.1f} min of steps; "
          f"Figure 5/42 (36 x 1e7 steps): {fig5 / 60:.1f} min; "
          f"Figure 53 paper preset (20 002 steps): {tp * 20002 / 60:.1f} min")


if __name__ == "__main__":
    main()
