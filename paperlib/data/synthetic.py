"""Synthetic data generators, drawn from the papers' own models."""

import math as _math
from dataclasses import dataclass as _dataclass
from typing import NamedTuple as _NamedTuple, Optional as _Optional

import torch


def sphere_points(num_samples: int, input_dim: int, generator: torch.Generator,
                  dtype=torch.float64, batch_shape=()) -> torch.Tensor:
    """Points drawn i.i.d. uniformly on the unit sphere S^{d-1}.

    Returns a tensor of shape ``batch_shape + (num_samples, input_dim)``.
    """
    _check_positive(num_samples=num_samples, input_dim=input_dim)
    x = torch.randn(*batch_shape, num_samples, input_dim, generator=generator, dtype=dtype)
    return x / x.norm(dim=-1, keepdim=True)


def gaussian_labels(num_samples: int, generator: torch.Generator, dtype=torch.float64,
                    batch_shape=()) -> torch.Tensor:
    """Labels drawn i.i.d. from N(0, 1): the 'random labels' of the phase diagrams."""
    _check_positive(num_samples=num_samples)
    return torch.randn(*batch_shape, num_samples, generator=generator, dtype=dtype)


def plant_close_pair(x: torch.Tensor, separation: float) -> torch.Tensor:
    """Return a copy of unit-norm data ``x`` whose last row is moved to distance
    ``separation`` from the first row (both stay on the sphere).

    Used to control the delta-separation of Assumption 1 (Oymak & Soltanolkotabi).
    """
    if not 0 < separation < 2:
        raise ValueError(f"separation must be in (0, 2), got {separation!r}")
    x = x.clone()
    anchor, other = x[0], x[-1]
    # a unit direction orthogonal to the anchor
    ortho = other - (other @ anchor) * anchor
    ortho = ortho / ortho.norm()
    # a point at chordal distance `separation` from the anchor on the great circle through ortho
    angle = 2 * torch.arcsin(torch.tensor(separation / 2, dtype=x.dtype))
    x[-1] = torch.cos(angle) * anchor + torch.sin(angle) * ortho
    return x


def separation(x: torch.Tensor) -> float:
    """delta = min_{i != j} min(||x_i - x_j||, ||x_i + x_j||) (Assumption 1)."""
    gram = x @ x.T
    sq_norms = gram.diagonal()
    minus = sq_norms[:, None] + sq_norms[None, :] - 2 * gram
    plus = sq_norms[:, None] + sq_norms[None, :] + 2 * gram
    both = torch.minimum(minus, plus)
    both.fill_diagonal_(float("inf"))
    return float(both.clamp_min(0).min().sqrt())


def _check_positive(**values):
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


# --------------------------------------------------------------------------- Oymak, Fabian, Li & Soltanolkotabi (2019)
# Spec ``jacobian-lowrank.md``: the Gaussian mixture of Def. 2.4, one-hot labels and their
# corruption (X5), the low-rank linear model of Sec. 5.1 (C11, Fig. 8) and the Gaussian
# regression data of App. D (C12).

#: the label-corruption modes (spec X5, pitfall 7); kept in step with paperlib.papers.jacobian_lowrank.multiclass
CORRUPTION_MODES = ("strictly_other", "uniform")
MIXTURE_ASSIGNMENTS = ("uniform", "balanced")


