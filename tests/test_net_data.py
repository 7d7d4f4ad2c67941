"""Tests of grokkit.data's neural-network tasks (paper §3, Appendix E): teacher–student with the
teacher's Jacobians, modular addition, MNIST from IDX files (written here) and the digits fallback."""
import gzip
import math

import idx2numpy
import numpy as np
import pytest
import torch

import grokkit.data as data


# --- teacher–student (E.1, E.2) ---------------------------------------------------------------


@pytest.fixture(scope="module")
def small_teacher():
    return data.nets.teacher_student(d=6, width=11, c=3, n_train=8, n_test=5, seed=3)


def test_teacher_student_shapes_and_dtypes():
    task = data.nets.teacher_student()
    assert (task.name, task.kind, task.n_classes) == ("teacher_student", "regression", None)
    shapes = {k: tuple(getattr(task, k).shape) for k in ("X_train", "y_train", "X_test", "y_test", "J_train", "J_test")}
    assert shapes == {"X_train": (100, 100), "y_train": (100, 2), "X_test": (1000, 100), "y_test": (1000, 2),
                      "J_train": (100, 2, 100), "J_test": (1000, 2, 100)}
    assert all(getattr(task, k).dtype == torch.float32 for k in shapes)
    assert "teacher" in task.note and task.note.endswith(".")


def test_teacher_student_seeds_reproduce(small_teacher):
    again = data.nets.teacher_student(d=6, width=11, c=3, n_train=8, n_test=5, seed=3)
    other = data.nets.teacher_student(d=6, width=11, c=3, n_train=8, n_test=5, seed=4)
    for k in ("X_train", "y_train", "X_test", "y_test", "J_train", "J_test"):
        assert torch.equal(getattr(small_teacher, k), getattr(again, k))
    assert not torch.equal(small_teacher.X_train, other.X_train)
    assert not torch.equal(small_teacher.y_train, other.y_train)


