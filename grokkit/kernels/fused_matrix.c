/* Fused CPU steps of the matrix-completion kernels (grokkit/kernels/matrix.py), float64, AVX2/FMA.
 *
 * Every n1 x n2 matrix of a grid is stored configuration-contiguous, A[e * G + g] the row-major
 * entry e of configuration g, and each AVX2 lane holds one configuration: a group of 4
 * configurations is loaded into local arrays and advanced through a whole chunk of steps there.
 * The SVD of each iterate is a one-sided (Hestenes) Jacobi SVD, from scratch at every step (a step
 * is a function of the iterate only): plane rotations of the columns of W = A (or A^T when
 * n1 < n2), scaled by a power of 2, until every pair of columns is orthogonal to working
 * precision, accumulated in V, so that W V = U diag(sigma) with sigma_c = ||(W V)_c||. One-sided Jacobi
 * computes each singular value to high relative accuracy (Demmel & Veselic 1992), so they agree
 * with LAPACK's to rounding in ||A||. A lane's rotations depend only on its own matrix and a
 * skipped rotation leaves it bit for bit unchanged, so configurations never mix: each one's
 * numbers are the same whatever the batch. The caller pads the number of configurations to a
 * multiple of 4 (with copies of a real configuration). A run may split its groups over threads,
 * each with its own work space: the numbers are the same, bit for bit, on one thread or several.
 * Compiled on first use by grokkit/kernels/fused.py; the PyTorch steps are the reference.
 */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef __m256d v4;
#define SPLAT _mm256_set1_pd
#define MAX_SWEEPS 60
/* Matrices are scaled by a power of 2 to a largest entry in [1/2, 1) (exactly) before their SVD; a
 * column whose norm is then below this vanished (its square underflows: a rank-deficient matrix),
 * and U is completed there. */
#define VANISHED 1e-150

static inline v4 vabs(v4 x) { return _mm256_andnot_pd(SPLAT(-0.0), x); }

static inline v4 dot(const v4 *x, const v4 *y, int n) {
  v4 s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int i = 0;
  for (; i + 1 < n; i += 2) {
    s0 = _mm256_fmadd_pd(x[i], y[i], s0);
    s1 = _mm256_fmadd_pd(x[i + 1], y[i + 1], s1);
  }
  if (i < n) s0 = _mm256_fmadd_pd(x[i], y[i], s0);
  return _mm256_add_pd(s0, s1);
}

/* x <- c x - s y, y <- s x + c y for n entries. */
static inline void rotate(v4 *x, v4 *y, int n, v4 c, v4 s) {
  for (int i = 0; i < n; i++) {
    v4 a = x[i], b = y[i];
    x[i] = _mm256_fnmadd_pd(s, b, _mm256_mul_pd(c, a));
    y[i] = _mm256_fmadd_pd(s, a, _mm256_mul_pd(c, b));
  }
}

/* The q(q-1)/2 pairs of columns (i < j) in round-robin order: rounds of floor(q/2) disjoint pairs
 * (q - 1 rounds for an even q, q for an odd one), whose rotations are independent. */
static void pairs(int q, int *order) {
  int m = q + (q & 1), k = 0; /* an odd q plays with a dummy column q */
  for (int round = 0; round < m - 1; round++)
    for (int x = 0; x < m / 2; x++) {
      int i = x == 0 ? 0 : 1 + (round + x - 1) % (m - 1), j = 1 + (round + m - 2 - x) % (m - 1);
      if (i > j) {
        int swap = i;
        i = j, j = swap;
      }
      if (j < q) order[k++] = i, order[k++] = j;
    }
}

/* One-sided Jacobi on the q columns (length p, column c at W + c p) of 4 matrices: rotate pairs of
 * columns (i, j) by the angle that makes them orthogonal while |w_i . w_j| > tol ||w_i|| ||w_j||,
 * tol = p eps, sweeping through the rounds of `order` until a sweep rotates nothing; V (q x q,
 * column c at V + c q) accumulates the rotations from the identity. The pairs of a round are
 * disjoint: their inner products, then their angles, then their rotations are computed together
 * (independent operations that overlap in the CPU). A lane's sweeps after its last rotation
 * change nothing (its decisions depend on its own columns only, and a skipped rotation is c = 1,
 * s = 0). With a = ||w_i||^2, b = ||w_j||^2, g = w_i . w_j the rotation is t = tan(theta) =
 * 2g sign(b - a) / (|b - a| + sqrt((b - a)^2 + 4g^2)), c = 1/sqrt(1 + t^2), s = c t, after which
 * ||w_i||^2 = a - t g and ||w_j||^2 = b + t g (Hestenes). Squares of the entries must stay in the
 * normal range: svd() scales every matrix first. */
