"""`python -m paperlib sweep`: planning and validation, the aggregate's arithmetic, failures,
timeouts and resuming, on a local Dask cluster; and one real smoke sweep of a chapter."""

import csv
import io
import json
import re
import sys

import numpy as np
import pytest
from scipy.stats import bootstrap

from paperlib.core import ledger as L
from paperlib.core import params as P
from paperlib.core import sweep as S
from paperlib.core.params import Params


def test_seeds_are_read_as_ranges_and_lists():
    assert S.parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert S.parse_seeds("0,3,7-8") == [0, 3, 7, 8]
    assert S.parse_seeds("5") == [5]
    for bad in ("3-1", "a", "1,1", "-2", ""):
        with pytest.raises(P.ParameterError, match="--seeds"):
            S.parse_seeds(bad)


def test_plan_is_seeds_times_grid_and_validates_before_running(tmp_path):
    runs = S.plan("manifold-lsh", "smoke", [0, 1], {"theory_width": 8}, {"mlp_epochs": [2, 3]})
    assert len(runs) == 4 and len({r.name for r in runs}) == 4
    assert runs[0].overrides == {"theory_width": 8, "mlp_epochs": 2, "seed": 0}
    assert runs[0].name == "seed=0,mlp_epochs=2,theory_width=8"
    with pytest.raises(P.ParameterError, match="mlp_epochs"):
        S.plan("manifold-lsh", "smoke", [0], grid={"mlp_epochs": [2, -1]})
    with pytest.raises(P.ParameterError, match="no_such_knob"):
        S.plan("manifold-lsh", "smoke", [0], grid={"no_such_knob": [1]})
    with pytest.raises(P.ParameterError, match="non-empty YAML list"):
        S.plan("manifold-lsh", "smoke", [0], grid={"mlp_epochs": 3})
    with pytest.raises(P.ParameterError, match="seed"):
        S.plan("manifold-lsh", "smoke", [0], {"seed": 4})
    with pytest.raises(P.ParameterError, match="'hidden' of notebook 'manifold-lsh' was renamed to 'theory_width'"):
        S.plan("manifold-lsh", "smoke", [0], grid={"hidden": [8, 16]})


def test_cluster_shape_never_oversubscribes():
    assert S.cluster_shape(10, cores=2) == (2, 1)
    assert S.cluster_shape(1, cores=4) == (1, 4)
    assert S.cluster_shape(10, cores=8, threads=2) == (4, 2)
    assert S.cluster_shape(10, cores=8, workers=3) == (3, 2)


def test_aggregate_verdict_rule_keeps_inconclusive_apart():
    assert S.aggregate_verdict({"reproduced": 3}) == "reproduced in every seed"
    assert S.aggregate_verdict({"reproduced": 2, "inconclusive": 2}) == "reproduced in every seed"
    assert S.aggregate_verdict({"reproduced": 2, "not reproduced": 1}) == "reproduced in most seeds"
    assert S.aggregate_verdict({"reproduced": 1, "not reproduced": 1}) == "not reproduced"
    assert S.aggregate_verdict({"assumption not met": 3}) == "assumption not met in every seed"
    assert S.aggregate_verdict({"inconclusive": 3}) == "inconclusive in every seed"
    assert S.aggregate_verdict({"not discriminating": 3}) == "not discriminating in every seed"
    assert S.aggregate_verdict({"no null or control": 2, "inconclusive": 1}) == "no null or control"
    assert S.aggregate_verdict({"reproduced": 2, "not discriminating": 1}) == "reproduced in most seeds"
    assert S.aggregate_verdict({"reproduced": 1, "not discriminating": 2}) == "passes, not discriminating in most seeds"
    assert S.aggregate_verdict({"not discriminating": 2, "no null or control": 1}) == (
        "passes, not discriminating in most seeds")
    assert S.aggregate_verdict({"not discriminating": 2, "not reproduced": 1}) == "not reproduced"
    assert S.aggregate_verdict({"reproduced": 3}, "bound") == "holds in every seed"
    assert S.aggregate_verdict({"reproduced": 1, "not reproduced": 2}, "consistency") == "fails"


