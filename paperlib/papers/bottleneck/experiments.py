r"""The experiments of the bottleneck chapter (Jacot, 2023), one function per section: each takes the
chapter's parameters ``P`` (and the device) and returns its measurements; the chapter records the claims.
Every draw comes from ``generator(P.seed, label)`` or ``derive_seed(P.seed, ...)`` in a fixed order, so a
function's numbers do not depend on which other sections ran.

* :func:`linear_costs`: the closed form R(A; L), its expansion and the two constructions, and
  Proposition 5's identity network (C1, C2, C4);
* :func:`trained_linear`: deep linear networks trained to the regularized optimum (C1's falsifier);
* :func:`random_networks`, :func:`example20`, :func:`subadditivity`: inequalities that hold for every
  parameter, Jacot's Example 20 and the linear subadditivity laws;
* :func:`depth_sweep` and :func:`sweep_summary`: Figure 1 and Theorems 3, 6, 7 and Corollary 8 on every
  trained network; :func:`profile`: Figure 1(b) with the nonlinear g;
* :func:`weight_decay_sweep`, :func:`other_ranks`, :func:`offset_control`: the controls of §5;
* :func:`symmetry`: the symmetry task of Figure 2.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import torch

from paperlib.core.seeding import derive_seed, generator
from paperlib.data.synthetic import random_orthonormal
from paperlib.papers.bottleneck import deepfc as df, repcost as rc

LINEAR_SINGULAR_VALUES = (10.0, 3.0, 0.5)  # the rank-3 matrix of §1
INTERPOLATION_DEPTHS = (4, 8, 16, 32, 64, 128, 256)
TRAINED_LINEAR_SINGULAR_VALUES = (3.0, 1.0)  # the 5 x 5 rank-2 target of the trained linear networks
NUM_PROBES = 32  # training inputs at which the Jacobian bounds are evaluated
BALANCE_TOL = 0.01  # a run is balanced when its relative balancedness residual is at most this
# a "rank-k* run": train MSE / Var(y) below RANK_K_MAX_MSE (the spec's gate, A9), s_k* >= 0.5 and s_k*/s_(k*+1) >= 4
RANK_K_MAX_MSE, RANK_K_MIN_SINGULAR_VALUE, RANK_K_MIN_GAP = 0.05, 0.5, 4.0
# a run "fits the data" when its train MSE / Var(y) is at most this: E1-fits' level, and Theorem 10's sense (a rank-1
# network that misses one latent direction loses that direction's share of the variance, a few per cent here)
FIT_TOL = 0.01
# the depths E1-rank-gap and E1-rank-count judge: from 4, up to 24, below the paper's collapse to zero parameters
# "for L > 25" (Fig. 1); relations.yaml asks for one such depth
RANK_DEPTHS = (4, 24)
# Fig. 1(a) marks a run by whether its "final train cost is below or above 0.1"; we read the cost as train MSE / Var(y)
PAPER_COST_MARK = 0.1
PAPER_COLLAPSE_DEPTH = 25  # Fig. 1(a): "training fails and recover the zero parameters for L > 25"


def init(layer_widths, seeds, device):
    """Stacked He-initialized networks of one architecture, on ``device``."""
    return [(W.to(device), b.to(device)) for W, b in df.init_params(layer_widths, seeds)]


def train(layer_widths, X, Y, seeds, weight_decay, steps, lr, device):
    """Stacked networks of one architecture, trained together; returns the fit (weights on the CPU)."""
    return df.train_adam(init(layer_widths, seeds, device), X, Y, weight_decay=weight_decay, steps=steps, lr=lr)


# ------------------------------------------------------------------ §1 linear networks


def linear_costs(P) -> SimpleNamespace:
    """R(A; L) against the balanced factorization, the expansion's next term and R⁽²⁾'s limit (per depth of
    ``linear_depths``), the interpolation construction of Theorem 3.3's proof on a 5×5 rank-3 matrix, and
    Proposition 5's identity network on a k*-planar completely positive cone (one stream, in this order)."""
    gen = generator(P.seed, "linear")
    s_true = np.array(LINEAR_SINGULAR_VALUES)
    A = rc.matrix_with_singular_values(20, 20, s_true, gen)
    out = SimpleNamespace(rows=[], fact_errors=[], expansion_ratio={}, r2_limit={})
    for depth in P.linear_depths:
        R = rc.linear_cost(s_true, depth)
        e = rc.linear_expansion(s_true, depth)
        Ws = rc.min_norm_factorization(A, depth, gen)
        out.fact_errors.append(max(float((df.linear_product(Ws) - A).abs().max()) / 10, abs(sum(float((W ** 2).sum()) for W in Ws) - R) / R))
        out.expansion_ratio[depth] = (R - e["three_terms"]) * depth ** 2 / e["R3"]
        out.r2_limit[depth] = (R - depth * e["R0"] - e["R1"]) * depth / e["R2"]
        out.rows.append(f"| {depth} | {R:.4f} | {e['three_terms']:.4f} | {out.expansion_ratio[depth]:.3f} | "
                        f"{out.r2_limit[depth]:.3f} |")
    out.table = ("| L | R(A; L) | L R0 + R1 + R2/L | error L² / ((4/3) Σ log³ s) | L (R − Lk − R1) / R2 |\n"
                 "|---|---|---|---|---|\n" + "\n".join(out.rows))

    A5 = rc.matrix_with_singular_values(5, 5, [3.0, 1.5, 0.4], gen)
    s5 = torch.linalg.svdvals(A5)[:3].numpy()
    out.interp_gap, out.interp_product = {}, []
    for depth in INTERPOLATION_DEPTHS:
        Ws = rc.interpolation_construction(A5, depth)
        out.interp_product.append(float((df.linear_product(Ws) - A5).abs().max()))
        gap = sum(float((W ** 2).sum()) for W in Ws) - 3 * depth - 2 * np.log(s5).sum()
        out.interp_gap[depth] = (gap, rc.linear_cost(s5, depth) - 3 * depth - 2 * np.log(s5).sum())
    out.interp_scaled = [out.interp_gap[d][0] * d for d in (32, 64, 128, 256)]

    k = P.true_rank
    O = random_orthonormal(6, k, gen)
    cone = torch.rand(200, k, generator=gen, dtype=torch.float64) @ O.T
    identity_net = [(O.T.clone(), torch.zeros(k, dtype=torch.float64))] + \
        [(torch.eye(k, dtype=torch.float64), torch.zeros(k, dtype=torch.float64))] * 6 + [(O.clone(), torch.zeros(6, dtype=torch.float64))]
    out.identity_error = float((df.forward(identity_net, cone) - cone).abs().max())
    out.identity_excess = float(df.squared_norm(identity_net)) - k * len(identity_net)
    return out


