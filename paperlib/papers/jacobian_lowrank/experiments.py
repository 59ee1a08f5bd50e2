r"""The experiments of the jacobian-lowrank chapter (Oymak, Fabian, Li & Soltanolkotabi, 2019), one
function per section: each takes the chapter's parameters ``P`` and returns its measurements; the chapter
records the claims. Every draw comes from ``generator(P.seed, label, ...)``, so a function's numbers do
not depend on which other sections ran.

* :func:`linear_prelude`: §5.1's linear model and Figure 8;
* :class:`Mixture`: the theory network f(x) = V φ(Wx) on the Gaussian mixture, with one GD run up to
  T = Γ/(ηα²) (:meth:`Mixture.run`); :func:`kernel_concentration`, :func:`tracking`, :func:`mixture_structure`
  and :func:`early_stopping` measure Lemmas 6.3–6.14, Thm 5.3, Thm A.1 / Figure 3 and Thms 2.2, 6.22, A.3;
* :func:`one_step`: App. D's single large GD step;
* :class:`DeepNetwork`: the BN-free ResNet on offline digits at every corruption level, its Jacobian's top
  spaces (Lanczos) and the alignment tables (§4, Tables 1–7, Figures 4–7, 15).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import torch

from paperlib.core.seeding import derive_seed, generator, shared_rows_index
from paperlib.data import digits, synthetic as data
from paperlib.maths import linalg, spectral, stats
from paperlib.maths.activations import get_activation
from paperlib.maths.kernels import neural_covariance
from paperlib.nets.shallow import initial_weights
from paperlib.papers.jacobian_lowrank import multiclass, resnet

NUM_CLASSES = 10  # the digits
CUT_SENSITIVITY = 10  # the cut r is also tried at r - 10 and r + 10 (sensitivity of every r-dependent verdict)
PAPER_FLOOR = 0.3163  # the paper's chance floor for CIFAR-10, printed beside its Tables 6-7
PAPER_TABLES = {  # CIFAR-10, Tables 1-7: I(y) and N(y)
    (0.0, "train init"): (0.38081, 0.92465), (0.0, "train final"): (0.9869, 0.16131),
    (0.0, "test init"): (0.38184, 0.92423), (0.0, "test final"): (0.80926, 0.58746),
    (0.25, "train init"): (0.35328, 0.93552), (0.25, "train final"): (0.92214, 0.38685),
    (0.5, "train init"): (0.32762, 0.94481), (0.5, "train final"): (0.8956, 0.44487),
    (0.5, "test init"): (0.38013, 0.92493), (0.5, "test dip"): (0.7041, 0.7101), (0.5, "test final"): (0.44774, 0.89416),
    (0.75, "train init"): (0.31756, 0.94824), (0.75, "train final"): (0.50238, 0.86465),
    (1.0, "train init"): (0.31581, 0.94882), (1.0, "train final"): (0.47747, 0.87865),
}


# ------------------------------------------------------------------ §1 the linear prelude


def linear_prelude(P, device=None) -> SimpleNamespace:
    """GD from w = 0 with η = 0.5/‖X‖² on §5.1's low-rank linear model: the closed-form population loss and its
    information and nuisance parts along the path, Monte Carlo checks at three iterates (their draws on
    ``device``), and GD's time constants on the information space and on the noise directions."""
    lin = data.low_rank_linear_model(P.lin_num_samples, P.lin_input_dim, P.lin_rank, P.lin_sigma_x,
                                     P.lin_sigma_y, generator(P.seed, "linear"))
    lr = 0.5 / linalg.spectral_norm(lin.X) ** 2
    path = lin.gd_path(lr, P.lin_steps)
    total, info_part, nuis_part = (np.asarray(a) for a in lin.population_loss(path))
    checkpoints = [0, P.lin_steps // 10, P.lin_steps]
    mc = [lin.monte_carlo_population_loss(path[t], P.lin_mc_draws, generator(P.seed, "linear-mc", t), device)[0] for t in checkpoints]
    sv = np.linalg.svd(np.asarray(lin.X, dtype=np.float64), compute_uv=False)
    # a singular value below the SVD's rounding (max(n, d) eps s_1) is zero: GD never moves along it
    sv = np.where(sv > max(lin.X.shape) * np.finfo(np.float64).eps * sv[0], sv, 0.0)
    return SimpleNamespace(total=total, info_part=info_part, nuis_part=nuis_part, checkpoints=checkpoints, mc=mc,
                           mc_error=max(abs(m.total - total[t]) / total[t] for m, t in zip(mc, checkpoints)),
                           best=int(np.argmin(total)),
                           tau_info=time_constant(lr, sv[P.lin_rank - 1]), tau_noise=time_constant(lr, sv[P.lin_rank]))


def time_constant(lr: float, singular_value: float) -> float:
    """GD's time constant 1/(η s²) along a singular direction of X, in iterations; infinite where s is 0."""
    return 1 / (lr * singular_value ** 2) if singular_value > 0 else math.inf


# ------------------------------------------------------------------ §2–4 the theory network on the mixture


class Mixture:
    """The Gaussian mixture of Def. 2.4 (``gmm_classes`` classes of ``gmm_clusters`` clusters in dimension
    ``gmm_input_dim``, shared centres) and the theory network on it (softplus, V Rademacher ±ν/√(kK) fixed).
    ``X``, ``Y`` are the base sample (σ = 0.1); ``rank_info`` = K²C; ``lr`` = 1/(ν²B²‖X‖²)."""

    def __init__(self, P):
        self.P = P
        self.K, self.C, self.d = P.gmm_classes, P.gmm_clusters, P.gmm_input_dim
        self.act = get_activation("softplus")
        self.centers = data.mixture_centers(self.K, self.C, self.d, generator(P.seed, "centers"))
        self.rank_info = self.K * self.K * self.C
        self.base_mult = P.gmm_n_mult[0]
        base = self.sample(self.base_mult, 0.1, "base")
        self.X, self.Y = base.X, data.one_hot(base.labels, self.K).double()
        self.n = self.X.shape[0]
        self.data_norm = linalg.spectral_norm(self.X)
        self.lr = 1.0 / (P.nu ** 2 * self.data_norm ** 2)

    def sample(self, per_cluster, sigma, *labels, balanced=True):
        """n = per_cluster * K * C points of the mixture with the shared centres."""
        return data.gaussian_mixture(self.K, self.C, self.d, per_cluster * self.K * self.C, sigma,
                                     generator(self.P.seed, "gmm", *labels), centers=self.centers,
                                     assignment="balanced" if balanced else "uniform")

    def test_sample(self, sigma, *labels):
        return data.gaussian_mixture(self.K, self.C, self.d, self.P.gmm_num_test, sigma, generator(self.P.seed, *labels),
                                     centers=self.centers)

    def run(self, X, Y, width, sigma_label, record=()):
        """GD on the theory network up to T = Gamma / (eta alpha^2); returns the run, the early-stopping
        quantities of J(W0) and the linearized run at the logged iterations."""
        P, K = self.P, self.K
        W0 = initial_weights(width, X.shape[1], generator(P.seed, "run-W", sigma_label, width))
        V = multiclass.rademacher_output_layer(K, width, P.nu / math.sqrt(width * K),
                                               generator(P.seed, "run-V", sigma_label, width))
        gram0 = multiclass.multiclass_jacobian_gram(X, W0, V, self.act)
        eigvals, eigvecs = multiclass.descending_eigh(gram0)
        r0 = multiclass.stack_outputs(multiclass.multiclass_forward(X, W0, V, self.act)) - multiclass.stack_outputs(Y)
        stop = multiclass.early_stopping_quantities(eigvals, eigvecs, r0, self.rank_info, P.Gamma, lr=self.lr)
        log_every = max(1, stop.T_steps // 50)
        record = sorted(set(record) | set(np.linspace(0, stop.T_steps, 11).astype(int).tolist()))
        run = multiclass.gd_multiclass(X, Y, W0, V, self.act, lr=self.lr, num_steps=stop.T_steps, log_every=log_every,
                                       record_weights_at=record)
        linear = multiclass.linearized_run(eigvals, eigvecs, r0, self.lr, run.logged_iters.tolist())
        return dict(W0=W0, V=V, eigvals=eigvals, eigvecs=eigvecs, r0=r0, stop=stop, run=run, linear=linear)


def kernel_concentration(P, mx: Mixture) -> SimpleNamespace:
    """E[J Jᵀ] = k var(V) (I_K ⊗ Σ̄(X)) by Monte Carlo over ``ntk_draws`` (C1), the concentration of J Jᵀ/k against
    the width (C2, mean over 5 draws per width, and Lemma 6.13's bound; control ``gram_independent_rows``), the
    initial output with the theory's ν (C4, 20 draws), Lemma 6.4's square-root step, and the lemmas' shared
    hypotheses (unit-norm inputs, |φ'| <= 1)."""
    K, d, X, act = mx.K, mx.d, mx.X, mx.act
    Sigma_bar = neural_covariance(X @ X.T, "softplus")
    expected = torch.kron(torch.eye(K, dtype=torch.float64), Sigma_bar)  # E JJ^T / (k var V)
    k = P.width
    grams = [multiclass.multiclass_jacobian_gram(
        X, initial_weights(k, d, generator(P.seed, "C1-W", m)),
        multiclass.rademacher_output_layer(K, k, 1.0, generator(P.seed, "C1-V", m)), act) for m in range(P.ntk_draws)]
    mean_gram = torch.stack(grams).mean(0) / k
    out = SimpleNamespace(c1_error=linalg.symmetric_norm(mean_gram - expected) / linalg.symmetric_norm(expected))
    deviations = []
    for kk in P.widths:
        per_draw = []
        for m in range(5):
            # control gram_independent_rows r: only r neurons independent, each repeated up to the width
            units = shared_rows_index(kk, P.gram_independent_rows)
            W0 = initial_weights(kk, d, generator(P.seed, "C2-W", kk, m))[units]
            V = multiclass.rademacher_output_layer(K, kk, 1.0, generator(P.seed, "C2-V", kk, m))[:, units]
            per_draw.append(linalg.symmetric_norm(multiclass.multiclass_jacobian_gram(X, W0, V, act) / kk - expected))
        deviations.append(np.mean(per_draw))
    out.deviations = np.array(deviations)
    out.c2_slope = stats.loglog_slope(P.widths, out.deviations)
    # the hypotheses shared by the lemmas of §6: unit-norm inputs and |φ'| <= B = 1 (softplus: φ' = sigmoid)
    unit_norm_gap = float((X.norm(dim=1) - 1).abs().max())
    phi_prime_max = float(torch.sigmoid(X @ initial_weights(P.width, d, generator(P.seed, "B-check")).T).max())
    out.lemma_assumption = (unit_norm_gap <= 1e-9 and phi_prime_max <= 1.0,
                            f"unit-norm inputs (largest deviation {unit_norm_gap:.1e}) and |φ'| <= 1 (largest {phi_prime_max:.3f})")
    bound = np.array([30 * K * math.sqrt(kk) * mx.data_norm ** 2 * math.log(mx.n) / kk for kk in P.widths])
    out.c2_bound_ratio = float(np.max(out.deviations / bound))
    # C4: small initial output with the theory's nu = zeta / (50 B sqrt(log 2K))
    nu_theory = P.zeta / (50 * math.sqrt(math.log(2 * K)))
    out.c4_ratios = []
    for s in range(20):
        V = multiclass.rademacher_output_layer(K, k, nu_theory / math.sqrt(k * K), generator(P.seed, "C4-V", s))
        W0 = initial_weights(k, d, generator(P.seed, "C4-W", s))
        out.c4_ratios.append(float(multiclass.multiclass_forward(X, W0, V, act).norm() / (P.zeta * mx.Y.norm())))
    # Lemma 6.4 with X = J(W0)/sqrt(k) of the first draw, A = X Xᵀ, B = E[J Jᵀ]/k: with A of full rank, P Qᵀ has
    # orthonormal rows, so Y Yᵀ = B and ‖Y − X‖ = ‖B^(1/2) − A^(1/2)‖: only nK x nK matrices
    gram_A = grams[0] / k
    alpha = math.sqrt(linalg.symmetric_norm(gram_A - expected))
    out.sqrt_ratio = linalg.symmetric_norm(linalg.psd_sqrt(expected) - linalg.psd_sqrt(gram_A)) / (2 * alpha)
    min_A, min_B = linalg.min_eigenvalue(gram_A), linalg.min_eigenvalue(expected)
    out.sqrt_assumption = (min_A > 0 and min_B >= -1e-12 * linalg.symmetric_norm(expected) and k * d >= K * mx.n,
                           f"A of full rank (smallest eigenvalue {min_A:.1e}), B PSD (smallest eigenvalue "
                           f"{min_B:.1e}, rounding allowed 1e-12 ‖B‖) and p = kd = {k * d} >= nK = {K * mx.n}")
    return out


def tracking(P, mx: Mixture) -> SimpleNamespace:
    """One GD run per width of ``widths`` with ν = ``nu``: how far the nonlinear run leaves the linearized one
    (Thm 5.3); on the run at ``width``, Lemma 6.10's norm bounds, Lemma 6.3's asymmetric step and Thm 5.3's bound
    at the eleven recorded iterates; the closed-form linearized run, the Khatri–Rao Jacobian and the kernel
    against explicit computations on a tiny problem; Lemma 6.2 and Cor. 6.6."""
    K, act = mx.K, mx.act
    out = SimpleNamespace(runs={})
    for width in P.widths:
        res = mx.run(mx.X, mx.Y, width, "tracking")
        err = np.linalg.norm(res["run"].residuals - res["linear"].residuals, axis=1).max() / float(res["r0"].norm())
        out.runs[width] = (err, res)
    out.errors = np.array([out.runs[w][0] for w in P.widths])
    out.slope = stats.loglog_slope(np.array(P.widths), out.errors)
    main = out.main = out.runs[P.width][1] if P.width in out.runs else mx.run(mx.X, mx.Y, P.width, "tracking")
    out.main_error = float(np.linalg.norm(main["run"].residuals - main["linear"].residuals, axis=1).max()
                           / float(main["r0"].norm()))

    run, V, W0, X = main["run"], main["V"], main["W0"], mx.X
    v_inf = float(V.abs().max())
    out.norm_bound = math.sqrt(K * P.width) * v_inf * mx.data_norm
    recorded = [run.weights[t] for t in sorted(run.weights)]
    out.num_recorded = len(recorded)
    out.jac_norms = [multiclass.multiclass_jacobian_spectral_norm(X, W, V, act) for W in recorded]
    jac_moves = [multiclass.multiclass_jacobian_difference_norm(X, W, W0, V, act) for W in recorded]
    out.lip_ratios = [move / (math.sqrt(K) * v_inf * mx.data_norm * float((W - W0).norm()))
                      for W, move in zip(recorded, jac_moves) if float((W - W0).norm()) > 0]
    # Lemma 6.3: ‖I − η J(W_τ) J(W0)ᵀ‖² <= 1 + η‖J(W_τ) − J(W0)‖² at each recorded iterate after W0; ‖M‖² = λmax(MᵀM)
    out.lemma63_ratios = []
    for W, move in zip(recorded[1:], jac_moves[1:]):
        step = torch.eye(K * mx.n, dtype=torch.float64) - mx.lr * multiclass.multiclass_jacobian_cross_gram(X, W, W0, V, act)
        out.lemma63_ratios.append(linalg.max_eigenvalue(step.T @ step) / (1 + mx.lr * move ** 2))
    out.beta_max = max(out.jac_norms)
    # Thm 5.3 a posteriori (spec X7): measure how far the Jacobian moved, derive delta, check the bound
    out.eps = 2 * max(jac_moves)
    beta = P.nu * mx.data_norm  # Lemma 6.10 with ||V||_inf = nu / sqrt(kK), B = 1
    out.delta = 5 * P.Gamma * beta ** 2 * out.eps / main["stop"].alpha ** 3
    tracking_main = float(np.linalg.norm(run.residuals - main["linear"].residuals, axis=1).max())
    out.bound_ratio = tracking_main / (3 * out.delta * main["stop"].alpha / (5 * beta) * main["stop"].r0_norm)
    tiny_problem(P, mx, out)
    out.linear_norms = main["linear"].residual_norms
    out.lemma62_ratio = float(np.max(out.linear_norms / main["stop"].residual_bound(run.logged_iters)))
    stop = main["stop"]
    out.chain_slack = min(stop.B - stop.chain_lower, stop.chain_upper - stop.B, stop.chain_top - stop.chain_upper) / stop.r0_norm
    return out


def tiny_problem(P, mx: Mixture, out: SimpleNamespace) -> None:
    """On a tiny mixture where J can be formed: the closed-form linearized residual against explicit linearized GD
    (C5), the Khatri–Rao Jacobian and its Gram against torch.func.jacrev (A1), and Σ̄'s Hermite series against a
    Monte Carlo average over 20000 draws of w (A2)."""
    K, act = mx.K, mx.act
    tiny = mx.sample(2, 0.1, "tiny")
    Wt = initial_weights(6, mx.d, generator(P.seed, "tiny-W"))
    Vt = multiclass.rademacher_output_layer(K, 6, 1.0, generator(P.seed, "tiny-V"))
    Jt = multiclass.multiclass_jacobian(tiny.X, Wt, Vt, act)
    r0t = multiclass.stack_outputs(multiclass.multiclass_forward(tiny.X, Wt, Vt, act)) - multiclass.stack_outputs(
        data.one_hot(tiny.labels, K).double())
    lr_t = 0.5 / float(torch.linalg.matrix_norm(Jt, ord=2)) ** 2
    ev, evec = multiclass.descending_eigh(Jt @ Jt.T)
    closed = multiclass.linearized_run(ev, evec, r0t, lr_t, [0, 10, 100])
    explicit_res, _ = multiclass.linearized_gd_explicit(Jt, r0t, lr_t, 100)
    out.c5_error = max(float((torch.as_tensor(closed.residuals[i]) - explicit_res[t]).norm() / r0t.norm())
                       for i, t in enumerate([0, 10, 100]))
    J_auto = torch.func.jacrev(lambda W: multiclass.stack_outputs(multiclass.multiclass_forward(tiny.X, W, Vt, act)))(
        Wt.double()).reshape(Jt.shape[0], -1)
    out.a1_error = max(float((Jt - J_auto).norm() / J_auto.norm()),
                       float((multiclass.multiclass_jacobian_gram(tiny.X, Wt, Vt, act) - J_auto @ J_auto.T).norm()
                             / (J_auto @ J_auto.T).norm()))
    w_mc = torch.randn(20000, mx.d, generator=generator(P.seed, "A2-w"), dtype=torch.float64)
    phi_mc = torch.sigmoid(tiny.X.double() @ w_mc.T)
    sigma_mc = (phi_mc @ phi_mc.T / w_mc.shape[0]) * (tiny.X.double() @ tiny.X.double().T)
    out.a2_error = float((neural_covariance(tiny.X.double() @ tiny.X.double().T, "softplus") - sigma_mc).abs().max())


def mixture_structure(P, mx: Mixture) -> SimpleNamespace:
    """σ = 0: the rank of I_K ⊗ Σ̄(X), the labels' nuisance fraction and the window of its nonzero eigenvalues
    (Thm A.1). σ = ``fig3_sigma``: the singular values of J(W0) and the labels' fractions for each sample size of
    ``gmm_n_mult`` (Figure 3)."""
    K, C, r = mx.K, mx.C, mx.rank_info
    mix0 = mx.sample(mx.base_mult, 0.0, "sigma0")
    Sigma0 = torch.kron(torch.eye(K, dtype=torch.float64), neural_covariance(mix0.X @ mix0.X.T, "softplus"))
    ev0, evec0 = multiclass.descending_eigh(Sigma0)
    y0 = multiclass.stack_outputs(data.one_hot(mix0.labels, K).double())
    SigmaM = neural_covariance(mx.centers @ mx.centers.T, "softplus")
    counts = torch.bincount(mix0.clusters, minlength=K * C).double()
    out = SimpleNamespace(rank_ratio=float(ev0[r] / ev0[0]),
                          labels_nuisance=multiclass.projection_fractions(evec0[:, :r], y0).nuisance,
                          window=(float(counts.min()) * linalg.min_eigenvalue(SigmaM),
                                  float(counts.max()) * linalg.max_eigenvalue(SigmaM)),
                          nonzero=ev0[:r], fig3={})
    for mult in P.gmm_n_mult:
        mix_s = mx.sample(mult, P.fig3_sigma, "fig3", mult)
        W0 = initial_weights(P.width, mx.d, generator(P.seed, "fig3-W", mult))
        V = multiclass.rademacher_output_layer(K, P.width, P.nu / math.sqrt(P.width * K), generator(P.seed, "fig3-V", mult))
        ev, evec = multiclass.descending_eigh(multiclass.multiclass_jacobian_gram(mix_s.X, W0, V, mx.act))
        yv = multiclass.stack_outputs(data.one_hot(mix_s.labels, K).double())
        out.fig3[mult] = (ev.clamp_min(0).sqrt(), multiclass.projection_fractions(evec[:, :r], yv))
    m_lo, m_hi = P.gmm_n_mult[0], P.gmm_n_mult[1]
    out.m_lo, out.m_hi = m_lo, m_hi
    out.growth = float(out.fig3[m_hi][0][:r].mean() / out.fig3[m_lo][0][:r].mean())
    out.predicted_growth = math.sqrt(m_hi / m_lo)
    out.gaps = [float(sv[r - 1] / sv[r]) for sv, _ in out.fig3.values()]
    return out


def early_stopping(P, mx: Mixture) -> SimpleNamespace:
    """For each σ of ``gmm_sigmas``: one run up to T, its final residual, the labels' nuisance fraction and the
    test error; a run on labels corrupted with probability ``gmm_corruption`` at σ = 0.5; and the terms of
    Thm 6.22's and Thm 2.2's bounds (the constants of ≲ set to 1) with the widths they need."""
    K, C = mx.K, mx.C
    out = SimpleNamespace(sweep={})
    for sigma in P.gmm_sigmas:
        train = mx.sample(mx.base_mult, sigma, "sweep", sigma)
        test = mx.test_sample(sigma, "sweep-test", sigma)
        res = mx.run(train.X, data.one_hot(train.labels, K).double(), P.width, ("sweep", sigma))
        run = res["run"]
        test_err = multiclass.classification_error(multiclass.multiclass_forward(test.X, run.W, res["V"], mx.act), test.labels)
        frac_y = multiclass.projection_fractions(res["eigvecs"][:, :mx.rank_info],
                                                 multiclass.stack_outputs(data.one_hot(train.labels, K).double()))
        out.sweep[sigma] = dict(stop=res["stop"], run=run, test_err=test_err, nuis_y=frac_y.nuisance,
                                final=float(run.residual_norms[-1]), x_norm=linalg.spectral_norm(train.X))
    out.sigmas = sorted(out.sweep)
    train = mx.sample(mx.base_mult, 0.5, "corrupt")
    noisy, _ = data.corrupt_labels(train.labels, P.gmm_corruption, K, "strictly_other", generator(P.seed, "corrupt-labels"))
    test = mx.test_sample(0.5, "corrupt-test")
    res = mx.run(train.X, data.one_hot(noisy, K).double(), P.width, "corrupt")
    outputs = multiclass.multiclass_forward(train.X, res["run"].W, res["V"], mx.act)
    out.noisy_train_err = multiclass.classification_error(outputs, noisy)
    out.clean_test_err = multiclass.classification_error(
        multiclass.multiclass_forward(test.X, res["run"].W, res["V"], mx.act), test.labels)

    out.thm622 = []  # (σ, terms, bound, width needed, test error): Thm 6.22 applied at W0
    for s in out.sigmas:
        st = out.sweep[s]["stop"]
        n_s = mx.base_mult * K * C
        c_r = st.r0_norm / math.sqrt(n_s)
        terms = {"bias 2‖Π_N r0‖/√n": 2 * st.pi_N / math.sqrt(n_s),
                 "variance 12νB·D/√n": 12 * P.nu * st.D / math.sqrt(n_s),
                 "5√(log(2/δ)/n), δ=0.1": 5 * math.sqrt(math.log(20) / n_s),
                 "2C_r(e^(−Γ)+ζ)": 2 * c_r * (math.exp(-P.Gamma) + P.zeta)}
        # (6.59) is stated for the normalized cut-off: α = νB ᾱ sqrt(sqrt(n) ‖X‖) (our reading of a garbled
        # extraction; B = 1 for softplus); the raw α would give a width smaller by (sqrt(n) ‖X‖)^4
        alpha_bar = st.alpha / (P.nu * math.sqrt(math.sqrt(n_s) * out.sweep[s]["x_norm"]))
        k_needed = 25600 * c_r ** 2 * P.Gamma ** 4 / (alpha_bar ** 8 * P.nu ** 2 * P.zeta ** 2)
        out.thm622.append((s, terms, sum(terms.values()), k_needed, out.sweep[s]["test_err"]))
    # Thm 2.2 with the constants of ≲ set to 1: spaces of Σ(X)^(1/2), r = K²C, so that the cutoff α sqrt(nK) is the
    # r-th singular value of Σ(X)^(1/2); Err <= ‖Π_N y‖/sqrt(n) + e^(−Γ) + Γ/(α sqrt(n)) when k >= Γ⁴ log n / α⁸
    out.thm22 = []  # (σ, α, terms, width needed)
    for s in out.sigmas:
        train_s = mx.sample(mx.base_mult, s, "sweep", s)  # the same draw as the sweep's training set
        Sigma_s = torch.kron(torch.eye(K, dtype=torch.float64), neural_covariance(train_s.X @ train_s.X.T, "softplus"))
        ev_s, evec_s = multiclass.descending_eigh(Sigma_s)
        n_s = train_s.X.shape[0]
        alpha_s = math.sqrt(max(float(ev_s[mx.rank_info - 1]), 0.0) / (n_s * K))
        y_s = multiclass.stack_outputs(data.one_hot(train_s.labels, K).double())
        pi_N = multiclass.projection_fractions(evec_s[:, :mx.rank_info], y_s).nuisance * float(y_s.norm())
        terms22 = (pi_N / math.sqrt(n_s), math.exp(-P.Gamma), P.Gamma / (alpha_s * math.sqrt(n_s)))
        out.thm22.append((s, alpha_s, terms22, P.Gamma ** 4 * math.log(n_s) / alpha_s ** 8))
    return out


def bound_tables_markdown(found: SimpleNamespace) -> str:
    """Thm 2.2's and Thm 6.22's terms, bounds and the widths they need, per σ."""
    thm22 = ("| σ | α | ‖Π_N y‖/√n | e^(−Γ) | Γ/(α√n) | Thm 2.2 bound | k needed |\n|---|---|---|---|---|---|---|\n"
             + "\n".join(f"| {s:g} | {a:.3g} | {t[0]:.3g} | {t[1]:.3g} | {t[2]:.3g} | {sum(t):.3g}"
                         f"{' (vacuous)' if sum(t) > 1 else ''} | {kn:.1e} |" for s, a, t, kn in found.thm22))
    rows = found.thm622
    header = "| σ | " + " | ".join(rows[0][1]) + " | bound | test error | k needed |\n|" + "---|" * (len(rows[0][1]) + 4)
    thm622 = header + "\n" + "\n".join(
        f"| {s:g} | " + " | ".join(f"{v:.3g}" for v in t.values()) + f" | {b:.3g}{' (vacuous)' if b > 1 else ''} | "
        f"{e:.3f} | {kn:.1e} |" for s, t, b, kn, e in rows)
    return thm22 + "\n\n" + thm622


# ------------------------------------------------------------------ §5 one step of GD (App. D)


def one_step(P) -> SimpleNamespace:
    """One GD step with ησ_v = 1e3 from a balanced output layer of scale σ_v = ``secd_v_scale`` (tiny in every
    preset; ReLU, linear target): per n of ``secd_num_samples``, the tail s_(2d+1)/s_1 at W1 and the gap
    s_2d/s_(2d+1) at W0 and W1.

    As in App. D ("fixing weights of W0, we study the gradient of the random data"), one network (W0, V) and one
    target θ serve every n, and the n samples are the first n of one draw: the slope against n then measures how
    the tail falls as data are added, not the spread between independent networks."""
    d, k, v_scale = P.secd_input_dim, P.secd_width, P.secd_v_scale
    lr = 1e3 / v_scale  # eta * sigma_v = 1e3 (spec App. Z)
    out = SimpleNamespace(d=d, k=k, v_scale=v_scale, lr=lr, tails=[], tails_W0=[], gaps_W0=[], gaps_W1=[])
    X_all, y_all, _ = data.gaussian_regression_data(max(P.secd_num_samples), d, generator(P.seed, "appD"))
    W0 = initial_weights(k, d, generator(P.seed, "appD-W"))
    V = multiclass.rademacher_output_layer(1, k, v_scale, generator(P.seed, "appD-V"), balanced=True)
    for n in P.secd_num_samples:
        X, y = X_all[:n], y_all[:n]
        r0 = multiclass.multiclass_forward(X, W0, V, "relu") - y[:, None]
        W1 = W0 - lr / n * multiclass.multiclass_gradient(X, W0, V, r0, "relu")
        sv = {name: multiclass.jacobian_singular_values(X, W, V, "relu") for name, W in (("W0", W0), ("W1", W1))}
        out.tails.append(float(sv["W1"][2 * d] / sv["W1"][0]))
        out.tails_W0.append(float(sv["W0"][2 * d] / sv["W0"][0]))
        out.gaps_W0.append(float(sv["W0"][2 * d - 1] / sv["W0"][2 * d]))
        out.gaps_W1.append(float(sv["W1"][2 * d - 1] / sv["W1"][2 * d]))
    # the leading singular values at the largest n, relative to s_1, for the figure
    out.spectra = {name: (values[:4 * d + 2] / values[0]).numpy() for name, values in sv.items()}
    out.tail_slope = stats.loglog_slope(P.secd_num_samples, out.tails)
    # App. D's last step bounds the tail by B ησ d sqrt(k/n) (B = sup|φ''|, 1/4 for softplus); informative only for
    # n >~ k (B ησ d)²
    out.n_informative = k * (0.25 * lr * v_scale * d) ** 2
    return out


def appendix_d_regime_markdown(P, step1: SimpleNamespace) -> str:
    """Whether our n is in the regime where App. D's argument bounds the tail below one, from the run's step,
    width and dimension (the threshold ``n_informative`` of :func:`one_step`)."""
    return (
        f"**Is our n in App. D's regime?** The argument's last step bounds the tail by $B\\,\\eta\\sigma\\,d\\sqrt{{k/n}}$ "
        f"(after its scaling by $1/(\\sigma\\|\\mathbf X\\|)$; the paper drops the factor $B\\eta\\sigma\\sqrt{{kd}}$ and writes "
        f"$\\sqrt{{d/n}}$), with $B=\\sup|\\phi''|$. Even with softplus ($B=1/4$; ReLU has no such $B$, as the paper "
        f"notes) and our step $\\eta\\sigma={step1.lr * step1.v_scale:g}$, $k={step1.k}$, $d={step1.d}$, that bound falls below one only for "
        f"$n\\gtrsim k(B\\eta\\sigma d)^2\\approx{step1.n_informative:.1e}$, against our largest $n={max(P.secd_num_samples)}$. "
        "A smaller step does not help: $\\mathbf W_1$ is close to rank one only when $\\eta\\sigma\\|\\theta\\|/2$ dominates the "
        "rows of $\\mathbf W_0$, which still puts the threshold far above any $n$ we can afford. So the $n^{-1/2}$ rate of "
        "`appD-tail-decay` is an asymptotic statement of the paper's own argument, not one it makes at our sample sizes; "
        f"the measured slope here is {step1.tail_slope:.2f}.")


# ------------------------------------------------------------------ §6 the deep network


class DeepNetwork:
    """The BN-free ResNet on the offline digits (``dataset``), trained by SGD at every level of
    ``corruption_levels`` from the same initialization, and the top singular spaces of its Jacobian (all outputs,
    all parameters; matrix-free Lanczos) up to rank r + ``CUT_SENSITIVITY`` (and one more singular value, for the
    gap at every cut tried): at initialization on the training and the test inputs, after training, and for the
    50 % run at the dip (the epoch of its lowest clean test error)."""

    def __init__(self, P, device):
        self.P, self.device = P, device
        self.split = digits.load_split(P.dataset, P.num_train, P.num_test, seed=derive_seed(P.seed, P.dataset))
        self.ranks = sorted({max(NUM_CLASSES, P.info_rank - CUT_SENSITIVITY), P.info_rank, P.info_rank + CUT_SENSITIVITY})
        self.Y_test = data.one_hot(self.split.y_test, NUM_CLASSES).float()
        self.model0 = self.fresh_model()
        self.init_train = self.space(self.model0, self.split.X_train, "init-train")
        self.init_test = self.space(self.model0, self.split.X_test, "init-test")
        self.runs, self.log = {}, []

    def fresh_model(self):
        """The same initialization for every corruption level (so J(W0) is shared)."""
        P = self.P
        return resnet.ResNetNoBN(NUM_CLASSES, P.stage_widths, P.blocks_per_stage, P.output_scale,
                                 generator=generator(P.seed, "resnet")).to(self.device)

    def space(self, model, X, label):
        top = spectral.top_singular_space(model, X.to(self.device), rank=self.ranks[-1] + 1,
                                          generator=generator(self.P.seed, "lanczos", label))
        return top._replace(vectors=top.vectors[:, :self.ranks[-1]])

    def fractions(self, top, vectors, rank=None):
        """(I, N, J_I^+) fractions of each row of ``vectors`` on the top-``rank`` space of ``top`` (default r)."""
        rank = self.P.info_rank if rank is None else rank
        return multiclass.projection_fractions(torch.as_tensor(top.vectors[:, :rank]),
                                               torch.as_tensor(np.asarray(vectors, dtype=np.float64)),
                                               singular_values=torch.as_tensor(top.singular_values[:rank]))

    def train(self):
        """Every corruption level in turn; the test Jacobians for the clean and the 50 % runs (Tables 1, 2; at
        ``all_table_jacobians`` false, only the 50 % run's) and, for the 50 % run, the Jacobians at the dip."""
        P, split, device = self.P, self.split, self.device
        for level in P.corruption_levels:
            labels, _ = data.corrupt_labels(split.y_train, level, NUM_CLASSES, P.corruption_mode,
                                            generator(P.seed, "corrupt", level))
            epochs = P.epochs if level == 0 else P.epochs_corrupt
            model = self.fresh_model()
            hist = resnet.train_sgd(model, split.X_train.to(device), data.one_hot(labels, NUM_CLASSES).float().to(device),
                                    split.X_test.to(device), self.Y_test.to(device), epochs=epochs, lr=P.lr,
                                    batch_size=P.batch_size, generator=generator(P.seed, "sgd", level),
                                    lr_drop_epoch=max(1, int(0.95 * epochs)), snapshot_best=level == 0.5,
                                    clean_labels=split.y_train.to(device), clean_test_labels=split.y_test.to(device))
            entry = dict(labels=labels, hist=hist, y=multiclass.stack_outputs(data.one_hot(labels, NUM_CLASSES).double()),
                         model=model, final_train=self.space(model, split.X_train, ("final", level)), dip_epoch=hist.best_epoch)
            if level == 0.5 or (level == 0 and P.all_table_jacobians):
                entry["final_test"] = self.space(model, split.X_test, ("final-test", level))
            if level == 0.5:
                dip_model = self.fresh_model()
                dip_model.load_state_dict(hist.snapshots[entry["dip_epoch"]])
                entry["dip_test"] = self.space(dip_model, split.X_test, "dip-test")
                if P.all_table_jacobians:
                    entry["dip_train"] = self.space(dip_model, split.X_train, "dip-train")
            self.runs[level] = entry
            self.log.append(f"corruption {level:.2f}: {epochs} epochs, final train error (given labels) "
                            f"{hist.train_error[-1]:.3f}, clean test error {hist.test_error_clean[-1]:.3f}, "
                            f"{hist.seconds_per_epoch * 1e3:.0f} ms/epoch; {training_outcome(hist, level)}"
                            + (", epochs replayed as CUDA graphs" if hist.graphed else ""))
        return self


def alignment_tables(P, net: DeepNetwork) -> SimpleNamespace:
    """Tables 1–7: for every run and Jacobian (train/test; initialization, dip, final) the fractions of y and of r0
    on I and N and ‖J_I^+ y‖, beside the chance floor and the paper's CIFAR-10 values."""
    split = net.split
    out = SimpleNamespace(counts=torch.bincount(split.y_train, minlength=NUM_CLASSES).tolist(), rows=[], alignment={},
                          cases=[])
    out.floor = multiclass.chance_floor(out.counts, P.info_rank, NUM_CLASSES).expected
    out.floor_test = multiclass.chance_floor(torch.bincount(split.y_test, minlength=NUM_CLASSES).tolist(), P.info_rank,
                                             NUM_CLASSES).expected
    y_test_vec = multiclass.stack_outputs(net.Y_test.double())
    for level, entry in net.runs.items():
        hist = entry["hist"]
        cases = [("train init", net.init_train, entry["y"], hist.train_residuals[0]),
                 ("train final", entry["final_train"], entry["y"], hist.train_residuals[0])]
        if "dip_train" in entry:
            cases.insert(1, ("train dip", entry["dip_train"], entry["y"], hist.train_residuals[0]))
        if "final_test" in entry:
            cases += [("test init", net.init_test, y_test_vec, hist.test_residuals[0])]
            if "dip_test" in entry:
                cases.append(("test dip", entry["dip_test"], y_test_vec, hist.test_residuals[0]))
            cases.append(("test final", entry["final_test"], y_test_vec, hist.test_residuals[0]))
        for name, top, y_v, r0_v in cases:
            fy, fr = net.fractions(top, y_v), net.fractions(top, r0_v)
            out.alignment[level, name] = (fy, fr)
            out.cases.append((top, y_v, r0_v))
            paper = PAPER_TABLES.get((level, name))
            out.rows.append(f"| {level:.0%} | {name} | {fy.information:.4f} | {fy.nuisance:.4f} | {fy.pseudo_inverse:.2e} | "
                            f"{fr.information:.4f} | {fr.nuisance:.4f} | "
                            f"{(out.floor_test if name.startswith('test') else out.floor):.4f} | "
                            + (f"{paper[0]:.4f} / {paper[1]:.4f}" if paper else "-") + " |")
    out.table = ("| corruption | Jacobian | I(y) | N(y) | J†y | I(r0) | N(r0) | chance floor I | paper I(y) / N(y) (CIFAR-10) |\n"
                 "|---|---|---|---|---|---|---|---|---|\n" + "\n".join(out.rows))
    return out


# App. C.3, Tables 8 (SGD) and 9 (Adam), 3-class CIFAR-10: I(y) and N(y) per Jacobian
PAPER_3CLASS = {("sgd", "train init"): (0.7239, 0.68991), ("sgd", "train half"): (0.97266, 0.23224),
                ("sgd", "train final"): (0.98743, 0.15804), ("sgd", "test init"): (0.73366, 0.67951),
                ("sgd", "test final"): (0.8974, 0.44123),
                ("adam", "train init"): (0.7025, 0.71169), ("adam", "train final"): (0.9969, 0.078332)}


def three_class(P, net: DeepNetwork) -> SimpleNamespace | None:
    """App. C.3's Tables 8 and 9 on the offline stand-in: classes 0–2 of the chapter's split, the same ResNet with
    3 outputs and no output scaling (as the paper's 3-class runs), trained for ``three_class_epochs`` at lr
    ``three_class_lr`` by SGD (lr ÷ 10 at 65 % and 90 % of the epochs, the paper's 260 and 360 of 400) and by
    Adam (constant lr), from one initialization. Per run, the fractions of y and r0 on the training Jacobian at
    initialization, at half the epochs (SGD; the paper's 200) and at the end, and on the test Jacobian at
    initialization and at the end. No data augmentation (the paper's crops and flips do not apply to 8 x 8
    digits or 1-D signals). None when ``three_class_epochs`` is 0."""
    if not P.three_class_epochs:
        return None
    k, epochs, split, device = 3, P.three_class_epochs, net.split, net.device
    (X, y), (Xt, yt) = ((Z[labels < k], labels[labels < k]) for Z, labels in
                        ((split.X_train, split.y_train), (split.X_test, split.y_test)))
    Y, Yt = data.one_hot(y, k).float(), data.one_hot(yt, k).float()
    y_vec, yt_vec = multiclass.stack_outputs(Y.double()), multiclass.stack_outputs(Yt.double())
    fresh = lambda: resnet.ResNetNoBN(k, P.stage_widths, P.blocks_per_stage, 1.0,
                                      generator=generator(P.seed, "resnet-3class")).to(device)
    model0 = fresh()
    init_train, init_test = net.space(model0, X, "3class-init-train"), net.space(model0, Xt, "3class-init-test")
    out = SimpleNamespace(counts=torch.bincount(y, minlength=k).tolist(), alignment={}, train_error={}, rows=[],
                          num_train=len(y))
    out.floor = multiclass.chance_floor(out.counts, P.info_rank, k).expected
    for name in ("sgd", "adam"):
        model = fresh()
        hist = resnet.train_sgd(model, X.to(device), Y.to(device), Xt.to(device), Yt.to(device), epochs=epochs,
                                lr=P.three_class_lr, batch_size=P.batch_size, generator=generator(P.seed, "3class", name),
                                lr_drop_epoch=[int(0.65 * epochs), int(0.9 * epochs)] if name == "sgd" else None,
                                snapshot_epochs=(epochs // 2,) if name == "sgd" else (), optimizer=name)
        out.train_error[name] = hist.train_error[-1]
        cases = [("train init", init_train, y_vec, hist.train_residuals[0])]
        if name == "sgd":
            half = fresh()
            half.load_state_dict(hist.snapshots[epochs // 2])
            cases.append(("train half", net.space(half, X, "3class-half-train"), y_vec, hist.train_residuals[0]))
        cases += [("train final", net.space(model, X, ("3class-final-train", name)), y_vec, hist.train_residuals[0]),
                  ("test init", init_test, yt_vec, hist.test_residuals[0]),
                  ("test final", net.space(model, Xt, ("3class-final-test", name)), yt_vec, hist.test_residuals[0])]
        for case, top, y_v, r0_v in cases:
            fy, fr = net.fractions(top, y_v), net.fractions(top, r0_v)
            out.alignment[name, case] = (fy, fr)
            paper = PAPER_3CLASS.get((name, case))
            out.rows.append(f"| {name.upper() if name == 'sgd' else 'Adam'} | {case} | {fy.information:.4f} | "
                            f"{fy.nuisance:.4f} | {fy.pseudo_inverse:.2e} | {fr.information:.4f} | {fr.nuisance:.4f} | "
                            + (f"{paper[0]:.4f} / {paper[1]:.4f}" if paper else "-") + " |")
    final = {name: out.alignment[name, "train final"][0].information for name in ("sgd", "adam")}
    # the nuisance part of y, final over initial: I_init(y) can leave little room to grow (0.96 on our network)
    out.nuisance_ratio = {name: out.alignment[name, "train final"][0].nuisance / out.alignment[name, "train init"][0].nuisance
                          for name in final}
    out.adam_minus_sgd = final["adam"] - final["sgd"]
    # each table's claim assumes that its own run fits its labels, as the clean 10-class run must (fit_assumption);
    # one optimizer's failure to fit says nothing about the other's table
    out.fit = {name: (err <= 0.1, f"the 3-class {'SGD' if name == 'sgd' else 'Adam'} run did not fit its labels "
                                  f"(train error {err:.3f}, above 0.1)")
               for name, err in out.train_error.items()}
    out.table = (f"{out.num_train} training images of classes 0–2 (chance floor of I(y): {out.floor:.4f}); final "
                 "training error " + ", ".join(f"{name}: {err:.3f}" for name, err in out.train_error.items()) + ".\n\n"
                 "| optimizer | Jacobian | I(y) | N(y) | J†y | I(r0) | N(r0) | paper I(y) / N(y) (3-class CIFAR-10) |\n"
                 "|---|---|---|---|---|---|---|---|\n" + "\n".join(out.rows))
    return out


def label_noise(P, net: DeepNetwork, floor: float) -> SimpleNamespace:
    """Per corrupted level: the information fraction of the noise part e = y − y_clean on J(W0) and on J(W_T), of
    the trained output f_T = y + r_T on J(W_T), the relative final residual, the train error and I_final(y); for the
    50 % run (when its training Jacobian at the dip was computed) I(y) at the dip and at the end; and the table and
    paragraph that report them (``floor``: the chance floor of y)."""
    y_clean = multiclass.stack_outputs(data.one_hot(net.split.y_train, NUM_CLASSES).double())
    out = SimpleNamespace(noise_gain={}, untrained_gain={}, output_on_I={}, rows=[], half=None)
    for level in [lvl for lvl in sorted(net.runs) if lvl > 0]:
        entry = net.runs[level]
        r_T = torch.as_tensor(entry["hist"].train_residuals[-1], dtype=torch.float64)
        e = entry["y"] - y_clean
        e_init, e_final = net.fractions(net.init_train, e).information, net.fractions(entry["final_train"], e).information
        out.output_on_I[level] = net.fractions(entry["final_train"], entry["y"] + r_T).information
        out.noise_gain[level] = e_final - e_init
        # the baseline: the noise of an independent corruption at the same level, which no network was trained on;
        # the final top space may gain on any label-like vector, memorisation only on the noise it fitted
        other, _ = data.corrupt_labels(net.split.y_train, level, NUM_CLASSES, P.corruption_mode,
                                       generator(P.seed, "corrupt-untrained", level))
        e_other = multiclass.stack_outputs(data.one_hot(other, NUM_CLASSES).double()) - y_clean
        out.untrained_gain[level] = (net.fractions(entry["final_train"], e_other).information
                                     - net.fractions(net.init_train, e_other).information)
        out.rows.append((level, e_init, e_final, out.output_on_I[level], float(r_T.norm() / entry["y"].norm()),
                         entry["hist"].train_error[-1], net.fractions(entry["final_train"], entry["y"]).information))
    half_run = net.runs.get(0.5, {})
    if "dip_train" in half_run:
        hist = half_run["hist"]
        dip_I, final_I = (net.fractions(half_run[key], half_run["y"]).information for key in ("dip_train", "final_train"))
        out.half = SimpleNamespace(dip_I=dip_I, final_I=final_I, dip_epoch=half_run["dip_epoch"],
                                   dip_train_error=hist.train_error[hist.index_of(half_run["dip_epoch"])],
                                   final_train_error=hist.train_error[-1])
    out.markdown = _label_noise_markdown(P, net, out, floor)
    return out


def memorised(noise: SimpleNamespace) -> bool:
    """Whether, at every corrupted level, the fitted noise gained more on the final information space than an
    untrained noise vector of the same level (the memorisation hypothesis)."""
    return bool(noise.noise_gain) and all(noise.noise_gain[lvl] > noise.untrained_gain[lvl] for lvl in noise.noise_gain)


def _label_noise_markdown(P, net: DeepNetwork, noise: SimpleNamespace, floor: float) -> str:
    paragraph = ""
    if noise.rows:
        heaviest = noise.rows[-1]
        paragraph = (f"At {heaviest[0]:.0%} corruption the noise part has information fraction {heaviest[1]:.3f} on "
                     f"J(W0) and {heaviest[2]:.3f} on J(W_T) (chance floor of y {floor:.3f}); the trained output lies "
                     f"on the final information space with fraction {heaviest[3]:.3f} and misses the given labels by "
                     f"‖r_T‖/‖y‖ = {heaviest[4]:.3f}. ")
        paragraph += ("So the top space of the final Jacobian holds the fitted output, memorised noise included, and a "
                      "run that fits corrupted labels closely ends with a high I(y) whatever the corruption: the final "
                      "alignment of Tables 6–7 measures how far the noise has been fitted as much as how much the "
                      "labels carry. " if memorised(noise) else
                      "The noise part did not gain more on the final information space than an untrained noise vector "
                      "at every level, so memorisation does not explain the alignment here. ")
    if noise.half is not None:
        paragraph += (f"Along the 50 % run, I(y) is {noise.half.dip_I:.3f} on the training Jacobian at the dip (epoch "
                      f"{noise.half.dip_epoch}, before the noise is fitted) and {noise.half.final_I:.3f} at the end. ")
    paragraph += ("The paper does not print the final training residual of its corrupted runs, so whether its ResNet20 "
                  f"fitted 50,000 corrupted labels as closely as ours fits {P.num_train} cannot be checked here; "
                  f"our training set has nK = {NUM_CLASSES * P.num_train} outputs and the network "
                  f"{spectral.num_parameters(net.model0)} parameters, against 500,000 outputs and 270,000 parameters.")
    return ("| corruption | I_init(e) | I_final(e) | I_final(f_T) | ‖r_T‖/‖y‖ | train error | I_final(y) |\n"
            "|---|---|---|---|---|---|---|\n" + "\n".join(
                f"| {lvl:.0%} | {ei:.3f} | {ef:.3f} | {fo:.3f} | {fit:.3f} | {err:.3f} | {iy:.3f} |"
                for lvl, ei, ef, fo, fit, err, iy in noise.rows) + "\n\n" + paragraph)


def fall_times(epochs, fractions):
    """Figure 5's two times: the first epoch at which the residual on I falls to 10 % of its start, and on N to
    50 % (None where it never does), with the two residual paths."""
    res_I, res_N = fractions.information * fractions.norm, fractions.nuisance * fractions.norm
    tau_I = next((int(e) for e, v in zip(epochs, res_I) if v <= 0.1 * res_I[0]), None)
    tau_N = next((int(e) for e, v in zip(epochs, res_N) if v <= 0.5 * res_N[0]), None)
    return tau_I, tau_N, res_I, res_N


def rank_dependent(P, net: DeepNetwork, tables: SimpleNamespace, rank: int) -> dict:
    """Every measurement of the deep part that depends on the cut r, at the cut ``rank``, keyed by its claim."""
    deep, levels = net.runs, sorted(net.runs)
    clean, half = deep[levels[0]], deep.get(0.5)
    sv_init, sv_final = net.init_train.singular_values, clean["final_train"].singular_values
    noise_levels = [lvl for lvl in levels if lvl >= 0.75]
    test_err = np.array([deep[lvl]["hist"].test_error_clean[-1] for lvl in levels])
    floor_r = multiclass.chance_floor(tables.counts, rank, NUM_CLASSES).expected
    q = {}

    def info(lvl, name):
        top = net.init_train if name == "train init" else deep[lvl]["final_train"]
        return net.fractions(top, deep[lvl]["y"], rank=rank).information

    q["fig4-bimodal-spectrum"] = float(sv_init[0] / sv_init[rank])
    q["fig4-separation-grows"] = float((sv_final[0] / sv_final[rank]) / (sv_init[0] / sv_init[rank]))
    a_init, a_final = info(levels[0], "train init"), info(levels[0], "train final")
    q["table1-alignment-grows"], q["table1-final-alignment"] = a_final - a_init, a_final
    # their null: the same measurements on fully corrupted labels, which carry no information about the images
    # (nan where the run has no 100 % level: a partly corrupted run still carries some, so it is no null)
    null_init, null_final = ((info(1.0, "train init"), info(1.0, "train final")) if 1.0 in levels
                             else (float("nan"), float("nan")))
    q["null"] = {"table1-alignment-grows": null_final - null_init, "table1-final-alignment": null_final}
    q["X4-clean-init-above-floor"] = a_init - floor_r
    # its null: the clean labels shuffled across the images (the same class counts, so the same floor), which no
    # longer depend on them; one projection on the initial Jacobian, no training
    clean_labels = torch.as_tensor(clean["labels"])
    shuffled = clean_labels[torch.randperm(len(clean_labels), generator=generator(P.seed, "null-shuffled-labels"))]
    y_shuffled = multiclass.stack_outputs(data.one_hot(shuffled, NUM_CLASSES).double())
    q["null"]["X4-clean-init-above-floor"] = net.fractions(net.init_train, y_shuffled, rank=rank).information - floor_r
    q["X4-corrupted-init-on-floor"] = [abs(info(lvl, "train init") - floor_r) for lvl in noise_levels] or float("nan")
    q["tables-heavy-corruption-alignment"] = [(info(lvl, "train final") - floor_r) / (a_final - floor_r)
                                              for lvl in noise_levels] or float("nan")
    n_fin = np.array([net.fractions(deep[lvl]["final_train"], deep[lvl]["y"], rank=rank).nuisance for lvl in levels])
    q["n_final"] = n_fin
    if len(levels) >= 4:
        from scipy.stats import pearsonr
        q["fig7-nuisance-grows-with-corruption"] = stats.rank_correlation(levels, n_fin)
        q["fig15-error-tracks-nuisance"] = pearsonr(n_fin, test_err)[0]
    elif 0.5 in deep:
        q["fig7-nuisance-grows-with-corruption"] = float(n_fin[levels.index(0.5)] - n_fin[0])
    hist = clean["hist"]
    fr = net.fractions(clean["final_train"], hist.train_residuals, rank=rank)
    tau_I, tau_N, res_I, res_N = fall_times(hist.epochs, fr)
    q["fig5-fast-on-I-slow-on-N"] = (tau_I / tau_N if tau_N else 0.0) if tau_I else float("nan")
    q["tau_I"], q["res_I"], q["res_N"], q["fr_path"] = tau_I, res_I, res_N, fr
    # its null: a random r-dimensional subspace of the outputs in place of I, which the training Jacobian did not
    # choose; a residual that never falls to 10 % there is counted as falling after the last epoch
    fr_rows = np.asarray(hist.train_residuals).shape[-1]
    random_basis = torch.linalg.qr(torch.randn(fr_rows, rank, dtype=torch.float64,
                                               generator=generator(P.seed, "null-random-subspace"))).Q
    null_I, null_N, _, _ = fall_times(hist.epochs, multiclass.projection_fractions(
        random_basis, torch.as_tensor(np.asarray(hist.train_residuals, dtype=np.float64))))
    null_I = null_I if null_I is not None else int(hist.epochs[-1]) + 1
    q["null"]["fig5-fast-on-I-slow-on-N"] = null_I / null_N if null_N else 0.0
    if half is not None:
        # Fig. 6: between the dip and the end, the test residual grows on N (of the test Jacobian at the dip)
        h = half["hist"]
        ft = net.fractions(half["dip_test"], h.test_residuals, rank=rank)
        e_I, e_N = (ft.information * ft.norm) ** 2, (ft.nuisance * ft.norm) ** 2
        i_dip = h.index_of(half["dip_epoch"])
        d_I, d_N = e_I[-1] - e_I[i_dip], e_N[-1] - e_N[i_dip]
        q["fig6-rise-through-nuisance"] = (d_N - abs(d_I)) / float(ft.norm[0]) ** 2
        q["fig6_parts"] = (d_N / float(ft.norm[0]) ** 2, d_I / float(ft.norm[0]) ** 2)
    q["tables-y-vs-r0"] = max(abs(net.fractions(top, y_v, rank=rank).information
                                  - net.fractions(top, r0_v, rank=rank).information) for top, y_v, r0_v in tables.cases)
    q["floor"] = floor_r
    return q


def spectrum_density(P, net: DeepNetwork) -> dict:
    """Figure 9: stochastic Lanczos quadrature (``slq_vectors`` start vectors, ``slq_steps`` steps on J Jᵀ) of the
    training Jacobian at initialization and after clean training."""
    clean = net.runs[sorted(net.runs)[0]]
    densities = {}
    for name, model in (("initialization", net.model0), ("after training (clean)", clean["model"])):
        operator = spectral.jacobian_gram_operator(model, net.split.X_train.to(net.device))
        densities[name] = spectral.slq_density(operator, num_vectors=P.slq_vectors, num_steps=P.slq_steps,
                                               generator=generator(P.seed, "slq", name))
    return densities


def cut_sensitivity_markdown(Q: dict, passes: dict, cut_gaps: dict, ranks) -> str:
    """The gap s_r/s_(r+1) at each cut tried, and every r-dependent claim's measurement and outcome per cut."""
    from paperlib.core import ledger as L

    def state(rank, claim_id):
        if not L._is_finite(Q[rank][claim_id]):
            return "no data"
        return "in range" if passes[claim_id][rank] else "out of range"

    cell = lambda rank, claim_id: ("no data" if state(rank, claim_id) == "no data"
                                   else f"{L._fmt(Q[rank][claim_id])} ({state(rank, claim_id)})")
    rows = [f"| `{claim_id}` | " + " | ".join(cell(rank, claim_id) for rank in ranks)
            + " |" for claim_id in passes]
    flips = [claim_id for claim_id, by_rank in passes.items() if len(set(by_rank.values())) > 1]
    return ("**Sensitivity to the cut.** s_r/s_(r+1): " + "; ".join(
        f"{name} " + ", ".join(f"{g:.3f} (r = {rank})" for g, rank in zip(gaps, ranks)) for name, gaps in cut_gaps.items())
        + "\n\n| claim | " + " | ".join(f"r = {rank}" for rank in ranks) + " |\n|---|" + "---|" * len(ranks) + "\n"
        + "\n".join(rows)
        + ("\n\nChecks whose outcome changes with r: " + ", ".join(f"`{c}`" for c in flips) + "." if flips
           else "\n\nNo check changes its outcome between these cuts."))


def fit_threshold(level: float) -> float:
    """The training error (on the given labels) below which a deep run counts as having fitted them: 0.1 on
    clean labels, 0.2 on corrupted ones (Tables 1-7 compare networks trained to fit)."""
    return 0.1 if level == 0 else 0.2


def fits(hist, level: float) -> bool:
    return hist.train_error[-1] <= fit_threshold(level) and not hist.diverged


def training_outcome(hist, level: float) -> str:
    """How a deep run ended, in words: diverged, did not fit its labels, or fitted them."""
    if hist.diverged:
        return f"diverged at epoch {hist.diverged_at}"
    if not fits(hist, level):
        return f"did not fit its labels (train error {hist.train_error[-1]:.3f} above {fit_threshold(level):g})"
    return "fitted its labels"
