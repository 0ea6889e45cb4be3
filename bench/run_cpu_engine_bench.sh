#!/bin/bash
# The CPU engine's benchmarks, one after another, each printing its figures:
# GEMM against OpenBLAS, tracing overhead, all-reduce against bare MPI, and
# training against PyTorch (Debian's python3-torch; skipped when missing).
#
# Usage: bench/run_cpu_engine_bench.sh [build dir]   (default: build)
# The machine should be otherwise idle: every figure is a time.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
BIN="$BUILD/bin"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
usage="usage: bench/run_cpu_engine_bench.sh [build dir]   (default: build)"
if [[ $# -gt 1 ]]; then
  echo "run_cpu_engine_bench.sh: one argument at most" >&2; echo "$usage" >&2; exit 2
fi
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  echo "run_cpu_engine_bench.sh: $BUILD is not a CMake build folder" >&2; echo "$usage" >&2; exit 2
fi

cmake --build "$BUILD" --target clusterscope-worker bench_cpu_gemm bench_tracing_overhead bench_allreduce

echo "== load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
echo
echo "== GEMM: engine vs OpenBLAS (1 BLAS thread, then all cores)"
"$BIN/bench_cpu_gemm" 1
"$BIN/bench_cpu_gemm"
echo
echo "== tracing overhead"
"$BIN/bench_tracing_overhead" 1 4 20 1
echo
echo "== all-reduce: engine vs bare MPI, 2 ranks"
mpirun -n 2 --bind-to none "$BIN/bench_allreduce"
echo
echo "== the peer: PyTorch on the CPU"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  /usr/bin/python3 "$ROOT/bench/cpu_engine_vs_pytorch.py" --worker "$BIN/clusterscope-worker"
else
  echo "python3-torch is not installed (apt-get install python3-torch): skipped"
fi
