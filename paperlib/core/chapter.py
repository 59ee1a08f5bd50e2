"""The scaffold every chapter opens and closes with.

A chapter's first code cell after its parameters calls :func:`open_chapter`: the parameters are
validated and the preset applied (one path: :func:`paperlib.core.params.resolve`), every random
number generator is seeded, the device is chosen, the ledger opened and the plotting style set.
At the end, :meth:`Chapter.verdicts` saves the ledger and shows the findings and the claims
table, :meth:`Chapter.regression_check` prints what CI compares with the smoke reference, and
:meth:`Chapter.provenance` shows where, when and how fast the run went.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from paperlib.core import changes, controls, devices, params, plotting, sections
from paperlib.core.ledger import Ledger, cell_claims_markdown, claim_count, declared_claims, dropdown
from paperlib.core.seeding import seed_everything


@dataclass
class Chapter:
    """One executing chapter: its parameters ``params``, the torch ``device``, the claims
    ``ledger`` and the wall and CPU time at the start of each section."""

    params: params.Params
    device: object
    ledger: Ledger
    section_starts: dict = field(default_factory=dict)
    ledger_path: Path | None = None
    notes: list = field(default_factory=list)

    def section(self, name: str) -> None:
        """Mark the start of a section: its wall and CPU time go into the provenance table (the
        CPU time of this process is the section's cost even when other jobs share the cores), and the
        claims recorded from here on carry its name (:mod:`paperlib.core.sections`)."""
        self.section_starts[name] = (time.perf_counter(), time.process_time())
        self.ledger.section = name

    def note(self, markdown: str) -> None:
        """A sentence computed from the run, shown in the Verdicts after the findings."""
        self.notes.append(markdown)

    def headline_figure(self, fig=None) -> None:
        """Keep the chapter's headline figure (the current matplotlib figure by default) for the top of its page,
        where ``{glue:figure} headline_figure`` shows it under the results table; the cell still shows it too."""
        import matplotlib.pyplot as plt
        from myst_nb import glue
        glue("headline_figure", fig or plt.gcf(), display=False)

    def verdicts(self, *notes: str) -> None:
        """Save the ledger, then show the generated findings, the chapter's notes (:meth:`note`, then
        ``notes``: Markdown computed from the run) and the table of every claim."""
        from IPython.display import Markdown, display
        from myst_nb import glue

        self.ledger.section_seconds = {name: round(wall, 2) for name, (wall, _) in self.section_times().items()}
        self.ledger_path = self.ledger.save()
        glue("verdict_summary", Markdown(self.ledger.summary()), display=False)
        coverage = controls.coverage_markdown(self.ledger.paper, self.ledger.claims)
        findings = "\n\n".join(filter(None, [self.ledger.findings_markdown(), coverage, *self.notes, *notes]))
        claims = self.ledger.claims
        # folded, each one click away: the results table at the top of the page already gives the headline results
        display(Markdown(dropdown("What did not reproduce, what holds only weakly, and why", findings) + "\n\n"
                         + dropdown(f"Every claim: its prediction, measurement, null and reason "
                                    f"({claim_count(claims)})", self.ledger.table_markdown())))

    def changes_to_checks(self) -> None:
        """Show the chapter's record of changes to checks (:mod:`paperlib.core.changes`) as one folded table."""
        from IPython.display import Markdown, display
        entries = changes.load(self.ledger.paper)
        title = f"The {len(entries)} change{'s' if len(entries) != 1 else ''}, each with its reason"
        display(Markdown(dropdown(title, changes.changes_markdown(entries))))

    def regression_check(self, *lines: str) -> None:
        """Print every claim's verdict, then ``lines`` (a few key numbers, rounded): the output
        CI compares with the committed smoke reference."""
        width = max((len(claim["id"]) for claim in self.ledger.claims), default=0) + 2
        for claim in self.ledger.claims:
            print(f"{claim['id']:<{width}} {claim['verdict']}")
        for line in lines:
            print(line)

    def section_times(self) -> dict:
        """Wall and CPU seconds of each section, in order."""
        marks = dict(self.section_starts, end=(time.perf_counter(), time.process_time()))
        names = list(marks)
        return {a: (marks[b][0] - marks[a][0], marks[b][1] - marks[a][1]) for a, b in zip(names, names[1:])}

    def provenance(self) -> None:
        """Show the run's provenance (revision, versions, device, overrides) and the time per section."""
        from IPython.display import Markdown, display

        times = ", ".join(f"{name} {wall:.1f} s ({cpu:.1f} s)" for name, (wall, cpu) in self.section_times().items())
        saved = f"\n\nLedger written to `{self.ledger_path.name}`." if self.ledger_path else ""
        display(Markdown(dropdown("The revision, versions, device and time per section of this run",
                                  self.ledger.provenance_markdown()
                                  + f"\n\n**Time per section** (wall, and CPU of this process): {times}{saved}")))


