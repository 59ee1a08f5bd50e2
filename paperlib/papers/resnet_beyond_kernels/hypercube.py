r"""Fourier analysis on the Boolean cube and the hierarchical target of
Allen-Zhu & Li, *What can ResNet learn efficiently, going beyond kernels?*

* **Parities.** On :math:`\{\pm1\}^d` with the uniform measure the parities
  :math:`\chi_S(x)=\prod_{i\in S}x_i` are orthonormal, so squared errors split
  over Walsh coefficients (Parseval, Lemma D.1).
* **Dot-product kernels.** For :math:`K(x,x')=\kappa(\langle x,x'\rangle/d)` every
  parity is an eigenfunction and its eigenvalue depends only on :math:`\ell=|S|`:

  .. math:: \mu_\ell = 2^{-d}\sum_{j=0}^d \kappa(1-2j/d)\,\mathcal K_j(\ell),\qquad
            \mathcal K_j(\ell)=\sum_i(-1)^i\binom{\ell}{i}\binom{d-\ell}{j-i},

  with multiplicity :math:`\binom d\ell`.  The alternating Krawtchouk sums
  cancel to far below float64's resolution (exact zeros come back as 1e-19), so
  they are summed in integers and :math:`\kappa` is evaluated with ``mpmath``.
* **Kernels.**  The ReLU NTK of depth :math:`L` (bias-free, unit-variance
  weights), the Gaussian (RBF) kernel and a polynomial kernel, each written once
  for a small "math library" so the same formula serves torch Gram matrices and
  the exact ``mpmath`` eigenvalues.
* **Eigenlearning.**  The omniscient-risk estimate of kernel ridge regression
  (Bordelon, Canatar & Pehlevan 2020; Simon et al. 2021) turns the :math:`\mu_\ell`
  into a predicted test error at any :math:`N` without a Gram matrix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import mpmath
import numpy as np
import torch
from scipy.optimize import brentq

EXACT_DIGITS = 60

# ------------------------------------------------------------------ sampling


def hypercube(num_samples: int, input_dim: int, generator: torch.Generator, dtype=torch.float64) -> torch.Tensor:
    """``num_samples`` points drawn uniformly from {-1, +1}^input_dim."""
    if num_samples <= 0 or input_dim <= 0:
        raise ValueError(f"num_samples and input_dim must be positive, got {num_samples}, {input_dim}")
    bits = torch.randint(0, 2, (num_samples, input_dim), generator=generator)
    return (2 * bits - 1).to(dtype)


def all_points(input_dim: int, dtype=torch.float64) -> torch.Tensor:
    """Every point of {-1, +1}^d, in the order of the fast Walsh transform
    (row ``n`` has x_i = -1 exactly where bit ``i`` of ``n`` is set)."""
    index = torch.arange(2 ** input_dim)[:, None]
    bits = (index >> torch.arange(input_dim)) & 1
    return (1 - 2 * bits).to(dtype)


def walsh_coefficients(values) -> np.ndarray:
    r"""Walsh coefficients :math:`\hat f(S)=\mathbb E_x[f(x)\chi_S(x)]` of a function
    given on :func:`all_points` (last axis), by the fast Walsh-Hadamard transform.

    Entry ``s`` of the result belongs to the set S of the bits of ``s``.
    """
    a = np.array(values, dtype=float, copy=True)
    lead, n = a.shape[:-1], a.shape[-1]
    if n & (n - 1):
        raise ValueError("the number of values must be a power of two")
    h = 1
    while h < n:  # butterflies on pairs (i, i + h) inside blocks of 2h
        a = a.reshape(*lead, n // (2 * h), 2, h)
        a = np.stack([a[..., 0, :] + a[..., 1, :], a[..., 0, :] - a[..., 1, :]], axis=-2).reshape(*lead, n)
        h *= 2
    return a / n


def subset_sizes(input_dim: int) -> np.ndarray:
    """|S| for each Walsh index 0..2^d-1 (popcount)."""
    index = np.arange(2 ** input_dim)
    return np.array([bin(i).count("1") for i in index])


# ------------------------------------------------------------------ kernels

_TORCH = SimpleNamespace(acos=torch.arccos, sqrt=torch.sqrt, exp=torch.exp, pi=math.pi,
                         clip=lambda t: t.clamp(-1.0, 1.0))
_MPMATH = SimpleNamespace(acos=mpmath.acos, sqrt=mpmath.sqrt, exp=mpmath.exp, pi=mpmath.pi,
                          clip=lambda t: max(min(t, mpmath.mpf(1)), mpmath.mpf(-1)))


def _arccos0(t, lib):
    """kappa_0(t) = (pi - arccos t)/pi = 2 E[1{u>=0} 1{u'>=0}] for unit normals with correlation t."""
    return (lib.pi - lib.acos(t)) / lib.pi


def _arccos1(t, lib):
    """kappa_1(t) = (sqrt(1-t^2) + (pi - arccos t) t)/pi = 2 E[relu(u) relu(u')], so kappa_1(1) = 1."""
    return (lib.sqrt(1 - t * t) + (lib.pi - lib.acos(t)) * t) / lib.pi


def relu_ntk(t, depth: int, lib=_TORCH):
    r"""NTK of a bias-free ReLU network with ``depth`` layers (``depth - 1`` hidden)
    as a function of the input correlation ``t``:
    :math:`\Theta^{(h)}=\Theta^{(h-1)}\kappa_0(\Sigma^{(h-1)})+\kappa_1(\Sigma^{(h-1)})`,
    :math:`\Sigma^{(h)}=\kappa_1(\Sigma^{(h-1)})`, from :math:`\Theta^{(0)}=\Sigma^{(0)}=t`."""
    if depth < 2:
        raise ValueError(f"depth must be at least 2, got {depth}")
    t = lib.clip(t)
    theta, sigma = t, t
    for _ in range(depth - 1):
        theta, sigma = theta * _arccos0(sigma, lib) + _arccos1(sigma, lib), lib.clip(_arccos1(sigma, lib))
    return theta


def rbf(t, input_dim: int, bandwidth: float, lib=_TORCH):
    r"""Gaussian kernel :math:`e^{-\|x-x'\|^2/h}` on the cube, where
    :math:`\|x-x'\|^2=2d(1-t)`; ``bandwidth`` is h/d."""
    return lib.exp(-2 * (1 - t) / bandwidth)


def polynomial(t, degree: int, lib=_TORCH):
    r"""Polynomial kernel :math:`(1+t)^p`."""
    return (1 + t) ** degree


def _on_cube(X: torch.Tensor) -> bool:
    """Every entry is ±1."""
    return bool((X.abs() == 1).all())


@dataclass(frozen=True)
class DotKernel:
    """A named dot-product kernel kappa(t) with t = <x, x'>/d."""

    name: str
    label: str
    formula: Callable  # formula(t, lib)

    def __call__(self, t):
        return self.formula(t, _TORCH)

    def exact(self, t):
        return self.formula(mpmath.mpf(t), _MPMATH)

    def gram(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        """kappa(X1 X2^T / d) in float64.

        On {±1}^d every <x, x'> is one of the d + 1 integers -d, -d + 2, ..., d, so kappa is evaluated
        there once and looked up: the same t and the same elementwise arithmetic, hence the same
        numbers, bit for bit (tested), at a sixth of the time for the arccos kernels."""
        X1, X2 = X1.double(), X2.double()
        d = X1.shape[-1]
        dots = X1 @ X2.T
        if not (_on_cube(X1) and _on_cube(X2)):
            return self(dots / d)
        levels = torch.arange(-d, d + 1, 2, dtype=torch.float64, device=dots.device)
        return self(levels / d)[((dots + d) / 2).long()]


def dot_kernel(name: str, input_dim: int) -> DotKernel:
    """The kernels of the chapter by name: ``ntk2``, ``ntk3`` (ReLU NTKs),
    ``rbf`` (h = d), ``rbf4`` (h = 4d), ``poly8`` ((1+t)^8)."""
    table = {
        "ntk2": ("2-layer ReLU NTK", lambda t, lib: relu_ntk(t, 2, lib)),
        "ntk3": ("3-layer ReLU NTK", lambda t, lib: relu_ntk(t, 3, lib)),
        "rbf": ("RBF, h = d", lambda t, lib: rbf(t, input_dim, 1.0, lib)),
        "rbf4": ("RBF, h = 4d", lambda t, lib: rbf(t, input_dim, 4.0, lib)),
        "poly8": ("polynomial (1+t)^8", lambda t, lib: polynomial(t, 8, lib)),
    }
    if name not in table:
        raise ValueError(f"unknown kernel {name!r}; choose from {sorted(table)}")
    label, formula = table[name]
    return DotKernel(name, label, formula)


KERNEL_NAMES = ("ntk2", "ntk3", "rbf", "rbf4", "poly8")


# ------------------------------------------------------------------ spectra


def krawtchouk(input_dim: int, j: int, ell: int) -> int:
    r"""Krawtchouk polynomial :math:`\mathcal K_j(\ell)=\sum_i(-1)^i\binom{\ell}{i}\binom{d-\ell}{j-i}` (exact integer)."""
    return sum((-1) ** i * math.comb(ell, i) * math.comb(input_dim - ell, j - i) for i in range(0, min(ell, j) + 1))


def degree_eigenvalues(kernel: DotKernel, input_dim: int, digits: int = EXACT_DIGITS) -> np.ndarray:
    r"""Eigenvalues :math:`\mu_\ell`, :math:`\ell=0..d`, of :math:`K=\kappa(\langle x,x'\rangle/d)`
    on the uniform cube, in exact integer Krawtchouk sums and ``digits``-digit
    arithmetic for kappa (each parity of degree l has eigenvalue mu_l)."""
    with mpmath.workdps(digits):
        values = [kernel.exact(mpmath.mpf(input_dim - 2 * j) / input_dim) for j in range(input_dim + 1)]
        scale = mpmath.mpf(2) ** (-input_dim)
        mu = [scale * mpmath.fsum(values[j] * krawtchouk(input_dim, j, ell) for j in range(input_dim + 1))
              for ell in range(input_dim + 1)]
        return np.array([float(m) for m in mu])


def multiplicities(input_dim: int) -> np.ndarray:
    """binom(d, l), the number of parities of each degree l."""
    return np.array([math.comb(input_dim, ell) for ell in range(input_dim + 1)], dtype=float)


# ------------------------------------------------------------------ eigenlearning


@dataclass(frozen=True)
class EigenlearningPrediction:
    num_samples: int
    ridge: float
    kappa: float
    learnability: np.ndarray  # L_l per degree
    overfitting: float  # E_0
    test_error: float  # per output unless target_energy is summed over outputs


def eigenlearning(mu, mult, num_samples: int, target_energy, ridge: float = 0.0,
                  noise: float = 0.0) -> EigenlearningPrediction:
    r"""Predicted KRR test error for a target with energy ``target_energy[l]`` on degree ``l``.

    Solves :math:`\sum_\ell m_\ell\frac{\mu_\ell}{\mu_\ell+\kappa}+\frac\delta\kappa=N` for
    :math:`\kappa` (``ridge`` :math:`\delta` is the ridge added to the N x N Gram),
    then :math:`L_\ell=\mu_\ell/(\mu_\ell+\kappa)`,
    :math:`E_0=N/(N-\sum_\ell m_\ell L_\ell^2)` and
    test error :math:`=E_0\,(\sum_\ell e_\ell(1-L_\ell)^2+\text{noise})`.
    """
    mu, mult, energy = (np.asarray(a, dtype=float) for a in (mu, mult, target_energy))
    mu = np.clip(mu, 0.0, None)
    n = float(num_samples)

    def excess(log_kappa):
        kappa = math.exp(log_kappa)
        return float(np.sum(mult * mu / (mu + kappa)) + ridge / kappa - n)

    if np.sum(mult * (mu > 0)) <= n and ridge == 0:
        raise ValueError("eigenlearning needs more modes with positive eigenvalue than samples when ridge = 0")
    lo, hi = math.log(1e-300), math.log(max(1e-300, float(np.sum(mult * mu)) + ridge) / n * 1e6 + 1e-300)
    log_kappa = brentq(excess, lo, hi, xtol=1e-14, rtol=1e-14, maxiter=500)
    kappa = math.exp(log_kappa)
    learn = mu / (mu + kappa)
    e0 = n / (n - float(np.sum(mult * learn ** 2)))
    error = e0 * (float(np.sum(energy * (1 - learn) ** 2)) + noise)
    return EigenlearningPrediction(num_samples, ridge, kappa, learn, e0, error)


def degrees_of_freedom_bound(alpha: float, num_samples, input_dim: int, degree: int):
    r"""Averaged form of Theorem 2's argument (spec D4): the degree-k Walsh coefficients
    of any :math:`\sum_n w_nK(\cdot,x_n)` lie in an N-dimensional subspace, so over a
    uniformly random k-set S, :math:`\mathbb E_S\min_w\mathrm{risk}_G\ge\alpha^2(1-N/\binom dk)`."""
    return alpha ** 2 * np.clip(1 - np.asarray(num_samples, dtype=float) / math.comb(input_dim, degree), 0, None)


# ------------------------------------------------------------------ the §8.1 target


def parity_set(num_outputs: int, split: bool) -> list[int]:
    """The 8 input coordinates (0-based) of G's parity: {1..8} (a function of F, the
    paper's target) or, for the split control, {2..9}, which cuts two of F's pairs."""
    if num_outputs < (5 if split else 4):
        raise ValueError("the target needs at least 4 outputs (G is a degree-4 parity of F), "
                         "the split control 5 (its parity reaches the 9th coordinate)")
    return list(range(1, 9)) if split else list(range(0, 8))


@dataclass(frozen=True)
class Target:
    """H(x) = beta F(x) + alpha G(F(x)) of §8.1 (or its split control)."""

    num_outputs: int
    alpha: float
    beta: float = 1.0
    split: bool = False

    @property
    def input_dim(self) -> int:
        return 2 * self.num_outputs

    def base(self, X: torch.Tensor) -> torch.Tensor:
        """F_j(x) = x_{2j-1} x_{2j}, j = 1..k: k disjoint degree-2 parities."""
        self._check(X)
        return X[..., 0::2] * X[..., 1::2]

    def composite_parity(self, X: torch.Tensor) -> torch.Tensor:
        """chi of the degree-8 set; G_i(F(x)) = (-1)^i chi(x) for the aligned target."""
        self._check(X)
        return X[..., parity_set(self.num_outputs, self.split)].prod(dim=-1)

    def signs(self, dtype=torch.float64, device=None) -> torch.Tensor:
        """(-1)^i for i = 1..k (the paper's G_i = (-1)^i y1 y2 y3 y4)."""
        return torch.tensor([(-1.0) ** i for i in range(1, self.num_outputs + 1)], dtype=dtype, device=device)

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        return self.beta * self.base(X) + self.alpha * self.composite_parity(X)[..., None] * self.signs(X.dtype, X.device)

    def _check(self, X):
        if X.shape[-1] != self.input_dim:
            raise ValueError(f"the target with {self.num_outputs} outputs needs input_dim {self.input_dim}, "
                             f"got {X.shape[-1]}")

    # closed-form landmarks (all parities orthonormal; error summed over outputs)
    def zero_error(self) -> float:
        return self.num_outputs * (self.beta ** 2 + self.alpha ** 2)

    def threshold(self) -> float:
        """k alpha^2: the error of a predictor that learned beta F but not alpha G(F)."""
        return self.num_outputs * self.alpha ** 2

    def g_coefficient(self, out: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        r""":math:`\hat g=\frac1{k\alpha}\sum_i\mathbb E[(\mathrm{out}_i-\beta F_i)(-1)^i\chi]`: 1 when
        :math:`\alpha G(F)` is learned, 0 when it is not (over the last two axes)."""
        resid = (out - self.beta * self.base(X)) * self.signs(out.dtype, out.device) * self.composite_parity(X)[..., None]
        return resid.sum(-1).mean(-1) / (self.num_outputs * self.alpha)

    def f_coefficient(self, out: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        r""":math:`\frac1k\sum_i\mathbb E[\mathrm{out}_iF_i]` (beta when F is learned)."""
        return (out * self.base(X)).sum(-1).mean(-1) / self.num_outputs

    def degree_energy(self, input_dim: int | None = None) -> np.ndarray:
        """Energy per Walsh degree of one output (beta^2 on degree 2, alpha^2 on degree 8)."""
        d = input_dim or self.input_dim
        energy = np.zeros(d + 1)
        energy[2] += self.beta ** 2
        energy[8] += self.alpha ** 2
        return energy


def test_error(out: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """E ||out - y||^2 summed over outputs, averaged over samples (the paper's test error)."""
    return ((out - Y) ** 2).sum(-1).mean(-1)


# ------------------------------------------------------------------ exact lemmas


def parseval_error(coefficients: np.ndarray, index_i: int, index_S: int, alpha: float) -> float:
    r"""Lemma D.1: :math:`\mathbb E|f-(x_i+\alpha\chi_S)|^2=(\lambda_{\{i\}}-1)^2+(\lambda_S-\alpha)^2+\sum_{\text{other}}\lambda_{S'}^2`,
    from the Walsh coefficients (indices as in :func:`walsh_coefficients`)."""
    c = np.array(coefficients, dtype=float, copy=True)
    c[index_i] -= 1.0
    c[index_S] -= alpha
    return float(np.sum(c ** 2))


def rank_lemma_residual(M: torch.Tensor) -> float:
    r"""Lemma D.2, numerically: :math:`\min_B\|B^\top M-I_R\|_F^2` for
    :math:`M\in\mathbb R^{N\times R}` (least squares); equals :math:`R-\mathrm{rank}\,M`."""
    R = M.shape[1]
    solution = torch.linalg.lstsq(M.T, torch.eye(R, dtype=M.dtype), driver="gelsd").solution
    return float(((M.T @ solution - torch.eye(R, dtype=M.dtype)) ** 2).sum())


def polarization_sum(z: torch.Tensor) -> torch.Tensor:
    r""":math:`\sum_{s\in\{0,1\}^k}(-1)^{|s|}(\sum_i(-1)^{s_i}z_i)^k`, which equals
    :math:`2^kk!\prod_iz_i` (the construction behind Corollary 7.1); ``z`` is (..., k)."""
    k = z.shape[-1]
    signs = 1 - 2 * ((torch.arange(2 ** k)[:, None] >> torch.arange(k)) & 1).to(z.dtype)  # (2^k, k)
    parity = signs.prod(dim=-1)  # (-1)^{|s|}
    return ((z @ signs.T) ** k * parity).sum(-1)


def half_line_hermite_moment(degree: int) -> float:
    r""":math:`p'_i=\int_0^\infty He_i(a)\phi(a)\,da=He_{i-1}(0)\phi(0)` for probabilists'
    Hermite :math:`He_i` (Claim E.3): zero for even i, :math:`(-1)^{(i-1)/2}(i-2)!!/\sqrt{2\pi}` for odd i."""
    if degree < 1:
        raise ValueError("degree must be at least 1")
    if degree % 2 == 0:
        return 0.0
    double_factorial = math.prod(range(degree - 2, 0, -2)) if degree >= 3 else 1
    return (-1) ** ((degree - 1) // 2) * double_factorial / math.sqrt(2 * math.pi)


def paper_hermite_bound(degree: int) -> float:
    """The paper's lower bound |p'_i| >= (i-1)!!/4 (Claim E.3)."""
    return math.prod(range(degree - 1, 0, -2)) / 4 if degree >= 2 else 0.25


def greedy_sign_flips(g0: torch.Tensor, delta: float) -> int:
    r"""The largest number of coordinates of ``g0`` whose sign a perturbation of norm
    at most ``delta`` can flip (Prop. B.4): flipping j needs :math:`|g'_j|>|g^{(0)}_j|`,
    so the worst case flips the smallest :math:`|g^{(0)}_j|` while their squares sum below delta^2."""
    cumulative = torch.cumsum(torch.sort(g0.abs()).values ** 2, 0)
    return int((cumulative < delta ** 2).sum())


SIGN_FLIP_CONSTANT = (3 * (2 / math.sqrt(2 * math.pi)) ** 2) ** (1 / 3)
"""s* ~ (3 (2 phi(0))^2)^{1/3} m delta^{2/3} = 1.2407 m delta^{2/3} for g0 ~ N(0, I/m)."""


def sign_flip_relative_spread(m: int, delta: float) -> float:
    r"""The sampling spread of :func:`greedy_sign_flips` relative to its mean, :math:`\sqrt{8/15}/\sqrt{n_0}` with
    :math:`n_0=1.2407\,m\delta^{2/3}`, to leading order in small delta and large n_0.

    With :math:`z=\sqrt m\,g^{(0)}`, the count below u is :math:`N(u)` (mean :math:`m\,2\phi(0)u`) and its sum of
    squares :math:`S(u)` (mean :math:`m\,2\phi(0)u^3/3`); the worst case stops at :math:`S(u^*)=m\delta^2`.
    Linearised, :math:`s^*-n_0\approx\Delta N-\Delta S/u^2`, and with Var N = n_0, Var S = n_0 u^4/5 and
    Cov(N, S) = n_0 u^2/3 its variance is :math:`n_0(1+1/5-2/3)=\tfrac{8}{15}n_0`."""
    expected_count = SIGN_FLIP_CONSTANT * m * delta ** (2 / 3)
    return math.sqrt(8 / 15 / expected_count)
