"""The run store: each distinct chapter run of this checkout, executed once and shared.

A run is a :class:`paperlib.core.sweep.RunSpec`: chapter, preset, seed, overrides, thread count and
instruction set. Its results live in ``_build/runs/<preset>/<spec.name>/<paper>.{ipynb,json,log,stamp}``,
the folders the book's seed sweep writes too. A stored run is reused while its stamp
(:func:`paperlib.core.sweep.run_stamp`: the chapter's notebook, presets, claims, the library modules it
imports and the requirements, with the run's own parameters) is unchanged; otherwise it is executed
again. The run's folder is locked while it is checked and executed, so that every pytest worker, a
book build and a sweep beside them share one execution of each run (:func:`paperlib.core.sweep.execute`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from paperlib.core import params as P
from paperlib.core import sweep as S

ROOT = P.REPO_ROOT / "_build" / "runs"


def preset_dir(preset: str, root: Path = ROOT) -> Path:
    return Path(root) / preset


@dataclass(frozen=True)
class StoredRun:
    """A finished run: its executed notebook, ledger and log, and whether this call executed it."""
    spec: S.RunSpec
    folder: Path
    executed: bool

    @property
    def notebook(self) -> Path:
        return self.folder / f"{self.spec.paper}.ipynb"

    @property
    def ledger_file(self) -> Path:
        return self.folder / f"{self.spec.paper}.json"

    @property
    def log(self) -> Path:
        return self.folder / f"{self.spec.paper}.log"

    def ledger(self) -> dict:
        return json.loads(self.ledger_file.read_text())


class RunFailed(RuntimeError):
    """The run did not finish; the message ends with its log."""


def fetch(spec: S.RunSpec, root: Path = ROOT, timeout_s: float = S.RUN_TIMEOUT_S) -> StoredRun:
    """The stored result of ``spec``, executing it first when the store has no current one."""
    report = S.execute(spec, str(preset_dir(spec.preset, root)), S.run_stamp(spec), timeout_s, restamp=S.run_stamp)
    folder = preset_dir(spec.preset, root) / spec.name
    if report["status"] == "changed":
        raise RunFailed(f"{spec.paper} ({spec.name}): the code it depends on changed while it ran; run it again")
    if report["status"] not in ("done", "skipped"):
        log = Path(report["log"])
        tail = log.read_text()[-3000:] if log.exists() else ""
        raise RunFailed(f"{spec.paper} ({spec.name}) {report['status']}; log {log}:\n{tail}")
    return StoredRun(spec, folder, executed=report["status"] == "done")


def run(paper: str, preset: str = "smoke", seed: int = 0, parameters: dict | None = None, threads: int = 1,
        isa: str = "", root: Path = ROOT) -> StoredRun:
    """:func:`fetch` by its fields; ``parameters`` are overrides of the preset."""
    spec = S.RunSpec(paper, preset, seed, tuple(sorted((parameters or {}).items())), threads=threads, isa=isa)
    from paperlib.core.runner import planned_parameters
    planned_parameters(paper, preset, spec.overrides)  # bad input stops here, naming the parameter
    return fetch(spec, root)
