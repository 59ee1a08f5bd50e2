"""The claims ledger.

Each chapter records every testable claim of its paper as one entry: the
prediction, the measurement, the tolerance and a verdict that this module
computes from them (never written by hand).  The ledger is written as JSON,
shown in the chapter as a table beside the paper's own numbers, and collected
into the book's claims status page.

Every claim has a **kind**:

- ``prediction``: a falsifiable statement of the paper, or of our derivation from it,
  about what a measurement will show; it can come out either way at our scale;
- ``bound``: a theorem's inequality evaluated on measured quantities, with the check
  of the theorem's assumption (``assumption=`` is required);
- ``consistency``: a check of our own code or of an identity that holds by
  construction; shown apart and never counted as a reproduction;
- ``exploratory`` (:meth:`Ledger.observe`): a measurement shown without a verdict,
  for example where no number is predicted.

Verdicts, in the order they are decided:

1. ``assumption not met``: a hypothesis of the theorem is violated at our
   scale (the prediction is still evaluated and reported in ``why``);
2. ``inconclusive``: the measurement is missing or not finite, or the caller
   says there is too little data to decide;
3. ``not reproduced``: the check fails;
4. for a prediction whose check passes, the evidence that the check can fail on a model without the
   effect decides: ``reproduced`` when the run's *null* (the same measurement on the model, data or
   network that the paper's own argument says should not show the effect, ``null=``) fails the same
   check, or, where the run has no null, when a control of ``controls.yaml`` flips the claim;
   ``not discriminating`` when the null passes too; ``no null or control`` when there is neither
   (listed with the predictions, never counted as reproduced). For a bound or a consistency check,
   ``reproduced`` (it holds, it passes).
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

VERDICTS = ("reproduced", "not reproduced", "not discriminating", "no null or control", "assumption not met",
            "inconclusive", "no verdict")
REPRODUCED, NOT_REPRODUCED, NOT_DISCRIMINATING, NO_NULL, ASSUMPTION_NOT_MET, INCONCLUSIVE, NO_VERDICT = VERDICTS
KINDS = ("prediction", "bound", "consistency", "exploratory")
PREDICTION, BOUND, CONSISTENCY, EXPLORATORY = KINDS


class LedgerError(ValueError):
    """A ledger file that this paperlib cannot read (missing fields, an older format)."""


# ---------------------------------------------------------------- checks

@dataclass(frozen=True)
class Check:
    """A tolerance: how a measurement is compared with a prediction.

    Build one with :func:`close`, :func:`at_most`, :func:`at_least` or
    :func:`within`.  A measurement may be a number or a sequence of numbers
    (seeds, widths, ...): the check then has to hold for every element.
    """

    kind: str
    rtol: float = 0.0
    atol: float = 0.0
    low: float = -math.inf
    high: float = math.inf

    def bounds(self, predicted) -> tuple[float, float]:
        if self.kind == "close":
            slack = self.atol + self.rtol * abs(predicted)
            return predicted - slack, predicted + slack
        if self.kind == "at_most":
            return -math.inf, predicted + self.atol
        if self.kind == "at_least":
            return predicted - self.atol, math.inf
        return self.low, self.high

    def passes(self, measured, predicted) -> bool:
        low, high = self.bounds(predicted)
        values = np.atleast_1d(np.asarray(measured, dtype=float))
        return bool(np.all((values >= low) & (values <= high)))

    def passes_anywhere(self, measured, predicted) -> bool:
        """Whether some element passes: a null of several values (one per generator, say) tells the effect from
        its absence only where every element fails, so a null "passes" as soon as one does."""
        low, high = self.bounds(predicted)
        values = np.atleast_1d(np.asarray(measured, dtype=float))
        return bool(np.any((values >= low) & (values <= high)))

    def describe(self, predicted) -> str:
        if self.kind == "close":
            parts = [f"rtol {self.rtol:g}" if self.rtol else "", f"atol {self.atol:g}" if self.atol else ""]
            return "|measured - predicted| <= " + " + ".join(p for p in parts if p)
        if self.kind == "at_most":
            return "measured <= predicted" + (f" + {self.atol:g}" if self.atol else "")
        if self.kind == "at_least":
            return "measured >= predicted" + (f" - {self.atol:g}" if self.atol else "")
        return f"measured in [{self.low:g}, {self.high:g}]"


def close(rtol: float = 0.0, atol: float = 0.0) -> Check:
    """|measured - predicted| <= atol + rtol * |predicted|."""
    if rtol < 0 or atol < 0 or (rtol == 0 and atol == 0):
        raise ValueError("close() needs a positive rtol or atol")
    return Check("close", rtol=rtol, atol=atol)


def at_most(atol: float = 0.0) -> Check:
    """measured <= predicted (+ atol): the prediction is an upper bound."""
    return Check("at_most", atol=atol)


def at_least(atol: float = 0.0) -> Check:
    """measured >= predicted (- atol): the prediction is a lower bound."""
    return Check("at_least", atol=atol)


def within(low: float, high: float) -> Check:
    """low <= measured <= high; the prediction is shown but only the range decides."""
    if not low <= high:
        raise ValueError(f"within() needs low <= high, got [{low}, {high}]")
    return Check("within", low=low, high=high)


def _yaml_number(value) -> float:
    # YAML 1.1 reads 1e-9 (no dot) as a string, and .inf as a float: accept both
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"not a number: {value!r}")
    return float(value)


def declared_check(spec: dict) -> Check:
    """The check a claim declares in its paper's ``claims.yaml``, one of ``{at_most: ATOL}``,
    ``{at_least: ATOL}``, ``{close: {atol: A, rtol: R}}`` or ``{within: [LOW, HIGH]}`` (``.inf`` for
    infinity): a fixed threshold, named by its claim and quoted by the claim's statement as
    ``{check.atol}``, ``{check.rtol}``, ``{check.low}`` or ``{check.high}``."""
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in ("at_most", "at_least", "close", "within"):
        raise ValueError(f"a declared check is one of {{at_most: ATOL}}, {{at_least: ATOL}}, "
                         f"{{close: {{atol: A, rtol: R}}}}, {{within: [LOW, HIGH]}}; got {spec!r}")
    (kind, value), = spec.items()
    if kind == "within":
        if not isinstance(value, list) or len(value) != 2:
            raise ValueError(f"within needs [LOW, HIGH], got {value!r}")
        return within(*(_yaml_number(v) for v in value))
    if kind == "close":
        if not isinstance(value, dict) or not set(value) <= {"atol", "rtol"}:
            raise ValueError(f"close needs {{atol: A, rtol: R}}, got {value!r}")
        return close(**{name: _yaml_number(v) for name, v in value.items()})
    return (at_most if kind == "at_most" else at_least)(atol=_yaml_number(value))


CHECK_FIELDS = ("low", "high", "atol", "rtol")


def quote_check(statement: str, check: Check) -> str:
    """The statement with ``{check.atol}`` etc. replaced by the declared check's values (``:g``)."""
    for name in CHECK_FIELDS:
        statement = statement.replace("{check." + name + "}", format(getattr(check, name), "g"))
    return statement


