import math
import threading

import pytest
import torch

from optuna_wpca import (
    FlexiBERTSpace,
    TextBatch,
    WPCASpace,
    compute_proxy,
    dim_from_spectrum,
    get_proxy,
    layer_pca_dims,
    layer_spectra,
    list_proxies,
    pca_dim,
    text_batch,
)


def known_spectrum(eigenvalues, n=400, seed=0):
    """Rows whose sample covariance has exactly the given eigenvalues (up to float error)."""
    d = len(eigenvalues)
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, d, generator=g, dtype=torch.float64)
    z = z - z.mean(0)
    # Whiten exactly: z^T z / (n-1) = I
    q, _ = torch.linalg.qr(z)
    z = q * math.sqrt(n - 1)
    rot, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    return (z * torch.tensor(eigenvalues, dtype=torch.float64).sqrt()) @ rot.T + 3.0


@pytest.mark.parametrize(
    "eta,expected",
    # eigenvalues 5, 3, 1, 0.5, 0.5 of total 10: cumulative shares 0.5, 0.8, 0.9, 0.95, 1.0
    [(0.4, 1), (0.5, 1), (0.51, 2), (0.8, 2), (0.85, 3), (0.9, 3), (0.93, 4), (0.95, 4), (0.99, 5), (1.0, 5)],
)
def test_pca_dim_on_a_known_spectrum(eta, expected):
    h = known_spectrum([5.0, 3.0, 1.0, 0.5, 0.5])
    assert pca_dim(h, eta) == expected


def test_pca_dim_degenerate_cases():
    assert pca_dim(torch.ones(50, 4), 0.99) == 0  # zero variance
    rank_one = torch.randn(100, 1) * torch.ones(1, 6)
    assert pca_dim(rank_one, 1.0) == 1
    with pytest.raises(ValueError, match="NaN or inf"):
        pca_dim(torch.tensor([[1.0, float("nan")], [0.0, 1.0], [2.0, 2.0]]))
    with pytest.raises(ValueError, match="at least 2 token vectors"):
        pca_dim(torch.randn(1, 8))
    for eta in (0.0, -0.1, 1.01, float("nan")):
        with pytest.raises(ValueError, match=r"eta must lie in \(0, 1\]"):
            pca_dim(torch.randn(10, 3), eta)


def tiny_wpca_model(seed=0):
    space = WPCASpace(num_layers=3, hidden_size=64, bert_heads=4, mobilebert_heads=2)
    params = {"layer_00_block": "bert", "layer_00_ffn_mult": 2, "layer_01_block": "mobilebert",
              "layer_01_ffn_mult": 3, "layer_02_block": "bert", "layer_02_ffn_mult": 1}
    return space.build(space.from_params(params), seed=seed)


def test_wpca_is_params_times_vpca_with_per_layer_dims(small_batch):
    model = tiny_wpca_model()
    w = compute_proxy("wpca", model, small_batch)
    v = compute_proxy("vpca", model, small_batch)
    dims = w.parts["pca_dims"]
    assert len(dims) == 3 and all(1 <= d <= width for d, width in zip(dims, (32, 48, 16)))
    assert v.value == sum(dims)
    assert w.value == model.num_parameters() * v.value
    mean = compute_proxy("vpca", model, small_batch, reduce="mean")
    assert mean.value == pytest.approx(sum(dims) / 3)
    lower = compute_proxy("vpca", model, small_batch, eta=0.5)
    assert lower.value < v.value


def test_pca_dims_match_a_manual_computation(small_batch):
    model = tiny_wpca_model()
    captured = []
    handle = model.layers[1].ffn_in.register_forward_hook(lambda m, i, o: captured.append(o.detach().clone()))
    with torch.no_grad():
        model(**small_batch.as_kwargs())
    handle.remove()
    h = captured[0].reshape(-1, captured[0].shape[-1]).double()
    hc = h - h.mean(0)
    eig = torch.linalg.eigvalsh(hc.T @ hc / (h.shape[0] - 1)).flip(0)
    share = torch.cumsum(eig, 0) / eig.sum()
    expected = int((share < 0.99).sum()) + 1
    assert layer_pca_dims(model, small_batch)[1] == expected


def test_eta_mobilebert_only_changes_mobilebert_layers(small_batch):
    model = tiny_wpca_model()
    base = layer_pca_dims(model, small_batch)
    mixed = layer_pca_dims(model, small_batch, eta_mobilebert=0.5)
    assert mixed[0] == base[0] and mixed[2] == base[2] and mixed[1] < base[1]


