"""Tolerances for comparing floating-point results.

A tolerance is a stated number of rounding errors at the scale of the quantity,
never one ulp: the last bits depend on which BLAS kernel ran (thread count, CPU
vendor, vector width), the mathematics does not. Every tight bound in tests/ is
written with :func:`rounding` and a comment that says where its factors come from.
"""

import numpy as np

EPS64 = float(np.finfo(np.float64).eps)  # 2.22e-16: one rounding error of float64, relative
EPS32 = float(np.finfo(np.float32).eps)  # 1.19e-07: one rounding error of float32, relative


def rounding(scale: float = 1.0, terms: int = 1, factor: float = 8.0, eps: float = EPS64) -> float:
    """An absolute tolerance of ``factor * terms * eps * scale``.

    - ``scale``: the size of the quantity, or of the largest term that went into it
      (a norm, the largest entry, ``cond * |x|`` for a solve);
    - ``terms``: how many rounded operations accumulate (the length of a sum or a dot
      product: the worst-case error of a sum of n terms grows like n eps);
    - ``factor``: the slack for a handful of further operations (8 unless a comment
      says why another number is right).
    """
    return factor * max(1, int(terms)) * eps * abs(float(scale))
