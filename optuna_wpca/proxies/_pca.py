"""W-PCA and V-PCA (arXiv 2504.15983): principal components of the FFN's first linear output."""

from __future__ import annotations

import concurrent.futures
import contextlib
import math
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import torch

from optuna_wpca._errors import InputError
from optuna_wpca._text import TextBatch
from optuna_wpca.models import CandidateModel
from optuna_wpca.proxies._registry import ProxyResult, get_proxy, register_proxy

REDUCTIONS = ("sum", "mean")
#: The paper's share of variance that the kept principal components must reach.
DEFAULT_ETA = 0.99


def check_eta(eta: float, name: str = "eta") -> float:
    """``eta`` as a float; a clear error when it is outside (0, 1]."""
    if not isinstance(eta, (int, float)) or math.isnan(eta) or not 0.0 < eta <= 1.0:
        raise InputError(f"{name} must lie in (0, 1], got {eta!r}")
    return float(eta)


def check_proxy_options(options: dict, proxies: Sequence[str] | None = None) -> None:
    """Fail before any model is built when a shared proxy option is out of range, or (given the
    proxies it is meant for) when no one of them takes it: a misspelt option is an error, not a
    silently ignored keyword.

    Example:
        >>> check_proxy_options({"etta": 0.5}, ["wpca"])
        Traceback (most recent call last):
        ...
        optuna_wpca._errors.InputError: unknown proxy option 'etta' for wpca; accepted: count, eta, eta_mobilebert, reduce
    """
    if proxies is not None:
        accepted = sorted({name for proxy in proxies for name in get_proxy(proxy).options})
        for name in options:
            if name not in accepted:
                raise InputError(f"unknown proxy option {name!r} for {', '.join(proxies)}; "
                                 f"accepted: {', '.join(accepted) or 'none'}")
    for name in ("eta", "eta_mobilebert"):
        if options.get(name) is not None:
            check_eta(options[name], name)
    if options.get("reduce", "sum") not in REDUCTIONS:
        raise InputError(f"reduce must be one of {REDUCTIONS}, got {options['reduce']!r}")


def _checked(h: torch.Tensor) -> torch.Tensor:
    if h.dim() != 2:
        raise InputError(f"PCA expects a (samples, features) matrix, got shape {tuple(h.shape)}")
    if h.shape[0] < 2:
        raise InputError(f"a covariance needs at least 2 token vectors, got {h.shape[0]}")
    h = h.float()
    if not torch.isfinite(h).all():
        raise InputError("activations contain NaN or inf; the candidate's forward pass is numerically broken")
    return h


def covariance(h: torch.Tensor) -> torch.Tensor:
    """Column covariance (float32, 1/(N-1)) of ``h`` (samples, features), with the input checks."""
    h = _checked(h)
    centred = h - h.mean(dim=0, keepdim=True)
    return centred.T @ centred / (h.shape[0] - 1)


@dataclass
class FFNCovariance:
    """The covariance of one FFN first-linear output H = X W^T + b (D columns).

    When the linear widens (input width d < D) and that is cheaper, it is kept factored: the input
    covariance Cx (d x d) and W, since Cov(H) = W Cx W^T. Its nonzero eigenvalues are those of the
    d x d matrix L^T Cx L, where W^T W = L L^T (Cholesky), and the other D - d are zero: the
    covariance costs N d^2 instead of N D^2 multiply-adds and the eigensolver works on d x d.
    """

    matrix: torch.Tensor  #: Cov(H) (D x D), or Cx (d x d) when ``weight`` is set
    weight: torch.Tensor | None = None  #: W (D x d) of the factored form

    @property
    def width(self) -> int:
        """D, the FFN width (the number of eigenvalues of Cov(H))."""
        return self.matrix.shape[0] if self.weight is None else self.weight.shape[0]

    def dense(self) -> torch.Tensor:
        """Cov(H) as a D x D matrix."""
        if self.weight is None:
            return self.matrix
        w = self.weight.float()
        return w @ self.matrix @ w.T

    def small_symmetric(self) -> torch.Tensor:
        """A symmetric matrix with Cov(H)'s nonzero eigenvalues: itself, or L^T Cx L."""
        if self.weight is None:
            return self.matrix
        w = self.weight.float()
        chol, info = torch.linalg.cholesky_ex(w.T @ w)
        if int(info) != 0:  # W without full column rank (e.g. a zeroed weight): no factor; use the dense form
            return self.dense()
        return chol.T @ self.matrix @ chol


