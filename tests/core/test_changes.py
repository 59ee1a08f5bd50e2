"""The record of changes to checks: validated before it is shown, and shown as one table, newest first."""

import datetime

import pytest

from paperlib.core import changes as C


def write(tmp_path, text):
    path = tmp_path / "changes.yaml"
    path.write_text(text)
    return path


GOOD = """
- date: 2026-11-20
  claims: [a-claim]
  before: "at most 0.1; `default` measured 0.3, not reproduced"
  after: at most 0.5
  reason: the spec's tolerance
- date: 2026-11-26
  claims: [b-*]
  before: a prediction
  after: a consistency check
  reason: it holds by construction
"""


def test_a_record_loads_newest_first_and_shows_as_one_table(tmp_path):
    entries = C.load("demo", write(tmp_path, GOOD))
    assert [e["date"] for e in entries] == [datetime.date(2026, 11, 26), datetime.date(2026, 11, 20)]
    table = C.changes_markdown(entries).splitlines()
    assert table[0] == "| date | claims | before | after | reason |"
    assert table[2] == "| 2026-11-26 | `b-*` | a prediction | a consistency check | it holds by construction |"
    assert "not reproduced" in table[3]  # the earlier failure stays on the page
    assert C.changes_markdown([]) == "No check was changed after its result was seen."


@pytest.mark.parametrize("text, message", [
    ("- {date: 2026-11-20, claims: [a], before: x, after: y}", "exactly the fields"),
    ("- {date: yesterday, claims: [a], before: x, after: y, reason: z}", "is not a day"),
    ("- {date: 2026-11-20, claims: [], before: x, after: y, reason: z}", "non-empty list"),
    ("- {date: 2026-11-20, claims: [a], before: ' ', after: y, reason: z}", "before must be a sentence"),
    ("{date: 2026-11-20}", "a list of changes"),
])
def test_a_malformed_record_names_the_change_and_the_field(tmp_path, text, message):
    with pytest.raises(C.ChangesError, match=message):
        C.load("demo", write(tmp_path, text))


def test_an_id_must_name_a_claim_unless_the_change_retired_it():
    entries = [{"claims": ["b-*", "gone", "renamed"], "before": "`renamed` was a bound"}]
    assert C.unknown_claims(entries, {"b-1", "c"}) == ["gone"]
    assert C.matches("all", "anything") and C.matches("B5-*-odd", "B5-paper-odd") and not C.matches("B5-*", "C5-x")
