import hashlib
import math

import pytest
import torch

from optuna_wpca import CandidateModel, DecoderSpace, FlexiBERTSpace, WPCAModel, WPCASpace
from optuna_wpca.models import FlexiBERTConfig, FlexiBERTModel, WPCAConfig
from optuna_wpca.models._flexibert_model import _dct_basis

OPS = [("SA", "SDP"), ("SA", "WMA"), ("LT", "DFT"), ("LT", "DCT"), ("DSC", 5), ("DSC", 9)]


def flexi(op, param, hidden=128, heads=2, num_ffn=3, seed=0):
    layer = {"operation": op, "parameter": param, "heads": heads, "ffn_size": 512, "num_ffn": num_ffn}
    return FlexiBERTModel(FlexiBERTConfig(layers=[layer, layer], hidden_size=hidden, seed=seed)).eval()


@pytest.mark.parametrize("op,param", OPS)
def test_every_flexibert_operation_runs_and_is_finite(op, param):
    model = flexi(op, param, heads=4)
    x = torch.randint(0, 30522, (3, 20))
    out = model(x)
    assert out.shape == (3, 20, 128)
    assert torch.isfinite(out).all()
    # a seed is the weights: the same seed the same outputs, another seed others
    assert torch.equal(flexi(op, param, heads=4)(x), out)
    assert not torch.allclose(flexi(op, param, heads=4, seed=1)(x), out)
    # every operation mixes tokens: changing the first token moves the second one's output
    y = x.clone()
    y[:, 0] = (y[:, 0] + 1) % 30522
    assert not torch.allclose(model(y)[:, 1], out[:, 1])


def test_wma_adds_a_query_map_and_dsc_mixes_tokens_locally():
    assert sum(p.numel() for p in flexi("SA", "WMA").parameters()) - sum(
        p.numel() for p in flexi("SA", "SDP").parameters()
    ) == 2 * 128 * 128
    # A dynamic convolution with kernel 5 sees only 2 neighbours each side: changing token 0 must not
    # move the conv half of token 10 (the attention half and LayerNorm do, so look at the mixer directly).
    mixer = flexi("DSC", 5).layers[0].mixing
    x = torch.randn(1, 16, 128)
    y = x.clone()
    y[0, 0] += 5.0
    with torch.no_grad():
        conv_x = mixer.conv_value(x)
        conv_y = mixer.conv_value(y)
    assert torch.allclose(conv_x[0, 10], conv_y[0, 10])


def test_dct_basis_is_orthonormal_dct2():
    basis = _dct_basis(8, "cpu", torch.float64)
    assert torch.allclose(basis @ basis.T, torch.eye(8, dtype=torch.float64), atol=1e-12)
    x = torch.arange(8, dtype=torch.float64)
    # DCT-II coefficient 0 of an orthonormal transform is sum / sqrt(n)
    assert math.isclose((basis @ x)[0].item(), x.sum().item() / math.sqrt(8), rel_tol=1e-12)


def test_seeded_initialisation_is_reproducible_and_leaves_global_rng_alone():
    space = WPCASpace.tiny()
    arch = space.sample(3)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = space.build(arch, seed=7)
    after = torch.rand(1)
    b = space.build(arch, seed=7)
    c = space.build(arch, seed=8)
    assert torch.equal(before, after)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