def test_summary_is_median_range_and_percentile_bootstrap_interval():
    values = [0.3, 0.1, 0.7, 0.2]
    summary = S.summarise(values)
    assert summary["median"] == pytest.approx(0.25) and summary["min"] == 0.1 and summary["max"] == 0.7
    reference = bootstrap((np.array(values),), np.median, method="percentile", n_resamples=2000,
                          rng=np.random.default_rng(0)).confidence_interval
    assert summary["ci"] == [reference.low, reference.high]
    assert summary["ci"][0] <= summary["median"] <= summary["ci"][1]
    assert S.summarise([2.0, 2.0])["ci"] == [2.0, 2.0]
    assert S.summarise([1.0, float("nan")]) is None and S.summarise([[1, 2]]) is None and S.summarise([True]) is None


def hand_made_ledger(seed: int, measured: float, verdict_passes: bool) -> dict:
    ledger = L.Ledger("demo", Params(paper="demo", values={"preset": "smoke", "seed": seed}, overrides={}),
                      control_of=lambda claim_id: "a-control")
    ledger.record("p", "Thm 1", "below one", kind="prediction", measured=measured, predicted=1.0,
                  check=L.at_most(), robust=True)
    ledger.record("c", "identity", "equal", kind="consistency", measured=1.0 if verdict_passes else 2.0,
                  predicted=1.0, check=L.close(atol=1e-12))
    return ledger.as_dict()


def test_aggregate_counts_verdicts_and_summarises_measurements(tmp_path):
    reports = []
    for seed, measured in [(0, 0.5), (1, 0.9), (2, 1.5)]:
        run = S.RunSpec("demo", "smoke", seed)
        (tmp_path / run.name).mkdir()
        (tmp_path / run.name / "demo.json").write_text(json.dumps(hand_made_ledger(seed, measured, seed != 2)))
        reports.append({"paper": "demo", "name": run.name, "seed": seed, "parameters": {}, "status": "done", "log": ""})
    reports.append({"name": "seed=3", "seed": 3, "parameters": {}, "status": "failed", "log": "x.log"})
    result = S.aggregate("demo", "smoke", tmp_path, reports)
    assert json.loads((tmp_path / "demo.sweep.json").read_text())["paper"] == "demo"
    [point] = result["points"]
    assert point["seeds"] == [0, 1, 2]
    p, c = point["claims"]["p"], point["claims"]["c"]
    assert p["counts"] == {"not reproduced": 1, "reproduced": 2}
    assert p["aggregate"] == "reproduced in most seeds" and p["pass_fraction"] == pytest.approx(2 / 3)
    assert p["summary"]["median"] == 0.9 and p["predicted"] == 1.0
    assert c["aggregate"] == "passes in most seeds"
    assert p["robust_failed_seeds"] == [2] and p["robust_undecided_seeds"] == [] and c["robust_failed_seeds"] == []
    from paperlib.core import book
    assert book.robust_headline([point]) == "1 of 1 robust predictions failed at some seed (`p` at seed 2)"
    assert [r["name"] for r in result["failed"]] == ["seed=3"]
    assert all(run.get("provenance", {}).get("seed") == run["seed"] for run in point["runs"][:3])
    markdown = S.report_markdown(result)
    assert "`p`" in markdown and "reproduced in most seeds" in markdown and "seed=3" in markdown


def fake_run(spec, folder):
    """A stand-in for `paperlib run`: writes a ledger at once, fails for seed 3 and hangs for seed 4."""
    ledger = hand_made_ledger(spec.seed, 0.1 * spec.seed + spec.grid_point.get("shift", 0), True)
    script = {3: "import sys; sys.exit(1)", 4: "import time; time.sleep(60)"}.get(
        spec.seed, f"open({str(folder / 'demo.json')!r}, 'w').write({json.dumps(json.dumps(ledger))})")
    return [sys.executable, "-c", script]


def test_failures_and_timeouts_are_reported_and_a_sweep_resumes(tmp_path):
    runs = [S.RunSpec("demo", "smoke", seed, (("shift", shift),)) for shift in (0, 1) for seed in (0, 1, 3, 4)]
    reports = S.sweep(runs, tmp_path, workers=2, timeout_s=5, command=fake_run,
                      stamp=lambda spec: json.dumps(spec.overrides), progress=False)
    status = {r["name"]: r["status"] for r in reports}
    assert [status[f"seed={s},shift={k}"] for k in (0, 1) for s in (0, 1, 3, 4)] == \
        ["done", "done", "failed", "timeout"] * 2
    assert "killed after" in (tmp_path / "seed=4,shift=0" / "demo.log").read_text()
    result = S.aggregate("demo", "smoke", tmp_path, reports)
    assert [point["seeds"] for point in result["points"]] == [[0, 1], [0, 1]]
    assert len(result["failed"]) == 4
    # again: the finished runs are reused, the failed ones are tried again
    again = S.sweep(runs, tmp_path, workers=2, timeout_s=5, command=fake_run,
                      stamp=lambda spec: json.dumps(spec.overrides), progress=False)
    assert [r["status"] for r in again if r["seed"] in (0, 1)] == ["skipped"] * 4
    assert [r["status"] for r in again if r["seed"] in (3, 4)] == ["failed", "timeout"] * 2


