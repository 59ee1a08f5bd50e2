#!/usr/bin/env bash
# Run chapters at `full` on a lent GPU machine, detached, and collect what they leave.
#
#   benchmarks/full_on_gpu.sh start [PAPER ...]   install the notebook stack from .whl/, start each
#                                                 chapter detached (setsid), sample the GPU and each
#                                                 chapter's share of it every 5 s (gpu_sampler.py);
#                                                 QUEUE="PAPER ...": chapters to start after those, in
#                                                 order, each as soon as fewer than SLOTS run (SLOTS: the
#                                                 number started, unless set), with the same split of the
#                                                 cores; the queue outlasts the call as the runs do
#   benchmarks/full_on_gpu.sh add PAPER ...       start more chapters beside those of an earlier `start` (its
#                                                 sampler and its choice on CUDA graphs; THREADS CPU threads
#                                                 each, half the cores unless set)
#   benchmarks/full_on_gpu.sh poll SECONDS        wait up to SECONDS (or until every run ended), then
#                                                 print the utilisation and the time per section of
#                                                 each chapter, and pack logs,
#                                                 GPU samples, finished results and the
#                                                 notebooks in progress into $OUT/full-runs.tar.gz
#   benchmarks/full_on_gpu.sh bench               bottleneck's two costs of 2026-11-27 (random_nets_threads.py,
#                                                 padding_skip.py): two to three minutes, for the time left over;
#                                                 their output goes to $OUT
#   benchmarks/full_on_gpu.sh stop                end the runs and the sampler
#
# papermill saves the notebook after every cell, with each cell's start, end and duration in its
# metadata: the notebook in progress (in the run's scratch folder) tells where the time goes.
#
# Runs live in /tmp/full on the machine, so they outlast one call only while calls follow back to
# back (the machine is given back about 30 s after a call ends). See DEVELOPERS.md.
set -euo pipefail
RUNS=${RUNS:-/tmp/full}
PRESET=${PRESET:-full}  # PRESET=smoke RUNS=/tmp/rehearsal: a rehearsal of the whole flow on any machine
BENCH=${BENCH:-1}       # BENCH=0: skip the launch-cost and graph-speedup benchmarks (about 30 s), once measured
PAPERS_ALL="moderate-overparam jacobian-lowrank resnet-beyond-kernels bottleneck manifold-lsh"

setup_env() {
    # without .whl/, the notebook stack is already installed. --no-compile: byte-compiling all 86 wheels took 16 of
    # 28 s here (Python 3.12, 2 cores); a run compiles only the modules it imports
    if [ -d .whl ] && [ ! -d /tmp/site/papermill ]; then
        pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/tmp/pip.log 2>&1 \
            || { tail -20 /tmp/pip.log; exit 1; }
    fi
    export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
}

check_papers() {  # check_papers PAPER ...: stop at once, before installing or starting anything, at a name
    local paper   # that is not a chapter (a queued one would otherwise fail only in its log, minutes later)
    for paper in "$@"; do
        case " $PAPERS_ALL " in *" $paper "*) ;; *) echo "unknown chapter '$paper' (one of: $PAPERS_ALL)" >&2; exit 2;; esac
    done
}

start() {
    check_papers "$@" ${QUEUE:-}
    [[ "${SLOTS:-1}" =~ ^[1-9][0-9]*$ ]] || { echo "SLOTS must be a positive integer, got '$SLOTS'" >&2; exit 2; }
    setup_env
    mkdir -p $RUNS; rm -f $RUNS/graphs-off.*
    local papers="${*:-$PAPERS_ALL}" slots threads
    slots=${SLOTS:-$(echo $papers | wc -w)}; threads=$(( $(nproc) / slots )); [ $threads -ge 1 ] || threads=1
    # the number every launch-count estimate assumed (about 8 µs an operator), measured here first: a few seconds
    [ "$BENCH" = 0 ] || python3 benchmarks/launch_overhead.py | tee $RUNS/launch-overhead.txt || true
    # the tests that only a GPU runs (CUDA graphs against eager training, device paths): seconds. A chapter
    # whose CUDA-graph test fails trains eagerly, as before graphs existed (graphs_off)
    python3 -m pytest -q -p no:cacheprovider -rfs tests/nets/test_graphs.py tests/papers/resnet_beyond_kernels/test_hiernet.py tests/papers/bottleneck/test_deepfc_repcost.py \
        tests/papers/manifold_lsh/test_manifolds.py tests/papers/jacobian_lowrank/test_data_jacobian.py tests/papers/jacobian_lowrank/test_resnet.py tests/papers/moderate_overparam/test_phase.py \
        tests/nets/test_training.py tests/maths/test_spectral.py -k cuda \
        >$RUNS/cuda-tests.txt 2>&1 || true
    tail -8 $RUNS/cuda-tests.txt
    graphs_off $RUNS/cuda-tests.txt | tee -a $RUNS/cuda-tests.txt
    # what the recordings save, trainer by trainer: the before and after of each chapter's steps (seconds)
    [ "$BENCH" = 0 ] || timeout 120 python3 benchmarks/graph_speedup.py | tee $RUNS/graph-speedup.txt || true
    # everything below under setsid: a call's own processes end with it, and a pipe to one of them would too
    # the whole GPU and each chapter's processes, every 5 s (FULL_RUN_PAPER names a process's chapter)
    setsid python3 benchmarks/gpu_sampler.py sample $RUNS/gpu-samples.csv --every 5 > $RUNS/sampler.out 2>&1 </dev/null &
    launch $threads $papers
    if [ -n "${QUEUE:-}" ]; then
        echo $QUEUE | tr ' ' '\n' > $RUNS/queue
        RUNS=$RUNS PRESET=$PRESET setsid bash "$(readlink -f "$0")" feed $slots $RUNS >$RUNS/queue.log 2>&1 </dev/null &
        echo "queued: $QUEUE (started as fewer than $slots run)"
    fi
    python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")'
    echo "started: $papers ($threads CPU threads each)"
}

