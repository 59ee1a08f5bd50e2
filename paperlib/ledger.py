"""The claims ledger.

Each chapter records every testable claim of its paper as one entry: the
prediction, the measurement, the tolerance and a verdict that this module
computes from them (never written by hand).  The ledger is written as JSON,
shown in the chapter as a table beside the paper's own numbers, and collected
into the book's claims status page.

Verdicts, in the order they are decided:

1. ``assumption not met``: a hypothesis of the theorem is violated at our
   scale (the prediction is still evaluated and reported in ``why``);
2. ``inconclusive``: the measurement is missing or not finite, or the caller
   says there is too little data to decide;
3. ``reproduced`` / ``not reproduced``: the check passes or fails.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

VERDICTS = ("reproduced", "not reproduced", "assumption not met", "inconclusive")
REPRODUCED, NOT_REPRODUCED, ASSUMPTION_NOT_MET, INCONCLUSIVE = VERDICTS
LEDGER_ENV = "PAPERLIB_LEDGER"


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
                    enough_data: bool = True) -> tuple[str, bool | None]:
    """Return (verdict, prediction_holds) for one claim.

    ``prediction_holds`` is None when the measurement cannot be compared.
    """
    if not _is_finite(measured) or (check.kind != "within" and not _is_finite(predicted)):
        return INCONCLUSIVE, None
    holds = check.passes(measured, predicted)
    if not assumption_met:
        return ASSUMPTION_NOT_MET, holds
    if not enough_data:
        return INCONCLUSIVE, holds
    return (REPRODUCED if holds else NOT_REPRODUCED), holds


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        items = list(np.asarray(value).ravel())
        if len(items) > 6:
            return f"[{_fmt(min(items))} .. {_fmt(max(items))}] ({len(items)} values)"
        return "[" + ", ".join(_fmt(v) for v in items) + "]"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    value = float(value)
    if value == 0 or (1e-3 <= abs(value) < 1e5):
        return f"{value:.4g}"
    return f"{value:.3e}"


class Ledger:
    """Collects the claims of one chapter and writes them as JSON."""

    def __init__(self, paper: str, params, seed: int | None = None, device: str = "cpu"):
        self.paper = paper
        self.params = params
        self.seed = seed if seed is not None else params.values.get("seed")
        self.device = device
        self.claims: list[dict] = []
        self.started = time.perf_counter()

    # -- recording
    def record(self, claim_id: str, source: str, statement: str, *, measured, predicted,
               check: Check, paper_value=None, assumption: tuple[bool, str] | None = None,
               enough_data: tuple[bool, str] | None = None, robust: bool = False,
               note: str = "") -> dict:
        """Record one claim and compute its verdict.

        ``assumption`` is (holds, description) of the theorem's hypothesis at
        our scale; ``enough_data`` is (enough, description); ``robust`` marks
        claims that CI asserts are reproduced at the smoke preset.
        """
        if any(c["id"] == claim_id for c in self.claims):
            raise ValueError(f"claim id {claim_id!r} recorded twice")
        assumption_met, assumption_text = assumption if assumption else (True, "")
        enough, enough_text = enough_data if enough_data else (True, "")
        verdict, holds = compute_verdict(measured, predicted, check, bool(assumption_met), bool(enough))
        why = self._explain(verdict, holds, measured, predicted, check, assumption_text, enough_text)
        entry = {
            "id": claim_id, "source": source, "statement": statement,
            "predicted": _jsonable(predicted), "measured": _jsonable(measured),
            "paper_value": _jsonable(paper_value), "tolerance": check.describe(predicted),
            "check": {"kind": check.kind, "rtol": check.rtol, "atol": check.atol,
                      "low": _jsonable(check.low), "high": _jsonable(check.high)},
            "verdict": verdict, "prediction_holds": holds, "robust": bool(robust),
            "why": (why + (" " + note if note else "")).strip(),
        }
        self.claims.append(entry)
        return entry

    @staticmethod
    def _explain(verdict, holds, measured, predicted, check, assumption_text, enough_text):
        low, high = check.bounds(predicted) if _is_finite(predicted) or check.kind == "within" else (None, None)
        comparison = (f"measured {_fmt(measured)} against predicted {_fmt(predicted)}; "
                      f"accepted range [{_fmt(low)}, {_fmt(high)}].") if low is not None else ""
        if verdict == ASSUMPTION_NOT_MET:
            tail = {True: "the prediction holds anyway", False: "the prediction fails",
                    None: "the prediction cannot be evaluated"}[holds]
            return f"Assumption not met: {assumption_text}. {comparison} ({tail})."
        if verdict == INCONCLUSIVE:
            reason = enough_text or "the measurement is missing or not finite"
            return f"Inconclusive: {reason}. {comparison}"
        return comparison

    # -- summaries
    def counts(self) -> dict:
        return {v: sum(c["verdict"] == v for c in self.claims) for v in VERDICTS}

    def summary(self) -> str:
        counts = self.counts()
        parts = [f"{n} {v}" for v, n in counts.items() if n]
        return f"{len(self.claims)} claims at the `{self.params.values.get('preset')}` preset: " + ", ".join(parts)

    def as_dict(self) -> dict:
        import torch
        from . import __version__
        return {
            "paper": self.paper,
            "preset": self.params.values.get("preset"),
            "parameters": _jsonable(self.params.as_dict()),
            "overrides": _jsonable(self.params.overrides),
            "seed": self.seed,
            "versions": {"paperlib": __version__, "torch": torch.__version__,
                         "numpy": np.__version__, "python": platform.python_version()},
            "git": git_revision(),
            "device": self.device,
            "runtime_s": round(time.perf_counter() - self.started, 2),
            "counts": self.counts(),
            "claims": self.claims,
        }

    def save(self, path: str | os.PathLike | None = None) -> Path:
        """Write the ledger.  The path is, in order: ``path``, the environment
        variable ``PAPERLIB_LEDGER`` (set by ``python -m paperlib run``), or
        ``<paper>.<preset>.ledger.json`` in the working directory."""
        target = Path(path or os.environ.get(LEDGER_ENV)
                      or f"{self.paper}.{self.params.values.get('preset')}.ledger.json")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(self.as_dict(), indent=1))
        return target

    # -- display
    def table_markdown(self) -> str:
        return claims_table_markdown(self.claims)

    def provenance_markdown(self) -> str:
        data = self.as_dict()
        rows = [("paper", data["paper"]), ("preset", data["preset"]), ("seed", data["seed"]),
                ("device", data["device"]), ("run time", f"{data['runtime_s']:.1f} s"),
                ("git revision", data["git"] or "unknown"),
                ("overrides of the preset", ", ".join(f"{k}={v}" for k, v in data["overrides"].items()) or "none")]
        rows += [(f"{name} version", version) for name, version in data["versions"].items()]
        return "| | |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


VERDICT_MARK = {"reproduced": "reproduced", "not reproduced": "**not reproduced**",
                "assumption not met": "*assumption not met*", "inconclusive": "*inconclusive*"}


def claims_table_markdown(claims: list[dict], extra_columns: dict | None = None) -> str:
    """A Markdown table of claims: id, source, paper's value, predicted, measured, verdict."""
    header = ["claim", "source", "paper", "predicted", "measured", "tolerance", "verdict"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for c in claims:
        cells = [f"`{c['id']}`", c["source"], _fmt(c.get("paper_value")), _fmt(c["predicted"]),
                 _fmt(c["measured"]), c["tolerance"], VERDICT_MARK[c["verdict"]]]
        lines.append("| " + " | ".join(str(x).replace("|", "\\|") for x in cells) + " |")
    return "\n".join(lines)


def load(path: str | os.PathLike) -> dict:
    return json.loads(Path(path).read_text())


def git_revision() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
