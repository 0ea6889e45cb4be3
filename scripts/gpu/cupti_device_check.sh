#!/usr/bin/env bash
# The CUPTI tracer and the injection library on a machine with an NVIDIA GPU,
# built straight from the sources with g++ and nvcc (no CMake configure, no
# Qt, no SQLite: the injection library is built with a JSON-lines test writer,
# tests/gpu/jsonl_trace_writer.cpp). Needs CUDA (nvcc, CUPTI), nlohmann-json
# headers (system, or CLUSTERSCOPE_DEPS_DIR/include, or .gpu-deps/include) and,
# for the PyTorch part, python3 with torch.
#
#   scripts/gpu/cupti_device_check.sh OUT_DIR
#
# 1. cupti_gpu_probe: known CUDA work traced in-process, checked event by event
#    (tests/gpu/cupti_gpu_probe.cpp); its raw CUPTI buffers are kept as
#    OUT_DIR/probe.cupti for the replay tests.
# 2. torchrun --nproc_per_node 1 scripts/gpu/torch_ddp_smoke.py under the
#    injection library (CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH), its
#    store checked (tests/gpu/check_injected_store.py); then its step time
#    untraced, traced, and traced without the memory counter or NVTX.
# 3. The injection library failing (no profile directory): the program runs.
# 4. SIGTERM during a traced PyTorch program: the store is closed "cancelled".
# Exit status: the number of failed parts.

set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$(mkdir -p "${1:?usage: cupti_device_check.sh OUT_DIR}" && cd "$1" && pwd)"
BUILD="${CS_CHECK_BUILD:-${TMPDIR:-/tmp}/cs-cupti-check}"
mkdir -p "$BUILD/obj" "$BUILD/lib"
LOG="$OUT/check.log"
: > "$LOG"
say() { echo "== $*" | tee -a "$LOG"; }
failed=0

CUDA="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -x "$CUDA/bin/nvcc" ] && command -v nvcc >/dev/null; then CUDA="$(dirname "$(dirname "$(command -v nvcc)")")"; fi
CUDA_LIB="$CUDA/lib64"; [ -d "$CUDA_LIB" ] || CUDA_LIB="$CUDA/lib"
INCLUDES=(-I"$ROOT" -I"$CUDA/include")
for deps in "${CLUSTERSCOPE_DEPS_DIR:-}" "$ROOT/.gpu-deps"; do
  [ -n "$deps" ] && [ -d "$deps/include" ] && INCLUDES+=(-I"$deps/include")
done
say "CUDA at $CUDA; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

# NCCL: the toolkit's, else the one PyTorch ships.
NCCL_FLAGS=(-DCS_PROBE_NCCL=0); NCCL_LINK=()
if [ -f "$CUDA/include/nccl.h" ]; then
  NCCL_FLAGS=(-DCS_PROBE_NCCL=1); NCCL_LINK=(-lnccl)
else
  NCCL_DIR="$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)"
  if [ -n "$NCCL_DIR" ] && [ -f "$NCCL_DIR/include/nccl.h" ]; then
    NCCL_FLAGS=(-DCS_PROBE_NCCL=1 -I"$NCCL_DIR/include")
    NCCL_LINK=("$NCCL_DIR/lib/libnccl.so.2" -Wl,-rpath,"$NCCL_DIR/lib")
  fi
fi
CUBLAS_FLAGS=(-DCS_PROBE_CUBLAS=0); CUBLAS_LINK=()
if [ -f "$CUDA/include/cublas_v2.h" ] && ls "$CUDA_LIB"/libcublas.so* >/dev/null 2>&1; then
  CUBLAS_FLAGS=(-DCS_PROBE_CUBLAS=1); CUBLAS_LINK=(-lcublas)
fi
say "probe with ${NCCL_FLAGS[0]} ${CUBLAS_FLAGS[0]}"