graphs_off() {  # graphs_off CUDA_TESTS_OUTPUT: mark RUNS/graphs-off.PAPER for each chapter whose CUDA-graph test failed
    # every chapter when the mechanism's own tests (tests/nets/test_graphs.py) failed, when a test file did not
    # load, or when nothing passed; tests/nets/test_training.py's graph tests are moderate-overparam's trainers
    local output=$1 papers paper
    if grep -q "^ERROR" $output || ! grep -q " passed" $output || grep -q "^FAILED tests/nets/test_graphs.py" $output; then
        papers=$PAPERS_ALL
    else
        papers=$({ grep "^FAILED [^ ]*graph" $output || true; } | sed -n 's#^FAILED tests/papers/\([a-z_]*\)/.*#\1#p; s#^FAILED tests/nets/test_training.py.*#moderate_overparam#p' \
                 | tr _ - | sort -u)
    fi
    for paper in $papers; do
        touch $RUNS/graphs-off.$paper; echo "CUDA graph tests failed: $paper trains eagerly (PAPERLIB_CUDA_GRAPHS=0)"
    done
}

launch() {  # launch THREADS PAPER ...: each chapter detached, eagerly if this session's graph tests failed for it
    local threads=$1 paper switch; shift
    for paper in "$@"; do
        switch=""; [ ! -f $RUNS/graphs-off.$paper ] || switch="PAPERLIB_CUDA_GRAPHS=0"
        env $switch FULL_RUN_PAPER=$paper OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads setsid bash -c \
            "start=\$(date +%s); python -m paperlib run $paper --preset $PRESET --out $RUNS/$paper --log-output;
             echo \"exit \$? after \$(( \$(date +%s) - start )) s\"" >$RUNS/$paper.log 2>&1 </dev/null &
    done
}

running() {  # how many chapters started in $RUNS have not ended (their log has no exit line yet)
    local paper count=0
    for paper in $PAPERS_ALL; do
        [ ! -f $RUNS/$paper.log ] || grep -q "^exit " $RUNS/$paper.log || count=$(( count + 1 ))
    done
    echo $count
}

feed() {  # feed SLOTS RUNS: start the chapters listed in RUNS/queue, in order, whenever fewer than SLOTS run
    setup_env
    local slots=$1 threads paper
    threads=$(( $(nproc) / slots )); [ $threads -ge 1 ] || threads=1
    while [ -s $RUNS/queue ]; do
        if [ "$(running)" -lt "$slots" ]; then
            paper=$(head -1 $RUNS/queue); sed -i 1d $RUNS/queue
            launch $threads $paper
            echo "$(date -u +%T) started $paper ($threads CPU threads)"
        fi
        sleep ${FEED_EVERY:-5}  # also lets a chapter just launched open its log before the next count
    done
}

add() {
    [ $# -ge 1 ] || { echo "add needs at least one chapter (one of: $PAPERS_ALL)" >&2; exit 2; }
    check_papers "$@"
    setup_env
    [ -d $RUNS ] || { echo "no runs in $RUNS: use start"; exit 2; }
    local threads=${THREADS:-$(( $(nproc) / 2 ))}
    launch $threads "$@"
    echo "added: $* ($threads CPU threads each)"
}

poll() {
    local until=$(( $(date +%s) + ${1:-60} ))
    while [ $(date +%s) -lt $until ] && { pgrep -f -- "--out $RUNS/" >/dev/null || [ -s $RUNS/queue ]; }; do sleep 10; done
    [ ! -s $RUNS/queue ] || echo "still queued: $(cat $RUNS/queue | tr '\n' ' ')"
    for log in $RUNS/*.log; do echo "== $log"; { grep -v '%|' $log || true; } | tail -4; done
    python3 benchmarks/gpu_sampler.py summary $RUNS/gpu-samples.csv | tee $RUNS/gpu-summary.md || true
    # where each run's time went, finished or in progress (papermill's scratch copy)
    python3 benchmarks/section_times.py $(ls $RUNS/*/*.ipynb $RUNS/*/.*/*.ipynb 2>/dev/null | grep -v '\.source\.ipynb$') >$RUNS/section-times.md || true
    grep -h "running since\|failed\|^| total\|^###" $RUNS/section-times.md || true
    tar -czf "${OUT:?}/full-runs.tar.gz" -C "$(dirname $RUNS)" "$(basename $RUNS)" || true
    ls -la "$OUT"
}

bench() {
    setup_env
    timeout 150 python3 benchmarks/random_nets_threads.py 2>&1 | tee "${OUT:?}/random-nets-threads.txt" || true
    timeout 300 python3 benchmarks/padding_skip.py --profile-steps 20 --compiled 2>&1 | tee "$OUT/padding-skip.txt" || true
}

stop() {  # end the runs and the sampler (a rehearsal's end; a GPU machine's processes end when it goes back)
    pkill -f "full_on_gpu.sh feed [0-9]* $RUNS\$" || true; rm -f $RUNS/queue  # first, so that it starts nothing more
    pkill -f -- "--out $RUNS/" || true  # this folder's runs only
    pkill -f "gpu_sampler.py sample $RUNS/" || true
}

"$@"
