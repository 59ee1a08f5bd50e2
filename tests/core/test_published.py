"""Published `full` results (results/full/): provenance, staleness, and how the book shows them."""

import json
import subprocess

import nbformat
import pytest

from paperlib.core import book
from paperlib.core import ledger as L
from paperlib.core import published
from paperlib.core.params import Params, REPO_ROOT


def demo_ledger(preset: str, measured: float, statement: str = "below one", extra: bool = False,
                robust: bool = True) -> dict:
    ledger = L.Ledger("demo", Params(paper="demo", values={"preset": preset, "seed": 0}, overrides={}),
                      control_of=lambda claim_id: "a-control")
    ledger.record("p", "Thm 1", statement, kind="prediction", measured=measured, predicted=1.0,
                  check=L.at_most(), robust=robust)
    if extra:
        ledger.record("q", "Thm 2", "only at full", kind="prediction", measured=2.0, predicted=1.0,
                      check=L.at_most(), robust=True)
    return dict(ledger.as_dict(), paper="demo")


def write_result(folder, smoke: dict, full: dict):
    (folder / "demo.json").write_text(json.dumps(full))
    provenance = dict(paper="demo", preset="full", device="cuda (test)", started="2026-11-23T05:21:15+00:00",
                      finished="2026-11-23T05:34:04+00:00", revision="abc1234", runtime_s=755.7,
                      conditions="alone", smoke_claims=published.claim_statements(smoke))
    (folder / "demo.provenance.json").write_text(json.dumps(provenance))


@pytest.fixture
def folders(tmp_path):
    full_dir, reference_dir = tmp_path / "full", tmp_path / "references"
    full_dir.mkdir(), reference_dir.mkdir()
    smoke = demo_ledger("smoke", 0.5)
    (reference_dir / "demo.json").write_text(json.dumps(smoke))
    write_result(full_dir, smoke, demo_ledger("full", 1.5, extra=True))
    return full_dir, reference_dir


def test_a_result_is_current_while_the_smoke_claims_are_those_of_its_run(folders):
    status = published.full_status("demo", *folders)
    assert not status["stale"] and status["changes"] == {"added": [], "removed": [], "reworded": [], "reclassified": []}
    assert published.full_status("other", *folders) is None


@pytest.mark.parametrize("change, expected", [
    (dict(statement="below two"), {"added": [], "removed": [], "reworded": ["p"], "reclassified": []}),
    (dict(extra=True), {"added": ["q"], "removed": [], "reworded": [], "reclassified": []}),
    (dict(robust=False), {"added": [], "removed": [], "reworded": [], "reclassified": ["p"]}),
])
def test_a_reworded_added_or_reflagged_claim_makes_the_result_stale(folders, change, expected):
    full_dir, reference_dir = folders
    (reference_dir / "demo.json").write_text(json.dumps(demo_ledger("smoke", 0.5, **change)))
    status = published.full_status("demo", full_dir, reference_dir)
    assert status["stale"] and status["changes"] == expected


def test_a_removed_claim_makes_the_result_stale():
    provenance = {"smoke_claims": {"p": "below one", "gone": "was here"}}
    assert published.staleness(provenance, {"p": "below one"}) == {"added": [], "removed": ["gone"], "reworded": []}


@pytest.mark.parametrize("recorded_by_provenance", [True, False])
def test_a_claim_declared_after_the_run_makes_the_result_stale(folders, monkeypatch, recorded_by_provenance):
    """A claim recorded only at `full` never reaches the smoke reference: a claim declared in claims.yaml
    since the run (per the provenance's declared_claims, or, for an older provenance, one that the `full`
    ledger does not hold) counts as added."""
    full_dir, reference_dir = folders
    provenance_path = full_dir / "demo.provenance.json"
    provenance = json.loads(provenance_path.read_text())
    if recorded_by_provenance:
        provenance["declared_claims"] = ["p", "q"]
    provenance_path.write_text(json.dumps(provenance))
    monkeypatch.setattr(published, "declared_ids", lambda paper: ["p", "q"])
    assert not published.full_status("demo", full_dir, reference_dir)["stale"]
    monkeypatch.setattr(published, "declared_ids", lambda paper: ["p", "q", "r"])
    status = published.full_status("demo", full_dir, reference_dir)
    assert status["stale"] and status["changes"] == {"added": ["r"], "removed": [], "reworded": [], "reclassified": []}


def test_a_result_without_complete_provenance_is_refused(folders):
    full_dir, _ = folders
    provenance = json.loads((full_dir / "demo.provenance.json").read_text())
    del provenance["device"]
    (full_dir / "demo.provenance.json").write_text(json.dumps(provenance))
    with pytest.raises(ValueError, match="missing device"):
        published.load_full("demo", full_dir)


