"""Shared networks and training: the shallow network of the theory papers and the training-loop base
(divergence guard, progress bar, history)."""