def test_scoring_leaves_model_unchanged_and_no_hooks(small_batch):
    model = tiny_wpca_model()
    model.train()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    compute_proxy("wpca", model, small_batch)
    assert model.training  # restored
    assert all(not lin._forward_hooks for lin in model.ffn_input_linears())
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


def test_one_forward_pass_in_inference_mode(small_batch):
    model = tiny_wpca_model()
    calls = []
    model.embeddings.register_forward_hook(lambda m, i, o: calls.append(torch.is_inference_mode_enabled()))
    compute_proxy("wpca", model, small_batch)
    assert calls == [True]


def test_bad_batches_give_clear_errors():
    model = tiny_wpca_model()
    one = torch.tensor([[101]])
    with pytest.raises(ValueError, match="at least 2 token vectors"):
        compute_proxy("wpca", model, TextBatch(one, torch.ones_like(one), torch.zeros_like(one)))
    empty = torch.zeros(0, 16, dtype=torch.long)
    with pytest.raises(ValueError, match="empty batch"):
        compute_proxy("vpca", model, TextBatch(empty, torch.ones_like(empty), torch.zeros_like(empty)))


def test_nan_weights_are_reported_not_crashed(small_batch):
    model = tiny_wpca_model()
    with torch.no_grad():
        model.layers[0].ffn_in.weight.fill_(float("nan"))
    with pytest.raises(ValueError, match="layer 0: activations contain NaN or inf"):
        compute_proxy("wpca", model, small_batch)


def test_registry():
    assert {"wpca", "vpca", "params", "num_layers"} <= set(list_proxies())
    assert get_proxy("wpca").needs_grad is False
    with pytest.raises(ValueError, match="unknown proxy 'nope'; registered proxies: "):
        get_proxy("nope")


def test_params_proxy_uses_counting_convention(small_batch):
    space = FlexiBERTSpace()
    model = space.build(space.sample(0))
    assert compute_proxy("params", model, small_batch).value == space.num_params(space.sample(0))
    assert compute_proxy("params", model, small_batch, count="non_embedding").value == space.num_params(
        space.sample(0), "non_embedding"
    )


def _reference_spectra(model, batch):
    """The W-PCA spectra as first implemented: each layer's eigenvalues computed in its own hook
    with the caller's thread count, and the forward pass run to the end."""
    spectra = []

    def hook(_m, _i, out):
        h = out.reshape(-1, out.shape[-1]).float()
        c = h - h.mean(0, keepdim=True)
        spectra.append(torch.linalg.eigvalsh(c.T @ c / (h.shape[0] - 1)).flip(0).clamp_min(0.0))

    handles = [lin.register_forward_hook(hook) for lin in model.ffn_input_linears()]
    try:
        with torch.inference_mode():
            model.eval()(**batch.as_kwargs())
    finally:
        for h in handles:
            h.remove()
    return spectra


def test_the_faster_spectra_give_the_first_implementations_pca_dims_on_nas_bench_bert():
    from optuna_wpca import dim_from_spectrum, layer_spectra, load_benchmark, text_batch

    bench = load_benchmark("nas-bench-bert")
    batch = text_batch(batch_size=16, seq_len=64)
    before = torch.get_num_threads()
    for i in range(50):
        model = bench.build(i, seed=42)
        reference = _reference_spectra(model, batch)
        fast = layer_spectra(model, batch)
        assert torch.get_num_threads() == before  # the one-thread eigensolver setting was restored
        for ref, new in zip(reference, fast):
            assert torch.allclose(ref, new, rtol=1e-4, atol=1e-6 * float(ref[0]))
            for eta in (0.9, 0.99):
                assert dim_from_spectrum(new, eta) == dim_from_spectrum(ref, eta), (i, eta)


def test_cpu_spectra_run_side_by_side_on_single_threaded_calls_with_the_same_values(monkeypatch):
    from optuna_wpca.proxies._pca import eigenvalues

    g = torch.Generator().manual_seed(0)
    mats = []
    for n in (40, 40, 40, 64, 64, 64):
        a = torch.randn(n, n, generator=g)
        mats.append(a @ a.T)
    before = torch.get_num_threads()
    calls = []
    real = torch.linalg.eigvalsh

    def spy(a):
        calls.append((threading.get_ident(), torch.get_num_threads(), a.shape[0]))
        return real(a)

    try:
        torch.set_num_threads(1)
        sequential = eigenvalues(mats)
        torch.set_num_threads(2)
        monkeypatch.setattr(torch.linalg, "eigvalsh", spy)
        side_by_side = eigenvalues(mats)
        assert torch.get_num_threads() == 2  # restored
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(sequential, side_by_side))
    assert len(calls) == 4  # two sizes, each split in two
    assert all(ident != threading.main_thread().ident and threads == 1 for ident, threads, _ in calls)


