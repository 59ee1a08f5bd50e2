"""Running a text notebook with papermill, and the content stamp of a chapter's results."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from paperlib.core import params as P
from paperlib.core.ledger import claims_file

PACKAGE_DIR = Path(__file__).resolve().parents[1]


class ExecutionFailed(RuntimeError):
    """The notebook raised, or wrote no ledger. The message says where to look."""


def notebook_path(paper: str) -> Path:
    name = paper[:-3] if paper.endswith(".md") else paper
    name = Path(name).name
    path = P.NOTEBOOK_DIR / f"{name}.md"
    if not path.exists() or name not in P.available_papers():
        raise P.ParameterError(f"notebook {paper!r} is unknown; choose one of {P.available_papers()}")
    return path


def paper_name(paper: str) -> str:
    return notebook_path(paper).stem


def planned_parameters(paper: str, preset: str, overrides: dict) -> dict:
    """The full, validated parameter set of a run: the preset, then the overrides (the same
    :func:`paperlib.core.params.plan` the notebook applies, here before anything starts)."""
    if "preset" in overrides:
        raise P.ParameterError("parameter 'preset' is set with --preset, not with -p")
    return P.plan(paper_name(paper), preset, overrides).values


def run_notebook(paper: str, preset: str = "default", overrides: dict | None = None,
                 out_dir: str | os.PathLike = "runs", log_output: bool = False) -> tuple[Path, Path]:
    """Convert ``notebooks/<paper>.md``, execute it with papermill and leave
    ``out_dir/<paper>.ipynb`` and ``out_dir/<paper>.json`` (the ledger).

    Parameters are validated before anything runs.  The run happens in a
    scratch folder; earlier results in ``out_dir`` are replaced only when the
    new run succeeded (a failed run leaves ``<paper>.failed.ipynb`` beside them).
    """
    import jupytext
    import nbformat
    import papermill

    overrides = dict(overrides or {})
    name = paper_name(paper)
    planned_parameters(name, preset, overrides)  # bad input stops here, before a kernel starts
    parameters = dict(overrides, preset=preset)  # what papermill injects; the notebook applies the preset
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=f".{name}-") as scratch:
        scratch = Path(scratch)
        source = scratch / f"{name}.source.ipynb"
        executed = scratch / f"{name}.ipynb"
        ledger = scratch / f"{name}.{preset}.ledger.json"  # ledger.save()'s name in the working directory
        notebook = jupytext.read(notebook_path(name))
        notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(notebook, source)
        try:
            execute_with_kernel_retry(papermill, source, executed, parameters, log_output, cwd=scratch)
        except Exception as error:  # papermill raises PapermillExecutionError and friends
            if executed.exists():
                shutil.copy(executed, out_dir / f"{name}.failed.ipynb")
            raise ExecutionFailed(f"{name} failed to execute ({type(error).__name__}); "
                                  f"see {out_dir / (name + '.failed.ipynb')}\n{error}") from error
        if not ledger.exists():
            shutil.copy(executed, out_dir / f"{name}.failed.ipynb")
            raise ExecutionFailed(f"{name} ran but wrote no ledger (did it call ledger.save()?)")
        os.replace(executed, out_dir / f"{name}.ipynb")
        os.replace(ledger, out_dir / f"{name}.json")
    stale = out_dir / f"{name}.failed.ipynb"
    if stale.exists():
        stale.unlink()
    return out_dir / f"{name}.ipynb", out_dir / f"{name}.json"


KERNEL_START_FAILURES = ("Kernel died before replying to kernel_info", "Address already in use")


def execute_with_kernel_retry(papermill, source: Path, executed: Path, parameters: dict, log_output: bool,
                              attempts: int = 3, cwd: Path | None = None) -> None:
    """papermill.execute_notebook, tried again when the kernel fails to start: kernels started
    at the same moment (a sweep) can race for the same ZMQ port. No cell has run by then, so
    trying again cannot change a result."""
    import random
    import time
    for attempt in range(attempts):
        try:
            papermill.execute_notebook(str(source), str(executed), parameters=parameters,
                                       cwd=str(cwd or P.NOTEBOOK_DIR), kernel_name="python3",
                                       progress_bar=False, log_output=log_output)
            return
        except Exception as error:  # papermill and jupyter_client raise RuntimeError and zmq errors
            started = executed.exists() and any(
                cell.get("execution_count") for cell in json.loads(executed.read_text()).get("cells", []))
            if attempt == attempts - 1 or started or not any(m in str(error) for m in KERNEL_START_FAILURES):
                raise
            print(f"kernel failed to start ({error}); trying again", flush=True)
            time.sleep(1 + 2 * random.random())


def content_stamp(paper: str, preset: str) -> str:
    """A hash of everything a chapter's results depend on: the notebook, its presets and schema,
    its paper's claims.yaml, the paperlib modules it imports (directly or through other modules), the runner that executes
    it and the pinned requirements. A change to a module the chapter never imports does not
    re-execute it. (Jupyter Book's own cache looks at the notebook's code cells only.)"""
    digest = hashlib.sha256(preset.encode())
    files = [notebook_path(paper)] + sorted((P.PRESET_DIR / paper).glob("*.yaml"))
    files += stamp_modules(paper) + [claims_file(paper, PACKAGE_DIR), P.REPO_ROOT / "requirements.txt"]
    for path in files:
        if path.exists():
            digest.update(str(path.relative_to(P.REPO_ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def stamp_modules(paper: str) -> list[Path]:
    """The paperlib source files a chapter's run depends on: the closure of the notebook's
    ``paperlib`` imports over the modules' own imports, with the package's ``__init__`` files, the runner
    (parameter injection), the CLI and the sweep (a spec's command line) included."""
    import jupytext
    notebook = jupytext.read(notebook_path(paper))
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    # with what turns a run's spec into its command and parameters (the CLI, the sweep) and injects them
    todo = list(_paperlib_imports(_parse(code), package="")) + ["paperlib.core.runner", "paperlib.core.params",
                                                               "paperlib.core.cli", "paperlib.core.sweep"]
    seen: dict[str, Path] = {}
    while todo:
        module = todo.pop()
        path = _module_file(module)
        if path is None or module in seen:
            continue
        seen[module] = path
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        todo.extend(_paperlib_imports(_parse(path.read_text()), package))
        parts = module.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parent packages run first
    return sorted(set(seen.values()))


def _parse(source: str):
    from paperlib.core.pysource import parse
    return parse(source, drop_magics=True)


def _paperlib_imports(tree, package: str) -> set[str]:
    """Module names (``paperlib.x.y``) imported in ``tree``; relative imports resolve against
    ``package``. ``from M import name`` counts ``M.name`` too, which is kept only if it is a module."""
    import ast
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "paperlib" or name.startswith("paperlib.")}


def _module_file(module: str) -> Path | None:
    """The source file of a paperlib module, or None when ``module`` is not one (an attribute)."""
    relative = Path(*module.split(".")[1:])
    candidates = [PACKAGE_DIR / relative / "__init__.py"]
    if module != "paperlib":
        candidates.append((PACKAGE_DIR / relative).with_suffix(".py"))
    return next((path for path in candidates if path.is_file()), None)
