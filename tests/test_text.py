import pytest
import torch

from optuna_wpca import load_tokenizer, text_batch


def test_default_batch_is_real_wordpiece_text():
    batch = text_batch(batch_size=4, seq_len=40, seed=3)
    tok = load_tokenizer()
    assert batch.shape == (4, 40)
    assert tok.vocab_size == 30522
    assert (batch.input_ids[:, 0] == tok.cls_token_id).all() and (batch.input_ids[:, -1] == tok.sep_token_id).all()
    assert batch.attention_mask.all()
    words = tok.decode(batch.input_ids[0, 1:-1])
    assert len(words.split()) > 15  # real words, not ids
    assert torch.equal(batch.input_ids, text_batch(batch_size=4, seq_len=40, seed=3).input_ids)
    assert not torch.equal(batch.input_ids, text_batch(batch_size=4, seq_len=40, seed=4).input_ids)


def test_the_default_minibatch_is_16_by_128():
    assert text_batch().shape == (16, 128)  # the default chosen by benchmarks/batch_size.py's rule


def test_user_corpora(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("the quick brown fox jumps over the lazy dog\n" * 20)
    batch = text_batch(path, batch_size=2, seq_len=12)
    assert batch.shape == (2, 12)
    lines = ["a sentence about cats and dogs and more cats"] * 5
    assert text_batch(lines, batch_size=3, seq_len=10).shape == (3, 10)
    import datasets

    ds = datasets.load_dataset("text", data_files=str(path), split="train")
    assert text_batch(ds, batch_size=2, seq_len=8).shape == (2, 8)


def test_bad_corpora(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match="corpus is empty"):
        text_batch(empty)
    short = tmp_path / "short.txt"
    short.write_text("hello world")
    with pytest.raises(ValueError, match="holds 2 tokens; a 128-token sequence needs 126"):
        text_batch(short)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        text_batch(tmp_path / "missing.txt")
    with pytest.raises(FileNotFoundError, match="tokenizer directory"):
        text_batch(tokenizer=str(tmp_path / "no-tokenizer"))
    with pytest.raises(ValueError, match="batch_size"):
        text_batch(batch_size=0)