def mixture_centers(num_classes: int, clusters_per_class: int, input_dim: int,
                    generator: torch.Generator, min_center_distance: float = 0.5,
                    max_attempts: int = 100000, dtype=torch.float64) -> torch.Tensor:
    r"""The :math:`KC` unit-norm cluster centres of Def. 2.4, pairwise at least
    ``min_center_distance`` apart (Fig. 3: 0.5), shape ``(K*C, d)``; row :math:`\ell C + c` is
    :math:`\mu_{\ell,c}`.

    Sequential rejection: candidates are drawn uniformly on the sphere and kept when they are at
    least ``min_center_distance`` from every centre kept so far; ``RuntimeError`` after
    ``max_attempts`` candidates. (This is not exactly the uniform law conditioned on all pairwise
    distances, but for the spec's settings -- distance 0.5, typical distance :math:`\approx\sqrt2` --
    almost no candidate is ever rejected, so the difference is immaterial.)
    """
    _check_positive(num_classes=num_classes, clusters_per_class=clusters_per_class,
                    input_dim=input_dim)
    if not 0 <= min_center_distance < 2:
        raise ValueError(f"min_center_distance must be in [0, 2), got {min_center_distance!r}")
    count = num_classes * clusters_per_class
    centers = torch.empty(count, input_dim, dtype=dtype)
    kept = 0
    for _ in range(max_attempts):
        candidate = sphere_points(1, input_dim, generator, dtype=dtype)[0]
        if kept == 0 or float((centers[:kept] - candidate).norm(dim=1).min()) >= min_center_distance:
            centers[kept] = candidate
            kept += 1
            if kept == count:
                return centers
    raise RuntimeError(f"could not place {count} centres in dimension {input_dim} at pairwise "
                       f"distance >= {min_center_distance} within {max_attempts} attempts")


class GaussianMixture(_NamedTuple):
    """Output of :func:`gaussian_mixture` (unpacks as ``X, labels, clusters, centers``)."""

    X: torch.Tensor            # (n, d) float64, unit-norm rows when normalize=True
    labels: torch.Tensor       # (n,) int64 class  = cluster // C
    clusters: torch.Tensor     # (n,) int64 cluster id l*C + c, indexing the rows of ``centers``
    centers: torch.Tensor      # (K*C, d) float64 unit-norm centres


def gaussian_mixture(num_classes: int, clusters_per_class: int, input_dim: int,
                     num_samples: int, sigma: float, generator: torch.Generator,
                     min_center_distance: float = 0.5,
                     center_generator: _Optional[torch.Generator] = None,
                     centers: _Optional[torch.Tensor] = None, assignment: str = "uniform",
                     normalize: bool = True, dtype=torch.float64) -> GaussianMixture:
    r"""A sample of the Gaussian mixture model of Def. 2.4.

    * :math:`K` classes of :math:`C` clusters; unit-norm centres :math:`\mu_{\ell,c}` pairwise
      :math:`\ge` ``min_center_distance`` (:func:`mixture_centers`). The centres are drawn from
      ``center_generator`` (default: ``generator``, first), or passed as ``centers`` -- pass the same
      centres (or an identically seeded ``center_generator``) to draw a test set of the same mixture.
    * Cluster membership: ``assignment="uniform"`` draws each sample's cluster i.i.d. uniformly over
      the :math:`KC` clusters, as in Def. 2.4 (so cluster sizes are random and may even be 0);
      ``"balanced"`` gives every cluster :math:`\lfloor n/KC\rfloor` or :math:`\lceil n/KC\rceil` samples, in
      random order.
    * Inputs: Def. 2.4 draws :math:`x\sim\mathcal N(\mu_{\ell,c}, \sigma^2I_d/d)`, i.e.
      :math:`x = \mu + \sigma g/\sqrt d` with :math:`g\sim\mathcal N(0, I_d)`, so :math:`\|x-\mu\|\approx\sigma`.
      **Choice:** with ``normalize=True`` (default) each row is then rescaled to unit norm,
      :math:`x \leftarrow x/\|x\|`, because the theory (Sec. 2: "X with unit-norm rows", the kernel
      :math:`\bar\Sigma` of ``paperlib.maths.kernels`` as a function of :math:`XX^T`) and the spec's
      calibration runs use unit-norm inputs. For :math:`\sigma = 0` the rows are the centres exactly
      (the noise is still drawn, so the generator stream does not depend on sigma); for small
      :math:`\sigma` it removes the radial part of the noise (a relative change :math:`O(\sigma/\sqrt d)`
      in norm). ``normalize=False`` returns the paper's raw Gaussian samples.
    * Labels: class :math:`\ell` of the cluster (one-hot via :func:`one_hot`).

    Draw order from ``generator``: (centres, if no ``center_generator`` and no ``centers``), cluster
    ids, noise.
    """
    _check_positive(num_classes=num_classes, clusters_per_class=clusters_per_class,
                    input_dim=input_dim, num_samples=num_samples)
    if not sigma >= 0 or not _math.isfinite(sigma):
        raise ValueError(f"sigma must be a non-negative finite number, got {sigma!r}")
    if assignment not in MIXTURE_ASSIGNMENTS:
        raise ValueError(f"assignment must be one of {', '.join(map(repr, MIXTURE_ASSIGNMENTS))}; "
                         f"got {assignment!r}")
    count = num_classes * clusters_per_class
    if centers is None:
        centers = mixture_centers(num_classes, clusters_per_class, input_dim,
                                  center_generator if center_generator is not None else generator,
                                  min_center_distance, dtype=dtype)
    else:
        centers = torch.as_tensor(centers, dtype=dtype)
        if tuple(centers.shape) != (count, input_dim):
            raise ValueError(f"centers must have shape (K*C, d) = {(count, input_dim)}, "
                             f"got {tuple(centers.shape)}")
    if assignment == "uniform":
        clusters = torch.randint(count, (num_samples,), generator=generator)
    else:
        clusters = torch.arange(num_samples) % count
        clusters = clusters[torch.randperm(num_samples, generator=generator)]
    noise = torch.randn(num_samples, input_dim, generator=generator, dtype=dtype)
    X = centers[clusters]
    if sigma > 0:                       # sigma = 0 returns the centres bit for bit
        X = X + sigma * noise / _math.sqrt(input_dim)
        if normalize:
            X = X / X.norm(dim=1, keepdim=True)
    return GaussianMixture(X=X, labels=clusters // clusters_per_class, clusters=clusters,
                           centers=centers)


