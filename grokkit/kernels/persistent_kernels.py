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


@triton.jit
def _column(W, c, k):
    """Column ``k`` of the tile W (columns indexed by ``c``), as a vector."""
    return tl.sum(tl.where(c[None, :] == k, W, 0.0), axis=1)


@triton.jit
def _entry(v, c, k):
    """Entry ``k`` of the vector v (indexed by ``c``)."""
    return tl.sum(tl.where(c == k, v, 0.0), axis=0)


@triton.jit
def _power_of_2(x, sign):
    """2**(sign e) for the exponent e of frexp(x) (x = f 2**e, 1/2 <= f < 1), e clamped to
    [-1000, 1000] and 0 where x is 0 or not finite, as ``fused_matrix.c`` scales its matrices:
    from the bits of x, so that scaling by it is exact."""
    biased = (x.to(tl.int64, bitcast=True) >> 52) & 2047
    e = tl.where(biased == 0, tl.where(x > 0, -1000, 0), tl.where(biased == 2047, 0, biased - 1022))
    e = tl.minimum(tl.maximum(e, -1000), 1000)
    return ((1023 + sign * e) << 52).to(tl.float64, bitcast=True)


@triton.jit
def jacobi(Z, gamma, order, P: tl.constexpr, Q: tl.constexpr, BP: tl.constexpr, BQ: tl.constexpr,
           PAIRS: tl.constexpr, SVT: tl.constexpr):
    r"""The one-sided Jacobi SVD of ``fused_matrix.c`` on the tile Z (BP, BQ) holding a P x Q matrix
    (P >= Q): Z = U diag(σ) V^T, returned as U f(σ) V^T and σ. f = 1, :math:`h(Z) = UV^\top` (eq. 101,
    vanished columns of U completed) unless SVT, where f(σ) = max(σ - γ, 0) (singular-value
    thresholding, eq. 127). Z is scaled by a power of 2 to a largest entry in [1/2, 1); the pairs of
    columns (i, j) are rotated in ``order``'s round-robin rounds (PAIRS pairs) while
    |w_i . w_j| > P eps ||w_i|| ||w_j||, until a sweep rotates nothing (at most 60 sweeps)."""
    r = tl.arange(0, BP)
    c = tl.arange(0, BQ)
    largest = tl.max(tl.max(tl.abs(Z), axis=1), axis=0)
    up = _power_of_2(largest, -1)
    down = _power_of_2(largest, 1)
    W = Z * up
    V = tl.where((c[:, None] == c[None, :]) & (c[:, None] < Q), 1.0, 0.0).to(tl.float64)
    tol2 = (P * 2.220446049250313e-16) * (P * 2.220446049250313e-16)
    sweep = 0
    go = Q - 1  # nonzero: a sweep to do
    while go != 0:
        norm2 = tl.sum(W * W, axis=0)
        rotated = 0
        for k in range(PAIRS):
            i = tl.load(order + 2 * k)
            j = tl.load(order + 2 * k + 1)
            wi = _column(W, c, i)
            wj = _column(W, c, j)
            ni = _entry(norm2, c, i)
            nj = _entry(norm2, c, j)
            g = tl.sum(wi * wj, axis=0)
            rot = g * g > tol2 * (ni * nj)
            g = tl.where(rot, g, 0.0)
            d = nj - ni
            g2 = g + g
            t = tl.where(g == 0, 0.0, tl.where(d < 0, -g2, g2)
                         / tl.where(g == 0, 1.0, tl.abs(d) + tl.sqrt(d * d + g2 * g2)))  # no 0/0
            cs = 1.0 / tl.sqrt(t * t + 1.0)
            sn = cs * t
            W = tl.where(c[None, :] == i, (cs * wi - sn * wj)[:, None],
                         tl.where(c[None, :] == j, (sn * wi + cs * wj)[:, None], W))
            vi = _column(V, c, i)
            vj = _column(V, c, j)
            V = tl.where(c[None, :] == i, (cs * vi - sn * vj)[:, None],
                         tl.where(c[None, :] == j, (sn * vi + cs * vj)[:, None], V))
            norm2 = tl.where(c == i, ni - t * g, tl.where(c == j, nj + t * g, norm2))
            rotated = rotated | rot.to(tl.int32)
        sweep += 1
        go = ((rotated != 0) & (sweep < 60)).to(tl.int32)
    sigma = tl.sqrt(tl.sum(W * W, axis=0))
    gone = sigma <= 1e-150  # vanished: false for NaN, so that a diverged matrix stays NaN
    if SVT:
        f = tl.maximum(sigma - gamma * up, 0.0)
    else:
        f = tl.where(c < Q, 1.0, 0.0).to(tl.float64)
    W = W * tl.where(gone, 0.0, f / tl.where(gone, 1.0, sigma))[None, :]
    if not SVT:
        ready = tl.where(gone | (c >= Q), 0, 1)
        if tl.sum(1 - ready, axis=0) > BQ - Q:  # a vanished column: U completed, as fused_matrix.c does
            for k in range(Q):
                if _entry(ready, c, k) == 0:
                    best = tl.sum(tl.zeros((BP,), dtype=tl.float64), axis=0)
                    keep = tl.zeros((BP,), dtype=tl.float64)
                    for e in range(P):  # the canonical vector that keeps the most of its norm
                        x = tl.where(r == e, 1.0, 0.0).to(tl.float64)
                        for _ in range(2):
                            for other in range(Q):
                                u = _column(W, c, other)
                                s = tl.sum(u * x, axis=0)
                                x = tl.where(_entry(ready, c, other) == 1, x - s * u, x)
                        size = tl.sum(x * x, axis=0)
                        keep = tl.where(size > best, x, keep)
                        best = tl.maximum(size, best)
                    W = tl.where(c[None, :] == k, (keep / tl.sqrt(best))[:, None], W)
                    ready = tl.where(c == k, 1, ready)
    out = tl.zeros((BP, BQ), dtype=tl.float64)
    for k in range(Q):  # U f(sigma) V^T, column k: the rows k of V
        v = tl.sum(tl.where(c[:, None] == k, V, 0.0), axis=0)
        out = tl.where(c[None, :] == k, tl.sum(W * v[None, :], axis=1)[:, None], out)
    if SVT:  # SVT(Z, gamma) = SVT(s Z, s gamma) / s; h(Z) does not scale
        out = out * down
    return out, sigma * down


