r"""Batched training of small networks over (α, β) grids (paper §3, Appendix E).

Every configuration g of a grid trains its own copy of one model on

.. math:: L_g(\theta) = \ell(y_\theta(X_B), Y_B) + \beta_g\,\Omega(\theta),

with Adam at learning rate :math:`\alpha_g` (the authors' optimiser; the paper says gradient
descent). The copies are stacked along a leading configuration axis
(``torch.func.stack_module_state``); each model's forward pass is written for parameters with or
without that axis (its ``logits``), so the forward pass of all of them is one batched product per
layer (``torch.func.vmap`` of ``torch.func.functional_call`` for the Sobolev penalties, which need
every model's input Jacobian), and their gradients come from one backward pass of the summed
losses (the configurations share no parameter, so each receives its own gradient). The student
MLP's gradients have a closed form for the l1 and l2 penalties
(:meth:`TwoLayerMLP.loss_gradients`, :func:`penalty_gradient_`), which saves autograd's passes
over its large hidden layers. :func:`adam_step` is ``torch.optim.Adam``'s update with one
learning rate per configuration. Every configuration starts from the same initialisation (the
model passed in, built from a seed) and sees the same mini-batches in the same order, as in the
authors' code (seed 42 for the data loader), so configurations differ only by (α, β). Given
S tasks and S models (one per seed: :func:`train`), the run trains every (α, β) on each
(task, model) pair, S times as many configurations in the same batch: each configuration reads
its own task's examples (the stacked tasks, indexed by the configuration's ``k``), with the
shared batch order.

The loop is the one every kernel family shares (:func:`grokkit.kernels.run.run`): the logging
schedule, recorded curves, divergence (a configuration with a non-finite parameter or loss is
stopped and reported by index) and the progress bar. The iterate is the list of stacked
parameters followed by Adam's two moments.

Penalties :math:`\Omega` (:data:`PENALTIES`), over the weight matrices (every parameter with two
axes or more; LSTM biases are not penalised):

* ``l1``: :math:`\sum_W\sum_{ij}|W_{ij}|`;
* ``l2``: :math:`\sum_W\|W\|_F`, the un-squared Frobenius norm per matrix that the authors' code
  and figures use; ``l2_squared``: :math:`\sum_W\|W\|_F^2`, the paper's;
* ``nuclear``: :math:`\ell_* = \sum_W\|W\|_*`;
* ``sobolev``: :math:`\|J_\theta(X_B) - J^*(X_B)\|_F` over the whole (B, c, d) batch of input
  Jacobians, un-squared and un-averaged as in the code (Figure 50); ``sobolev_squared``:
  :math:`\frac1B\sum_i\|J_\theta(x_i) - J^*(x_i)\|_F^2`, the paper's eq. (136) with K = 1.

The losses are the code's: ``nn.MSELoss`` (mean over the N·c outputs, where the paper averages
over N) for regression and the cross-entropy for classification.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import os
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, jacrev, stack_module_state, vmap

from grokkit._checks import check_int, check_option, check_range, check_seed
from grokkit.cache import cached
from grokkit.kernels.run import MAX_STEPS, Family, check_memory, configurations, resolve_device, run
from grokkit.metrics import rank_trend

PENALTIES = ("l1", "l2", "l2_squared", "nuclear", "sobolev", "sobolev_squared")
CURVES = ("train_loss", "test_loss", "train_accuracy", "test_accuracy", "l0", "l1", "l2", "nuclear")
L0_THRESHOLD = 1e-4  # the code's l0: the number of weights with |w| > 1e-4
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


# --- models ------------------------------------------------------------------------------------

def _normal_(layer: nn.Linear, generator: torch.Generator) -> None:
    """The code's "normal" initialisation: :math:`W \\sim \\mathcal N(0, 1/\\text{out\\_features})`."""
    with torch.no_grad():
        layer.weight.normal_(0.0, 1.0 / math.sqrt(layer.out_features), generator=generator)


def _uniform_(tensor: torch.Tensor, bound: float, generator: torch.Generator) -> None:
    """PyTorch's default initialisation of ``nn.Linear`` and ``nn.LSTM``: :math:`\\mathcal U(-b, b)`."""
    with torch.no_grad():
        tensor.uniform_(-bound, bound, generator=generator)


