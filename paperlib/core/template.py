"""``python -m paperlib new SLUG``: the files of a new chapter, runnable from the start.

The new chapter has the book's shape (claims tested, setup, theory, parameters, experiments,
prediction against measurement, verdicts, changes to checks, what was difficult, provenance)
and one worked claim to replace: gradient descent on a least-squares problem contracts the
residual by :math:`1-\\eta\\lambda_{\\min}` per step, with a control (a step above
:math:`2/\\lambda_{\\max}`) that must break it. CONTRIBUTING.md walks through the rest.
"""

from __future__ import annotations

import re
from pathlib import Path

from paperlib.core import params as P

SLUG = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


CLAIMS = """\
# What each claim of this chapter says, declared once: its source, statement, kind, whether it
# holds at every seed (robust), a standing note, the paper's own number and a fixed check (its
# threshold quoted by the statement as {check.low}, {check.high}, {check.atol} or {check.rtol}).
# The chapter's cells record the measurement, the prediction and any check that depends on a preset
# parameter or on the run (paperlib.core.ledger.Ledger.record).
# An id or statement with {placeholders} is a template for a family of claims: the cell passes the
# values with fill=dict(...), and a literal brace in a template is doubled ({{±1}}). Claims whose
# statement quotes computed numbers keep their statement in the cell.
gd-contraction-rate:
  source: Theory
  statement: The residual contracts by 1 - eta lambda_min per step (fitted over the second half of the run).
  kind: prediction
  robust: true
spectrum-positive:
  source: Setup
  statement: "X has full column rank: lambda_min(X^T X) > 0."
  kind: consistency
  note: n >= d Gaussian rows have full rank with probability one.
"""


def package_name(slug: str) -> str:
    """``paperlib.papers.<name>`` for a chapter slug: hyphens become underscores."""
    return slug.replace("-", "_")


def create_chapter(slug: str, title: str, root: Path | None = None) -> list[Path]:
    """Write the notebook, its presets, its paper package and its test under ``root`` (the
    repository) and list the chapter in ``_toc.yml``. Refuses to overwrite anything."""
    if not SLUG.match(slug):
        raise P.ParameterError(f"slug {slug!r}: use lower-case words joined by hyphens, e.g. 'lazy-training'")
    root = Path(root or P.REPO_ROOT)
    name = package_name(slug)
    files = {
        root / "notebooks" / f"{slug}.md": NOTEBOOK.format(slug=slug, title=title, name=name),
        root / "notebooks" / "presets" / slug / "schema.yaml": SCHEMA.format(slug=slug),
        root / "notebooks" / "presets" / slug / "smoke.yaml": PRESET.format(preset="smoke", steps=10),
        root / "notebooks" / "presets" / slug / "default.yaml": PRESET.format(preset="default", steps=12),
        root / "notebooks" / "presets" / slug / "full.yaml": PRESET.format(preset="full", steps=12),
        root / "notebooks" / "presets" / slug / "controls.yaml": CONTROLS,
        root / "paperlib" / "papers" / name / "__init__.py": f'"""{title}: this chapter\'s experiments."""\n',
        root / "paperlib" / "papers" / name / "experiments.py": EXPERIMENTS,
        root / "paperlib" / "papers" / name / "claims.yaml": CLAIMS,
        root / "tests" / "papers" / name / f"test_{name}_experiments.py": TEST.format(name=name),
    }
    existing = [path for path in files if path.exists()]
    if existing:
        raise FileExistsError(f"chapter {slug!r} exists already ({existing[0]}); nothing was written")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    toc = root / "_toc.yml"
    if toc.exists():
        text = toc.read_text()
        entries = re.findall(r"(?m)^(\s*)- file: book/chapters/[^\n]+\n", text)
        if entries:
            last = list(re.finditer(r"(?m)^(\s*)- file: book/chapters/[^\n]+\n", text))[-1]
            text = text[:last.end()] + f"{last.group(1)}- file: book/chapters/{slug}.ipynb\n" + text[last.end():]
            toc.write_text(text)
            files[toc] = text
    return list(files)