def test_teacher_student_outputs_recomputed_in_numpy(small_teacher):
    """The documented draws (A*, then B*, then train and test inputs) give the stored data."""
    rs = np.random.RandomState(3)
    A = rs.standard_normal((11, 6))
    B = rs.standard_normal((3, 11)) / 11
    X = rs.standard_normal((13, 6))
    y = np.maximum(X @ A.T, 0) @ B.T
    t = small_teacher
    np.testing.assert_allclose(t.X_train.numpy(), X[:8], rtol=1e-6)
    np.testing.assert_allclose(t.X_test.numpy(), X[8:], rtol=1e-6)
    np.testing.assert_allclose(t.y_train.numpy(), y[:8], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(t.y_test.numpy(), y[8:], rtol=1e-5, atol=1e-7)
    J = data.nets.teacher_jacobian(A, B, X)
    np.testing.assert_allclose(t.J_train.numpy(), J[:8], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(t.J_test.numpy(), J[8:], rtol=1e-5, atol=1e-7)


def test_teacher_scale_and_homogeneity():
    """B* ~ N(0, 1/width²) (width·B* standard normal) and, the ReLU being positively homogeneous,
    y*(x) = J(x) x at every point."""
    task = data.nets.teacher_student(seed=1)
    J, X, y = task.J_train.double(), task.X_train.double(), task.y_train.double()
    torch.testing.assert_close(torch.einsum("ncd,nd->nc", J, X), y, rtol=1e-4, atol=1e-6)
    # y_k = sum_j B_kj relu(a_j x), var = width * E[relu(a x)^2] / width^2 = d / (2 width) = 0.1
    var = float(torch.cat([task.y_train, task.y_test]).var())
    assert 0.07 < var < 0.13


def test_teacher_jacobian_against_autograd():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(13, 7, generator=g, dtype=torch.float64)
    B = torch.randn(3, 13, generator=g, dtype=torch.float64) / 13
    X = torch.randn(5, 7, generator=g, dtype=torch.float64)
    J = data.nets.teacher_jacobian(A, B, X)
    assert J.shape == (5, 3, 7) and J.dtype == torch.float64
    for i in range(5):
        auto = torch.autograd.functional.jacobian(lambda x: B @ torch.relu(A @ x), X[i])
        torch.testing.assert_close(J[i], auto, rtol=1e-12, atol=1e-12)
    J_np = data.nets.teacher_jacobian(A.numpy(), B.numpy(), X.numpy())
    assert isinstance(J_np, np.ndarray)
    np.testing.assert_allclose(J_np, J.numpy(), rtol=1e-12, atol=1e-15)


def test_teacher_student_jacobians_against_autograd(small_teacher):
    rs = np.random.RandomState(3)
    A = torch.as_tensor(rs.standard_normal((11, 6)))
    B = torch.as_tensor(rs.standard_normal((3, 11)) / 11)
    for i in range(3):
        x = small_teacher.X_test[i].double()
        auto = torch.autograd.functional.jacobian(lambda v: B @ torch.relu(A @ v), x)
        torch.testing.assert_close(small_teacher.J_test[i].double(), auto, rtol=1e-5, atol=1e-6)


def test_net_task_to_device(small_teacher):
    moved = small_teacher.to("cpu")
    assert moved is not small_teacher and moved.note == small_teacher.note
    assert moved.J_train.device.type == "cpu" and torch.equal(moved.J_train, small_teacher.J_train)
    task = data.nets.modular_addition(5, 0.5).to(torch.device("cpu"))
    assert task.J_train is None and task.n_classes == 5
    with pytest.raises(ValueError, match=r"device must be one of 'auto', 'cpu', 'cuda', 'cuda:K' .*got 'gpu'"):
        small_teacher.to("gpu")
    with pytest.raises(ValueError, match=r"kind must be one of 'regression', 'classification', got 'ranking'"):
        data.nets.Task("x", "ranking", *[torch.zeros(1)] * 4)


# --- modular addition (E.3) -------------------------------------------------------------------


def test_modular_addition_paper_split():
    task = data.nets.modular_addition()
    assert (task.name, task.kind, task.n_classes) == ("modular_addition", "classification", 97)
    assert task.X_train.shape == (3763, 2, 97) and task.X_test.shape == (5646, 2, 97)
    assert task.X_train.dtype == torch.float32 and task.y_train.dtype == torch.int64
    assert task.y_train.shape == (3763,) and task.y_test.shape == (5646,)
    assert "3763 training and 5646 test" in task.note


def test_modular_addition_split_sizes_as_sklearn():
    from sklearn.model_selection import train_test_split
    for p, f in [(97, 0.4), (7, 0.3), (11, 0.5), (13, 0.25), (10, 0.07), (59, 0.9)]:
        train, test = train_test_split(np.arange(p * p), train_size=f, random_state=0)
        task = data.nets.modular_addition(p, f, encoding="sequence")
        assert (len(task.y_train), len(task.y_test)) == (len(train), len(test)) == (math.floor(f * p * p),
                                                                                    p * p - math.floor(f * p * p))


def test_modular_addition_one_hot_labels_and_partition():
    p = 11
    task = data.nets.modular_addition(p, 0.3, seed=2)
    X = torch.cat([task.X_train, task.X_test])
    y = torch.cat([task.y_train, task.y_test])
    assert torch.equal(X.sum(dim=2), torch.ones(p * p, 2))
    x1, x2 = X[:, 0].argmax(1), X[:, 1].argmax(1)
    assert torch.equal(y, (x1 + x2) % p)
    assert sorted((x1 * p + x2).tolist()) == list(range(p * p))     # every pair exactly once


def test_modular_addition_sequence_tokens():
    p = 13
    task = data.nets.modular_addition(p, 0.4, encoding="sequence", seed=5)
    one_hot = data.nets.modular_addition(p, 0.4, seed=5)
    X = task.X_train
    assert X.dtype == torch.int64 and X.shape == (67, 4) and task.X_test.shape == (p * p - 67, 4)
    assert (X[:, 1] == p).all() and (X[:, 3] == p + 1).all()
    assert int(torch.cat([X, task.X_test]).max()) == p + 1          # vocabulary p + 2
    assert torch.equal(task.y_train, (X[:, 0] + X[:, 2]) % p)
    assert torch.equal(X[:, 0], one_hot.X_train[:, 0].argmax(1))    # same split for both encodings
    assert torch.equal(X[:, 2], one_hot.X_train[:, 1].argmax(1))


def test_modular_addition_seeds_reproduce():
    a, b = data.nets.modular_addition(7, 0.5, seed=1), data.nets.modular_addition(7, 0.5, seed=1)
    c = data.nets.modular_addition(7, 0.5, seed=2)
    assert torch.equal(a.X_train, b.X_train) and torch.equal(a.y_test, b.y_test)
    assert not torch.equal(a.X_train, c.X_train)


# --- bad inputs -------------------------------------------------------------------------------


BAD = [
    (data.nets.teacher_student, dict(d=0), r"d must be an integer in \[1, inf\), got 0"),
    (data.nets.teacher_student, dict(width=2.5), r"width must be an integer in \[1, inf\), got 2.5"),
    (data.nets.teacher_student, dict(c=True), r"c must be an integer in \[1, inf\), got True"),
    (data.nets.teacher_student, dict(n_train=0), r"n_train must be an integer in \[1, inf\), got 0"),
    (data.nets.teacher_student, dict(n_test="10"), r"n_test must be an integer in \[1, inf\), got '10'"),
    (data.nets.teacher_student, dict(seed=-1), r"seed must be an integer in \[0, 2\*\*32 - 1\] \(a seed\), got -1"),
    (data.nets.teacher_student, dict(seed=1.0), r"seed must be an integer .*got 1.0"),
    (data.nets.modular_addition, dict(p=1), r"p must be an integer in \[2, inf\), got 1"),
    (data.nets.modular_addition, dict(p=97.5), r"p must be an integer in \[2, inf\), got 97.5"),
    (data.nets.modular_addition, dict(train_fraction=0.0), r"train_fraction must be in \(0.0, 1.0\), got 0.0"),
    (data.nets.modular_addition, dict(train_fraction=1), r"train_fraction must be in \(0.0, 1.0\), got 1"),
    (data.nets.modular_addition, dict(train_fraction=float("nan")), r"train_fraction must be in \(0.0, 1.0\), got nan"),
    (data.nets.modular_addition, dict(train_fraction="0.4"), r"train_fraction must be a number in \(0.0, 1.0\), got '0.4'"),
    (data.nets.modular_addition, dict(p=2, train_fraction=0.2),
     r"train_fraction must leave at least one training and one test pair, .*\[1, 3\], got 0.2 \(floor\(0.2 \* 4\) = 0\)"),
    (data.nets.modular_addition, dict(encoding="onehot"), r"encoding must be one of 'one_hot', 'sequence', got 'onehot'"),
    (data.nets.modular_addition, dict(seed=2**32), r"seed must be an integer in \[0, 2\*\*32 - 1\] \(a seed\), got 4294967296"),
    (data.nets.mnist, dict(folder=3), r"folder must be a path \(str or os.PathLike\) or None, got 3"),
    (data.nets.mnist, dict(n_train=0), r"n_train must be an integer in \[1, inf\), got 0"),
    (data.nets.mnist, dict(n_test=-5), r"n_test must be an integer in \[1, inf\), got -5"),
    (data.nets.mnist, dict(seed="0"), r"seed must be an integer .*got '0'"),
    (data.nets.mnist, dict(n_train=1797), r"n_train must be an integer in \[1, the digits less one\] = \[1, 1796\], got 1797"),
]


@pytest.mark.parametrize("function, kwargs, message", BAD, ids=[f"{f.__name__}-{sorted(k)[0]}-{i}"
                                                                  for i, (f, k, _) in enumerate(BAD)])
def test_bad_inputs_refused(function, kwargs, message, monkeypatch):
    monkeypatch.delenv(data.nets.MNIST_ENV, raising=False)
    with pytest.raises(ValueError, match=message):
        function(**kwargs)


def test_teacher_jacobian_bad_inputs():
    A, B, X = np.ones((5, 3)), np.ones((2, 5)), np.ones((4, 3))
    with pytest.raises(ValueError, match=r"A must be a 2-D array, got shape \(5,\)"):
        data.nets.teacher_jacobian(np.ones(5), B, X)
    with pytest.raises(ValueError, match=r"B must have width = A.shape\[0\] = 5 columns, got shape \(2, 4\)"):
        data.nets.teacher_jacobian(A, np.ones((2, 4)), X)
    with pytest.raises(ValueError, match=r"X must have d = A.shape\[1\] = 3 columns, got shape \(4, 2\)"):
        data.nets.teacher_jacobian(A, B, np.ones((4, 2)))
    bad = X.copy()
    bad[1, 2] = np.inf
    with pytest.raises(ValueError, match=r"X must be finite, got inf at index \(1, 2\)"):
        data.nets.teacher_jacobian(A, B, bad)
    with pytest.raises(ValueError, match=r"A, B and X must be all numpy arrays or all torch tensors, got "
                                         r"ndarray, Tensor, ndarray"):
        data.nets.teacher_jacobian(A, torch.ones(2, 5), X)
    with pytest.raises(ValueError, match=r"B must be a 2-D array of numbers, got 'b'"):
        data.nets.teacher_jacobian(A, "b", X)


def test_arguments_checked_before_the_folder(tmp_path):
    with pytest.raises(ValueError, match=r"n_train must be an integer in \[1, inf\), got 0"):
        data.nets.mnist(tmp_path / "absent", n_train=0)


# --- MNIST (E.4) on IDX files written here, and the digits fallback ----------------------------


def _write_mnist(folder, n_train=30, n_test=12, gz=False, side=28, skip=()):
    """Random uint8 images whose first pixel is the image's index, labels i % 10, as IDX files."""
    folder.mkdir(parents=True, exist_ok=True)
    rs = np.random.RandomState(0)
    arrays = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rs.randint(0, 256, size=(n, side, side)).astype(np.uint8)
        images[:, 0, 0] = np.arange(n)
        arrays[f"{prefix}-images-idx3-ubyte"] = images
        arrays[f"{prefix}-labels-idx1-ubyte"] = (np.arange(n) % 10).astype(np.uint8)
    for name, array in arrays.items():
        if name in skip:
            continue
        if gz:
            with gzip.open(folder / (name + ".gz"), "wb") as f:
                idx2numpy.convert_to_file(f, array)
        else:
            idx2numpy.convert_to_file(str(folder / name), array)
    return arrays


def _check_subsample(task, arrays, n_train, n_test, side=28):
    assert (task.name, task.kind, task.n_classes) == ("mnist", "classification", 10)
    assert task.X_train.shape == (n_train, side * side) and task.X_test.shape == (n_test, side * side)
    assert task.X_train.dtype == torch.float32 and task.y_train.dtype == torch.int64
    for X, y, prefix in ((task.X_train, task.y_train, "train"), (task.X_test, task.y_test, "t10k")):
        index = np.rint(X[:, 0].numpy() * 255).astype(int)
        assert len(set(index)) == len(index)                       # without replacement
        images = arrays[f"{prefix}-images-idx3-ubyte"][index].reshape(len(index), -1) / 255.0
        np.testing.assert_allclose(X.numpy(), images, rtol=1e-6)
        assert torch.equal(y, torch.as_tensor(index % 10))
    assert 0.0 <= float(task.X_train.min()) and float(task.X_train.max()) <= 1.0
    assert "MNIST read from" in task.note


@pytest.mark.parametrize("layout, gz", [(".", False), (".", True), ("MNIST/raw", False), ("MNIST/raw", True)])
def test_mnist_reads_idx_files(tmp_path, layout, gz):
    arrays = _write_mnist(tmp_path / layout, gz=gz)
    task = data.nets.mnist(tmp_path, n_train=20, n_test=7, seed=1)
    _check_subsample(task, arrays, 20, 7)
    again = data.nets.mnist(str(tmp_path), n_train=20, n_test=7, seed=1)
    other = data.nets.mnist(tmp_path, n_train=20, n_test=7, seed=2)
    assert torch.equal(task.X_train, again.X_train) and torch.equal(task.y_test, again.y_test)
    assert not torch.equal(task.X_train, other.X_train)


def test_mnist_environment_variable(tmp_path, monkeypatch):
    arrays = _write_mnist(tmp_path / "MNIST" / "raw", gz=True)
    monkeypatch.setenv("GROKKIT_MNIST", str(tmp_path))
    _check_subsample(data.nets.mnist(n_train=30, n_test=12), arrays, 30, 12)
    monkeypatch.setenv("GROKKIT_MNIST", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match=r"nowhere.*\(the environment variable GROKKIT_MNIST\) does not exist"):
        data.nets.mnist()


def test_mnist_named_folder_missing(tmp_path, monkeypatch):
    monkeypatch.delenv("GROKKIT_MNIST", raising=False)
    with pytest.raises(FileNotFoundError, match=r"MNIST folder '.*absent' \(the folder argument\) does not exist"):
        data.nets.mnist(tmp_path / "absent")
    _write_mnist(tmp_path, skip=("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"))
    with pytest.raises(FileNotFoundError, match=r"lacks the MNIST IDX files: .* misses t10k-images-idx3-ubyte, "
                                                r"t10k-labels-idx1-ubyte; .*MNIST/raw' misses train-images-idx3-ubyte"):
        data.nets.mnist(tmp_path)


def test_mnist_sizes_and_contents_checked(tmp_path):
    _write_mnist(tmp_path, n_train=30, n_test=12, side=5)
    with pytest.raises(ValueError, match=r"n_train must be an integer in \[1, the training images\] = \[1, 30\], got 31"):
        data.nets.mnist(tmp_path, n_train=31)
    with pytest.raises(ValueError, match=r"n_test must be an integer in \[1, the test images\] = \[1, 12\], got 13"):
        data.nets.mnist(tmp_path, n_train=30, n_test=13)
    assert data.nets.mnist(tmp_path, n_train=30, n_test=12).X_train.shape == (30, 25)
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(b"not an idx file")
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte' is not an IDX file"):
        data.nets.mnist(tmp_path)
    idx2numpy.convert_to_file(str(tmp_path / "t10k-labels-idx1-ubyte"), np.arange(11, dtype=np.uint8))
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte' must hold 12 labels in \[0, 9\], got shape \(11,\)"):
        data.nets.mnist(tmp_path)


@pytest.fixture(scope="module")
def digits():
    with pytest.MonkeyPatch.context() as m:
        m.delenv("GROKKIT_MNIST", raising=False)
        yield data.nets.mnist()


def test_digits_fallback(digits, monkeypatch):
    assert digits.X_train.shape == (1000, 64) and digits.X_test.shape == (797, 64)
    assert digits.X_train.dtype == torch.float32 and digits.y_test.dtype == torch.int64
    assert float(digits.X_train.min()) == 0.0 and float(digits.X_train.max()) == 1.0
    assert set(digits.y_train.tolist()) == set(range(10)) and digits.n_classes == 10
    assert "8x8 digits (not MNIST" in digits.note
    from sklearn.datasets import load_digits
    bundled = load_digits()
    labels = {}
    for row, label in zip(bundled.data, bundled.target):
        labels.setdefault(tuple(row / 16.0), set()).add(int(label))
    for X, y in ((digits.X_train, digits.y_train), (digits.X_test, digits.y_test)):
        for row, label in zip(X.double().tolist(), y.tolist()):
            assert label in labels[tuple(row)]                      # a bundled image with its label
    monkeypatch.delenv("GROKKIT_MNIST", raising=False)
    monkeypatch.setenv("GROKKIT_MNIST", "")                        # empty: as unset
    again, other = data.nets.mnist(), data.nets.mnist(seed=1)
    assert torch.equal(digits.X_train, again.X_train) and torch.equal(digits.y_test, again.y_test)
    assert not torch.equal(digits.X_train, other.X_train)
    small = data.nets.mnist(n_train=100, n_test=50, seed=3)
    assert small.X_train.shape == (100, 64) and small.X_test.shape == (50, 64)
