"""``python -m paperlib new``: a new chapter that runs, records its claim and flips under its control."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paperlib.core import params as P

@pytest.mark.notebook
@pytest.mark.check
@pytest.mark.run_seconds(50.0)  # two runs of the new chapter and its unit tests
def test_a_new_chapter_runs_and_its_control_flips_its_claim(tmp_path):
    root = tmp_path / "repo"
    for folder in ("paperlib", "notebooks"):
        shutil.copytree(P.REPO_ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__", "*.ipynb"))
    shutil.copy(P.REPO_ROOT / "_toc.yml", root / "_toc.yml")
    shutil.copy(P.REPO_ROOT / "requirements.txt", root / "requirements.txt")
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1")
    run = lambda *args: subprocess.run([sys.executable, "-m", "paperlib", *args], cwd=root, env=env,
                                       capture_output=True, text=True)
    made = run("new", "gd-demo", "--title", "A demo chapter")
    assert made.returncode == 0, made.stderr
    assert "book/chapters/gd-demo.ipynb" in (root / "_toc.yml").read_text()
    assert run("new", "gd-demo").returncode == 2                      # never overwrites
    assert "use lower-case words" in run("new", "Bad_Slug").stderr
    for name, overrides in (("plain", []), ("control", ["-p", "step_fraction", "1.2"])):
        done = run("run", "gd-demo", "--preset", "smoke", "--out", str(tmp_path / name), *overrides)
        assert done.returncode == 0, done.stderr[-2000:]
    verdicts = {name: {c["id"]: c["verdict"] for c in json.loads((tmp_path / name / "gd-demo.json").read_text())["claims"]}
                for name in ("plain", "control")}
    assert verdicts["plain"] == {"gd-contraction-rate": "reproduced", "spectrum-positive": "reproduced"}
    assert verdicts["control"]["gd-contraction-rate"] == "not reproduced"
    unit = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(root / "tests" / "papers" / "gd_demo")], cwd=root, env=env, capture_output=True, text=True)
    assert unit.returncode == 0, unit.stdout[-2000:]


def test_the_reproduce_box_gives_commands_that_carry_every_override():
    from paperlib.core.chapter import reproduce_commands, reproduce_markdown
    run, papermill, sweep = reproduce_commands("manifold-lsh", "default", 3, {"seed": 3, "mlp_widths": [2, 4]})
    assert run == "python -m paperlib run manifold-lsh --preset default -p seed 3 -p mlp_widths '[2, 4]'"
    assert papermill.endswith("-p preset default -p seed 3 -y 'mlp_widths: [2, 4]'")
    assert sweep == "python -m paperlib sweep manifold-lsh --preset default --seeds 0-2 -p mlp_widths '[2, 4]'"
    box = reproduce_markdown("manifold-lsh", "default", 3, {"seed": 3, "mlp_widths": [2, 4]}, "cpu")
    assert box.startswith(":::{admonition} Reproduce this page") and "overriding `mlp_widths`" in box
