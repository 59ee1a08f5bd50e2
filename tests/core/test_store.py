"""The run store: a run is what its spec says (seed, overrides, threads, instruction set), and one asked for by
several processes at once executes once."""

import json
import sys
import threading
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


def test_a_run_asked_for_by_two_processes_at_once_executes_once(tmp_path):
    spec = S.RunSpec("demo", "smoke", 0)
    reports = []
    askers = [threading.Thread(target=lambda: reports.append(S.execute(spec, str(tmp_path), "stamp", 30, counting_run)))
              for _ in range(2)]
    for asker in askers:
        asker.start()
        time.sleep(0.1)
    for asker in askers:
        asker.join()
    assert sorted(r["status"] for r in reports) == ["done", "skipped"]
    assert (tmp_path / "executions").read_text() == "x"
    # a changed stamp (the notebook, the library, the parameters) executes it again
    assert S.execute(spec, str(tmp_path), "another stamp", 30, counting_run)["status"] == "done"
    assert (tmp_path / "executions").read_text() == "xx"


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