def trained_linear(P) -> SimpleNamespace:
    """Bias-free linear networks of every depth, width and seed fit a 5×5 rank-2 A by Adam with weight decay
    (every width of a depth in one stack, narrower ones zero-padded, which training leaves exact). Per run:
    the learned ‖θ‖², the closed form's prediction, Adam's final resolution 2 η_final Σ|θ_i|, the excess of
    the objective and R(A_θ; L) of the learned product."""
    gen = generator(P.seed, "linear-train")
    s_target = np.array(TRAINED_LINEAR_SINGULAR_VALUES)
    A_target = rc.matrix_with_singular_values(5, 5, s_target, gen)
    widest = max(P.linear_train_widths)
    runs = []
    for depth in P.linear_train_depths:
        stack = [df.init_linear([5] + [w] * (depth - 1) + [5], [derive_seed(P.seed, "linear-train", depth, w, i)
                                                                   for i in range(P.linear_train_seeds)],
                                P.linear_init_scale, pad_width=widest) for w in P.linear_train_widths]
        fit = df.train_linear_adam([torch.cat(Ws) for Ws in zip(*stack)], A_target, weight_decay=P.linear_weight_decay,
                                   steps=P.linear_steps, lr=P.linear_lr)
        _, predicted_norm, predicted_objective = rc.regularized_linear_optimum(s_target, depth, P.linear_weight_decay)
        learned_sv = torch.linalg.svdvals(df.linear_product(fit.weights)).numpy()
        for index, (w, i) in enumerate((w, i) for w in P.linear_train_widths for i in range(P.linear_train_seeds)):
            resolution = 2 * fit.final_lr * sum(float(W[index].abs().sum()) for W in fit.weights)
            sv = learned_sv[index]
            runs.append(dict(depth=depth, width=w, seed=i, norm=float(fit.squared_norm[index]), predicted=predicted_norm,
                             resolution=resolution, excess_objective=float(fit.objective[index]) - predicted_objective,
                             cost_of_product=rc.linear_cost(sv[sv > 1e-8 * sv[0]], depth)))
    table = ("| L | R(A; L) | predicted ‖θ‖² at λ | width | learned ‖θ‖² (per seed) | R(A_θ; L) of the learned product | "
             "deviation / resolution |\n|---|---|---|---|---|---|---|\n" + "\n".join(
                 f"| {d} | {rc.linear_cost(s_target, d):.4f} | {rows[0]['predicted']:.4f} | {w} | "
                 + ", ".join(f"{r['norm']:.4f}" for r in rows) + " | " + ", ".join(f"{r['cost_of_product']:.4f}" for r in rows)
                 + " | " + ", ".join(f"{(r['norm'] - r['predicted']) / r['resolution']:+.3f}" for r in rows) + " |"
                 for d in P.linear_train_depths for w in P.linear_train_widths
                 for rows in [[r for r in runs if r["depth"] == d and r["width"] == w]]))
    width_pairs = [(a, b) for a in runs for b in runs
                   if a["depth"] == b["depth"] and a["seed"] == b["seed"] and a["width"] < b["width"]]
    return SimpleNamespace(runs=runs, table=table, width_pairs=width_pairs)


# ------------------------------------------------------------------ §2–3 inequalities, Example 20


