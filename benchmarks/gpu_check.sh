#!/usr/bin/env bash
# GPU checks of the kernels (issue 8): run from the repository root on a machine with CUDA torch,
#
#     OUT=/some/folder bash benchmarks/gpu_check.sh        # OUT defaults to ./gpu_check_out
#
# writes into $OUT (at most 8 files: the device tool brings back no more):
#   status.txt         the environment (nvidia-smi, python/torch/numpy, CUDA devices, cc, the fused
#                      CPU path), then each part's exit status (124: its timeout) and seconds
#   gpu_tests.txt      tests/test_gpu.py (-m gpu: every kernel family on CUDA against the CPU), and
#                      last, if time is left, the kernel test files on the CPU with this CUDA build of
#                      torch (the cvxpy tests deselected where cvxpy is missing)
#   bench.md           benchmarks/bench_matrix.py, bench_nets.py and bench_sparse.py with --device cuda
#   paper_nets.txt     the paper presets of the pages named by $PAGES (benchmarks/run_page.py, at most
#                      $PAGE_LIMIT seconds each), and one JSON summary each: <stem>.paper.json;
#                      progress.json: how far the last page's training got
# Installs nothing. Every part has a timeout and the next part runs whatever the previous one did.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_check_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
unset GROKKIT_CACHE          # no result cache: every kernel runs
unset GROKKIT_PROGRESS   # no progress file
PY=${PYTHON:-python3}
: > "$OUT/status.txt"  # each part's status; the environment first

part() {  # part NAME SECONDS OUTFILE COMMAND...: run with a timeout, append its output, record its status
    local name=$1 limit=$2 file=$3; shift 3
    local start=$SECONDS
    echo "### $name: $*" >> "$file"
    timeout -k 5 "$limit" "$@" >> "$file" 2>&1
    local rc=$?
    echo "$name rc=$rc seconds=$((SECONDS - start)) (limit $limit)" | tee -a "$OUT/status.txt"
    return 0
}

# (a) the environment (first: cheap, and it says what the rest ran on)
part env 15 "$OUT/status.txt" bash -c "
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

# (b) the CUDA comparisons (all of them, -v: what passed survives a timeout)
part "tests/test_gpu.py" 150 "$OUT/gpu_tests.txt" \
    $PY -m pytest -v -rs -m gpu -p no:cacheprovider --durations=10 tests/test_gpu.py
# (c) the benchmarks on the GPU, the CPU side by side
part bench_matrix 70 "$OUT/bench.md" $PY benchmarks/bench_matrix.py --device cuda
part bench_nets 90 "$OUT/bench.md" $PY benchmarks/bench_nets.py --device cuda --steps 200 --repeats 2
part bench_sparse 40 "$OUT/bench.md" $PY benchmarks/bench_sparse.py --device cuda

# (d) paper presets of pages (PAGES: MyST paths; PAGE_LIMIT seconds each), their summaries in $OUT
# and the progress of the last one (steps done, seconds) in progress.json: a page stopped by its
# limit still says how far it got
for page in ${PAGES:-}; do
    stem=$(basename "$page" .md)
    GROKKIT_PROGRESS="$OUT/progress.json" part "$stem (paper)" "${PAGE_LIMIT:-240}" "$OUT/paper_nets.txt" \
        $PY benchmarks/run_page.py "$page" --preset paper --summary "$OUT/$stem.paper.json"
done

# (e) the CPU kernel tests with -x (on several cores when pytest-xdist is there)
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

echo "done: $OUT"
ls -l "$OUT"
