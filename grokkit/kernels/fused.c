/* Fused CPU steps of the sparse-recovery kernels (grokkit/kernels/sparse.py), float64, in two layouts.
 *
 * grokkit_steps: X and y shared by every configuration, AVX-512 (8 configurations a register) where
 * the compiler is given -mavx512f, else AVX2/FMA (4). Iterates are stored configuration-contiguous:
 * B[j * G + g] is b_j of configuration g, so one register-blocked product serves every
 * configuration of a grid, and configurations never mix: each one's arithmetic is the same
 * whatever the batch, and whatever the vector width: a lane does the same fused multiply-adds in
 * the same order in both builds. The caller pads the number of configurations to a multiple of
 * LANES (grokkit_lanes()). A run may split its configurations over threads (ranges of whole blocks
 * of LANES): they share nothing but the problem, so the iterates are the same, bit for bit, on one
 * thread or several.
 *
 * grokkit_problem_steps: a problem per configuration (X or y one per configuration), the deep
 * diagonal network and the diagonal network of Woodworth et al. and Lyu et al., in PyTorch's
 * configuration-major layout (below).
 *
 * Compiled on first use by grokkit/kernels/fused.py; the PyTorch steps are the reference.
 */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__)
#define LANES 8
typedef __m512d vec;
#define VZERO _mm512_setzero_pd
#define VLOAD _mm512_loadu_pd
#define VSTORE _mm512_storeu_pd
#define VSPLAT _mm512_set1_pd
#define VFMA _mm512_fmadd_pd
#define VSUB _mm512_sub_pd
#else
#define LANES 4
typedef __m256d vec;
#define VZERO _mm256_setzero_pd
#define VLOAD _mm256_loadu_pd
#define VSTORE _mm256_storeu_pd
#define VSPLAT _mm256_set1_pd
#define VFMA _mm256_fmadd_pd
#define VSUB _mm256_sub_pd
#endif

/* The configurations one register holds: the padding of G that the caller owes. */
int grokkit_lanes(void) { return LANES; }

/* Rows [r, r + RB) of out[r, g] = sum_i A[r, i] V[i, g] - sub[r] for configurations [g, g + LANES * CB). */
#define BLOCK(RB, CB)                                                                               \
  do {                                                                                              \
    vec acc[RB][CB];                                                                                \
    for (int q = 0; q < RB; q++)                                                                    \
      for (int c = 0; c < CB; c++) acc[q][c] = VZERO();                                             \
    for (int i = 0; i < inner; i++) {                                                               \
      vec v[CB];                                                                                    \
      for (int c = 0; c < CB; c++) v[c] = VLOAD(V + (long)i * G + g + LANES * c);                   \
      for (int q = 0; q < RB; q++) {                                                                \
        vec x = VSPLAT(A[(long)(r + q) * inner + i]);                                               \
        for (int c = 0; c < CB; c++) acc[q][c] = VFMA(x, v[c], acc[q][c]);                          \
      }                                                                                             \
    }                                                                                               \
    for (int q = 0; q < RB; q++)                                                                    \
      for (int c = 0; c < CB; c++)                                                                  \
        VSTORE(out + (long)(r + q) * G + g + LANES * c,                                             \
               VSUB(acc[q][c], VSPLAT(sub ? sub[r + q] : 0.0)));                                    \
  } while (0)

/* out[r, g] = sum_i A[r, i] V[i, g] - sub[r] (sub may be NULL) for every row and configurations
 * [g0, g1), (g1 - g0) % LANES == 0: blocks of 4 rows x 3 registers of configurations (12
 * accumulators, 3 loads and a broadcast), then the remainders. */
static void product(int rows, int inner, int G, int g0, int g1, const double *A, const double *V,
                    const double *sub, double *out) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    int g = g0;
    for (; g + 3 * LANES <= g1; g += 3 * LANES) BLOCK(4, 3);
    for (; g + 2 * LANES <= g1; g += 2 * LANES) BLOCK(4, 2);
    for (; g + LANES <= g1; g += LANES) BLOCK(4, 1);
  }
  for (; r < rows; r++) {
    int g = g0;
    for (; g + 2 * LANES <= g1; g += 2 * LANES) BLOCK(1, 2);
    for (; g + LANES <= g1; g += LANES) BLOCK(1, 1);
  }
}

