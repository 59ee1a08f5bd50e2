"""The chapter's study object where it decides something itself (the notebook tests compare the whole
ledger with the reference)."""

from types import SimpleNamespace

from paperlib.papers.resnet_beyond_kernels import experiments as ex


def test_labels_name_the_trained_layers():
    assert ex.label_of("3resnet", True) == "3resnet(all)" and ex.label_of("3resnet", False) == "3resnet(hidden)"


def test_hermite_constants_match_quadrature_and_vanish_for_even_orders():
    herm = ex.Study.hermite_constants()
    assert max(herm.quad_errors) < 1e-6
    assert len(herm.margins) == len(herm.margins_shifted) == 5          # odd i <= 9
    assert all(m >= 1 for m in herm.margins_shifted)                   # (i-2)!!/4 is a valid lower bound


def test_sign_flips_worst_case_bounds_random_perturbations():
    study = ex.Study.__new__(ex.Study)                                   # only the shared stream is needed
    study.P = SimpleNamespace(sign_flip_widths=[2000], sign_flip_deltas=[0.1, 0.3])
    from paperlib.core.seeding import generator
    study.gen = generator(0, "lemmas")
    flips = study.sign_flips()
    assert flips.random_ok
    assert set(flips.judged) == {(2000, 0.1), (2000, 0.3)}             # m δ^(2/3) >= 200 for both
    assert all(1.0 < r < 1.5 for r in flips.ratios.values())            # near 1.2407
