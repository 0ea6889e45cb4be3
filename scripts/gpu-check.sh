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
#   - an FP8 probe through PyTorch (torch._scaled_mm), independent of the
#     engine's cuBLASLt path, when torch imports and the GPU has FP8;
#   - a small PyTorch DDP program under `clusterscope profile`, when torch imports;
#   - summary.json and summary.md: GPU, driver and CUDA versions, GEMM TFLOP/s
#     against the GPU's peak (and what an fp8 GEMM really ran in), tracer
#     overhead, events per kind, each worker run's FP8 GEMMs, fallbacks and
#     errors, predicted versus measured step time.
# Every step that runs a GPU program is stopped after STEP_LIMIT seconds, and
# past GPU_CHECK_DEADLINE the remaining steps are skipped: the summary is
# always written (on an interrupt too).
# Usage: scripts/gpu-check.sh [OUT_DIR]   (default: gpu-check-out)
#   Exit status 0 when it ran; 1 when no GPU answers nvidia-smi or the build
#   failed (the summary then says so).
#   CLUSTERSCOPE_DEPS_DIR  a folder of prefixes (nlohmann, CLI11, sqlite3, zlib)
#                          for a machine without their development packages
#                          (scripts/gpu-deps.sh makes it)
#   GPU_CHECK_STEPS        worker steps per precision (default 12)
#   STEP_LIMIT             seconds one GPU step may take (default 90; a normal
#                          one takes under 10)
#   GPU_CHECK_DEADLINE     seconds from the start after which the remaining
#                          steps are skipped (default 420)
#   CUDA_VISIBLE_DEVICES   its first entry is the GPU checked (default 0)
# The outputs of an earlier check in OUT_DIR are removed first (only the
# files this check writes), so that a rerun does not mix with it.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="$(mkdir -p "${1:-$ROOT/gpu-check-out}" && cd "${1:-$ROOT/gpu-check-out}" && pwd)"
BUILD="${GPU_CHECK_BUILD:-$ROOT/build-gpu}"
STEPS="${GPU_CHECK_STEPS:-12}"
LOG="$OUT_DIR/log.txt"
START=$(date +%s)
# A worker that hangs (a rank stuck in NCCL, a driver fault) is stopped
# after this many seconds, so that the rest of the check still runs.
STEP_LIMIT=${STEP_LIMIT:-90}
DEADLINE=${GPU_CHECK_DEADLINE:-420}
# The GPU checked: the first of those the caller made visible, else GPU 0.
GPU_ID="${CUDA_VISIBLE_DEVICES:-}"
GPU_ID="${GPU_ID%%,*}"
GPU_ID="${GPU_ID// /}"
GPU_ID="${GPU_ID:-0}"
BIN="$BUILD/bin"

# What this check writes into OUT_DIR, removed before it starts.
shopt -s nullglob
rm -f "$OUT_DIR"/worker-*.jsonl "$OUT_DIR"/worker-*.db "$OUT_DIR"/worker-*.db-wal \
  "$OUT_DIR"/worker-*.db-shm "$OUT_DIR"/gemm.jsonl "$OUT_DIR"/gemm-fp8-diagnosis.jsonl \
  "$OUT_DIR"/cublaslt-fp8.log "$OUT_DIR"/bandwidth.jsonl "$OUT_DIR"/sweep-bandwidth*.db* \
  "$OUT_DIR"/allreduce.jsonl "$OUT_DIR"/calibration-sweeps.jsonl "$OUT_DIR"/calibration.db* \
  "$OUT_DIR"/prediction-*.json "$OUT_DIR"/fp8-probe.json "$OUT_DIR"/torch-ddp.db* \
  "$OUT_DIR"/torch-ddp.log "$OUT_DIR"/torch-ddp-capture.db* "$OUT_DIR"/torch-ddp-capture.log \
  "$OUT_DIR"/cupti-bf16.replay "$OUT_DIR"/gpus.csv \
  "$OUT_DIR"/summary.json "$OUT_DIR"/summary.md "$OUT_DIR"/presets/calibrated-*.json
