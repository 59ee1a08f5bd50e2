r"""The deep-network part of Oymak, Fabian, Li & Soltanolkotabi (2019), Sec. 4 and App. C,
at reduced scale: a ResNet **without BatchNorm** whose final linear output is multiplied by
an output scale :math:`s`, **no softmax**, a least-squares loss and plain SGD, on the offline
digit datasets of :mod:`paperlib.data.digits`.

Conventions (spec ``jacobian-lowrank.md`` Secs. 4, 5 P6, 8):

- **Inputs** are the 8x8 digit images divided by 16, i.e. scaled to :math:`[0, 1]`
  (not standardized), as float32 tensors of shape ``(N, 1, 8, 8)``.
- **Residuals** :math:`r = f(X) - Y` are stored flattened **class-major**: entry
  :math:`\ell n + i` is :math:`f_\ell(x_i) - y_{i\ell}`, i.e. :math:`r = [r^{(1)}; \dots; r^{(K)}]`
  with :math:`r^{(\ell)} \in \mathbb R^n` (the paper's Sec. 5 stacking). The Jacobians of
  :mod:`paperlib.maths.spectral` use the same row order, so ``U_r.T @ r`` is a valid projection.
- **Loss** (named, pitfall 5): ``"half_sum_mean_batch"`` is
  :math:`\frac1B\sum_{i\in\text{batch}}\tfrac12\|f(x_i) - y_i\|^2` (the default);
  ``"mse_mean"`` is PyTorch's ``MSELoss()`` (mean over :math:`B\cdot K`, 2K times smaller
  gradients); ``"half_sum"`` is :math:`\tfrac12\sum_{i\in\text{batch}}\|f(x_i) - y_i\|^2`.
- **Divergence** (a non-finite loss, or an epoch loss above ``1e3`` times the initial loss;
  :func:`paperlib.nets.training.is_diverged`) stops a run and is reported as a flag, never raised.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from paperlib.core.devices import one_cpu_thread
from paperlib.nets.graphs import GraphedEpoch, graphs_enabled
from paperlib.nets.optim import FOREACH
from paperlib.nets.training import DIVERGENCE_THRESHOLD, TrainingLoop
from paperlib.papers.jacobian_lowrank.multiclass import stack_outputs

__all__ = [
    "BasicBlockNoBN",
    "ResNetNoBN",
    "LOSSES",
    "batch_loss",
    "SGDHistory",
    "train_sgd",
    "evaluate",
]

# --------------------------------------------------------------------------- model


def _kaiming(weight: torch.Tensor, generator):
    nn.init.kaiming_normal_(weight, mode="fan_in", nonlinearity="relu", generator=generator)


class BasicBlockNoBN(nn.Module):
    r"""``relu(shortcut(h) + alpha * conv2(relu(conv1(h))))`` with 3x3 convolutions, no BatchNorm.

    The first convolution carries the stride; when the stride or the width changes, the
    shortcut is a 1x1 convolution with that stride (projection shortcut), otherwise identity.
    ``alpha`` (``residual_scale``) is a fixed constant, not a parameter.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1,
                 residual_scale: float = 1.0, conv_bias: bool = False):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=conv_bias)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, stride=1, padding=1, bias=conv_bias)
        self.shortcut = None
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=conv_bias)
        self.residual_scale = float(residual_scale)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        branch = self.conv2(F.relu(self.conv1(h)))
        skip = h if self.shortcut is None else self.shortcut(h)
        return F.relu(skip + self.residual_scale * branch)      # no in-place ops (jvp-safe)


