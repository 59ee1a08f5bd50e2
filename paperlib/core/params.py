"""Presets, parameter schemas and validation.

Every notebook ``notebooks/<paper>.md`` has a folder ``notebooks/presets/<paper>/``
holding

- ``schema.yaml``: for every parameter its type and constraints, e.g.
  ``phase_widths: {type: list[int], min: 1, help: ...}``;
- ``smoke.yaml``, ``default.yaml``, ``full.yaml``: papermill parameter files;
- optionally ``relations.yaml``: constraints between parameters, each a Python
  expression over the parameter names and the message to show when it fails,
  e.g. ``- {check: "input_dim == 2 * num_outputs", message: "..."}``.

The notebook's ``parameters`` cell names every parameter of the schema, each set to
``None`` ("the preset's value"; a test checks the names).  The cell after it calls
:func:`resolve` (through :func:`paperlib.core.chapter.open_chapter`), which applies the
preset and keeps every value that was set as an override, so ``papermill -p preset
smoke -p seed 3`` needs no parameter file.  Bad input raises :class:`ParameterError`
naming the parameter, before anything expensive runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import yaml

PRESETS = ("smoke", "default", "full")
REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
PRESET_DIR = NOTEBOOK_DIR / "presets"
REFERENCE_DIR = REPO_ROOT / "tests" / "references"  # the committed smoke references (ledger and notebook)

_SCALAR_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


class ParameterError(ValueError):
    """A parameter has a bad name, type or value. The message names it."""


def available_papers() -> list[str]:
    """The notebooks that have a preset folder, in alphabetical order."""
    return sorted(p.stem for p in NOTEBOOK_DIR.glob("*.md") if (PRESET_DIR / p.stem).is_dir())


def _read_yaml(path: Path) -> dict:
    with open(path) as handle:
        return yaml.safe_load(handle) or {}


def load_schema(paper: str) -> dict:
    """The parameter schema of ``paper``: name -> {type, min, choices, help, ...}."""
    path = PRESET_DIR / paper / "schema.yaml"
    if not path.exists():
        raise ParameterError(f"notebook {paper!r} is unknown; choose one of {available_papers()}")
    return _read_yaml(path)


def former_names(paper: str) -> dict:
    """Old parameter names and the names that replaced them, from the schema's ``formerly`` lists
    (one vocabulary across chapters: a renamed parameter is never silently ignored)."""
    return {old: name for name, spec in load_schema(paper).items() for old in spec.get("formerly", [])}


def check_not_renamed(paper: str, names) -> None:
    renamed = former_names(paper)
    for name in names:
        if name in renamed:
            raise ParameterError(f"parameter {name!r} of notebook {paper!r} was renamed to {renamed[name]!r}")


def load_preset(paper: str, preset: str) -> dict:
    """The parameter values of a named preset (``smoke``, ``default`` or ``full``)."""
    if preset not in PRESETS:
        raise ParameterError(f"preset must be one of {list(PRESETS)}, got {preset!r}")
    return _read_yaml(PRESET_DIR / paper / f"{preset}.yaml")


RELATION_BUILTINS = {"all": all, "any": any, "len": len, "min": min, "max": max, "sorted": sorted, "abs": abs}


def load_relations(paper: str) -> list:
    """The cross-parameter constraints of ``paper`` (an empty list when there are none)."""
    path = PRESET_DIR / paper / "relations.yaml"
    return (_read_yaml(path) or []) if path.exists() else []


def check_relations(paper: str, values: dict) -> None:
    """Raise :class:`ParameterError` with the relation's message when one fails.

    A relation whose parameters are not all in ``values`` is skipped (partial
    validation); a relation naming anything else that is not defined (a parameter
    the schema lacks, a builtin not offered) is a schema error, never skipped. The
    expressions come from the repository's own files."""
    schema = load_schema(paper)
    for relation in load_relations(paper):
        try:
            holds = eval(relation["check"], {"__builtins__": RELATION_BUILTINS}, dict(values))
        except NameError as error:
            if error.name in schema:
                continue
            raise ParameterError(f"schema error: relation {relation['check']!r} of {paper!r} names "
                                 f"{error.name!r}, neither a parameter nor one of {sorted(RELATION_BUILTINS)}") from None
        if not holds:
            raise ParameterError(relation["message"] + f" (check: {relation['check']})")


