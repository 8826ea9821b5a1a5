"""The runtime's language detector against upstream `laya.lang.analyse`: identical output, key for key."""

from __future__ import annotations

import random
from typing import Any

import pytest

from laya_serverless.protocol.detect import STOPWORDS, analyse

upstream = pytest.importorskip("laya.lang")

SENTENCES = [
    "I was charged twice for my order, please refund me.", "Why hasn't my card been delivered?",
    "Bonjour, je voudrais annuler ma commande s'il vous plaît.", "Ich möchte mein Passwort zurücksetzen, danke.",
    "Hola, necesito ayuda con mi pedido por favor.", "Olá, não consigo acessar minha conta desde ontem.",
    "Ciao, vorrei sapere quando arriva il mio pacco.", "Ik wil graag mijn abonnement opzeggen, dank je.",
    "Hej, jag kan inte logga in på mitt konto.", "Kan inte logga in", "Bună ziua, aș dori să anulez comanda.",
    "আমি আমার অর্ডার বাতিল করতে চাই", "Salam, mən sifarişimi ləğv etmək istəyirəm.",
    "Привет, мне нужна помощь с заказом", "你好，我的订单还没有到", "こんにちは、注文をキャンセルしたいです",
    "مرحبا، أريد إلغاء طلبي", "नमस्ते, मुझे अपना ऑर्डर रद्द करना है", "안녕하세요, 주문을 취소하고 싶어요",
    "PLEASE HELP ME NOW", "JE VOUDRAIS ANNULER MA COMMANDE", "ok", "", "   ", "12345 !!!", "café naïve résumé façade",
    "Contact me at jean.dupont@example.fr or visit www.exemple.fr version 1.2.3", "x = foo(bar); y[0] = {1}",
    "Hello\nDas ist ein Test mit vielen Wörtern und noch mehr", "José", "ÉTÉ", "The ÉTÉ festival is great fun",
    "Çok teşekkür ederim, siparişim nerede?", "Dziękuję bardzo, gdzie jest moja paczka?", "ﬁ ligature text here",
    "e\u0301te\u0301 en France cette anne\u0301e", "Hej tack ja nej", "Straße Grüße Füße Maße",
    "I love the café au lait at this place, it is the best in town", "ТЕСТ ТЕСТ test test",
    "mixed English text with 中文 words inside it for testing purposes", "Ａｂｃ ｆｕｌｌｗｉｄｔｈ text",
]


def _corpus() -> list[Any]:
    rng = random.Random(11)
    states: list[Any] = list(SENTENCES)
    vocab = {code: sorted(words) for code, words in STOPWORDS.items()}
    extra = "order refund package invoice account login password crash help urgent".split()
    for _ in range(400):
        roll = rng.random()
        codes = rng.sample(sorted(vocab), rng.choice([1, 1, 2]))
        words = [rng.choice(vocab[rng.choice(codes)] + extra) for _ in range(rng.randint(1, 14))]
        if rng.random() < 0.15:
            words = [w.upper() for w in words]
        if rng.random() < 0.2:
            words.insert(rng.randint(0, len(words)), rng.choice(["é", "ção", "über", "ñandú", "ß", "ø", "œuvre"]))
        text = " ".join(words)
        if roll < 0.4:
            states.append(text)
        elif roll < 0.6:
            states.append({"ticket": rng.choice(SENTENCES), "note": text, "n": rng.randint(0, 5)})
        elif roll < 0.8:
            states.append([{"role": "user", "content": rng.choice(SENTENCES)}, text, rng.choice(SENTENCES)])
        else:
            states.append(rng.choice(SENTENCES) + "\n" + text + "\n" + rng.choice(SENTENCES))
    states += [None, 42, True, 3.5, b"bytes in UTF-8: caf\xc3\xa9", {"deep": [[[[[[["too deep"]]]]]]]},
               "a" * 5000, {"a": "x" * 3999, "b": "Bonjour je voudrais annuler"}]
    return states


CORPUS = _corpus()


def test_detection_matches_upstream_on_every_state() -> None:
    mismatches = [(state, analyse(state), upstream.analyse(state)) for state in CORPUS
                  if analyse(state) != upstream.analyse(state)]
    assert mismatches == []
    assert len(CORPUS) > 400


def test_the_corpus_reaches_every_branch() -> None:
    results = [upstream.analyse(state) for state in CORPUS]
    assert {r["script"] for r in results} >= {"latin", "unknown", "cyrillic", "han", "arabic", "hangul", "bengali"}
    assert any(r["mixed_segment"] for r in results) and any(r["language_undecided"] for r in results)
    languages = {r["language"] for r in results}
    assert {"en", "fr", "de", "es", "pt", "sv"} <= languages