static void jacobi(int p, int q, const int *order, v4 *W, v4 *V, v4 *norm2, v4 *scratch) {
  const v4 tol2 = SPLAT((p * DBL_EPSILON) * (p * DBL_EPSILON)), one = SPLAT(1.0), zero = _mm256_setzero_pd();
  const v4 sign = SPLAT(-0.0);
  const int per_round = q / 2, rounds = q * (q - 1) / 2 / (per_round ? per_round : 1);
  v4 *g = scratch, *t = scratch + per_round, *cs = scratch + 2 * per_round, *sn = scratch + 3 * per_round;
  int on[per_round + 1];
  for (int c = 0; c < q; c++)
    for (int r = 0; r < q; r++) V[c * q + r] = r == c ? one : zero;
  for (int sweep = 0; sweep < MAX_SWEEPS && q > 1; sweep++) {
    for (int c = 0; c < q; c++) norm2[c] = dot(W + c * p, W + c * p, p);
    int rotated = 0;
    for (int round = 0; round < rounds; round++) {
      const int *ij = order + 2 * round * per_round;
      int any = 0;
      for (int k = 0; k < per_round; k++) {
        int i = ij[2 * k], j = ij[2 * k + 1];
        g[k] = dot(W + i * p, W + j * p, p);
        v4 rot = _mm256_cmp_pd(_mm256_mul_pd(g[k], g[k]), _mm256_mul_pd(tol2, _mm256_mul_pd(norm2[i], norm2[j])),
                               _CMP_GT_OQ);
        on[k] = _mm256_movemask_pd(rot);
        any |= on[k];
        g[k] = _mm256_blendv_pd(zero, g[k], rot); /* t = 0 where the lane does not rotate */
      }
      if (!any) continue;
      rotated = 1;
      for (int k = 0; k < per_round; k++) {
        v4 d = _mm256_sub_pd(norm2[ij[2 * k + 1]], norm2[ij[2 * k]]), g2 = _mm256_add_pd(g[k], g[k]);
        v4 root = _mm256_sqrt_pd(_mm256_fmadd_pd(d, d, _mm256_mul_pd(g2, g2)));
        t[k] = _mm256_div_pd(_mm256_xor_pd(g2, _mm256_and_pd(sign, d)), _mm256_add_pd(vabs(d), root));
        t[k] = _mm256_blendv_pd(t[k], zero, _mm256_cmp_pd(g[k], zero, _CMP_EQ_OQ)); /* 0/0 where d = g = 0 */
        cs[k] = _mm256_div_pd(one, _mm256_sqrt_pd(_mm256_fmadd_pd(t[k], t[k], one)));
        sn[k] = _mm256_mul_pd(cs[k], t[k]);
      }
      for (int k = 0; k < per_round; k++) {
        if (!on[k]) continue;
        int i = ij[2 * k], j = ij[2 * k + 1];
        rotate(W + i * p, W + j * p, p, cs[k], sn[k]);
        rotate(V + i * q, V + j * q, q, cs[k], sn[k]);
        norm2[i] = _mm256_fnmadd_pd(t[k], g[k], norm2[i]);
        norm2[j] = _mm256_fmadd_pd(t[k], g[k], norm2[j]);
      }
    }
    if (!rotated) break;
  }
}

/* Lane `lane` of column c of U (p x q, column c at U + c p) for a vanished column: the unit vector
 * of the complement of the other columns that lie in `ready`, from the canonical basis vector that
 * keeps the most of its norm (projected out twice, classical Gram-Schmidt). Deterministic. */
