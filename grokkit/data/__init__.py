"""The data of every chapter, one module each, as in :mod:`grokkit.kernels` and :mod:`grokkit.theory`:

- :mod:`grokkit.data.sparse`: sparse recovery (§2, Appendix C): signals, dictionaries, measurements,
  ``problem`` and the sweeps over N and (s, N);
- :mod:`grokkit.data.matrix`: matrix factorization (§2, Appendix D): low-rank matrices, completion
  and sensing, ``problem``; and the vectorisations and products of Appendix B;
- :mod:`grokkit.data.nets`: the networks' tasks (§3, Appendix E): teacher–student, modular addition,
  MNIST;
- :mod:`grokkit.data.background`: Woodworth et al. (2020) and Lyu et al. (2024).

Every draw uses its own ``numpy.random.RandomState(seed)`` (never the global state), in float64.
"""
from grokkit.data import background, matrix, nets, sparse

__all__ = ["sparse", "matrix", "nets", "background"]