def random_networks(P) -> SimpleNamespace:
    """``random_nets`` random networks (depth 2–11, widths 4–19, slopes 0, 0.2, −0.5 in turn, random biases) at
    32 inputs each: the slacks of Theorem 3's norm bound and Theorem 6's Horn form, and Proposition 9's ratio
    per slope, both the proof's inequality and the statement as printed (an operator norm, per input under both
    readings; inputs with Jf(x) = 0, where both sides vanish, left out and counted)."""
    gen = generator(P.seed, "random-nets")
    out = SimpleNamespace(norm_slack=[], horn_slack=[], prop9={0.0: [], 0.2: [], -0.5: []},
                          prop9_printed={(a, reading): [] for a in (0.0, 0.2, -0.5) for reading in ("mixed", "diagonal")},
                          zero_jacobians=0)
    for trial in range(P.random_nets):
        depth = int(torch.randint(2, 12, (1,), generator=gen))
        widths = [int(w) for w in torch.randint(4, 20, (depth + 1,), generator=gen)]
        slope = (0.0, 0.2, -0.5)[trial % 3]
        net = [(torch.randn(o, i, generator=gen, dtype=torch.float64) * math.sqrt(2 / i),
                0.3 * torch.randn(o, generator=gen, dtype=torch.float64)) for i, o in zip(widths[:-1], widths[1:])]
        X = torch.randn(32, widths[0], generator=gen, dtype=torch.float64)
        bounds = rc.jacobian_bounds(net, X, range(1, min(5, widths[0], widths[-1]) + 1), slope)
        out.norm_slack.append(bounds.norm_slack)
        out.horn_slack.append(min(v for k, v in bounds.horn_slack.items() if bounds.resolved[k]))
        ratios = rc.prop9_ratio(net, X, slope)
        out.zero_jacobians += int(torch.isnan(ratios).sum())
        out.prop9[slope].append(nanmin(ratios))
        for reading, printed in rc.prop9_operator_ratios(net, X, slope).items():
            out.prop9_printed[slope, reading].append(printed.numpy())  # every input, for the figure
    return out


def balanced_rank_one(P, depths=(2, 8, 32, 64), s1=2.5) -> SimpleNamespace:
    """Prop. 9's two operator-norm ratios on the balanced rank-one network (:func:`repcost.balanced_rank_one_network`)
    at 8 positive inputs per depth, where the derivation gives 1/2 (mixed) and 1 (diagonal): the largest deviation."""
    error = 0.0
    for depth in depths:
        net = rc.balanced_rank_one_network([5] + [6] * (depth - 1) + [3], s1)
        X = torch.rand(8, 5, generator=generator(P.seed, "balanced", depth), dtype=torch.float64)  # positive: u_0ᵀx > 0
        ratios = rc.prop9_operator_ratios(net, X)
        error = max(error, float((ratios["mixed"] - 0.5).abs().max()), float((ratios["diagonal"] - 1.0).abs().max()))
    return SimpleNamespace(depths=depths, error=error)


def nanmin(values: torch.Tensor) -> float:
    """The smallest value that is not NaN; NaN when all are."""
    return float(np.nanmin(values.numpy())) if not torch.isnan(values).all() else math.nan


def example20(P) -> SimpleNamespace:
    """Jacot's explicit network for f(x, y, z) = (x, y, z + σ(x − y)) at each depth of ``example20_depths`` on
    1000 points of [0, 1]³: its largest error, ‖θ‖² − 3L against the corrected and the printed formula, and
    the largest activation norm."""
    gen = generator(P.seed, "example20")
    X3 = torch.rand(1000, 3, generator=gen, dtype=torch.float64)
    out = SimpleNamespace(rows=[], exact_err=[], formula_err=[], excess=[], act_max=[])
    for depth in P.example20_depths:
        net = rc.example20_network(depth)
        result, _, act = df.forward(net, X3, keep=True)
        out.exact_err.append(float((result - rc.example20_target(X3)).abs().max()))
        out.excess.append(float(df.squared_norm(net)) - 3 * depth)
        out.formula_err.append(abs(out.excess[-1] - rc.example20_norm_excess(depth)))
        out.act_max.append(max(float(a.norm(dim=1).max()) for a in act))
        eps = depth ** -0.75
        printed = 2 * math.exp(2 * eps) + math.exp(-4 * eps) + 2 * math.exp(-2 * eps) + math.exp(4 * eps) - 6 \
            + 2 * math.exp(-(depth - 2) * eps) + math.exp(-2 * (depth - 2) * eps)
        out.rows.append(f"| {depth} | {out.excess[-1]:.4f} | {rc.example20_norm_excess(depth):.4f} | {printed:.4f} | "
                        f"{out.act_max[-1]:.2f} |")
    out.table = ("| L | ‖θ‖² − 3L | corrected formula | formula as printed | largest activation norm |\n"
                 "|---|---|---|---|---|\n" + "\n".join(out.rows))
    return out


