"""Chapter runs for the tests, from the run store (`paperlib.core.store`): each distinct run executes once
per session, whichever test and pytest worker asks first, and every other test reads it.

One test reads each run, so that the worker it lands on executes the run while the other workers go on (a
check that needs several runs comes after them). Such a test is parametrized with :func:`run_param`, which
carries the run's expected seconds, from which `conftest.py` orders the session longest first."""

import functools
import json

import pytest

from paperlib.core import ledger as ledger_module
from paperlib.core import params as P
from paperlib.core import sections, store

#: seconds a run costs beyond its sections: the process, papermill, the kernel and the imports (measured on
#: a 2-core machine: 41 s of wall time for a chapter whose sections took 27 s)
START_UP_S = 13.0


@functools.cache
def reference_ledger(paper: str) -> dict:
    """The committed smoke run, seed 0, one thread: ``tests/references/<paper>.json``."""
    return json.loads((P.REFERENCE_DIR / f"{paper}.json").read_text())


def smoke_run(paper: str, seed: int = 0, parameters: dict | None = None, threads: int = 1,
              isa: str = "") -> store.StoredRun:
    """The stored smoke run (executed now if the store has no current one); a failed run fails the test
    with its log. Asked again in the same worker, the same run, or the same failure, is returned without
    checking its stamp again (which reads every module the chapter imports) and never executed twice."""
    outcome = _stored(paper, seed, json.dumps(parameters or {}, sort_keys=True), threads, isa)
    if isinstance(outcome, store.RunFailed):
        pytest.fail(str(outcome), pytrace=False)
    return outcome


@functools.cache
def _stored(paper: str, seed: int, parameters: str, threads: int, isa: str):
    try:
        return store.run(paper, "smoke", seed, json.loads(parameters), threads=threads, isa=isa)
    except store.RunFailed as error:
        return error


def expected_seconds(paper: str, only: list[str] | None = None) -> float:
    """What a smoke run of ``paper`` should take, from the reference's time per section: every section, or
    ``only`` those and what they need. An ordering hint, never asserted."""
    times = reference_ledger(paper).get("section_seconds") or {}
    chosen = sections.closure(paper, only) if only is not None else list(times)
    return START_UP_S + sum(times.get(name, 0.0) for name in chosen) if times else START_UP_S + reference_ledger(paper)["runtime_s"]


def run_param(*values, seconds: float, id: str):
    """A parametrization of a test that reads a chapter run expected to take ``seconds``."""
    return pytest.param(*values, id=id, marks=[pytest.mark.notebook, pytest.mark.run_seconds(seconds)])


def control_sections(paper: str, control: dict) -> list[str] | None:
    """The sections a control must run: those that record its flips and held claims in the reference (their
    needs are added by the chapter); None when the chapter declares no sections."""
    return sections.for_claims(paper, [*control["flips"], *control.get("held", {})], reference_ledger(paper))


def failing_consistency_checks(ledger: dict) -> list:
    return [(c["id"], c["verdict"], c["why"]) for c in ledger["claims"]
            if c["kind"] == "consistency" and c["verdict"] != "reproduced"]


def robust_outcomes(ledger: dict) -> dict:
    """Each robust prediction and bound of a run: ``holds``, ``fails`` or ``inconclusive``
    (:func:`ledger.robust_outcome`). A robust consistency check is not here: its failure is a bug, asserted at
    every seed."""
    return {c["id"]: ledger_module.robust_outcome(c) for c in ledger["claims"]
            if c["robust"] and c["kind"] != "consistency"}


def seed_record_path(paper: str):
    """``tests/references/<paper>.seeds.yaml``: the reviewed outcome of every robust prediction and bound at each
    smoke seed that ``make check`` runs."""
    return P.REFERENCE_DIR / f"{paper}.seeds.yaml"


def seed_record(paper: str) -> dict:
    """claim id -> {seed: holds | fails}, {} when there is no record yet."""
    import yaml
    path = seed_record_path(paper)
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.exists() else {}


SEED_RECORD_HEADER = """\
# The outcome of every robust prediction and bound of this chapter at each smoke seed that make check runs:
# holds, fails or inconclusive. A failure is a finding, shown on the page, never a reason to drop the flag.
# make check compares each run with this record, so that a new failure or a new pass is a reviewed change
# here: review it, then write the seed's outcomes with PAPERLIB_UPDATE_SEED_RECORD=1 make check CHAPTER=<slug>.
"""


def write_seed_record(paper: str, seed: int, outcomes: dict) -> None:
    """Replace ``seed``'s outcomes in the record (under a file lock: two workers may write one chapter's seeds)."""
    import fcntl

    import yaml
    path = seed_record_path(paper)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = seed_record(paper)
        for claim_id in list(record):
            record[claim_id].pop(seed, None)
        for claim_id, outcome in outcomes.items():
            record.setdefault(claim_id, {})[seed] = outcome
        record = {k: dict(sorted(v.items())) for k, v in sorted(record.items()) if v}
        path.write_text(SEED_RECORD_HEADER + yaml.safe_dump(record, default_flow_style=None, sort_keys=False),
                        encoding="utf-8")


def verdicts(ledger: dict) -> dict:
    return {claim["id"]: claim["verdict"] for claim in ledger["claims"]}


def controls(paper: str) -> list[dict]:
    from paperlib.core import controls as controls_module
    return controls_module.load(paper)


def checked_outputs(notebook_file) -> list[str]:
    """The stored text outputs of the cells marked `# NBVAL_CHECK_OUTPUT`."""
    import nbformat
    notebook = nbformat.read(notebook_file, as_version=4)
    texts = []
    for cell in notebook.cells:
        if cell.cell_type == "code" and "NBVAL_CHECK_OUTPUT" in cell.source:
            texts.append("".join(o.get("text", "") or str(o.get("data", {}).get("text/plain", ""))
                                 for o in cell.get("outputs", [])))
    return texts


def assert_reference_results(run: store.StoredRun) -> None:
    """The run's verdicts and checked numbers equal the committed reference's: a claim turning
    "reproduced" is as much a moved result as the reverse, and a claim added or gone is too."""
    import difflib
    paper = run.spec.paper
    assert verdicts(run.ledger()) == verdicts(reference_ledger(paper))
    ours, theirs = checked_outputs(run.notebook), checked_outputs(P.REFERENCE_DIR / f"{paper}.ipynb")
    assert ours == theirs, "checked outputs moved:\n" + "\n".join(difflib.unified_diff(
        "".join(theirs).splitlines(), "".join(ours).splitlines(), "reference", "this run", lineterm=""))


def balanced_start(runs: list, seconds: list, workers: int) -> list:
    """``runs`` (longest first) reordered for xdist's `load` scheduler, which gives each worker two consecutive
    tests at the start and then one more each time it finishes one: the first two per worker are dealt out
    longest first to the least-loaded worker (as the later ones are, one by one), the rest keep their order."""
    start = min(len(runs), 2 * workers)
    loads, hands = [0.0] * workers, [[] for _ in range(workers)]
    for index in range(start):
        open_hands = [w for w in range(workers) if len(hands[w]) < 2]
        worker = min(open_hands, key=lambda w: loads[w])
        hands[worker].append(runs[index])
        loads[worker] += seconds[index]
    return [run for hand in hands for run in hand] + runs[start:]