static void complete(int p, int q, v4 *U, int c, int lane, const int *ready) {
  double *u = (double *)U, best = 0.0;
  double x[p], keep[p];
  memset(keep, 0, sizeof keep);
  for (int e = 0; e < p; e++) {
    for (int r = 0; r < p; r++) x[r] = r == e;
    for (int pass = 0; pass < 2; pass++)
      for (int d = 0; d < q; d++) {
        if (!ready[d]) continue;
        double s = 0.0;
        for (int r = 0; r < p; r++) s += u[(d * p + r) * 4 + lane] * x[r];
        for (int r = 0; r < p; r++) x[r] -= s * u[(d * p + r) * 4 + lane];
      }
    double n = 0.0;
    for (int r = 0; r < p; r++) n += x[r] * x[r];
    if (n > best) {
      best = n;
      memcpy(keep, x, sizeof keep);
    }
  }
  best = sqrt(best);
  for (int r = 0; r < p; r++) u[(c * p + r) * 4 + lane] = keep[r] / best;
}

/* From the Jacobi output W V = U diag(sigma): sigma (q), and out = U f(sigma) V^T (p x q, column
 * k at out + k p), f = 1 (h = U V^T, eq. 101, vanished columns of U completed) when svt is 0, or
 * f(sigma) = max(sigma - gamma, 0) (singular-value thresholding) otherwise. W becomes U f(sigma). */
static void assemble(int p, int q, v4 *W, const v4 *V, v4 *sigma, v4 gamma, int svt, v4 *out) {
  const v4 zero = _mm256_setzero_pd(), one = SPLAT(1.0);
  int vanished = 0;
  for (int c = 0; c < q; c++) {
    v4 s = _mm256_sqrt_pd(dot(W + c * p, W + c * p, p));
    sigma[c] = s;
    v4 gone = _mm256_cmp_pd(s, SPLAT(VANISHED), _CMP_LE_OQ); /* not NaN: a diverged lane stays NaN */
    vanished |= _mm256_movemask_pd(gone);
    v4 f = svt ? _mm256_max_pd(_mm256_sub_pd(s, gamma), zero) : one;
    v4 scale = _mm256_blendv_pd(_mm256_div_pd(f, s), zero, gone);
    for (int r = 0; r < p; r++) W[c * p + r] = _mm256_mul_pd(W[c * p + r], scale);
  }
  if (vanished && !svt) {
    double *sg = (double *)sigma;
    for (int lane = 0; lane < 4; lane++) {
      if (!(vanished >> lane & 1)) continue;
      int ready[q];
      for (int c = 0; c < q; c++) ready[c] = !(sg[c * 4 + lane] <= VANISHED);
      for (int c = 0; c < q; c++)
        if (!ready[c]) {
          complete(p, q, W, c, lane, ready);
          ready[c] = 1;
        }
    }
  }
  for (int k = 0; k < q; k++) {
    v4 *o = out + k * p;
    for (int r = 0; r < p; r++) o[r] = zero;
    for (int c = 0; c < q; c++) {
      v4 v = V[c * q + k];
      for (int r = 0; r < p; r++) o[r] = _mm256_fmadd_pd(W[c * p + r], v, o[r]);
    }
  }
}

/* Work space of one group: the working matrix W, V, the result H, squared norms and sigma. */
typedef struct {
  int n1, n2, p, q, trans;
  int *order;
  v4 *W, *V, *H, *norm2, *sigma, *scratch;
} Work;

static int work_init(Work *w, int n1, int n2) {
  w->n1 = n1, w->n2 = n2, w->trans = n1 < n2;
  w->p = w->trans ? n2 : n1, w->q = w->trans ? n1 : n2;
  w->W = aligned_alloc(32, sizeof(v4) * ((size_t)2 * w->p * w->q + (size_t)w->q * w->q + 4 * w->q));
  if (!w->W) return 0;
  w->H = w->W + w->p * w->q;
  w->V = w->H + w->p * w->q;
  w->norm2 = w->V + w->q * w->q;
  w->sigma = w->norm2 + w->q;
  w->scratch = w->sigma + w->q; /* 4 floor(q/2) */
  w->order = malloc(sizeof(int) * (w->q * (w->q - 1) + 1));
  if (!w->order) {
    free(w->W);
    return 0;
  }
  pairs(w->q, w->order);
  return 1;
}

static void work_free(Work *w) {
  free(w->order);
  free(w->W);
}

/* Row-major entry (r, c) of the working matrix (A, or A^T when n1 < n2) in A. */
static inline int entry(const Work *w, int r, int c) { return w->trans ? c * w->n2 + r : r * w->n2 + c; }

