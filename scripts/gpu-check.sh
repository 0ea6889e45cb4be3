#!/usr/bin/env bash
# The GPU check: on a machine with NVIDIA GPUs (CUDA toolkit, CMake, Ninja; no
# Qt needed), build the Qt-free parts, then run the CUDA engine and the CUPTI
# tracer for real and keep every store and a summary in one folder:
#   - the worker on the GPU for each precision the GPU has, traced by CUPTI;
#   - the tracer's overhead: the same run traced and untraced;
#   - a cuBLAS GEMM sweep per precision, and the memory bandwidth;
#   - an NCCL all-reduce sweep over the GPUs when there are two or more;
#   - the planner calibrated from this GPU's sweeps, and each worker run held
#     against its prediction (predicted versus measured, part by part);
#   - a small PyTorch DDP program under `clusterscope profile`, when torch imports;
#   - summary.json and summary.md: GPU, driver and CUDA versions, GEMM TFLOP/s
#     against the GPU's peak, tracer overhead, events per kind, predicted
#     versus measured step time.
# Usage: scripts/gpu-check.sh [OUT_DIR]   (default: gpu-check-out)
#   CLUSTERSCOPE_DEPS_DIR  a folder of prefixes (nlohmann, CLI11, sqlite3, zlib)
#                          for a machine without their development packages
#                          (scripts/gpu-deps.sh makes it)
#   GPU_CHECK_STEPS        worker steps per precision (default 12)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="$(mkdir -p "${1:-$ROOT/gpu-check-out}" && cd "${1:-$ROOT/gpu-check-out}" && pwd)"
BUILD="${GPU_CHECK_BUILD:-$ROOT/build-gpu}"
STEPS="${GPU_CHECK_STEPS:-12}"
LOG="$OUT_DIR/log.txt"
START=$(date +%s)
: > "$LOG"

say() { echo "== $(( $(date +%s) - START ))s: $*" | tee -a "$LOG"; }
run() {  # run and log a command; keep going on failure
  say "$*"
  "$@" >>"$LOG" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || say "exit status $rc: $1"
  return $rc
}
# A worker that hangs (a rank stuck in NCCL, a driver fault) is stopped
# after this many seconds, so that the rest of the check still runs.
STEP_LIMIT=${STEP_LIMIT:-240}
run_to() {  # run with stdout into a file (appended), stderr into the log; time-limited
  local file=$1
  shift
  say "$* >> $(basename "$file")"
  timeout --kill-after=10 "$STEP_LIMIT" "$@" >>"$file" 2>>"$LOG"
  local rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    say "stopped after $STEP_LIMIT s (STEP_LIMIT): $1"
  elif [ $rc -ne 0 ]; then
    say "exit status $rc: $1"
  fi
  return $rc
}

say "GPU check into $OUT_DIR"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader > "$OUT_DIR/gpus.csv" 2>>"$LOG"
if [ ! -s "$OUT_DIR/gpus.csv" ]; then
  say "no NVIDIA GPU answers nvidia-smi: nothing to check"
  exit 1
fi
cat "$OUT_DIR/gpus.csv" | tee -a "$LOG"
GPUS=$(wc -l < "$OUT_DIR/gpus.csv")
CC=$(head -1 "$OUT_DIR/gpus.csv" | awk -F', ' '{print $4}' | tr -d '.')
nvcc --version | tail -2 >> "$LOG" 2>&1