# --- build ---------------------------------------------------------------------
SOURCES=(core/host_name.cpp profiler/activity_buffers.cpp profiler/exit_guard.cpp profiler/gpu_memory.cpp
         profiler/kernel_names.cpp profiler/launch_env.cpp profiler/replay_file.cpp
         profiler/safe_memory.cpp profiler/cupti/activity_decoder.cpp profiler/cupti/api_filter.cpp
         profiler/cupti/cupti_source.cpp profiler/cupti/replay_source.cpp profiler/cupti/tracer.cpp
         tests/gpu/jsonl_trace_writer.cpp)
CXXFLAGS=(-std=c++20 -O2 -g -fPIC -fvisibility=hidden -Wall -Wextra "${INCLUDES[@]}"
          -DCLUSTERSCOPE_VERSION='"0.1.0"')
say "building ($(nproc) cores)"
build_one() {
  local src="$1"; local obj="$BUILD/obj/$(echo "$src" | tr / _).o"
  ${CXX:-g++} "${CXXFLAGS[@]}" "${NCCL_FLAGS[@]}" "${CUBLAS_FLAGS[@]}" -c "$ROOT/$src" -o "$obj" || echo "FAILED $src"
}
{
  for src in "${SOURCES[@]}" profiler/inject/clusterscope_inject.cpp tests/gpu/cupti_gpu_probe.cpp; do
    build_one "$src" &
  done
  "$CUDA/bin/nvcc" -std=c++17 -O2 -arch=sm_90 -Xcompiler -fPIC -c "$ROOT/tests/gpu/probe_kernels.cu" \
    -o "$BUILD/obj/probe_kernels.o" || echo "FAILED probe_kernels.cu"
  wait
} 2>&1 | tee -a "$LOG" | grep -E "error|FAILED" | head -20
LIB_OBJS=()
for src in "${SOURCES[@]}"; do LIB_OBJS+=("$BUILD/obj/$(echo "$src" | tr / _).o"); done
LINK=(-L"$CUDA_LIB" -lcupti -lcudart -ldl -lpthread -Wl,-rpath,"$CUDA_LIB")
INJECT="$BUILD/lib/libclusterscope-inject.so"
${CXX:-g++} -shared -o "$INJECT" "$BUILD/obj/profiler_inject_clusterscope_inject.cpp.o" "${LIB_OBJS[@]}" \
  "${LINK[@]}" -Wl,--no-undefined 2>&1 | tee -a "$LOG"
${CXX:-g++} -o "$BUILD/cupti_gpu_probe" "$BUILD/obj/tests_gpu_cupti_gpu_probe.cpp.o" "$BUILD/obj/probe_kernels.o" \
  "${LIB_OBJS[@]}" "${LINK[@]}" "${CUBLAS_LINK[@]}" "${NCCL_LINK[@]}" 2>&1 | tee -a "$LOG"
if [ ! -x "$BUILD/cupti_gpu_probe" ] || [ ! -f "$INJECT" ]; then
  say "BUILD FAILED"; exit 99
fi

# --- 1. the tracer in-process ----------------------------------------------------
say "1. cupti_gpu_probe"
NVTX_INJECTION64_PATH="$INJECT" timeout 120 "$BUILD/cupti_gpu_probe" "$OUT" 2>&1 | tee "$OUT/probe.log" | tee -a "$LOG"
[ "${PIPESTATUS[0]}" -eq 0 ] || { say "1. FAILED"; failed=$((failed + 1)); }

# --- 2. PyTorch DDP under the injection library ----------------------------------------
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  say "no PyTorch with CUDA: parts 2-4 skipped"
  exit "$failed"
fi
TORCHRUN=(python3 -m torch.distributed.run --standalone --nproc_per_node 1)
SMOKE="$ROOT/scripts/gpu/torch_ddp_smoke.py"
say "2. torch_ddp_smoke.py traced"
mkdir -p "$OUT/torch"
CUDA_INJECTION64_PATH="$INJECT" NVTX_INJECTION64_PATH="$INJECT" CLUSTERSCOPE_PROFILE_DIR="$OUT/torch" \
  CLUSTERSCOPE_CUPTI_CAPTURE="$OUT/torch" CLUSTERSCOPE_PROFILE_VERBOSE=1 \
  timeout 240 "${TORCHRUN[@]}" "$SMOKE" --steps 30 > "$OUT/torch_traced.log" 2>&1