def _weights_digest(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, value in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(value.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


# Recorded from the build of 74bf4c2 (CPU initialisation, then a copy): building on the target
# device must not change a seeded candidate's values on the CPU.
@pytest.mark.parametrize(
    "space, digest",
    [(WPCASpace.tiny(), "76ca7de87642f7e7"), (FlexiBERTSpace(), "7cd4054629a1e999"),
     (DecoderSpace.small(), "03a15db6295ff16d")],
    ids=["wpca", "flexi", "decoder"],
)
def test_seeded_weights_are_those_of_earlier_releases(space, digest):
    assert _weights_digest(space.build(space.sample(3), seed=7)) == digest
    assert _weights_digest(space.build(space.sample(3), seed=7, device="cpu", init_device="cpu")) == digest


def test_candidates_are_allocated_and_drawn_on_the_build_device(monkeypatch):
    allocated, drawn = [], []
    to_empty, generator = torch.nn.Module.to_empty, torch.Generator

    def spy_to_empty(self, *, device, recurse=True):
        allocated.append(torch.device(device))
        return to_empty(self, device=device, recurse=recurse)

    def spy_generator(device="cpu"):
        drawn.append(torch.device(device))
        return generator(device=device)

    monkeypatch.setattr(torch.nn.Module, "to_empty", spy_to_empty)
    monkeypatch.setattr(torch, "Generator", spy_generator)
    space = WPCASpace.tiny()
    model = space.build(space.sample(0), seed=0, device=torch.device("cpu"))
    assert allocated == [torch.device("cpu")] and drawn == [torch.device("cpu")]
    assert next(model.parameters()).device == torch.device("cpu")
    # init_device: allocated and drawn there (here the CPU as well), then moved to ``device``.
    allocated.clear(), drawn.clear()
    space.build(space.sample(0), seed=0, device="cpu", init_device="cpu")
    assert allocated == [torch.device("cpu")] and drawn == [torch.device("cpu")]


@pytest.mark.parametrize("space", [WPCASpace.tiny(), FlexiBERTSpace()], ids=["wpca", "flexi"])
def test_save_pretrained_round_trip(space, tmp_path):
    model = space.build(space.sample(5), seed=1)
    model.save_pretrained(tmp_path / "m")
    assert (tmp_path / "m" / "config.json").is_file()
    loaded = CandidateModel.from_pretrained(tmp_path / "m")
    assert type(loaded) is type(model)
    assert loaded.config == model.config
    x = torch.randint(0, 30522, (2, 24))
    with torch.no_grad():
        assert torch.equal(model(x), loaded(x))


def test_from_pretrained_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        CandidateModel.from_pretrained(tmp_path / "missing")
    model = flexi("SA", "SDP")
    model.save_pretrained(tmp_path / "f")
    with pytest.raises(ValueError, match="not a WPCAModel"):
        WPCAModel.from_pretrained(tmp_path / "f")
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ValueError, match="model_type 'bert'"):
        CandidateModel.from_pretrained(tmp_path / "g")


def test_bad_inputs_to_forward():
    model = WPCAModel(WPCAConfig(layers=[{"block": "mobilebert", "ffn_size": 132}], seed=0)).eval()
    with pytest.raises(ValueError, match="longer than the model's max_position_embeddings=512"):
        model(torch.zeros(1, 513, dtype=torch.long))
    with pytest.raises(ValueError, match="empty batch"):
        model(torch.zeros(0, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="unknown block type"):
        WPCAConfig(layers=[{"block": "rnn", "ffn_size": 10}])
    with pytest.raises(ValueError, match="operation DSC takes parameter"):
        FlexiBERTConfig(layers=[{"operation": "DSC", "parameter": 7, "heads": 2, "ffn_size": 8, "num_ffn": 1}])


def test_attention_mask_hides_padding():
    model = WPCAModel(WPCAConfig(layers=[{"block": "bert", "ffn_size": 264}], seed=0)).eval()
    a = torch.randint(1000, 2000, (1, 10))
    b = a.clone()
    b[0, 9] = 5  # a masked position; only position 8 (also masked) sees it through the trigram
    mask = torch.ones_like(a)
    mask[0, 8:] = 0
    with torch.no_grad():
        out_a = model(a, attention_mask=mask)
        out_b = model(b, attention_mask=mask)
        unmasked = model(b)
    assert torch.allclose(out_a[0, :8], out_b[0, :8], atol=1e-6)
    assert not torch.allclose(out_b[0, :8], unmasked[0, :8], atol=1e-4)