def subadditivity(P, draws=1000) -> SimpleNamespace:
    """Over ``draws`` draws: the largest error of log|BC| = log|B| + log|C| (5×5), violations of
    log|B+C|_+ <= log|B|_+ + log|C|_+ for a rank-2 plus a rank-3 6×6 matrix, and of Horn's
    ‖log s(BC)‖ <= ‖log s(B)‖ + ‖log s(C)‖."""
    gen = generator(P.seed, "subadditivity")
    comp_err, add_viol, tri_viol = 0.0, 0, 0
    logs = lambda M: torch.log(torch.linalg.svdvals(M))
    for _ in range(draws):
        B = torch.randn(5, 5, generator=gen, dtype=torch.float64)
        C = torch.randn(5, 5, generator=gen, dtype=torch.float64)
        comp_err = max(comp_err, abs(float(rc.log_pdet(B @ C, 5) - rc.log_pdet(B, 5) - rc.log_pdet(C, 5))))
        tri_viol += int(float(logs(B @ C).norm()) > float(logs(B).norm() + logs(C).norm()) + 1e-9)
        # rank-2 + rank-3 with independent (generic) row and column spaces
        B2 = torch.randn(6, 2, generator=gen, dtype=torch.float64) @ torch.randn(2, 6, generator=gen, dtype=torch.float64)
        C3 = torch.randn(6, 3, generator=gen, dtype=torch.float64) @ torch.randn(3, 6, generator=gen, dtype=torch.float64)
        add_viol += int(float(rc.log_pdet(B2 + C3, 5)) > float(rc.log_pdet(B2, 2) + rc.log_pdet(C3, 3)) + 1e-9)
    return SimpleNamespace(composition_error=comp_err, addition_violations=add_viol, triangle_violations=tri_viol)


# ------------------------------------------------------------------ §4 the depth sweep