shopt -u nullglob
: > "$LOG"

elapsed() { echo $(( $(date +%s) - START )); }
say() { echo "== $(elapsed)s: $*" | tee -a "$LOG"; }
run() {  # run and log a command (not a GPU program); keep going on failure
  say "$*"
  "$@" >>"$LOG" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || say "exit status $rc: $1"
  return $rc
}
# Past the deadline every remaining step is skipped; said once in the log.
DEADLINE_SAID=0
past_deadline() {  # past_deadline WHAT: true (and logged) when WHAT is skipped
  [ "$(elapsed)" -lt "$DEADLINE" ] && return 1
  if [ $DEADLINE_SAID -eq 0 ]; then
    say "past GPU_CHECK_DEADLINE ($DEADLINE s): the remaining steps are skipped, on to the summary"
    DEADLINE_SAID=1
  fi
  say "skipped (deadline): $*"
  return 0
}
# A step's limit: STEP_LIMIT, or less where the deadline comes first.
step_limit() {
  local left=$(( DEADLINE - $(elapsed) ))
  [ "$left" -lt 5 ] && left=5
  [ "$left" -lt "$STEP_LIMIT" ] && echo "$left" || echo "$STEP_LIMIT"
}
run_to() {  # run with stdout into a file (appended), stderr into the log; time-limited
  local file=$1
  shift
  past_deadline "$*" && return 124
  local limit
  limit=$(step_limit)
  say "$* >> $(basename "$file")"
  # In the background and waited for, so that an interrupt is handled at
  # once (the trap stops the step) rather than when the step ends.
  timeout --kill-after=10 "$limit" "$@" >>"$file" 2>>"$LOG" &
  STEP_PID=$!
  wait "$STEP_PID"
  local rc=$?
  STEP_PID=""
  # The step named by its program and first arguments, past env's settings.
  local words=("$@")
  while [ ${#words[@]} -gt 1 ] && [[ "${words[0]}" == env || "${words[0]}" == *=* ]]; do
    words=("${words[@]:1}")
  done
  local what
  what="$(basename "${words[0]}") ${words[*]:1:4}"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    say "stopped after $limit s (STEP_LIMIT $STEP_LIMIT, deadline $DEADLINE): $what"
  elif [ $rc -ne 0 ]; then
    say "exit status $rc: $what"
  fi
  return $rc
}

# The summary, written whatever happened before (an interrupt too).
SUMMARY_WRITTEN=0
finish() {
  [ $SUMMARY_WRITTEN -eq 1 ] && return
  SUMMARY_WRITTEN=1
  trap - INT TERM
  # Fold each store's write-ahead log into it, so that one file per store
  # travels (no store at all: the loop runs for none, not for "*.db").
  shopt -s nullglob
  for db in "$OUT_DIR"/*.db; do
    timeout 30 python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.close()" "$db" >>"$LOG" 2>&1
  done
  shopt -u nullglob
  rm -f "$OUT_DIR"/*.db-wal "$OUT_DIR"/*.db-shm
  say "python3 $ROOT/scripts/gpu/summarize.py $OUT_DIR $BIN/clusterscope"
  timeout --kill-after=5 120 python3 "$ROOT/scripts/gpu/summarize.py" "$OUT_DIR" "$BIN/clusterscope" >>"$LOG" 2>&1
  local rc=$?
  if [ $rc -ne 0 ] || [ ! -s "$OUT_DIR/summary.md" ]; then
    say "the summary script failed (exit status $rc): a short summary from the log instead"
    {
      echo "# GPU check"
      echo
      echo "The summary script failed (exit status $rc); the log's own lines:"
      echo
      grep '^== ' "$LOG" | sed 's/^/    /'
    } > "$OUT_DIR/summary.md"
  fi
  say "done in $(elapsed) s"
  cat "$OUT_DIR/summary.md" 2>/dev/null
}
STEP_PID=""
interrupted() {
  say "interrupted: the step running stopped, writing the summary"
  # timeout passes the signal on to its program.
  [ -n "$STEP_PID" ] && kill -TERM "$STEP_PID" 2>/dev/null && wait "$STEP_PID" 2>/dev/null
  finish
  exit 130
}
trap interrupted INT TERM

say "GPU check into $OUT_DIR (GPU $GPU_ID; STEP_LIMIT $STEP_LIMIT s, GPU_CHECK_DEADLINE $DEADLINE s)"
if ! command -v nvidia-smi >/dev/null 2>&1; then
  say "no nvidia-smi on this machine: no NVIDIA GPU to check"
  finish
  exit 1
fi
timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader > "$OUT_DIR/gpus.csv" 2>>"$LOG"
if [ ! -s "$OUT_DIR/gpus.csv" ]; then
  rm -f "$OUT_DIR/gpus.csv"
  say "no NVIDIA GPU answers nvidia-smi: nothing to check"
  finish
  exit 1
fi
tee -a "$LOG" < "$OUT_DIR/gpus.csv"
# The GPUs the worker's ranks see: those made visible, else every one.
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  GPUS=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
else
  GPUS=$(wc -l < "$OUT_DIR/gpus.csv")
fi
# The compute capability of the GPU checked (nvidia-smi takes an index or a
# UUID; a MIG name it does not: then the first GPU's).
CC=$(timeout 30 nvidia-smi -i "$GPU_ID" --query-gpu=compute_cap --format=csv,noheader 2>>"$LOG" | head -1 | tr -d '. ')
[[ "$CC" =~ ^[0-9]+$ ]] || CC=$(head -1 "$OUT_DIR/gpus.csv" | awk -F', ' '{print $4}' | tr -d '. ')
[[ "$CC" =~ ^[0-9]+$ ]] || CC=0
say "compute capability $CC, $GPUS GPU(s) visible"
nvcc --version 2>&1 | tail -2 >> "$LOG"

# --- Build (Qt-free) -------------------------------------------------------
deps=()
if [ -n "${CLUSTERSCOPE_DEPS_DIR:-}" ]; then
  # One prefix per library (scripts/gpu-deps.sh), as a CMake list.
  list=$(ls -d "$CLUSTERSCOPE_DEPS_DIR"/*/ 2>/dev/null | sed 's:/$::' | paste -sd';')
  deps=(-DCLUSTERSCOPE_DEPS_DIR="${list:-$CLUSTERSCOPE_DEPS_DIR}")
fi
# The build runs no GPU program, but is bounded by the deadline too.
BUILD_LIMIT=$(( DEADLINE - $(elapsed) ))
[ "$BUILD_LIMIT" -lt 60 ] && BUILD_LIMIT=60
arch=$CC
[ "$arch" -ge 50 ] 2>/dev/null || arch=90
if ! run timeout "$BUILD_LIMIT" cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCLUSTERSCOPE_GUI=OFF -DCLUSTERSCOPE_TESTS=OFF -DCLUSTERSCOPE_BENCH=OFF -DCLUSTERSCOPE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" "${deps[@]}" ||
  ! run timeout "$BUILD_LIMIT" cmake --build "$BUILD" --parallel "$(nproc)" \
    --target clusterscope clusterscope-worker; then
  say "the build failed: nothing ran on the GPU"
  finish
  exit 1
fi
run timeout "$BUILD_LIMIT" cmake --build "$BUILD" --parallel "$(nproc)" --target clusterscope-inject
say "built"

GPU_ENV=(env CUDA_VISIBLE_DEVICES="$GPU_ID")

# --- The worker on the GPU, every precision, traced -------------------------
PRECISIONS="fp32 tf32 bf16 fp16"
[ "$CC" -ge 89 ] && PRECISIONS="$PRECISIONS fp8"
SHAPE=(--layers 12 --hidden 768 --heads 12 --seq 1024 --micro-batch 8 --steps "$STEPS")
for p in $PRECISIONS; do
  capture=()
  # The bf16 run also keeps CUPTI's raw buffers: a replay fixture for tests without a GPU.
  [ "$p" = bf16 ] && capture=(CLUSTERSCOPE_CUPTI_CAPTURE="$OUT_DIR/cupti-bf16.replay")
  run_to "$OUT_DIR/worker-$p.jsonl" "${GPU_ENV[@]}" "${capture[@]}" "$BIN/clusterscope-worker" \
    --backend cuda --precision "$p" "${SHAPE[@]}" --title "GPU check: GPT-2 small shape, $p" \
    --out "$OUT_DIR/worker-$p.db"
  [ -f "$OUT_DIR/worker-$p.rank0.db" ] && mv "$OUT_DIR/worker-$p.rank0.db" "$OUT_DIR/worker-$p.db"
done
# The tracer's overhead: the bf16 run again, untraced.
run_to "$OUT_DIR/worker-bf16-untraced.jsonl" "${GPU_ENV[@]}" "$BIN/clusterscope-worker" \
  --backend cuda --precision bf16 "${SHAPE[@]}" --no-trace

# --- Sweeps ----------------------------------------------------------------
# Each gemm line says what its GEMMs ran in ("ran_as": "bf16" where cuBLASLt
# turned an fp8 shape down), and an fp8 run ends with its FP8 and fallback counts.
for p in $PRECISIONS; do
  run_to "$OUT_DIR/gemm.jsonl" "${GPU_ENV[@]}" "$BIN/clusterscope-worker" --backend cuda \
    --precision "$p" --sweep gemm --sizes 1024 2048 4096 8192 --sweep-seconds 0.3
done
# Why cuBLASLt turns FP8 down, where it does: its own log (errors, hints,
# information and the API trace: each call's layouts and attributes) of one
# short FP8 GEMM, kept beside the stores.
if [[ " $PRECISIONS " == *" fp8 "* ]]; then
  run_to "$OUT_DIR/gemm-fp8-diagnosis.jsonl" "${GPU_ENV[@]}" CUBLASLT_LOG_MASK=31 \
    CUBLASLT_LOG_FILE="$OUT_DIR/cublaslt-fp8.log" "$BIN/clusterscope-worker" --backend cuda \
    --precision fp8 --sweep gemm --sizes 1024 --sweep-seconds 0.05
  [ -f "$OUT_DIR/cublaslt-fp8.log" ] && truncate -s '<4M' "$OUT_DIR/cublaslt-fp8.log"
fi
run_to "$OUT_DIR/bandwidth.jsonl" "${GPU_ENV[@]}" "$BIN/clusterscope-worker" --backend cuda \
  --precision bf16 --sweep bandwidth --out "$OUT_DIR/sweep-bandwidth.db"
[ -f "$OUT_DIR/sweep-bandwidth.rank0.db" ] && mv "$OUT_DIR/sweep-bandwidth.rank0.db" "$OUT_DIR/sweep-bandwidth.db"
if [ "$GPUS" -ge 2 ]; then
  if ! past_deadline "the all-reduce sweep over $GPUS GPUs"; then
    port=$((29500 + RANDOM % 1000))
    limit=$(step_limit)
    say "all-reduce sweep over $GPUS GPUs (each rank limited to $limit s)"
    pids=()
    for r in $(seq 0 $((GPUS - 1))); do
      timeout --kill-after=10 "$limit" env RANK=$r WORLD_SIZE=$GPUS LOCAL_RANK=$r \
        LOCAL_WORLD_SIZE=$GPUS NCCL_COMM_ID=127.0.0.1:$port "$BIN/clusterscope-worker" --backend cuda --precision fp32 --dp "$GPUS" --sweep all_reduce \
        >> "$OUT_DIR/allreduce.jsonl" 2>>"$LOG" &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || say "an all-reduce rank ended with status $?"; done
    say "all-reduce sweep over $GPUS GPUs done"
  fi
else
  say "one GPU: no NCCL all-reduce sweep (NCCL allows one rank per GPU)"
fi

# --- The planner calibrated on this GPU, against the worker's runs ----------
# The sweeps `clusterscope calibrate --backend cuda` runs (a layer's GEMMs per
# precision) with the streaming sweep above make this GPU's calibrated
# presets, kept in the check's folder; each worker run above is then held
# against the planner's prediction made with them (trace stats --predict-again).
# An fp8 sample that ran in BF16 is calibrated as BF16 (its "ran_as").
PRESETS_DIR="$OUT_DIR/presets"
mkdir -p "$PRESETS_DIR"
for p in $PRECISIONS; do
  # The engine's loops (layer norm, GELU, attention, AdamW, ...) once, in bf16.
  sweeps=layer_gemm
  [ "$p" = bf16 ] && sweeps=layer_gemm,ops
  run_to "$OUT_DIR/calibration-sweeps.jsonl" "${GPU_ENV[@]}" "$BIN/clusterscope-worker" \
    --backend cuda --precision "$p" --sweep "$sweeps" --gemm-sizes 1024 2048 4096 8192 \
    --sweep-seconds 0.2 --no-trace
done
if [ -s "$OUT_DIR/calibration-sweeps.jsonl" ] && ! past_deadline "calibrate and predict" &&
  run timeout 60 env CLUSTERSCOPE_USER_PRESETS="$PRESETS_DIR" "$BIN/clusterscope" calibrate \
    --from-sweeps "$OUT_DIR/calibration-sweeps.jsonl" "$OUT_DIR/bandwidth.jsonl" \
    --out "$OUT_DIR/calibration.db"; then
  for p in $PRECISIONS; do
    [ -f "$OUT_DIR/worker-$p.db" ] || continue
    run_to "$OUT_DIR/prediction-$p.json" env CLUSTERSCOPE_USER_PRESETS="$PRESETS_DIR" \
      "$BIN/clusterscope" trace stats "$OUT_DIR/worker-$p.db" --predict-again --no-steps --top 0 --json
  done
fi

# --- PyTorch: an FP8 probe, and a program under the injection library -------
TORCH=0
if ! past_deadline "the PyTorch steps"; then
  if timeout 60 "${GPU_ENV[@]}" python3 -c "import torch; assert torch.cuda.is_available()" >>"$LOG" 2>&1; then
    TORCH=1
  else
    say "PyTorch with CUDA is not importable: no FP8 probe, no profiled PyTorch run"
  fi
fi
if [ $TORCH -eq 1 ]; then
  # FP8 GEMMs through PyTorch's own cuBLASLt, whatever the engine's did.
  if [ "$CC" -ge 89 ]; then
    run_to "$OUT_DIR/fp8-probe.json" "${GPU_ENV[@]}" python3 "$ROOT/scripts/gpu/fp8_probe.py"
  else
    say "compute capability $CC: no FP8 tensor cores, no FP8 probe"
  fi
  TORCHRUN=(python3 -m torch.distributed.run --standalone --nproc_per_node 1)
  run_to "$OUT_DIR/torch-ddp.log" "${GPU_ENV[@]}" "$BIN/clusterscope" profile \
    --out "$OUT_DIR/torch-ddp.db" -- "${TORCHRUN[@]}" "$ROOT/scripts/gpu/torch_ddp_smoke.py" --steps 20
  # Only steps 8 to 11, between cudaProfilerStart and Stop (Megatron-LM's
  # --profile), held against the planner's prediction of the program's plan:
  # tst_gpu_traces captureRangeOfAPyTorchProgram reads it.
  run_to "$OUT_DIR/torch-ddp-capture.log" "${GPU_ENV[@]}" "$BIN/clusterscope" profile \
    --capture-range cudaProfilerApi --plan "$ROOT/scripts/gpu/torch_ddp_smoke.plan.json" \
    --out "$OUT_DIR/torch-ddp-capture.db" -- "${TORCHRUN[@]}" \
    "$ROOT/scripts/gpu/torch_ddp_smoke.py" --steps 20 --profile-steps 8:11
fi

# --- Summary -----------------------------------------------------------------
finish
exit 0
