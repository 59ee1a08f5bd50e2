"""The ASCII maths of statements and reasons, typeset for a reader."""

from paperlib.core.ledger import plain
from paperlib.core.typeset import maths, parameter_names


def test_greek_words_operators_norms_and_powers_are_typeset():
    assert maths("lambda_min(J0 J0^T) >= ||v||^2 lambda / 2") == "λ_min(J0 J0ᵀ) ≥ ‖v‖² λ / 2"
    assert maths("mu = 1/sqrt(2 pi), mu~ = 1/2, |W_0 x_i| <= m") == "μ = 1/√(2 π), μ̃ = 1/2, |W₀ x_i| ≤ m"
    assert maths("||v||_inf, sqrt(n)") == "‖v‖_∞, √n"


def test_words_that_contain_a_greek_name_are_left_alone():
    for text in ("alphabet", "metadata", "pin", "tautology", "2^20", "x^2.5"):
        assert maths(text) == text


def test_parameter_names_code_spans_and_templates_are_left_alone():
    assert {"eta_bar", "weight_decay"} <= parameter_names()
    assert maths("eta_bar = 1 and eta = 2") == "eta_bar = 1 and η = 2"
    assert maths("`lambda_min` and {check.low} <= lambda") == "`lambda_min` and {check.low} ≤ λ"


def test_plain_typesets_then_escapes_markdown():
    assert plain("sigma_min^2 of k*") == r"σ\_min² of k\*"