# ---------------------------------------------------------------- ledger

def _jsonable(value):
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in np.asarray(value, dtype=object).tolist()] if isinstance(
            value, np.ndarray) else [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # torch scalars
        try:
            return _jsonable(value.item())
        except (ValueError, RuntimeError):
            pass
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _is_finite(measured) -> bool:
    if measured is None:
        return False
    try:
        values = np.asarray(measured, dtype=float)
    except (TypeError, ValueError):
        return False
    return values.size > 0 and bool(np.all(np.isfinite(values)))


def compute_verdict(measured, predicted, check: Check, assumption_met: bool = True,
                    enough_data: bool = True, *, null_passes: bool | None = None,
                    controlled: bool = True) -> tuple[str, bool | None]:
    """Return (verdict, prediction_holds) for one claim.

    ``prediction_holds`` is None when the measurement cannot be compared. ``null_passes``: whether the
    run's null passes the same check (None: no null, or none measured); ``controlled``: whether a control
    flips the claim. Both matter only to a prediction whose check passes (see the module docstring); a
    bound or a consistency check passes ``null_passes=None, controlled=True``.
    """
    if not _is_finite(measured) or (check.kind != "within" and not _is_finite(predicted)):
        return INCONCLUSIVE, None
    holds = check.passes(measured, predicted)
    if not assumption_met:
        return ASSUMPTION_NOT_MET, holds
    if not enough_data:
        return INCONCLUSIVE, holds
    if not holds:
        return NOT_REPRODUCED, holds
    if null_passes is not None:
        return (NOT_DISCRIMINATING if null_passes else REPRODUCED), holds
    return (REPRODUCED if controlled else NO_NULL), holds


NOT_MEASURED = "not measured"


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):  # a ledger stores a float's nan as "nan" (JSON has none)
        return NOT_MEASURED if value == "nan" else value
    if isinstance(value, (list, tuple, np.ndarray)):
        items = list(np.asarray(value).ravel())
        if len(items) > 6:
            return f"[{_fmt(min(items))} .. {_fmt(max(items))}] ({len(items)} values)"
        return "[" + ", ".join(_fmt(v) for v in items) + "]"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    value = float(value)
    if math.isnan(value):
        return NOT_MEASURED  # a reader sees words where nothing was measured, not a float's "nan"
    if value == 0 or (1e-3 <= abs(value) < 1e5):
        return f"{value:.4g}"
    return f"{value:.3e}"


class Claim(dict):
    """What ``record`` and ``observe`` return: a copy of the claim the ledger saves. It displays nothing
    by itself in a notebook (a cell that ends in ``ledger.record(...)`` would print the whole dict): the
    chapter shows every claim a cell recorded in one compact table under that cell
    (:func:`cell_claims_markdown`). ``ledger.claims`` holds plain dicts, which display as usual."""

    def _ipython_display_(self):
        pass


DECLARED_FIELDS = ("source", "statement", "kind", "robust", "note", "paper_value", "check", "null_model", "no_null",
                   "headline")  # headline: the paper's result in a few words, for the chapter's results table


def claims_file(paper: str, package_dir: Path | None = None) -> Path:
    """``paperlib/papers/<paper package>/claims.yaml``: what each claim of the paper says."""
    package_dir = package_dir or Path(__file__).resolve().parents[1]
    return package_dir / "papers" / paper.replace("-", "_") / "claims.yaml"


