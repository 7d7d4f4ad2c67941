#!/usr/bin/env bash
# GPU checks of the kernels: run from the repository root on a machine with CUDA torch and Triton,
#
#     OUT=/some/folder bash benchmarks/gpu_check.sh        # OUT defaults to ./gpu_check_out
#
# in at most about 8 minutes (ONLY_PAGES=1: the paper presets of (d) alone), writing into $OUT
# (at most 8 files: the device tool brings back no more):
#   status.txt         the environment (nvidia-smi, python/torch/triton/numpy, CUDA devices, the fused
#                      CPU path), then each part's exit status (124: its timeout) and seconds
#   gpu_tests.txt      tests/test_persistent.py (the persistent Triton kernels and polar() on CUDA
#                      against the PyTorch steps and the SVD) and tests/test_gpu.py (-m gpu: every
#                      kernel family on CUDA against the CPU)
#   bench.md           benchmarks/bench_persistent.py: the persistent kernels against the PyTorch
#                      steps at 36, 144 and 576 configurations, the matrix kernel on the Figure 5/42
#                      grid (a Jacobi SVD per step), Figure 53's l* step with polar()
#                      against the SVD; with FULL=1 also bench_matrix, bench_nets and bench_sparse
#   paper.txt          the paper presets of the pages named by $PAGES (default: Figures 1 and 53;
#                      benchmarks/run_page.py, at most $PAGE_LIMIT seconds each), and one JSON
#                      summary each: <stem>.paper.json; progress.json: how far the last page got
#   paper_runs.tar.gz  the pages' paper-scale records (grokkit.records), those that finished, and the
#                      checkpoints of those stopped at their deadline ($PAGE_LIMIT less $PAGE_MARGIN
#                      seconds, default 30): unpack at the repository root (tar xzf paper_runs.tar.gz)
#                      and commit them; the checkpoints travel back with the working tree on the next
#                      run, which continues them. The copy on the GPU machine has no git history: pass
#                      the commit that runs, GROKKIT_COMMIT=$(git rev-parse HEAD), from a committed checkout.
# Installs nothing. Every part has a timeout and the next part runs whatever the previous one did.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_check_out}
mkdir -p "$OUT"
START=$(mktemp)  # records newer than this are this run's
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
try:
    import triton
    print('triton', triton.__version__)
except ImportError:
    print('triton: not installed')
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

# (b) the CUDA comparisons (-v: what passed survives a timeout); ONLY_PAGES=1 skips (b) and (c),
# for a lease spent on paper presets
if [ "${ONLY_PAGES:-0}" != 1 ]; then
part "GPU tests" ${TEST_LIMIT:-120} "$OUT/gpu_tests.txt" \
    $PY -m pytest -v -rs -p no:cacheprovider --durations=10 tests/test_persistent.py tests/test_gpu.py -m "gpu or not gpu"
# (c) the persistent kernels against the PyTorch steps on this GPU, side by side
part bench_persistent ${BENCH_LIMIT:-100} "$OUT/bench.md" $PY benchmarks/bench_persistent.py
if [ "${FULL:-0}" = 1 ]; then
    part bench_matrix 70 "$OUT/bench.md" $PY benchmarks/bench_matrix.py --device cuda
    part bench_nets 90 "$OUT/bench.md" $PY benchmarks/bench_nets.py --device cuda --steps 200 --repeats 2
    part bench_sparse 40 "$OUT/bench.md" $PY benchmarks/bench_sparse.py --device cuda
fi
fi

# (d) paper presets of pages (PAGES: MyST paths; PAGE_LIMIT seconds each), their summaries in $OUT
# and the progress of the last one (steps done, seconds) in progress.json: a page stopped by its
# limit still says how far it got. Each page's runs stop cleanly PAGE_MARGIN seconds before its
# limit, their state checkpointed in book/paper_runs/checkpoints (run_page.py --record), where the
# checkpoints of a previous run, carried in with the working tree, are continued
for page in ${PAGES:-notebooks/sparse_recovery/fig01-generalization-time.md notebooks/neural_networks/fig53-mlp-modular-addition-nuclear.md}; do
    stem=$(basename "$page" .md)
    GROKKIT_DEADLINE=$(( ${PAGE_LIMIT:-120} - ${PAGE_MARGIN:-30} ))s GROKKIT_PROGRESS="$OUT/progress.json" \
        part "$stem (paper)" "${PAGE_LIMIT:-120}" "$OUT/paper.txt" \
        $PY benchmarks/run_page.py "$page" --preset paper --record --summary "$OUT/$stem.paper.json"
done
records=$(ls book/paper_runs/*/*.json 2>/dev/null | while read -r f; do
    [ "$f" -nt "$START" ] && echo "${f%.json}"; done)
checkpoints=$(ls book/paper_runs/checkpoints/*/*.ckpt 2>/dev/null | while read -r f; do
    [ "$f" -nt "$START" ] && echo "$f"; done)
if [ -n "$records$checkpoints" ]; then
    tar czf "$OUT/paper_runs.tar.gz" $checkpoints \
        $(for r in $records; do ls "$r".json "$r".ipynb "$r"-*.png 2>/dev/null; done)
fi

echo "done: $OUT"
ls -l "$OUT"