code=$?
tail -n 20 "$OUT/torch_traced.log" | tee -a "$LOG"
[ $code -eq 0 ] || { say "2. the traced run exited with $code"; failed=$((failed + 1)); }
python3 "$ROOT/tests/gpu/check_injected_store.py" "$OUT/torch" torch "$OUT/torch_summary.json" 2>&1 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" -eq 0 ] || { say "2. store checks FAILED"; failed=$((failed + 1)); }
say "2b. step time, untraced and traced (tracer overhead)"
step_time() {  # LABEL ENV...: runs the smoke script, prints its mean step time
  local label="$1"; shift
  env "$@" timeout 240 "${TORCHRUN[@]}" "$SMOKE" --steps 60 > "$OUT/time_$label.log" 2>&1
  printf '   %-28s %s\n' "$label" "$(grep -h 'mean step time' "$OUT/time_$label.log")" | tee -a "$LOG"
}
mkdir -p "$OUT/timing"
TRACE=(CUDA_INJECTION64_PATH="$INJECT" NVTX_INJECTION64_PATH="$INJECT" CLUSTERSCOPE_PROFILE_DIR="$OUT/timing")
step_time untraced CS_UNTRACED=1
step_time traced "${TRACE[@]}"
step_time traced_no_memory_counter "${TRACE[@]}" CLUSTERSCOPE_MEMORY_SAMPLE_MS=0
step_time traced_no_nvtx CUDA_INJECTION64_PATH="$INJECT" CLUSTERSCOPE_PROFILE_DIR="$OUT/timing"
step_time untraced_again CS_UNTRACED=1
rm -rf "$OUT/timing"

# --- 3. the injection failing leaves the program alone ---------------------------------
say "3. injection without a profile directory"
CUDA_INJECTION64_PATH="$INJECT" CLUSTERSCOPE_PROFILE_DIR=/nonexistent/cs-profile \
  timeout 120 python3 -c "import torch; x = torch.ones(1000, device='cuda'); print('sum', x.sum().item())" \
  > "$OUT/failing.log" 2>&1
code=$?
cat "$OUT/failing.log" | tee -a "$LOG"
if [ $code -ne 0 ] || ! grep -q "sum 1000.0" "$OUT/failing.log" || ! grep -q "not tracing this process" "$OUT/failing.log"; then
  say "3. FAILED (exit $code)"; failed=$((failed + 1))
fi

# --- 4. SIGTERM closes the store --------------------------------------------------------
say "4. SIGTERM during a traced program"
mkdir -p "$OUT/cancelled"
CUDA_INJECTION64_PATH="$INJECT" CLUSTERSCOPE_PROFILE_DIR="$OUT/cancelled" \
  python3 -u -c "
import time, torch
x = torch.ones(1 << 20, device='cuda')
print('ready', flush=True)
while True:
    x.mul_(1.0001); torch.cuda.synchronize(); time.sleep(0.005)
" > "$OUT/cancelled.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q ready "$OUT/cancelled.log" && break; sleep 0.1; done
sleep 0.5
kill -TERM "$pid"
wait "$pid"; code=$?
say "   exit status $code (143 = killed by SIGTERM)"
python3 "$ROOT/tests/gpu/check_injected_store.py" "$OUT/cancelled" cancelled "$OUT/cancelled_summary.json" 2>&1 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" -eq 0 ] && [ $code -eq 143 ] || { say "4. FAILED"; failed=$((failed + 1)); }

# Smaller files to bring back.
gzip -f "$OUT"/torch/*.db "$OUT"/torch/*.cupti "$OUT"/cancelled/*.db "$OUT"/probe.cupti 2>/dev/null
say "done: $failed failed parts"
exit "$failed"