static inline double sign(double x) { return (double)((x > 0) - (x < 0)); }

/* One update of configurations [g0, g1). method 0: subgradient, eq. (22); 1: ISTA, eq. (86);
 * 2: projected subgradient, with M the pseudo-inverse of X (n x N); otherwise M = X^T (n x N). */
static void update(int method, int N, int n, int G, int g0, int g1, const double *X, const double *M,
                   const double *y, const double *alpha, const double *beta1, const double *beta2,
                   double *B, double *R, double *D) {
  if (method == 2) {
    for (int j = 0; j < n; j++)
      for (int g = g0; g < g1; g++) {
        double b = B[(long)j * G + g];
        B[(long)j * G + g] = b - alpha[g] * (beta2[g] * b + beta1[g] * sign(b));
      }
    product(N, n, G, g0, g1, X, B, y, R); /* X c - y */
    product(n, N, G, g0, g1, M, R, 0, D); /* X^+ (X c - y) */
    for (long q = 0; q < (long)n * G; q += G)
      for (int g = g0; g < g1; g++) B[q + g] -= D[q + g];
    return;
  }
  product(N, n, G, g0, g1, X, B, y, R);   /* X b - y */
  product(n, N, G, g0, g1, M, R, 0, D);   /* X^T (X b - y) */
  for (int j = 0; j < n; j++)
    for (int g = g0; g < g1; g++) {
      long q = (long)j * G + g;
      double b = B[q], grad = D[q] + beta2[g] * b;
      if (method == 0) {
        B[q] = b - alpha[g] * (grad + beta1[g] * sign(b));
      } else {
        double z = b - alpha[g] * grad, gamma = alpha[g] * beta1[g];
        B[q] = z - fmin(fmax(z, -gamma), gamma);
      }
    }
}

/* The arguments of grokkit_steps, and the configurations [g0, g1) of one thread. */
typedef struct {
  int method, N, n, G, g0, g1;
  long k;
  const double *X, *M, *y, *alpha, *beta1, *beta2;
  double *B, *B1, *B2, *R, *D;
} Steps;

/* k updates of the configurations [s->g0, s->g1); B1 and B2 receive their two iterates before the last. */
static void run_steps(const Steps *s) {
  size_t width = sizeof(double) * (size_t)(s->g1 - s->g0);
  for (long t = 0; t < s->k; t++) {
    if (t >= s->k - 2)
      for (long q = s->g0; q < (long)s->n * s->G; q += s->G) {
        memcpy(s->B2 + q, s->B1 + q, width);
        memcpy(s->B1 + q, s->B + q, width);
      }
    update(s->method, s->N, s->n, s->G, s->g0, s->g1, s->X, s->M, s->y, s->alpha, s->beta1, s->beta2, s->B,
           s->R, s->D);
  }
}

/* One thread's share: its configurations copied into arrays of its own (iterates, hyper-parameters,
 * work space), advanced there, and copied back, so that two threads never write to one cache line
 * (rows of G doubles do not start on cache lines: shared, the steps ran barely faster on two cores
 * than on one). A lane's arithmetic is the same in either layout. Runs in place if out of memory. */
static void *steps(void *arg) {
  const Steps *s = arg;
  int w = s->g1 - s->g0, n = s->n, N = s->N;
  size_t row = sizeof(double) * (size_t)w;
  double *local = malloc(sizeof(double) * ((size_t)w * (3 * (size_t)n + 3 + (size_t)N + (size_t)n)));
  if (!local) {
    run_steps(s);
    return 0;
  }
  double *B = local, *B1 = B + (long)n * w, *B2 = B1 + (long)n * w, *hyper = B2 + (long)n * w;
  double *R = hyper + 3 * w, *D = R + (long)N * w;
  for (int j = 0; j < n; j++) {
    memcpy(B + (long)j * w, s->B + (long)j * s->G + s->g0, row);
    memcpy(B1 + (long)j * w, s->B1 + (long)j * s->G + s->g0, row);
    memcpy(B2 + (long)j * w, s->B2 + (long)j * s->G + s->g0, row);
  }
  memcpy(hyper, s->alpha + s->g0, row);
  memcpy(hyper + w, s->beta1 + s->g0, row);
  memcpy(hyper + 2 * w, s->beta2 + s->g0, row);
  Steps mine = {s->method, N, n, w, 0, w, s->k, s->X, s->M, s->y, hyper, hyper + w, hyper + 2 * w, B, B1, B2, R, D};
  run_steps(&mine);
  for (int j = 0; j < n; j++) {
    memcpy(s->B + (long)j * s->G + s->g0, B + (long)j * w, row);
    memcpy(s->B1 + (long)j * s->G + s->g0, B1 + (long)j * w, row);
    memcpy(s->B2 + (long)j * s->G + s->g0, B2 + (long)j * w, row);
  }
  free(local);
  return 0;
}

