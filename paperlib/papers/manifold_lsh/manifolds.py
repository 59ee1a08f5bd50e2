r"""Deep networks as locality-sensitive hash functions on manifolds
(Dikkala, Kaplun & Panigrahy, arXiv:2103.06875).

* **Data (§5, App. I.1).** A manifold is :math:`M(\gamma)=\{x=\sum_{i\le4}P_i(V_i\gamma+W_i\theta)\}`
  with latent :math:`\gamma\sim N(0,I_k)` fixed per manifold and :math:`\theta\sim N(0,\text{scale}^2I_k/k)`
  resampled per point; :math:`V_i,W_i` (entries :math:`N(0,1/d)`) are shared by all manifolds, and
  :math:`P` acts coordinate-wise (sin, cos, :math:`e^{x/2}`, :math:`\log((1+x^2)/2)`, or their sum, "mix").
* **Theory network.** :math:`\hat y=AB\sigma(Cx')`, :math:`x'=(x/\sqrt2,1/\sqrt2)` for unit-norm x, a fixed
  random :math:`C` (rows :math:`N(0,I/D)`), trained :math:`A,B`; the representation is
  :math:`r(x)=B\sigma(Cx')`. Its kernel is the arc-cosine kernel :math:`\kappa`.
* **Weighted loss** (1): weight 1/2 on the own class and :math:`1/(2(m-1))` on the others.
* **GSH ratio** ρ: mean inter-class over mean intra-class distance of representations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from paperlib.core.devices import one_cpu_thread
from paperlib.maths.kernels import relu_feature_covariance
from paperlib.nets.graphs import GraphedEpoch, graphs_enabled
from paperlib.nets.optim import FOREACH
from paperlib.nets.training import TrainingLoop

GENERATORS = ("sin", "cos", "exp", "log", "mix")
_MAPS = {
    "sin": torch.sin,
    "cos": torch.cos,
    "exp": lambda u: torch.exp(u / 2),
    "log": lambda u: torch.log((1 + u * u) / 2),
}


# ------------------------------------------------------------------ data


@dataclass
class ManifoldFamily:
    """The shared maps of one synthetic family: V_i, W_i (d x k) for i = 1..n_terms."""

    kind: str
    V: torch.Tensor  # (n_terms, d, k)
    W: torch.Tensor  # (n_terms, d, k)
    theta_shift: float = 0.0  # control: the mean of every coordinate of theta (the paper's is 0)

    @property
    def latent_dim(self) -> int:
        return self.V.shape[-1]

    def embed(self, gamma: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """x = sum_i P(V_i gamma + W_i theta) for rows of gamma and theta (same leading shape)."""
        u = torch.einsum("tdk,...k->...td", self.V, gamma) + torch.einsum("tdk,...k->...td", self.W, theta)
        if self.kind == "mix":
            return sum(f(u) for f in _MAPS.values()).sum(-2)
        return _MAPS[self.kind](u).sum(-2)

    def sample(self, gammas: torch.Tensor, per_manifold: int, theta_scale: float,
               generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``per_manifold`` points of each manifold gamma (rows of ``gammas``): X (m n, d), labels (m n,)."""
        m, k = gammas.shape
        theta = torch.randn(m, per_manifold, k, generator=generator, dtype=torch.float64) * theta_scale / math.sqrt(k)
        if self.theta_shift:  # control: theta no longer symmetric, so M(gamma) and M(-gamma) differ for even maps
            theta = theta + self.theta_shift
        X = self.embed(gammas[:, None, :].expand(m, per_manifold, k), theta)
        return X.reshape(m * per_manifold, -1), torch.arange(m).repeat_interleave(per_manifold)


def manifold_family(kind: str, ambient_dim: int, latent_dim: int, generator: torch.Generator,
                    n_terms: int = 4, theta_shift: float = 0.0) -> ManifoldFamily:
    if kind not in GENERATORS:
        raise ValueError(f"unknown generator {kind!r}; choose from {GENERATORS}")
    shape = (n_terms, ambient_dim, latent_dim)
    V = torch.randn(*shape, generator=generator, dtype=torch.float64) / math.sqrt(ambient_dim)
    W = torch.randn(*shape, generator=generator, dtype=torch.float64) / math.sqrt(ambient_dim)
    return ManifoldFamily(kind, V, W, theta_shift)


def latents(num: int, latent_dim: int, generator: torch.Generator) -> torch.Tensor:
    """gamma ~ N(0, I_k), not normalized (App. I.1)."""
    return torch.randn(num, latent_dim, generator=generator, dtype=torch.float64)