EXPERIMENTS = '''"""The worked example of a new chapter: gradient descent on least squares. Replace it."""

import torch

from paperlib.core.seeding import generator


def least_squares_problem(num_samples: int, input_dim: int, seed: int):
    """A Gaussian design X (n x d, n >= d) and labels y, float64, from the stream ("problem", n, d)."""
    gen = generator(seed, "problem", num_samples, input_dim)
    X = torch.randn(num_samples, input_dim, generator=gen, dtype=torch.float64) / num_samples ** 0.5
    y = torch.randn(num_samples, generator=gen, dtype=torch.float64)
    return X, y


def gd_residuals(X: torch.Tensor, y: torch.Tensor, lr: float, steps: int) -> torch.Tensor:
    """Norms of the part of the residual in the column space of X along GD from w = 0
    (the rest is constant), steps + 1 values."""
    w = torch.zeros(X.shape[1], dtype=X.dtype)
    Q, _ = torch.linalg.qr(X)
    norms = []
    for _ in range(steps + 1):
        r = X @ w - y
        norms.append(torch.linalg.vector_norm(Q.T @ r))
        w = w - lr * (X.T @ r)
    return torch.stack(norms)
'''

TEST = '''"""Unit tests of the new chapter's experiments, against independent computations."""

import torch

from paperlib.papers.{name}.experiments import gd_residuals, least_squares_problem


def test_gd_reaches_the_least_squares_solution():
    X, y = least_squares_problem(40, 5, seed=0)
    norms = gd_residuals(X, y, lr=0.5, steps=2000)
    assert float(norms[-1]) < 1e-8 * float(norms[0])
'''

SCHEMA = '''# Parameters of notebooks/{slug}.md: type, constraints and meaning.
preset: {{type: str, choices: [smoke, default, full], help: "named preset (smoke, default, full)"}}
seed: {{type: int, min: 0, help: "base seed; every experiment derives its own from it"}}
device: {{type: str, choices: [auto, cpu, cuda], help: "torch device"}}
sections: {{type: "list[str]", nullable: true, unique: true, choices: [gd, summary], needs: {{summary: [gd]}},
           help: "run only these sections and those they use (null: every section)"}}
num_samples: {{type: int, min: 2, help: "rows n of the design"}}
input_dim: {{type: int, min: 1, help: "columns d of the design (d <= n)"}}
step_fraction: {{type: float, exclusive_min: 0.0, help: "the step eta as a fraction of 2 / lambda_max; above 1 is the control"}}
steps: {{type: int, min: 4, max: 30, help: "gradient-descent steps (the residual must stay far above rounding)"}}
rate_rtol: {{type: float, exclusive_min: 0.0, help: "accepted relative error of the measured contraction rate"}}
'''

PRESET = '''preset: {preset}
seed: 0
device: auto
sections: null
num_samples: 200
input_dim: 2
step_fraction: 0.5
steps: {steps}
rate_rtol: 0.01
'''

CONTROLS = '''# Settings where the argument predicts failure. CI runs each at the smoke preset and asserts that
# every claim in `flips` comes out "not reproduced" while every consistency check still passes.
- name: step-above-two-over-lambda-max
  why: "Above eta = 2 / lambda_max the top eigendirection of X^T X grows instead of contracting, so the residual does not contract at rate 1 - eta lambda_min."
  parameters: {step_fraction: 1.2}
  flips: [gd-contraction-rate]
'''

