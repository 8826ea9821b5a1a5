"""Script and language detection for routing: can the English checkpoint read this state?

A dependency-free heuristic that must decide exactly as upstream laya's `analyse` does, since its
result is echoed in `routing.detection`. The word lists and Unicode tables are upstream's data
(`data/language_markers.json`, with attribution); this module is the behaviour, written here.

Outline: the state's string leaves are joined (4000 characters at most) and their letters counted
by script. Non-Latin text routes to the multilingual checkpoint. Latin text gets a stopword and
diacritic language guess, with guards for all-caps text; an otherwise English state is then
scanned line by line, and leaf by leaf, for one line that is clearly another language.
"""

from __future__ import annotations

import bisect
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_DATA = json.loads((Path(__file__).parent / "data" / "language_markers.json").read_text(encoding="utf-8"))
STOPWORDS: dict[str, frozenset[str]] = {code: frozenset(words) for code, words in _DATA["stopwords"].items()}
_SHORT_SWEDISH = frozenset(_DATA["short_swedish_words"])
_NORDIC_OVERLAP = frozenset(_DATA["nordic_overlap_words"])
_COLLISIONS = frozenset(_DATA["collision_words"])
_DIACRITICS = frozenset(_DATA["non_english_diacritics"])
_SHARED = frozenset(w for words in STOPWORDS.values() for w in words
                    if sum(w in other for other in STOPWORDS.values()) > 1) | _NORDIC_OVERLAP
_ENGLISH_ONLY = STOPWORDS["en"] - _SHARED
_RANGES = sorted((lo, hi, script) for script, ranges in _DATA["script_ranges"] for lo, hi in ranges)
_RANGE_STARTS = [lo for lo, _, _ in _RANGES]
_NEW_LETTERS = [tuple(r) for r in _DATA["post_database_letter_ranges"]]

NON_ENGLISH_DIACRITIC_RATE = 0.02
ENGLISH_RESCUE_DIACRITIC_RATE = 0.06
NON_LATIN_SHARE, NON_LATIN_MIN_SHARE, NON_LATIN_MIN_LETTERS = 0.2, 0.1, 10
MAX_CHARS, MAX_DEPTH = 4000, 6
SHOUTED_MIN_WORD, SHOUTED_MIN_STOPWORD = 5, 4

_WORD = re.compile(r"[^\W\d_]+")
_IDENTIFIER = re.compile(r"(?<![\w-])[\w-]*(?:[.@][\w-]+)+")  # domains, e-mail addresses, versions
_CODE_LINE = re.compile(r"[=;{}\[\]]|\w\(")
_JOINED = re.compile(r"[^\W_][._/\\][^\W_]")
_LETTER_RUN = re.compile(r"[^\W\d_]{2,}")


def _is_letter(ch: str) -> bool:
    """`isalpha()`, plus letters assigned after this interpreter's Unicode database, so hosts agree."""
    if ch.isalpha():
        return True
    code = ord(ch)
    if code < _NEW_LETTERS[0][0] or unicodedata.category(ch) != "Cn":
        return False
    return any(lo <= code <= hi for lo, hi in _NEW_LETTERS)


def _is_latin(code: int, below: int) -> bool:
    return code < below or 0x1E00 <= code <= 0x1EFF or 0xFF21 <= code <= 0xFF3A or 0xFF41 <= code <= 0xFF5A


def _named_script(code: int) -> str | None:
    i = bisect.bisect_right(_RANGE_STARTS, code) - 1
    return _RANGES[i][2] if i >= 0 and code <= _RANGES[i][1] else None


def _leaves(state: Any, depth: int = 0) -> list[str]:
    """String leaves in document order: mapping values (not keys), list items; 6 levels deep at most."""
    if depth > MAX_DEPTH or state is None:
        return []
    if isinstance(state, str):
        return [state]
    if isinstance(state, bytes | bytearray):
        try:
            return [bytes(state).decode("utf-8")]
        except UnicodeDecodeError:
            return []
    if isinstance(state, Mapping):
        return [leaf for value in state.values() for leaf in _leaves(value, depth + 1)]
    if isinstance(state, list | tuple):
        return [leaf for item in state for leaf in _leaves(item, depth + 1)]
    return []


def state_text(state: Any, max_chars: int = MAX_CHARS) -> str:
    parts, budget = [], max_chars
    for leaf in _leaves(state):
        if budget <= 0:
            break
        if len(leaf) > budget:
            parts.append(leaf[:budget])
            break
        parts.append(leaf)
        budget -= len(leaf) + 1
    return " ".join(parts)[:max_chars]


