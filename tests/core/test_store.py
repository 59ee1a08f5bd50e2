"""The run store: a run is what its spec says (seed, overrides, threads, instruction set); one asked for by
several processes at once executes once, one that failed executes once a session, and one whose caller stops
stops with it."""

import json
import sys
import time

import pytest

from paperlib.core import params as P
from paperlib.core import store
from paperlib.core import sweep as S


def counting_run(spec, folder):
    """A stand-in for `paperlib run` that takes a second, counts its executions and records its environment."""
    script = f"""
import json, os, time
time.sleep(1)
with open({str(folder.parent / 'executions')!r}, 'a') as count:
    count.write('x')
env = {{name: os.environ.get(name) for name in ('OMP_NUM_THREADS', 'ATEN_CPU_CAPABILITY', 'OMP_WAIT_POLICY')}}
open({str(folder / (spec.paper + '.json'))!r}, 'w').write(json.dumps({{'env': env}}))
"""
    return [sys.executable, "-c", script]


def _ask(spec, folder, results):
    results.put(S.execute(spec, folder, "stamp", 30, counting_run)["status"])


def test_a_run_asked_for_by_two_processes_at_once_executes_once(tmp_path):
    """Two processes, as two pytest workers are: a lock that only threads shared would not pass."""
    import multiprocessing
    context = multiprocessing.get_context("fork")
    spec, results = S.RunSpec("demo", "smoke", 0), context.Queue()
    askers = [context.Process(target=_ask, args=(spec, str(tmp_path), results)) for _ in range(2)]
    for asker in askers:
        asker.start()
        time.sleep(0.1)
    for asker in askers:
        asker.join(60)
    assert sorted(results.get(timeout=5) for _ in askers) == ["done", "skipped"]
    assert (tmp_path / "executions").read_text() == "x"
    # a changed stamp (the notebook, the library, the parameters) executes it again
    assert S.execute(spec, str(tmp_path), "another stamp", 30, counting_run)["status"] == "done"
    assert (tmp_path / "executions").read_text() == "xx"


def failing_run(spec, folder):
    return [sys.executable, "-c", f"open({str(folder.parent / 'executions')!r}, 'a').write('x'); raise SystemExit(1)"]


def test_a_failed_run_executes_once_a_session(tmp_path, monkeypatch):
    spec = S.RunSpec("demo", "smoke", 0)
    monkeypatch.setenv(S.SESSION_VARIABLE, "one")
    assert [S.execute(spec, str(tmp_path), "stamp", 30, failing_run)["status"] for _ in range(2)] == ["failed"] * 2
    assert (tmp_path / "executions").read_text() == "x"
    monkeypatch.setenv(S.SESSION_VARIABLE, "two")  # the next invocation tries again
    assert S.execute(spec, str(tmp_path), "stamp", 30, failing_run)["status"] == "failed"
    assert (tmp_path / "executions").read_text() == "xx"


def test_a_run_whose_code_changed_while_it_ran_is_not_vouched_for(tmp_path):
    spec = S.RunSpec("demo", "smoke", 0)
    report = S.execute(spec, str(tmp_path), "before", 30, counting_run, restamp=lambda _: "after")
    assert report["status"] == "changed" and not (tmp_path / "seed=0" / "demo.stamp").exists()
    assert S.execute(spec, str(tmp_path), "after", 30, counting_run)["status"] == "done"


def test_a_caller_stopped_with_ctrl_c_stops_its_run(tmp_path):
    """The run has a session of its own (so that a timeout kills its kernel too), so Ctrl-C does not reach it:
    the caller must stop it."""
    import signal
    import subprocess
    marker, started = tmp_path / "finished", tmp_path / "started"
    caller = f"""
import sys
sys.path.insert(0, {str(P.REPO_ROOT)!r})
from paperlib.core import sweep as S
run = lambda spec, folder: [sys.executable, "-c",
                            "import time; open({str(started)!r}, 'w'); time.sleep(3); open({str(marker)!r}, 'w')"]
S.execute(S.RunSpec("demo", "smoke", 0), {str(tmp_path)!r}, "stamp", 30, run)
"""
    process = subprocess.Popen([sys.executable, "-c", caller])
    # Ctrl-C once the run is under way (on a loaded machine the caller's imports alone can take seconds)
    deadline = time.monotonic() + 20
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), "the run never started"
    time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    process.wait(10)
    time.sleep(3)
    assert not marker.exists(), "the run went on after its caller stopped"


def test_threads_and_instruction_set_are_part_of_a_run(tmp_path, monkeypatch):
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")  # a caller's shell must not choose the run's kernels
    plain, two, avx2 = (S.RunSpec("demo", "smoke", 0), S.RunSpec("demo", "smoke", 0, threads=2),
                        S.RunSpec("demo", "smoke", 0, isa="avx2"))
    assert [spec.name for spec in (plain, two, avx2)] == ["seed=0", "seed=0,threads=2", "seed=0,isa=avx2"]
    for spec in (plain, two, avx2):
        assert S.execute(spec, str(tmp_path), "stamp", 30, counting_run)["status"] == "done"
    env = {spec.name: json.loads((tmp_path / spec.name / "demo.json").read_text())["env"] for spec in (plain, two, avx2)}
    assert env["seed=0"] == {"OMP_NUM_THREADS": "1", "ATEN_CPU_CAPABILITY": None, "OMP_WAIT_POLICY": None}
    assert env["seed=0,threads=2"] == {"OMP_NUM_THREADS": "2", "ATEN_CPU_CAPABILITY": None, "OMP_WAIT_POLICY": "PASSIVE"}
    assert env["seed=0,isa=avx2"]["ATEN_CPU_CAPABILITY"] == "avx2"
    with pytest.raises(P.ParameterError, match="isa"):
        S.RunSpec("demo", "smoke", 0, isa="sse2")


def test_the_stamp_tells_runs_apart():
    base = S.RunSpec("manifold-lsh", "smoke", 0)
    stamps = {S.run_stamp(spec) for spec in (base, S.RunSpec("manifold-lsh", "smoke", 1),
                                              S.RunSpec("manifold-lsh", "smoke", 0, threads=2),
                                              S.RunSpec("manifold-lsh", "smoke", 0, isa="avx2"),
                                              S.RunSpec("manifold-lsh", "smoke", 0, (("sections", ["table1"]),)))}
    assert len(stamps) == 5 and S.run_stamp(base) == S.run_stamp(S.RunSpec("manifold-lsh", "smoke", 0))


def test_bad_parameters_stop_before_anything_runs(tmp_path):
    with pytest.raises(P.ParameterError, match="sections"):
        store.run("bottleneck", "smoke", 0, {"sections": ["no-such-section"]}, root=tmp_path)
    assert not list(tmp_path.iterdir())
