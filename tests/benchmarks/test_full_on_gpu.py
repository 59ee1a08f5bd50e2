"""benchmarks/full_on_gpu.sh's decisions, run here with stand-ins: which chapters train eagerly after the
CUDA tests, and the queue that starts chapters as running ones end. A mistake in either costs GPU time that
no CPU run would show."""

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "full_on_gpu.sh"
PAPERS = ["moderate-overparam", "jacobian-lowrank", "resnet-beyond-kernels", "bottleneck", "manifold-lsh"]

pytestmark = pytest.mark.skipif(os.name != "posix", reason="a bash script")


def script(tmp_path, *args, env=None):
    runs = tmp_path / "runs"
    runs.mkdir(exist_ok=True)
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "RUNS": str(runs), **(env or {})}, check=True)


def eager_chapters(tmp_path, cuda_tests_output):
    output = tmp_path / "cuda-tests.txt"
    output.write_text(cuda_tests_output)
    script(tmp_path, "graphs_off", str(output))
    return sorted(path.name.removeprefix("graphs-off.") for path in (tmp_path / "runs").glob("graphs-off.*"))


PASSED = "14 passed, 193 deselected in 12.1s\n"


def test_a_passing_session_keeps_every_chapters_graphs(tmp_path):
    assert eager_chapters(tmp_path, ". . . .\n" + PASSED) == []


def test_a_failed_trainer_test_turns_off_its_own_chapter_only(tmp_path):
    failed = ("FAILED tests/papers/jacobian_lowrank/test_resnet.py::test_cuda_graphs_train_as_eager_cuda - AssertionError\n"
              "FAILED tests/nets/test_training.py::test_gd_on_cuda_graphs_trains_as_eager_cuda[0.05-None] - x\n"
              "FAILED tests/papers/manifold_lsh/test_manifolds.py::test_device_paths_cuda - not a graph test\n"
              "2 failed, 12 passed, 193 deselected in 12.1s\n")
    # test_training.py's graph tests are moderate-overparam's trainers; a failed test of no graph keeps graphs
    assert eager_chapters(tmp_path, failed) == ["jacobian-lowrank", "moderate-overparam"]


@pytest.mark.parametrize("output", [
    "FAILED tests/nets/test_graphs.py::test_cuda_graph_replays_the_eager_epochs - x\n1 failed, 13 passed\n",
    "ERROR tests/papers/bottleneck/test_deepfc_repcost.py - ImportError\n1 error, 13 passed\n",
    "no tests ran\n",
], ids=["the mechanism's test", "a file that did not load", "nothing passed"])
def test_a_failure_of_the_mechanism_turns_off_every_chapter(tmp_path, output):
    assert eager_chapters(tmp_path, output) == sorted(PAPERS)


def test_the_queue_starts_each_chapter_after_the_one_before_ends(tmp_path):
    """One slot, two queued chapters: a stand-in `python` records when each "run" starts and ends; the
    second must start after the first ended, and each in the order queued, with its graphs switch."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stamps = tmp_path / "stamps"
    (bin_dir / "python").write_text(
        "#!/usr/bin/env bash\n"  # python -m paperlib run PAPER ...
        f'echo "start $4 ${{PAPERLIB_CUDA_GRAPHS:-on}} $(date +%s.%N)" >> {stamps}\n'
        "sleep 0.5\n"
        f'echo "end $4 $(date +%s.%N)" >> {stamps}\n')
    (bin_dir / "python").chmod(0o755)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "queue").write_text("manifold-lsh\nresnet-beyond-kernels\n")
    (tmp_path / "runs" / "graphs-off.resnet-beyond-kernels").touch()
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FEED_EVERY": "0.2", "PRESET": "smoke"}
    fed = script(tmp_path, "feed", "1", str(tmp_path / "runs"), env=env)  # returns once the queue is empty
    assert fed.stdout.count("started") == 2
    # `feed` returns once the queue is empty, while the last chapter it started still runs
    subprocess.run(["bash", "-c", f"while ! grep -q 'end resnet' {stamps} 2>/dev/null; do sleep 0.1; done"], timeout=10)
    events = [line.split() for line in stamps.read_text().splitlines()]
    assert [event[:2] for event in events] == [["start", "manifold-lsh"], ["end", "manifold-lsh"],
                                               ["start", "resnet-beyond-kernels"], ["end", "resnet-beyond-kernels"]]
    assert [event[2] for event in events if event[0] == "start"] == ["on", "0"]
    assert float(events[2][3]) >= float(events[1][2])
    assert not (tmp_path / "runs" / "queue").read_text()


@pytest.mark.parametrize("args, env, message", [
    (["start", "moderate-overparam", "bottlenek"], {}, "unknown chapter 'bottlenek'"),
    (["start", "bottleneck"], {"QUEUE": "manifold"}, "unknown chapter 'manifold'"),
    (["start", "bottleneck"], {"SLOTS": "0"}, "SLOTS must be a positive integer, got '0'"),
    (["add"], {}, "add needs at least one chapter"),
], ids=["a misspelt chapter", "a misspelt queued chapter", "no slot", "add without a chapter"])
def test_bad_input_stops_before_anything_is_installed_or_started(tmp_path, args, env, message):
    runs = tmp_path / "runs"
    result = subprocess.run(["bash", str(SCRIPT), *args], cwd=tmp_path, capture_output=True, text=True, timeout=30,
                            env={**os.environ, "RUNS": str(runs), **env})
    assert result.returncode == 2 and message in result.stderr
    assert not runs.exists()  # nothing was made: no folder, no sampler, no run
