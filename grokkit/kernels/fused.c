/* Fused CPU steps of the sparse-recovery kernels (grokkit/kernels/sparse.py), float64, AVX-512 (8
 * configurations a register) where the compiler is given -mavx512f, else AVX2/FMA (4).
 *
 * Iterates are stored configuration-contiguous: B[j * G + g] is b_j of configuration g, so one
 * register-blocked product serves every configuration of a grid, and configurations never mix:
 * each one's arithmetic is the same whatever the batch, and whatever the vector width: a lane
 * does the same fused multiply-adds in the same order in both builds. The caller pads the number
 * of configurations to a multiple of LANES (grokkit_lanes()). A run may split its configurations
 * over threads (ranges of whole blocks of LANES): they share nothing but the problem, so the
 * iterates are the same, bit for bit, on one thread or several.
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
