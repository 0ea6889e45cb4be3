#!/bin/bash
# How well the calibrated planner predicts real CPU-engine runs: calibrate
# this machine (into a presets folder of its own; the calibration's own
# reference runs and their predictions shown first), run several plans (DP,
# TP, PP and mixed; 1 to 4 ranks; two model sizes) with `clusterscope run`,
# whose stores carry the planner's estimate, and print for each plan the
# step and each part predicted against measured (`clusterscope trace stats
# --json`), then the errors over all plans; then learn from those runs
# (`clusterscope calibrate --learn`, both runs of each plan) and run every
# plan again. Markdown, for
# docs/calibration.md.
#
# Usage: bench/run_calibration_accuracy.sh [build dir] [work dir]
#   STEPS=10 (steps per run), CAL_SECONDS=0.2 (seconds per GEMM size of
#   the sweep), KEEP_CALIBRATION=1 (reuse the work dir's calibration),
#   AGAIN=0 (run each plan once; by default each runs twice in a row, and
#   the second run shows how far the machine moves between two runs),
#   ONLY=text (only the plans whose name holds it).
# The machine should be otherwise idle: every figure is a time.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
WORK="${2:-$(mktemp -d /tmp/cs-calibration-accuracy.XXXXXX)}"
BIN="$BUILD/bin"
STEPS="${STEPS:-10}"
CAL_SECONDS="${CAL_SECONDS:-0.2}"
AGAIN="${AGAIN:-1}"
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
  "PP 2 x 3 chunks (interleaved), large|--pp 2 --virtual-stages 3 --global-batch 4 --micro-batch 1|$LARGE"
)
# ONLY=text: the plans whose name holds it (the others are left out).
if [[ -n "${ONLY:-}" ]]; then
  kept=()
  for entry in "${PLANS[@]}"; do
    [[ "${entry%%|*}" == *"$ONLY"* ]] && kept+=("$entry")
  done
  PLANS=("${kept[@]}")
fi

