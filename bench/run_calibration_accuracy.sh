#!/bin/bash
# How well the calibrated planner predicts real CPU-engine runs: calibrate
# this machine (into a presets folder of its own), run several plans (DP,
# TP, PP and mixed; 1 to 4 ranks; two model sizes) with `clusterscope run`,
# whose stores carry the planner's estimate, and print for each plan the
# step and each part predicted against measured (`clusterscope trace stats
# --json`), then the errors over all plans; then learn from those runs
# (`clusterscope calibrate --learn`) and run every plan again. Markdown, for
# docs/calibration.md.
#
# Usage: bench/run_calibration_accuracy.sh [build dir] [work dir]
#   STEPS=10 (steps per run), CAL_SECONDS=0.2 (seconds per GEMM size of
#   the sweep), KEEP_CALIBRATION=1 (reuse the work dir's calibration).
# The machine should be otherwise idle: every figure is a time.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
WORK="${2:-$(mktemp -d /tmp/cs-calibration-accuracy.XXXXXX)}"
BIN="$BUILD/bin"
STEPS="${STEPS:-10}"
CAL_SECONDS="${CAL_SECONDS:-0.2}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The calibrated presets live in the work dir, not in the user's folder.
export CLUSTERSCOPE_USER_PRESETS="$WORK/presets"
mkdir -p "$WORK/presets"

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; work dir $WORK" >&2
if [[ "${KEEP_CALIBRATION:-0}" != 1 || ! -f "$WORK/calibration.db" ]]; then
  rm -f "$WORK/calibration.db"
  "$BIN/clusterscope" calibrate --backend cpu --ranks 1 2 4 --precisions fp32 \
    --seconds "$CAL_SECONDS" --out "$WORK/calibration.db" > "$WORK/calibration.txt"
fi

# name | parallel flags | model flags
SMALL="--layers 4 --hidden 128 --heads 4 --seq 64 --ffn 512 --vocab 512"
LARGE="--layers 6 --hidden 256 --heads 8 --seq 128 --ffn 1024 --vocab 1024"
PLANS=(
  "1 rank, small|--dp 1 --global-batch 2 --micro-batch 2|$SMALL"
  "DP 2, small|--dp 2 --global-batch 4 --micro-batch 2|$SMALL"
  "TP 2, small|--tp 2 --global-batch 2 --micro-batch 2|$SMALL"
  "PP 2, small|--pp 2 --global-batch 4 --micro-batch 1|$SMALL"
  "DP 2 x TP 2, small|--dp 2 --tp 2 --global-batch 4 --micro-batch 2|$SMALL"
  "DP 4, small|--dp 4 --global-batch 4 --micro-batch 1|$SMALL"
  "1 rank, large|--dp 1 --global-batch 2 --micro-batch 2|$LARGE"
  "DP 2, large|--dp 2 --global-batch 4 --micro-batch 2|$LARGE"
  "TP 2, large|--tp 2 --global-batch 2 --micro-batch 2|$LARGE"
  "PP 2, large|--pp 2 --global-batch 4 --micro-batch 1|$LARGE"
  "DP 2 x PP 2, large|--dp 2 --pp 2 --global-batch 4 --micro-batch 1|$LARGE"
)

table() {
  python3 - "$1" <<'EOF'
import json, sys

def ms(s):
    return "-" if s is None else f"{s * 1e3:.2f}"

def err(p, m):
    return "-" if not m or m <= 0 else f"{100 * (p / m - 1):+.1f} %"

rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
parts_seen = []
print("| plan | predicted step (ms) | measured step (ms) | error | largest disagreement |")
print("| --- | ---: | ---: | ---: | --- |")
step_errors, part_errors, detail = [], [], []
for name, path in rows:
    p = json.load(open(path)).get("prediction")
    if not p or not p.get("breakdown"):
        print(f"| {name} | - | - | - | no prediction in the store |")
        continue
    pred, meas = p["predicted_step_s"], p["measured_step_median_s"]
    step_errors.append((name, pred / meas - 1))
    print(f"| {name} | {ms(pred)} | {ms(meas)} | {err(pred, meas)} | {p['largest_disagreement']} |")
    detail.append((name, p["breakdown"], meas))

print()
print("Each part (ms per step; error where the part is at least 5 % of the measured step):")
print()
print("| plan | part | predicted | measured | error |")
print("| --- | --- | ---: | ---: | ---: |")
for name, breakdown, step in detail:
    for r in breakdown:
        m = r["measured_s"] or 0
        if r["predicted_s"] <= 0 and m <= 0:
            continue
        big = m >= 0.05 * step or r["predicted_s"] >= 0.05 * step
        e = err(r["predicted_s"], m) if big else "(small)"
        if big and m > 0:
            part_errors.append((name, r["name"], r["predicted_s"] / m - 1))
        print(f"| {name} | {r['name']} | {ms(r['predicted_s'])} | {ms(m)} | {e} |")

print()
if step_errors:
    within = sum(abs(e) <= 0.15 for _, e in step_errors)
    worst = max(step_errors, key=lambda x: abs(x[1]))
    print(f"Step time: {within} of {len(step_errors)} plans within 15 %; "
          f"mean |error| {100 * sum(abs(e) for _, e in step_errors) / len(step_errors):.1f} %, "
          f"worst {worst[0]} {100 * worst[1]:+.1f} %.")
if part_errors:
    within = sum(abs(e) <= 0.25 for _, _, e in part_errors)
    worst = max(part_errors, key=lambda x: abs(x[2]))
    print(f"Parts of 5 % of the step or more: {within} of {len(part_errors)} within 25 %; "
          f"worst {worst[0]} {worst[1]} {100 * worst[2]:+.1f} %.")
EOF
}

# run_pass NAME: every plan once into $WORK/NAME, then its table.
run_pass() {
  local pass="$1" i=0
  mkdir -p "$WORK/$pass"
  : > "$WORK/$pass/index.tsv"
  for entry in "${PLANS[@]}"; do
    IFS='|' read -r name parallel model <<< "$entry"
    i=$((i + 1))
    local store="$WORK/$pass/run$i.db"
    rm -f "$store"
    echo "[$pass $i/${#PLANS[@]}] $name" >&2
    # shellcheck disable=SC2086
    if ! (cd "$WORK/$pass" && "$BIN/clusterscope" run $parallel $model --precision fp32 \
            --steps "$STEPS" --out "$store" > "$WORK/$pass/run$i.txt" 2>&1); then
      echo "  failed: see $WORK/$pass/run$i.txt" >&2
      continue
    fi
    "$BIN/clusterscope" trace stats "$store" --json > "$WORK/$pass/run$i.json"
    printf '%s\t%s\n' "$name" "$WORK/$pass/run$i.json" >> "$WORK/$pass/index.tsv"
  done
  echo "load after the $pass pass: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  table "$WORK/$pass/index.tsv"
}


echo "## After calibration"
echo
run_pass calibrated
# Learn from the first pass's runs (each refines its rank count's preset),
# then run every plan again.
mapfile -t learned < <(ls -v "$WORK"/calibrated/run*.db 2>/dev/null)
if [[ ${#learned[@]} -gt 0 ]]; then
  "$BIN/clusterscope" calibrate --learn "${learned[@]}" > "$WORK/learn.txt"
  echo
  echo "## After learning from those runs"
  echo
  run_pass learned
fi
