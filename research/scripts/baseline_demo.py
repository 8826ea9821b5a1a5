"""The no-head reference for the demo: MiniLM sentence similarity on the hand-written choice questions.

    python research/scripts/baseline_demo.py                                  # research/cases/train-1.jsonl
    python research/scripts/baseline_demo.py --cases research/cases/train-2.jsonl
    python research/scripts/baseline_demo.py --generated 400 --data-version 4  # on the generator's own questions
    python research/scripts/baseline_demo.py --cases FILE --artifact DIR       # also a model, and model + similarity

Prints top-1 accuracy overall and per domain (choice questions only: similarity has no yes/no
threshold or ordered scale without fitting one).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from laya_artifacts.checkpoints.make import minilm_dir
    from laya_training.baseline import SentenceEncoder, similarity_choices
    from laya_training.cases import FIRST_SET, case_file, load_cases

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=case_file(FIRST_SET),
                        help="JSON-lines cases (default research/cases/train-1.jsonl)")
    parser.add_argument("--generated", type=int, metavar="WORLDS",
                        help="instead of the cases: the choice questions of this many generated worlds")
    parser.add_argument("--data-version", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1_000_010, help="generator seed (default: no stage's)")
    parser.add_argument("--artifact", type=Path, help="also grade this built artifact alone and its log-probabilities "
                                                      "plus beta x cosine")
    parser.add_argument("--beta", type=float, nargs="+", default=[5.0, 10.0, 20.0, 40.0], help="weights of the cosine")
    args = parser.parse_args(argv)
    if args.generated:
        from laya_training.data import generate

        examples = generate(args.generated, args.seed, args.data_version)
        cases = [as_case(e) for e in examples if e.question["t"] == "choice"]
    else:
        cases = load_cases(args.cases)
    encoder = SentenceEncoder(minilm_dir())
    rows = similarity_choices(encoder, cases)
    if not rows:
        print("no choice questions in the cases", file=sys.stderr)
        return 1
    print("| domain | choice questions | similarity top-1 |\n|---|---:|---:|")
    for domain in sorted({d for d, _ in rows}):
        hits = [ok for d, ok in rows if d == domain]
        print("| %s | %d | %.1f%% |" % (domain, len(hits), 100 * sum(hits) / len(hits)))
    print("| all | %d | %.1f%% |" % (len(rows), 100 * sum(ok for _, ok in rows) / len(rows)))
    if args.artifact:
        from laya_serverless import Decider
        from laya_training.baseline import product_choices

        decider = Decider.from_artifact(args.artifact)
        graded = product_choices(encoder, decider.predict, cases, [0.0, *args.beta])
        print("\n| choice by | top-1 |\n|---|---:|")
        for beta, hits in graded.items():
            what = "the model alone" if beta == 0 else "model log-probability + %g x cosine" % beta
            print("| %s | %.1f%% (%d of %d) |" % (what, 100 * sum(ok for _, ok in hits) / len(hits),
                                                sum(ok for _, ok in hits), len(hits)))
    return 0


def as_case(example) -> dict:
    """A generated choice question in the hand-written cases' form (its domain, its target's mode expected)."""
    labels = list(example.question["crit"])
    question = {"type": "choice", "instructions": example.question["ins"], "criteria": example.question["crit"]}
    expected = labels[max(range(len(labels)), key=lambda i: example.target[i])]
    return {"domain": example.domain, "state": example.state, "questions": {"q": question}, "expected": {"q": expected}}


if __name__ == "__main__":
    sys.exit(main())