def declared_claims(paper: str) -> dict:
    """The claims a paper declares once (id -> source, statement, kind, robust, note, paper value), so that the
    chapter's cells record only the measurement, the prediction and the check; {} when there is no file."""
    import yaml

    path = claims_file(paper)
    if not path.exists():
        return {}
    declared = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for claim_id, facts in declared.items():
        unknown = sorted(set(facts) - set(DECLARED_FIELDS))
        if unknown or facts.get("kind", EXPLORATORY) not in KINDS:
            raise LedgerError(f"{path}: claim {claim_id!r} has unknown fields {unknown} or kind {facts.get('kind')!r}; "
                              f"the fields are {', '.join(DECLARED_FIELDS)}")
        robust = facts.get("robust", False)
        if isinstance(robust, dict) and not (
                len(robust) == 1 and "{" + next(iter(robust)) in claim_id
                and isinstance(flags := next(iter(robust.values())), dict)
                and all(isinstance(flag, bool) for flag in flags.values())):
            raise LedgerError(f"{path}: claim {claim_id!r}: robust per member must read "
                              "{placeholder: {value: true|false}}, with a placeholder of the id")
        if "check" in facts:
            try:
                facts["check"] = declared_check(facts["check"])
            except ValueError as error:
                raise LedgerError(f"{path}: claim {claim_id!r}: {error}") from None
            if facts.get("kind", EXPLORATORY) == EXPLORATORY:
                raise LedgerError(f"{path}: claim {claim_id!r} declares a check but no kind with a verdict")
    return declared


