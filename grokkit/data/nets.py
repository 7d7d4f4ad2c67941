r"""The data of the neural-network experiments (paper §3, Appendix E): the teacher–student
(E.1, E.2), modular-addition (E.3) and MNIST (E.4) tasks.

Tasks are torch tensors on the CPU: inputs float32, regression targets float32 (N, c), class
labels int64 (N,). Every draw uses its own ``numpy.random.RandomState(seed)``, never the global
state (the authors' notebooks draw the teacher and the inputs unseeded).
"""
from __future__ import annotations

import dataclasses
import gzip
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from grokkit._checks import check_finite, check_int, check_option, check_range, check_seed, show
from grokkit.kernels.run import resolve_device

KINDS = ("regression", "classification")
ENCODINGS = ("one_hot", "sequence")
MNIST_ENV = "GROKKIT_MNIST"
MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
               "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


@dataclass(frozen=True, eq=False)
class Task:
    r"""One supervised task of the paper's Section 3 (torch tensors, on the CPU when made).

    ``kind`` is ``"regression"`` (targets float32 (N, c)) or ``"classification"`` (labels int64
    (N,) in ``[0, n_classes)``). ``J_train`` and ``J_test`` are the teacher's Jacobians
    :math:`\partial y^*/\partial x` (N, c, d), float32, for Sobolev training (E.2), else ``None``.
    ``note`` says in one sentence where the data came from.
    """

    name: str
    kind: str
    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int | None = None
    J_train: torch.Tensor | None = None
    J_test: torch.Tensor | None = None
    note: str = ""

    def __post_init__(self):
        check_option("kind", self.kind, KINDS)

    def to(self, device: str | torch.device) -> Task:
        """A copy with every tensor on ``device`` (as in :func:`grokkit.kernels.resolve_device`)."""
        device = resolve_device(device)
        moved = {f.name: getattr(self, f.name).to(device) for f in dataclasses.fields(self)
                 if isinstance(getattr(self, f.name), torch.Tensor)}
        return dataclasses.replace(self, **moved)


