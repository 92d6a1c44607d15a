"""A byte-level BPE tokenizer trained on the corpus, saved as a transformers tokenizer."""

from __future__ import annotations

from pathlib import Path

EOS = "<|endoftext|>"


def train_tokenizer(texts: list[str], vocab_size: int):
    """Byte-level BPE (GPT-2 style) so any text round-trips exactly."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer, length=len(texts))
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOS, eos_token=EOS,
                                   pad_token=EOS, unk_token=None,
                                   clean_up_tokenization_spaces=False)


def save_tokenizer(tokenizer, path) -> Path:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(path))
    return path


def load_tokenizer(path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


def encode_documents(tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids of each document (no special tokens)."""
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
