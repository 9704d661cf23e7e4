"""Masked-LM pretraining: the held-out split, the masks, determinism, checkpoints, bad recipes."""

import numpy as np
import pytest
import torch

from optuna_wpca import WPCASpace
from optuna_wpca.distill._pretrain import (
    MLMConfig,
    MLMCorpus,
    _articles,
    held_out_batches,
    pretrain_mlm,
    wikitext_mlm_corpus,
)
from optuna_wpca._text import bundled_text_path


@pytest.fixture(scope="module")
def corpus():
    return wikitext_mlm_corpus()


def tiny_model(seed=0):
    space = WPCASpace(num_layers=2, hidden_size=32, bert_heads=2, mobilebert_heads=2)
    return space.build(space.sample(np.random.default_rng(3)), seed=seed)


def test_held_out_articles_are_not_in_the_training_text(corpus):
    test = _articles(str(bundled_text_path("test")))
    assert len(test) > 40  # WikiText-2's test split has 60 articles
    held = [a for i, a in enumerate(test) if i % 5 == 4]
    valid = _articles(str(bundled_text_path("valid")))
    training_lines = {line for a in valid + [a for i, a in enumerate(test) if i % 5 != 4] for line in a}
    assert not any(line in training_lines for a in held for line in a if len(line) > 80)
    assert 40_000 < len(corpus.held_out) < len(corpus.train) / 4
    assert corpus.mask_id == 103 and corpus.cls_id == 101 and corpus.vocab_size == 30522


def test_held_out_masks_are_fixed_and_skip_special_tokens(corpus):
    config = MLMConfig(seq_len=16, eval_batch_size=32)
    first, again = held_out_batches(corpus, config), held_out_batches(corpus, config)
    inputs, masked, ids = first[0]
    assert torch.equal(inputs, again[0][0]) and torch.equal(masked, again[0][1])
    assert (ids[:, 0] == corpus.cls_id).all() and (ids[:, -1] == corpus.sep_id).all()
    assert not masked[:, 0].any() and not masked[:, -1].any() and masked.any(dim=1).all()
    assert (inputs[masked] == corpus.mask_id).all() and torch.equal(inputs[~masked], ids[~masked])
    rate = float(torch.cat([m for _, m, _ in first]).float().mean())
    assert 0.12 < rate < 0.18
    other = held_out_batches(corpus, MLMConfig(seq_len=16, eval_batch_size=32, eval_seed=1))
    assert not torch.equal(other[0][1], masked)


def test_a_long_run_measured_at_a_step_is_the_short_run(corpus):
    config = dict(batch_size=4, seq_len=16, warmup_steps=3, eval_batch_size=256)
    long = pretrain_mlm(tiny_model(), corpus, MLMConfig(steps=8, checkpoints=(4,), **config))
    short = pretrain_mlm(tiny_model(), corpus, MLMConfig(steps=4, **config))
    assert sorted(long.losses) == [4, 8] and sorted(short.losses) == [4]
    assert long.losses[4] == short.losses[4]  # constant rate after warm-up: checkpoints are honest
    again = pretrain_mlm(tiny_model(), corpus, MLMConfig(steps=8, checkpoints=(4,), **config))
    assert again.losses == long.losses
    other = pretrain_mlm(tiny_model(), corpus, MLMConfig(steps=8, seed=1, **config))
    assert other.losses[8] != long.losses[8]
    assert long.predicted_tokens > 5000 and long.train_seconds[4] <= long.train_seconds[8]


def test_training_lowers_the_held_out_loss(corpus):
    seen = []
    result = pretrain_mlm(tiny_model(), corpus, MLMConfig(steps=60, checkpoints=(1,), batch_size=8, seq_len=32,
                                                           warmup_steps=5, learning_rate=3e-3, eval_batch_size=256),
                          on_checkpoint=lambda step, loss: seen.append(step))
    assert seen == [1, 60]
    assert result.losses[60] < result.losses[1] - 1.0
    assert result.losses[1] < np.log(corpus.vocab_size) + 0.5  # near uniform at the start


@pytest.mark.parametrize("kwargs, message", [
    (dict(steps=0), "steps must be >= 1"),
    (dict(seq_len=2), "seq_len must be >= 3"),
    (dict(mask_rate=1.0), "mask_rate must lie in"),
    (dict(steps=10, checkpoints=(20,)), r"checkpoints \[20\] are outside"),
])
def test_bad_recipes_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MLMConfig(**kwargs)


def test_an_empty_corpus_and_a_model_without_word_embeddings_are_named():
    with pytest.raises(ValueError, match="empty corpus"):
        MLMCorpus(np.zeros(0, dtype=np.int64), np.zeros(10, dtype=np.int64), 101, 102, 103, 30522)
    small = MLMCorpus(np.arange(100), np.arange(5), 101, 102, 103, 30522)
    with pytest.raises(ValueError, match="fewer than one window"):
        held_out_batches(small, MLMConfig(seq_len=16))

    class NoTable(torch.nn.Module):
        config = type("C", (), {"hidden_size": 8})()

    with pytest.raises(ValueError, match="no word-embedding table"):
        pretrain_mlm(NoTable(), small, MLMConfig(steps=1, seq_len=4))
