"""Seed and parameter sweeps: many ``paperlib run``s on a Dask cluster, and their aggregate.

Each (seed, grid point) is one ``python -m paperlib run`` in a subprocess, with its own
output folder (shared only by different chapters), log, ledger and per-run timeout, so that one failing or hanging run never
stops the others. Dask distributed schedules them: a ``LocalCluster`` sized to the machine
by default, or an existing cluster given by its scheduler address (a SLURM or Kubernetes
cluster started with dask-jobqueue or dask-kubernetes; paperlib must be importable on its
workers and the output folder shared with them).

A run whose folder holds a ledger and a stamp equal to the run's :func:`run_stamp` is
skipped, so an interrupted sweep continues where it stopped and an unchanged sweep costs
nothing. The aggregate ``DIR/<paper>.sweep.json`` holds, per grid point and claim, the
verdict counts over seeds, the median and spread of the measured value with a bootstrap
interval, the prediction and an aggregate verdict (:func:`aggregate_verdict`), and the
provenance of every run.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from paperlib.core import params as P
from paperlib.core.ledger import (ASSUMPTION_NOT_MET, INCONCLUSIVE, NO_NULL, NOT_DISCRIMINATING, NOT_REPRODUCED,
                                  REPRODUCED, robust_outcome, validate_ledger)

RUN_TIMEOUT_S = 3600.0
#: a run's statuses that leave no result to use (see :func:`execute`)
UNFINISHED = ("failed", "timeout", "changed")
SUMMARY_CONFIDENCE = 0.95


#: another instruction set on this CPU: PyTorch's own kernels, MKL's and oneDNN's restricted to AVX2 (``isa``)
INSTRUCTION_SETS = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}}


@dataclass(frozen=True)
class RunSpec:
    """One run: a chapter at a preset, a seed and the grid point's parameters, at a number of CPU threads
    and, with ``isa``, restricted to another instruction set (:data:`INSTRUCTION_SETS`). Every field is part
    of what the run is: two specs that differ in any of them are two runs."""
    paper: str
    preset: str
    seed: int
    parameters: tuple = field(default=())  # ((name, value), ...) in a fixed order: hashable
    threads: int = 1
    isa: str = ""

    def __post_init__(self):
        if self.isa and self.isa not in INSTRUCTION_SETS:
            raise P.ParameterError(f"isa must be one of {sorted(INSTRUCTION_SETS)}, got {self.isa!r}")
        if self.threads < 1:
            raise P.ParameterError(f"threads must be at least 1, got {self.threads}")

    @property
    def overrides(self) -> dict:
        return dict(self.parameters, seed=self.seed)

    @property
    def grid_point(self) -> dict:
        return dict(self.parameters)

    @property
    def environment(self) -> dict:
        """The variables the run's process gets: its thread count, and its instruction set (unset: the CPU's)."""
        env = {"OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads), "PYTHONHASHSEED": "0"}
        if self.threads > 1:
            # threads that spin while they wait burn the core another run needs; the policy decides how
            # threads idle, not how sums are split, so the results are those of busy-waiting threads
            env["OMP_WAIT_POLICY"] = "PASSIVE"
        return dict(env, **INSTRUCTION_SETS.get(self.isa, {}))

    @property
    def name(self) -> str:
        """The run's folder name, readable and unique: ``seed=3,width=64``, ``seed=0,threads=2``."""
        parts = [f"seed={self.seed}"] + [f"{k}={_slug(v)}" for k, v in self.parameters]
        text = ",".join(parts)
        if len(text) > 120:  # long list values: keep the name short and unique
            digest = hashlib.sha256(json.dumps(self.parameters, default=str).encode()).hexdigest()[:12]
            text = f"seed={self.seed},grid={digest}"
        return text + (f",threads={self.threads}" if self.threads != 1 else "") + (f",isa={self.isa}" if self.isa else "")


