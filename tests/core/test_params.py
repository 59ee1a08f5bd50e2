"""Parameters: presets, schema validation, clear errors naming the parameter."""

import pytest

from paperlib.core import params as P

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
    ("phase_seeds", "three", "phase_seeds"),
    ("phase_seeds", 2.5, "phase_seeds"),
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


def unset(paper=PAPER, **values):
    """A notebook namespace as the parameters cell leaves it (every parameter None), then ``values``."""
    return dict({name: None for name in P.load_schema(paper)}, **dict({"preset": "default"}, **values))


def test_resolve_applies_preset_and_keeps_overrides():
    resolved = P.resolve(PAPER, unset(preset="smoke", seed=5))
    smoke = P.load_preset(PAPER, "smoke")
    assert resolved.phase_widths == smoke["phase_widths"]
    assert resolved.seed == 5 and resolved.overrides == {"seed": 5}
    assert P.resolve(PAPER, unset()).as_dict() == P.validate(PAPER, P.load_preset(PAPER, "default"))


def test_a_value_equal_to_the_default_preset_is_kept_at_another_preset():
    default = P.load_preset(PAPER, "default")
    resolved = P.resolve(PAPER, unset(preset="smoke", lazy_steps=default["lazy_steps"]))
    assert resolved.lazy_steps == default["lazy_steps"]
    assert resolved.overrides == {"lazy_steps": default["lazy_steps"]}


def test_resolve_rejects_bad_value_preset_and_missing_name():
    with pytest.raises(P.ParameterError, match="phase_seeds"):
        P.resolve(PAPER, unset(phase_seeds=-1))
    with pytest.raises(P.ParameterError, match="preset"):
        P.resolve(PAPER, unset(preset="fast"))
    namespace = unset()
    del namespace["tol"]
    with pytest.raises(P.ParameterError, match="'tol' is missing"):
        P.resolve(PAPER, namespace)


def test_runner_and_notebook_plan_the_same_parameters():
    from paperlib.core.runner import planned_parameters
    overrides = {"seed": 4, "phase_seeds": 2}
    assert planned_parameters(PAPER, "smoke", overrides) == P.resolve(PAPER, unset(preset="smoke", **overrides)).values


@pytest.mark.parametrize("paper", P.available_papers())
def test_notebook_parameters_cell_names_every_parameter_unset(paper):
    import jupytext
    notebook = jupytext.read(P.NOTEBOOK_DIR / f"{paper}.md")
    cells = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "exactly one cell must be tagged 'parameters'"
    namespace = {}
    exec(cells[0].source, namespace)
    namespace = {k: v for k, v in namespace.items() if not k.startswith("__")}
    assert list(namespace) == list(P.load_schema(paper)), "the cell lists the schema's parameters in its order"
    assert namespace == dict({name: None for name in namespace}, preset="default")


def test_relations_are_checked_by_resolve():
    namespace = unset("resnet-beyond-kernels", input_dim=20)
    with pytest.raises(P.ParameterError, match="input_dim"):
        P.resolve("resnet-beyond-kernels", namespace)


@pytest.mark.parametrize("paper, overrides, fragment", [
    ("bottleneck", dict(width=2), "'width'"),
    ("bottleneck", dict(depths=[2, 3]), "'depths'"),
    ("bottleneck", dict(depths=[2, 30]), "'depths'"),
    ("bottleneck", dict(sym_width=2), "'sym_width'"),
    ("bottleneck", dict(sym_representation_layer=6), "'sym_representation_layer'"),  # smoke's L = 6 has hidden layers 1-5
    ("jacobian-lowrank", dict(gmm_sigmas=[0.1]), "'gmm_sigmas'"),
    ("jacobian-lowrank", dict(gmm_n_mult=[1, 30]), "'gmm_n_mult'"),
    ("jacobian-lowrank", dict(info_rank=5), "'info_rank'"),
    ("jacobian-lowrank", dict(corruption_levels=[0.5, 1.0]), "'corruption_levels'"),
    ("manifold-lsh", dict(ambient_dim=16, linear_manifolds=True), "'ambient_dim'"),
    ("resnet-beyond-kernels", dict(kernel_max_train=20), "'kernel_max_train'"),
    ("moderate-overparam", dict(sgd_num_samples=60), "'sgd_num_samples'"),  # X*X rank-deficient: a zero SGD step
])
def test_settings_that_would_crash_a_chapter_are_refused_before_it_runs(paper, overrides, fragment):
    with pytest.raises(P.ParameterError, match=fragment):
        P.validate(paper, dict(P.load_preset(paper, "smoke"), **overrides))


def test_a_relation_naming_an_unknown_builtin_is_a_schema_error(tmp_path, monkeypatch):
    paper_dir = tmp_path / PAPER
    paper_dir.mkdir()
    for name in ("schema.yaml", "smoke.yaml"):
        (paper_dir / name).write_text((P.PRESET_DIR / PAPER / name).read_text())
    (paper_dir / "relations.yaml").write_text('- {check: "sum(phase_widths) > 0", message: "never shown"}\n')
    monkeypatch.setattr(P, "PRESET_DIR", tmp_path)
    with pytest.raises(P.ParameterError, match="schema error: relation .* names 'sum'"):
        P.validate(PAPER, P.load_preset(PAPER, "smoke"))


def test_an_old_parameter_name_gets_a_clear_error_everywhere():
    renamed = P.former_names(PAPER)
    assert renamed["max_iters"] == "max_steps"
    with pytest.raises(P.ParameterError, match="'max_iters' of notebook 'moderate-overparam' was renamed to 'max_steps'"):
        P.validate(PAPER, dict(P.load_preset(PAPER, "smoke"), max_iters=10))
    with pytest.raises(P.ParameterError, match="renamed to 'max_steps'"):
        P.resolve(PAPER, dict(unset(), max_iters=10))  # as papermill -p max_iters 10 would leave it
    from paperlib.core.runner import planned_parameters
    with pytest.raises(P.ParameterError, match="renamed to 'phase_seeds'"):
        planned_parameters(PAPER, "smoke", {"phase_trials": 2})


@pytest.mark.parametrize("paper", P.available_papers())
def test_one_vocabulary_across_chapters(paper):
    """Repeat counts end in ``seeds``, step counts in ``steps`` and the L2 penalty is a ``weight_decay``:
    no chapter uses another chapter's synonym (epochs stay epochs: passes over the data)."""
    for name in P.load_schema(paper):
        assert not name.endswith(("_trials", "_iters")) and name not in ("num_seeds", "max_iters", "lam"), name
        assert not name.startswith("lr_") and "lams" not in name, name
