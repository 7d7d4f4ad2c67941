/* Fused CPU steps of the sparse-recovery kernels (grokkit/kernels/sparse.py), float64, AVX2/FMA.
 *
 * Iterates are stored configuration-contiguous: B[j * G + g] is b_j of configuration g, so one
 * register-blocked product serves every configuration of a grid, and configurations never mix:
 * each one's arithmetic is the same whatever the batch. The caller pads the number of
 * configurations to a multiple of 4.
 * Compiled on first use by grokkit/kernels/fused.py; the PyTorch steps are the reference.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

/* Rows [r, r + RB) of out[r, g] = sum_i A[r, i] V[i, g] - sub[r] for configurations [g, g + 4 * CB). */
#define BLOCK(RB, CB)                                                                               \
  do {                                                                                              \
    __m256d acc[RB][CB];                                                                            \
    for (int q = 0; q < RB; q++)                                                                    \
      for (int c = 0; c < CB; c++) acc[q][c] = _mm256_setzero_pd();                                 \
    for (int i = 0; i < inner; i++) {                                                               \
      __m256d v[CB];                                                                                \
      for (int c = 0; c < CB; c++) v[c] = _mm256_loadu_pd(V + (long)i * G + g + 4 * c);             \
      for (int q = 0; q < RB; q++) {                                                                \
        __m256d x = _mm256_broadcast_sd(A + (long)(r + q) * inner + i);                             \
        for (int c = 0; c < CB; c++) acc[q][c] = _mm256_fmadd_pd(x, v[c], acc[q][c]);               \
      }                                                                                             \
    }                                                                                               \
    for (int q = 0; q < RB; q++)                                                                    \
      for (int c = 0; c < CB; c++)                                                                  \
        _mm256_storeu_pd(out + (long)(r + q) * G + g + 4 * c,                                       \
                         _mm256_sub_pd(acc[q][c], _mm256_set1_pd(sub ? sub[r + q] : 0.0)));         \
  } while (0)

/* out[r, g] = sum_i A[r, i] V[i, g] - sub[r] (sub may be NULL) for every row and configurations
 * [g0, g1), (g1 - g0) % 4 == 0: blocks of 4 rows x 12 configurations (12 accumulators, 3 loads
 * and a broadcast: the 16 AVX2 registers), then the remainders. */
static void product(int rows, int inner, int G, int g0, int g1, const double *A, const double *V,
                    const double *sub, double *out) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    int g = g0;
    for (; g + 12 <= g1; g += 12) BLOCK(4, 3);
    for (; g + 8 <= g1; g += 8) BLOCK(4, 2);
    for (; g + 4 <= g1; g += 4) BLOCK(4, 1);
  }
  for (; r < rows; r++) {
    int g = g0;
    for (; g + 8 <= g1; g += 8) BLOCK(1, 2);
    for (; g + 4 <= g1; g += 4) BLOCK(1, 1);
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

/* k updates of every configuration; B holds the iterate, B1 and B2 receive the two before the last. */
void grokkit_steps(int method, int N, int n, int G, long k, const double *X, const double *M,
                   const double *y, const double *alpha, const double *beta1, const double *beta2,
                   double *B, double *B1, double *B2, double *R, double *D) {
  for (long s = 0; s < k; s++) {
    if (s >= k - 2) {
      memcpy(B2, B1, sizeof(double) * (long)n * G);
      memcpy(B1, B, sizeof(double) * (long)n * G);
    }
    update(method, N, n, G, 0, G, X, M, y, alpha, beta1, beta2, B, R, D);
  }
}