table() {
  python3 - "$1" <<'EOF'
import json, sys

def ms(s):
    return "-" if s is None else f"{s * 1e3:.2f}"

def err(p, m):
    return "-" if not m or m <= 0 else f"{100 * (p / m - 1):+.1f} %"

def measured(path):
    p = json.load(open(path)).get("prediction") if path else None
    return p if p and p.get("breakdown") else None

rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
parts_seen = []
def probe(path):
    """The machine probe before the first step against the model: "GEMM / loop / all-reduce"."""
    p = json.load(open(path)).get("prediction") if path else None
    m = (p or {}).get("machine_probe") or {}
    if "gemm_ratio" not in m:
        return "-", None
    parts = [f"{100 * (m[k] - 1):+.0f} %" for k in ("gemm_ratio", "loop_ratio", "all_reduce_ratio")
             if m.get(k, 0) > 0]
    return " / ".join(parts), m.get("drifted")

print("| plan | predicted step (ms) | measured step (ms) | error | largest disagreement | "
      "machine probe (GEMM / loop / all-reduce) | run again (ms) | its error |")
print("| --- | ---: | ---: | ---: | --- | --- | ---: | ---: |")
drifted_runs, steady_errors = 0, []
step_errors, again_errors, run_to_run, part_errors, detail = [], [], [], [], []
part_repeats = []  # (plan, part, the second run's part against the first's)
for name, path, *again_path in rows:
    p = measured(path)
    if not p:
        print(f"| {name} | - | - | - | no prediction in the store | - | - | - |")
        continue
    pred, meas = p["predicted_step_s"], p["measured_step_median_s"]
    step_errors.append((name, pred / meas - 1))
    q = measured(again_path[0]) if again_path else None
    again = q["measured_step_median_s"] if q else None
    if again:
        again_errors.append((name, pred / again - 1))
        run_to_run.append((name, again / meas - 1))
        # Each part measured twice: the most any prediction can hope for.
        second = {r["name"]: r["measured_s"] or 0 for r in q["breakdown"]}
        for r in p["breakdown"]:
            m = r["measured_s"] or 0
            if m >= 0.05 * meas and second.get(r["name"], 0) > 0:
                part_repeats.append((name, r["name"], second[r["name"]] / m - 1))
    probe_text, drifted = probe(path)
    if drifted:
        drifted_runs += 1
    elif drifted is not None:
        steady_errors.append(pred / meas - 1)
    print(f"| {name} | {ms(pred)} | {ms(meas)} | {err(pred, meas)} | {p['largest_disagreement']} | "
          f"{probe_text} | {ms(again)} | {err(pred, again)} |")
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
if drifted_runs or steady_errors:
    within = sum(abs(e) <= 0.15 for e in steady_errors)
    print(f"Machine probe: {drifted_runs} of {drifted_runs + len(steady_errors)} runs found the "
          f"machine more than 15 % from the calibrated model; of the others, {within} of "
          f"{len(steady_errors)} within 15 %.")
if again_errors:
    within = sum(abs(e) <= 0.15 for _, e in again_errors)
    print(f"The same plans run again right after: {within} of {len(again_errors)} within 15 %; "
          f"mean |error| {100 * sum(abs(e) for _, e in again_errors) / len(again_errors):.1f} %.")
    spread = sorted(abs(d) for _, d in run_to_run)
    largest = max(run_to_run, key=lambda x: abs(x[1]))
    print(f"Run to run (the second measured step against the first): median |difference| "
          f"{100 * spread[len(spread) // 2]:.1f} %, largest {largest[0]} {100 * largest[1]:+.1f} %.")
if part_errors:
    within = sum(abs(e) <= 0.25 for _, _, e in part_errors)
    worst = max(part_errors, key=lambda x: abs(x[2]))
    print(f"Parts of 5 % of the step or more: {within} of {len(part_errors)} within 25 %; "
          f"worst {worst[0]} {worst[1]} {100 * worst[2]:+.1f} %.")
if part_repeats:
    within = sum(abs(d) <= 0.25 for _, _, d in part_repeats)
    largest = max(part_repeats, key=lambda x: abs(x[2]))
    print(f"The same parts run again (the second run's against the first's): {within} of "
          f"{len(part_repeats)} within 25 %; largest {largest[0]} {largest[1]} "
          f"{100 * largest[2]:+.1f} %.")
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
    local line="$name\t$WORK/$pass/run$i.json"
    # The same plan once more, right after: how far the machine itself moves.
    if [[ "$AGAIN" == 1 ]]; then
      local again="$WORK/$pass/again$i.db"
      rm -f "$again"
      # shellcheck disable=SC2086
      if (cd "$WORK/$pass" && "$BIN/clusterscope" run $parallel $model --precision fp32 \
            --steps "$STEPS" --out "$again" > "$WORK/$pass/again$i.txt" 2>&1); then
        "$BIN/clusterscope" trace stats "$again" --json > "$WORK/$pass/again$i.json"
        line="$line\t$WORK/$pass/again$i.json"
      fi
    fi
    printf "$line\n" >> "$WORK/$pass/index.tsv"
  done
  echo "load after the $pass pass: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  table "$WORK/$pass/index.tsv"
}


echo "## After calibration"
echo
# The calibration's own check: its reference runs, predicted by the sweeps
# and by the presets saved (CPU engine; none with --no-reference-runs).
if grep -q "^reference runs, predicted" "$WORK/calibration.txt"; then
  echo '```'
  sed -n '/^reference runs, predicted/,/^$/p' "$WORK/calibration.txt" | sed '/^$/d'
  grep "^note: reference run" "$WORK/calibration.txt" || true
  echo '```'
  echo
fi
run_pass calibrated
# Learn from the first pass's runs, both runs of each plan (each refines
# its rank count's preset; two runs damp one that met a slow moment), then
# run every plan again.
mapfile -t learned < <(ls -v "$WORK"/calibrated/run*.db "$WORK"/calibrated/again*.db 2>/dev/null)
if [[ ${#learned[@]} -gt 0 ]]; then
  "$BIN/clusterscope" calibrate --learn "${learned[@]}" > "$WORK/learn.txt"
  echo
  echo "## After learning from those runs"
  echo
  run_pass learned
fi
