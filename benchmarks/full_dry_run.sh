#!/usr/bin/env bash
# Before spending GPU time: every chapter at `full` sizes (widths, depths, sample counts, grids) on
# the CPU, with the step and epoch counts cut to a few. The verdicts mean nothing; what it finds is
# a crash that only the sizes cause (on 2026-11-23 it found Theorem 7's OverflowError at depth 40,
# after the GPU run had found Corollary 8's ZeroDivisionError there).
#
#   benchmarks/full_dry_run.sh [PAPER ...]      results and logs in runs/full-dry/
#
# REHEARSE=1 runs the recorded path instead (PAPERLIB_CUDA_GRAPHS=rehearse: the CPU stand-in for a CUDA
# graph, which refuses host reads as a capture does), with the counts cut only as far as every recording
# trainer still runs a warm-up chunk and then a recorded one, whose check replays the recording against an
# eager rerun (moderate-overparam's phase chunks of 250 steps and lazy chunks of 10; bottleneck's 100 steps
# between logs; one epoch a chunk elsewhere). Results in runs/full-rehearsal/. Measured on 2026-11-28, one
# thread each, two or three runs on two cores: moderate-overparam 798 s, jacobian-lowrank 1,759 s,
# manifold-lsh 1,242 s, bottleneck 1,684 s, resnet-beyond-kernels 336 s.
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
declare -A REHEARSAL=(
  [moderate-overparam]="-p max_steps 1000 -p lazy_steps 40 -p sgd_epochs 2"
  [jacobian-lowrank]="-p lin_steps 10 -p epochs 3 -p epochs_corrupt 3 -p three_class_epochs 3 -p slq_vectors 2 -p slq_steps 10"
  [resnet-beyond-kernels]="-p epochs 4 -p paper_epochs 4 -p fig4_epochs 4 -p hand_steps 10"
  [bottleneck]="-p linear_steps 5 -p steps 300 -p sweep_steps 300 -p sym_steps 300"
  [manifold-lsh]="-p theory_steps 10 -p mlp_epochs 3 -p collapse_epochs 3 -p real_epochs 3 -p fista_steps 10"
)
if [[ "${REHEARSE:-0}" == 1 ]]; then
  OUT=runs/full-rehearsal
  export PAPERLIB_CUDA_GRAPHS=rehearse
  for paper in "${!REHEARSAL[@]}"; do SHORT[$paper]=${REHEARSAL[$paper]}; done
fi
mkdir -p "$OUT"
status=0
for paper in ${@:-moderate-overparam jacobian-lowrank resnet-beyond-kernels bottleneck manifold-lsh}; do
  start=$(date +%s)
  if OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} $PY -m paperlib run "$paper" --preset full --out "$OUT/$paper" \
       ${SHORT[$paper]} >"$OUT/$paper.log" 2>&1; then
    echo "$paper: ran at full sizes in $(( $(date +%s) - start )) s"
    # a recording that fails warns and trains eagerly: the run succeeds, so look for the warning
    if grep -q -e "could not be recorded as a CUDA graph" -e "CUDA graph's epoch differs" "$OUT/$paper/$paper.ipynb"; then
      echo "$paper: a recording failed (a warning in $OUT/$paper/$paper.ipynb)"
      status=1
    fi
  else
    echo "$paper: FAILED after $(( $(date +%s) - start )) s; see $OUT/$paper.log and $OUT/$paper/$paper.failed.ipynb"
    status=1
  fi
done
exit $status