class Ledger:
    """Collects the claims of one chapter and writes them as JSON."""

    def __init__(self, paper: str, params, seed: int | None = None, device: str = "cpu",
                 declared: dict | None = None, control_of=None):
        self.paper = paper
        # claim id -> the name of the control (controls.yaml) that flips it, or None
        self.control_of = control_of or (lambda claim_id: None)
        self.params = params
        self.seed = seed if seed is not None else params.values.get("seed")
        self.device = device
        self.declared = declared or {}  # claim id -> what the paper package's claims.yaml says of it
        self.claims: list[dict] = []
        self.section: str | None = None  # the section recording now (Chapter.section); None in the opening cells
        self.section_seconds: dict = {}  # wall seconds of each section that ran, set when the chapter closes
        self.started = time.perf_counter()
        # the revision of the code this run loaded: taken now, since a commit made while a long run goes on
        # (a `full` run takes minutes) would otherwise be credited with a result of the code before it
        self.git = git_revision()

    def _facts(self, claim_id: str, fill: dict | None = None, **given) -> tuple[str, dict]:
        """A claim's id, and its source, statement, kind, robustness, note and paper value: declared once in the
        paper package's ``claims.yaml``, or given by the cell; never both. With ``fill``, the declared id and
        statement are templates (a family of claims, one per activation say) and ``fill`` gives their
        ``{placeholders}``."""
        declared = self.declared.get(claim_id, {})
        if "check" in declared and "statement" in declared:  # the statement quotes the declared threshold
            declared = dict(declared, statement=quote_check(declared["statement"], declared["check"]))
        if fill is not None:
            if not declared:
                raise ValueError(f"claim {claim_id!r}: fill= is given but claims.yaml declares no such template")
            if isinstance(declared.get("robust"), dict):  # one flag per member: {placeholder: {value: bool}}
                (name, flags), = declared["robust"].items()
                if fill.get(name) not in flags:
                    raise ValueError(f"claim {claim_id!r}: claims.yaml declares no robustness for {name}={fill.get(name)!r}")
                declared = dict(declared, robust=flags[fill[name]])
            claim_id = claim_id.format(**fill)
            declared = dict(declared, statement=declared["statement"].format(**fill))
        elif isinstance(declared.get("robust"), dict):
            raise ValueError(f"claim {claim_id!r}: claims.yaml declares robustness per member; give fill=")
        if given.get("note") and declared.get("note"):  # a standing note, then what the run adds to it
            given = dict(given, note=declared["note"] + " " + given["note"])
            declared = {name: value for name, value in declared.items() if name != "note"}
        twice = sorted(name for name, value in given.items() if value is not None and name in declared)
        if twice:
            raise ValueError(f"claim {claim_id!r}: {', '.join(twice)} declared in claims.yaml and given again here; "
                             "say it in one place")
        facts = {**declared, **{name: value for name, value in given.items() if value is not None}}
        missing = [name for name in ("source", "statement") if name not in facts]
        if missing:
            raise ValueError(f"claim {claim_id!r}: no {' or '.join(missing)}; declare the claim in its paper's "
                             "claims.yaml or pass them to record()")
        return claim_id, facts

    # -- recording
    def record(self, claim_id: str, source: str | None = None, statement: str | None = None, *,
               kind: str | None = None, measured, predicted, check: Check | None = None, paper_value=None,
               assumption: tuple[bool, str] | None = None, enough_data: tuple[bool, str] | None = None,
               robust: bool | None = None, note: str | None = None, fill: dict | None = None,
               null=None, no_null: str | None = None) -> dict:
        """Record one claim and compute its verdict.

        ``kind`` is ``"prediction"``, ``"bound"`` or ``"consistency"`` (see the module
        docstring); a bound must pass ``assumption``, (holds, description) of the theorem's
        hypothesis at our scale. ``enough_data`` is (enough, description). ``robust`` marks
        claims that hold at every seed: a property of the claim, never of the preset;
        CI asserts it at several seeds. ``source``, ``statement``, ``kind``, ``robust``, ``note``,
        ``paper_value`` and a fixed ``check`` may instead be declared in the paper's ``claims.yaml`` (``fill``:
        the values of a declared template's placeholders; the statement quotes a declared check's threshold as
        ``{check.atol}`` and the like, so that the text and the check cannot differ). A check that depends
        on a preset parameter or on the run is given here.

        ``null``: for a prediction, the same measurement on the run's null (the model the paper's argument
        says should not show the effect), judged by the same check; what the null is, is declared in
        claims.yaml (``null_model:``), or given here as ``null=(value, description)``. ``no_null``: why a
        prediction has none, declared in claims.yaml or (for a claim whose statement the cell gives) here.
        """
        null_value, null_text = null if isinstance(null, tuple) else (null, None)
        claim_id, facts = self._facts(claim_id, fill, source=source, statement=statement, kind=kind, robust=robust,
                                      note=note, paper_value=paper_value, check=check, null_model=null_text,
                                      no_null=no_null)
        source, statement, kind, check = facts["source"], facts["statement"], facts.get("kind"), facts.get("check")
        if check is None:
            raise ValueError(f"claim {claim_id!r}: no check; declare it in claims.yaml or pass check=")
        robust, note, paper_value = facts.get("robust", False), facts.get("note", ""), facts.get("paper_value")
        self._check_new(claim_id)
        if kind not in (PREDICTION, BOUND, CONSISTENCY):
            raise ValueError(f"claim {claim_id!r}: kind must be 'prediction', 'bound' or 'consistency', "
                             f"got {kind!r} (a measurement without a verdict is recorded with observe())")
        if kind == BOUND and assumption is None:
            raise ValueError(f"claim {claim_id!r}: a bound carries its assumption check (pass assumption=)")
        null_text = facts.get("null_model")
        if (null_text is None) != (null is None):
            raise ValueError(f"claim {claim_id!r}: " + ("null= is given but nothing says what the null is; declare "
                             "null_model: in claims.yaml or pass null=(value, description)" if null_text is None else
                             "claims.yaml declares a null; pass its measurement as null="))
        if null is not None and kind != PREDICTION:
            raise ValueError(f"claim {claim_id!r}: only a prediction has a null (this is a {kind})")
        no_null = facts.get("no_null")
        if no_null is not None and (null is not None or kind != PREDICTION):
            raise ValueError(f"claim {claim_id!r}: claims.yaml says why it has no null (no_null:), but " +
                             ("it has one" if null is not None else f"it is a {kind}, which has none"))
        assumption_met, assumption_text = assumption if assumption else (True, "")
        enough, enough_text = enough_data if enough_data else (True, "")
        null_passes = None
        if null is not None and (check.kind == "within" or _is_finite(predicted)) and _is_finite(null_value):
            null_passes = check.passes_anywhere(null_value, predicted)
        control = self.control_of(claim_id) if kind == PREDICTION else None
        verdict, holds = compute_verdict(measured, predicted, check, bool(assumption_met), bool(enough),
                                         null_passes=null_passes if kind == PREDICTION else None,
                                         controlled=kind != PREDICTION or control is not None)
        why = self._explain(verdict, holds, measured, predicted, check, assumption_text, enough_text)
        if kind == PREDICTION:
            why = (why + " " + self._evidence_text(verdict, null_value, null_text, null_passes, control,
                                                   no_null)).strip()
        entry = {
            "id": claim_id, "kind": kind, "source": source, "statement": statement,
            "predicted": _jsonable(predicted), "measured": _jsonable(measured),
            "paper_value": _jsonable(paper_value), "tolerance": check.describe(predicted),
            "check": {"kind": check.kind, "rtol": check.rtol, "atol": check.atol,
                      "low": _jsonable(check.low), "high": _jsonable(check.high)},
            "null": None if null is None else {"description": null_text, "measured": _jsonable(null_value),
                                               "passes": null_passes},
            "no_null": no_null if kind == PREDICTION and null is None else None, "control": control,
            "verdict": verdict, "prediction_holds": holds, "robust": bool(robust),
            "why": (why + (" " + note if note else "")).strip(), "section": self.section,
        }
        self.claims.append(entry)
        return Claim(entry)

    def observe(self, claim_id: str, source: str | None = None, statement: str | None = None, *, measured,
                paper_value=None, note: str | None = None, fill: dict | None = None) -> dict:
        """Record an exploratory measurement: shown beside the claims, with no verdict
        (nothing is predicted for it, or its only reference number came from a calibration run)."""
        claim_id, facts = self._facts(claim_id, fill, source=source, statement=statement, note=note,
                                      paper_value=paper_value)
        if facts.get("kind", EXPLORATORY) != EXPLORATORY:
            raise ValueError(f"claim {claim_id!r} is declared a {facts['kind']}: record it with record(), not observe()")
        source, statement = facts["source"], facts["statement"]
        note, paper_value = facts.get("note", ""), facts.get("paper_value")
        self._check_new(claim_id)
        entry = {"id": claim_id, "kind": EXPLORATORY, "source": source, "statement": statement,
                 "predicted": None, "measured": _jsonable(measured), "paper_value": _jsonable(paper_value),
                 "tolerance": "", "check": None, "verdict": NO_VERDICT, "prediction_holds": None,
                 "robust": False, "why": ("Exploratory: no verdict. " + note).strip(), "section": self.section}
        self.claims.append(entry)
        return Claim(entry)

    def check_of(self, claim_id: str) -> Check | None:
        """The fixed check ``claim_id`` (a template's id) declares in claims.yaml, or None."""
        return self.declared.get(claim_id, {}).get("check")

    def _check_new(self, claim_id: str) -> None:
        if any(c["id"] == claim_id for c in self.claims):
            raise ValueError(f"claim id {claim_id!r} recorded twice")

    @staticmethod
    def _explain(verdict, holds, measured, predicted, check, assumption_text, enough_text):
        low, high = check.bounds(predicted) if _is_finite(predicted) or check.kind == "within" else (None, None)
        nothing = isinstance(measured, (float, np.floating)) and math.isnan(measured)
        found = "nothing measured" if nothing else f"measured {_fmt(measured)}"
        comparison = (f"{found} against predicted {_fmt(predicted)}; "
                      f"accepted range [{_fmt(low)}, {_fmt(high)}].") if low is not None else ""
        if verdict == ASSUMPTION_NOT_MET:
            tail = {True: "the prediction holds anyway", False: "the prediction fails",
                    None: "the prediction cannot be evaluated"}[holds]
            return f"Assumption not met: {assumption_text}. {comparison} ({tail})."
        if verdict == INCONCLUSIVE:
            reason = enough_text or "the measurement is missing or not finite"
            return f"Inconclusive: {reason}. {comparison}"
        return comparison

    @staticmethod
    def _evidence_text(verdict, null_value, null_text, null_passes, control, no_null=None) -> str:
        """What shows that the prediction's check can fail: its null's result, or the control that flips it;
        ``no_null``: why the run has no null (claims.yaml)."""
        if null_text is not None:
            if null_passes is None:
                null_result = f"Null ({null_text}): nothing measured."
            else:
                null_result = f"Null ({null_text}): measured {_fmt(null_value)}, which " + (
                    "passes the same check" if null_passes else "fails the same check") + "."
            if verdict == NOT_DISCRIMINATING:
                return null_result + " Not discriminating: the check does not tell the effect from its absence."
            if null_passes is not None or control is None:
                return null_result + ("" if verdict != NO_NULL else " No control flips it either: not counted.")
        # "No null in the run: the natural null, ...": a reason written as a sentence continues this one
        reason = (no_null[0].lower() + no_null[1:] if re.match(r"[A-Z][a-z]*\b(?![.'’])", no_null or "") else no_null)
        why_none = f"No null in the run: {reason.rstrip('.')}." if no_null else "No null in the run."
        if control is not None:
            return f"{why_none} The control `{control}` flips it."
        if verdict == NO_NULL:
            return (f"{why_none} No control flips it either, so nothing shows the check can fail: "
                    "not counted as reproduced.")
        return why_none if no_null else ""

    # -- summaries
    def counts(self) -> dict:
        return {v: sum(c["verdict"] == v for c in self.claims) for v in VERDICTS}

    def summary(self) -> str:
        return f"At the `{self.params.values.get('preset')}` preset, seed {self.seed}: " + headline(self.claims)

    def as_dict(self) -> dict:
        import torch
        from paperlib import __version__
        return {
            "paper": self.paper,
            "preset": self.params.values.get("preset"),
            "parameters": _jsonable(self.params.as_dict()),
            "overrides": _jsonable(self.params.overrides),
            "seed": self.seed,
            "versions": {"paperlib": __version__, "torch": torch.__version__,
                         "numpy": np.__version__, "python": platform.python_version()},
            "git": self.git,
            "headline": headline(self.claims),
            "device": self.device,
            "runtime_s": round(time.perf_counter() - self.started, 2),
            "counts": self.counts(),
            "section_seconds": self.section_seconds,
            "claims": self.claims,
        }

    def save(self, path: str | os.PathLike | None = None) -> Path:
        """Write the ledger to ``path``, by default ``<paper>.<preset>.ledger.json`` in the working
        directory (``python -m paperlib run`` executes the notebook in a scratch folder and takes
        it from there)."""
        target = Path(path or f"{self.paper}.{self.params.values.get('preset')}.ledger.json")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(self.as_dict(), indent=1))
        return target

    # -- display
    def table_markdown(self) -> str:
        return claims_table_markdown(self.claims)

    def findings_markdown(self) -> str:
        return findings_markdown(self.claims, self.params.values.get("preset"), self.seed)

    def provenance_markdown(self) -> str:
        data = self.as_dict()
        rows = [("paper", data["paper"]), ("preset", data["preset"]), ("seed", data["seed"]),
                ("device", data["device"]), ("run time", f"{data['runtime_s']:.1f} s"),
                ("git revision", data["git"] or "unknown"),
                ("overrides of the preset", ", ".join(f"{k}={v}" for k, v in data["overrides"].items()) or "none")]
        rows += [(f"{name} version", version) for name, version in data["versions"].items()]
        return "| provenance | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