NOTEBOOK = '''---
jupytext:
  formats: md:myst
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# {title}

**Paper.** Authors, *{title}* (year). Add the entry to `book/references.bib` and cite it here.

**Verdicts.** {{glue:md}}`verdict_summary`

<!-- results-table -->

**Claims tested.** This template tests one claim, to be replaced: gradient descent with step
$\\eta<2/\\lambda_{{\\max}}$ on $\\tfrac12\\|Xw-y\\|^2$ contracts the residual's component in the
column space of $X$ by $1-\\eta\\lambda_{{\\min}}(X^TX)$ per step, asymptotically.

## Setup and our deviations from the paper

A Gaussian design with $n$ rows and $d\\le n$ columns, scaled by $1/\\sqrt n$; with $d=2$ and
$\\eta=1/\\lambda_{{\\max}}$ the fast mode dies in one step, so the measured rate is the slow mode's from the
start. Say here what the paper did, what we do instead, and why.

## Theory

The residual's column-space part evolves as $r_{{t+1}}=(I-\\eta XX^T)r_t$ on that space, whose slowest
mode decays at $|1-\\eta\\lambda_{{\\min}}|$ when $\\eta<2/\\lambda_{{\\max}}$ (then every factor has modulus
below one and the smallest eigenvalue's is the largest).

## Parameters

The cell below names every parameter. Each one left `None` takes the value of the preset
named by `preset`; a value set there, or injected with `papermill -p NAME VALUE` or
`python -m paperlib run -p NAME VALUE`, overrides it. `python -m paperlib list` prints each
parameter's meaning.

**The control.** With `step_fraction` above one the step exceeds $2/\\lambda_{{\\max}}$ and the
contraction claim must fail (`presets/{slug}/controls.yaml`).

```{{code-cell}} ipython3
:tags: [parameters, hide-input]

# None: the preset's value. Any value set here overrides the preset.
preset = 'default'
seed = None
device = None
sections = None
num_samples = None
input_dim = None
step_fraction = None
steps = None
rate_rtol = None
```

```{{code-cell}} ipython3
:tags: [hide-input]

import math

import numpy as np
import matplotlib.pyplot as plt
import torch

from paperlib.core import ledger as L
from paperlib.core.chapter import open_chapter
from paperlib.papers.{name}.experiments import gd_residuals, least_squares_problem

chapter = open_chapter("{slug}", globals())
P, ledger, DEVICE, timed = chapter.params, chapter.ledger, chapter.device, chapter.section
```

## 1. Gradient descent on least squares

We compute the predicted rate from the spectrum of $X^TX$, run gradient descent and fit the rate
over the last half of the run.

```{{code-cell}} ipython3
timed("gd")
X, y = least_squares_problem(P.num_samples, P.input_dim, P.seed)
eigenvalues = torch.linalg.eigvalsh(X.T @ X)
lr = P.step_fraction * 2 / float(eigenvalues[-1])
predicted_rate = abs(1 - lr * float(eigenvalues[0]))
norms = gd_residuals(X, y, lr, P.steps).numpy()
half = P.steps // 2
measured_rate = float(np.exp(np.polyfit(np.arange(half, P.steps + 1), np.log(norms[half:]), 1)[0]))
# what each claim says is declared once, in paperlib/papers/{name}/claims.yaml
ledger.record("gd-contraction-rate", measured=measured_rate, predicted=predicted_rate, check=L.close(rtol=P.rate_rtol))
ledger.record("spectrum-positive", measured=float(eigenvalues[0]), predicted=0.0, check=L.at_least())
print(f"eta = {{lr:.3g}}; predicted rate {{predicted_rate:.4f}}, measured {{measured_rate:.4f}}")
```

## 2. Prediction against measurement

```{{code-cell}} ipython3
timed("summary")
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.semilogy(norms, label="measured residual (column space)")
ax.semilogy(norms[0] * predicted_rate ** np.arange(P.steps + 1), "--", label="predicted rate")
ax.set_xlabel("step t")
ax.set_ylabel("residual norm")
ax.legend()
plt.show()
```

The regression check below prints each verdict and a few key numbers, rounded;
CI compares it with the committed smoke reference.

```{{code-cell}} ipython3
:tags: [remove-input, hide-output]

# NBVAL_CHECK_OUTPUT
chapter.regression_check(f"predicted rate {{predicted_rate:.4f}}")
```

## Verdicts

Two folds below hold every claim of the chapter: first the claims whose verdict is not the one the
paper predicts, or that stayed undecided, each with its reason; then every claim with its prediction,
measurement, null and reason.

```{{code-cell}} ipython3
chapter.verdicts()
```

## Changes to checks

Every check, tolerance, statement, kind or scope changed after its result was first seen: what it was,
with the numbers of the run that showed it, what it is now, and why.

```{{code-cell}} ipython3
:tags: [remove-input]

chapter.changes_to_checks()
```

## What was difficult

## Provenance

```{{code-cell}} ipython3
:tags: [remove-input]

chapter.provenance()
```
'''