class TwoLayerMLP(nn.Module):
    r""":math:`y_\theta(x) = B\,\mathrm{ReLU}(Ax)`, no biases (the student of §E.1 and the MNIST
    network of §E.4), with the code's "normal" initialisation :math:`A \sim \mathcal N(0, 1/h)`,
    :math:`B \sim \mathcal N(0, 1/c)`, both multiplied by ``init_scale`` (a large initialisation
    makes a network memorize before it generalizes: Liu et al., Omnigrok). Inputs (N, d) or
    (N, ...), flattened."""

    def __init__(self, d_in: int, width: int, d_out: int, *, init_scale: float = 1.0, seed: int = 0):
        super().__init__()
        d_in, width, d_out = (check_int(k, v, 1) for k, v in (("d_in", d_in), ("width", width), ("d_out", d_out)))
        init_scale = check_range("init_scale", init_scale, 0.0, closed="neither")
        gen = torch.Generator().manual_seed(check_seed("seed", seed))
        self.A = nn.Linear(d_in, width, bias=False)
        self.B = nn.Linear(width, d_out, bias=False)
        for layer in (self.A, self.B):
            _normal_(layer, gen)
            with torch.no_grad():
                layer.weight.mul_(init_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(dict(self.named_parameters()), x)

    @staticmethod
    def logits(params: dict[str, torch.Tensor], x: torch.Tensor, per_model: bool = False) -> torch.Tensor:
        """The outputs (N, c), or (G, N, c) for parameters stacked along a leading axis G; with
        ``per_model``, ``x`` (G, N, ...) holds each model's own inputs."""
        A, B = params["A.weight"], params["B.weight"]
        if A.dim() == 2:
            return torch.relu(x.flatten(1) @ A.T) @ B.T
        x = x.flatten(2) if per_model else x.flatten(1)
        return torch.bmm(B, TwoLayerMLP._hidden(A, x)).mT

    @staticmethod
    def _hidden(A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        r"""The hidden layers :math:`\mathrm{ReLU}(AX^\top)` (G, h, N) of stacked ``A`` (G, h, d), as one
        matrix product (G h × d)(d × N); for inputs (G, N, d), one per model, a batched product."""
        if x.dim() == 3:
            return torch.bmm(A, x.mT).relu_()
        G, h, d = A.shape
        return torch.mm(A.reshape(G * h, d), x.T).view(G, h, -1).relu_()

    @staticmethod
    @torch.no_grad()
    def loss_gradients(params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                       kind: str, per_model: bool = False) -> dict[str, torch.Tensor]:
        r"""The gradients of :math:`\sum_g \ell(y_{\theta_g}(X), Y)` (:func:`loss`) for parameters
        stacked along a leading axis G, in closed form: with :math:`H = \mathrm{ReLU}(AX^\top)` and
        :math:`\delta = \partial\ell/\partial y_\theta` (:func:`loss_gradient`),

        .. math:: \nabla_B = \delta H^\top, \qquad
                  \nabla_A = \big((B^\top\delta) \odot \mathbb 1[H > 0]\big) X.

        The hidden layers of all configurations are one matrix product (G h × N), and so is
        :math:`\nabla_A`; autograd's graph would add a few passes over (G, N, h) tensors. With
        ``per_model``, ``x`` (G, N, ...) and ``y`` hold each model's own examples."""
        A, B = params["A.weight"], params["B.weight"]
        G, h, d = A.shape
        x = x.flatten(2) if per_model else x.flatten(1)
        H = TwoLayerMLP._hidden(A, x)
        delta = loss_gradient(kind, torch.bmm(B, H).mT, y).mT  # (G, c, N)
        dH = torch.bmm(B.mT, delta)
        torch.ops.aten.threshold_backward.grad_input(dH, H, 0.0, grad_input=dH)  # ReLU's derivative, in place
        grad_A = torch.bmm(dH, x) if per_model else torch.mm(dH.view(G * h, -1), x).view(G, h, d)
        return {"A.weight": grad_A, "B.weight": torch.bmm(delta, H.mT)}


class MatrixProductMLP(nn.Module):
    r"""The authors' MLP for :math:`x_1 \circ x_2 \bmod p` (``neural_nets/mlp.py`` of their repository): two embeddings
    :math:`E_1, E_2 \in \mathbb R^{d\times p}` (PyTorch's default init), the product of the two
    embedded tokens read as :math:`k\times k` matrices (:math:`d = k^2`), flattened, then
    :math:`W_2\,\mathrm{ReLU}(W_1 h)` with :math:`W_1 \sim \mathcal N(0, 1/d)`,
    :math:`W_2 \sim \mathcal N(0, 1/p)`; no biases. Inputs are one-hot pairs (N, 2, p)."""

    def __init__(self, p: int, d: int = 64, *, seed: int = 0):
        super().__init__()
        p = check_int("p", p, 2)
        d = check_int("d", d, 1)
        k = math.isqrt(d)
        if k * k != d:
            raise ValueError(f"d must be a perfect square (the embeddings are multiplied as k x k matrices), got {d}")
        gen = torch.Generator().manual_seed(check_seed("seed", seed))
        self.k = k
        self.E1, self.E2 = nn.Linear(p, d, bias=False), nn.Linear(p, d, bias=False)
        self.W1, self.W2 = nn.Linear(d, d, bias=False), nn.Linear(d, p, bias=False)
        for E in (self.E1, self.E2):
            _uniform_(E.weight, 1.0 / math.sqrt(p), gen)
        _normal_(self.W1, gen)
        _normal_(self.W2, gen)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(dict(self.named_parameters()), x)

    @staticmethod
    def logits(params: dict[str, torch.Tensor], x: torch.Tensor, per_model: bool = False) -> torch.Tensor:
        """The logits (N, p), or (G, N, p) for parameters stacked along a leading axis G; with
        ``per_model``, ``x`` (G, N, 2, p) holds each model's own inputs."""
        E1, E2, W1, W2 = (params[k] for k in ("E1.weight", "E2.weight", "W1.weight", "W2.weight"))
        k = math.isqrt(E1.shape[-2])
        e1 = (x[..., 0, :] @ E1.mT).unflatten(-1, (k, k))
        e2 = (x[..., 1, :] @ E2.mT).unflatten(-1, (k, k))
        return torch.relu((e1 @ e2).flatten(-2) @ W1.mT) @ W2.mT


class LSTMClassifier(nn.Module):
    r"""An LSTM classifier of token sequences (Figures 54–56; the paper gives no code, so every
    choice is ours): an embedding :math:`E \in \mathbb R^{V\times e}` (:math:`\mathcal N(0, 1)`,
    PyTorch's default), one LSTM layer of ``hidden`` units (PyTorch's gate order i, f, g, o and its
    default :math:`\mathcal U(-1/\sqrt H, 1/\sqrt H)` initialisation, with biases), and a linear
    read-out of the last hidden state to ``n_classes`` logits, without bias. The cell is written
    out (a few tokens), for one model or a stack of them. Inputs are token indices (N, T)."""

    def __init__(self, vocabulary: int, n_classes: int, embedding: int = 64, hidden: int = 128, *, seed: int = 0):
        super().__init__()
        vocabulary, n_classes = check_int("vocabulary", vocabulary, 2), check_int("n_classes", n_classes, 2)
        embedding, hidden = check_int("embedding", embedding, 1), check_int("hidden", hidden, 1)
        gen = torch.Generator().manual_seed(check_seed("seed", seed))
        self.embed = nn.Parameter(torch.randn(vocabulary, embedding, generator=gen))
        bound = 1.0 / math.sqrt(hidden)
        self.W_ih = nn.Parameter(torch.empty(4 * hidden, embedding))
        self.W_hh = nn.Parameter(torch.empty(4 * hidden, hidden))
        self.bias = nn.Parameter(torch.empty(4 * hidden))
        for w in (self.W_ih, self.W_hh, self.bias):
            _uniform_(w, bound, gen)
        self.readout = nn.Linear(hidden, n_classes, bias=False)
        _uniform_(self.readout.weight, bound, gen)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.logits(dict(self.named_parameters()), tokens)

    @staticmethod
    def logits(params: dict[str, torch.Tensor], tokens: torch.Tensor, per_model: bool = False) -> torch.Tensor:
        """The logits (N, n_classes), or (G, N, n_classes) for parameters stacked along a leading
        axis G: the cell of :class:`torch.nn.LSTM`, h = c = 0 at the start. With ``per_model``,
        ``tokens`` (G, N, T) holds each model's own sequences."""
        E, W_ih, W_hh, bias, W_o = (params[k] for k in ("embed", "W_ih", "W_hh", "bias", "readout.weight"))
        H = W_hh.shape[-1]
        if per_model:  # each model's embedding of its own tokens
            x = E[torch.arange(E.shape[0], device=E.device)[:, None, None], tokens].flatten(-3, -2)
        else:
            x = E[..., tokens, :].flatten(-3, -2)  # (..., N T, e): every step's input term in one product
        inputs = (x @ W_ih.mT).unflatten(-2, tokens.shape[-2:]) + bias[..., None, None, :]  # (..., N, T, 4H)
        h = c = None
        for t in range(tokens.shape[-1]):
            gates = inputs[..., t, :] if h is None else inputs[..., t, :] + h @ W_hh.mT
            gate = torch.sigmoid(gates)  # i, f, o (the g block is unused)
            g = torch.tanh(gates[..., 2 * H:3 * H])
            c = gate[..., :H] * g if c is None else gate[..., H:2 * H] * c + gate[..., :H] * g
            h = gate[..., 3 * H:] * torch.tanh(c)
        return h @ W_o.mT


# --- penalties and losses ----------------------------------------------------------------------

def weights(params: dict[str, torch.Tensor], stacked: bool = False) -> list[torch.Tensor]:
    """The penalised parameters: every weight matrix (two axes, three when ``stacked`` along a
    leading configuration axis), in the model's order."""
    return [p for p in params.values() if p.dim() >= 2 + stacked]


def penalty(name: str, params: dict[str, torch.Tensor], jacobian: torch.Tensor | None = None,
            target: torch.Tensor | None = None, stacked: bool = False) -> torch.Tensor:
    r""":math:`\Omega(\theta)` of one model (module docstring), or (G,) of a stack of them
    (``stacked``: every parameter with a leading configuration axis); the Sobolev penalties compare
    the input Jacobian ``jacobian`` (B, c, d) of one model with the teacher's ``target``."""
    W = weights(params, stacked)
    if name == "l1":
        return sum(w.abs().sum((-2, -1)) for w in W)
    if name == "l2":
        return sum(torch.linalg.matrix_norm(w) for w in W)
    if name == "l2_squared":
        return sum(w.square().sum((-2, -1)) for w in W)
    if name == "nuclear":
        return sum(torch.linalg.matrix_norm(w, "nuc") for w in W)
    diff = jacobian - target
    if name == "sobolev":
        return torch.linalg.vector_norm(diff)
    return diff.square().sum() / diff.shape[0]  # sobolev_squared


def loss(kind: str, output: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The training criterion: ``nn.MSELoss`` (mean over every output) or the cross-entropy; of
    one model's outputs (B, c) or (B, n_classes), or (G,) of a stack's (G, B, ...), whose targets
    ``y`` are shared (B, ...) or each model's own (G, B, ...)."""
    if kind == "regression":
        return (output - y).square().flatten(output.dim() - 2).mean(-1)
    if output.dim() == 2:
        return nn.functional.cross_entropy(output, y)
    labels = y.flatten() if y.dim() == 2 else y.repeat(output.shape[0])
    ce = nn.functional.cross_entropy(output.flatten(0, 1), labels, reduction="none")
    return ce.view(output.shape[0], -1).mean(-1)


def loss_gradient(kind: str, output: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r""":math:`\partial\ell/\partial y_\theta` of :func:`loss` for a stack's outputs (G, B, ...):
    :math:`2(y_\theta - y)/(Bc)` for the mean squared error over the B·c outputs, and
    :math:`(\mathrm{softmax}(y_\theta) - e_y)/B` for the cross-entropy."""
    if kind == "regression":
        return (output - y).mul_(2.0 / output[0].numel())
    grad = torch.softmax(output, dim=-1)
    grad -= torch.eye(output.shape[-1], dtype=grad.dtype, device=grad.device)[y]  # e_y (no host sync on a GPU)
    return grad.div_(output.shape[1])


CLOSED_FORM = ("l1", "l2", "l2_squared")  # the penalties whose gradient penalty_gradient_ adds
# The largest condition number sigma_max/sigma_min of a weight matrix for which polar() reaches the
# SVD's accuracy; polar_iterations() counts the Newton–Schulz iterations it takes.
POLAR_CONDITION = 1e8
# Where the l* gradient is beta U V^T from polar() (no SVD, so the step is one CUDA graph), added to
# the loss's gradient; elsewhere autograd differentiates the nuclear norm through the SVD (on a CPU
# LAPACK's SVD of these small matrices costs less than the iterations).
POLAR_DEVICES = ("cuda",)


def polar_iterations(condition: float = POLAR_CONDITION, rank: int = 1) -> int:
    r"""The Newton–Schulz iterations :math:`x \mapsto \tfrac32x - \tfrac12x^3` that take every
    singular value of :math:`W/\|W\|_F`, at least :math:`1/(\kappa\sqrt r)` for a condition number
    :math:`\kappa` = ``condition`` and rank r, to 1 within 4 float64 epsilons (then 1 more):
    the small ones grow by 3/2 an iteration, then converge quadratically."""
    x, k = 1.0 / (condition * math.sqrt(rank)), 0
    while 1.0 - x > 4 * np.finfo(np.float64).eps:
        x, k = 1.5 * x - 0.5 * x ** 3, k + 1
    return k + 1


def polar(W: torch.Tensor, iterations: int | None = None) -> torch.Tensor:
    r"""The polar factor :math:`UV^\top` of every matrix of ``W`` (..., m, n), :math:`W = U\Sigma V^\top`
    its thin SVD: the gradient of the nuclear norm :math:`\|W\|_*` where W has full rank
    (:math:`\partial\|W\|_* = \{UV^\top + Z\}` with Z on the null spaces), without an SVD.

    Newton–Schulz iterations :math:`X \leftarrow \tfrac32X - \tfrac12XX^\top X` in float64 from
    :math:`X_0 = W/\|W\|_F`, which map every singular value :math:`x \mapsto \tfrac32x - \tfrac12x^3`
    and keep the singular vectors, converging to 1 from (0, 1]. A truncated iteration is not a
    subgradient (it shrinks the small singular values), so ``iterations`` defaults to
    :func:`polar_iterations` for the rank and :data:`POLAR_CONDITION`: matrices that well
    conditioned get :math:`UV^\top` as accurately as the SVD gives it (both lose about
    :math:`\varepsilon\kappa`; tests/test_persistent.py). A fixed count, so the step can be captured
    in a CUDA graph. Returns ``W``'s dtype."""
    m, n = W.shape[-2:]
    if iterations is None:
        iterations = polar_iterations(POLAR_CONDITION, min(m, n))
    X = W.to(torch.float64)
    X = X / torch.linalg.matrix_norm(X).clamp_min(torch.finfo(torch.float64).tiny)[..., None, None]
    for _ in range(iterations):  # X (3/2 I - 1/2 X^T X), or (3/2 I - 1/2 X X^T) X: the smaller Gram matrix
        X = (X @ (X.mT @ X) if m >= n else (X @ X.mT) @ X).mul_(-0.5).add_(X, alpha=1.5)
    return X.to(W.dtype)


def penalty_gradient_(name: str, w: torch.Tensor, grad: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    r"""Add :math:`\beta_g\nabla\Omega` of one stacked weight ``w`` (G, ...) to ``grad``, in
    place: :math:`\beta\,\mathrm{sign}(W)` for ``l1`` (autograd's subgradient, 0 at 0),
    :math:`\beta W/\|W\|_F` for ``l2`` (0 at W = 0), :math:`2\beta W` for ``l2_squared`` and
    :math:`\beta UV^\top` for ``nuclear`` (:func:`polar`)."""
    b = beta.reshape((-1,) + (1,) * (w.dim() - 1))
    if name == "nuclear":
        return grad.addcmul_(polar(w), b)
    if name == "l1":
        return grad.addcmul_(w.sign(), b)
    if name == "l2":
        norm = torch.linalg.vector_norm(w.flatten(1), dim=1).reshape(b.shape)
        return grad.addcmul_(w, b / norm.clamp_min(torch.finfo(w.dtype).tiny))
    return grad.addcmul_(w, 2 * b)  # l2_squared


# --- the batched step --------------------------------------------------------------------------

def adam_step(params: list[torch.Tensor], grads: list[torch.Tensor], m: list[torch.Tensor], v: list[torch.Tensor],
              t: int, lr: torch.Tensor) -> None:
    r"""``torch.optim.Adam``'s update (default betas and eps, no weight decay) of stacked
    parameters, in place, with one learning rate per configuration: ``lr`` (G,). ``t`` counts the
    updates, this one included (the bias corrections :math:`1-\beta_1^t`, :math:`1-\beta_2^t`).
    On the CPU each configuration's tensors take one pass of PyTorch's fused Adam kernel (the
    one behind ``torch.optim.Adam(fused=True)``, called directly: its Python wrapper costs 75 µs
    a call, the kernel on a teacher–student student about 65 µs), where the plain update makes
    eight; elsewhere :func:`_adam`."""
    b1, b2 = ADAM_BETAS
    if params[0].device.type != "cpu":
        _adam(params, grads, m, v, 1 - b1 ** t, math.sqrt(1 - b2 ** t), lr)
        return
    steps = [torch.tensor(float(t))] * len(params)  # read by the kernel, not advanced
    for g, rate in enumerate(lr.tolist()):
        torch._fused_adam_([p[g] for p in params], [q[g] for q in grads], [q[g] for q in m], [q[g] for q in v], [],
                           steps, lr=rate, beta1=b1, beta2=b2, weight_decay=0.0, eps=ADAM_EPS, amsgrad=False,
                           maximize=False)


def _adam(params, grads, m, v, bc1, bc2_sqrt, lr) -> None:
    """:func:`adam_step` with its bias corrections given, as numbers or as 0-d tensors (the
    CUDA graph of :class:`_Graphs` reads them from the device)."""
    b1, b2 = ADAM_BETAS
    for p, g, mk, vk in zip(params, grads, m, v):
        mk.lerp_(g, 1 - b1)
        vk.mul_(b2).addcmul_(g, g, value=1 - b2)
        step = (lr / bc1).reshape((-1,) + (1,) * (p.dim() - 1))
        p.addcdiv_(mk * step, vk.sqrt().div_(bc2_sqrt).add_(ADAM_EPS), value=-1.0)


class Batches:
    """The mini-batch order shared by every configuration: each epoch a seeded permutation of the
    N training examples (``torch.Generator``), cut into batches of ``batch_size`` (the last one
    shorter, as PyTorch's ``DataLoader`` with ``drop_last=False``); full batch when ``batch_size``
    is None or at least N (no shuffle). The indices live on ``device``: on a GPU, the
    permutations of the next ``ahead`` epochs are drawn at once (the same numbers in the same
    order) and copied in one transfer, so that a training step never waits for a copy from the
    host (about 65 000 indices at a time by default)."""

    def __init__(self, N: int, batch_size: int | None, seed: int, device="cpu", ahead: int | None = None):
        self.N, self.size = N, N if batch_size is None else min(batch_size, N)
        self.gen = torch.Generator().manual_seed(seed)
        self.device = torch.device(device)
        self.ahead = ahead if ahead is not None else 1 if self.device.type == "cpu" else max(1, 2**16 // N)
        self.queue: list[torch.Tensor] = []

    def next(self) -> torch.Tensor | None:
        """Indices of the next batch; None for the full batch in its order."""
        if self.size == self.N:
            return None
        if not self.queue:
            epochs = torch.stack([torch.randperm(self.N, generator=self.gen) for _ in range(self.ahead)])
            self.queue = [b for epoch in epochs.to(self.device) for b in epoch.split(self.size)]
            self.queue.reverse()  # pop() from the end: the next batch is last
        return self.queue.pop()

    def checkpoint_state(self) -> dict:
        """Where the order stands (the generator and the batches drawn ahead), for a checkpoint."""
        return {"generator": self.gen.get_state(), "queue": [b.cpu() for b in self.queue]}

    def restore_checkpoint(self, state: dict) -> None:
        """Continue the order from :meth:`checkpoint_state`."""
        self.gen.set_state(state["generator"])
        self.queue = [b.to(self.device) for b in state["queue"]]


@dataclass
class Setup:
    """What a run of one model needs besides its stacked parameters (``data`` of the loop)."""

    template: nn.Module  # the model on the meta device, called with stacked parameters
    names: list[str]
    kind: str
    penalty: str
    task: object  # grokkit.data.nets.Task on the run's device; its tensors stacked (S, ...) when k is given
    batches: Batches
    # Per configuration, the index of its task along the stacked tasks' leading axis (a tensor (G,)
    # on the run's device); None: one task for every configuration.
    k: torch.Tensor | None = None

    @property
    def batched(self) -> bool:
        """Whether the setup has a row per configuration (the stacked tasks' ``k``), which the
        loop subsets with :meth:`select` when configurations stop (:mod:`grokkit.kernels.run`)."""
        return self.k is not None

    def select(self, keep) -> Setup:
        """The setup of the configurations ``keep`` (a mask, indices or a slice of the rows)."""
        return self if self.k is None else dataclasses.replace(self, k=self.k[keep])

    def examples(self, which: str, idx: torch.Tensor | None = None) -> tuple:
        """The inputs, targets and teacher Jacobians (None without them) of the ``"train"`` or
        ``"test"`` set, its rows ``idx`` (all when None): shared (B, ...), or each configuration's
        own (G, B, ...) for stacked tasks."""
        task = self.task
        tensors = [getattr(task, f"{name}_{which}") for name in ("X", "y", "J")]
        if self.k is None:
            return tuple(t if t is None or idx is None else t[idx] for t in tensors)
        rows = self.k if idx is None else (self.k[:, None], idx[None, :])
        return tuple(None if t is None else t[rows] for t in tensors)

    def checkpoint_state(self) -> dict:
        """What a checkpoint of the loop keeps of the setup: the mini-batch order."""
        return {"batches": self.batches.checkpoint_state()}

    def restore_checkpoint(self, state: dict) -> None:
        self.batches.restore_checkpoint(state["batches"])

    def outputs(self, params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """The outputs (G, B, ...) of every configuration on one input batch ``x`` (shared, or each
        configuration's own for stacked tasks: :meth:`examples`): the model's ``logits`` take the
        stacked parameters as they are (one batched product per layer); a model without them runs
        through ``torch.func.vmap`` of its forward."""
        own = self.k is not None
        if hasattr(self.template, "logits"):
            return self.template.logits(dict(zip(self.names, params)), x, per_model=own)

        def forward(p, inputs):
            return functional_call(self.template, dict(zip(self.names, p)), (inputs,))
        return vmap(forward, in_dims=(0, 0 if own else None))(params, x)

    def objective(self, params: list[torch.Tensor], beta: torch.Tensor, idx: torch.Tensor | None) -> torch.Tensor:
        r"""The sum over configurations of :math:`L_g(\theta_g)` on the batch ``idx``."""
        x, y, J = self.examples("train", idx)
        if not self.penalty.startswith("sobolev"):
            named = dict(zip(self.names, params))
            return (loss(self.kind, self.outputs(params, x), y) + beta * penalty(self.penalty, named, stacked=True)).sum()

        def one(p, b, x, y, J):  # the input Jacobian of each model: torch.func over one configuration at a time
            named = dict(zip(self.names, p))
            out = functional_call(self.template, named, (x,))
            return loss(self.kind, out, y) + b * penalty(self.penalty, named, self._jacobian(named, x), J)
        shared = None if self.k is None else 0
        return vmap(one, in_dims=(0, 0, shared, shared, shared))(params, beta, x, y, J).sum()

    @property
    def closed_form(self) -> bool:
        """Whether :meth:`gradients` takes the closed form (else autograd)."""
        return hasattr(self.template, "loss_gradients") and self.penalty in CLOSED_FORM

    @property
    def polar(self) -> bool:
        """Whether :meth:`gradients` adds the ℓ* gradient from :func:`polar` (:data:`POLAR_DEVICES`)."""
        return self.penalty == "nuclear" and self.task.X_train.device.type in POLAR_DEVICES

    @property
    def graphed(self) -> bool:
        """Whether a CUDA step can be one graph (:data:`GRAPH_PENALTIES`; ℓ* only with :attr:`polar`)."""
        return self.penalty in GRAPH_PENALTIES and (self.penalty != "nuclear" or self.polar)

    def gradients(self, params: list[torch.Tensor], beta: torch.Tensor, idx: torch.Tensor | None) -> list[torch.Tensor]:
        r"""The gradients of :meth:`objective` for every stacked parameter: the loss's gradient
        (``loss_gradients`` where the model has it, autograd otherwise) plus the penalty's from
        :func:`penalty_gradient_` where the penalty is one of :data:`CLOSED_FORM`, or ℓ* on
        :data:`POLAR_DEVICES` (:math:`\beta UV^\top` from :func:`polar`); by autograd through the
        whole objective otherwise."""
        if not (self.closed_form or self.polar):
            leaves = [p.detach().requires_grad_() for p in params]
            return list(torch.autograd.grad(self.objective(leaves, beta, idx), leaves))
        x, y, _ = self.examples("train", idx)
        if hasattr(self.template, "loss_gradients"):
            grads = self.template.loss_gradients(dict(zip(self.names, params)), x, y, self.kind,
                                                 per_model=self.k is not None)
            grads = [grads[k] for k in self.names]
        else:
            leaves = [p.detach().requires_grad_() for p in params]
            grads = torch.autograd.grad(loss(self.kind, self.outputs(leaves, x), y).sum(), leaves)
        with torch.no_grad():
            return [penalty_gradient_(self.penalty, p, g, beta) if p.dim() >= 3 else g for p, g in zip(params, grads)]

    def _jacobian(self, named: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """The input Jacobian (B, c, d) of one model at every example of ``x`` (B, d)."""
        def f(xi):
            return functional_call(self.template, named, (xi[None],))[0]
        return vmap(jacrev(f))(x)


def _split(x: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """The iterate's parameters, first moments and second moments."""
    k = len(x) // 3
    return x[:k], x[k:2 * k], x[2 * k:]


def _update(setup: Setup, params, m, v, lr, beta, idx, bc1, bc2_sqrt) -> None:
    """One Adam update of every configuration on the batch ``idx``, in place (on a GPU)."""
    grads = setup.gradients(params, beta, idx)
    with torch.no_grad():
        _adam(params, grads, m, v, bc1, bc2_sqrt, lr)


CPU_CHUNK = 2**17  # on the CPU, the configurations of about this many parameters at a time (512 kB)


def _update_cpu(setup: Setup, params, m, v, lr, beta, idx, t: int) -> None:
    """One Adam update (the t-th) of every configuration on the batch ``idx``, in place, on the
    CPU. With closed-form gradients (:attr:`Setup.closed_form`), a chunk of configurations
    (:data:`CPU_CHUNK` parameters) at a time, so that the chunk's gradients and Adam's pass over
    them stay in the cache: the configurations are independent, so the numbers are those of one
    update of all. 18 teacher–student students (3.6 MB a tensor) ran 1191 config-steps/s in
    chunks of two, 980 all at once (``benchmarks/bench_nets.py``, the benchmarks page). Through
    autograd, whose cost per call is larger, all at once: chunks made the modular-addition MLP
    12 % slower."""
    size = max(1, CPU_CHUNK // sum(p[0].numel() for p in params)) if setup.closed_form else len(lr)
    for a in range(0, len(lr), size):
        rows = slice(a, a + size)
        chunk = [p[rows] for p in params]
        grads = setup.select(rows).gradients(chunk, beta[rows], idx)
        with torch.no_grad():
            adam_step(chunk, grads, [q[rows] for q in m], [q[rows] for q in v], t, lr[rows])


# On CUDA, replay each step from a CUDA graph where the penalty allows it; GROKKIT_CUDA_GRAPHS=0
# launches the steps one by one instead.
CUDA_GRAPHS = os.environ.get("GROKKIT_CUDA_GRAPHS", "1") != "0"
# The penalties whose step is graphed: l* too where its gradient comes from polar() (Setup.polar, not
# cuSOLVER's SVD, which waits for the host); the double backward of the Sobolev penalties runs eagerly.
GRAPH_PENALTIES = ("l1", "l2", "l2_squared", "nuclear")


class _Graphs:
    r"""The step as a CUDA graph: on a GPU these small networks are bound by the launch of many
    small kernels, not by arithmetic, and replaying a captured graph launches them at once. One
    graph per batch length (an epoch's last batch is shorter), captured on first use after two
    warm-up steps whose effect is undone; the parameters, moments, learning rates, batch indices
    and bias corrections are the graph's fixed tensors, updated in place."""

    AHEAD = 4096  # bias corrections sent to the device at a time

    def __init__(self, setup: Setup, params, m, v, lr, beta):
        self.setup, self.state, self.lr, self.beta = setup, (params, m, v), lr, beta
        self.bias = torch.ones(2, dtype=params[0].dtype, device=params[0].device)
        self.table, self.first = self.bias[None], 0  # the bias corrections of steps first, first + 1, ...
        self.graphs: dict = {}

    def matches(self, params) -> bool:
        return params[0] is self.state[0][0]

    def step(self, idx: torch.Tensor | None, t: int) -> None:
        """Update t (from 1): the indices ``idx`` are on the device already (:class:`Batches`), and
        Adam's bias corrections come from a table sent ahead, so that no step waits for the host."""
        key = None if idx is None else idx.numel()
        if key not in self.graphs:
            self.graphs[key] = self._capture(key)
        graph, static_idx = self.graphs[key]
        if idx is not None:
            static_idx.copy_(idx)
        if not 0 <= t - self.first < len(self.table):
            b1, b2 = ADAM_BETAS
            rows = [[1 - b1 ** k, math.sqrt(1 - b2 ** k)] for k in range(t, t + self.AHEAD)]
            self.table, self.first = torch.tensor(rows, dtype=self.bias.dtype).to(self.bias.device), t
        self.bias.copy_(self.table[t - self.first])
        graph.replay()

    def _capture(self, length):
        params, m, v = self.state
        device = params[0].device
        static_idx = None if length is None else torch.zeros(length, dtype=torch.long, device=device)
        run = (self.setup, params, m, v, self.lr, self.beta, static_idx, self.bias[0], self.bias[1])
        saved = [t.clone() for t in params + m + v]
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                _update(*run)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _update(*run)
        for t, value in zip(params + m + v, saved):
            t.copy_(value)
        return graph, static_idx


def _step_function(setup: Setup):
    """The loop's step: one Adam update of every configuration on the next mini-batch, in place
    (the loop keeps no earlier iterate of a run without cycle detection, stop_periodic=False);
    from a CUDA graph on a GPU (:class:`_Graphs`, :data:`CUDA_GRAPHS`)."""
    count = {"t": 0}
    graphs: list[_Graphs] = []

    def step(x, setup_, alpha, beta, beta2):
        count["t"] += 1
        b1, b2 = ADAM_BETAS
        bc1, bc2_sqrt = 1 - b1 ** count["t"], math.sqrt(1 - b2 ** count["t"])
        params, m, v = _split(x)
        idx = setup_.batches.next()
        lr, beta = alpha.flatten().to(params[0].dtype), beta.flatten().to(params[0].dtype)
        if params[0].device.type == "cuda" and CUDA_GRAPHS and setup_.graphed:
            if not graphs or not graphs[0].matches(params):  # a new run, or configurations stopped
                graphs[:] = [_Graphs(setup_, params, m, v, lr, beta)]
            graphs[0].step(idx, count["t"])
        elif params[0].device.type == "cpu":
            _update_cpu(setup_, params, m, v, lr, beta, idx, count["t"])
        else:
            _update(setup_, params, m, v, lr, beta, idx, bc1, bc2_sqrt)
        return params + m + v
    # A checkpoint keeps the update count, which Adam's bias corrections depend on.
    step.checkpoint_state = lambda: dict(count)
    step.restore_checkpoint = count.update
    return step


@torch.no_grad()
def _evaluate(x, data: dict, col: dict) -> torch.Tensor:
    """The :data:`CURVES` (8, g), float64: unregularised train and test losses and accuracies
    (NaN for regression) on the whole sets, and the weights' l0 (|w| > 1e-4), l1 and l2 norms
    (all weight matrices concatenated) and l* (sum of per-matrix nuclear norms)."""
    setup: Setup = data["setup"]
    params, _, _ = _split(x)
    rows = []
    for which in ("train", "test"):
        X, y, _ = setup.examples(which)
        out = setup.outputs(params, X)
        if setup.kind == "regression":
            rows.append((loss(setup.kind, out, y), torch.full_like(out[:, 0, 0], math.nan)))
        else:
            rows.append((loss(setup.kind, out, y), (out.argmax(-1) == y).float().mean(dim=1)))
    W = weights(dict(zip(setup.names, params)), stacked=True)
    flat = torch.cat([w.flatten(1) for w in W], dim=1)
    # The singular values on the CPU: cuSOLVER's batched SVD of these small matrices took about
    # 40 ms a call on an H200, more than a hundred graphed training steps.
    sigma = [torch.linalg.svdvals(torch.nan_to_num(w).cpu()) for w in W]
    nuclear = sum(s.sum(-1) for s in sigma).to(flat.device)
    if setup.polar and any(bool((s[..., 0] > POLAR_CONDITION * s[..., -1]).any()) for s in sigma):
        warnings.warn(f"nuclear penalty: a weight matrix has a condition number above POLAR_CONDITION = "
                      f"{POLAR_CONDITION:g}, where polar() does not reach U V^T for its smallest singular "
                      "values (their l* gradient is shrunk)", RuntimeWarning, stacklevel=2)
    values = [rows[0][0], rows[1][0], rows[0][1], rows[1][1], (flat.abs() > L0_THRESHOLD).sum(1),
              flat.abs().sum(1), torch.linalg.vector_norm(flat, dim=1), nuclear]
    return torch.stack([v.to(torch.float64) for v in values]), []


@dataclass
class NetTrajectory:
    r"""Recorded training of G configurations (numpy). ``steps[j]`` counts the Adam updates done at
    record j (0: the initialisation). Curves (G, T): ``train_loss`` and ``test_loss`` (the
    unregularised criterion), ``train_accuracy`` and ``test_accuracy`` (NaN for regression), and the
    weights' ``l0``, ``l1``, ``l2`` (global) and ``nuclear`` (:math:`\ell_*`) norms.
    ``params_final`` (G, P) holds the final weights, flattened in the model's order;
    ``diverged[g]`` says that configuration g was stopped at its first record with a non-finite
    parameter or loss (its later records are NaN)."""

    method: str
    steps: np.ndarray
    config: dict[str, np.ndarray]
    train_loss: np.ndarray
    test_loss: np.ndarray
    train_accuracy: np.ndarray
    test_accuracy: np.ndarray
    l0: np.ndarray
    l1: np.ndarray
    l2: np.ndarray
    nuclear: np.ndarray
    params_final: np.ndarray
    diverged: np.ndarray
    stopped_at: np.ndarray
    device: str
    seconds: float
    backend: str = "torch"
    step_seconds: float = math.nan  # of seconds, those spent in the steps (the rest: records, set-up)

    def __len__(self) -> int:
        return self.params_final.shape[0]

    @property
    def alpha_beta(self) -> np.ndarray:
        r""":math:`\alpha\beta` per configuration."""
        return self.config["alpha"] * self.config["beta"]


def _result(*, curves, iterates, final, traces, **fields) -> NetTrajectory:
    return NetTrajectory(**fields, **curves, params_final=final)


NETS = Family(penalty="beta", curves=CURVES, finite=("train_loss", "test_loss"), operands=("setup",),
              target="target", evaluate=_evaluate, result=_result,
              view=lambda x: torch.cat([p.flatten(1) for p in _split(x)[0]], dim=1).to(torch.float64))


def _stack(tasks: list, models: list) -> tuple:
    """S tasks and S models (one of either may be given once, for every seed) checked as one
    problem, and the task whose tensors are the S tasks' stacked along a leading axis (the one
    task itself for S = 1)."""
    S = max(len(tasks), len(models))
    if not tasks or not models or {len(tasks), len(models)} - {1, S}:
        raise ValueError(f"task and model must be one each, or lists of one length S (one per seed), got "
                         f"{len(tasks)} task(s) and {len(models)} model(s)")
    tasks, models = tasks * (S // len(tasks)), models * (S // len(models))
    for task in tasks:
        if getattr(task, "kind", None) not in ("regression", "classification"):
            raise ValueError(f"task must be a grokkit.data.nets.Task, got {type(task).__name__}")
    for model in models:
        if not isinstance(model, nn.Module):
            raise ValueError(f"model must be a torch.nn.Module (TwoLayerMLP, MatrixProductMLP, LSTMClassifier), "
                             f"got {type(model).__name__}")
    first, shape = tasks[0], models[0]
    fields = [f.name for f in dataclasses.fields(first) if isinstance(getattr(first, f.name), torch.Tensor)]
    for s, task in enumerate(tasks[1:], 1):
        same = (task.kind == first.kind and task.n_classes == first.n_classes
                and [f for f in fields if getattr(task, f) is not None] == fields
                and all(getattr(task, f).shape == getattr(first, f).shape for f in fields))
        if not same:
            raise ValueError(f"the tasks of one run must have one kind and shape: task {s} ({task.name!r}) differs "
                             f"from task 0 ({first.name!r})")
    for s, model in enumerate(models[1:], 1):
        if type(model) is not type(shape) or [(k, v.shape) for k, v in model.named_parameters()] != \
                [(k, v.shape) for k, v in shape.named_parameters()]:
            raise ValueError(f"the models of one run must have one architecture: model {s} "
                             f"({type(model).__name__}) differs from model 0 ({type(shape).__name__})")
    for task, model in zip(tasks, models):
        _check_fits(model, task)
    if S == 1:
        return tasks, models, first
    stacked = {f: torch.stack([getattr(task, f) for task in tasks]) for f in fields}
    return tasks, models, dataclasses.replace(first, **stacked, name=first.name,
                                              note=" | ".join(task.note for task in tasks))


def _check_fits(model: nn.Module, task) -> None:
    """Refuse, before any compute, a ``model`` whose inputs or outputs do not match ``task``: one
    forward pass on two training inputs, on the CPU, and its output width against the targets
    (regression) or the classes (classification)."""
    x = task.X_train[:2]
    try:
        with torch.no_grad():
            out = copy.deepcopy(model).cpu()(x.cpu())
    except (RuntimeError, IndexError, ValueError, TypeError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"model {type(model).__name__} does not fit task {task.name!r}: its forward pass on "
                         f"inputs of shape {tuple(x.shape[1:])} ({x.dtype}) failed ({reason})") from None
    want = task.n_classes if task.kind == "classification" else int(task.y_train.shape[-1])
    if out.shape[-1] != want:
        what = "classes" if task.kind == "classification" else "target columns"
        raise ValueError(f"model {type(model).__name__} does not fit task {task.name!r}: it has {out.shape[-1]} "
                         f"outputs, the task has {want} {what}")



def delay_by_seed(alpha_beta, t1, t2, budget: int, seeds: int = 1, norm_t1=None, norm_t2=None) -> dict[str, np.ndarray]:
    r"""The grokking summary of a grid, one number per seed (the claims of Figures 3 and 47–57).

    ``t1``, ``t2`` (S·G,) are the memorization and generalization steps of a run of ``seeds`` = S
    seeds in one batch, seed-major (:func:`train`), NaN where the run never reached its
    threshold within ``budget`` steps; ``alpha_beta`` (S·G,) or (G,) the product αβ of each
    configuration; ``norm_t1``, ``norm_t2`` (S·G,) a norm read at t1 and at t2 (optional).
    Returns (S,) arrays:

    * ``t2_over_t1``: the median of t2/t1 over the configurations that memorized and generalized
      (NaN where none did);
    * ``spearman``: Spearman's rank correlation of αβ with t2 over the G configurations, one that
      never generalized counting as later than every finite t2 (t2 = ``budget`` + 1); NaN where
      t2 or αβ is the same throughout (no order to measure);
    * ``delay_spearman``: Spearman's rank correlation of αβ with t2/t1 over the configurations
      that memorized and generalized (NaN where fewer than four did, or where the delays or
      their αβ are all equal);
    * ``norm_t2_over_t1`` (with the norms): the median of norm(t2)/norm(t1) over the same
      configurations as ``t2_over_t1``;
    * ``memorized``, ``generalized``: the configurations that reached t1, t2.
    """
    T1, T2 = (np.asarray(t, dtype=float).reshape(seeds, -1) for t in (t1, t2))
    ab = np.asarray(alpha_beta, dtype=float).reshape(-1)
    if ab.size not in (T1.shape[1], T1.size):
        raise ValueError(f"alpha_beta must have {T1.shape[1]} or {T1.size} values, got {ab.size}")
    ab = np.broadcast_to(ab.reshape(-1, T1.shape[1]), T1.shape)
    both = np.isfinite(T1) & np.isfinite(T2)
    later = np.where(np.isnan(T2), budget + 1.0, T2)

    def median(values):
        return np.array([np.median(v[m]) if m.any() else np.nan for v, m in zip(values, both)])

    def spearman(x, row):
        if np.ptp(row) == 0 or np.ptp(x) == 0:
            return np.nan
        return rank_trend(x, row[None])
    out = {"t2_over_t1": median(T2 / T1),
           "spearman": np.array([spearman(x, row) for x, row in zip(ab, later)]),
           "delay_spearman": np.array([spearman(x[m], (t2_ / t1_)[m]) if m.sum() >= 4 else np.nan
                                       for x, t1_, t2_, m in zip(ab, T1, T2, both)]),
           "memorized": np.isfinite(T1).sum(1), "generalized": np.isfinite(T2).sum(1)}
    if norm_t1 is not None and norm_t2 is not None:
        N1, N2 = (np.asarray(n, dtype=float).reshape(seeds, -1) for n in (norm_t1, norm_t2))
        with np.errstate(divide="ignore", invalid="ignore"):
            out["norm_t2_over_t1"] = median(N2 / N1)
    return out

@cached
def train(task, model: nn.Module, penalty: str, *, alpha, beta, steps: int, batch_size: int | None = None,
          seed: int = 42, dense: int = 100, per_decade: int = 100, device="auto",
          progress: bool | None = None) -> NetTrajectory:
    r"""Train a copy of ``model`` per configuration of the (α, β) grid on ``task`` (a
    :class:`grokkit.data.nets.Task`) with Adam for ``steps`` updates, batched (module docstring).

    ``alpha`` (learning rates, > 0) and ``beta`` (penalty coefficients, ≥ 0) are scalars or (G,)
    grids (:func:`grokkit.kernels.grid`); ``penalty`` is one of :data:`PENALTIES` (the Sobolev ones
    need the task's teacher Jacobians). ``batch_size`` None trains on the full batch; otherwise
    the mini-batches follow one seeded order (``seed``) shared by every configuration. Curves are
    recorded on :func:`grokkit.kernels.log_schedule` (``dense``, ``per_decade``); ``device``
    ``"auto"`` trains on CUDA when there is one. Every argument is checked before any compute.
    The result is cached (:mod:`grokkit.cache`): pages that share a run train it once.

    Seeds in one batch: ``task`` and ``model`` may be lists of one length S (one per seed, all of
    one shape and architecture; either may be a single one, shared by every seed). The run then
    has S·G configurations, seed-major: configuration ``s * G + j`` trains ``model[s]`` on
    ``task[s]`` with ``(alpha[j], beta[j])``, and ``config["k"]`` holds s (0 for a single task
    and model). Each configuration's numbers are those of a run of its task and model alone, up
    to float32 rounding; every seed sees the same mini-batch order (``seed``).
    """
    steps = check_int("steps", steps, 1, MAX_STEPS)
    check_int("dense", dense, 0)
    check_int("per_decade", per_decade, 1)
    check_option("penalty", penalty, PENALTIES)
    seed = check_seed("seed", seed)
    tasks, models, task = _stack(list(task) if isinstance(task, (list, tuple)) else [task],
                                 list(model) if isinstance(model, (list, tuple)) else [model])
    S, model, kind = len(tasks), models[0], task.kind
    N = int(tasks[0].X_train.shape[0])
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, 1)
    if penalty.startswith("sobolev") and task.J_train is None:
        raise ValueError(f"penalty {penalty!r} needs the teacher's Jacobians: task {task.name!r} has none "
                         "(grokkit.data.nets.teacher_student provides them)")
    config = configurations(alpha=alpha, beta=beta)
    G0 = config["alpha"].size
    config = {name: np.tile(values, S) for name, values in config.items()}
    config["beta2"] = np.zeros_like(config["alpha"])
    config["k"] = np.repeat(np.arange(S), G0)
    device = resolve_device(device)
    G = config["alpha"].size
    # A copy of the parameters per configuration, with Adam's two moments, the gradients and the
    # forward pass's activations (a few copies more).
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    check_memory(G, 8 * weights, device, f"{type(model).__name__}/{penalty}")
    params, _ = stack_module_state([models[s] for s in config["k"]])
    names = list(params)
    params = [params[k].detach().to(device) for k in names]
    setup = Setup(template=copy.deepcopy(model).to("meta"), names=names, kind=kind, penalty=penalty,
                  task=task.to(device), batches=Batches(N, batch_size, seed, device),
                  k=None if S == 1 else torch.as_tensor(config["k"], device=device))
    x0 = params + [torch.zeros_like(p) for p in params] + [torch.zeros_like(p) for p in params]
    method = f"{type(model).__name__}/{penalty}"
    # work=0: one CPU thread. The operations of these small networks are too short for intra-op
    # threads to pay, and the threads spin when the CPU is shared: two threads ran 4.5x slower than
    # one on the 2-core development machine with another process running.
    return run(NETS, method, _step_function(setup), {"setup": setup}, config, x0, steps,
               work=0, dense=dense, per_decade=per_decade, stop_periodic=False, progress=progress)


def control(task, model: nn.Module, *, alpha, steps: int, **options) -> NetTrajectory:
    r"""The control of a grid: :func:`train` without the penalty (β = 0) at each learning rate
    ``alpha``, the same ``task``, ``model``, ``steps`` and ``options`` (``batch_size``, ``dense``,
    ``per_decade``, ``device``). A late generalization is the penalty's only if its control does
    not generalize (the β = 0 runs of Figures 3 and 47–57). With β = 0 the penalty is immaterial:
    it is trained as ``"l2"``, so that pages of one setting share one cached run."""
    return train(task, model, "l2", alpha=alpha, beta=0.0, steps=steps, **options)