def _input_side_is_cheaper(tokens: int, d_in: int, d_out: int) -> bool:
    """Whether the factored covariance costs fewer multiply-adds (covariance plus eigensolver)."""
    if d_in >= d_out:
        return False
    factored = tokens * d_in**2 + d_out * d_in**2 + 3 * d_in**3 + 4 * d_in**3 / 3
    direct = tokens * d_out**2 + 4 * d_out**3 / 3
    return factored < direct


@contextlib.contextmanager
def _one_cpu_thread(device: torch.device) -> Iterator[int]:
    """Run small CPU eigendecompositions one thread each, restoring the caller's setting after;
    yields how many may run side by side (the caller's thread count, 1 off the CPU).

    A few-hundred-wide ``eigvalsh`` gains little from a second intra-op thread and loses a lot when
    the cores are shared (other workers, other processes): measured here 0.14 s on one thread against
    0.33-0.43 s on two beside a single competing process, and 20 s under heavier sharing. Separate
    matrices on separate threads, each single-threaded, use the cores the caller allowed without that.
    """
    before = torch.get_num_threads()
    if device.type != "cpu" or before == 1:
        yield 1
        return
    torch.set_num_threads(1)
    try:
        yield before
    finally:
        torch.set_num_threads(before)


def eigenvalues(
    covariances: Sequence[torch.Tensor | FFNCovariance], *, on_host: bool = True
) -> list[torch.Tensor]:
    """Descending eigenvalues (float32, clamped at 0) of symmetric matrices (or of factored FFN
    covariances, padded with zeros to their width).

    The matrices are grouped by size; on the CPU each ``eigvalsh`` runs single-threaded, as many
    side by side as the caller's thread count (see ``_one_cpu_thread``). On an accelerator the
    matrices are formed there and, unless ``on_host=False``, copied to the host in one transfer per
    size and solved there the same way, the spectra returned on the CPU: a GPU eigensolver pays
    launches and synchronisations per small matrix (0.073 s for the 12 of a W-PCA-Small
    candidate on an H200, five times its forward pass).
    """
    items = [c if isinstance(c, FFNCovariance) else FFNCovariance(c) for c in covariances]
    out: list[torch.Tensor | None] = [None] * len(items)
    groups: dict[tuple[int, torch.device], list[int]] = {}
    with torch.inference_mode():
        small = [c.small_symmetric() for c in items]
        for i, m in enumerate(small):
            groups.setdefault((m.shape[0], m.device), []).append(i)
        stacks = {key: torch.stack([small[i] for i in idx]) for key, idx in groups.items()}
        if on_host:
            stacks = {key: m.cpu() for key, m in stacks.items()}

    def solve(matrices: torch.Tensor, idx: list[int]) -> None:
        eig = torch.linalg.eigvalsh(matrices).flip(-1).clamp_min(0.0)
        for row, i in zip(eig, idx):
            out[i] = row

    for device in {m.device for m in stacks.values()}:
        with _one_cpu_thread(device) as side_by_side:
            jobs = []
            for key, matrices in stacks.items():
                if matrices.device == device:
                    idx = groups[key]
                    for k in range(min(side_by_side, len(idx))):
                        jobs.append((matrices[k::side_by_side], idx[k::side_by_side]))
            if side_by_side > 1 and len(jobs) > 1:
                with concurrent.futures.ThreadPoolExecutor(min(side_by_side, len(jobs))) as pool:
                    for done in [pool.submit(solve, *job) for job in jobs]:
                        done.result()
            else:
                for job in jobs:
                    solve(*job)
    for i, row in enumerate(out):
        if not torch.isfinite(row.sum()):  # type: ignore[union-attr]
            raise InputError("covariance of the activations overflowed float32")
        pad = items[i].width - row.numel()  # type: ignore[union-attr]
        out[i] = torch.cat([row, row.new_zeros(pad)]) if pad else row  # type: ignore[union-attr]
    return out  # type: ignore[return-value]


def spectrum(h: torch.Tensor) -> torch.Tensor:
    """Eigenvalues (descending, float32) of the column covariance of ``h`` (samples, features)."""
    return eigenvalues([covariance(h)])[0]


