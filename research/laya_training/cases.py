"""The hand-written case sets: where they are, which role each plays, how they are read.

Each set is a JSON-lines file, one case a line: `domain`, `state`, `questions` (public question
form) and `expected` (the answer per question). They are named by role in the shipped head's
training: `train-*` were trained on (stage 14), `dev-*` chose between candidates, `test-*` judged
the chosen head once. `OLD_NAMES` maps each to its letter in the stage log (STAGES.md) and its former file.

Callers pass explicit paths; `cases_dir()` is this checkout's `research/cases` (or an override).
Recipe file names (`TrainSettings.hand_written`, `check_cases`) are relative to the repository root.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from laya_artifacts.errors import DemoError

from .examples import Example, one_hot

# The research package is run from a checkout, never installed for serving: its cases are found there.
TRAINING_DIR = Path(__file__).resolve().parents[1]
REPO_DIR = TRAINING_DIR.parent      # recipe file names are relative to it
CASES_ENV = "LAYA_TRAINING_CASES"
# role name -> (letter, file name before the move to research/cases), in the order they were written.
OLD_NAMES = {
    "train-1": ("A", "demo/eval_cases.jsonl"), "train-2": ("B", "demo/eval_cases_fresh.jsonl"),
    "train-3": ("C", "demo/eval_cases_holdout.jsonl"), "train-4": ("D", "demo/eval_cases_extra.jsonl"),
    "dev-1": ("E", "demo/eval_cases_judge.jsonl"), "dev-2": ("F", "demo/eval_cases_final.jsonl"),
    "test-1": ("G", "demo/eval_cases_g.jsonl"), "test-2": ("H", "demo/eval_cases_h.jsonl"),
}
SETS = tuple(OLD_NAMES)
FIRST_SET = "train-1"     # the per-epoch hand-written check when a recipe names none


def cases_dir(override: str | Path | None = None) -> Path:
    """The folder of the case sets: `override`, else $LAYA_TRAINING_CASES, else this checkout's research/cases."""
    return Path(override or os.environ.get(CASES_ENV) or TRAINING_DIR / "cases")


def case_file(name: str, directory: str | Path | None = None) -> Path:
    """The file of the set named `name` (a role name of `SETS`) in `cases_dir(directory)`."""
    if name not in OLD_NAMES:
        raise ValueError("unknown case set %r; known: %s" % (name, ", ".join(SETS)))
    return cases_dir(directory) / (name + ".jsonl")


def load_cases(path: Path) -> list[dict[str, Any]]:
    """The hand-written cases of one file: one JSON object per line with state, questions, expected."""
    cases = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                cases.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DemoError("%s line %d is not JSON: %s" % (path, number, exc)) from exc
    return cases


def eval_examples(cases: list[dict[str, Any]]) -> list[Example]:
    """The hand-written cases as generator-style examples (internal question + one-hot target)."""
    from laya.train import to_internal

    out = []
    for case in cases:
        for name, question in case["questions"].items():
            q = to_internal(name, question)
            expected = case["expected"][name]
            if q["t"] == "choice":
                index = list(q["crit"]).index(expected)
            elif q["t"] == "score":
                index = int(expected)
            else:
                index = int(bool(expected))
            out.append(Example(case["state"], q, one_hot(len(q["crit"]) if q["t"] != "noul" else 2, index),
                               case["domain"]))
    return out
