#!/usr/bin/env bash
# GPU checks of the kernels (issue 8): run from the repository root on a machine with CUDA torch,
#
#     OUT=/some/folder bash benchmarks/gpu_check.sh        # OUT defaults to ./gpu_check_out
#
# writes into $OUT:
#   env.txt            nvidia-smi, python/torch/numpy versions, CUDA devices, cc, the fused CPU path
#   gpu_tests.txt      tests/test_gpu.py (-m gpu: CUDA against the CPU), then the kernel test files
#                      tests/test_kernels.py tests/test_matrix_kernels.py tests/test_deep.py (on the CPU,
#                      with this CUDA build of torch; the cvxpy tests deselected where cvxpy is missing)
#   bench_matrix.md    benchmarks/bench_matrix.py --device cuda
#   bench_sparse.md    benchmarks/bench_sparse.py --device cuda
#   status.txt         each part's exit status (124: its timeout) and seconds
# Installs nothing. Every part has a timeout and the next part runs whatever the previous one
# did; the timeouts (with their 5 s kill grace) add up to under 6 minutes.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_check_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
unset GROKKIT_CACHE          # no result cache: every kernel runs
unset GROKKIT_PROGRESS   # no progress file
PY=${PYTHON:-python3}
: > "$OUT/status.txt"

part() {  # part NAME SECONDS OUTFILE COMMAND...: run with a timeout, append its output, record its status
    local name=$1 limit=$2 file=$3; shift 3
    local start=$SECONDS
    echo "### $name: $*" >> "$file"
    timeout -k 5 "$limit" "$@" >> "$file" 2>&1
    local rc=$?
    echo "$name rc=$rc seconds=$((SECONDS - start)) (limit $limit)" | tee -a "$OUT/status.txt"
    return 0
}

# (c) the environment (first: cheap, and it says what the rest ran on)
part env 15 "$OUT/env.txt" bash -c "
nvidia-smi || echo 'nvidia-smi failed'
$PY - <<'EOF'
import platform, shutil, sys
import numpy, torch
print('python', sys.version.replace(chr(10), ' '), platform.machine())
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
print('numpy', numpy.__version__)
print('cuda available', torch.cuda.is_available(), 'devices', torch.cuda.device_count())
for k in range(torch.cuda.device_count()):
    print(' ', k, torch.cuda.get_device_name(k), torch.cuda.get_device_capability(k))
print('cc', shutil.which('cc'), 'gcc', shutil.which('gcc'))
from grokkit.kernels import fused
print('fused CPU steps: sparse', fused.library() is not None, 'matrix', fused.library('matrix') is not None)
from grokkit.kernels.run import resolve_device
print('device auto ->', resolve_device('auto'))
EOF
cc --version 2>&1 | head -1 || true
"

# (a) the tests: the CUDA comparisons (all of them, -v: what passed survives a timeout), then the
# CPU kernel tests with -x (on several cores when pytest-xdist is there)
part "tests/test_gpu.py" 110 "$OUT/gpu_tests.txt" \
    $PY -m pytest -v -rs -m gpu -p no:cacheprovider --durations=10 tests/test_gpu.py
DESELECT=()
if ! $PY -c "import cvxpy" 2>/dev/null; then  # grokkit.baselines needs cvxpy: three tests import it
    DESELECT=(--deselect tests/test_kernels.py::test_ista_reaches_the_lasso_solution
              --deselect tests/test_kernels.py::test_ista_with_ridge_reaches_the_elastic_net_solution
              --deselect tests/test_matrix_kernels.py::test_proximal_gradient_reaches_the_convex_solution)
fi
XDIST=()
CORES=$(nproc 2>/dev/null || echo 1)
if $PY -c "import xdist" 2>/dev/null && [ "$CORES" -gt 1 ]; then XDIST=(-n $((CORES < 8 ? CORES : 8))); fi
part "kernel tests (CPU)" 90 "$OUT/gpu_tests.txt" \
    $PY -m pytest -x -q -p no:cacheprovider ${XDIST[@]+"${XDIST[@]}"} ${DESELECT[@]+"${DESELECT[@]}"} \
    tests/test_kernels.py tests/test_matrix_kernels.py tests/test_deep.py

# (b) the benchmarks on the GPU, the CPU side by side
part bench_matrix 70 "$OUT/bench_matrix.md" $PY benchmarks/bench_matrix.py --device cuda
part bench_sparse 40 "$OUT/bench_sparse.md" $PY benchmarks/bench_sparse.py --device cuda

echo "done: $OUT"
ls -l "$OUT"