#define MAX_THREADS 64

/* k updates of every configuration, on `threads` threads, each a range of whole blocks of LANES
 * configurations (1: this thread alone). A range whose thread cannot be started runs here. */
void grokkit_steps(int method, int N, int n, int G, long k, int threads, const double *X, const double *M,
                   const double *y, const double *alpha, const double *beta1, const double *beta2, double *B,
                   double *B1, double *B2, double *R, double *D) {
  int blocks = G / LANES;
  if (threads > blocks) threads = blocks;
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  if (threads < 1) threads = 1;
  Steps part[MAX_THREADS];
  pthread_t id[MAX_THREADS];
  for (int i = 0; i < threads; i++) {
    Steps s = {method, N, n, G, LANES * (blocks * i / threads), LANES * (blocks * (i + 1) / threads), k,
               X, M, y, alpha, beta1, beta2, B, B1, B2, R, D};
    part[i] = s;
  }
  if (threads == 1) {
    run_steps(&part[0]);
    return;
  }
  int started = 1;
  while (started < threads && !pthread_create(&id[started], 0, steps, &part[started])) started++;
  for (int i = started; i < threads; i++) steps(&part[i]);
  steps(&part[0]);
  for (int i = 1; i < started; i++) pthread_join(id[i], 0);
}

/* ------------------------------------------------------------------------------------------------
 * Problems of their own: one X per configuration (the stacked N sweeps of Figures 13-24 and 27-29),
 * or one y per configuration, and the deep diagonal network (§C.11, Figures 30-35).
 *
 * Layout: configuration-major, as PyTorch holds it: iterate g at B + g * L * n ((L, n) factors for
 * the deep network, L = 1 and (n,) for the sparse methods); the rows of X (and of M = P^T for the
 * projected method) ld doubles apart, ld a multiple of 4 with zero columns after the n-th, and one
 * configuration's problem sx (sm, sy) doubles after the previous one's (0: shared). Configuration g
 * reads its first rows[g] rows only: the rows after them are zero, with y = 0 (the padding of
 * stack_problems), so their residual is exactly 0 and they add nothing.
 *
 * A thread takes one configuration at a time (from a shared counter, in the order `order` gives:
 * the longest first) and runs all k steps of the chunk on it, its problem in the core's caches. Its
 * arithmetic depends on nothing else, and its sums use 256-bit vectors in either build (the updates
 * are entry by entry), so the iterates are the same, bit for bit, on any number of threads and with
 * or without -mavx512f.
 * ---------------------------------------------------------------------------------------------- */