def dim_from_spectrum(eig: torch.Tensor, eta: float) -> int:
    """Smallest k whose top-k eigenvalues hold >= eta of the total; 0 for zero total variance."""
    total = eig.sum()
    if total <= 0:
        return 0
    share = torch.cumsum(eig, 0) / total
    # A hair of slack so that eta=1 is met by the float sum instead of never.
    k = int(torch.searchsorted(share, torch.tensor(eta - 1e-6, device=share.device)).item()) + 1
    return min(k, eig.numel())


def pca_dim(h: torch.Tensor, eta: float = DEFAULT_ETA) -> int:
    """Smallest k whose top-k eigenvalues of the column covariance of ``h`` hold >= eta of the variance.

    ``h`` is (samples, features). Zero total variance gives 0 (no direction carries any).

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> h = torch.randn(2000, 3, generator=g) * torch.tensor([10.0, 1.0, 0.1])
        >>> pca_dim(h, 0.9), pca_dim(h, 0.999)
        (1, 2)
    """
    eta = check_eta(eta)
    return dim_from_spectrum(spectrum(h), eta)


class _LastFFNDone(Exception):
    """Raised by the last FFN hook: nothing the model computes after it is needed."""


class CovarianceRecorder:
    """Forward hooks that take the covariance of every layer's FFN first-linear output as a forward
    pass goes by (padding positions, if the mask has any, left out): a context manager around a
    forward pass that the caller runs, with or without gradients (the covariances never carry any).

    A widening linear whose factored form is cheaper (see :class:`FFNCovariance`) is read at its
    input, before it runs; the others at their output. With ``stop_early``, the last layer's hook
    raises :class:`_LastFFNDone` (the rest of a forward pass would only be thrown away).
    """

    def __init__(self, model: CandidateModel, batch: TextBatch, *, stop_early: bool = False) -> None:
        self.model, self.stop_early = model, stop_early
        self.layers = model.ffn_input_linears()
        keep = batch.attention_mask.reshape(-1).bool()
        self.tokens = int(keep.sum())
        self.keep = None if bool(keep.all()) else keep.to(next(model.parameters()).device)
        self.covariances: list[FFNCovariance | None] = [None] * len(self.layers)
        self.errors: list[str] = []
        self._handles: list[Any] = []

    def _rows(self, t: torch.Tensor) -> torch.Tensor:
        t = t.detach().reshape(-1, t.shape[-1])
        return t if self.keep is None else t[self.keep]

    def _record(self, i: int, make) -> None:
        try:
            with torch.no_grad():
                self.covariances[i] = make()
        except ValueError as err:
            self.errors.append(f"layer {i}: {err}")
        if self.stop_early and i == len(self.layers) - 1:
            raise _LastFFNDone

    def __enter__(self) -> CovarianceRecorder:
        def input_hook(i: int):
            def hook(module: torch.nn.Linear, inputs: tuple[torch.Tensor, ...]) -> None:
                self._record(i, lambda: FFNCovariance(covariance(self._rows(inputs[0])), module.weight.detach()))

            return hook

        def output_hook(i: int):
            def hook(_module: torch.nn.Module, _inputs: object, output: torch.Tensor) -> None:
                self._record(i, lambda: FFNCovariance(covariance(self._rows(output))))

            return hook

        for i, linear in enumerate(self.layers):
            if _input_side_is_cheaper(self.tokens, linear.in_features, linear.out_features):
                self._handles.append(linear.register_forward_pre_hook(input_hook(i)))
            else:
                self._handles.append(linear.register_forward_hook(output_hook(i)))
        return self

    def __exit__(self, exc_type: Any, *_exc: object) -> bool:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        return exc_type is _LastFFNDone  # the early stop is how a pass ends, not an error

    def result(self) -> list[FFNCovariance]:
        """The covariances, in layer order; a clear error for a layer that gave none."""
        if self.errors:
            raise InputError("W-PCA cannot score this candidate: " + "; ".join(self.errors))
        missing = [i for i, c in enumerate(self.covariances) if c is None]
        if missing:
            raise InputError(f"W-PCA cannot score this candidate: the pass never reached the FFN of layers {missing}")
        return self.covariances  # type: ignore[return-value]


