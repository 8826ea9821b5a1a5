"""ModernBERT-style byte-level BPE tokenizers made offline, deterministically, with the `tokenizers` library.

`bpe_tokenizer` is trained on a fixed corpus in several languages (2,000 entries: the test kinds').
`wide_bpe_tokenizer` widens that one to a published vocabulary's size (mmBERT's 256,000 entries) with
synthetic merges: each new entry joins two existing ones, ranked after every trained merge, so the
tokenizer's file, its load and its embedding table have the real size while short texts still split
as the trained merges split them, then join further.
"""

from __future__ import annotations

import json
from typing import Any

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TRAINED_SIZE = 2000


def bpe_corpus() -> list[str]:
    """A fixed corpus in several languages so the BPE merges cover the test texts."""
    words = (
        "the customer was charged twice for the same order and wants a refund please help "
        "billing technical support other urgent low high medium score level question choice "
        "is this spam yes no the statement holds does not hold password reset login error "
        "shipping delayed package arrived broken damaged return policy cancel subscription "
        "je voudrais annuler ma commande merci beaucoup bonjour le service client "
        "ich möchte mein Passwort zurücksetzen danke schön Grüße "
        "quiero cancelar mi suscripción gracias por su ayuda señor "
        "obrigado pela atenção não consigo acessar minha conta "
        "привет мир спасибо 你好 世界 谢谢 こんにちは 😀 🚀 ✅ café naïve résumé"
    ).split()
    lines = []
    for i in range(400):
        lines.append(" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12)))
    lines.append('{"role": "user", "content": "hi"} [1, 2.5, true, null] {"a": [1, 2]}')
    return lines


def _trained_backend() -> Any:
    """The trained `tokenizers.Tokenizer` (byte-level BPE, [CLS] $A [SEP] template)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TRAINED_SIZE,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(bpe_corpus(), trainer=trainer)
    # ModernBERT's mask token strips the space before it, like the published tokenizer.
    tok.add_special_tokens([AddedToken("[MASK]", lstrip=True, special=True)])
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return tok


def _wrap(tok: Any) -> Any:
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok, cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
        pad_token="[PAD]", unk_token="[UNK]", model_max_length=8192,
    )


def bpe_tokenizer() -> Any:
    """The trained tokenizer, as the HF fast tokenizer upstream's `save_checkpoint` writes."""
    return _wrap(_trained_backend())


def widen(tok: Any, size: int) -> Any:
    """`tok` with synthetic merges appended until it holds `size` entries (deterministic: pairs in id order)."""
    from tokenizers import Tokenizer

    data = json.loads(tok.to_str())
    vocab: dict[str, int] = data["model"]["vocab"]
    merges = [m.split(" ", 1) if isinstance(m, str) else list(m) for m in data["model"]["merges"]]
    pieces = [t for t, _ in sorted(vocab.items(), key=lambda item: item[1]) if t not in SPECIAL]
    for left in pieces:
        for right in pieces:
            if len(vocab) >= size:
                break
            joined = left + right
            if joined not in vocab:
                vocab[joined] = len(vocab)
                merges.append([left, right])
    if len(vocab) < size:
        raise ValueError("cannot widen a %d-entry tokenizer to %d entries" % (len(pieces), size))
    data["model"]["merges"] = merges
    return Tokenizer.from_str(json.dumps(data, ensure_ascii=False))


def wide_bpe_tokenizer(size: int) -> Any:
    """The trained tokenizer widened to `size` entries, as an HF fast tokenizer."""
    return _wrap(widen(_trained_backend(), size))