def _net_matrix(name: str, a, columns: int | None = None, columns_name: str = ""):
    """``a`` (numpy or torch) checked as a finite 2-D array with ``columns`` columns."""
    if not isinstance(a, torch.Tensor):
        try:
            a = np.asarray(a, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a 2-D array of numbers, got {show(a)}") from None
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got shape {tuple(a.shape)}")
    if columns is not None and a.shape[1] != columns:
        raise ValueError(f"{name} must have {columns_name} = {columns} columns, got shape {tuple(a.shape)}")
    check_finite(name, a)
    return a


def teacher_jacobian(A, B, X):
    r"""Jacobians of the teacher :math:`y^*(x) = B^*\,\mathrm{ReLU}(A^* x)` at the rows of ``X``
    (Appendix E.2): :math:`J_i = B^*\operatorname{diag}(\mathbb 1[A^* x_i > 0])\,A^*`.

    ``A`` (width, d), ``B`` (c, width), ``X`` (N, d), finite, all numpy or all torch; returns
    (N, c, d) of the same kind (torch: the promoted dtype of the three). The ReLU's derivative is
    taken as 0 at 0, as ``derivatives_2layers_nn`` of the authors' Sobolev notebook.
    """
    as_torch = any(isinstance(a, torch.Tensor) for a in (A, B, X))
    if as_torch and not all(isinstance(a, torch.Tensor) for a in (A, B, X)):
        raise ValueError("A, B and X must be all numpy arrays or all torch tensors, got "
                         + ", ".join(type(a).__name__ for a in (A, B, X)))
    A = _net_matrix("A", A)
    B = _net_matrix("B", B, A.shape[0], "width = A.shape[0]")
    X = _net_matrix("X", X, A.shape[1], "d = A.shape[1]")
    if as_torch:
        dtype = torch.promote_types(torch.promote_types(A.dtype, B.dtype), X.dtype)
        A, B, X = (a.to(dtype) for a in (A, B, X))
        active = (X @ A.T > 0).to(dtype)                        # (N, width)
    else:
        active = (X @ A.T > 0).astype(float)
    return (B[None, :, :] * active[:, None, :]) @ A             # (N, c, width) @ (width, d)


def teacher_student(d: int = 100, width: int = 500, c: int = 2, n_train: int = 100, n_test: int = 1000,
                    *, seed: int = 0) -> Task:
    r"""The teacher–student regression task of Appendix E.1–E.2 (Figures 3, 47–50).

    Teacher :math:`y^*(x) = B^*\,\mathrm{ReLU}(A^* x)`, :math:`\mathbb R^d\to\mathbb R^c`, no
    biases, with :math:`A^*\in\mathbb R^{\text{width}\times d}`, :math:`A^*_{ij}\sim\mathcal N(0,1)`
    and :math:`B^*\in\mathbb R^{c\times\text{width}}`, :math:`\text{width}\cdot B^*_{ij}\sim\mathcal N(0,1)`
    (the authors' ``non_linear_teacher_student.ipynb``); inputs :math:`x\sim\mathcal N(0, I_d)`. The task carries the outputs and the
    teacher's Jacobians (:func:`teacher_jacobian`, for Sobolev training), not the teacher.

    One ``RandomState(seed)`` draws, in this order, :math:`A^*`, :math:`B^*`, the ``n_train``
    training inputs and the ``n_test`` test inputs (float64, then stored as float32).
    Every argument is checked before anything is drawn (``ValueError`` naming it).
    """
    d = check_int("d", d, 1)
    width = check_int("width", width, 1)
    c = check_int("c", c, 1)
    n_train = check_int("n_train", n_train, 1)
    n_test = check_int("n_test", n_test, 1)
    seed = check_seed("seed", seed)
    rs = np.random.RandomState(seed)
    A = rs.standard_normal((width, d))
    B = rs.standard_normal((c, width)) / width
    X = rs.standard_normal((n_train + n_test, d))
    y = np.maximum(X @ A.T, 0.0) @ B.T
    J = teacher_jacobian(A, B, X)

    def f32(a):
        return torch.as_tensor(a, dtype=torch.float32)

    return Task(name="teacher_student", kind="regression",
                   X_train=f32(X[:n_train]), y_train=f32(y[:n_train]),
                   X_test=f32(X[n_train:]), y_test=f32(y[n_train:]), n_classes=None,
                   J_train=f32(J[:n_train]), J_test=f32(J[n_train:]),
                   note=f"A random ReLU teacher (d={d}, width={width}, c={c}, no biases) on Gaussian "
                        f"inputs, {n_train} training and {n_test} test points, drawn with seed {seed}.")


def modular_addition(p: int = 97, train_fraction: float = 0.4, *, encoding: str = "one_hot",
                     seed: int = 0) -> Task:
    r"""Modular addition (Appendix E.3, Figures 51–56): all :math:`p^2` pairs :math:`(x_1, x_2)`,
    label :math:`(x_1 + x_2) \bmod p`, ``n_classes = p``.

    The split is a seeded random permutation of the pairs (pair :math:`x_1 p + x_2`) whose first
    :math:`\lfloor \text{train\_fraction}\cdot p^2\rfloor` are the training set: the floor of
    scikit-learn's ``train_test_split(train_size=train_fraction)`` that the authors' code uses
    (3763 training and 5646 test pairs for p = 97 and 0.4, where rounding would give 3764).

    ``encoding``: ``"one_hot"``, X float32 (N, 2, p), row k the one-hot vector of :math:`x_{k+1}`
    (the MLP's input, as in the authors' ``neural_nets/mlp.py``); ``"sequence"``, X int64 (N, 4), the tokens
    :math:`[x_1, p, x_2, p + 1]` (p is "+", p + 1 is "="; a vocabulary of p + 2 tokens, the
    LSTM's input of Figures 54–56).

    Every argument is checked before anything is drawn (``ValueError`` naming it); so is a split
    that leaves the training or the test set empty.
    """
    p = check_int("p", p, 2)
    train_fraction = check_range("train_fraction", train_fraction, 0.0, 1.0, closed="neither")
    encoding = check_option("encoding", encoding, ENCODINGS)
    seed = check_seed("seed", seed)
    pairs = p * p
    n_train = math.floor(train_fraction * pairs)      # sklearn's rule for a float train_size
    if not 1 <= n_train <= pairs - 1:
        raise ValueError(f"train_fraction must leave at least one training and one test pair, i.e. "
                         f"floor(train_fraction * p**2) in [1, p**2 - 1] = [1, {pairs - 1}], "
                         f"got {show(train_fraction)} (floor({show(train_fraction)} * {pairs}) = {n_train})")
    order = np.random.RandomState(seed).permutation(pairs)
    x1, x2 = order // p, order % p
    labels = torch.as_tensor((x1 + x2) % p, dtype=torch.int64)
    if encoding == "one_hot":
        X = torch.zeros(pairs, 2, p, dtype=torch.float32)
        rows = torch.arange(pairs)
        X[rows, 0, torch.as_tensor(x1)] = 1.0
        X[rows, 1, torch.as_tensor(x2)] = 1.0
    else:
        X = torch.as_tensor(np.stack([x1, np.full(pairs, p), x2, np.full(pairs, p + 1)], axis=1),
                            dtype=torch.int64)
    return Task(name="modular_addition", kind="classification",
                   X_train=X[:n_train].clone(), y_train=labels[:n_train].clone(),
                   X_test=X[n_train:].clone(), y_test=labels[n_train:].clone(), n_classes=p,
                   note=f"All {pairs} pairs of (x1 + x2) mod {p}, encoded {encoding}, split by seed {seed} "
                        f"into {n_train} training and {pairs - n_train} test pairs.")


def _mnist_files(folder: Path, source: str) -> dict[str, Path]:
    """The four MNIST IDX files in ``folder`` or ``folder/MNIST/raw`` (each plain or ``.gz``)."""
    if not folder.is_dir():
        raise FileNotFoundError(f"MNIST folder {str(folder)!r} ({source}) does not exist or is not a folder")
    missing = {}
    for where in (folder, folder / "MNIST" / "raw"):
        found = {}
        for name in MNIST_FILES:
            path = next((where / (name + ext) for ext in ("", ".gz") if (where / (name + ext)).is_file()), None)
            if path is not None:
                found[name] = path
        if len(found) == len(MNIST_FILES):
            return found
        missing[where] = [name for name in MNIST_FILES if name not in found]
    raise FileNotFoundError(
        f"MNIST folder {str(folder)!r} ({source}) lacks the MNIST IDX files: "
        + "; ".join(f"{str(where)!r} misses {', '.join(names)}" for where, names in missing.items())
        + " (each file may also be gzipped, with a .gz suffix)")


def _read_idx(path: Path) -> np.ndarray:
    import idx2numpy
    with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as f:
        try:
            return idx2numpy.convert_from_string(f.read())
        except (idx2numpy.FormatError, ValueError, OSError) as error:
            raise ValueError(f"{str(path)!r} is not an IDX file: {error}") from None


def _mnist_split(images_path: Path, labels_path: Path) -> tuple[np.ndarray, np.ndarray]:
    images, labels = _read_idx(images_path), _read_idx(labels_path)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(f"{str(images_path)!r} must hold uint8 images (N, height, width), "
                         f"got {images.dtype} of shape {images.shape}")
    if labels.shape != images.shape[:1] or labels.size and not 0 <= labels.min() <= labels.max() <= 9:
        raise ValueError(f"{str(labels_path)!r} must hold {images.shape[0]} labels in [0, 9], "
                         f"got shape {labels.shape}")
    return images.reshape(images.shape[0], -1).astype(np.float32) / 255.0, labels.astype(np.int64)


def mnist(folder: str | os.PathLike | None = None, *, n_train: int = 1000, n_test: int = 1000,
          seed: int = 0) -> Task:
    r"""Digit classification (Appendix E.4, Figure 57): ``n_train`` and ``n_test`` images drawn
    (seeded, without replacement) from MNIST's training and test files, scaled to [0, 1] and
    flattened (28·28 = 784 features), labels int64 in [0, 9].

    ``folder`` (else the environment variable ``GROKKIT_MNIST``) holds the standard IDX files
    ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte`` and
    ``t10k-labels-idx1-ubyte``, each possibly gzipped (``.gz``), in the folder itself or in
    ``folder/MNIST/raw`` as torchvision lays them out; they are read with ``idx2numpy``
    (torchvision is not used: the registry's torchvision wheel is a CUDA build that does not
    import against the project's CPU torch). Nothing is ever downloaded. A folder that was named
    and does not exist or lacks a file is a ``FileNotFoundError`` naming it and the missing files.

    With no folder named (neither argument nor variable), the task is scikit-learn's bundled
    UCI optical-recognition digits instead (1797 images, 8·8 = 64 features, values 0–16 scaled
    to [0, 1]; *not MNIST*, said in ``note``): a seeded split of ``n_train`` training images
    (at most 1796) and ``min(n_test, 1797 - n_train)`` test images (797 for ``n_train=1000``).

    The arguments are checked before anything is read (``ValueError`` naming them); ``n_train``
    and ``n_test`` against the sizes of the files once read.
    """
    if folder is not None and not isinstance(folder, (str, os.PathLike)):
        raise ValueError(f"folder must be a path (str or os.PathLike) or None, got {show(folder)}")
    n_train = check_int("n_train", n_train, 1)
    n_test = check_int("n_test", n_test, 1)
    seed = check_seed("seed", seed)
    source = "the folder argument"
    if folder is None:
        folder = os.environ.get(MNIST_ENV, "").strip() or None
        source = f"the environment variable {MNIST_ENV}"
    rs = np.random.RandomState(seed)
    if folder is None:
        from sklearn.datasets import load_digits
        digits = load_digits()
        total = digits.data.shape[0]
        n_train = check_int("n_train", n_train, 1, total - 1, high_name="the digits less one")
        n_test = min(n_test, total - n_train)
        order = rs.permutation(total)
        X = digits.data.astype(np.float32) / 16.0
        y = digits.target.astype(np.int64)
        train, test = order[:n_train], order[n_train:n_train + n_test]
        note = (f"scikit-learn's bundled UCI optical-recognition 8x8 digits (not MNIST: no MNIST folder "
                f"was named with folder or {MNIST_ENV}), {n_train} training and {n_test} test images "
                f"drawn with seed {seed}.")
        X_train, y_train, X_test, y_test = X[train], y[train], X[test], y[test]
    else:
        folder = Path(folder).expanduser()
        files = _mnist_files(folder, source)
        X_tr, y_tr = _mnist_split(files[MNIST_FILES[0]], files[MNIST_FILES[1]])
        X_te, y_te = _mnist_split(files[MNIST_FILES[2]], files[MNIST_FILES[3]])
        n_train = check_int("n_train", n_train, 1, len(y_tr), high_name="the training images")
        n_test = check_int("n_test", n_test, 1, len(y_te), high_name="the test images")
        train = rs.choice(len(y_tr), n_train, replace=False)
        test = rs.choice(len(y_te), n_test, replace=False)
        X_train, y_train, X_test, y_test = X_tr[train], y_tr[train], X_te[test], y_te[test]
        note = (f"MNIST read from {str(files[MNIST_FILES[0]].parent)!r}, {n_train} training and "
                f"{n_test} test images drawn with seed {seed}.")
    return Task(name="mnist", kind="classification",
                   X_train=torch.as_tensor(X_train), y_train=torch.as_tensor(y_train),
                   X_test=torch.as_tensor(X_test), y_test=torch.as_tensor(y_test), n_classes=10, note=note)