def test_cli_rejects_a_bad_grid_value_before_running(tmp_path, capsys):
    from paperlib.core.cli import main
    assert main(["sweep", "manifold-lsh", "--preset", "smoke", "--seeds", "0-1", "--grid", "hidden", "[4, 0]",
                 "--out", str(tmp_path / "sw")]) == 2
    assert "hidden" in capsys.readouterr().err
    assert not (tmp_path / "sw").exists()


@pytest.mark.notebook
@pytest.mark.check
@pytest.mark.paper("manifold-lsh")
@pytest.mark.run_seconds(60.0)  # four runs of Table 1's section on two Dask workers
def test_smoke_sweep_of_a_chapter_on_two_workers(tmp_path):
    # Table 1's section alone, where the paper-track MLP trains for mlp_epochs: the sweep is what is tested here
    runs = S.plan("manifold-lsh", "smoke", [0, 1], {"sections": ["table1"]}, grid={"mlp_epochs": [5, 10]})
    reports = S.sweep(runs, tmp_path, workers=2, progress=False)
    assert [r["status"] for r in reports] == ["done"] * 4, [r["log"] for r in reports]
    result = S.aggregate("manifold-lsh", "smoke", tmp_path, reports)
    assert [p["parameters"] for p in result["points"]] == [{"mlp_epochs": 5, "sections": ["table1"]},
                                                           {"mlp_epochs": 10, "sections": ["table1"]}]
    for point in result["points"]:
        assert point["seeds"] == [0, 1]
        for claim in point["claims"].values():
            assert sum(claim["counts"].values()) == 2
            if claim["kind"] == "consistency":
                assert claim["aggregate"] == "passes in every seed"
    assert S.write_report(tmp_path)


def test_book_adds_the_seed_table_to_the_verdicts_section_and_the_claims_page(tmp_path):
    import nbformat
    from paperlib.core import book
    reports = []
    for seed, measured in [(0, 0.5), (1, 0.9), (2, 1.5)]:
        run = S.RunSpec("demo", "smoke", seed)
        (tmp_path / run.name).mkdir()
        (tmp_path / run.name / "demo.json").write_text(json.dumps(hand_made_ledger(seed, measured, True)))
        reports.append({"name": run.name, "seed": seed, "parameters": {}, "status": "done", "log": ""})
    point = S.aggregate("demo", "smoke", tmp_path, reports)["points"][0]
    chapter = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("## Verdicts"),
                                              nbformat.v4.new_code_cell("display(findings)"),
                                              nbformat.v4.new_markdown_cell("## Changes to checks")])
    nbformat.write(chapter, tmp_path / "demo.ipynb")
    book.add_seed_table(tmp_path / "demo.ipynb", point, tmp_path / "out.ipynb")
    cells = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells
    assert cells[2].source.startswith("::::{dropdown} Every claim over seeds 0, 1, 2") and "**Across seeds** (0, 1, 2)" in cells[2].source and cells[3].source == "## Changes to checks"
    assert "| `p` | prediction | reproduced in most seeds | 0.67 | 0 | 0.9 [0.5, 1.5] |" in cells[2].source
    page = book.claims_status_markdown([hand_made_ledger(0, 0.5, True) | {"paper": "demo"}], {"demo": point})
    assert "Over seeds: 0 of 1 predictions reproduced in every seed (1 reproduced in most seeds)" in page
    assert ('<tr data-chapter="demo" data-chapter-title="demo" data-kind="prediction" data-verdict="reproduced"><td>'
            '<a href="chapters/demo.html#claim-p"><code>p</code></a><br><small>Thm 1; prediction</small></td><td>below one</td>') in page
    assert "</td><td>reproduced in most seeds</td></tr>" in page


