"""The chapter's experiment functions: what they decide by themselves (the accuracy gate, the random-labels
control), and that a section's numbers depend only on the seed (the notebook tests compare the whole
ledger with the reference)."""

from types import SimpleNamespace

import torch

from paperlib.papers.manifold_lsh import experiments as ex


def test_accuracy_gate_names_every_generator_below_it():
    runs = {"sin": {"acc_test": 0.99}, "cos": {"acc_test": 0.5}, "log": {"acc_test": 0.8999}}
    assert ex.accuracy_gate(runs, ["sin"], 0.9) == (True, "test accuracy below the gate 0.9 for ")
    ok, why = ex.accuracy_gate(runs, ["sin", "cos", "log"], 0.9)
    assert not ok and why == "test accuracy below the gate 0.9 for cos (0.500), log (0.900)"


def test_random_labels_control_draws_labels_independent_of_the_manifold():
    labels = torch.arange(10).repeat_interleave(50)
    tracks = ex.Tracks(SimpleNamespace(seed=0, random_labels=False), "cpu")
    assert tracks.labels(labels, 10, "x") is labels
    tracks = ex.Tracks(SimpleNamespace(seed=0, random_labels=True), "cpu")
    drawn = tracks.labels(labels, 10, "x")
    assert torch.equal(drawn, tracks.labels(labels, 10, "x"))          # one stream per label
    assert not torch.equal(drawn, tracks.labels(labels, 10, "y"))
    assert (drawn == labels).float().mean() < 0.3                        # chance is 1/10
    assert set(drawn.tolist()) == set(range(10))


def test_lambda_limit_depends_only_on_the_seed():
    P = SimpleNamespace(seed=4, ambient_dim=16, latent_dim=3, theta_scale=1.0, fista_steps=200, limit_width_ratio=4.0)
    facts = SimpleNamespace(m=3, n=5, labels=torch.arange(3).repeat_interleave(5),
                            X=torch.randn(15, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    first, again = ex.lambda_limit(P, facts), ex.lambda_limit(P, facts)
    assert first == again
    assert [lam for lam, _, _ in first] == list(ex.LIMIT_WEIGHT_DECAYS)
    assert all(0 <= variance and 1 <= rank <= 3 for _, variance, rank in first)