# --- Build (Qt-free) -------------------------------------------------------
deps=()
if [ -n "${CLUSTERSCOPE_DEPS_DIR:-}" ]; then
  # One prefix per library (scripts/gpu-deps.sh), as a CMake list.
  list=$(ls -d "$CLUSTERSCOPE_DEPS_DIR"/*/ 2>/dev/null | sed 's:/$::' | paste -sd';')
  deps=(-DCLUSTERSCOPE_DEPS_DIR="${list:-$CLUSTERSCOPE_DEPS_DIR}")
fi
run cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCLUSTERSCOPE_GUI=OFF \
  -DCLUSTERSCOPE_TESTS=OFF -DCLUSTERSCOPE_BENCH=OFF -DCLUSTERSCOPE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${CC:-90}" "${deps[@]}" || exit 1
run cmake --build "$BUILD" --parallel "$(nproc)" --target clusterscope clusterscope-worker || exit 1
run cmake --build "$BUILD" --parallel "$(nproc)" --target clusterscope-inject
BIN="$BUILD/bin"
say "built"

# --- The worker on the GPU, every precision, traced -------------------------
PRECISIONS="fp32 tf32 bf16 fp16"
[ "${CC:-0}" -ge 89 ] && PRECISIONS="$PRECISIONS fp8"
SHAPE=(--layers 12 --hidden 768 --heads 12 --seq 1024 --micro-batch 8 --steps "$STEPS")
for p in $PRECISIONS; do
  capture=()
  # The bf16 run also keeps CUPTI's raw buffers: a replay fixture for tests without a GPU.
  [ "$p" = bf16 ] && capture=(CLUSTERSCOPE_CUPTI_CAPTURE="$OUT_DIR/cupti-bf16.replay")
  run_to "$OUT_DIR/worker-$p.jsonl" env CUDA_VISIBLE_DEVICES=0 "${capture[@]}" "$BIN/clusterscope-worker" \
    --backend cuda --precision "$p" "${SHAPE[@]}" --title "GPU check: GPT-2 small shape, $p" \
    --out "$OUT_DIR/worker-$p.db"
  [ -f "$OUT_DIR/worker-$p.rank0.db" ] && mv "$OUT_DIR/worker-$p.rank0.db" "$OUT_DIR/worker-$p.db"
done
# The tracer's overhead: the bf16 run again, untraced.
run_to "$OUT_DIR/worker-bf16-untraced.jsonl" env CUDA_VISIBLE_DEVICES=0 "$BIN/clusterscope-worker" \
  --backend cuda --precision bf16 "${SHAPE[@]}" --no-trace

# --- Sweeps ----------------------------------------------------------------
for p in $PRECISIONS; do
  run_to "$OUT_DIR/gemm.jsonl" env CUDA_VISIBLE_DEVICES=0 "$BIN/clusterscope-worker" --backend cuda \
    --precision "$p" --sweep gemm --sizes 1024 2048 4096 8192 --sweep-seconds 0.3
done
# Why cuBLASLt turns FP8 down, where it does: its own log (errors, hints,
# information and the API trace: each call's layouts and attributes) of one
# short FP8 GEMM, kept beside the stores.
if [[ " $PRECISIONS " == *" fp8 "* ]]; then
  run_to "$OUT_DIR/gemm-fp8-diagnosis.jsonl" env CUDA_VISIBLE_DEVICES=0 CUBLASLT_LOG_MASK=31 \
    CUBLASLT_LOG_FILE="$OUT_DIR/cublaslt-fp8.log" "$BIN/clusterscope-worker" --backend cuda \
    --precision fp8 --sweep gemm --sizes 1024 --sweep-seconds 0.05
  [ -f "$OUT_DIR/cublaslt-fp8.log" ] && truncate -s '<4M' "$OUT_DIR/cublaslt-fp8.log"
fi
run_to "$OUT_DIR/bandwidth.jsonl" env CUDA_VISIBLE_DEVICES=0 "$BIN/clusterscope-worker" --backend cuda \
  --precision bf16 --sweep bandwidth --out "$OUT_DIR/sweep-bandwidth.db"
[ -f "$OUT_DIR/sweep-bandwidth.rank0.db" ] && mv "$OUT_DIR/sweep-bandwidth.rank0.db" "$OUT_DIR/sweep-bandwidth.db"
if [ "$GPUS" -ge 2 ]; then
  port=$((29500 + RANDOM % 1000))
  pids=()
  for r in $(seq 0 $((GPUS - 1))); do
    timeout --kill-after=10 "$STEP_LIMIT" env RANK=$r WORLD_SIZE=$GPUS LOCAL_RANK=$r \
      LOCAL_WORLD_SIZE=$GPUS NCCL_COMM_ID=127.0.0.1:$port "$BIN/clusterscope-worker" --backend cuda --precision fp32 --dp "$GPUS" --sweep all_reduce \
      >> "$OUT_DIR/allreduce.jsonl" 2>>"$LOG" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  say "all-reduce sweep over $GPUS GPUs done"
else
  say "one GPU: no NCCL all-reduce sweep (NCCL allows one rank per GPU)"
fi

# --- The planner calibrated on this GPU, against the worker's runs ----------
# The sweeps `clusterscope calibrate --backend cuda` runs (a layer's GEMMs per
# precision) with the streaming sweep above make this GPU's calibrated
# presets, kept in the check's folder; each worker run above is then held
# against the planner's prediction made with them (trace stats --predict-again).
PRESETS_DIR="$OUT_DIR/presets"
mkdir -p "$PRESETS_DIR"
: > "$OUT_DIR/calibration-sweeps.jsonl"
for p in $PRECISIONS; do
  # The engine's loops (layer norm, GELU, attention, AdamW, ...) once, in bf16.
  sweeps=layer_gemm
  [ "$p" = bf16 ] && sweeps=layer_gemm,ops
  run_to "$OUT_DIR/calibration-sweeps.jsonl" env CUDA_VISIBLE_DEVICES=0 "$BIN/clusterscope-worker" \
    --backend cuda --precision "$p" --sweep "$sweeps" --gemm-sizes 1024 2048 4096 8192 \
    --sweep-seconds 0.2 --no-trace
done
if run env CLUSTERSCOPE_USER_PRESETS="$PRESETS_DIR" "$BIN/clusterscope" calibrate --from-sweeps \
    "$OUT_DIR/calibration-sweeps.jsonl" "$OUT_DIR/bandwidth.jsonl" --out "$OUT_DIR/calibration.db"; then
  for p in $PRECISIONS; do
    [ -f "$OUT_DIR/worker-$p.db" ] || continue
    run_to "$OUT_DIR/prediction-$p.json" env CLUSTERSCOPE_USER_PRESETS="$PRESETS_DIR" \
      "$BIN/clusterscope" trace stats "$OUT_DIR/worker-$p.db" --predict-again --no-steps --top 0 --json
  done
fi

# --- A PyTorch program under the injection library ---------------------------
if python3 -c "import torch; assert torch.cuda.is_available()" >>"$LOG" 2>&1; then
  TORCHRUN=(python3 -m torch.distributed.run --standalone --nproc_per_node 1)
  run "$BIN/clusterscope" profile --out "$OUT_DIR/torch-ddp.db" -- "${TORCHRUN[@]}" \
    "$ROOT/scripts/gpu/torch_ddp_smoke.py" --steps 20
else
  say "PyTorch with CUDA is not importable: no profiled PyTorch run"
fi

# Fold each store's write-ahead log into it, so that one file per store travels
# (no store at all: the loop runs for none, not for a file named "*.db").
shopt -s nullglob
for db in "$OUT_DIR"/*.db; do
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()" "$db" >>"$LOG" 2>&1
done
rm -f "$OUT_DIR"/*.db-wal "$OUT_DIR"/*.db-shm

# --- Summary -----------------------------------------------------------------
run python3 "$ROOT/scripts/gpu/summarize.py" "$OUT_DIR" "$BIN/clusterscope"
say "done in $(( $(date +%s) - START )) s"
cat "$OUT_DIR/summary.md" 2>/dev/null
