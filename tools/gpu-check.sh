#!/usr/bin/env bash
# make gpu-check: everything a GPU can tell this lab, in one command, on a machine with CUDA.
#   smoke  imports, torch and CUDA versions, the device's label
#   cuda   the CUDA half of the suite (tests marked cuda: the sync table against CUDA's debug mode and the device)
#   bench  python -m synclab bench chN for every chapter: data/reference/<device>/chN.json (bench:ch6 one chapter)
#   nbval  the solution notebooks re-executed on this GPU, their stored outputs compared
#   tests  the rest of the suite (the simulated device, as on a CPU; the book's and nbgrader's tests left out)
# Steps run in the order given (default: all five), each under its own time limit; after each, $GPU_CHECK_OUT
# (default _build/gpu-check) holds gpu-check.tgz: every log so far and data/reference/.
# data/reference/<device>/gpu-check.json records the commit and each step's counts and failures.
# Send the archive, or commit data/reference/<device>/, to contribute a reference from your GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=${GPU_CHECK_OUT:-_build/gpu-check}; LOGS="$OUT/logs"; mkdir -p "$LOGS"
JOBS=${JOBS:-$(( $(nproc) > 12 ? 12 : $(nproc) ))}
T0=$(date +%s)
$PY -c "import torch; assert torch.cuda.is_available(), 'no CUDA GPU here: make gpu-check needs one'" || exit 2
# the record names the commit that ran: a copy without its git history says it with SYNCLAB_COMMIT=<commit>
$PY -c "from synclab.provenance import lab_commit as c; assert c(), 'no git history here: set SYNCLAB_COMMIT'" || exit 2
$PY -c "import pytest_timeout" 2>/dev/null && TOPT="--timeout=120" || TOPT=""
ARCHIVE=${GPU_CHECK_ARCHIVE:-$OUT/gpu-check.tgz}
pack() { mkdir -p data/reference; tar czf "$ARCHIVE" data/reference -C "$OUT" logs; }
step() { # name, limit_s, command...
  local name=$1 lim=$2; shift 2
  echo "=== $name (limit $lim s) at $(( $(date +%s) - T0 )) s"
  local t0=$(date +%s)
  # each failure's traceback as it happens (conftest.py): a step cut off at its limit still says why tests failed
  SYNCLAB_FAILURE_LOG="$LOGS/$name-failures.log" timeout -k 5 "$lim" "$@" > "$LOGS/$name.log" 2>&1; local rc=$?
  tail -n 12 "$LOGS/$name.log"
  echo "=== $name: rc=$rc in $(( $(date +%s) - t0 )) s"
  # the suite's record beside the references: the commit, each step's counts and failures (synclab/lab/gpu_record.py)
  $PY -m synclab.lab.gpu_record "$name" "$rc" "$(( $(date +%s) - t0 ))" "$LOGS/$name.log"
  pack
}
# the chapters and their benches' time limits come from the registry (synclab/lab/chapters.py)
BENCHES=$($PY -m synclab.lab.chapters bench) || exit 2
bench() {
  local lim; lim=$(awk -v c="$1" '$1 == c {print $2}' <<< "$BENCHES")
  [ -n "$lim" ] || { echo "unknown chapter $1; the registry has: $(awk '{print $1}' <<< "$BENCHES" | xargs)"; exit 2; }
  step "bench-$1" "$lim" $PY -m synclab bench "$1"
}
PYTEST="$PY -m pytest -p no:cacheprovider -rfEs $TOPT"
for s in ${@:-smoke cuda bench nbval tests}; do
  case $s in
    smoke) step smoke 60 $PY -c "import torch, synclab, plotly, nbval, nbclient, ipywidgets; from synclab.provenance import Provenance; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0)); print(Provenance.here().label)" ;;
    cuda) step cuda 200 $PYTEST -q -n "$JOBS" -m cuda tests --ignore=tests/test_book.py --ignore=tests/test_nbgrader.py --ignore=tests/test_kernel_ipc.py ;;
    bench) for ch in $(awk '{print $1}' <<< "$BENCHES"); do bench "$ch"; done ;;
    bench:*) bench "${s#bench:}" ;;
    nbval) step nbval 200 $PYTEST -q -n "$JOBS" --dist loadfile --nbval solutions ;;
    tests) step tests 300 $PYTEST -v -n "$JOBS" -m "not cuda" ${GPU_CHECK_TESTS:-tests --ignore=tests/test_book.py --ignore=tests/test_nbgrader.py --ignore=tests/test_kernel_ipc.py} ;;
    *) echo "unknown step $s (smoke cuda bench bench:chN nbval tests)"; exit 2 ;;
  esac
done
echo "gpu-check done at $(( $(date +%s) - T0 )) s: $ARCHIVE"
