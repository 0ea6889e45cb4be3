#!/usr/bin/env bash
# Writes docs/cli.md: every command's --help, as the program prints it.
# tst_cli checks the file against the build, so that it cannot drift.
# Usage: scripts/cli-reference.sh [path/to/clusterscope] > docs/cli.md
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLI="${1:-$ROOT/build/bin/clusterscope}"
commands=(
  "" presets validate describe plan search run calibrate profile
  trace "trace info" "trace stats" "trace compare" "trace export" "trace import" "trace critical-path" "trace merge"
  calc "calc communication" "calc quantize" "calc flops"
)
echo "# Command-line reference"
echo
echo "Every command of \`clusterscope\` with its options, as \`--help\` prints them"
echo "(written by \`scripts/cli-reference.sh\`; \`tst_cli\` checks it against the"
echo "program). What the commands do, with examples: README.md, docs/planner.md,"
echo "docs/runs.md, docs/calibration.md and docs/trace-schema.md."
for c in "${commands[@]}"; do
  echo
  echo "## clusterscope${c:+ $c}"
  echo
  echo '```'
  # shellcheck disable=SC2086
  "$CLI" $c --help
  echo '```'
done
