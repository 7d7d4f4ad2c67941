r"""The Triton source of :mod:`grokkit.kernels.persistent`: one program per configuration, every
step of a chunk in one launch. Imported on first use (:func:`grokkit.kernels.persistent.kernels`),
after ``TRITON_INTERPRET`` is settled: Triton reads it when it decorates these functions.

Only the core of the language (loads, stores, ``tl.sum``, ``tl.reduce``, ``tl.where``,
``tl.static_range``), so that the GPU machines' older Triton builds them too."""
import triton
import triton.language as tl


@triton.jit
def sign(v):
    """:math:`h(v) = \\operatorname{sign}(v)`, with sign(0) = 0."""
    return tl.where(v > 0, 1.0, tl.where(v < 0, -1.0, 0.0)).to(tl.float64)


@triton.jit
def times(a, b):
    """The combine function of a product reduction."""
    return a * b


@triton.jit
def sparse_kernel(X, M, Y, alpha, beta1, beta2, B, B1, B2, steps, sx, sm, sy,
                  N: tl.constexpr, n: tl.constexpr, BN: tl.constexpr, BNn: tl.constexpr,
                  METHOD: tl.constexpr, KEEP: tl.constexpr):
    """``steps`` updates of configuration ``program_id``; METHOD 0 subgradient (eq. 22), 1 ISTA
    (eq. 86), 2 projected (§C.7, M = P^T); X, M (N, n) and Y (N,) at strides sx, sm, sy."""
    g = tl.program_id(0).to(tl.int64)
    i = tl.arange(0, BN)
    j = tl.arange(0, BNn)
    inside = (i[:, None] < N) & (j[None, :] < n)
    at = i[:, None] * n + j[None, :]
    x = tl.load(X + g * sx + at, mask=inside, other=0.0)
    if METHOD == 2:
        m = tl.load(M + g * sm + at, mask=inside, other=0.0)
    else:
        m = x
    y = tl.load(Y + g * sy + i, mask=i < N, other=0.0)
    a = tl.load(alpha + g)
    b1 = tl.load(beta1 + g)
    b2 = tl.load(beta2 + g)
    col = j < n
    b = tl.load(B + g * n + j, mask=col, other=0.0)
    p1 = tl.load(B1 + g * n + j, mask=col, other=0.0)
    p2 = tl.load(B2 + g * n + j, mask=col, other=0.0)
    for _ in range(steps):
        if not KEEP:
            x = tl.load(X + g * sx + at, mask=inside, other=0.0)
            if METHOD == 2:
                m = tl.load(M + g * sm + at, mask=inside, other=0.0)
            else:
                m = x
        p2 = p1
        p1 = b
        if METHOD == 2:
            c = b - a * (b2 * b + b1 * sign(b))
        else:
            c = b
        r = tl.sum(x * c[None, :], axis=1) - y
        d = tl.sum(m * r[:, None], axis=0)
        if METHOD == 0:
            b = b - a * (d + b1 * sign(b) + b2 * b)
        elif METHOD == 1:
            z = b - a * (d + b2 * b)
            b = z - tl.minimum(tl.maximum(z, -a * b1), a * b1)
        else:
            b = c - d
    tl.store(B + g * n + j, b, mask=col)
    tl.store(B1 + g * n + j, p1, mask=col)
    tl.store(B2 + g * n + j, p2, mask=col)

@triton.jit
def deep_kernel(X, Y, alpha, beta1, beta2, depth, B, B1, B2, steps, sx, sy,
                N: tl.constexpr, n: tl.constexpr, L: tl.constexpr, BN: tl.constexpr, BNn: tl.constexpr,
                BL: tl.constexpr, KEEP: tl.constexpr):
    """``steps`` updates of the factors (L, n) of configuration ``program_id`` (eq. 88): its
    first ``depth`` layers move, the others are ones."""
    g = tl.program_id(0).to(tl.int64)
    i = tl.arange(0, BN)
    j = tl.arange(0, BNn)
    k = tl.arange(0, BL)
    inside = (i[:, None] < N) & (j[None, :] < n)
    at = i[:, None] * n + j[None, :]
    x = tl.load(X + g * sx + at, mask=inside, other=0.0)
    y = tl.load(Y + g * sy + i, mask=i < N, other=0.0)
    a = tl.load(alpha + g)
    b1 = tl.load(beta1 + g)
    b2 = tl.load(beta2 + g)
    layers = (k[:, None] < L) & (j[None, :] < n)
    active = (k[:, None] < tl.load(depth + g)) & (j[None, :] < n)
    where = g * L * n + k[:, None] * n + j[None, :]
    F = tl.load(B + where, mask=layers, other=1.0)
    p1 = tl.load(B1 + where, mask=layers, other=1.0)
    p2 = tl.load(B2 + where, mask=layers, other=1.0)
    for _ in range(steps):
        if not KEEP:
            x = tl.load(X + g * sx + at, mask=inside, other=0.0)
        p2 = p1
        p1 = F
        b = tl.reduce(F, 0, times)
        r = tl.sum(x * b[None, :], axis=1) - y
        d = tl.sum(x * r[:, None], axis=0)
        grads = tl.zeros((BL, BNn), dtype=tl.float64)
        for layer in tl.static_range(BL):
            others = tl.reduce(tl.where(k[:, None] == layer, 1.0, F), 0, times)
            grads = tl.where(k[:, None] == layer, (d * others)[None, :], grads)
        update = grads + b1 * sign(F) + b2 * F
        F = tl.where(active, F - a * update, F)
    tl.store(B + where, F, mask=layers)
    tl.store(B1 + where, p1, mask=layers)
    tl.store(B2 + where, p2, mask=layers)
