#!/usr/bin/env bash
# Run chapters at `full` on a lent GPU machine, detached, and collect what they leave.
#
#   benchmarks/full_on_gpu.sh start [PAPER ...]   install the notebook stack from .whl/, start each
#                                                 chapter detached (setsid), sample the GPU every 5 s
#   benchmarks/full_on_gpu.sh poll SECONDS        wait up to SECONDS (or until every run ended), then
#                                                 pack logs, GPU samples, finished results and the
#                                                 notebooks in progress into $OUT/full-runs.tar.gz
#
# papermill saves the notebook after every cell, with each cell's start, end and duration in its
# metadata: the notebook in progress (in the run's scratch folder) tells where the time goes.
#
# Runs live in /tmp/full on the machine, so they outlast one call only while calls follow back to
# back (the machine is given back about 30 s after a call ends). See DEVELOPERS.md.
set -euo pipefail
RUNS=/tmp/full
PAPERS_ALL="moderate-overparam jacobian-lowrank resnet-beyond-kernels bottleneck manifold-lsh"

setup_env() {
    if [ ! -d /tmp/site/papermill ]; then
        pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >/tmp/pip.log 2>&1 \
            || { tail -20 /tmp/pip.log; exit 1; }
    fi
    export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
}

start() {
    setup_env
    mkdir -p $RUNS
    local papers="${*:-$PAPERS_ALL}" n threads
    n=$(echo $papers | wc -w); threads=$(( $(nproc) / n )); [ $threads -ge 1 ] || threads=1
    # everything under setsid: a call's own processes end with it, and a pipe to one of them would too
    setsid nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 5 \
        >$RUNS/gpu-util.csv 2>&1 </dev/null &
    for paper in $papers; do
        OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads setsid bash -c \
            "start=\$(date +%s); python -m paperlib run $paper --preset full --out $RUNS/$paper --log-output;
             echo \"exit \$? after \$(( \$(date +%s) - start )) s\"" >$RUNS/$paper.log 2>&1 </dev/null &
    done
    python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0))'
    echo "started: $papers ($threads CPU threads each)"
}

poll() {
    local until=$(( $(date +%s) + ${1:-60} ))
    while [ $(date +%s) -lt $until ] && pgrep -f "paperlib run" >/dev/null; do sleep 10; done
    for log in $RUNS/*.log; do echo "== $log"; grep -v '%|' $log | tail -4; done
    tail -2 $RUNS/gpu-util.csv
    tar -czf "$OUT/full-runs.tar.gz" -C "$(dirname $RUNS)" "$(basename $RUNS)" || true
    ls -la "$OUT"
}

"$@"
