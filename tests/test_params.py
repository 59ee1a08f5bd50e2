"""Parameters: presets, schema validation, clear errors naming the parameter."""

import pytest

from paperlib import params as P

PAPER = "moderate-overparam"


@pytest.mark.parametrize("paper", P.available_papers())
def test_presets_are_valid_and_complete(paper):
    schema = P.load_schema(paper)
    for preset in P.PRESETS:
        values = P.load_preset(paper, preset)
        assert set(values) == set(schema), preset
        assert P.validate(paper, values)["preset"] == preset


def test_unknown_preset_names_it():
    with pytest.raises(P.ParameterError, match="preset"):
        P.load_preset(PAPER, "huge")


@pytest.mark.parametrize("name, value, fragment", [
    ("phase_widths", [4, -2], "phase_widths"),
    ("phase_widths", [0], "phase_widths"),
    ("phase_trials", "three", "phase_trials"),
    ("phase_trials", 2.5, "phase_trials"),
    ("tol", -1.0, "tol"),
    ("activations", ["tanh"], "activations"),
    ("seed", True, "seed"),
    ("lazy_widths", [], "lazy_widths"),
])
def test_bad_values_name_the_parameter(name, value, fragment):
    values = dict(P.load_preset(PAPER, "smoke"), **{name: value})
    with pytest.raises(P.ParameterError, match=fragment):
        P.validate(PAPER, values)


def test_unknown_parameter_is_rejected():
    values = dict(P.load_preset(PAPER, "smoke"), widht=3)
    with pytest.raises(P.ParameterError, match="widht"):
        P.validate(PAPER, values)


def test_int_accepted_for_float_and_yaml_exponent_string():
    values = dict(P.load_preset(PAPER, "smoke"), tol=1, eta_bar="5e-1")
    checked = P.validate(PAPER, values)
    assert checked["tol"] == 1.0 and checked["eta_bar"] == 0.5


def test_resolve_applies_preset_and_keeps_overrides():
    namespace = dict(P.load_preset(PAPER, "default"), preset="smoke", seed=5)
    resolved = P.resolve(PAPER, namespace)
    smoke = P.load_preset(PAPER, "smoke")
    assert resolved.phase_widths == smoke["phase_widths"]
    assert resolved.seed == 5 and resolved.overrides == {"seed": 5}


def test_resolve_explicit_default_value_is_kept():
    default = P.load_preset(PAPER, "default")
    namespace = dict(default, preset="smoke", explicit_parameters=["lazy_iters"])
    resolved = P.resolve(PAPER, namespace)
    assert resolved.lazy_iters == default["lazy_iters"]
    assert resolved.overrides == {"lazy_iters": default["lazy_iters"]}


def test_resolve_rejects_bad_value_and_preset():
    namespace = dict(P.load_preset(PAPER, "default"), phase_trials=-1)
    with pytest.raises(P.ParameterError, match="phase_trials"):
        P.resolve(PAPER, namespace)
    with pytest.raises(P.ParameterError, match="preset"):
        P.resolve(PAPER, dict(P.load_preset(PAPER, "default"), preset="fast"))


@pytest.mark.parametrize("paper", P.available_papers())
def test_notebook_parameters_cell_equals_default_preset(paper):
    import jupytext
    notebook = jupytext.read(P.NOTEBOOK_DIR / f"{paper}.md")
    cells = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "exactly one cell must be tagged 'parameters'"
    namespace = {}
    exec(cells[0].source, namespace)
    namespace = {k: v for k, v in namespace.items() if not k.startswith("__")}
    assert namespace == P.load_preset(paper, "default")


def test_relations_are_checked_by_resolve():
    namespace = dict(P.load_preset("resnet-beyond-kernels", "default"), input_dim=20)
    with pytest.raises(P.ParameterError, match="input_dim"):
        P.resolve("resnet-beyond-kernels", namespace)
