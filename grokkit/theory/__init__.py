"""The theory's predictions, one module per chapter, as in :mod:`grokkit.data` and :mod:`grokkit.kernels`:

- :mod:`grokkit.theory.sparse`: sparse recovery (Theorem 2.1, Appendix C): ρ, the memorization
  and generalization times, the ℓ1 dynamics, the least-squares residual, coherence and RIP;
- :mod:`grokkit.theory.matrix`: matrix factorization (Theorem 2.2, Appendix D): the same quantities
  on vec A, the nuclear norm's subgradients and dynamics, and the deep factorization's gradients;
- :mod:`grokkit.theory.convergence`: the subgradient method's guarantees, shared by both
  chapters (Theorems C.3, C.13, C.14, D.4, D.13, Corollary D.1);
- :mod:`grokkit.theory.background`: Woodworth et al. (2020) and Lyu et al. (2024).

The hyper-parameters are checked as the kernels check them (:math:`\\alpha > 0`,
:math:`\\beta_1, \\beta_2, \\beta_* \\ge 0`, all finite), before any compute.
"""
from grokkit.theory import background, convergence, matrix, sparse

__all__ = ["sparse", "matrix", "convergence", "background"]