def test_book_orders_chapters_longest_first_by_their_recorded_run_times(tmp_path):
    from paperlib.core.book import longest_first
    for seed, times in ((0, {"a": 10.0, "b": 300.0}), (1, {"a": 20.0, "b": 250.0, "c": 5.0})):
        folder = tmp_path / f"seed={seed}"
        folder.mkdir()
        for paper, seconds in times.items():
            (folder / f"{paper}.json").write_text(json.dumps({"runtime_s": seconds}))
    # never run (d) goes first; then by the longest recorded time
    assert longest_first(["a", "b", "c", "d"], tmp_path) == ["d", "b", "a", "c"]


def test_a_fresh_clone_orders_the_book_by_typical_run_times(tmp_path):
    from paperlib.core.book import TYPICAL_DEFAULT_SECONDS, longest_first
    from paperlib.core.params import available_papers
    assert set(TYPICAL_DEFAULT_SECONDS) == set(available_papers())
    order = longest_first(available_papers(), tmp_path / "no runs yet")
    assert [TYPICAL_DEFAULT_SECONDS[p] for p in order] == sorted(TYPICAL_DEFAULT_SECONDS.values(), reverse=True)


def test_chapters_sharing_a_seed_folder_keep_their_own_log_and_stamp(tmp_path):
    def run(spec, folder):
        ledger = hand_made_ledger(spec.seed, 0.5, True)
        return [sys.executable, "-c", f"print('{spec.paper}'); open({str(folder / (spec.paper + '.json'))!r}, 'w')"
                                      f".write({json.dumps(json.dumps(ledger))})"]
    runs = [S.RunSpec(paper, "smoke", seed) for paper in ("one", "two") for seed in (0, 1)]
    stamp = lambda spec: spec.paper
    first = S.sweep(runs, tmp_path, workers=2, command=run, stamp=stamp, progress=False)
    # reports come back in the order of the runs, each naming its paper (the folder names repeat)
    assert [(r["paper"], r["seed"], r["status"]) for r in first] == \
        [("one", 0, "done"), ("one", 1, "done"), ("two", 0, "done"), ("two", 1, "done")]
    assert [(tmp_path / "seed=0" / f"{p}.log").read_text().strip() for p in ("one", "two")] == ["one", "two"]
    again = S.sweep(runs, tmp_path, workers=1, command=run, stamp=stamp, progress=False)
    assert [r["status"] for r in again] == ["skipped"] * 4
    # and a chapter's aggregate reads its own seeds, not another chapter's run of the same folder
    point = S.aggregate("one", "smoke", tmp_path, [r for r in again if r["paper"] == "one"])["points"][0]
    assert point["seeds"] == [0, 1]


def test_the_claims_page_tells_holds_and_passes_from_reproduced_and_gives_each_claim_a_reason(tmp_path):
    from paperlib.core import book
    ledger = hand_made_ledger(0, 0.5, False) | {"paper": "demo"}
    ledger["claims"].append(dict(ledger["claims"][0], id="b", kind="bound", why="Holds: 0.5 <= 1. Its assumption is met."))
    page = book.claims_status_markdown([ledger])
    verdicts = re.findall(r'data-verdict="([^"]+)"', page)
    assert verdicts == ["reproduced", "fails", "holds"]  # a bound's word, not the prediction's
    assert "<small>Holds: 0.5 ≤ 1.</small>" in page       # its first sentence, typeset
    book.write_claims_table([ledger], generated_dir=tmp_path)
    rows = json.loads((tmp_path / "claims.json").read_text())
    assert [r["claim"] for r in rows] == ["p", "c", "b"] and rows[2]["verdict"] == "holds"
    table = list(csv.DictReader(io.StringIO((tmp_path / "claims.csv").read_text())))
    assert list(table[0]) == list(book.CLAIM_COLUMNS) and table[1]["verdict"] == "fails" and table[1]["measured"] == "2.0"


def test_the_claims_page_reason_is_its_first_sentence_cut_to_a_line():
    from paperlib.core import book
    assert book.first_reason_line({"why": "Exploratory: no verdict. Seen 3 times."}) == "Seen 3 times."
    assert book.first_reason_line({"why": "measured 1.5 against 2. More."}) == "measured 1.5 against 2."
    assert len(book.first_reason_line({"why": "x" * 400})) == 160
    assert book.first_reason_line({"why": "measured 2 against 1; " * 20}).endswith("against 1…")