def open_chapter(paper: str, namespace: dict) -> Chapter:
    """Validate the parameters in ``namespace`` (the notebook's ``globals()``) and apply the
    preset, seed everything, choose the device, open the ledger and set the plotting style."""
    P = params.resolve(paper, namespace)
    seed_everything(P.seed)
    device = devices.pick_device(P.device)
    ledger = Ledger(paper, P, device=devices.describe(device), declared=declared_claims(paper),
                    control_of=controls.control_of(paper))
    plotting.use_style()
    show_claims_under_each_cell(ledger)
    # with `sections` set, the cells of the other sections do not run; unset, nothing is installed
    sections.install_filter(None if P.values.get("sections") is None else sections.closure(paper, P.sections))
    _show(reproduce_markdown(paper, P.preset, P.seed, P.overrides, devices.describe(device)),
          f"preset {P.preset!r}, seed {P.seed}, device {device}; overrides: {P.overrides or 'none'}")
    return Chapter(P, device, ledger)


def reproduce_commands(paper: str, preset: str, seed: int, overrides: dict) -> list[str]:
    """The shell commands that reproduce this run: ``paperlib run`` (papermill underneath, with the
    same validation), plain papermill, and the sweep over seeds that the published book runs."""
    import shlex

    def quoted(value):
        return shlex.quote(json.dumps(value) if not isinstance(value, str) else value)

    chosen = {name: value for name, value in overrides.items() if name not in ("preset", "seed")}
    extra = "".join(f" -p {name} {quoted(value)}" for name, value in chosen.items())  # paperlib reads -p as YAML
    # papermill's -p keeps a list as a string; its -y takes YAML (JSON is YAML)
    papermill_extra = "".join(f" -y {shlex.quote(f'{name}: {json.dumps(value)}')}" if isinstance(value, (list, dict))
                              else f" -p {name} {quoted(value)}" for name, value in chosen.items())
    return [f"python -m paperlib run {paper} --preset {preset} -p seed {seed}{extra}",
            f"jupytext --to ipynb -o - notebooks/{paper}.md | papermill - {paper}.out.ipynb -p preset {preset} "
            f"-p seed {seed}{papermill_extra}",
            f"python -m paperlib sweep {paper} --preset {preset} --seeds 0-2{extra}"]


def reproduce_markdown(paper: str, preset: str, seed: int, overrides: dict, device: str = "the CPU") -> str:
    run, papermill, sweep = reproduce_commands(paper, preset, seed, overrides)
    return (":::{admonition} Reproduce this page\n:class: tip dropdown reproduce-box\n\n"
            f"This page ran at preset `{preset}`, seed {seed}, on {device}"
            + (", overriding " + ", ".join(f"`{k}`" for k in overrides if k not in ("preset", "seed")) if
               set(overrides) - {"preset", "seed"} else "")
            + ". From the repository's root, after `make install`:\n\n"
            f"```bash\n{run}\n```\n\nor with papermill itself:\n\n```bash\n{papermill}\n```\n\n"
            f"and over seeds, as the published book does:\n\n```bash\n{sweep}\n```\n:::")


def _show(markdown: str, text: str) -> None:
    """Markdown in IPython, plain text elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(Markdown(markdown))
    else:
        print(text)


_CELL_HOOKS: list = []  # the (event, callback) pairs registered by the last open_chapter of this kernel


def show_claims_under_each_cell(ledger: Ledger) -> None:
    """In IPython, show under every cell the claims it recorded (:func:`cell_claims_markdown`), so that
    the reader sees each prediction, measurement and verdict where it is made. Opening a chapter again
    in the same kernel replaces the hooks of the previous one. Outside IPython, nothing."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    for event, callback in _CELL_HOOKS:
        try:
            shell.events.unregister(event, callback)
        except ValueError:
            pass
    _CELL_HOOKS.clear()
    start = [len(ledger.claims)]

    def before(*_):
        start[0] = len(ledger.claims)

    def after(*_):
        recorded = ledger.claims[start[0]:]
        start[0] = len(ledger.claims)
        if recorded:
            display(Markdown(cell_claims_markdown(recorded)))

    for event, callback in (("pre_run_cell", before), ("post_run_cell", after)):
        shell.events.register(event, callback)
        _CELL_HOOKS.append((event, callback))