def layer_covariances(model: CandidateModel, batch: TextBatch) -> list[FFNCovariance]:
    """The covariance of every layer's FFN first-linear output, from one forward pass without
    gradients that stops once the last layer's FFN has given what is needed (see
    :class:`CovarianceRecorder`)."""
    was_training = model.training
    try:
        model.eval()
        device = next(model.parameters()).device
        with CovarianceRecorder(model, batch, stop_early=True) as recorder, torch.inference_mode():
            model(**batch.to(device).as_kwargs())
    finally:
        model.train(was_training)
    return recorder.result()


def layer_etas(model: CandidateModel, eta: float, eta_mobilebert: float | None) -> list[float]:
    """Each layer's threshold: ``eta_mobilebert`` for MobileBERT blocks when given, else ``eta``."""
    eta = check_eta(eta)
    if eta_mobilebert is not None:
        check_eta(eta_mobilebert, "eta_mobilebert")
    return [
        eta_mobilebert if eta_mobilebert is not None and getattr(cfg, "block", None) == "mobilebert" else eta
        for cfg in model.config.layers
    ]


def layer_spectra(model: CandidateModel, batch: TextBatch) -> list[torch.Tensor]:
    """The covariance spectrum of every layer's FFN first-linear output (descending, one entry per
    output feature), from one forward pass without gradients (see :func:`layer_covariances` and
    :func:`eigenvalues`: the spectra are solved and returned on the host)."""
    return eigenvalues(layer_covariances(model, batch))


def layer_pca_dims(
    model: CandidateModel, batch: TextBatch, *, eta: float = DEFAULT_ETA, eta_mobilebert: float | None = None
) -> list[int]:
    """PCA_dim of every layer's FFN first-linear output, from one forward pass without gradients.

    ``eta_mobilebert`` gives MobileBERT blocks their own threshold (the W-PCA reference code uses
    0.9 there, the paper 0.99 everywhere); ``None`` uses ``eta``.
    """
    etas = layer_etas(model, eta, eta_mobilebert)
    return [dim_from_spectrum(eig, e) for eig, e in zip(layer_spectra(model, batch), etas)]


def _reduce(dims: list[int], reduce: str) -> float:
    if reduce not in REDUCTIONS:
        raise InputError(f"reduce must be one of {REDUCTIONS}, got {reduce!r}")
    return float(sum(dims)) / (len(dims) if reduce == "mean" else 1)


@register_proxy("vpca", needs_grad=False, description="V-PCA: sum over layers of the FFN PCA dimension")
def vpca(
    model: CandidateModel,
    batch: TextBatch,
    *,
    eta: float = DEFAULT_ETA,
    eta_mobilebert: float | None = None,
    reduce: str = "sum",
) -> ProxyResult:
    """V-PCA. ``reduce="mean"`` divides by the number of layers, as the reference code does."""
    dims = layer_pca_dims(model, batch, eta=eta, eta_mobilebert=eta_mobilebert)
    return vpca_result(dims, eta=eta, reduce=reduce)


def vpca_result(dims: list[int], *, eta: float, reduce: str) -> ProxyResult:
    """V-PCA's result from the layers' PCA dims (the proxy's, and the shared pass's)."""
    return ProxyResult(_reduce(dims, reduce), {"pca_dims": dims, "eta": eta})


def wpca_result(model: CandidateModel, dims: list[int], *, eta: float, reduce: str,
                count: str | None) -> ProxyResult:
    """W-PCA's result from the layers' PCA dims (the proxy's, and the shared pass's)."""
    v = _reduce(dims, reduce)
    n = model.num_parameters(count)
    return ProxyResult(float(n) * v, {"pca_dims": dims, "vpca": v, "num_params": n, "eta": eta,
                                      "byproducts": {"vpca": v}})


@register_proxy("wpca", needs_grad=False, description="W-PCA: parameter count x V-PCA")
def wpca(
    model: CandidateModel,
    batch: TextBatch,
    *,
    eta: float = DEFAULT_ETA,
    eta_mobilebert: float | None = None,
    reduce: str = "sum",
    count: str | None = None,
) -> ProxyResult:
    """W-PCA = #params x V-PCA; ``count`` picks the parameter-count convention (model default)."""
    dims = layer_pca_dims(model, batch, eta=eta, eta_mobilebert=eta_mobilebert)
    return wpca_result(model, dims, eta=eta, reduce=reduce, count=count)