/* The sum of the four lanes of v. */
static inline double hsum(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* Rows [i, i + RB) of the sweep: their residuals r_q = x_q . c - y_q (A accumulators a row, over
 * every A-th vector), then d += r_q m_q, row after row. */
#define SWEEP(RB, A)                                                                                \
  do {                                                                                              \
    const double *x = X + (long)i * ld, *m = M + (long)i * ld;                                      \
    __m256d acc[RB][A], r[RB];                                                                      \
    for (int q = 0; q < RB; q++)                                                                    \
      for (int s = 0; s < A; s++) acc[q][s] = _mm256_setzero_pd();                                  \
    int j = 0;                                                                                      \
    for (; j + 4 * A <= ld; j += 4 * A)                                                             \
      for (int s = 0; s < A; s++) {                                                                 \
        __m256d cj = _mm256_loadu_pd(c + j + 4 * s);                                                \
        for (int q = 0; q < RB; q++)                                                                \
          acc[q][s] = _mm256_fmadd_pd(_mm256_loadu_pd(x + (long)q * ld + j + 4 * s), cj, acc[q][s]); \
      }                                                                                             \
    for (; j < ld; j += 4) {                                                                        \
      __m256d cj = _mm256_loadu_pd(c + j);                                                          \
      for (int q = 0; q < RB; q++)                                                                  \
        acc[q][0] = _mm256_fmadd_pd(_mm256_loadu_pd(x + (long)q * ld + j), cj, acc[q][0]);          \
    }                                                                                               \
    for (int q = 0; q < RB; q++) {                                                                  \
      for (int s = 1; s < A; s++) acc[q][0] = _mm256_add_pd(acc[q][0], acc[q][s]);                 \
      r[q] = _mm256_set1_pd(hsum(acc[q][0]) - y[i + q]);                                            \
    }                                                                                               \
    for (j = 0; j < ld; j += 4) {                                                                   \
      __m256d dj = _mm256_loadu_pd(d + j);                                                          \
      for (int q = 0; q < RB; q++) dj = _mm256_fmadd_pd(r[q], _mm256_loadu_pd(m + (long)q * ld + j), dj); \
      _mm256_storeu_pd(d + j, dj);                                                                  \
    }                                                                                               \
  } while (0)

/* d = M^T (X c - y) over the first `rows` rows, in one sweep: each row of X is read once for both
 * products (M = X: the gradient X^T r; M = P^T: the projection's P r). c, d: ld doubles. */
static void sweep(int rows, int ld, const double *X, const double *M, const double *y, const double *c,
                  double *d) {
  memset(d, 0, sizeof(double) * (size_t)ld);
  int i = 0;
  for (; i + 4 <= rows; i += 4) SWEEP(4, 2); /* 8 chains of multiply-adds, 5 loads for 4 of them */
  for (; i < rows; i++) SWEEP(1, 4);
}

/* The arguments of grokkit_problem_steps, shared by its threads (`next`: the next entry of order). */
typedef struct {
  int method, G, N, n, ld, L;
  long k;
  const double *X, *M, *y;
  long sx, sm, sy;
  const int *rows, *depth, *order;
  const double *alpha, *beta1, *beta2;
  double *B, *B1, *B2;
  int next;
} Problems;

/* k updates of sparse configuration g (method 0: eq. 22, 1: eq. 86, 2: §C.7) as the PyTorch steps
 * order them, in `work` (3 ld doubles). */
static void sparse_configuration(const Problems *p, int g, double *work) {
  int n = p->n, ld = p->ld, rows = p->rows[g];
  const double *X = p->X + g * p->sx, *M = p->M + g * p->sm, *y = p->y + g * p->sy;
  double a = p->alpha[g], b1 = p->beta1[g], b2 = p->beta2[g];
  double *b = work, *c = b + ld, *d = c + ld;
  size_t row = sizeof(double) * (size_t)n;
  memset(work, 0, sizeof(double) * 3 * (size_t)ld);
  memcpy(b, p->B + (long)g * n, row);
  for (long t = 0; t < p->k; t++) {
    if (t >= p->k - 2) {
      memcpy(p->B2 + (long)g * n, p->B1 + (long)g * n, row);
      memcpy(p->B1 + (long)g * n, b, row);
    }
    if (p->method == 2) {
      for (int j = 0; j < n; j++) c[j] = b[j] - a * (b1 * sign(b[j]) + b2 * b[j]);
      sweep(rows, ld, X, M, y, c, d); /* P (X c - y) */
      for (int j = 0; j < n; j++) b[j] = c[j] - d[j];
    } else {
      sweep(rows, ld, X, X, y, b, d); /* X^T (X b - y) */
      if (p->method == 0) {
        for (int j = 0; j < n; j++) b[j] -= a * (d[j] + (b1 * sign(b[j]) + b2 * b[j]));
      } else {
        double gamma = a * b1;
        for (int j = 0; j < n; j++) { /* z - clip(z, -gamma, gamma), in a form that vectorises */
          double z = b[j] - a * (d[j] + b2 * b[j]);
          b[j] = z - (z < -gamma ? -gamma : z > gamma ? gamma : z);
        }
      }
    }
  }
  memcpy(p->B + (long)g * n, b, row);
}

/* sign(v) of each lane (0 at 0), as sign() does. */
static inline __m256d vsign(__m256d v) {
  __m256d one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd();
  return _mm256_sub_pd(_mm256_and_pd(_mm256_cmp_pd(v, zero, _CMP_GT_OQ), one),
                       _mm256_and_pd(_mm256_cmp_pd(v, zero, _CMP_LT_OQ), one));
}

/* k updates of the deep configuration g (eq. 88), in `work` ((2 L + 2) ld doubles), 4 entries at a
 * time: b = B_0 ... B_{D-1} left to right, keeping before_l = B_0 ... B_{l-1}; then, from the last
 * layer down, after_l = B_{D-1} ... B_{l+1} and the update of B_l from the old factors (the cumulative
 * products of sparse._factor_terms, in their order). The D = depth[g] first factors move; the others
 * are ones. Zero columns after the n-th stay zero. */
static void deep_configuration(const Problems *p, int g, double *work) {
  int n = p->n, ld = p->ld, L = p->L, D = p->depth[g], rows = p->rows[g];
  const double *X = p->X + g * p->sx, *y = p->y + g * p->sy;
  __m256d a = _mm256_set1_pd(p->alpha[g]), b1 = _mm256_set1_pd(p->beta1[g]), b2 = _mm256_set1_pd(p->beta2[g]);
  double *F = work, *before = F + (long)L * ld, *b = before + (long)L * ld, *d = b + ld;
  size_t row = sizeof(double) * (size_t)n, all = row * (size_t)L;
  memset(work, 0, sizeof(double) * (2 * (size_t)L + 2) * (size_t)ld);
  for (int l = 0; l < L; l++) memcpy(F + (long)l * ld, p->B + ((long)g * L + l) * n, row);
  for (long t = 0; t < p->k; t++) {
    if (t >= p->k - 2) {
      memcpy(p->B2 + (long)g * L * n, p->B1 + (long)g * L * n, all);
      for (int l = 0; l < L; l++) memcpy(p->B1 + ((long)g * L + l) * n, F + (long)l * ld, row);
    }
    for (int j = 0; j < ld; j += 4) {
      __m256d prod = _mm256_set1_pd(1.0);
      for (int l = 0; l < D; l++) {
        _mm256_storeu_pd(before + (long)l * ld + j, prod);
        prod = _mm256_mul_pd(prod, _mm256_loadu_pd(F + (long)l * ld + j));
      }
      _mm256_storeu_pd(b + j, prod);
    }
    sweep(rows, ld, X, X, y, b, d); /* X^T (X b - y) */
    for (int j = 0; j < ld; j += 4) {
      __m256d after = _mm256_set1_pd(1.0), dj = _mm256_loadu_pd(d + j);
      for (int l = D - 1; l >= 0; l--) {
        __m256d f = _mm256_loadu_pd(F + (long)l * ld + j);
        __m256d grad = _mm256_mul_pd(dj, _mm256_mul_pd(_mm256_loadu_pd(before + (long)l * ld + j), after));
        __m256d update = _mm256_add_pd(_mm256_add_pd(grad, _mm256_mul_pd(b1, vsign(f))), _mm256_mul_pd(b2, f));
        _mm256_storeu_pd(F + (long)l * ld + j, _mm256_sub_pd(f, _mm256_mul_pd(a, update)));
        after = _mm256_mul_pd(after, f);
      }
    }
  }
  for (int l = 0; l < L; l++) memcpy(p->B + ((long)g * L + l) * n, F + (long)l * ld, row);
}

/* w^(D-1), lane by lane (1 for D = 1), by repeated products: W ** (D - 1) in the PyTorch steps, W for D = 2. */
static inline __m256d vpower(__m256d w, int D) {
  __m256d out = D > 1 ? w : _mm256_set1_pd(1.0);
  for (int l = 2; l < D; l++) out = _mm256_mul_pd(out, w);
  return out;
}

/* [sum of a0's lanes, a1's, a2's, a3's]. */
static inline __m256d hsum4(__m256d a0, __m256d a1, __m256d a2, __m256d a3) {
  __m256d t0 = _mm256_hadd_pd(a0, a1), t1 = _mm256_hadd_pd(a2, a3);
  return _mm256_add_pd(_mm256_permute2f128_pd(t0, t1, 0x20), _mm256_permute2f128_pd(t0, t1, 0x31));
}

/* beta = w+^D - w-^D for 4 entries. */
static inline __m256d diagonal_beta(__m256d p, __m256d m, int D) {
  return _mm256_sub_pd(_mm256_mul_pd(p, vpower(p, D)), _mm256_mul_pd(m, vpower(m, D)));
}

/* z = X beta over the lr rows (a multiple of 4), X given by columns: column j at Xt + j lr. */
static void diagonal_forward(int lr, int ld, int D, const double *Xt, const double *wp, const double *wm,
                             double *z) {
  memset(z, 0, sizeof(double) * (size_t)lr);
  for (int j = 0; j < ld; j += 4) {
    double beta[4];
    _mm256_storeu_pd(beta, diagonal_beta(_mm256_loadu_pd(wp + j), _mm256_loadu_pd(wm + j), D));
    for (int c = 0; c < 4; c++) {
      const double *x = Xt + (long)(j + c) * lr;
      __m256d b = _mm256_set1_pd(beta[c]);
      for (int q = 0; q < lr; q += 4) _mm256_storeu_pd(z + q, _mm256_fmadd_pd(_mm256_loadu_pd(x + q), b, _mm256_loadu_pd(z + q)));
    }
  }
}

/* k updates of the diagonal network g (method 4: square loss, 5: logistic; Woodworth et al. eq. 10,
 * Lyu et al. eq. 4): the branches w+ = B_g0 and w- = B_g1, beta = w+^D - w-^D (D = depth[g]),
 *   w+- <- w+- - alpha (+-D w+-^(D-1) (X^T r) + beta1 sign(w+-) + beta2 w+-),
 * r = X beta - y (square) or -y sigma(-y X beta) / N (logistic), as the PyTorch steps order them,
 * in `work` (2 ld + 2 lr doubles). X comes by columns (Xt: ld columns of lr doubles, lr = N rounded
 * up to 4, zero rows and columns after the last) and is read once a step, in order: 4 columns give
 * their 4 entries of X^T r, the entries are updated, and the same columns (in the first-level
 * cache) add their new beta to X beta for the next step. Where X outgrows the caches (Lyu et al.'s
 * n = 1e5) the PyTorch steps read it from memory twice a step. */
static void diagonal_configuration(const Problems *p, int g, double *work) {
  int n = p->n, ld = p->ld, D = p->depth[g], rows = p->rows[g], lr = (p->N + 3) & ~3, logistic = p->method == 5;
  const double *Xt = p->X + g * p->sx, *y = p->y + g * p->sy;
  __m256d a = _mm256_set1_pd(p->alpha[g]), b1 = _mm256_set1_pd(p->beta1[g]), b2 = _mm256_set1_pd(p->beta2[g]);
  __m256d depth = _mm256_set1_pd((double)D), zero = _mm256_setzero_pd();
  double *wp = work, *wm = wp + ld, *z = wm + ld, *r = z + lr;
  size_t row = sizeof(double) * (size_t)n;
  memset(work, 0, sizeof(double) * (2 * (size_t)ld + 2 * (size_t)lr));
  memcpy(wp, p->B + (long)g * 2 * n, row);
  memcpy(wm, p->B + ((long)g * 2 + 1) * n, row);
  diagonal_forward(lr, ld, D, Xt, wp, wm, z);
  for (long t = 0; t < p->k; t++) {
    if (t >= p->k - 2) {
      memcpy(p->B2 + (long)g * 2 * n, p->B1 + (long)g * 2 * n, 2 * row);
      memcpy(p->B1 + (long)g * 2 * n, wp, row);
      memcpy(p->B1 + ((long)g * 2 + 1) * n, wm, row);
    }
    for (int q = 0; q < rows; q++)
      r[q] = logistic ? 1.0 / (1.0 + exp(y[q] * z[q])) * y[q] * (-1.0 / p->N) /* sigmoid(-y z) y (-1/N) */
                      : z[q] - y[q];
    memset(z, 0, sizeof(double) * (size_t)lr);
    for (int j = 0; j < ld; j += 4) {
      const double *x = Xt + (long)j * lr;
      __m256d acc[4] = {zero, zero, zero, zero};
      for (int q = 0; q < lr; q += 4) {
        __m256d rq = _mm256_loadu_pd(r + q);
        for (int c = 0; c < 4; c++) acc[c] = _mm256_fmadd_pd(_mm256_loadu_pd(x + (long)c * lr + q), rq, acc[c]);
      }
      __m256d grad = _mm256_mul_pd(hsum4(acc[0], acc[1], acc[2], acc[3]), depth);
      __m256d w[2] = {_mm256_loadu_pd(wp + j), _mm256_loadu_pd(wm + j)}, next[2];
      for (int s = 0; s < 2; s++) {
        __m256d update = _mm256_mul_pd(vpower(w[s], D), s ? _mm256_sub_pd(zero, grad) : grad);
        update = _mm256_add_pd(update, _mm256_mul_pd(b1, vsign(w[s])));
        update = _mm256_add_pd(update, _mm256_mul_pd(b2, w[s]));
        next[s] = _mm256_sub_pd(w[s], _mm256_mul_pd(a, update));
      }
      _mm256_storeu_pd(wp + j, next[0]);
      _mm256_storeu_pd(wm + j, next[1]);
      double beta[4];
      _mm256_storeu_pd(beta, diagonal_beta(next[0], next[1], D));
      for (int c = 0; c < 4; c++) {
        __m256d b = _mm256_set1_pd(beta[c]);
        for (int q = 0; q < lr; q += 4)
          _mm256_storeu_pd(z + q, _mm256_fmadd_pd(_mm256_loadu_pd(x + (long)c * lr + q), b, _mm256_loadu_pd(z + q)));
      }
    }
  }
  memcpy(p->B + (long)g * 2 * n, wp, row);
  memcpy(p->B + ((long)g * 2 + 1) * n, wm, row);
}

/* One thread: configurations from the shared counter until none is left, in a work space of its own
 * (none taken if it cannot allocate one: the others do them). */
static void *problem_worker(void *arg) {
  Problems *p = arg;
  size_t doubles = (2 * (size_t)p->L + 2) * (size_t)p->ld; /* deep; >= 3 ld, sparse */
  if (p->method >= 4) doubles = 2 * (size_t)p->ld + 2 * (size_t)((p->N + 3) & ~3); /* diagonal: w+-, z, r */
  double *work = 0;
  if (posix_memalign((void **)&work, 64, sizeof(double) * doubles)) return 0;
  for (int i; (i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED)) < p->G;) {
    if (p->method >= 4)
      diagonal_configuration(p, p->order[i], work);
    else if (p->method == 3)
      deep_configuration(p, p->order[i], work);
    else
      sparse_configuration(p, p->order[i], work);
  }
  free(work);
  return 0;
}