def one_hot(labels, num_classes: int, dtype=torch.float64) -> torch.Tensor:
    """One-hot rows ``(n, K)`` of integer ``labels`` in ``[0, K)``."""
    _check_positive(num_classes=num_classes)
    labels = torch.as_tensor(labels, dtype=torch.long)
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes}), got range "
                         f"[{int(labels.min())}, {int(labels.max())}]")
    return torch.nn.functional.one_hot(labels, num_classes).to(dtype)


def corrupt_labels(labels, fraction: float, num_classes: int, mode: str,
                   generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Label corruption at rate ``fraction`` (spec X5, pitfall 7). Returns
    ``(new_labels, selected)`` with ``selected`` the bool mask of the indices that were redrawn.

    Exactly :math:`\lfloor pn + 1/2\rfloor` indices are chosen uniformly without replacement, then

    * ``mode="strictly_other"``: each moves to a uniformly chosen **different** class (so exactly
      that many labels change; at :math:`p = 1` this is anti-information, not random labels);
    * ``mode="uniform"``: each is redrawn uniformly over all :math:`K` classes (about a share
      :math:`1/K` of them keep their label; "random labels" at :math:`p = 1`).

    ``labels`` is not modified. An unknown ``mode`` raises a ``ValueError`` naming ``corruption_mode``.
    """
    if mode not in CORRUPTION_MODES:
        raise ValueError(f"corruption_mode must be one of {', '.join(map(repr, CORRUPTION_MODES))}; "
                         f"got {mode!r}")
    _check_positive(num_classes=num_classes)
    if not 0 <= fraction <= 1:
        raise ValueError(f"fraction must lie in [0, 1], got {fraction!r}")
    if mode == "strictly_other" and num_classes < 2:
        raise ValueError("corruption_mode='strictly_other' needs num_classes >= 2")
    labels = torch.as_tensor(labels, dtype=torch.long)
    n = labels.numel()
    count = int(_math.floor(fraction * n + 0.5))
    chosen = torch.randperm(n, generator=generator)[:count]
    new = labels.clone()
    if mode == "strictly_other":
        shift = torch.randint(1, num_classes, (count,), generator=generator)
        new[chosen] = (labels[chosen] + shift) % num_classes
    else:
        new[chosen] = torch.randint(num_classes, (count,), generator=generator)
    selected = torch.zeros(n, dtype=torch.bool)
    selected[chosen] = True
    return new, selected


def random_orthonormal(rows: int, cols: int, generator: torch.Generator, dtype=torch.float64) -> torch.Tensor:
    """Haar-distributed ``rows x cols`` orthonormal columns (QR of a Gaussian, signs fixed)."""
    Q, R = torch.linalg.qr(torch.randn(rows, cols, generator=generator, dtype=dtype))
    signs = torch.sign(torch.diagonal(R))
    signs[signs == 0] = 1
    return Q * signs


class PopulationLoss(_NamedTuple):
    """:math:`\\mathbb EL`, :math:`\\mathbb EL_{\\mathcal I}`, :math:`\\mathbb EL_{\\mathcal N}` (floats, or arrays for a path)."""

    total: object
    information: object
    nuisance: object


@_dataclass
class LowRankLinearModel:
    r"""The linear model of Sec. 5.1 (spec C11, Fig. 8), drawn by :func:`low_rank_linear_model`.

    :math:`\bar X = U\Sigma V^T` (rank :math:`r`, :math:`\Sigma = I_r`), :math:`X = \bar X + Z` with
    :math:`Z_{ij}\sim\mathcal N(0, \sigma_x^2/n)`, :math:`\bar y = \bar Xw^*` and :math:`y = \bar y + z`,
    :math:`z_i\sim\mathcal N(0,\sigma_y^2/n)`; training loss :math:`\tfrac12\|Xw - y\|^2`.

    **Population loss** (the paper's test error): the loss of a *fixed* :math:`w` on fresh noise
    :math:`(Z', z')` with the same clean part, :math:`\mathbb E\,\tfrac12\|(\bar X+Z')w - \bar y - z'\|^2`.
    Derivation: :math:`e = Z'w - z'` has i.i.d. :math:`\mathcal N(0, s^2/n)` entries with
    :math:`s^2 = \sigma_x^2\|w\|^2 + \sigma_y^2` (independent columns of :math:`Z'`), so
    :math:`\mathbb E e = 0`, :math:`\mathbb E\|e\|^2 = s^2` and

    .. math:: \mathbb EL(w) = \tfrac12\|\bar Xw - \bar y\|^2 + \tfrac12\sigma_x^2\|w\|^2 + \tfrac12\sigma_y^2.

    Split with :math:`\Pi_{\mathcal I} = UU^T` (the range of :math:`\bar X`, which holds
    :math:`\bar Xw - \bar y`) and :math:`\Pi_{\mathcal N} = I - UU^T`: the isotropic :math:`e` puts the
    share :math:`r/n` of its energy on :math:`\mathcal I`, hence

    .. math:: \mathbb EL_{\mathcal I} = \tfrac12\|\bar Xw-\bar y\|^2 + \tfrac r{2n}(\sigma_x^2\|w\|^2+\sigma_y^2),
              \qquad \mathbb EL_{\mathcal N} = \tfrac12(1-\tfrac rn)(\sigma_x^2\|w\|^2+\sigma_y^2),

    with :math:`L_{\mathcal I/\mathcal N} = \tfrac12\|\Pi_{\mathcal I/\mathcal N}(Xw - y)\|^2` on the fresh sample,
    and :math:`\mathbb EL = \mathbb EL_{\mathcal I} + \mathbb EL_{\mathcal N}` exactly.
    """

    X_bar: torch.Tensor
    X: torch.Tensor
    y: torch.Tensor
    y_bar: torch.Tensor
    w_star: torch.Tensor
    U: torch.Tensor
    V: torch.Tensor
    sigma_x: float
    sigma_y: float

    @property
    def rank(self) -> int:
        return self.U.shape[1]

    @property
    def num_samples(self) -> int:
        return self.X.shape[0]

    def population_loss(self, w) -> PopulationLoss:
        r"""Closed-form :math:`(\mathbb EL, \mathbb EL_{\mathcal I}, \mathbb EL_{\mathcal N})` at ``w``
        (``(d,)``, or ``(T, d)`` for a path, e.g. :meth:`gd_path`)."""
        w = torch.as_tensor(w, dtype=self.X.dtype)
        n, r = self.num_samples, self.rank
        fit = 0.5 * ((w @ self.X_bar.T - self.y_bar) ** 2).sum(-1)
        noise = self.sigma_x**2 * (w**2).sum(-1) + self.sigma_y**2
        information = fit + r / (2 * n) * noise
        nuisance = 0.5 * (1 - r / n) * noise
        return PopulationLoss(*(_scalar_or_array(t) for t in
                                (information + nuisance, information, nuisance)))

    def monte_carlo_population_loss(self, w, num_draws: int, generator: torch.Generator, device=None
                                    ) -> tuple[PopulationLoss, PopulationLoss]:
        r"""Monte Carlo :math:`(\mathbb EL, \mathbb EL_{\mathcal I}, \mathbb EL_{\mathcal N})` at one ``w`` over
        ``num_draws`` fresh :math:`(Z', z')`; returns ``(mean, standard_error)``.

        Each draw is a whole :math:`n\times d` matrix :math:`Z'`, as the derivation assumes nothing about
        :math:`Z'w`: at `full` that is 6·10^9 normal numbers, minutes on a CPU. On a ``device`` other than the
        CPU the draws come from that device's generator, seeded by one draw from ``generator`` (another
        stream than the CPU's, so other numbers, from the same distribution)."""
        _check_positive(num_draws=num_draws)
        device = torch.device("cpu" if device is None else device)
        if device.type != "cpu":
            seed = int(torch.randint(0, 2 ** 62, (1,), generator=generator))
            generator = torch.Generator(device).manual_seed(seed)
        w = torch.as_tensor(w, dtype=self.X.dtype).to(device)
        X_bar, y_bar, U = (t.to(device) for t in (self.X_bar, self.y_bar, self.U))
        n, d = self.X.shape
        values = []
        for start in range(0, num_draws, 256):
            size = min(256, num_draws - start)
            Z = torch.randn(size, n, d, generator=generator, dtype=w.dtype, device=device) * (self.sigma_x / _math.sqrt(n))
            z = torch.randn(size, n, generator=generator, dtype=w.dtype, device=device) * (self.sigma_y / _math.sqrt(n))
            misfit = (X_bar + Z) @ w - y_bar - z                              # (size, n)
            info = 0.5 * ((misfit @ U) ** 2).sum(-1)
            total = 0.5 * (misfit**2).sum(-1)
            values.append(torch.stack([total, info, total - info], dim=1))
        values = torch.cat(values).cpu()
        mean = values.mean(0)
        se = values.std(0) / _math.sqrt(num_draws) if num_draws > 1 else torch.full_like(mean, _math.nan)
        return PopulationLoss(*mean.tolist()), PopulationLoss(*se.tolist())

    def gd_path(self, lr: float, num_steps: int, w0=None) -> torch.Tensor:
        r"""GD iterates :math:`w_{\tau+1} = w_\tau - \eta X^T(Xw_\tau - y)` (eq. 5.2) from ``w0``
        (default 0), shape ``(num_steps + 1, d)``."""
        w = torch.zeros(self.X.shape[1], dtype=self.X.dtype) if w0 is None else \
            torch.as_tensor(w0, dtype=self.X.dtype).clone()
        path = [w.clone()]
        for _ in range(num_steps):
            w = w - lr * (self.X.T @ (self.X @ w - self.y))
            path.append(w.clone())
        return torch.stack(path)


def _scalar_or_array(t: torch.Tensor):
    return float(t) if t.ndim == 0 else t.numpy()


def low_rank_linear_model(num_samples: int, input_dim: int, rank: int, sigma_x: float,
                          sigma_y: float, generator: torch.Generator, wstar: str = "gauss_r",
                          dtype=torch.float64) -> LowRankLinearModel:
    r"""Draw the Sec. 5.1 model (Fig. 8: n=200, d=500, r=5, :math:`\sigma_x=0.2`, :math:`\sigma_y=2`).

    :math:`U\in\mathbb R^{n\times r}`, :math:`V\in\mathbb R^{d\times r}` Haar-random orthonormal,
    :math:`\Sigma = I_r`. The paper does not give :math:`w^*` beyond :math:`w^*\in\mathrm{range}(V)`;
    ``wstar="gauss_r"`` (the spec's ``lin_wstar``) takes :math:`w^* = Vc`, :math:`c\sim\mathcal N(0, I_r)`,
    so :math:`\bar y = Uc`. Draw order: U, V, c, Z, z. See :class:`LowRankLinearModel` for the
    population-loss closed forms.
    """
    _check_positive(num_samples=num_samples, input_dim=input_dim, rank=rank)
    if rank > min(num_samples, input_dim):
        raise ValueError(f"rank must be at most min(num_samples, input_dim), got {rank}")
    if wstar != "gauss_r":
        raise ValueError(f"wstar must be 'gauss_r', got {wstar!r}")
    for name, value in (("sigma_x", sigma_x), ("sigma_y", sigma_y)):
        if not value >= 0 or not _math.isfinite(value):
            raise ValueError(f"{name} must be a non-negative finite number, got {value!r}")
    n, d = num_samples, input_dim
    U = random_orthonormal(n, rank, generator, dtype)
    V = random_orthonormal(d, rank, generator, dtype)
    c = torch.randn(rank, generator=generator, dtype=dtype)
    X_bar = U @ V.T
    w_star = V @ c
    y_bar = X_bar @ w_star
    Z = torch.randn(n, d, generator=generator, dtype=dtype) * (sigma_x / _math.sqrt(n))
    z = torch.randn(n, generator=generator, dtype=dtype) * (sigma_y / _math.sqrt(n))
    return LowRankLinearModel(X_bar=X_bar, X=X_bar + Z, y=y_bar + z, y_bar=y_bar, w_star=w_star,
                              U=U, V=V, sigma_x=float(sigma_x), sigma_y=float(sigma_y))


def gaussian_regression_data(num_samples: int, input_dim: int, generator: torch.Generator,
                             theta=None, dtype=torch.float64
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""App. D (spec C12): :math:`x_i\sim\mathcal N(0, I_d)` i.i.d. (not normalized) and
    :math:`y_i = \theta^Tx_i`. Returns ``(X, y, theta)``.

    The paper only says "fix :math:`\theta`"; by default :math:`\theta` is drawn uniformly on the unit
    sphere (first, then X), so :math:`\mathrm{Var}\,y_i = 1`.
    """
    _check_positive(num_samples=num_samples, input_dim=input_dim)
    if theta is None:
        theta = sphere_points(1, input_dim, generator, dtype=dtype)[0]
    else:
        theta = torch.as_tensor(theta, dtype=dtype)
        if tuple(theta.shape) != (input_dim,):
            raise ValueError(f"theta must have shape ({input_dim},), got {tuple(theta.shape)}")
    X = torch.randn(num_samples, input_dim, generator=generator, dtype=dtype)
    return X, X @ theta, theta