def test_the_forward_pass_stops_after_the_last_ffn_linear(small_batch):
    model = tiny_wpca_model()
    ran = []
    model.layers[-1].ffn_out.register_forward_hook(lambda m, i, o: ran.append("ffn_out"))
    model.layers[-1].ffn_in.register_forward_hook(lambda m, i, o: ran.append("ffn_in"))
    compute_proxy("wpca", model, small_batch)
    assert ran == ["ffn_in"]
    model(**small_batch.as_kwargs())  # an ordinary forward afterwards runs to the end
    assert ran == ["ffn_in", "ffn_in", "ffn_out"]


def test_a_factored_ffn_covariance_has_the_dense_spectrum():
    from optuna_wpca.proxies._pca import FFNCovariance, covariance, eigenvalues

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3000, 24, generator=g) * torch.linspace(0.1, 3.0, 24)
    w = torch.randn(96, 24, generator=g)
    dense = covariance(x @ w.T + 0.5)
    factored = FFNCovariance(covariance(x), w)
    assert factored.width == 96
    assert torch.allclose(factored.dense(), dense, rtol=1e-3, atol=1e-3 * float(dense.abs().max()))
    (ours,), (reference,) = eigenvalues([factored]), eigenvalues([dense])
    assert ours.shape == reference.shape == (96,)
    assert torch.count_nonzero(ours[24:]) == 0  # rank <= input width: the rest is exactly zero
    assert torch.allclose(ours, reference, rtol=1e-4, atol=1e-5 * float(reference[0]))
    for eta in (0.5, 0.9, 0.99, 0.999):
        assert dim_from_spectrum(ours, eta) == dim_from_spectrum(reference, eta)


def test_a_factored_covariance_without_a_cholesky_factor_falls_back_to_the_dense_form():
    from optuna_wpca.proxies._pca import FFNCovariance, covariance, eigenvalues

    g = torch.Generator().manual_seed(1)
    x = torch.randn(500, 8, generator=g)
    w = torch.randn(32, 8, generator=g)
    w[:, 3] = 0.0  # W^T W is singular
    (ours,) = eigenvalues([FFNCovariance(covariance(x), w)])
    (reference,) = eigenvalues([covariance(x @ w.T)])
    assert torch.allclose(ours, reference, rtol=1e-4, atol=1e-5 * float(reference[0]))


def test_widening_ffn_linears_are_read_at_their_input_and_the_last_one_is_not_run():
    from optuna_wpca.proxies._pca import layer_covariances

    space = WPCASpace(num_layers=2, hidden_size=64, bert_heads=4, mobilebert_heads=2)
    arch = space.from_params({"layer_00_block": "mobilebert", "layer_00_ffn_mult": 6,
                              "layer_01_block": "mobilebert", "layer_01_ffn_mult": 6})
    model = space.build(arch, seed=0)
    batch = text_batch(batch_size=8, seq_len=64)
    ran = []
    model.layers[-1].ffn_in.register_forward_hook(lambda m, i, o: ran.append("ffn_in"))
    covariances = layer_covariances(model, batch)
    assert all(c.weight is not None and c.matrix.shape[0] < c.width for c in covariances)
    assert ran == []  # the last layer's input covariance is all W-PCA needs from it
    reference = _reference_spectra(model, batch)
    for ref, new in zip(reference, layer_spectra(model, batch)):
        for eta in (0.9, 0.99):
            assert dim_from_spectrum(new, eta) == dim_from_spectrum(ref, eta)


@pytest.mark.parametrize("benchmark,count", [("nas-bench-bert", 12), ("lts-gpt2-wt103", 8)])
def test_the_input_side_path_gives_the_dense_paths_pca_dims_on_trained_benchmarks(benchmark, count, monkeypatch):
    from optuna_wpca.proxies import _pca
    from optuna_wpca.ranking import load_benchmark

    bench = load_benchmark(benchmark)
    batch = text_batch(batch_size=8, seq_len=64)
    fast = [layer_pca_dims(bench.build(i, seed=0), batch) for i in range(count)]
    monkeypatch.setattr(_pca, "_input_side_is_cheaper", lambda *a: False)  # every layer read at its output
    dense = [layer_pca_dims(bench.build(i, seed=0), batch) for i in range(count)]
    assert fast == dense