/* k updates of every configuration on `threads` threads. method 0, 1, 2: the sparse methods (L = 1,
 * depth unused; M = X for 0 and 1, P^T for 2); 3: the deep network, L layers, depth[g] of them moving
 * (M unused); 4, 5: the diagonal network with the square or the logistic loss (L = 2 branches, M
 * unused, X by columns: ld columns of N rounded up to 4 doubles). N: the rows of X (the logistic
 * loss averages over them). Returns 0 where no thread could
 * allocate its work space (then nothing was done). */
int grokkit_problem_steps(int method, int G, int N, int n, int ld, int L, long k, int threads, const double *X,
                          long sx, const double *M, long sm, const double *y, long sy, const int *rows,
                          const int *depth, const int *order, const double *alpha, const double *beta1,
                          const double *beta2, double *B, double *B1, double *B2) {
  Problems p = {method, G, N, n, ld, L, k, X, M, y, sx, sm, sy, rows, depth, order, alpha, beta1, beta2, B, B1, B2, 0};
  if (threads > G) threads = G;
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  pthread_t id[MAX_THREADS];
  int started = 1;
  while (started < threads && !pthread_create(&id[started], 0, problem_worker, &p)) started++;
  problem_worker(&p);
  for (int i = 1; i < started; i++) pthread_join(id[i], 0);
  return p.next > G; /* a thread with a work space takes configurations until the counter passes G */
}