def _script_counts(text: str) -> dict[str, int]:
    """Letters per script; named scripts in order of first appearance, Latin last (it loses ties)."""
    counts: dict[str, int] = {}
    latin = 0
    for ch in text:
        if not _is_letter(ch):
            continue
        code = ord(ch)
        if _is_latin(code, 0x02B0):
            latin += 1
            continue
        name = _named_script(code) or "other"
        counts[name] = counts.get(name, 0) + 1
    counts["latin"] = latin
    return counts


def _profile(counts: dict[str, int]) -> dict[str, float]:
    total = sum(counts.values())
    if not total:
        return {}
    ordered = ([("latin", counts["latin"])] if counts.get("latin") else []) + [
        (name, n) for name, n in counts.items() if name != "latin"]
    return {name: n / total for name, n in ordered if n}


def _carries(share: float, letters: int) -> bool:
    return share >= NON_LATIN_SHARE or (share >= NON_LATIN_MIN_SHARE and letters >= NON_LATIN_MIN_LETTERS)


def _non_latin_words(text: str) -> list[str]:
    """Runs of >= 2 letters of one named script (combining marks skipped), not starting upper-case."""
    runs, current, script = [], "", None
    for ch in text:
        if unicodedata.combining(ch):
            continue
        code = ord(ch)
        this = None if _is_latin(code, 0x0250) else _named_script(code)
        if this is not None and this == script:
            current += ch
            continue
        if current:
            runs.append(current)
        current, script = (ch, this) if this is not None else ("", None)
    if current:
        runs.append(current)
    return [run for run in runs if len(run) >= 2 and not run[0].isupper()]


def _rescued_as_english(words: list[str], rate: float) -> bool:
    distinct = set(words)
    return (rate < ENGLISH_RESCUE_DIACRITIC_RATE and len(distinct & _ENGLISH_ONLY) >= 2
            and sum(1 for w in distinct if any(ch in _DIACRITICS for ch in w)) <= 1)


def _latin_guess(text: str) -> dict[str, Any]:
    """language (code or None), diacritic rate, and whether the text shows non-English markers."""
    words = _WORD.findall(_IDENTIFIER.sub(" ", text).replace("İ", "i").lower())
    lowered = text.lower()
    rate = sum(1 for ch in lowered if ch in _DIACRITICS) / max(1, len(lowered))
    marked = rate >= NON_ENGLISH_DIACRITIC_RATE
    distinct = set(words)
    nordic = bool(distinct & _NORDIC_OVERLAP) and not distinct & _ENGLISH_ONLY
    if 1 < len(words) < 4 and distinct & _SHORT_SWEDISH:
        return {"language": "sv", "rate": rate, "non_english": marked}
    if len(words) < 4:
        return {"language": None, "rate": rate, "non_english": marked or nordic}
    counts = Counter(words)
    scores = {code: sum(1 if w in _COLLISIONS else n for w, n in counts.items() if w in stop)
              for code, stop in STOPWORDS.items()}
    english = scores["en"]
    candidates = {code: score for code, score in scores.items()
                  if code != "en" and any(w not in _SHARED for w in distinct & STOPWORDS[code])}
    best, top = max(candidates.items(), key=lambda kv: kv[1], default=(None, 0))
    language = None
    if best and top >= max(2, english + 2):
        language = best
    elif best == "sv" and "inte" in words and "kan" in words and words[0] in ("kan", "jag", "vi") and english <= 1:
        language = best
    elif best and marked and top >= max(2, english):
        language = best
    elif english and (not marked or _rescued_as_english(words, rate)):
        language = "en"
    return {"language": language, "rate": rate, "non_english": marked or (language is None and nordic)}


def _shouted(text: str) -> bool:
    return any(ch.isupper() for ch in text) and not any(ch.islower() for ch in text)


def _shouting_proves(tokens: list[str], language: str, rate: float) -> bool:
    """All-caps text names a language only with a long word and diacritics or a long stopword."""
    if not any(len(t) >= SHOUTED_MIN_WORD for t in tokens):
        return False
    if rate >= NON_ENGLISH_DIACRITIC_RATE:
        return True
    return any(len(w) >= SHOUTED_MIN_STOPWORD for w in {t.lower() for t in tokens} & STOPWORDS.get(language, set()))


def _blank_caps(text: str) -> str:
    return _LETTER_RUN.sub(lambda m: " " if m.group().isupper() else m.group(), text)