def analyse(P, net, depth, seed, mse, X, X_test, Y_test, k):
    """Every quantity of Figure 1 and Theorems 3, 6, 7, Corollary 8 for one trained network."""
    sv_mid = torch.linalg.svdvals(net[depth // 2][0])
    J = df.jacobian(net, X[:NUM_PROBES])  # computed once, used by Theorems 3, 6 and 7
    bounds = rc.jacobian_bounds(net, X[:NUM_PROBES], range(1, 6), jacobian=J)
    trace_weights, trace_biases = df.ntk_trace_parts(net, X[:NUM_PROBES])
    measured7, bound7 = rc.theorem7_bound(net, X[:NUM_PROBES], k, jacobian=J, weight_trace=trace_weights)
    rep_svs = rc.representation_singular_values(net, X)
    pred = df.forward(net, X_test.double())
    return dict(depth=depth, seed=seed, train_mse=float(mse), test_mse=float(((pred - Y_test) ** 2).mean()),
                pred=pred, sv_mid=sv_mid.numpy(), rank=int((sv_mid > P.sv_threshold).sum()),
                gap=float(sv_mid[k - 1] / sv_mid[k]), weight_norm=float(df.weight_norm(net)),
                theta_norm=float(df.squared_norm(net)), bounds=bounds,
                sv_to_one=float((sv_mid[:k] - 1).abs().max()), sum_delta=sum(bounds.deltas[k]),
                ntk_per_L=float((trace_weights + trace_biases).mean()) / depth, thm7=float(np.max(measured7 / bound7)),
                balance=df.balancedness_residual(net), reps=[float(s[k] / s[0]) if len(s) > k else 0.0 for s in rep_svs],
                prop9_mixed=rc.prop9_operator_ratios(net, X[:NUM_PROBES], readings=("mixed",))["mixed"].cpu().numpy(),
                cor8=(rc.corollary8_bound(net, X, k), float(np.median([s[k] / math.sqrt(X.shape[0]) for s in rep_svs if len(s) > k]))),
                profile=[int((s > P.sv_threshold).sum()) for s in df.singular_values(net)], net=net)


def bound_ratio(measured: float, bound: float) -> float:
    """measured / bound, for a bound that may be 0 (then inf when measured > 0, else 0) or inf (then 0)."""
    if bound == 0:
        return math.inf if measured > 0 else 0.0
    return measured / bound


def depth_weight_decays(P):
    """λ of each depth of the sweep: ``weight_decay`` at every depth (the paper), or, for the control
    ``decay-falls-with-depth``, ``weight_decay`` · (L / min(depths))^``weight_decay_depth_exponent``. §3 prices a
    dimension at about λL; an exponent below −1 makes that price fall with depth. A single number when the exponent
    is 0, so that the paper's setting runs exactly as before the parameter existed."""
    if P.weight_decay_depth_exponent == 0:
        return P.weight_decay
    shallowest = min(P.depths)
    return [P.weight_decay * (depth / shallowest) ** P.weight_decay_depth_exponent for depth in P.depths]


def depth_sweep(P, device) -> SimpleNamespace:
    """Networks of every depth of ``depths`` and ``seeds`` seeds (one batched program, exactly as if each were
    trained alone: :func:`deepfc.train_adam_depths`) fit a target of bottleneck rank k*; every trained network
    analysed (:func:`analyse`), and at ``ntk_depths`` the top NTK eigenvalue of a rank-k* run / (N L)."""
    k = P.true_rank
    data = rc.bottleneck_data(P.num_train, P.num_test, k, P.latent, P.g_kind, generator(P.seed, "data-A"))
    out = SimpleNamespace(data=data, y_var=float(data.Y_test.var()), runs=[], ntk_top={}, log=[])
    depth_seeds = [derive_seed(P.seed, "A", s) for s in range(P.seeds)]
    decays = depth_weight_decays(P)
    initial = [init([data.X.shape[1]] + [P.width] * (depth - 1) + [data.Y.shape[1]], depth_seeds, device)
               for depth in P.depths]
    # the null of the norm's slope: the same networks before training, which no penalty has shaped yet
    initial_norms = [[float(df.weight_norm(df.select(layers, s))) for s in range(P.seeds)] for layers in initial]
    # and of Corollary 8's layer count: the initial networks' representations, which nothing has compressed
    initial_reps = [[[float(sv[k] / sv[0]) if len(sv) > k else 0.0
                      for sv in rc.representation_singular_values(df.select(layers, s), data.X.double())]
                     for s in range(P.seeds)] for layers in initial]
    fits = df.train_adam_depths(initial, data.X, data.Y, weight_decay=decays, steps=P.steps, lr=P.lr)
    out.log.append(f"{len(P.depths)} depths x {P.seeds} seed{'s' if P.seeds != 1 else ''} trained in {fits[0].seconds:.1f} s")
    if P.weight_decay_depth_exponent != 0:
        out.log.append("λ by depth (weight_decay_depth_exponent = "
                       f"{P.weight_decay_depth_exponent:g}): " + ", ".join(f"L = {d}: {lam:.3g} (λL = {lam * d:.3g})"
                                                                       for d, lam in zip(P.depths, decays)))
    for depth, fit, norms, reps in zip(P.depths, fits, initial_norms, initial_reps):
        for s in range(P.seeds):
            out.runs.append(analyse(P, df.select(fit.layers, s), depth, s, fit.train_mse[s], data.X.double(), data.X_test,
                                    data.Y_test, k))
            out.runs[-1].update(initial_weight_norm=norms[s], initial_reps=reps[s])
        last = out.runs[-P.seeds:]
        out.log.append(f"L = {depth:>2}: ranks {[r['rank'] for r in last]}, ‖W‖² {[round(r['weight_norm'], 2) for r in last]}, "
                       f"train MSE/Var {[round(r['train_mse'] / out.y_var, 4) for r in last]}")
    for depth in P.ntk_depths:
        run = next((r for r in out.runs if r["depth"] == depth and r["rank"] == k), None)
        if run is not None:
            out.ntk_top[depth] = df.ntk_top_eigenvalue(run["net"], data.X.double(),
                                                       generator=generator(P.seed, "power", depth)) / (P.num_train * depth)
    return out


def clear_rank_gap(sv) -> float:
    """The largest gap s_j/s_(j+1) over the singular values s_j >= 0.5 (a well-defined rank j)."""
    return max((float(sv[j] / sv[j + 1]) for j in range(min(6, len(sv) - 1)) if sv[j] >= 0.5), default=0.0)


def sweep_summary(P, sweep) -> SimpleNamespace:
    """The quantities the depth-sweep claims judge: the rank-k* runs (the middle matrix has k* singular values
    >= 0.5 separated by a gap >= 4; the paper's count > ``sv_threshold`` converges later and is reported
    apart), the norm's slope over L >= 6, c1 and Σδ by depth, Tr Θ/L, balancedness, Corollary 8."""
    k, runs, y_var = P.true_rank, sweep.runs, sweep.y_var
    gated = [r for r in runs if r["train_mse"] / y_var < RANK_K_MAX_MSE]
    rank_k = [r for r in gated if r["sv_mid"][k - 1] >= RANK_K_MIN_SINGULAR_VALUE and r["gap"] >= RANK_K_MIN_GAP]
    out = SimpleNamespace(rank_k=rank_k, deep=[r for r in rank_k if r["depth"] >= 6])
    out.slope_runs = [r for r in rank_k if r["depth"] >= (6 if len(P.depths) > 2 else 0)]
    if len({r["depth"] for r in out.slope_runs}) >= 2:
        out.fit_slope, out.fit_intercept = np.polyfit([r["depth"] for r in out.slope_runs],
                                                      [r["weight_norm"] for r in out.slope_runs], 1)
        out.initial_slope = float(np.polyfit([r["depth"] for r in out.slope_runs],
                                             [r["initial_weight_norm"] for r in out.slope_runs], 1)[0])
    else:
        out.fit_slope, out.fit_intercept, out.initial_slope = math.nan, math.nan, math.nan
    out.c1_by_depth = {d: np.median([r["bounds"].c1[k] for r in rank_k if r["depth"] == d])
                       for d in sorted({r["depth"] for r in rank_k if r["depth"] >= 6})}
    c1_values = list(out.c1_by_depth.values())
    out.c1_values = c1_values
    # the spec's second half of A4: c1(L) = R1 + R2/L + O(1/L²), so the fit c1 = a + b/L has b = R2 >= 0
    out.b_fit = float(np.polyfit(1 / np.array(list(out.c1_by_depth)), c1_values, 1)[0]) if len(c1_values) >= 3 else math.nan
    out.horn_trained = min(v for r in runs for kk, v in r["bounds"].horn_slack.items() if r["bounds"].resolved[kk])
    out.norm_trained = min(r["bounds"].norm_slack for r in runs)
    out.unresolved = ", ".join(sorted({str(kk) for r in runs for kk, ok in r["bounds"].resolved.items() if not ok}))
    out.delta_by_depth = {d: float(np.median([r["sum_delta"] for r in out.deep if r["depth"] == d]))
                          for d in sorted({r["depth"] for r in out.deep})}
    out.to_one = {d: np.median([r["sv_to_one"] for r in rank_k if r["depth"] == d]) for d in sorted({r["depth"] for r in rank_k})}
    out.hidden_ratios = [ratio for r in rank_k for ratio in r["reps"][1:r["depth"] - 2]]
    out.initial_hidden_ratios = [ratio for r in rank_k for ratio in r["initial_reps"][1:r["depth"] - 2]]
    out.hidden_ratios_enough = hidden_layers_enough(rank_k, out.hidden_ratios)
    out.balance_k = max((r["balance"] for r in rank_k), default=math.nan)
    out.ntk_by_depth = {d: np.median([r["ntk_per_L"] for r in rank_k if r["depth"] == d])
                        for d in P.depths if any(r["depth"] == d for r in rank_k)}
    # Fig. 1(a)'s ranges: the paper's count (singular values above sv_threshold of the middle matrix) of every run,
    # fitting or not, its median over seeds per depth
    out.rank_by_depth = {d: float(np.median([r["rank"] for r in runs if r["depth"] == d]))
                         for d in sorted({r["depth"] for r in runs})}
    out.beyond_collapse = [r for r in runs if r["depth"] > PAPER_COLLAPSE_DEPTH]
    out.under = [r for r in runs if r["rank"] < k]
    out.fitting_under = [r for r in out.under if r["train_mse"] / y_var <= FIT_TOL]
    out.other_runs = [r for r in runs if all(r is not q for q in rank_k)]
    pairs_same = [(a, b) for i, a in enumerate(rank_k) for b in rank_k[i + 1:] if a["seed"] == b["seed"]]
    out.pairs_same = pairs_same
    out.same_function = max((float((a["pred"] - b["pred"]).norm() / b["pred"].norm()) for a, b in pairs_same), default=math.nan)
    # what the two fits alone allow, by the triangle inequality through the test targets: ‖f_a − Y‖ + ‖f_b − Y‖
    out.same_function_from_fits = max((float((math.sqrt(a["test_mse"]) + math.sqrt(b["test_mse"])) * math.sqrt(b["pred"].numel())
                                             / b["pred"].norm()) for a, b in pairs_same), default=math.nan)
    return out


def rank_ranges(rank_by_depth: dict) -> str:
    """Fig. 1(a)'s ranges of depth: consecutive depths of the sweep with the same median rank, e.g.
    "rank 3 at L = 4; rank 2 at L = 6-20"."""
    ranges = []
    for depth, rank in rank_by_depth.items():
        if ranges and ranges[-1][0] == rank:
            ranges[-1][2] = depth
        else:
            ranges.append([rank, depth, depth])
    return "; ".join(f"rank {rank:g} at L = {lo}" + (f"-{hi}" if hi != lo else "") for rank, lo, hi in ranges)


def rank_rises(runs, rank_by_depth: dict) -> str:
    """Where the median rank rises from one depth of the sweep to the next: each run's rank there and its
    middle matrix's leading singular values (one past the rank), so that a reader sees whether a direction
    counted against ``sv_threshold`` is a clear one or a small one near the threshold."""
    depths = list(rank_by_depth)
    rising = [d for prev, d in zip(depths, depths[1:]) if rank_by_depth[d] > rank_by_depth[prev]]
    return "; ".join(f"L = {r['depth']}, seed {r['seed']}: rank {r['rank']}, singular values "
                     + ", ".join(f"{s:.3f}" for s in np.asarray(r["sv_mid"])[:r["rank"] + 1])
                     for d in rising for r in runs if r["depth"] == d)


def profile(P, device) -> dict:
    """Figure 1(b) with the paper's nonlinear g: per depth of ``relu_g_depths``, the count of singular values
    above ``sv_threshold`` in every layer, the spectra and the fit."""
    profiles = {}
    if not P.relu_g_depths:
        return profiles
    k = P.true_rank
    data = rc.bottleneck_data(P.relu_g_num_train, P.num_test, k, P.latent, "relu", generator(P.seed, "data-relu-g"))
    fits = df.train_adam_depths([init([20] + [P.relu_g_width] * (depth - 1) + [20], [derive_seed(P.seed, "relu-g", depth)], device)
                                 for depth in P.relu_g_depths], data.X, data.Y, weight_decay=P.weight_decay,
                                steps=P.steps, lr=P.lr)
    for depth, fit in zip(P.relu_g_depths, fits):
        net = df.select(fit.layers, 0)
        profiles[depth] = dict(counts=[int((s > P.sv_threshold).sum()) for s in df.singular_values(net)],
                               svs=df.singular_values(net), mse=fit.train_mse[0] / float(data.Y.var()))
    return profiles


# ------------------------------------------------------------------ §5 controls


def weight_decay_sweep(P, sweep, device) -> list:
    """One network for every λ of ``sweep_weight_decays`` at every depth of ``sweep_depths`` (one batched
    program, one weight decay per network) on the depth sweep's data: the middle rank, the fit and the
    balancedness residual (a stationary point is balanced)."""
    pairs = [(lam, depth) for lam in P.sweep_weight_decays for depth in sorted(P.sweep_depths)]
    if not pairs:
        return []
    data = sweep.data
    fits = df.train_adam_depths([init([20] + [P.width] * (depth - 1) + [20], [derive_seed(P.seed, "sweep", lam, depth)], device)
                                 for lam, depth in pairs], data.X, data.Y, weight_decay=[lam for lam, _ in pairs],
                                steps=P.sweep_steps, lr=P.lr)
    rows = []
    for (lam, depth), fit in zip(pairs, fits):
        net = df.select(fit.layers, 0)
        sv = torch.linalg.svdvals(net[depth // 2][0])
        rows.append(dict(lam=lam, depth=depth, rank=int((sv > P.sv_threshold).sum()), mse=fit.train_mse[0] / sweep.y_var,
                         balance=df.balancedness_residual(net)))
    return rows


def drop_depths(rows: list, k: int) -> dict:
    """For each λ of the weight-decay sweep, the first depth of its grid whose middle rank is below k
    (``math.inf`` when the rank stays >= k over the grid)."""
    return {lam: min((r["depth"] for r in rows if r["lam"] == lam and r["rank"] < k), default=math.inf)
            for lam in sorted({r["lam"] for r in rows})}


def other_ranks(P, device) -> dict:
    """The middle rank found at depth ``k_depth`` for targets of each bottleneck rank in ``k_values``."""
    data = rc.bottleneck_data(P.num_train, P.num_test, list(P.k_values), P.latent, P.g_kind, generator(P.seed, "data-k"))
    fit = train([20] + [P.width] * (P.k_depth - 1) + [20], data.X, data.Y, [derive_seed(P.seed, "k", k) for k in P.k_values],
                P.weight_decay, P.steps, P.lr, device)
    ranks = {}
    for i, k in enumerate(P.k_values):
        sv = torch.linalg.svdvals(df.select(fit.layers, i)[P.k_depth // 2][0])
        ranks[k] = int((sv > P.sv_threshold).sum())
    return ranks


def offset_control(P, device) -> SimpleNamespace:
    """A sign-symmetric (Gaussian) latent at depth ``k_depth``: the middle singular values and rank."""
    data = rc.bottleneck_data(P.num_train, P.num_test, P.true_rank, "gaussian", P.g_kind, generator(P.seed, "data-offset"))
    fit = train([20] + [P.width] * (P.k_depth - 1) + [20], data.X, data.Y, [derive_seed(P.seed, "offset")],
                P.weight_decay, P.steps, P.lr, device)
    sv = torch.linalg.svdvals(df.select(fit.layers, 0)[P.k_depth // 2][0])
    return SimpleNamespace(singular_values=sv, rank=int((sv > P.sv_threshold).sum()))


# ------------------------------------------------------------------ §6 the symmetry task


def symmetry(P, device) -> SimpleNamespace:
    """GD on C(v) = ‖vvᵀ − wwᵀ‖²: the summary-statistics reduction, the paper's ODE, the target's Jacobian rank
    and rotation invariance; then a deep network trained on the task: its fit, weight spectra, middle
    representation (2-dimensional, in bijection with u(v)) and the collapse of rotation orbits in layer 2."""
    gen = generator(P.seed, "symmetry")
    task = rc.symmetry_task(P.sym_num_train + P.num_test, P.sym_dim, P.sym_horizon, P.sym_eta, P.symmetry_breaking, gen)
    out = SimpleNamespace(task=task, exact=P.symmetry_breaking == 0)
    u_path = rc.summary_recursion(rc.summary_statistics(task.v0, task.w), P.sym_horizon, P.sym_eta)
    direct = rc.summary_statistics(task.paths, task.w)
    out.recursion_err = float((u_path - direct).abs().max() / direct.abs().max())
    n = u_path[..., 0] + u_path[..., 1]
    out.cost_err = float((n[:, 1:] ** 2 - 2 * u_path[:, 1:, 0] + 1 - task.losses).abs().max()) if out.exact else math.nan
    # the continuous-time ODE of the paper, from a tiny step
    u_small = rc.summary_recursion(direct[:, 0], 1, 1e-7)
    ode = torch.stack([-8 * (n[:, 0] - 1) * direct[:, 0, 0], -8 * n[:, 0] * direct[:, 0, 1]], -1)
    out.ode_err = float(((u_small[:, 1] - u_small[:, 0]) / 1e-7 - ode).abs().max() / ode.abs().max())

    def target_map(v0):
        return rc.symmetry_cost(rc.gd_paths(v0[None], task.w, task.E, P.sym_horizon, P.sym_eta)[0, 1:], task.w, task.E)

    out.jac_ratios = [float((s := torch.linalg.svdvals(torch.func.jacrev(target_map)(v)))[2] / s[0]) for v in task.v0[:20]]
    orbit_gen = generator(P.seed, "orbits")
    out.angles = torch.linspace(0, 2 * math.pi, 16, dtype=torch.float64)
    out.invariance = max(float((torch.stack([target_map(p) for p in rc.orbit_points(v, task.w, out.angles, orbit_gen)])
                                - target_map(v)).abs().max()) for v in task.v0[:10])

    scale = float(task.losses[:P.sym_num_train].std())
    X_s, Y_s = task.v0[:P.sym_num_train], task.losses[:P.sym_num_train] / scale
    X_st, Y_st = task.v0[P.sym_num_train:], task.losses[P.sym_num_train:] / scale
    fit = train([P.sym_dim] + [P.sym_width] * (P.sym_depth - 1) + [P.sym_horizon], X_s, Y_s, [derive_seed(P.seed, "sym-net")],
                P.sym_weight_decay, P.sym_steps, P.sym_lr, device)
    net = out.net = df.select(fit.layers, 0)
    pred = df.forward(net, X_st)
    out.test_r2 = rc.r_squared(pred, Y_st)
    out.svs = df.singular_values(net)
    out.middle = list(range(P.sym_depth // 3, 2 * P.sym_depth // 3 + 1))
    out.mid_gaps = [float(out.svs[layer][1] / out.svs[layer][2]) for layer in out.middle]
    _, act = df.masks(net, X_st)
    # Figure 2(b)'s layer: the paper draws layer 6 of 25; 0 picks the middle, where Figure 2(a) puts the bottleneck
    out.mid_layer = P.sym_representation_layer or P.sym_depth // 2
    out.rep = act[out.mid_layer]
    out.rep_c = out.rep - out.rep.mean(0)
    rep_sv = torch.linalg.svdvals(out.rep_c)
    out.rep_ratio = float(rep_sv[2] / rep_sv[0])
    pcs = out.rep_c @ torch.linalg.svd(out.rep_c, full_matrices=False)[2][:2].T
    u_test = rc.summary_statistics(X_st, task.w)
    out.r2_forward, out.r2_backward = rc.knn_r2(u_test, pcs), rc.knn_r2(pcs, u_test)
    # orbit collapse in layer 2: variance within orbits against the total variance of alpha_2
    layer2_all = act[2]
    total_var = float(((layer2_all - layer2_all.mean(0)) ** 2).sum(1).mean())
    ratios = []
    for v in X_st[:50]:
        a2 = df.masks(net, rc.orbit_points(v, task.w, out.angles, orbit_gen))[1][2]
        ratios.append(float(((a2 - a2.mean(0)) ** 2).sum(1).mean()) / total_var)
    out.orbit_ratio = float(np.median(ratios))
    out.gen = gen  # the figure's random plane continues this stream
    return out


def prop13_text() -> str:
    """Prop. 13's lower bound for Example 20's f: its Jacobians I₃ and [[1,0,0],[0,1,0],[1,−1,1]] on either side of
    x = y have log|J|_+ = 0 and a difference of nuclear norm √2."""
    J_a, J_b = torch.eye(3, dtype=torch.float64), torch.tensor([[1.0, 0, 0], [0, 1, 0], [1, -1, 1]], dtype=torch.float64)
    return (f"Prop. 13: log|J|_+ = {float(rc.log_pdet(J_a, 3)):.1e}, {float(rc.log_pdet(J_b, 3)):.1e}; nuclear norm of the "
            f"difference {float(torch.linalg.matrix_norm(J_a - J_b, ord='nuc')):.4f} (sqrt 2 = {math.sqrt(2):.4f}): a positive "
            "lower bound for any C-uniformly Lipschitz representation, which the diverging one escapes.")


def hidden_layers_enough(rank_k: list, hidden_ratios: list) -> tuple[bool, str]:
    """Whether Corollary 8's layer count has layers to count, and, if not, why: no run reached rank k*, or the
    rank-k* runs are too shallow to have hidden layers between the first and the last two."""
    if not rank_k:
        return False, "no run reached rank k*"
    return bool(hidden_ratios), "the rank-k* runs have no hidden layers"
