"""Shared mathematics: activations and their Gaussian constants, closed-form kernels, Jacobian Gram
matrices and spectra without big matrices, and small statistics."""