def _prose_language(segment: str) -> str | None:
    """The non-English language a line of prose is clearly written in, else None."""
    if not segment.strip() or _CODE_LINE.search(segment):
        return None
    prose = " ".join(token for token in segment.split() if not _JOINED.search(token))
    shouted = _shouted(prose)
    if not shouted:
        prose = _blank_caps(prose)
    tokens = _WORD.findall(prose)
    if len(tokens) < 4:
        return None
    guess = _latin_guess(prose)
    language: str | None = guess["language"]
    if language in (None, "en") or (shouted and not _shouting_proves(tokens, language, guess["rate"])):
        return None
    if len({t.lower() for t in tokens} & STOPWORDS.get(language, set())) < 2:
        return None
    return language


def _first_foreign_line(state: Any) -> tuple[str, str] | None:
    seen = 0
    for leaf in _leaves(state):
        for line in leaf.split("\n"):
            if seen >= MAX_CHARS:
                return None
            line = line[: MAX_CHARS - seen]
            seen += len(line)
            language = _prose_language(line)
            if language:
                return language, line.strip()
    return None


def _analyse_text(text: str) -> dict[str, Any]:
    counts = _script_counts(text)
    profile = _profile(counts)
    script = "unknown" if not any(counts.values()) else max(counts.items(), key=lambda kv: kv[1])[0]
    non_latin = round(1.0 - profile.get("latin", 0.0), 4) if profile else 0.0
    non_latin_letters = round(non_latin * sum(ch.isalpha() for ch in text))
    carries = _carries(non_latin, non_latin_letters)
    if script == "latin" and carries and _non_latin_words(text):
        script = max((s for s in profile if s != "latin"), key=profile.__getitem__)
    base = {"script": script, "script_profile": profile, "language": None}
    if script == "unknown":
        return {**base, "is_english": True, "language_undecided": True, "diacritic_rate": 0.0,
                "non_latin_fraction": 0.0, "mixed_segment": None}
    if script != "latin":
        return {**base, "is_english": False, "language_undecided": True, "diacritic_rate": 0.0,
                "non_latin_fraction": non_latin, "mixed_segment": None}
    guess = _latin_guess(text)
    language = guess["language"]
    if language not in (None, "en") and not carries:
        if _shouted(text):
            if not _shouting_proves(_WORD.findall(text), language, guess["rate"]):
                language = None
        else:
            caps = [m.group() for m in _LETTER_RUN.finditer(text) if m.group().isupper()]
            if caps and not any(len(c) >= SHOUTED_MIN_WORD for c in caps):
                blanked = _blank_caps(text)
                if blanked != text:
                    language = _latin_guess(blanked)["language"]
    undecided = language is None
    return {**base, "language": language, "is_english": language == "en" or (undecided and not guess["non_english"]),
            "language_undecided": undecided, "diacritic_rate": round(float(guess["rate"]), 4),
            "non_latin_fraction": non_latin, "mixed_segment": None}


def _foreign_leaf(leaf: str) -> dict[str, Any] | None:
    """The analysis of the leaf's line (>= 7 chars, not code) that reads non-English, most letters first."""
    best_letters, best = -1, None
    for line in leaf.split("\n"):
        if len(line) < 7:
            continue
        sample = line[:MAX_CHARS]
        if not sample.strip() or _CODE_LINE.search(sample):
            continue
        found = _analyse_text(sample)
        if found["is_english"]:
            continue
        named = found["language"] not in (None, "en") and _prose_language(sample) is not None
        if not named:
            if found["script"] not in ("latin", "unknown"):
                if not (_non_latin_words(sample) and sum(ch.isalpha() for ch in sample) >= NON_LATIN_MIN_LETTERS):
                    continue
            elif not (found["diacritic_rate"] >= NON_ENGLISH_DIACRITIC_RATE and len(_WORD.findall(sample)) >= 4):
                continue
        letters = sum(ch.isalpha() for ch in sample)
        if letters > best_letters:
            best_letters, best = letters, found
    return best


def analyse(state: Any) -> dict[str, Any]:
    """The detection object for a state (string, bytes, mapping, list, number, bool or None)."""
    result = _analyse_text(state_text(state))
    if result["script"] == "latin" and result["is_english"]:
        leaves = _leaves(state)
        if len(leaves) > 1 or any("\n" in leaf for leaf in leaves):
            found = _first_foreign_line(state)
            if found:
                result = {**result, "language": found[0], "is_english": False, "language_undecided": False,
                          "mixed_segment": found[1]}
    if isinstance(state, str | bytes | bytearray) or state is None or not result["is_english"]:
        return result
    best_letters, best = -1, None
    for leaf in _leaves(state):
        foreign = _foreign_leaf(leaf)
        if foreign is None:
            continue
        letters = sum(ch.isalpha() for ch in leaf[:MAX_CHARS])
        if letters > best_letters:
            best_letters, best = letters, foreign
    if best is None:
        return result
    return {**result, "language": best["language"], "is_english": False,
            "language_undecided": best["language_undecided"]}
