"""chonky semantic chunking through a tiny randomly initialised local model."""

from __future__ import annotations

import pytest

from rbench.dataset_adapters.chunking import ChunkerConfig, chonky_splitter, chunk_text
from tests.conftest import need

TEXT = "the cat sat on the mat . the dog ran in the park . birds sing at dawn ."


def _tiny_model(folder, separator_bias: float):
    torch = need("torch")
    need("chonky")
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import (
        DistilBertConfig,
        DistilBertForTokenClassification,
        PreTrainedTokenizerFast,
    )

    words = sorted(set(TEXT.split()))
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=64,
    ).save_pretrained(folder)
    config = DistilBertConfig(vocab_size=len(vocab), dim=16, n_layers=1, n_heads=2, hidden_dim=32,
                              max_position_embeddings=64, num_labels=2)
    torch.manual_seed(0)
    model = DistilBertForTokenClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([0.0, separator_bias]))
    model.save_pretrained(folder)
    return str(folder)


def _words(chunks):
    return " ".join(chunks).split()


def test_chonky_runs_from_a_local_folder_and_keeps_every_word(tmp_path):
    folder = _tiny_model(tmp_path / "separators", separator_bias=5.0)
    chunks = chunk_text(TEXT, ChunkerConfig(kind="chonky", model=folder, size=6, overlap=0))
    assert _words(chunks) == TEXT.split()
    assert all(len(c.split()) <= 6 for c in chunks)


def test_chonky_without_separators_falls_back_to_the_token_cap(tmp_path):
    chonky_splitter.cache_clear()
    folder = _tiny_model(tmp_path / "never-split", separator_bias=-5.0)
    cfg = ChunkerConfig(kind="chonky", model=folder, size=8, overlap=0)
    chunks = chunk_text(TEXT, cfg)
    assert chunks == chunk_text(TEXT, ChunkerConfig(kind="tokens", size=8, overlap=0))


def test_chonky_needs_a_model():
    with pytest.raises(ValueError, match="needs 'model'"):
        ChunkerConfig(kind="chonky")
