"""The learning curve of every stage of a run as Markdown (`training_report.md`)."""

from __future__ import annotations

import json
from typing import Any


def training_report(meta: dict[str, Any], stages: list[list[dict[str, Any]]]) -> str:
    """The learning curve as Markdown: loss and accuracy per epoch on each check set, per stage."""
    lines = ["# demo head: training report", "",
             "Recipe (last stage): `%s`" % json.dumps(meta["recipe"]), "",
             "Calibrated temperatures: per type %s; per bucket %s" % (
                 meta["checkpoint_config"]["temperature"], meta["checkpoint_config"]["temperature_by_options"]), "",
             "Accuracy: choice and noul top-1, score within one level (argmax). `val` is held-out synthetic",
             "data from the same generator; `hand-written` is the recipe's `check_cases` (the first",
             "hand-written set when empty), reported per epoch; nothing in a run is selected on it.", ""]
    for number, curve in enumerate(stages, 1):
        checks = [k for k, v in curve[0].items() if isinstance(v, dict)]
        header = "| epoch | train loss | binding loss | " + " | ".join(
            "%s %s" % (c, m) for c in checks for m in ("loss", "choice", "noul", "score")) + " |"
        lines += ["## stage %d" % number, "", header, "|" + "---|" * (3 + 4 * len(checks))]
        for row in curve:
            cells = ["%d" % row["epoch"], "%.3f" % row["train_loss"] if row.get("train_loss") is not None else "-",
                     "%.3f" % row["binding_loss"] if row.get("binding_loss") is not None else "-"]
            cells += ["%.3f" % row[c].get(m, float("nan")) for c in checks for m in ("loss", "choice", "noul", "score")]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)