def with_bias(X: torch.Tensor) -> torch.Tensor:
    """x' = (x/sqrt 2, 1/sqrt 2) for x normalized to the unit sphere: the theory's input."""
    X = X / X.norm(dim=1, keepdim=True)
    return torch.cat([X, torch.ones(X.shape[0], 1, dtype=X.dtype, device=X.device)], 1) / math.sqrt(2)


# ------------------------------------------------------------------ the random ReLU layer (C1-C4)


def relu_kernel(eta):
    r""":math:`\kappa(\eta)=(\sqrt{1-\eta^2}+(\pi-\arccos\eta)\eta)/(2\pi)=D\,\mathbb E[\sigma(c^Tx)\sigma(c^Ty)]`
    for unit x, y and c ~ N(0, I/D) (Lemma 21): the ReLU feature covariance of :mod:`paperlib.maths.kernels`."""
    return relu_feature_covariance(eta)


def relu_kernel_gram(X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
    """K(x, y) = |x||y| kappa(eta) for rows of X1, X2."""
    n1, n2 = X1.norm(dim=1), X2.norm(dim=1)
    return n1[:, None] * n2[None, :] * relu_kernel((X1 @ X2.T) / (n1[:, None] * n2[None, :]))


def taylor_coefficients(order: int) -> np.ndarray:
    r"""Taylor coefficients :math:`q_0..q_K` of :math:`\kappa`: :math:`q_0=1/2\pi`, :math:`q_1=1/4`,
    :math:`q_{2j}=\frac1{2\pi}[(-1)^j\binom{1/2}{j}+\binom{2j-2}{j-1}/(4^{j-1}(2j-1))]`, odd ones beyond 1 zero."""
    q = np.zeros(order + 1)
    q[0] = 1 / (2 * math.pi)
    if order >= 1:
        q[1] = 0.25
    half_binom = Fraction(1)  # binom(1/2, j), updated in exact arithmetic: the two terms nearly cancel
    for j in range(1, order // 2 + 1):
        half_binom *= (Fraction(1, 2) - (j - 1)) / j
        exact = (-1) ** j * half_binom + Fraction(math.comb(2 * j - 2, j - 1), 4 ** (j - 1) * (2 * j - 1))
        q[2 * j] = float(exact) / (2 * math.pi)
    return q


def random_layer(input_dim: int, width: int, generator: torch.Generator, dtype=torch.float64) -> torch.Tensor:
    """C (width x input_dim) with rows N(0, I/width) (Lemma 12)."""
    return torch.randn(width, input_dim, generator=generator, dtype=dtype) / math.sqrt(width)


def features(C: torch.Tensor, Xb: torch.Tensor) -> torch.Tensor:
    """z = sigma(C x') for rows x' of Xb: (N, D)."""
    return torch.relu(Xb @ C.T)


# ------------------------------------------------------------------ losses and variances (C6-C9)


def class_weights(num_classes: int, dtype=torch.float64, device=None) -> torch.Tensor:
    """w_lj = 1/2 on the own class, 1/(2(m-1)) elsewhere: (m, m), row l for true class l."""
    w = torch.full((num_classes, num_classes), 1 / (2 * (num_classes - 1)), dtype=dtype, device=device)
    w.fill_diagonal_(0.5)
    return w


def weighted_loss(out: torch.Tensor, labels: torch.Tensor, per_example: bool = False) -> torch.Tensor:
    """Eq. (1): mean over examples of sum_j w_lj (y_lj - yhat_j)^2 with one-hot y."""
    m = out.shape[1]
    Y = torch.nn.functional.one_hot(labels, m).to(out.dtype)
    values = (class_weights(m, out.dtype, out.device)[labels] * (Y - out) ** 2).sum(1)
    return values if per_example else values.mean()


def class_means(R: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    sums = torch.zeros(num_classes, R.shape[1], dtype=R.dtype, device=R.device).index_add_(0, labels, R)
    counts = torch.bincount(labels, minlength=num_classes).to(R.dtype)
    return sums / counts[:, None]


def intra_variance(R: torch.Tensor, labels: torch.Tensor, num_classes: int) -> float:
    """V_mn(r) (eq. 3): the mean over classes of E||r - E_class r||^2."""
    centred = R - class_means(R, labels, num_classes)[labels]
    per_class = torch.zeros(num_classes, dtype=R.dtype).index_add_(0, labels, (centred ** 2).sum(1))
    return float((per_class / torch.bincount(labels, minlength=num_classes)).mean())


def centred_covariance(Z: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    r""":math:`\Sigma_c=\frac1{m(n-1)}\sum_{l,i}(z_{il}-\bar z_l)(z_{il}-\bar z_l)^T` (equal class sizes):
    :math:`V_{reg}(B)=\mathrm{tr}(B\Sigma_cB^T)` (Lemma 45)."""
    centred = Z - class_means(Z, labels, num_classes)[labels]
    n = Z.shape[0] // num_classes
    return centred.T @ centred / (num_classes * (n - 1))


# ------------------------------------------------------------------ distances and GSH


@dataclass
class DistanceStats:
    intra: float  # mean unsquared within-class distance (all pairs)
    inter: float  # mean unsquared cross-class distance (sampled pairs)
    intra_sq: float
    inter_sq: float

    @property
    def rho(self) -> float:
        """The primary GSH ratio: mean inter over mean intra distance (unsquared)."""
        return self.inter / self.intra

    @property
    def rho_squared(self) -> float:
        return self.inter_sq / self.intra_sq


def distance_stats(R: torch.Tensor, labels: torch.Tensor, generator: torch.Generator,
                   num_pairs: int = 20000) -> DistanceStats:
    """Intra-class distances over all within-class pairs (one cdist per class, batched by sorting),
    inter-class over ``num_pairs`` random cross-class pairs. ``R`` may live on a GPU (the distances are
    computed there); ``labels`` and ``generator`` are on the CPU."""
    R = R.double()
    labels = labels.cpu()
    order = torch.argsort(labels, stable=True)
    R_sorted, lab = R[order.to(R.device)], labels[order]
    counts = torch.bincount(lab)
    intra, intra_sq, total = 0.0, 0.0, 0
    if bool((counts == counts[0]).all()):
        groups = R_sorted.reshape(len(counts), int(counts[0]), -1)
        d = torch.cdist(groups, groups)
        iu = torch.triu_indices(d.shape[1], d.shape[1], 1, device=d.device)
        pairs = d[:, iu[0], iu[1]]
        intra, intra_sq, total = float(pairs.sum()), float((pairs ** 2).sum()), pairs.numel()
    else:
        start = 0
        for c in counts.tolist():
            g = R_sorted[start:start + c]
            start += c
            d = torch.pdist(g)
            intra, intra_sq, total = intra + float(d.sum()), intra_sq + float((d ** 2).sum()), total + d.numel()
    i = torch.randint(0, R.shape[0], (num_pairs * 2,), generator=generator)
    j = torch.randint(0, R.shape[0], (num_pairs * 2,), generator=generator)
    keep = labels[i] != labels[j]
    i, j = i[keep][:num_pairs].to(R.device), j[keep][:num_pairs].to(R.device)
    dist = (R[i] - R[j]).norm(dim=1)
    return DistanceStats(intra / total, float(dist.mean()), intra_sq / total, float((dist ** 2).mean()))


def distance_stats_loop(R: torch.Tensor, labels: torch.Tensor, pairs_i, pairs_j) -> tuple[float, float]:
    """The straightforward version (a Python loop over pairs), for checks and benchmarks:
    mean intra distance over all within-class pairs, mean inter distance over the given pairs."""
    intra, count = 0.0, 0
    n = R.shape[0]
    for a in range(n):
        for b in range(a + 1, n):
            if labels[a] == labels[b]:
                intra += float((R[a] - R[b]).norm())
                count += 1
    inter = [float((R[a] - R[b]).norm()) for a, b in zip(pairs_i, pairs_j)]
    return intra / count, float(np.mean(inter))


def one_shot_accuracy(R: torch.Tensor, labels: torch.Tensor, ways: int, episodes: int,
                      generator: torch.Generator) -> float:
    """K-way 1-shot nearest-neighbour accuracy (Theorem 2/5): per episode, K classes, one support point
    each and one query from the first class; correct when the query is nearest its own support."""
    classes = torch.unique(labels)
    by_class = [torch.nonzero(labels == c).flatten() for c in classes]
    correct = 0
    for _ in range(episodes):
        chosen = torch.randperm(len(classes), generator=generator)[:ways]
        support = []
        for c in chosen.tolist():
            members = by_class[c]
            support.append(members[torch.randint(0, len(members), (1,), generator=generator)])
        own = by_class[chosen[0]]
        query = own[torch.randint(0, len(own), (1,), generator=generator)]
        while len(own) > 1 and int(query) == int(support[0]):
            query = own[torch.randint(0, len(own), (1,), generator=generator)]
        dists = (R[torch.cat(support)] - R[query]).norm(dim=1)
        correct += int(int(dists.argmin()) == 0)
    return correct / episodes


def recovery_distance(R_fit, gamma_fit, R_test, gamma_test, ridge: float = 1e-6) -> float:
    r"""Linear recovery of gamma (Remark 1): ridge least squares with a bias fitted on (R_fit, gamma_fit),
    then mean ||W r - gamma|| on the test set over the mean ||gamma_i - gamma_j|| (unsquared; a
    random Gaussian guess scores 1, the zero predictor 1/sqrt 2 for Gaussian gamma)."""
    def design(R):
        return torch.cat([R.double(), torch.ones(R.shape[0], 1, dtype=torch.float64)], 1)
    Phi = design(R_fit)
    W = torch.linalg.solve(Phi.T @ Phi + ridge * torch.eye(Phi.shape[1], dtype=torch.float64), Phi.T @ gamma_fit)
    err = (design(R_test) @ W - gamma_test).norm(dim=1).mean()
    spread = torch.pdist(gamma_test).mean()
    return float(err / spread)


# ------------------------------------------------------------------ nuclear norm (C5, C6)


def nuclear_prox_solve(grad_fn, shape, penalty: float, lipschitz: float, iters: int) -> torch.Tensor:
    r"""FISTA for :math:`\min_WO(W)+\text{penalty}\|W\|_*` with singular-value soft-thresholding."""
    W = torch.zeros(shape, dtype=torch.float64)
    Yk, t = W.clone(), 1.0
    step = 1.0 / lipschitz
    for _ in range(iters):
        G = Yk - step * grad_fn(Yk)
        U, s, Vh = torch.linalg.svd(G, full_matrices=False)
        W_next = U * (s - step * penalty).clamp_min(0) @ Vh
        t_next = (1 + math.sqrt(1 + 4 * t * t)) / 2
        Yk = W_next + (t - 1) / t_next * (W_next - W)
        W, t = W_next, t_next
    return W


def factored_lbfgs(objective, shape_A, shape_B, weight_decay_a: float, weight_decay_b: float, generator: torch.Generator,
                   iters: int = 500) -> tuple[torch.Tensor, torch.Tensor, float]:
    """L-BFGS (float64) on O(AB) + weight_decay_a ||A||^2 + weight_decay_b ||B||^2 from a random start."""
    A = (0.1 * torch.randn(*shape_A, generator=generator, dtype=torch.float64)).requires_grad_(True)
    B = (0.1 * torch.randn(*shape_B, generator=generator, dtype=torch.float64)).requires_grad_(True)
    opt = torch.optim.LBFGS([A, B], lr=1, max_iter=iters, tolerance_grad=1e-14, tolerance_change=1e-16,
                            history_size=50, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        value = objective(A @ B) + weight_decay_a * (A ** 2).sum() + weight_decay_b * (B ** 2).sum()
        value.backward()
        return value

    for _ in range(4):
        opt.step(closure)
    with torch.no_grad():
        value = float(objective(A @ B) + weight_decay_a * (A ** 2).sum() + weight_decay_b * (B ** 2).sum())
    return A.detach(), B.detach(), value


# ------------------------------------------------------------------ training


def train_theory(Z: torch.Tensor, labels: torch.Tensor, num_classes: int, hidden: int, *, weight_decay_a: float, weight_decay_b: float,
                 variance_reg: float, steps: int, lr: float, generator: torch.Generator, device="cpu"):
    """Full-batch Adam on objective (6): weighted loss + weight_decay_a ||A||^2 + weight_decay_b ||B||^2 + variance_reg V_reg(BZ),
    with the random features Z = sigma(C X') precomputed. Returns (A, B) on the CPU.

    The initial A and B are drawn on the CPU from ``generator``; the training runs on ``device`` in float64
    (at `full`, N = 20 000 points of D = 4096 features: about 10^10 flops a step, hours for the chapter's
    theory runs on a few CPU cores)."""
    D = Z.shape[1]
    A = (torch.randn(num_classes, hidden, generator=generator, dtype=torch.float64) / math.sqrt(hidden)).to(device).requires_grad_(True)
    B = (torch.randn(hidden, D, generator=generator, dtype=torch.float64) / math.sqrt(D)).to(device).requires_grad_(True)
    Z, labels = Z.to(device), labels.to(device)
    Sigma = centred_covariance(Z, labels, num_classes) if variance_reg > 0 else None
    opt = torch.optim.Adam([A, B], lr=lr, foreach=FOREACH)
    for _ in TrainingLoop(steps, desc="Adam (theory network)"):
        opt.zero_grad(set_to_none=True)
        R = Z @ B.T
        loss = weighted_loss(R @ A.T, labels) + weight_decay_a * (A ** 2).sum() + weight_decay_b * (B ** 2).sum()
        if Sigma is not None:
            loss = loss + variance_reg * (B @ Sigma * B).sum()
        loss.backward()
        opt.step()
    return A.detach().cpu(), B.detach().cpu()


MLP_LOSSES = ("sum", "mean")


def train_mlp(X: torch.Tensor, labels: torch.Tensor, num_classes: int, width: int, *, epochs: int, batch_size: int,
              lr: float, weight_decay: float, generator: torch.Generator, device="cpu", loss: str = "sum",
              on_epoch=None):
    """The paper track: a 3-layer MLP d -> w -> w -> m (ReLU), SGD, squared loss on one-hot targets, weight
    decay (SGD's ``weight_decay``, i.e. the penalty weight_decay/2 ||w||^2) on weights only.

    ``loss="sum"``: the paper's "l2 loss", ||y_hat - y||^2 summed over the m outputs and averaged over the
    batch. ``loss="mean"``: torch's ``mse_loss`` default, which also averages over the m outputs, so its data
    gradient is m times smaller against the same weight decay (the reading used before; it collapses).
    ``on_epoch(epoch, model)`` is called after every epoch (epoch counts from 1), for traces.
    Returns the model; its representation is the penultimate post-ReLU layer. One run of :func:`train_mlps`."""
    hook = None if on_epoch is None else (lambda epoch, models: on_epoch(epoch, models[0]))
    return train_mlps([(X, labels)], num_classes, width, epochs=epochs, batch_size=batch_size, lr=lr,
                      weight_decay=weight_decay, generators=[generator], device=device, losses=[loss], on_epoch=hook)[0]


def train_mlps(datasets: list, num_classes: int, width: int, *, epochs: int, batch_size: int, lr: float,
               weight_decay: float, generators: list, device="cpu", losses=None, on_epoch=None) -> list:
    """G independent paper-track MLPs (:func:`train_mlp`) trained as one batched program: ``datasets`` is a
    list of (X, labels) with the same number of points, ``generators`` and ``losses`` one per run.

    Each run is the one :func:`train_mlp` describes, draw for draw: its initial weights are seeded from its
    own generator, its batch order is drawn from it every epoch, and its loss and gradients involve only its
    own weights. The layers are batched matrix products (``baddbmm``), one SGD step updates every run, so
    a step costs the launches of one network, not G (the GPU's bottleneck at batch size 32). On the CPU the
    result is bit for bit that of the runs one at a time (tested). ``on_epoch(epoch, models)`` gets the G
    networks after every epoch. Returns the G networks (``torch.nn.Sequential``, on the CPU)."""
    losses = list(losses or ["sum"] * len(datasets))
    if any(loss not in MLP_LOSSES for loss in losses):
        raise ValueError(f"loss must be one of {MLP_LOSSES}, got {losses!r}")
    if not (len(datasets) == len(generators) == len(losses)) or len({X.shape[0] for X, _ in datasets}) != 1:
        raise ValueError("train_mlps needs one generator and one loss per dataset, and datasets of one size")
    templates = []
    for generator in generators:  # the initial weights of train_mlp: torch's default init, seeded from the run's stream
        torch.manual_seed(int(torch.randint(0, 2 ** 31 - 1, (1,), generator=generator)))
        templates.append(torch.nn.Sequential(torch.nn.Linear(datasets[0][0].shape[1], width), torch.nn.ReLU(),
                                             torch.nn.Linear(width, width), torch.nn.ReLU(),
                                             torch.nn.Linear(width, num_classes)))
    weights = [torch.stack([t[i].weight.detach() for t in templates]).to(device).requires_grad_() for i in (0, 2, 4)]
    biases = [torch.stack([t[i].bias.detach() for t in templates]).to(device).requires_grad_() for i in (0, 2, 4)]
    opt = torch.optim.SGD([{"params": weights, "weight_decay": weight_decay}, {"params": biases, "weight_decay": 0.0}],
                          lr=lr, foreach=FOREACH)
    X = torch.stack([Xg.float() for Xg, _ in datasets]).to(device)                                  # (G, N, d)
    Y = torch.stack([torch.nn.functional.one_hot(lab, num_classes).float() for _, lab in datasets]).to(device)
    summed = torch.tensor([loss == "sum" for loss in losses], device=device)
    num_points = X.shape[1]
    order = torch.empty((len(datasets), num_points), dtype=torch.long, device=device)  # each epoch's, copied in

    def run_epoch():
        for start in range(0, num_points, batch_size):
            idx = order[:, start:start + batch_size, None]
            opt.zero_grad(set_to_none=True)
            out = torch.gather(X, 1, idx.expand(-1, -1, X.shape[2]))
            for layer, (W, b) in enumerate(zip(weights, biases)):
                out = torch.baddbmm(b[:, None, :], out, W.transpose(1, 2))
                out = torch.relu(out) if layer < 2 else out
            squared = (out - torch.gather(Y, 1, idx.expand(-1, -1, num_classes))) ** 2
            # per run: the sum over outputs averaged over the batch ("sum"), or the mean of all entries
            per_run = torch.where(summed, squared.sum(2).mean(1), squared.mean((1, 2)))
            per_run.sum().backward()
            opt.step()
        return per_run.detach()

    # on a GPU, epochs after the second replay one recording, checked against eager execution first
    epoch_runner = GraphedEpoch(run_epoch, weights + biases, enabled=graphs_enabled(device),
                                name=f"SGD ({len(datasets)} MLPs)")
    # float32 SGD amplifies the thread-dependent rounding of multi-threaded kernels into a different run:
    # on one thread the run is the same whatever OMP_NUM_THREADS says (as for the ResNet and deepfc)
    with one_cpu_thread(device):
        for epoch in TrainingLoop(epochs, start=1, desc=f"SGD ({len(datasets)} MLP{'s' * (len(datasets) > 1)})"):
            order.copy_(torch.stack([torch.randperm(num_points, generator=g) for g in generators]))
            epoch_runner()
            if on_epoch is not None:
                with torch.no_grad():
                    on_epoch(epoch, _networks(weights, biases))
    return [network.cpu() for network in _networks(weights, biases)]


def _networks(weights: list, biases: list) -> list:
    """The G networks of :func:`train_mlps` as ``torch.nn.Sequential`` (copies, on the weights' device)."""
    networks = []
    for g in range(weights[0].shape[0]):
        layers = []
        for i, (W, b) in enumerate(zip(weights, biases)):
            # skip_init: no draw from torch's global generator, which the next run's initial weights are seeded in
            linear = torch.nn.utils.skip_init(torch.nn.Linear, W.shape[2], W.shape[1], device=W.device)
            with torch.no_grad():
                linear.weight.copy_(W[g])
                linear.bias.copy_(b[g])
            layers += [linear, torch.nn.ReLU()] if i < 2 else [linear]
        networks.append(torch.nn.Sequential(*layers))
    return networks


def effective_rank(R: torch.Tensor) -> float:
    """An entropy effective rank of the centred rows of R: exp of the Shannon entropy of the normalised
    squared singular values (the variance spectrum; Roy & Vetterli 2007 normalise the singular values
    themselves). k for k orthogonal directions of equal spread, 1 for a line.

    The squared singular values are the eigenvalues of the smaller Gram matrix of the centred rows (at
    `full`, 1000 x 1000 for 5000 rows): a symmetric eigensolver, not an SVD. The collapse traces compute
    this 1,200 times on the training device, where an SVD of a tall matrix is slow (cuSOLVER's can be
    slower than a CPU's); on one CPU thread here it takes half the SVD's time. Eigenvalues that rounding
    makes negative count as 0; the smallest ones carry a rounding error of about eps * the largest, which
    moves the entropy by far less than that times the rank."""
    centred = (R - R.mean(0)).double()
    gram = centred.T @ centred if centred.shape[0] >= centred.shape[1] else centred @ centred.T
    s2 = torch.linalg.eigvalsh(gram).clamp_min(0)
    p = s2[s2 > 0] / s2.sum()
    return float(torch.exp(-(p * torch.log(p)).sum()))


def mlp_representation(model, X: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model[:4](X.float()).double()


def mlp_outputs(model, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The outputs and the representation (the penultimate post-ReLU layer) of a paper-track MLP, from one
    forward pass: (outputs, R), both float64."""
    with torch.no_grad():
        hidden = model[:4](X.float())
        return model[4](hidden).double(), hidden.double()