def _slug(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return re.sub(r"[^A-Za-z0-9._=+-]", "_", text)


def parse_seeds(text: str) -> list[int]:
    """``"0-4"`` -> [0, 1, 2, 3, 4]; ``"0,3,7-8"`` -> [0, 3, 7, 8]. Seeds are distinct and >= 0."""
    seeds = []
    for part in str(text).split(","):
        part = part.strip()
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise P.ParameterError(f"--seeds: cannot read {part!r}; write e.g. 0-4 or 0,3,7-8")
        low, high = int(match[1]), int(match[2] or match[1])
        if high < low:
            raise P.ParameterError(f"--seeds: range {part!r} runs backwards")
        seeds.extend(range(low, high + 1))
    if len(set(seeds)) != len(seeds):
        raise P.ParameterError(f"--seeds: {text!r} names a seed twice")
    return seeds


def plan(paper: str, preset: str, seeds: list[int], fixed: dict | None = None,
         grid: dict[str, list] | None = None, threads: int = 1) -> list[RunSpec]:
    """Every (grid point, seed) run, each validated as ``paperlib run`` would before anything
    is submitted: a bad value raises :class:`ParameterError` naming the parameter."""
    from paperlib.core.runner import paper_name, planned_parameters
    paper = paper_name(paper)
    fixed, grid = dict(fixed or {}), dict(grid or {})
    for name in ("seed", "preset"):
        if name in fixed or name in grid:
            raise P.ParameterError(f"parameter {name!r} is set with --{'seeds' if name == 'seed' else 'preset'}, "
                                   "not with -p or --grid")
    for name, values in grid.items():
        if not isinstance(values, list) or not values:
            raise P.ParameterError(f"--grid {name}: give a non-empty YAML list, e.g. '[16, 32]'")
        if name in fixed:
            raise P.ParameterError(f"parameter {name!r} is given both with -p and with --grid")
    names = sorted(grid)
    runs = []
    for values in itertools.product(*(grid[name] for name in names)):
        point = tuple(sorted(fixed.items())) + tuple(zip(names, values))
        for seed in seeds:
            spec = RunSpec(paper, preset, seed, tuple(sorted(point)), threads=threads)
            planned_parameters(paper, preset, spec.overrides)  # raises with the parameter's name
            runs.append(spec)
    return runs


def run_stamp(spec: RunSpec) -> str:
    """What a run's result depends on: the chapter's content stamp (notebook, presets, library,
    requirements) and the run itself (its parameters, threads, instruction set and the inherited variables of
    :data:`STAMPED_ENVIRONMENT`)."""
    from paperlib.core.runner import content_stamp
    digest = hashlib.sha256(content_stamp(spec.paper, spec.preset).encode())
    digest.update(json.dumps(spec.overrides, sort_keys=True, default=str).encode())
    environment = run_environment(spec)
    digest.update(json.dumps(spec.environment | {name: environment.get(name) for name in STAMPED_ENVIRONMENT},
                             sort_keys=True).encode())
    return digest.hexdigest()


def run_command(spec: RunSpec, out_dir: Path) -> list[str]:
    overrides = [arg for name, value in spec.overrides.items() for arg in ("-p", name, json.dumps(value))]
    return [sys.executable, "-m", "paperlib", "run", spec.paper, "--preset", spec.preset,
            "--out", str(out_dir), *overrides]


#: set by a caller's shell, they would change what a run computes without being part of its spec: the run gets
#: its own (:attr:`RunSpec.environment`) or none
_INHERITED = ("OMP_WAIT_POLICY", *{name for names in INSTRUCTION_SETS.values() for name in names})
#: set by a caller's shell and kept, they can change a result too, so their values are part of the stamp: the
#: devices CUDA shows (``device: auto``), whether trainers record CUDA graphs, and the vector units MKL and oneDNN use
STAMPED_ENVIRONMENT = ("CUDA_VISIBLE_DEVICES", "PAPERLIB_CUDA_GRAPHS", "MKL_ENABLE_INSTRUCTIONS", "DNNL_MAX_CPU_ISA")


#: set by a caller (the test session) to an id of its own: a run that failed under the same id and stamp is not
#: executed again, so that each run executes at most once per invocation even when it fails
SESSION_VARIABLE = "PAPERLIB_RUN_SESSION"


def run_environment(spec: RunSpec) -> dict:
    """The environment a run's process gets: the caller's, less :data:`_INHERITED`, with the spec's own."""
    return {name: value for name, value in os.environ.items() if name not in _INHERITED} | spec.environment


def execute(spec: RunSpec, sweep_dir: str, stamp: str, timeout_s: float = RUN_TIMEOUT_S,
            command=run_command, restamp=None) -> dict:
    """Run one sweep point in a subprocess (on a Dask worker, or for a test) and report what happened:
    ``done``, ``skipped`` (an identical result exists), ``failed``, ``timeout`` or ``changed`` (``restamp(spec)``,
    the stamp taken again after the run, differs from ``stamp``: the code changed while it ran, so its result is
    kept but not vouched for, and the next request executes it again).

    The run's folder is locked while it is checked and executed, so that processes asking for the same
    run at once (the workers of a test session, a book build beside them) execute it once: the others
    wait, then find it done. A caller stopped while the run goes on (Ctrl-C) stops the run with it."""
    import fcntl
    folder = Path(sweep_dir) / spec.name
    folder.mkdir(parents=True, exist_ok=True)
    # named by the paper: the book's sweep runs every chapter of a seed in one folder
    stamp_file, ledger, log_file = (folder / f"{spec.paper}.{suffix}" for suffix in ("stamp", "json", "log"))
    report = {"paper": spec.paper, "name": spec.name, "seed": spec.seed, "parameters": spec.grid_point,
              "log": str(log_file)}
    with open(folder / f"{spec.paper}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ledger.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
            return dict(report, status="skipped", seconds=0.0)
        session, failed_file = os.environ.get(SESSION_VARIABLE), folder / f"{spec.paper}.failed-stamp"
        if session and failed_file.exists() and failed_file.read_text() == f"{session} {stamp}":
            return dict(report, status="failed", seconds=0.0, returncode=None)  # its log is the failed run's
        stamp_file.unlink(missing_ok=True)  # a stale stamp must not vouch for a result of another run
        start = time.perf_counter()
        with open(log_file, "w") as log:
            # a session of its own, so that a timeout kills papermill's kernel with it
            process = subprocess.Popen(command(spec, folder), stdout=log, stderr=subprocess.STDOUT,
                                       env=run_environment(spec), cwd=P.REPO_ROOT, start_new_session=True)
            try:
                returncode = process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill(process)
                log.write(f"\nkilled after {timeout_s:.0f} s (the sweep's per-run timeout)\n")
                return dict(report, status="timeout", seconds=time.perf_counter() - start)
            except BaseException:  # the caller is stopping (KeyboardInterrupt, a test's timeout): so does the run
                _kill(process)
                raise
        seconds = time.perf_counter() - start
        if returncode != 0 or not ledger.exists():
            if session:
                failed_file.write_text(f"{session} {stamp}")
            return dict(report, status="failed", seconds=seconds, returncode=returncode)
        if restamp is not None and restamp(spec) != stamp:
            return dict(report, status="changed", seconds=seconds)
        stamp_file.write_text(stamp)
        return dict(report, status="done", seconds=seconds)


def _kill(process) -> None:
    try:
        os.killpg(process.pid, 9)
    except ProcessLookupError:
        pass
    process.wait()


def cluster_shape(runs: int, cores: int | None = None, workers: int | None = None,
                  threads: int | None = None) -> tuple[int, int]:
    """(workers, threads per worker) with workers x threads <= cores unless both are given."""
    cores = cores or len(os.sched_getaffinity(0))
    if workers is None and threads is None:
        workers = max(1, min(runs, cores))
    if workers is None:
        workers = max(1, cores // threads)
    if threads is None:
        threads = max(1, cores // workers)
    if workers < 1 or threads < 1:
        raise P.ParameterError("--workers and --threads-per-worker must be at least 1")
    return workers, threads


def sweep(runs: list[RunSpec], out_dir: str | os.PathLike, *, workers: int | None = None,
          scheduler: str | None = None, timeout_s: float = RUN_TIMEOUT_S,
          command=run_command, stamp=run_stamp, progress: bool = True) -> list[dict]:
    """Execute ``runs`` on Dask and return one report per run (see :func:`execute`), each with its own
    thread count (``RunSpec.threads``; the local cluster runs as many at once as the cores hold).
    ``command`` and ``stamp`` give a run's command line and its result's stamp (tests replace them)."""
    from distributed import Client, LocalCluster, as_completed
    from tqdm.auto import tqdm

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    workers, _ = cluster_shape(len(runs), workers=workers, threads=max((spec.threads for spec in runs), default=1))
    if scheduler:
        client, cluster = Client(scheduler), None
    else:
        # each task only waits on its subprocess, so worker threads suffice; the runs are processes
        cluster = LocalCluster(n_workers=1, threads_per_worker=workers, processes=False,
                               dashboard_address=":0")  # any free port: sweeps side by side must not collide
        client = Client(cluster)
    reports = []
    try:
        futures = {client.submit(execute, spec, str(out_dir), stamp(spec), timeout_s, command, stamp,
                                 pure=False): spec for spec in runs}
        bar = tqdm(total=len(runs), unit="run", disable=not progress, file=sys.stderr)
        for future in as_completed(futures):
            reports.append(future.result())
            failed = sum(r["status"] in UNFINISHED for r in reports)
            bar.set_postfix(done=len(reports) - failed, failed=failed, running=min(workers, len(runs) - len(reports)))
            bar.update()
        bar.close()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    # in the order of ``runs``; a run is its paper and its folder (the book's folders hold every chapter)
    order = {(spec.paper, spec.name): i for i, spec in enumerate(runs)}
    return sorted(reports, key=lambda r: order[r["paper"], r["name"]])


# --- the aggregate ------------------------------------------------------------------

DECIDED = (REPRODUCED, NOT_REPRODUCED, NOT_DISCRIMINATING, NO_NULL, ASSUMPTION_NOT_MET)


AGGREGATE_WORDS = {"prediction": ("reproduced", "not reproduced"), "bound": ("holds", "fails"),
                   "consistency": ("passes", "fails")}


def aggregate_verdict(counts: dict, kind: str = "prediction") -> str:
    """The verdict of a claim over seeds, inconclusive runs kept apart:
    ``reproduced in every seed`` when every decided run reproduced it, ``reproduced in most
    seeds`` when more than half did, ``assumption not met in every seed`` when no decided run
    met it; when every decided run passed its check but at most half discriminated, ``not discriminating in
    every seed``, ``no null or control`` or ``passes, not discriminating in most seeds``; ``not reproduced``
    otherwise, and ``inconclusive in every seed`` when no run decided
    (a bound ``holds`` or ``fails``, a consistency check ``passes`` or ``fails``)."""
    success, failure = AGGREGATE_WORDS[kind]
    decided = sum(counts.get(v, 0) for v in DECIDED)
    reproduced = counts.get(REPRODUCED, 0)
    if decided == 0:
        return "inconclusive in every seed"
    if reproduced == decided:
        return f"{success} in every seed"
    if 2 * reproduced > decided:
        return f"{success} in most seeds"
    if counts.get(ASSUMPTION_NOT_MET, 0) == decided:
        return "assumption not met in every seed"
    if counts.get(NOT_REPRODUCED, 0) == 0 and counts.get(ASSUMPTION_NOT_MET, 0) == 0:
        # every decided run passed its check, but too few of them discriminated
        if counts.get(NOT_DISCRIMINATING, 0) == decided:
            return "not discriminating in every seed"
        if counts.get(NO_NULL, 0) == decided:
            return "no null or control"
        return "passes, not discriminating in most seeds"
    return failure


def summarise(values: list) -> dict | None:
    """Median, range and a percentile-bootstrap interval of the median for real scalars (as
    rliable reports few-run evaluations); None when a value is not a finite real number."""
    import numpy as np
    if not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                         for v in values):
        return None
    data = np.asarray(values, dtype=float)
    summary = {"median": float(np.median(data)), "min": float(data.min()), "max": float(data.max()), "n": len(data)}
    if len(data) >= 2 and np.ptp(data) > 0:
        from scipy.stats import bootstrap
        result = bootstrap((data,), np.median, confidence_level=SUMMARY_CONFIDENCE, method="percentile",
                           n_resamples=2000, rng=np.random.default_rng(0))
        summary["ci"] = [float(result.confidence_interval.low), float(result.confidence_interval.high)]
    else:
        summary["ci"] = [summary["median"], summary["median"]]
    summary["confidence"] = SUMMARY_CONFIDENCE
    return summary


def aggregate_point(ledgers: list[dict]) -> dict:
    """Per claim over the ledgers of one grid point (one per seed)."""
    claims = {}
    for ledger in ledgers:
        for claim in ledger["claims"]:
            entry = claims.setdefault(claim["id"], {
                "kind": claim["kind"], "source": claim["source"], "statement": claim["statement"],
                "robust": claim["robust"], "predicted": claim["predicted"], "check": claim.get("check"),
                "tolerance": claim.get("tolerance"), "seeds": [], "verdicts": [],
                "measured": [], "robust_failed_seeds": [], "robust_undecided_seeds": []})
            if claim.get("robust"):
                outcome = robust_outcome(claim)
                if outcome != "holds":
                    entry["robust_failed_seeds" if outcome == "fails" else "robust_undecided_seeds"].append(ledger["seed"])
            entry["seeds"].append(ledger["seed"])
            entry["verdicts"].append(claim["verdict"])
            entry["measured"].append(claim["measured"])
    for entry in claims.values():
        counts = {v: entry["verdicts"].count(v) for v in sorted(set(entry["verdicts"]))}
        decided = sum(counts.get(v, 0) for v in DECIDED)
        entry.update(counts=counts, runs=len(entry["verdicts"]), missing=len(ledgers) - len(entry["verdicts"]),
                     summary=summarise(entry["measured"]),
                     # the fraction of decided runs whose check passed, whether or not its null discriminated
                     pass_fraction=(sum(counts.get(v, 0) for v in (REPRODUCED, NOT_DISCRIMINATING, NO_NULL)) / decided)
                     if decided else None,
                     inconclusive=counts.get(INCONCLUSIVE, 0))
        entry["aggregate"] = (aggregate_verdict(counts, entry["kind"]) if entry["kind"] != "exploratory"
                              else "no verdict")
    return claims


def aggregate(paper: str, preset: str, out_dir: str | os.PathLike, reports: list[dict]) -> dict:
    """Read every finished run's ledger and write ``out_dir/<paper>.sweep.json``."""
    out_dir = Path(out_dir)
    points: dict[str, dict] = {}
    for report in reports:
        key = json.dumps(report["parameters"], sort_keys=True, default=str)
        point = points.setdefault(key, {"parameters": report["parameters"], "ledgers": [], "runs": []})
        ledger_file = out_dir / report["name"] / f"{paper}.json"
        run = dict(report)
        if report["status"] in ("done", "skipped") and ledger_file.exists():
            ledger = validate_ledger(json.loads(ledger_file.read_text()), str(ledger_file))
            point["ledgers"].append(ledger)
            run["provenance"] = {key: ledger.get(key) for key in
                                 ("git", "device", "runtime_s", "versions", "overrides", "seed", "preset")}
        point["runs"].append(run)
    result = {"paper": paper, "preset": preset, "rule": " ".join(aggregate_verdict.__doc__.split()),
              "points": [{"parameters": p["parameters"], "seeds": [l["seed"] for l in p["ledgers"]],
                          "claims": aggregate_point(p["ledgers"]), "runs": p["runs"]} for p in points.values()],
              "failed": [r for r in reports if r["status"] in UNFINISHED]}
    (out_dir / f"{paper}.sweep.json").write_text(json.dumps(result, indent=1, default=str))
    return result


# --- the report -----------------------------------------------------------------------

def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and len(value) <= 4:
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return "-" if value is None else str(value)[:40]


def report_markdown(result: dict) -> str:
    """The aggregate as Markdown: per grid point, one row per claim with its kind, the
    aggregate verdict, the pass fraction over decided seeds, the median measured value with
    its bootstrap interval, and the prediction."""
    lines = [f"# Sweep of `{result['paper']}` at `{result['preset']}`", "",
             f"Aggregate rule: {result['rule']}", ""]
    for point in result["points"]:
        label = ", ".join(f"{k} = {_fmt(v)}" for k, v in point["parameters"].items()) or "the preset's values"
        lines += [f"## {label} (seeds {', '.join(map(str, point['seeds'])) or 'none finished'})", "",
                  "| claim | kind | robust | aggregate | pass fraction | inconclusive | median measured | interval | predicted |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for claim_id, c in point["claims"].items():
            s = c["summary"]
            fraction = "-" if c["pass_fraction"] is None else f"{c['pass_fraction']:.2f}"
            median = _fmt(s["median"]) if s else "-"
            interval = f"[{_fmt(s['ci'][0])}, {_fmt(s['ci'][1])}]" if s else "-"
            lines.append(f"| `{claim_id}` | {c['kind']} | {'yes' if c['robust'] else ''} | {c['aggregate']} | "
                         f"{fraction} | {c['inconclusive']} | {median} | {interval} | {_fmt(c['predicted'])} |")
        lines.append("")
    if result["failed"]:
        lines += ["## Runs that failed to execute", ""]
        lines += [f"- `{r['name']}`: {r['status']}; log: `{r['log']}`" for r in result["failed"]]
    return "\n".join(lines) + "\n"


def accepted_range(claim: dict) -> tuple[float, float] | None:
    """The check's accepted range for the claim's prediction, as the ledger computed it."""
    from paperlib.core.ledger import Check
    spec, predicted = claim.get("check"), claim.get("predicted")
    if not spec:
        return None
    check = Check(spec["kind"], float(spec["rtol"]), float(spec["atol"]), float(spec["low"]), float(spec["high"]))
    real = isinstance(predicted, (int, float)) and not isinstance(predicted, bool) and math.isfinite(predicted)
    if not real and check.kind in ("close", "at_most", "at_least"):
        return None
    low, high = check.bounds(predicted)
    return float(low), float(high)


VERDICT_STYLE = {REPRODUCED: ("o", "tab:green"), NOT_REPRODUCED: ("x", "tab:red"),
                 NOT_DISCRIMINATING: ("^", "tab:olive"), NO_NULL: ("v", "tab:blue"),
                 ASSUMPTION_NOT_MET: ("s", "tab:orange"), INCONCLUSIVE: ("d", "tab:gray")}


def report_figure(result: dict, path: str | os.PathLike) -> Path | None:
    """One panel per prediction with a real-valued measurement: measured against seed (one
    column of points per grid point), each point marked by its verdict, with the predicted
    value (dashed) and the check's accepted range (shaded). None when nothing to draw."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator
    ids = sorted({cid for p in result["points"] for cid, c in p["claims"].items()
                  if c["kind"] == "prediction" and c["summary"]})
    if not ids:
        return None
    cols = min(4, len(ids))
    rows = math.ceil(len(ids) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.4 * rows + 0.6), squeeze=False)
    several = len(result["points"]) > 1
    for ax, cid in zip(axes.flat, ids):
        for index, point in enumerate(result["points"]):
            claim = point["claims"].get(cid)
            if not claim or not claim["summary"]:
                continue
            x = [seed + 0.15 * index if several else seed for seed in claim["seeds"]]
            for xi, yi, verdict in zip(x, claim["measured"], claim["verdicts"]):
                marker, colour = VERDICT_STYLE.get(verdict, ("o", "k"))
                ax.plot(xi, yi, marker=marker, color=colour, ls="none")
            accepted = accepted_range(claim) if index == 0 else None
            if accepted:
                below, above = ax.get_ylim()
                low = accepted[0] if math.isfinite(accepted[0]) else below
                high = accepted[1] if math.isfinite(accepted[1]) else above
                ax.axhspan(low, high, color="tab:blue", alpha=0.12, lw=0)
                if not (math.isfinite(accepted[0]) and math.isfinite(accepted[1])):
                    ax.set_ylim(min(below, low), max(above, high))
            predicted = claim["predicted"]
            if isinstance(predicted, (int, float)) and not isinstance(predicted, bool) and math.isfinite(predicted):
                ax.axhline(predicted, color="k", lw=1, ls="--")
        ax.set_title(cid, fontsize=8)
        ax.set_xlabel("seed" + (" (grid points side by side)" if several else ""), fontsize=7)
        ax.set_ylabel("measured", fontsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(ids):]:
        ax.axis("off")
    handles = [Line2D([], [], marker=m, color=c, ls="none", label=v) for v, (m, c) in VERDICT_STYLE.items()]
    handles += [Line2D([], [], color="k", ls="--", label="predicted"),
                matplotlib.patches.Patch(color="tab:blue", alpha=0.12, label="accepted range")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.suptitle(f"{result['paper']} at {result['preset']}: each prediction's measurement per seed", fontsize=9)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def write_report(sweep_dir: str | os.PathLike) -> list[Path]:
    """Render every ``*.sweep.json`` in ``sweep_dir`` as ``.sweep.md`` and ``.sweep.png``."""
    written = []
    for path in sorted(Path(sweep_dir).glob("*.sweep.json")):
        result = json.loads(path.read_text())
        markdown = path.with_suffix(".md")
        markdown.write_text(report_markdown(result))
        written.append(markdown)
        figure = report_figure(result, path.with_suffix(".png"))
        if figure:
            written.append(figure)
    return written