def test_the_chapter_and_the_claims_page_show_full_beside_default_and_mark_stale_results(folders, tmp_path):
    full_dir, reference_dir = folders
    default = demo_ledger("default", 0.5)
    status = published.full_status("demo", full_dir, reference_dir)
    table = published.full_table_markdown(default, status)
    assert "a GPU run of an earlier revision: `abc1234`, cuda (test), 2026-11-23, 756 s (alone)" in table
    assert "| `p` | prediction | reproduced | **not reproduced** | 1.5 |" in table
    assert "| `q` | prediction | not recorded at this preset | **not reproduced** | 2 |" in table
    assert "Stale" not in table

    (reference_dir / "demo.json").write_text(json.dumps(demo_ledger("smoke", 0.5, statement="below two")))
    stale = published.full_status("demo", full_dir, reference_dir)
    assert "**Stale:** the chapter's claims changed after this run (reworded `p`)" in published.full_table_markdown(default, stale)
    page = book.claims_status_markdown([default], full={"demo": stale})
    assert "<th>at full (GPU)</th>" in page and "<td>not reproduced (stale)</td>" in page
    assert "**Stale**: the chapter's claims changed since." in page
    other = dict(default, paper="other")
    assert "At `full`: no completed GPU run is published yet." in book.claims_status_markdown([default, other], full={"demo": stale})

    chapter = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("## Verdicts"),
                                              nbformat.v4.new_markdown_cell("## Changes to checks")])
    nbformat.write(chapter, tmp_path / "demo.ipynb")
    book.insert_in_verdicts(tmp_path / "demo.ipynb", table, tmp_path / "demo.ipynb")
    cells = nbformat.read(tmp_path / "demo.ipynb", as_version=4).cells
    assert cells[1].source == table and cells[2].source == "## Changes to checks"


def test_a_claim_now_exploratory_stays_in_the_full_table_whose_headline_counted_it(folders):
    full_dir, reference_dir = folders
    default = demo_ledger("default", 0.5)
    default["claims"] = [dict(c, kind="exploratory") for c in default["claims"]]
    table = published.full_table_markdown(default, published.full_status("demo", full_dir, reference_dir))
    assert "| `p` | exploratory (at `full`: prediction) | " in table


COMMITTED = sorted(p.name.removesuffix(".json") for p in published.FULL_DIR.glob("*.json")
                   if not p.name.endswith(".provenance.json"))


@pytest.mark.parametrize("paper", COMMITTED)
def test_committed_full_results_are_complete(paper):
    result = published.load_full(paper)
    ledger, provenance = result["ledger"], result["provenance"]
    assert ledger["paper"] == provenance["paper"] == paper and ledger["preset"] == provenance["preset"] == "full"
    assert provenance["device"].startswith("cuda") and ledger["device"] == provenance["device"]
    assert ledger["git"] == provenance["revision"] and ledger["runtime_s"] == provenance["runtime_s"]
    executed = nbformat.read(published.FULL_DIR / f"{paper}.ipynb", as_version=4)
    assert executed.metadata["papermill"]["start_time"] == provenance["started"]
    def git(*args):
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True)
    try:
        shallow = git("rev-parse", "--is-shallow-repository")
    except FileNotFoundError:
        pytest.skip("no git")
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("not a full clone of the repository: an older revision may be missing")
    known = git("cat-file", "-e", provenance["revision"] + "^{commit}").returncode == 0
    assert known, f"{paper}: the revision {provenance['revision']} of the full run is not in this repository"


@pytest.mark.parametrize("paper", COMMITTED)
def test_committed_full_results_are_current(paper):
    """Fails when a chapter's claims changed after its published `full` run (the page marks it
    stale either way): run it again at `full` on a GPU, or write why it may stay in its
    provenance's ``stale_acknowledged``."""
    status = published.full_status(paper)
    if status["stale"] and not status["provenance"].get("stale_acknowledged"):
        pytest.fail(f"results/full/{paper} is stale: {published.stale_sentence(status['changes'])}")


def test_publish_copies_a_gpu_full_run_and_writes_its_provenance(folders, tmp_path):
    _, reference_dir = folders
    run_dir, target = tmp_path / "run", tmp_path / "published"
    run_dir.mkdir()
    full = dict(demo_ledger("full", 1.5), device="cuda (test)", git="abc1234", runtime_s=12.0)
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["papermill"] = {"start_time": "2026-11-23T05:00:00+00:00", "end_time": "2026-11-23T05:00:12+00:00"}
    nbformat.write(notebook, run_dir / "demo.ipynb")
    (run_dir / "demo.json").write_text(json.dumps(dict(full, device="cpu (2 threads)")))
    with pytest.raises(ValueError, match="not a `full` run on a GPU"):
        published.publish("demo", run_dir, "alone", target, reference_dir)
    (run_dir / "demo.json").write_text(json.dumps(full))
    published.publish("demo", run_dir, "alone", target, reference_dir)
    status = published.full_status("demo", target, reference_dir)
    assert not status["stale"] and status["provenance"]["started"] == "2026-11-23T05:00:00+00:00"
    assert status["provenance"]["revision"] == "abc1234" and (target / "demo.ipynb").exists()


def test_the_book_adds_the_full_table_to_each_chapter_with_a_result(folders, tmp_path, monkeypatch):
    full_dir, reference_dir = folders
    monkeypatch.setattr(published, "FULL_DIR", full_dir)
    monkeypatch.setattr(published, "REFERENCE_DIR", reference_dir)
    (tmp_path / "chapters").mkdir()
    for paper in ("demo", "other"):
        chapter = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("## Verdicts"),
                                                  nbformat.v4.new_markdown_cell("## Changes to checks")])
        nbformat.write(chapter, tmp_path / "chapters" / f"{paper}.ipynb")
    ledgers = [demo_ledger("default", 0.5), dict(demo_ledger("default", 0.5), paper="other")]
    assert book.published_full(ledgers, "full") == {}  # a book built at full shows no second full column
    full = book.published_full(ledgers, "default")
    assert list(full) == ["demo"]
    book.add_full_tables(ledgers, full, tmp_path / "chapters")
    demo = nbformat.read(tmp_path / "chapters" / "demo.ipynb", as_version=4).cells
    other = nbformat.read(tmp_path / "chapters" / "other.ipynb", as_version=4).cells
    assert len(demo) == 3 and demo[1].source.startswith("::::{dropdown} Every claim at `full`") and "**At `full` (the papers' scale)**" in demo[1].source and len(other) == 2