VERDICT_MARK = {"reproduced": "reproduced", "not reproduced": "**not reproduced**",
                "not discriminating": "*not discriminating*", "no null or control": "*no null or control*",
                "assumption not met": "*assumption not met*", "inconclusive": "*inconclusive*",
                "no verdict": "no verdict"}
# the verdict's word for each kind: a bound holds or fails, a consistency check passes or fails
KIND_WORDS = {PREDICTION: {"reproduced": "reproduced", "not reproduced": "**not reproduced**"},
              BOUND: {"reproduced": "holds", "not reproduced": "**fails**"},
              CONSISTENCY: {"reproduced": "passes", "not reproduced": "**fails**"},
              EXPLORATORY: {}}
KIND_TITLES = {PREDICTION: "Predictions", BOUND: "Bounds (with their assumption checks)",
               CONSISTENCY: "Consistency checks (our code and identities that hold by construction; "
                            "not counted as reproductions)",
               EXPLORATORY: "Exploratory measurements (no verdict)"}


def verdict_word(claim: dict) -> str:
    return KIND_WORDS[claim["kind"]].get(claim["verdict"], VERDICT_MARK[claim["verdict"]])


def kind_counts(claims: list[dict]) -> dict:
    """Per kind: the number of claims and of each verdict; for bounds also how many hold
    (the inequality is satisfied, whether or not the assumption is met)."""
    counts = {}
    for kind in KINDS:
        chosen = [c for c in claims if c["kind"] == kind]
        entry = {"total": len(chosen), **{v: sum(c["verdict"] == v for c in chosen) for v in VERDICTS}}
        entry["holds"] = sum(c["prediction_holds"] is True for c in chosen)
        counts[kind] = entry
    return counts