class ResNetNoBN(nn.Module):
    r"""A CIFAR-style ResNet without BatchNorm for 8x8 inputs, output scaled by ``output_scale``.

    Architecture: 3x3 conv stem (1 -> ``stage_widths[0]``) + ReLU; one stage per entry of
    ``stage_widths`` with ``blocks_per_stage`` :class:`BasicBlockNoBN` each (stride 2 with a
    1x1 projection shortcut on the first block of every stage after the first: 8x8 -> 4x4 ->
    2x2); global average pooling; ``Linear(stage_widths[-1], num_classes)``; the output is
    multiplied by ``output_scale`` (the paper's :math:`s`). No softmax. ``(8, 16, 32)`` with one
    block per stage has 19,474 parameters (the smoke/default net); ``(16, 32, 64)`` with three
    blocks per stage is ResNet20 (about 0.27M).

    Initialization (deterministic given ``generator``; the paper does not state its own):

    - every convolution (stem, branches, projection shortcuts): Kaiming-normal,
      fan-in mode, ReLU gain, :math:`\mathcal N(0, 2/\text{fan\_in})`; conv biases (only with
      ``conv_bias=True``) zero;
    - the final Linear: :math:`\mathcal N(0, 1/\text{fan\_in})` weights, zero bias.

    Why it trains at lr 0.1 without BatchNorm: each residual branch is multiplied by the fixed
    constant ``residual_scale`` :math:`\alpha`, by default :math:`1/\sqrt{L}` with :math:`L` the total
    number of blocks. With Kaiming init a branch roughly preserves the second moment of its
    input, so a block multiplies it by about :math:`1 + \alpha^2` and the whole network by
    :math:`(1 + 1/L)^L \le e`, instead of :math:`2^L` with :math:`\alpha = 1` (a SkipInit/Fixup-style
    scaling that, unlike zero-initialising the last conv of each branch, leaves every parameter
    with a non-zero Jacobian column at initialization). Together with :math:`s = 0.1` the
    outputs at init are :math:`O(0.1)`, so :math:`r_0 \approx -y` (spec regularity (c)).

    All operations are out-of-place, so ``torch.func.jvp`` (forward mode) works.
    """

    def __init__(self, num_classes: int = 10, stage_widths: Sequence[int] = (8, 16, 32),
                 blocks_per_stage: int = 1, output_scale: float = 0.1,
                 residual_scale: Optional[float] = None, conv_bias: bool = False,
                 in_channels: int = 1, generator: Optional[torch.Generator] = None):
        super().__init__()
        stage_widths = tuple(int(w) for w in stage_widths)
        if not stage_widths or min(stage_widths) <= 0:
            raise ValueError(f"stage_widths must be positive integers, got {stage_widths!r}")
        if not isinstance(blocks_per_stage, int) or blocks_per_stage <= 0:
            raise ValueError(f"blocks_per_stage must be a positive integer, got {blocks_per_stage!r}")
        num_blocks = len(stage_widths) * blocks_per_stage
        if residual_scale is None:
            residual_scale = 1.0 / math.sqrt(num_blocks)
        self.num_classes = int(num_classes)
        self.stage_widths = stage_widths
        self.blocks_per_stage = blocks_per_stage
        self.output_scale = float(output_scale)
        self.residual_scale = float(residual_scale)
        self.stem = nn.Conv2d(in_channels, stage_widths[0], 3, padding=1, bias=conv_bias)
        blocks, width = [], stage_widths[0]
        for stage, out in enumerate(stage_widths):
            for b in range(blocks_per_stage):
                stride = 2 if (stage > 0 and b == 0) else 1
                blocks.append(BasicBlockNoBN(width, out, stride, self.residual_scale, conv_bias))
                width = out
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(width, self.num_classes)
        self.reset_parameters(generator)

    @torch.no_grad()
    def reset_parameters(self, generator: Optional[torch.Generator] = None):
        """Re-draw all weights (see the class docstring for the scheme)."""
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                _kaiming(module.weight, generator)
                if module.bias is not None:
                    module.bias.zero_()
        fan_in = self.fc.weight.shape[1]
        self.fc.weight.normal_(0.0, 1.0 / math.sqrt(fan_in), generator=generator)
        self.fc.bias.zero_()

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The pooled penultimate features ``(N, stage_widths[-1])``."""
        h = F.relu(self.stem(x))
        h = self.blocks(h)
        return h.mean(dim=(-2, -1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_scale * self.fc(self.features(x))


# --------------------------------------------------------------------------- training

LOSSES = ("half_sum_mean_batch", "mse_mean", "half_sum")


def batch_loss(out: torch.Tensor, target: torch.Tensor, loss: str = "half_sum_mean_batch") -> torch.Tensor:
    """The named least-squares losses of the module docstring, on a batch ``(B, K)``."""
    sq = (out - target).pow(2)
    if loss == "half_sum_mean_batch":
        return 0.5 * sq.sum() / out.shape[0]
    if loss == "mse_mean":
        return sq.mean()
    if loss == "half_sum":
        return 0.5 * sq.sum()
    raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")


@torch.no_grad()
def evaluate(model: nn.Module, X: torch.Tensor, batch_size: int = 2048) -> torch.Tensor:
    """Outputs ``(n, K)`` of ``model`` on ``X`` without gradients, in chunks."""
    outs = [model(X[i:i + batch_size]) for i in range(0, X.shape[0], batch_size)]
    return torch.cat(outs) if outs else model(X)          # an empty batch keeps its (0, K) shape


@dataclass
class SGDHistory:
    r"""What :func:`train_sgd` recorded.

    Arrays indexed by the recorded epochs ``epochs`` (epoch 0 = initialization; then every
    ``record_every`` epochs and the last one run):

    - ``train_residuals`` ``(R, nK)``, ``test_residuals`` ``(R, n_test K)``: :math:`f(X) - Y`
      flattened class-major (see the module docstring), against the **given** (possibly
      corrupted) one-hot targets, in the model's dtype;
    - ``train_loss``/``test_loss``: the named loss over the whole set (mean over samples for
      the batch-averaged losses);
    - ``train_error``/``test_error``: fraction with argmax output != argmax of the given
      targets; ``*_error_clean``: the same against the clean labels, when given (else None).

    Per epoch run (index ``e - 1`` for epoch ``e``): ``epoch_loss`` (mean of the batch losses
    during the epoch), ``lrs``. ``snapshots`` maps each requested epoch to a CPU copy of the
    ``state_dict`` after that epoch (0 = init). ``diverged``/``diverged_at`` (an epoch) report
    the divergence guard; ``epochs_run`` counts the completed epochs.
    """

    epochs: np.ndarray
    train_residuals: np.ndarray
    test_residuals: np.ndarray
    train_loss: np.ndarray
    test_loss: np.ndarray
    train_error: np.ndarray
    test_error: np.ndarray
    train_error_clean: Optional[np.ndarray]
    test_error_clean: Optional[np.ndarray]
    epoch_loss: np.ndarray
    lrs: np.ndarray
    snapshots: dict = field(default_factory=dict)
    num_classes: int = 10
    num_train: int = 0
    num_test: int = 0
    steps: int = 0
    epochs_run: int = 0
    diverged: bool = False
    diverged_at: Optional[int] = None
    loss: str = "half_sum_mean_batch"
    elapsed_s: float = 0.0
    best_epoch: Optional[int] = None
    graphed: bool = False
    graph_checks: list = field(default_factory=list)

    @property
    def seconds_per_epoch(self) -> float:
        return self.elapsed_s / max(self.epochs_run, 1)

    def residual_norms(self, which: str = "train") -> np.ndarray:
        """:math:`\\|r_\\tau\\|` at the recorded epochs."""
        R = self.train_residuals if which == "train" else self.test_residuals
        return np.linalg.norm(R.astype(np.float64), axis=1)

    def index_of(self, epoch: int) -> int:
        """Row of ``epoch`` in the recorded arrays."""
        hits = np.flatnonzero(self.epochs == epoch)
        if hits.size == 0:
            raise KeyError(f"epoch {epoch} was not recorded (recorded: {self.epochs[:5]}...)")
        return int(hits[0])


def _labels_from(onehot: torch.Tensor) -> torch.Tensor:
    return onehot.argmax(dim=1)


def train_sgd(model: nn.Module, X: torch.Tensor, Y_onehot: torch.Tensor, X_test: torch.Tensor,
              Y_test_onehot: torch.Tensor, epochs: int, lr: float, batch_size: int,
              generator: torch.Generator, lr_drop_epoch: Optional[int | Sequence[int]] = None,
              lr_drop_factor: float = 0.1, loss: str = "half_sum_mean_batch",
              record_every: int = 1, snapshot_epochs: Sequence[int] = (),
              clean_labels: Optional[torch.Tensor] = None,
              clean_test_labels: Optional[torch.Tensor] = None,
              momentum: float = 0.0, weight_decay: float = 0.0,
              divergence_threshold: float = DIVERGENCE_THRESHOLD,
              eval_batch_size: int = 2048, progress: bool = False,
              snapshot_best: bool = False, optimizer: str = "sgd") -> SGDHistory:
    r"""Mini-batch SGD on ``model`` (updated in place) with a least-squares loss.

    - Each epoch draws a permutation of the ``n`` training samples from ``generator`` and
      takes :math:`\lceil n/B\rceil` steps (the last batch may be smaller; no augmentation).
    - The first ``lr_drop_epoch`` epochs use ``lr``, later epochs ``lr * lr_drop_factor``
      (the paper's "0.1 -> 0.01 at epoch 760 of 800" is ``lr_drop_epoch=760``); with several
      epochs, the rate drops after each (App. C.3's "÷10 at 260 and 360" is ``[260, 360]``).
    - ``torch.optim.SGD(momentum, weight_decay)``; the paper's setting is 0 and 0. With
      ``optimizer="adam"``, ``torch.optim.Adam(weight_decay)`` instead (App. C.3's Table 9).
    - Everything runs on the model's device and dtype; data are cast to them.
    - The divergence guard (:func:`paperlib.nets.training.is_diverged`) is checked once per epoch on
      the epoch's mean batch loss against the initial full-train loss; a diverged run stops
      after recording that epoch and sets ``diverged``/``diverged_at`` (no exception).

    - ``snapshot_best``: also keep a copy of the state at the recorded epoch with the lowest
      clean test error (the first such epoch; needs ``clean_test_labels``), in
      ``snapshots[best_epoch]`` with ``best_epoch`` set in the history: the measured dip of an
      early-stopping curve, whichever epoch it falls on, without storing every epoch.

    - On a GPU, with plain SGD (the paper's setting: no momentum, no weight decay), the epochs between two
      changes of the learning rate replay one checked CUDA graph (:class:`paperlib.nets.graphs.GraphedEpoch`):
      the same kernels, with the epoch's permutation copied into a buffer the recording reads. The optimizer
      reads the learning rate as a number, which a recording freezes, so a new rate gets a new recording.
      ``graphed`` and ``graph_checks`` in the history say what happened.

    - On a CPU it runs on one thread (:func:`paperlib.core.devices.one_cpu_thread`): in float32 the
      rounding of a multi-threaded step depends on the thread count, and SGD amplifies it into
      a different run (test errors 0.335 against 0.385 at the jacobian-lowrank smoke preset).

    Returns an :class:`SGDHistory`; see it for what is recorded and the residual layout.
    """
    with one_cpu_thread(next(model.parameters()).device):
        return _train_sgd(model, X, Y_onehot, X_test, Y_test_onehot, epochs, lr, batch_size, generator,
                          lr_drop_epoch, lr_drop_factor, loss, record_every, snapshot_epochs, clean_labels,
                          clean_test_labels, momentum, weight_decay, divergence_threshold, eval_batch_size,
                          progress, snapshot_best, optimizer)


def _train_sgd(model, X, Y_onehot, X_test, Y_test_onehot, epochs, lr, batch_size, generator, lr_drop_epoch,
               lr_drop_factor, loss, record_every, snapshot_epochs, clean_labels, clean_test_labels, momentum,
               weight_decay, divergence_threshold, eval_batch_size, progress, snapshot_best=False,
               optimizer_name="sgd") -> SGDHistory:
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    if optimizer_name not in ("sgd", "adam"):
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer_name!r}")
    drops = [] if lr_drop_epoch is None else \
        [int(lr_drop_epoch)] if isinstance(lr_drop_epoch, (int, np.integer)) else [int(e) for e in lr_drop_epoch]
    for name, value in (("epochs", epochs), ("batch_size", batch_size), ("record_every", record_every)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < (0 if name == "epochs" else 1):
            raise ValueError(f"{name} must be a {'non-negative' if name == 'epochs' else 'positive'} "
                             f"integer, got {value!r}")
    if not (lr > 0 and math.isfinite(lr)):
        raise ValueError(f"lr must be positive and finite, got {lr!r}")
    param = next(model.parameters())
    device, dtype = param.device, param.dtype
    X, Y = X.to(device=device, dtype=dtype), Y_onehot.to(device=device, dtype=dtype)
    Xt, Yt = X_test.to(device=device, dtype=dtype), Y_test_onehot.to(device=device, dtype=dtype)
    n, K = Y.shape
    if X.shape[0] != n or Xt.shape[0] != Yt.shape[0] or Yt.shape[1] != K:
        raise ValueError("inconsistent shapes of X, Y_onehot, X_test, Y_test_onehot")
    labels, test_labels = _labels_from(Y), _labels_from(Yt)
    clean = None if clean_labels is None else torch.as_tensor(clean_labels).to(device)
    clean_t = None if clean_test_labels is None else torch.as_tensor(clean_test_labels).to(device)
    snapshot_epochs = set(int(e) for e in snapshot_epochs)
    if snapshot_best and clean_test_labels is None:
        raise ValueError("snapshot_best needs clean_test_labels")
    best = {"epoch": None, "error": math.inf, "state": None}

    rec = {k: [] for k in ("epochs", "tr_res", "te_res", "tr_loss", "te_loss", "tr_err", "te_err",
                           "tr_err_c", "te_err_c")}
    snapshots = {}

    def record(epoch: int):
        model.eval()
        out, out_t = evaluate(model, X, eval_batch_size), evaluate(model, Xt, eval_batch_size)
        model.train()
        rec["epochs"].append(epoch)
        rec["tr_res"].append(stack_outputs(out - Y).cpu().numpy())
        rec["te_res"].append(stack_outputs(out_t - Yt).cpu().numpy())
        rec["tr_loss"].append(_full_loss(out, Y, loss))
        rec["te_loss"].append(_full_loss(out_t, Yt, loss))
        pred, pred_t = out.argmax(1), out_t.argmax(1)
        rec["tr_err"].append(float((pred != labels).double().mean()))
        rec["te_err"].append(float((pred_t != test_labels).double().mean()))
        if clean is not None:
            rec["tr_err_c"].append(float((pred != clean).double().mean()))
        if clean_t is not None:
            rec["te_err_c"].append(float((pred_t != clean_t).double().mean()))
            if snapshot_best and rec["te_err_c"][-1] < best["error"]:
                best.update(epoch=epoch, error=rec["te_err_c"][-1],
                            state={k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()})

    def snapshot(epoch: int):
        if epoch in snapshot_epochs:
            snapshots[epoch] = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}

    if optimizer_name == "adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay, foreach=FOREACH)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay,
                                    foreach=FOREACH)
    # the epoch, as one function that a GPU can record: it reads the permutation from ``order``, updates the
    # parameters in place and returns the epoch's summed batch loss as a tensor
    order = torch.empty(n, dtype=torch.long, device=device)
    can_record = graphs_enabled(device) and optimizer_name == "sgd" and momentum == 0 and weight_decay == 0

    def run_epoch():
        total = torch.zeros((), dtype=torch.float64, device=device)
        for start_i in range(0, n, batch_size):
            idx = order[start_i:start_i + batch_size]
            optimizer.zero_grad(set_to_none=True)
            value = batch_loss(model(X[idx]), Y[idx], loss)
            value.backward()
            optimizer.step()
            total += value.detach().double() * idx.numel()
        return total

    runner, runner_lr, runners = None, None, []
    model.train()
    start = time.perf_counter()
    record(0)
    snapshot(0)
    initial_loss = rec["tr_loss"][0]
    reference = abs(initial_loss) if initial_loss not in (0.0,) and math.isfinite(initial_loss) else 1.0
    epoch_losses, lrs = [], []
    steps, epochs_run, diverged_at = 0, 0, None
    loop = TrainingLoop(epochs, record_every, progress, "SGD", start=1, divergence_threshold=divergence_threshold)
    try:
        for epoch in loop:
            passed = sum(epoch > drop for drop in drops)
            current_lr = lr if passed == 0 else lr * lr_drop_factor ** passed  # factor ** 1 == factor exactly
            for group in optimizer.param_groups:
                group["lr"] = current_lr
            if current_lr != runner_lr:  # a recording would keep the old rate: record again
                runner, runner_lr = GraphedEpoch(run_epoch, list(model.parameters()), enabled=can_record,
                                                 name="SGD (jacobian-lowrank ResNet)"), current_lr
                runners.append(runner)
            order.copy_(torch.randperm(n, generator=generator, device=generator.device))
            total = runner()
            steps += -(-n // batch_size)
            epoch_loss = float(total) / n          # one sync per epoch
            epoch_losses.append(epoch_loss)
            lrs.append(current_lr)
            epochs_run = epoch
            if loop.diverged(epoch_loss, reference):
                diverged_at = epoch
                record(epoch)
                break
            if loop.logs(epoch):
                record(epoch)
            snapshot(epoch)
    finally:
        loop.close()
    elapsed = time.perf_counter() - start
    if snapshot_best and best["epoch"] is not None:
        snapshots[best["epoch"]] = best["state"]
    arr = lambda key: np.asarray(rec[key], dtype=np.float64)
    return SGDHistory(
        epochs=np.asarray(rec["epochs"], dtype=np.int64),
        train_residuals=np.stack(rec["tr_res"]),
        test_residuals=np.stack(rec["te_res"]),
        train_loss=arr("tr_loss"), test_loss=arr("te_loss"),
        train_error=arr("tr_err"), test_error=arr("te_err"),
        train_error_clean=arr("tr_err_c") if clean is not None else None,
        test_error_clean=arr("te_err_c") if clean_t is not None else None,
        epoch_loss=np.asarray(epoch_losses, dtype=np.float64),
        lrs=np.asarray(lrs, dtype=np.float64),
        snapshots=snapshots, num_classes=K, num_train=n, num_test=int(Yt.shape[0]),
        steps=steps, epochs_run=epochs_run, diverged=diverged_at is not None,
        diverged_at=diverged_at, loss=loss, elapsed_s=elapsed,
        best_epoch=best["epoch"] if snapshot_best else None,
        graphed=any(r.graphed for r in runners), graph_checks=[c for r in runners for c in r.checks],
    )


def _full_loss(out: torch.Tensor, Y: torch.Tensor, loss: str) -> float:
    if out.shape[0] == 0:
        return float("nan")
    return float(batch_loss(out.double(), Y.double(), loss))