def check_value(name: str, value, spec: dict):
    """Check one value against its schema entry; return it (ints accepted as floats). ``None`` passes
    where the entry says ``nullable: true`` (``sections``: null runs every section)."""
    if value is None and spec.get("nullable"):
        return None
    type_name = spec["type"]
    if type_name.startswith("list[") and type_name.endswith("]"):
        if not isinstance(value, (list, tuple)):
            raise ParameterError(f"parameter {name!r} must be a list of {type_name[5:-1]}, got {value!r}")
        if len(value) == 0 and not spec.get("allow_empty", False):
            raise ParameterError(f"parameter {name!r} must not be an empty list")
        item_spec = dict(spec, type=type_name[5:-1], nullable=False)  # a list may be null, its items not
        checked = [check_value(f"{name}[{i}]", item, item_spec) for i, item in enumerate(value)]
        if spec.get("unique") and len(set(checked)) != len(checked):
            raise ParameterError(f"parameter {name!r} must not repeat values, got {value!r}")
        return checked
    if type_name not in _SCALAR_TYPES:
        raise ParameterError(f"schema error: parameter {name!r} has unknown type {type_name!r}")
    value = _coerce_scalar(name, value, type_name)
    if "choices" in spec and value not in spec["choices"]:
        raise ParameterError(f"parameter {name!r} must be one of {spec['choices']}, got {value!r}")
    if "min" in spec and value < spec["min"]:
        raise ParameterError(f"parameter {name!r} must be >= {spec['min']}, got {value!r}")
    if "exclusive_min" in spec and value <= spec["exclusive_min"]:
        raise ParameterError(f"parameter {name!r} must be > {spec['exclusive_min']}, got {value!r}")
    if "max" in spec and value > spec["max"]:
        raise ParameterError(f"parameter {name!r} must be <= {spec['max']}, got {value!r}")
    return value


def _coerce_scalar(name, value, type_name):
    expected = _SCALAR_TYPES[type_name]
    if type_name == "float" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if type_name == "float" and isinstance(value, str):
        # YAML 1.1 reads "2.5e-3" as a string; accept it when it is a number.
        try:
            value = float(value)
        except ValueError:
            pass
    if type(value) is not expected:
        raise ParameterError(
            f"parameter {name!r} must be of type {type_name}, got {type(value).__name__} {value!r}")
    if type_name == "float" and not math.isfinite(value):
        raise ParameterError(f"parameter {name!r} must be finite, got {value!r}")
    return value


def validate(paper: str, values: dict, allow_missing: bool = False) -> dict:
    """Validate ``values`` (name -> value) against the schema of ``paper``.

    Unknown names, missing names (unless ``allow_missing``), wrong types and
    out-of-range values raise :class:`ParameterError` naming the parameter.
    """
    schema = load_schema(paper)
    check_not_renamed(paper, values)
    unknown = sorted(set(values) - set(schema))
    if unknown:
        raise ParameterError(
            f"unknown parameter {unknown[0]!r} for notebook {paper!r}; known: {sorted(schema)}")
    missing = sorted(set(schema) - set(values))
    if missing and not allow_missing:
        raise ParameterError(f"parameter {missing[0]!r} of notebook {paper!r} has no value")
    checked = {name: check_value(name, values[name], schema[name]) for name in values}
    if "preset" in checked:
        load_preset(paper, checked["preset"])
    check_relations(paper, checked)
    return checked


@dataclass(frozen=True)
class Params:
    """Validated parameters: attribute access plus the preset they came from."""

    paper: str
    values: dict
    overrides: dict  # parameters whose value differs from the named preset

    def __getattr__(self, name):
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def as_dict(self) -> dict:
        return dict(self.values)


def resolve(paper: str, namespace: dict) -> Params:
    """Validate a notebook's parameters and apply its preset.

    ``namespace`` is the notebook's ``globals()``. In the parameters cell every parameter is
    ``None``, which means "the preset's value"; a value set there, injected by papermill
    (``-p name value``) or by ``python -m paperlib run -p`` overrides the preset. There is no
    other channel: this is the one path by which a value reaches a chapter.
    """
    schema = load_schema(paper)
    check_not_renamed(paper, namespace)  # papermill -p with an old name would otherwise be ignored
    missing = [name for name in schema if name not in namespace]
    if missing:
        raise ParameterError(f"parameter {missing[0]!r} is missing from the notebook's parameters cell")
    preset = namespace["preset"]
    given = {name: namespace[name] for name in schema if name != "preset" and namespace[name] is not None}
    return plan(paper, preset, given)


def plan(paper: str, preset: str, overrides: dict) -> Params:
    """The validated parameters of a run: the preset's values, then ``overrides``. ``overrides``
    in the result holds the parameters whose value differs from the preset's."""
    if "preset" in overrides:
        raise ParameterError("parameter 'preset' is chosen by name, not given as an override")
    check_value("preset", preset, {"type": "str", "choices": list(PRESETS)})
    chosen = validate(paper, dict(load_preset(paper, preset), preset=preset))
    values = validate(paper, dict(chosen, **overrides))
    return Params(paper=paper, values=values,
                  overrides={name: value for name, value in values.items() if value != chosen[name]})