def headline(claims: list[dict]) -> str:
    """"30 of 44 predictions reproduced and beat their null or a control (4 not reproduced, 3 not
    discriminating, 5 with no null or control, 2 inconclusive); 9 of 12 bounds
    hold (7 with their assumptions met); 21 of 21 consistency checks pass; 3 exploratory
    measurements". Only predictions count as reproductions."""
    c = kind_counts(claims)
    p, b, k = c[PREDICTION], c[BOUND], c[CONSISTENCY]
    words = {NO_NULL: "with no null or control"}
    rest = [f"{p[v]} {words.get(v, v)}" for v in (NOT_REPRODUCED, NOT_DISCRIMINATING, NO_NULL, ASSUMPTION_NOT_MET,
                                                   INCONCLUSIVE) if p[v]]
    parts = [f"{p[REPRODUCED]} of {p['total']} predictions reproduced and beat their null or a control"
             + (f" ({', '.join(rest)})" if rest else "")]
    if b["total"]:
        undecided = f", {b[INCONCLUSIVE]} inconclusive" if b[INCONCLUSIVE] else ""
        parts.append(f"{b['holds']} of {b['total']} bounds hold ({b[REPRODUCED]} with their assumptions met{undecided})")
    if k["total"]:
        undecided = f" ({k[INCONCLUSIVE]} inconclusive)" if k[INCONCLUSIVE] else ""
        parts.append(f"{k[REPRODUCED]} of {k['total']} consistency checks pass{undecided}")
    if c[EXPLORATORY]["total"]:
        parts.append(f"{c[EXPLORATORY]['total']} exploratory measurements")
    return "; ".join(parts)


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def plain(text) -> str:
    """Plain text (a statement, a reason) for a reader, made safe for Markdown: its ASCII maths typeset
    (:func:`paperlib.core.typeset.maths`: "lambda_min(J0 J0^T) >= ..." reads "λ_min(J0 J0ᵀ) ≥ ..."), then ``*``
    and ``_`` outside `code` spans escaped, so that "k*L ... k*" or "log|A|_+ ... x_i" is not read as emphasis."""
    from paperlib.core.typeset import maths
    parts = re.split(r"(`[^`]+`)", maths(text))
    return "".join(part if part.startswith("`") else re.sub(r"([*_])", r"\\\1", part) for part in parts)


def claim_anchor(claim_id: str) -> str:
    """The HTML id of a claim's row in its chapter's Verdicts tables (the claims page links there)."""
    return "claim-" + re.sub(r"[^A-Za-z0-9_.-]", "-", claim_id)


