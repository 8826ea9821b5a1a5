"""Golden rows as the encoder graph's inputs: for timing a candidate's passes and for calibrating one.

The rows are built exactly as the runtime builds a request (`Decider.rows_for`, `collate`), so what a
calibration measures is what the served graph will see, padding included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from laya_serverless import Decider
from laya_serverless.core.questions import parse_questions
from laya_serverless.core.session import Feeds


def prepared_rows(decider: Decider, rows: Sequence[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """(built rows, questions) for each golden row, its refused questions left out."""
    config = decider.config
    prepared = []
    for row in rows:
        refused = row.get("refused", {})
        questions = parse_questions({q: d for q, d in row["questions"].items() if q not in refused})
        built = decider.rows_for(row["state"], questions, row["controls"].get("max_len", config.max_len),
                                 row["controls"].get("head_max_len", config.head_max_len))
        prepared.append((built, questions))
    return prepared


def calibration_feeds(decider: Decider, rows: Sequence[dict[str, Any]]) -> list[Feeds]:
    """One feed (every question of one state in one pass) per golden row that has a question to answer."""
    return [decider.feeds(built, questions)
            for built, questions in prepared_rows(decider, [r for r in rows if r.get("markers")])]
