"""paperlib: the support library behind the executable reproductions in this book.

The notebooks read like papers; the machinery they share lives here, as ordinary
modules with unit tests:

- ``params``    : presets, parameter schemas and validation (bad input stops at once)
- ``seeding``   : one call that seeds random, numpy and torch, deterministically
- ``devices``   : CUDA when present, else CPU
- ``data``      : synthetic data generators from the papers' own models
- ``activations``: activation functions and their Gaussian/Hermite constants
- ``kernels``   : closed-form neural-network kernels and their Monte Carlo checks
- ``linalg``    : Jacobian Gram matrices and Khatri-Rao spectra without forming big matrices
- ``models``    : the shallow network of the theory papers
- ``training``  : full-batch GD, SGD and the batched phase-diagram trainer
- ``multiclass``: the multiclass theory network, its Jacobian Gram, linearized dynamics, projections
- ``deepnet``   : a ResNet without BatchNorm on offline digits, SGD with residual logging
- ``spectral``  : matrix-free Jacobian spectra (Lanczos on jvp/vjp), SLQ densities
- ``stats``     : slopes, rates and threshold crossings
- ``overparam`` : the predictions of Oymak & Soltanolkotabi (2019)
- ``ledger``    : the claims ledger; verdicts are computed here, never written by hand
- ``plotting``  : the shared style and the prediction-against-measurement plot
- ``cli``       : ``python -m paperlib run|list``
"""

__version__ = "0.1.0"