@triton.jit
def _working(g, n1: tl.constexpr, n2: tl.constexpr, P: tl.constexpr, Q: tl.constexpr, TRANS: tl.constexpr,
             BP: tl.constexpr, BQ: tl.constexpr):
    """The addresses of the working P x Q matrix of configuration g in a (G, n1 n2) row-major array
    (A, or A^T when TRANS) as a (BP, BQ) tile, and the mask of its entries."""
    r = tl.arange(0, BP)
    c = tl.arange(0, BQ)
    if TRANS:
        at = g * (n1 * n2) + c[None, :] * n2 + r[:, None]
    else:
        at = g * (n1 * n2) + r[:, None] * n2 + c[None, :]
    return at, (r[:, None] < P) & (c[None, :] < Q)


@triton.jit
def matrix_kernel(A, A1, A2, M, Y, alpha, beta_star, beta2, order, steps,
                  n1: tl.constexpr, n2: tl.constexpr, P: tl.constexpr, Q: tl.constexpr, TRANS: tl.constexpr,
                  BP: tl.constexpr, BQ: tl.constexpr, PAIRS: tl.constexpr, METHOD: tl.constexpr):
    """``steps`` updates of the n1 x n2 iterate of configuration ``program_id`` (A, with the mask M and
    y at the observed entries Y, all (G, n1 n2) row-major), worked on as the P x Q matrix A (A^T
    when TRANS). METHOD 0 subgradient, eq. (101); 1 proximal, eq. (127); 2 projected subgradient, §D.7."""
    g = tl.program_id(0).to(tl.int64)
    at, inside = _working(g, n1, n2, P, Q, TRANS, BP, BQ)
    x = tl.load(A + at, mask=inside, other=0.0)
    p1 = tl.load(A1 + at, mask=inside, other=0.0)
    p2 = tl.load(A2 + at, mask=inside, other=0.0)
    m = tl.load(M + at, mask=inside, other=0.0)
    y = tl.load(Y + at, mask=inside, other=0.0)
    a = tl.load(alpha + g)
    bs = tl.load(beta_star + g)
    b2 = tl.load(beta2 + g)
    for _ in range(steps):
        p2 = p1
        p1 = x
        if METHOD == 1:
            x, _sigma = jacobi(x - a * (b2 * x + m * (x - y)), a * bs, order, P, Q, BP, BQ, PAIRS, True)
        else:
            h, _sigma = jacobi(x, 0.0, order, P, Q, BP, BQ, PAIRS, False)
            direction = bs * h + b2 * x
            if METHOD == 0:
                x = x - a * (direction + m * (x - y))
            else:
                x = tl.where(m != 0, y, x - a * direction)
    tl.store(A + at, x, mask=inside)
    tl.store(A1 + at, p1, mask=inside)
    tl.store(A2 + at, p2, mask=inside)


@triton.jit
def svd_kernel(A, H, S, order, n1: tl.constexpr, n2: tl.constexpr, P: tl.constexpr, Q: tl.constexpr,
               TRANS: tl.constexpr, BP: tl.constexpr, BQ: tl.constexpr, PAIRS: tl.constexpr):
    """The singular values S (G, Q) and h(A) = U V^T (G, n1 n2) of the step's SVD, for the tests."""
    g = tl.program_id(0).to(tl.int64)
    at, inside = _working(g, n1, n2, P, Q, TRANS, BP, BQ)
    h, sigma = jacobi(tl.load(A + at, mask=inside, other=0.0), 0.0, order, P, Q, BP, BQ, PAIRS, False)
    tl.store(H + at, h, mask=inside)
    c = tl.arange(0, BQ)
    tl.store(S + g * Q + c, sigma, mask=c < Q)
