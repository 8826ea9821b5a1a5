"""Row layout on a word-level tokenizer: head, markers, option cap, collapse, truncation, overflow."""

from __future__ import annotations

import pytest

from laya_serverless import QuestionError, StateError
from laya_serverless.core.questions import parse_question
from laya_serverless.core.sequence import build_row, encode_state, serialize_state
from tests.unit.fakes import SPECIAL, word_encoder

ENC = word_encoder()


def _ids(text: str) -> list[int]:
    return ENC.encode(text)


def test_row_layout_matches_the_protocol_picture() -> None:
    q = parse_question("team", {"type": "choice", "instructions": "which team ?",
                                "criteria": {"billing": "refunds", "tech": None, "other": ""}})
    row = build_row(ENC, SPECIAL, q, encode_state(ENC, SPECIAL, "i was charged twice"), 64, 32)
    head = [SPECIAL.cls_id, *_ids("choice question : which team ?"), SPECIAL.sep_id]
    slots = [[SPECIAL.mask_id, *_ids("billing : refunds")], [SPECIAL.mask_id, *_ids("tech")],
             [SPECIAL.mask_id, *_ids("other")]]
    expected = head + slots[0] + slots[1] + slots[2] + [SPECIAL.sep_id] + _ids("i was charged twice") + [SPECIAL.sep_id]
    assert row.ids == expected
    assert row.markers == [len(head), len(head) + 4, len(head) + 6]
    assert (row.state_tokens, row.state_tokens_used, row.tokens_per_option) == (4, 4, None)


def test_option_order_moves_slots_not_answers() -> None:
    q = parse_question("t", {"type": "choice", "instructions": "a", "criteria": ["b", "c"], "option_order": [1, 0]})
    row = build_row(ENC, SPECIAL, q, encode_state(ENC, SPECIAL, "d"), 64, 32)
    first, second = row.markers
    assert row.ids[first + 1] == _ids("c")[0] and row.ids[second + 1] == _ids("b")[0]


def test_options_are_capped_at_48_tokens() -> None:
    q = parse_question("t", {"type": "choice", "instructions": "a", "criteria": {"b": "c " * 100}})
    row = build_row(ENC, SPECIAL, q, encode_state(ENC, SPECIAL, "d"), 200, 100)
    slot = row.ids[row.markers[0]: row.ids.index(SPECIAL.sep_id, row.markers[0])]
    assert len(slot) == 1 + 48


def test_many_options_collapse_and_the_instruction_keeps_its_floor() -> None:
    criteria = {"%s %s" % (a, b): None for a in "abcdefgh" for b in "abcdefgh"}  # 64 two-word labels, 3 tokens each
    q = parse_question("t", {"type": "choice", "instructions": "a b c d e f g h a b c d", "criteria": criteria})
    row = build_row(ENC, SPECIAL, q, encode_state(ENC, SPECIAL, "d"), 512, 100)
    per = max(4, (100 - 16) // 64)
    assert row.tokens_per_option == per == 4
    assert len(row.markers) == 64 and all(row.ids[m] == SPECIAL.mask_id for m in row.markers)
    instruction = row.ids[1: row.ids.index(SPECIAL.sep_id)]
    assert len(instruction) == 8  # the floor, since the options left no budget


def test_collapsed_spans_are_counted() -> None:
    q = parse_question("t", {"type": "choice", "instructions": "a", "criteria": [1, "1", "b"]})
    row = build_row(ENC, SPECIAL, q, encode_state(ENC, SPECIAL, "d"), 64, 32)
    assert (row.options_distinct, row.tokens_per_option) == (2, None)


def test_array_states_keep_their_newest_end_and_others_their_beginning() -> None:
    q = parse_question("t", {"type": "noul", "instructions": "a"})
    words = ["a", "b", "c", "d", "e", "f", "g", "h"] * 4
    conversation = encode_state(ENC, SPECIAL, words)
    text = encode_state(ENC, SPECIAL, " ".join(words))
    head_len = len(build_row(ENC, SPECIAL, q, encode_state(ENC, SPECIAL, ""), 512, 64).ids) - 1
    max_len = head_len + 5 + 1
    left = build_row(ENC, SPECIAL, q, conversation, max_len, 64)
    right = build_row(ENC, SPECIAL, q, text, max_len, 64)
    assert left.ids[head_len:-1] == list(conversation.ids[-5:])
    assert right.ids[head_len:-1] == list(text.ids[:5])
    assert left.state_truncated and right.state_tokens - right.state_tokens_used == len(text.ids) - 5


def test_markers_past_max_len_are_refused_with_the_numbers() -> None:
    q = parse_question("t", {"type": "choice", "instructions": "a", "criteria": list("abcdefgh")})
    with pytest.raises(QuestionError) as error:
        build_row(ENC, SPECIAL, q, encode_state(ENC, SPECIAL, "d"), 12, 64)
    assert str(error.value) == ("question 't': only 3 of its 8 option markers fit in max_len=12 with "
                                "head_max_len=64 spent on the question; lower head_max_len, raise max_len, "
                                "or use fewer options")


def test_states_serialize_like_python_json_and_the_mask_token_is_scrubbed() -> None:
    assert serialize_state({"a": 1.0, "b": [True, None], "c": "é"}) == '{"a": 1.0, "b": [true, null], "c": "é"}'
    assert serialize_state(1e16) == "1e+16"
    assert encode_state(ENC, SPECIAL, "a [MASK] b").ids == tuple(_ids("a b"))
    with pytest.raises(StateError):
        serialize_state(None)


def test_question_side_texts_are_cached_by_exact_text() -> None:
    encoder = word_encoder()
    q = parse_question("t", {"type": "noul", "instructions": "a"})
    for state in ("b", "c", "d"):
        build_row(encoder, SPECIAL, q, encode_state(encoder, SPECIAL, state), 64, 32)
    assert encoder.cached_texts == 3  # the head and the two option texts, tokenized once
