"""Write the language-detection data tables the runtime reads, from upstream laya's `laya/lang.py`.

    python scripts/extract_language_data.py   # rewrites functions/laya_serverless/data/language_markers.json

The tables (stopword lists, script ranges, diacritics, post-Unicode-14 letter ranges) are data
from upstream laya 0.4.15 (Apache-2.0, Convai Innovations), reproduced with attribution so
routing decisions match upstream's; the detection code in `laya_serverless.protocol.detect` is our own.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "functions" / "laya_serverless" / "data" / "language_markers.json"


def main() -> int:
    from laya import lang

    data = {
        "source": "laya %s, laya/lang.py (Apache-2.0); reproduced by scripts/extract_language_data.py"
                  % version("laya"),
        "stopwords": {code: sorted(words) for code, words in lang._STOP.items()},
        "short_swedish_words": sorted(lang._SHORT_SWEDISH_WORDS),
        "nordic_overlap_words": sorted(lang._NORDIC_OVERLAP_WORDS),
        "collision_words": sorted(lang._EN_COLLISION_WORDS),
        "non_english_diacritics": "".join(sorted(lang._NON_EN_DIACRITICS)),
        "script_ranges": [[script, [list(r) for r in ranges]] for script, ranges in lang._SCRIPT_RANGES],
        "post_database_letter_ranges": [list(r) for r in lang._POST_DATABASE_LETTER_RANGES],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print("wrote %s" % OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
