"""The command line: bad input stops at once, names the parameter, and never
overwrites an earlier result; `list` names notebooks and parameters."""

import subprocess
import sys

import pytest

from paperlib.core import params as P
from paperlib.core.cli import main


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "paperlib", *args], capture_output=True, text=True,
                          cwd=P.REPO_ROOT, timeout=60)


def test_list_names_notebooks_and_parameters():
    out = run_cli("list")
    assert out.returncode == 0
    assert "moderate-overparam" in out.stdout and "phase_widths" in out.stdout


@pytest.mark.parametrize("args, fragment", [
    (["--preset", "huge"], "preset"),
    (["-p", "phase_widths", "[4, -2]"], "phase_widths"),
    (["-p", "phase_seeds", "many"], "phase_seeds"),
    (["-p", "widht", "3"], "widht"),
    (["-p", "tol", "0"], "tol"),
    (["-p", "preset", "full"], "preset"),
])
def test_bad_input_exits_with_message(tmp_path, capsys, args, fragment):
    previous = tmp_path / "moderate-overparam.json"
    previous.write_text("earlier good result")
    code = main(["run", "moderate-overparam", "--out", str(tmp_path), *args])
    err = capsys.readouterr().err
    assert code == 2 and fragment in err
    assert previous.read_text() == "earlier good result"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["moderate-overparam.json"]


def test_unknown_notebook(capsys):
    assert main(["run", "no-such-paper", "--preset", "smoke"]) == 2
    assert "no-such-paper" in capsys.readouterr().err


def test_failed_execution_keeps_previous_result(tmp_path, monkeypatch, capsys):
    """A notebook that raises exits 1 and leaves the earlier results alone."""
    import paperlib.core.runner as runner

    def explode(*args, **kwargs):
        raise RuntimeError("cell failed")

    monkeypatch.setattr("papermill.execute_notebook", explode)
    previous = tmp_path / "moderate-overparam.ipynb"
    previous.write_text("earlier good notebook")
    code = main(["run", "moderate-overparam", "--preset", "smoke", "--out", str(tmp_path)])
    assert code == 1 and "failed to execute" in capsys.readouterr().err
    assert previous.read_text() == "earlier good notebook"
    assert runner.paper_name("moderate-overparam.md") == "moderate-overparam"


@pytest.mark.parametrize("args, fragment", [
    (["-p", "input_dim", "20"], "input_dim"),
    (["-p", "fig4_widths", "[201]"], "fig4_widths"),
    (["-p", "target", "shifted"], "target"),
])
def test_cross_parameter_relations_stop_the_run(tmp_path, capsys, args, fragment):
    code = main(["run", "resnet-beyond-kernels", "--preset", "smoke", "--out", str(tmp_path), *args])
    assert code == 2 and fragment in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_a_kernel_that_fails_to_start_is_started_again_but_a_failing_cell_is_not(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from paperlib.core import runner
    monkeypatch.setattr("time.sleep", lambda seconds: None)
    calls = []

    def flaky(source, executed, **kwargs):
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("Kernel died before replying to kernel_info")

    runner.execute_with_kernel_retry(SimpleNamespace(execute_notebook=flaky), tmp_path / "s.ipynb",
                                     tmp_path / "e.ipynb", {}, False)
    assert len(calls) == 3

    def cell_fails(source, executed, **kwargs):
        calls.append(1)
        raise RuntimeError("ZeroDivisionError in cell 7")

    calls.clear()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        runner.execute_with_kernel_retry(SimpleNamespace(execute_notebook=cell_fails), tmp_path / "s.ipynb",
                                         tmp_path / "e.ipynb", {}, False)
    assert len(calls) == 1


def test_a_chapter_stamp_covers_the_modules_it_imports_and_no_others(tmp_path, monkeypatch):
    import shutil
    from paperlib.core import runner
    names = lambda paper: {path.relative_to(runner.PACKAGE_DIR).as_posix() for path in runner.stamp_modules(paper)}
    bottleneck, resnet = names("bottleneck"), names("resnet-beyond-kernels")
    # the notebook's imports, the modules they import, the package __init__ and the runner
    own = {"papers/bottleneck/deepfc.py", "papers/bottleneck/repcost.py", "papers/bottleneck/__init__.py"}
    other = {"papers/resnet_beyond_kernels/hiernet.py", "papers/resnet_beyond_kernels/hypercube.py"}
    assert own | {"data/synthetic.py", "core/seeding.py", "core/ledger.py", "__init__.py", "core/runner.py"} <= bottleneck
    assert other <= resnet
    assert not (other | {"maths/kernels.py", "data/digits.py"}) & bottleneck
    assert not own & resnet
    # editing another paper's module leaves the stamp alone; editing an imported one changes it
    package, notebooks = tmp_path / "paperlib", P.NOTEBOOK_DIR
    shutil.copytree(runner.PACKAGE_DIR, package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(runner, "PACKAGE_DIR", package)
    monkeypatch.setattr(P, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(P, "NOTEBOOK_DIR", tmp_path / "notebooks")
    monkeypatch.setattr(P, "PRESET_DIR", tmp_path / "notebooks" / "presets")
    shutil.copytree(notebooks, tmp_path / "notebooks",
                    ignore=shutil.ignore_patterns("*.ipynb"))
    before = runner.content_stamp("bottleneck", "smoke")
    hiernet = package / "papers" / "resnet_beyond_kernels" / "hiernet.py"
    hiernet.write_text(hiernet.read_text() + "\n# edit\n")
    assert runner.content_stamp("bottleneck", "smoke") == before
    claims = package / "papers" / "resnet_beyond_kernels" / "claims.yaml"
    claims.write_text(claims.read_text() + "\n# edit\n")
    assert runner.content_stamp("bottleneck", "smoke") == before
    claims = package / "papers" / "bottleneck" / "claims.yaml"  # what the chapter's claims say
    claims.write_text(claims.read_text() + "\n# edit\n")
    assert runner.content_stamp("bottleneck", "smoke") != before
    before = runner.content_stamp("bottleneck", "smoke")
    seeding = package / "core" / "seeding.py"
    seeding.write_text(seeding.read_text() + "\n# edit\n")
    assert runner.content_stamp("bottleneck", "smoke") != before
