#!/usr/bin/env bash
# Before spending GPU time: every chapter at `full` sizes (widths, depths, sample counts, grids) on
# the CPU, with the step and epoch counts cut to a few. The verdicts mean nothing; what it finds is
# a crash that only the sizes cause (on 2026-11-23 it found Theorem 7's OverflowError at depth 40,
# after the GPU run had found Corollary 8's ZeroDivisionError there).
#
#   benchmarks/full_dry_run.sh [PAPER ...]      results and logs in runs/full-dry/
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=runs/full-dry
declare -A SHORT=(
  [moderate-overparam]="-p max_steps 10 -p lazy_steps 10 -p sgd_epochs 1"
  [jacobian-lowrank]="-p lin_steps 10 -p epochs 1 -p epochs_corrupt 2"
  [resnet-beyond-kernels]="-p epochs 1 -p paper_epochs 1 -p fig4_epochs 1 -p hand_steps 10"
  [bottleneck]="-p linear_steps 5 -p steps 2 -p sweep_steps 2 -p sym_steps 2"
  [manifold-lsh]="-p theory_steps 10 -p mlp_epochs 1 -p collapse_epochs 1 -p real_epochs 1 -p fista_steps 10"
)
mkdir -p "$OUT"
status=0
for paper in ${@:-moderate-overparam jacobian-lowrank resnet-beyond-kernels bottleneck manifold-lsh}; do
  start=$(date +%s)
  if OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} $PY -m paperlib run "$paper" --preset full --out "$OUT/$paper" \
       ${SHORT[$paper]} >"$OUT/$paper.log" 2>&1; then
    echo "$paper: ran at full sizes in $(( $(date +%s) - start )) s"
  else
    echo "$paper: FAILED after $(( $(date +%s) - start )) s; see $OUT/$paper.log and $OUT/$paper/$paper.failed.ipynb"
    status=1
  fi
done
exit $status