def claims_table_markdown(claims: list[dict]) -> str:
    """One compact Markdown table per kind (claim, statement with the paper's value, predicted,
    measured, accepted range, verdict with its reason). Each claim's cell carries its stable anchor
    (:func:`claim_anchor`): a link to it opens the row, with its reason, and highlights it."""
    blocks = []
    for kind in KINDS:
        chosen = [c for c in claims if c["kind"] == kind]
        if not chosen:
            continue
        # five columns: with the accepted range a column of its own, the table's narrowest layout was wider
        # than the book's column at 1280 px
        header = ["claim", "statement", "predicted", "measured; accepted range", "verdict and reason"]
        lines = [f"**{KIND_TITLES[kind]}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for c in chosen:
            paper_value = c.get("paper_value")
            statement = plain(c["statement"]) + (f" (paper: {_fmt(paper_value)})" if paper_value is not None else "")
            cells = [f'<span id="{claim_anchor(c["id"])}"></span>`{c["id"]}` ({c["source"]})', statement,
                     _fmt(c["predicted"]), measured_and_accepted(c), verdict_and_reason(c)]
            lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def measured_and_accepted(claim: dict) -> str:
    """"0.91 (null 0.12); accepted >= 0.8" (the measurement alone where nothing is accepted or refused)."""
    accepted = accepted_range(claim)
    return measured_text(claim) + (f"; accepted {accepted}" if accepted != "-" else "")


def verdict_and_reason(claim: dict) -> str:
    """"**reproduced**: measured 0.91 beats its null 0.12 ..." (the verdict word alone where no reason was given)."""
    word = verdict_word(claim)
    # an exploratory claim's reason opens with the words its verdict already says
    reason = re.sub(r"^Exploratory: no verdict\.\s*", "", plain(claim["why"] or ""))
    return f"{word}: {reason}" if reason else word


def measured_text(claim: dict) -> str:
    """The measurement, and its null's beside it: "0.91 (null 0.12)"."""
    null = claim.get("null")
    return _fmt(claim["measured"]) + (f" (null {_fmt(null['measured'])})" if null else "")


def _number(value) -> float:
    return float(value) if value is not None else math.nan


def accepted_range(claim: dict) -> str:
    """The accepted range of a claim as an interval: ``<= 0.0001``, ``>= 0.8``, ``[0.9, 1.05]``; the
    tolerance's own words where the prediction is not a number, and ``-`` for an exploratory one."""
    check = claim.get("check")
    if not check:
        return "-"
    predicted = claim["predicted"]
    numeric = isinstance(predicted, (int, float)) and not isinstance(predicted, bool)
    if check["kind"] != "within" and not numeric:
        return claim["tolerance"] or "-"
    low, high = Check(check["kind"], check["rtol"], check["atol"], _number(check["low"]),
                      _number(check["high"])).bounds(predicted)
    if low == -math.inf and high == math.inf:
        return "any"
    if low == -math.inf:
        return f"<= {_fmt(high)}"
    if high == math.inf:
        return f">= {_fmt(low)}"
    return f"[{_fmt(low)}, {_fmt(high)}]"


def cell_claims_markdown(claims: list[dict]) -> str:
    """The claims one cell recorded, in one compact table under it: what was predicted, what was
    measured, the accepted range and the verdict (the statement, the kind and the reason are in the
    Verdicts section's tables), folded under a title that tallies the verdicts."""
    # five columns fit the book's content column at 1280 px; the verdict word already tells the kinds apart
    header = ["claim", "predicted", "measured", "accepted", "verdict"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for c in claims:
        cells = [f"`{c['id']}`", _fmt(c["predicted"]), measured_text(c), accepted_range(c), verdict_word(c)]
        lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
    # folded: the Verdicts section has the same numbers with their reasons, and a reader of the page wants the
    # method first; the title says at a glance what the cell found
    return dropdown(f"{claim_count(claims)} recorded by this cell: {verdict_tally(claims)}", "\n".join(lines))


def claim_count(claims: list) -> str:
    return f"{len(claims)} claim{'s' if len(claims) != 1 else ''}"


def verdict_tally(claims: list[dict]) -> str:
    """"2 reproduced, 1 not reproduced", in the order of first appearance."""
    words = [verdict_word(c).strip("*") for c in claims]
    return ", ".join(f"{words.count(w)} {w}" for w in dict.fromkeys(words))


def dropdown(title: str, body: str) -> str:
    """MyST for a folded section: ``title`` on the fold, ``body`` one click away. The fence is longer than any
    colon fence inside ``body``, so that folds nest."""
    inner = max((len(m) for m in re.findall(r"^(:{3,})", body, flags=re.M)), default=2)
    fence = ":" * max(4, inner + 1)
    return f"{fence}{{dropdown}} {title}\n{body}\n{fence}"


def robust_outcome(claim: dict) -> str:
    """``holds`` (its check passes, whatever its null; or it holds although an assumption is not met),
    ``inconclusive`` (nothing decided it) or ``fails``."""
    if claim["verdict"] == INCONCLUSIVE:
        return "inconclusive"
    return "holds" if claim not in robust_failures([claim]) else "fails"


def robust_failures(claims: list[dict]) -> list[dict]:
    """Claims marked robust (they should hold at every seed and preset) that do not hold
    here: neither reproduced nor an unmet assumption with the prediction holding."""
    return [c for c in claims if c["robust"]
            and not (c["verdict"] in (REPRODUCED, ASSUMPTION_NOT_MET, NOT_DISCRIMINATING, NO_NULL)
                     and c["prediction_holds"])]


def findings_markdown(claims: list[dict], preset, seed) -> str:
    """The Verdicts paragraph, generated from the ledger so that it is true at every preset
    and seed: the headline, then every prediction that did not reproduce, every bound that
    fails or whose assumption is not met, every inconclusive claim and every failing
    consistency check, each with its statement and reason."""
    def items(selected):
        return "\n".join(f"- `{c['id']}` ({plain(c['source'])}): {plain(c['statement'])} {plain(c['why'])}" for c in selected)

    sections = [f"At the `{preset}` preset and seed {seed}: {headline(claims)}."]
    groups = [
        ("Robust claims that do not hold at this seed (a finding: they are expected to hold at every seed)",
         robust_failures(claims)),
        ("Predictions not reproduced", [c for c in claims if c["kind"] == PREDICTION and c["verdict"] == NOT_REPRODUCED]),
        ("Predictions that do not discriminate (their null passes the same check)",
         [c for c in claims if c["verdict"] == NOT_DISCRIMINATING]),
        ("Predictions whose assumption is not met", [c for c in claims if c["kind"] == PREDICTION
                                                     and c["verdict"] == ASSUMPTION_NOT_MET]),
        ("Bounds that fail", [c for c in claims if c["kind"] == BOUND and c["prediction_holds"] is False]),
        ("Bounds that hold although their assumption is not met",
         [c for c in claims if c["kind"] == BOUND and c["verdict"] == ASSUMPTION_NOT_MET and c["prediction_holds"]]),
        ("Inconclusive", [c for c in claims if c["verdict"] == INCONCLUSIVE]),
        ("Consistency checks that fail", [c for c in claims if c["kind"] == CONSISTENCY and c["verdict"] == NOT_REPRODUCED]),
    ]
    for title, selected in groups:
        if selected:
            sections.append(f"**{title}** ({len(selected)}):\n\n{items(selected)}")
    unchecked = [c["id"] for c in claims if c["verdict"] == NO_NULL]
    if unchecked:
        sections.append(f"**Predictions that pass with no null in the run and no control that flips them** "
                        f"({len(unchecked)}; not counted until one is added): "
                        + ", ".join(f"`{claim_id}`" for claim_id in unchecked) + ".")
    return "\n\n".join(sections)


REQUIRED_CLAIM_KEYS = ("id", "kind", "source", "statement", "predicted", "measured", "tolerance", "verdict", "why")


def validate_ledger(data: dict, origin: str = "ledger") -> dict:
    """Check that a ledger has what this paperlib writes; an older ledger fails with a clear message."""
    for key in ("paper", "preset", "claims"):
        if key not in data:
            raise LedgerError(f"{origin}: no {key!r} field; is this a claims ledger?")
    for claim in data["claims"]:
        if "kind" not in claim:
            raise LedgerError(f"{origin}: claim {claim.get('id', '?')!r} has no 'kind'; the ledger was written "
                              "before claims had kinds (prediction, bound, consistency): run the chapter again")
        missing = [key for key in REQUIRED_CLAIM_KEYS if key not in claim]
        if missing or claim["kind"] not in KINDS or claim["verdict"] not in VERDICTS:
            raise LedgerError(f"{origin}: claim {claim.get('id', '?')!r} is malformed "
                              f"(missing {missing}, kind {claim.get('kind')!r}, verdict {claim.get('verdict')!r})")
    return data


def load(path: str | os.PathLike) -> dict:
    return validate_ledger(json.loads(Path(path).read_text()), str(path))


# what a result depends on: a change here, uncommitted, makes the revision "-dirty"
SOURCE_PATHS = ("paperlib", "notebooks", "requirements.txt", "pyproject.toml")


def git_revision() -> str | None:
    """The short commit, with ``-dirty`` when the code or notebooks that produce results
    (:data:`SOURCE_PATHS`) have uncommitted changes, so that a result is never credited to a
    commit that does not hold its code. Other files (tests, references, docs) do not count."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True,
                              cwd=root, timeout=5).stdout.strip()
        if not head:
            return None
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", *SOURCE_PATHS],
                                 capture_output=True, text=True, cwd=root, timeout=5).stdout.strip()
        return head + ("-dirty" if changed else "")
    except (OSError, subprocess.SubprocessError):
        return None


def compare(a: dict, b: dict) -> dict:
    """Two ledgers claim by claim (a `default` and a `full` run, two seeds, a run before and after a change):
    the claims only in one, those whose verdict or kind differ, and those whose other fields (measured values,
    reasons) differ with the same verdict. ``identical`` when every claim's every field is the same."""
    claims_a, claims_b = ({c["id"]: c for c in ledger["claims"]} for ledger in (a, b))
    both = [i for i in claims_a if i in claims_b]
    verdicts = [i for i in both if (claims_a[i]["verdict"], claims_a[i]["kind"]) != (claims_b[i]["verdict"], claims_b[i]["kind"])]
    other_fields = [i for i in both if i not in verdicts and claims_a[i] != claims_b[i]]
    only_a = [i for i in claims_a if i not in claims_b]
    only_b = [i for i in claims_b if i not in claims_a]
    return dict(both=both, verdict_differs=verdicts, fields_differ=other_fields, only_a=only_a, only_b=only_b,
                identical=not (verdicts or other_fields or only_a or only_b))


def comparison_text(a: dict, b: dict, label_a: str = "A", label_b: str = "B", fields: bool = False) -> str:
    """:func:`compare` for a reader: each ledger's run and headline, then the differences, claim by claim (with
    ``fields``, also the claims whose verdict is the same and which fields differ)."""
    result = compare(a, b)
    run = lambda d: (f"{d['paper']}, {d['preset']}, seed {d.get('seed', '-')}, {d.get('device', '-')}, "
                     f"revision {d.get('git') or '-'}")
    lines = [f"{label_a}: {run(a)}: {headline(a['claims'])}", f"{label_b}: {run(b)}: {headline(b['claims'])}"]
    claims_a, claims_b = ({c["id"]: c for c in d["claims"]} for d in (a, b))
    same = len(result["both"]) - len(result["verdict_differs"])
    lines.append(f"{len(result['both'])} claims in both: {same} with the same verdict, of which "
                 f"{len(result['fields_differ'])} differ in another field (a measured value, a reason)")
    if result["identical"]:
        lines.append("identical: every claim, every field")
    for claim_id in result["verdict_differs"]:
        x, y = claims_a[claim_id], claims_b[claim_id]
        kind = x["kind"] if x["kind"] == y["kind"] else f"{x['kind']} -> {y['kind']}"
        lines.append(f"  {claim_id} ({kind}): {x['verdict']} ({_fmt(x['measured'])}) -> {y['verdict']} ({_fmt(y['measured'])})")
    for claim_id in result["fields_differ"] if fields else []:
        names = [k for k in sorted(set(claims_a[claim_id]) | set(claims_b[claim_id]))
                  if claims_a[claim_id].get(k) != claims_b[claim_id].get(k)]
        lines.append(f"  {claim_id}: same verdict, {', '.join(names)} differ")
    for label, ids, claims in ((label_a, result["only_a"], claims_a), (label_b, result["only_b"], claims_b)):
        for claim_id in ids:
            lines.append(f"  only in {label}: {claim_id} ({claims[claim_id]['kind']}, {claims[claim_id]['verdict']})")
    return "\n".join(lines)