/* The SVD of the 4 matrices A (row-major, n1 n2 entries) and out = U f(sigma) V^T (see assemble)
 * in A's layout; w->sigma (min(n1, n2)) in no particular order. */
static void svd(Work *w, const v4 *A, v4 gamma, int svt, v4 *out) {
  int p = w->p, q = w->q, n = w->n1 * w->n2;
  v4 largest = _mm256_setzero_pd();
  for (int e = 0; e < n; e++) largest = _mm256_max_pd(largest, vabs(A[e]));
  double m[4], up[4], down[4];
  _mm256_storeu_pd(m, largest);
  for (int lane = 0; lane < 4; lane++) { /* powers of 2: scaling and unscaling are exact */
    int exponent = 0;
    if (m[lane] > 0.0 && isfinite(m[lane])) frexp(m[lane], &exponent);
    exponent = exponent < -1000 ? -1000 : exponent > 1000 ? 1000 : exponent;
    up[lane] = ldexp(1.0, -exponent), down[lane] = ldexp(1.0, exponent);
  }
  v4 scale = _mm256_loadu_pd(up), unscale = _mm256_loadu_pd(down);
  for (int c = 0; c < q; c++)
    for (int r = 0; r < p; r++) w->W[c * p + r] = _mm256_mul_pd(A[entry(w, r, c)], scale);
  jacobi(p, q, w->order, w->W, w->V, w->norm2, w->scratch);
  assemble(p, q, w->W, w->V, w->sigma, _mm256_mul_pd(gamma, scale), svt, w->H);
  for (int c = 0; c < q; c++) w->sigma[c] = _mm256_mul_pd(w->sigma[c], unscale);
  if (svt) /* SVT(Z, gamma) = SVT(s Z, s gamma) / s; h(A) = U V^T does not scale */
    for (int c = 0; c < q * p; c++) w->H[c] = _mm256_mul_pd(w->H[c], unscale);
  for (int c = 0; c < q; c++)
    for (int r = 0; r < p; r++) out[entry(w, r, c)] = w->H[c * p + r];
}

/* One update of 4 configurations (A, mask M of 0/1, Y = y at the observed entries and 0
 * elsewhere, all n1 n2 entries). method 0: subgradient, eq. (101), A - alpha (G + beta* U V^T),
 * G = M (A - Y) + beta2 A; 1: proximal, eq. (127), SVT_{alpha beta*}(A - alpha G); 2: projected
 * subgradient (section D.7), Pi(A - alpha (beta2 A + beta* U V^T)), Pi setting the observed entries to y.
 * T holds n1 n2 entries of scratch. */
static void update(int method, Work *w, v4 *A, const v4 *M, const v4 *Y, v4 alpha, v4 beta_star, v4 beta2,
                   v4 *T) {
  int n = w->n1 * w->n2;
  if (method == 1) {
    for (int e = 0; e < n; e++) {
      v4 grad = _mm256_fmadd_pd(beta2, A[e], _mm256_mul_pd(M[e], _mm256_sub_pd(A[e], Y[e])));
      T[e] = _mm256_fnmadd_pd(alpha, grad, A[e]);
    }
    svd(w, T, _mm256_mul_pd(alpha, beta_star), 1, A);
    return;
  }
  svd(w, A, _mm256_setzero_pd(), 0, T);
  for (int e = 0; e < n; e++) {
    v4 direction = _mm256_fmadd_pd(beta_star, T[e], _mm256_mul_pd(beta2, A[e]));
    if (method == 0) direction = _mm256_add_pd(direction, _mm256_mul_pd(M[e], _mm256_sub_pd(A[e], Y[e])));
    v4 next = _mm256_fnmadd_pd(alpha, direction, A[e]);
    v4 observed = _mm256_cmp_pd(M[e], _mm256_setzero_pd(), _CMP_NEQ_OQ);
    A[e] = method == 0 ? next : _mm256_blendv_pd(next, Y[e], observed);
  }
}

/* The arguments of grokkit_matrix_steps, the groups [g0, g1) of one thread, and whether its work
 * space could be allocated. */
typedef struct {
  int method, n1, n2, G, g0, g1;
  long k;
  const double *M, *Y, *alpha, *beta_star, *beta2;
  double *A, *A1, *A2;
  int ok;
} Steps;

