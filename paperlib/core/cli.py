"""Command line: ``python -m paperlib run|sweep|sweep-report|list|book|reference|publish-full|compare|nbval-prepare|new``."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import yaml

from paperlib.core import params as P


def _parse_overrides(pairs: list[list[str]]) -> dict:
    overrides = {}
    for name, text in pairs or []:
        try:
            overrides[name] = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise P.ParameterError(f"parameter {name!r}: cannot read {text!r} as YAML ({error})") from None
    return overrides


def cmd_run(args) -> int:
    from paperlib.core.runner import run_notebook
    start = time.perf_counter()
    notebook, ledger = run_notebook(args.notebook, args.preset, _parse_overrides(args.param), args.out,
                                    log_output=args.log_output)
    from paperlib.core.ledger import headline, load
    data = load(ledger)
    print(f"executed {notebook} in {time.perf_counter() - start:.1f} s")
    print(f"ledger   {ledger}: {headline(data['claims'])}")
    return 0


def cmd_publish_full(args) -> int:
    from paperlib.core import published
    from paperlib.core.runner import paper_name
    target = published.publish(paper_name(args.notebook), args.run_dir, args.conditions)
    print(f"published: {target.parent} (provenance {target.name})")
    return 0


def cmd_sweep(args) -> int:
    from paperlib.core import sweep as S
    from paperlib.core.runner import paper_name
    paper = paper_name(args.notebook)
    grid = _parse_overrides(args.grid)
    runs = S.plan(paper, args.preset, S.parse_seeds(args.seeds), _parse_overrides(args.param), grid)
    if args.timeout <= 0:
        raise P.ParameterError(f"--timeout must be positive, got {args.timeout}")
    out = Path(args.out or f"sweeps/{paper}-{args.preset}")
    workers, threads = S.cluster_shape(len(runs), workers=args.workers, threads=args.threads_per_worker)
    runs = [replace(spec, threads=threads) for spec in runs]
    print(f"{len(runs)} run(s) of {paper} at {args.preset} in {out}: "
          f"{'scheduler ' + args.scheduler if args.scheduler else f'{workers} worker(s)'} x {threads} thread(s)")
    reports = S.sweep(runs, out, workers=workers, scheduler=args.scheduler, timeout_s=args.timeout)
    result = S.aggregate(paper, args.preset, out, reports)
    skipped = sum(r["status"] == "skipped" for r in reports)
    print(f"{len(reports) - len(result['failed'])} run(s) finished ({skipped} reused), "
          f"{len(result['failed'])} failed; aggregate in {out / (paper + '.sweep.json')}")
    for failure in result["failed"]:
        print(f"  {failure['status']}: {failure['name']} (log: {failure['log']})", file=sys.stderr)
    return 1 if result["failed"] else 0


def cmd_sweep_report(args) -> int:
    from paperlib.core.sweep import write_report
    written = write_report(args.sweep_dir)
    if not written:
        print(f"error: no *.sweep.json in {args.sweep_dir}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    return 0


def cmd_list(args) -> int:
    for paper in P.available_papers():
        schema = P.load_schema(paper)
        default = P.load_preset(paper, "default")
        print(f"{paper}  (notebooks/{paper}.md; presets: {', '.join(P.PRESETS)})")
        for name, spec in schema.items():
            print(f"  {name:<22} {spec['type']:<11} default {default.get(name)!r:<28} {spec.get('help', '')}")
    return 0


def cmd_book(args) -> int:
    from paperlib.core.book import build_chapters
    seeds = None
    if args.seeds:
        from paperlib.core.sweep import parse_seeds
        seeds = parse_seeds(args.seeds)
    ledgers = build_chapters(args.preset, args.runs, seeds=seeds,
                             workers=args.workers, threads=args.threads_per_worker)
    print(f"{len(ledgers)} chapter{'s' if len(ledgers) != 1 else ''} ready in book/chapters at preset {args.preset!r}")
    return 0


def cmd_compare(args) -> int:
    from paperlib.core.ledger import comparison_text, compare, load
    a, b = load(args.ledger_a), load(args.ledger_b)
    print(comparison_text(a, b, args.ledger_a, args.ledger_b, fields=args.fields))
    return 1 if args.require_identical and not compare(a, b)["identical"] else 0


def cmd_reference(args) -> int:
    import shutil
    from paperlib.core import store
    from paperlib.core.book import REFERENCE_DIR
    from paperlib.core.devices import has_avx512
    # a CPU with AVX-512 computes the references as one without it would (AVX2 only, which changes nothing on a CPU
    # without it), so that every machine makes the same references; `make test`'s run on an AVX-512 CPU then
    # compares its own kernels with them
    isa = {"auto": "avx2" if has_avx512() else "", "avx2": "avx2", "native": ""}[args.isa]
    for paper in args.notebooks or P.available_papers():
        # the smoke run at seed 0 and one thread that `make test` compares with the reference, taken from the
        # run store (executed now if the store has no current one); the ledger stays beside the notebook
        run = store.run(paper, "smoke", 0, threads=1, isa=isa)
        notebook, ledger = REFERENCE_DIR / f"{paper}.ipynb", REFERENCE_DIR / f"{paper}.json"
        shutil.copy(run.ledger_file, ledger)
        shutil.copy(run.notebook, notebook)
        strip_images(notebook)  # images are never compared; keep the committed reference small
        print(f"regenerated {notebook} and {ledger} from {run.folder} "
              f"({'executed now' if run.executed else 'reused from the run store'})")
    return 0


def cmd_new(args) -> int:
    from paperlib.core.template import create_chapter
    for path in create_chapter(args.slug, args.title or args.slug.replace("-", " ").capitalize()):
        print(f"wrote {path.relative_to(P.REPO_ROOT)}")
    print(f"next: python -m paperlib run {args.slug} --preset smoke, then python -m paperlib reference {args.slug} "
          "(CONTRIBUTING.md walks through the rest)")
    return 0


def strip_images(notebook_file) -> None:
    import nbformat
    notebook = nbformat.read(notebook_file, as_version=4)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            for mime in [m for m in output.get("data", {}) if m.startswith("image/")]:
                del output["data"][mime]
    nbformat.write(notebook, notebook_file)


def cmd_nbval_prepare(args) -> int:
    from paperlib.core.book import prepare_nbval
    for paper in args.notebooks or P.available_papers():
        print(f"prepared {prepare_nbval(paper, args.out)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m paperlib", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="execute a notebook with papermill at a preset")
    run.add_argument("notebook", help="notebook name, e.g. moderate-overparam")
    run.add_argument("--preset", default="default", help="smoke, default or full")
    run.add_argument("-p", "--param", nargs=2, action="append", metavar=("NAME", "VALUE"),
                     help="override a parameter; VALUE is read as YAML, e.g. -p phase_widths '[2, 4]'")
    run.add_argument("--out", default="runs", help="output folder (default: runs)")
    run.add_argument("--log-output", action="store_true", help="stream the notebook's output")
    run.set_defaults(func=cmd_run)

    sweep = sub.add_parser("sweep", help="run a notebook over seeds and a parameter grid on Dask")
    sweep.add_argument("notebook")
    sweep.add_argument("--preset", default="default", help="smoke, default or full")
    sweep.add_argument("--seeds", default="0-2", help="e.g. 0-4 or 0,3,7-8 (default 0-2)")
    sweep.add_argument("-p", "--param", nargs=2, action="append", metavar=("NAME", "VALUE"),
                       help="a parameter fixed for every run (VALUE read as YAML)")
    sweep.add_argument("--grid", nargs=2, action="append", metavar=("NAME", "VALUES"),
                       help="a parameter to sweep: a YAML list, e.g. --grid width '[16, 32]'")
    sweep.add_argument("--workers", type=int, default=None, help="runs at a time (default: fill the cores)")
    sweep.add_argument("--threads-per-worker", type=int, default=None,
                       help="threads of each run (default: cores // workers)")
    sweep.add_argument("--scheduler", default=None, help="address of an existing Dask scheduler")
    sweep.add_argument("--timeout", type=float, default=3600.0, help="seconds before a run is killed")
    sweep.add_argument("--out", default=None, help="output folder (default: sweeps/NOTEBOOK-PRESET)")
    sweep.set_defaults(func=cmd_sweep)

    report = sub.add_parser("sweep-report", help="render a sweep's aggregate as Markdown and a figure")
    report.add_argument("sweep_dir")
    report.set_defaults(func=cmd_sweep_report)

    sub.add_parser("list", help="name the notebooks and their parameters").set_defaults(func=cmd_list)

    book = sub.add_parser("book", help="execute (or reuse) every chapter for the book build")
    book.add_argument("--preset", default="default")
    book.add_argument("--runs", default=None, help="run folder (default: the run store's, _build/runs/PRESET)")
    book.add_argument("--seeds", default=None, help="run every chapter for these seeds too (e.g. 0-2) and "
                                                    "show each claim's verdict over them")
    book.add_argument("--workers", type=int, default=None, help="runs at a time with --seeds")
    book.add_argument("--threads-per-worker", type=int, default=None, help="threads of each run with --seeds")
    book.set_defaults(func=cmd_book)

    ref = sub.add_parser("reference", help="regenerate the committed smoke references (seed 0, one thread)")
    ref.add_argument("notebooks", nargs="*")
    ref.add_argument("--isa", default="auto", choices=["auto", "avx2", "native"],
                     help="auto (default): AVX2 only where the CPU has AVX-512, as a CPU without it computes; "
                          "native: this CPU's own kernels")
    ref.set_defaults(func=cmd_reference)

    publish = sub.add_parser("publish-full", help="commit-ready copy of a finished full run on a GPU into results/full/")
    publish.add_argument("notebook")
    publish.add_argument("run_dir", help="the --out folder of `python -m paperlib run NOTEBOOK --preset full`")
    publish.add_argument("--conditions", default="alone on the GPU",
                         help="how the run was made (alone, or beside which other runs; threads)")
    publish.set_defaults(func=cmd_publish_full)

    compare = sub.add_parser("compare", help="two claims ledgers claim by claim: verdicts that differ, claims in one only")
    compare.add_argument("ledger_a")
    compare.add_argument("ledger_b")
    compare.add_argument("--require-identical", action="store_true",
                         help="exit 1 unless every claim's every field is the same (a change meant to move nothing)")
    compare.add_argument("--fields", action="store_true", help="also list the claims with the same verdict whose "
                                                              "other fields differ, and which fields")
    compare.set_defaults(func=cmd_compare)

    new = sub.add_parser("new", help="scaffold a new chapter: notebook, presets, paper package and test")
    new.add_argument("slug", help="lower-case words joined by hyphens, e.g. lazy-training")
    new.add_argument("--title", default=None, help="the chapter's title")
    new.set_defaults(func=cmd_new)

    prep = sub.add_parser("nbval-prepare", help="merge current inputs with the reference outputs")
    prep.add_argument("notebooks", nargs="*")
    prep.add_argument("--out", default="_build/nbval")
    prep.set_defaults(func=cmd_nbval_prepare)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "preset", None) is not None and args.preset not in P.PRESETS:
        print(f"error: preset must be one of {list(P.PRESETS)}, got {args.preset!r}", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except (P.ParameterError, FileExistsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # execution failures: say so, exit 1
        from paperlib.core.runner import ExecutionFailed
        from paperlib.core.store import RunFailed
        if isinstance(error, (ExecutionFailed, RunFailed)):
            print(f"error: {error}", file=sys.stderr)
            return 1
        raise