/* k updates of the configurations [s->g0, s->g1), a group of 4 at a time, in a work space of its own. */
static void *steps(void *arg) {
  Steps *s = arg;
  Work w;
  s->ok = 0;
  if (!work_init(&w, s->n1, s->n2)) return 0;
  int n = s->n1 * s->n2, G = s->G;
  v4 *local = aligned_alloc(32, sizeof(v4) * 4 * (size_t)n);
  if (!local) {
    work_free(&w);
    return 0;
  }
  v4 *X = local, *Mg = local + n, *Yg = local + 2 * n, *T = local + 3 * n;
  for (int g = s->g0; g < s->g1; g += 4) {
    for (int e = 0; e < n; e++) {
      X[e] = _mm256_loadu_pd(s->A + (long)e * G + g);
      Mg[e] = _mm256_loadu_pd(s->M + (long)e * G + g);
      Yg[e] = _mm256_loadu_pd(s->Y + (long)e * G + g);
    }
    v4 a = _mm256_loadu_pd(s->alpha + g), b = _mm256_loadu_pd(s->beta_star + g), r = _mm256_loadu_pd(s->beta2 + g);
    for (long t = 0; t < s->k; t++) {
      if (t >= s->k - 2)
        for (int e = 0; e < n; e++) {
          _mm256_storeu_pd(s->A2 + (long)e * G + g, _mm256_loadu_pd(s->A1 + (long)e * G + g));
          _mm256_storeu_pd(s->A1 + (long)e * G + g, X[e]);
        }
      update(s->method, &w, X, Mg, Yg, a, b, r, T);
    }
    for (int e = 0; e < n; e++) _mm256_storeu_pd(s->A + (long)e * G + g, X[e]);
  }
  free(local);
  work_free(&w);
  s->ok = 1;
  return 0;
}

#define MAX_THREADS 64

/* k updates of every configuration (G a multiple of 4, arrays (n1 n2) x G) on `threads` threads,
 * each a range of whole groups of 4 (a range whose thread cannot be started runs here); A holds
 * the iterate, A1 and A2 receive the two before the last. Returns 0 if a work space could not be
 * allocated. */
int grokkit_matrix_steps(int method, int n1, int n2, int G, long k, int threads, const double *M,
                         const double *Y, const double *alpha, const double *beta_star, const double *beta2,
                         double *A, double *A1, double *A2) {
  int groups = G / 4;
  if (threads > groups) threads = groups;
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  if (threads < 1) threads = 1;
  Steps part[MAX_THREADS];
  pthread_t id[MAX_THREADS];
  for (int i = 0; i < threads; i++) {
    Steps s = {method, n1, n2, G, 4 * (groups * i / threads), 4 * (groups * (i + 1) / threads), k,
               M, Y, alpha, beta_star, beta2, A, A1, A2, 0};
    part[i] = s;
  }
  int started = 1;
  while (started < threads && !pthread_create(&id[started], 0, steps, &part[started])) started++;
  for (int i = started; i < threads; i++) steps(&part[i]);
  steps(&part[0]);
  for (int i = 1; i < started; i++) pthread_join(id[i], 0);
  int ok = 1;
  for (int i = 0; i < threads; i++) ok &= part[i].ok;
  return ok;
}

/* The singular values S (min(n1, n2) x G, unordered) and h(A) = U V^T (n1 n2 x G) of G matrices
 * (n1 n2 x G), G a multiple of 4: the SVD of the fused steps, for tests. Returns 0 if out of memory. */
int grokkit_matrix_svd(int n1, int n2, int G, const double *A, double *S, double *H) {
  Work w;
  if (!work_init(&w, n1, n2)) return 0;
  int n = n1 * n2;
  v4 *local = aligned_alloc(32, sizeof(v4) * 2 * (size_t)n);
  if (!local) {
    work_free(&w);
    return 0;
  }
  for (int g = 0; g < G; g += 4) {
    for (int e = 0; e < n; e++) local[e] = _mm256_loadu_pd(A + (long)e * G + g);
    svd(&w, local, _mm256_setzero_pd(), 0, local + n);
    for (int e = 0; e < n; e++) _mm256_storeu_pd(H + (long)e * G + g, local[n + e]);
    for (int c = 0; c < w.q; c++) _mm256_storeu_pd(S + (long)c * G + g, w.sigma[c]);
  }
  free(local);
  work_free(&w);
  return 1;
}
