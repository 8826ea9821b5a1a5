"""Golden rows recorded from upstream laya on PyTorch CPU FP32: the reference every build is gated against.

A golden file holds, per case, the inputs, the token ids and markers of each row, the raw option
logits and action probabilities, the temperature-scaled probabilities, and upstream's answers;
plus the upstream versions and the checkpoint's revision and weight hash. Replaying it needs no
torch, so the gate can run on the machine that will serve.
"""

from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path
from typing import Any

GOLDENS_FILE = "goldens.json"
_LONG_TEXT = " ".join(["The customer reports a double charge on the March invoice and asks for a refund."] * 40)
_CONVERSATION = [{"role": "user" if i % 2 == 0 else "agent", "content": "message %d about the late parcel" % i}
                 for i in range(60)] + [{"role": "user", "content": "I want to cancel now, this is the last straw."}]
_TEAM = {"billing": "payments, invoices, refunds", "tech": "bugs, outages, login problems",
         "sales": "plans and upgrades", "other": ""}
_LONG_OPTION = "a description that goes on " * 20  # well over the 48-token option cap


def golden_inputs() -> list[dict[str, Any]]:
    """The fixed golden set: (id, state, questions, controls) covering what the gate must see."""
    team = {"type": "choice", "instructions": "Which team should handle this ticket?", "criteria": _TEAM}
    cases: list[dict[str, Any]] = [
        {"id": "all-three-types", "state": "I was charged twice for my order and the app keeps crashing.",
         "questions": {
             "team": team,
             "urgency": {"type": "score", "instructions": "How urgent is it?",
                         "criteria": ["not urgent", "somewhat urgent", "urgent", "critical"]},
             "churn": {"type": "noul", "instructions": "Is the customer about to cancel?"}}},
        {"id": "left-truncated-conversation", "state": _CONVERSATION,
         "questions": {"cancel": {"type": "noul", "instructions": "Does the latest message ask to cancel?"},
                       "team": team}},
        {"id": "state-longer-than-max-len", "state": _LONG_TEXT,
         "questions": {"refund": {"type": "noul", "instructions": "Is a refund requested?"}}},
        {"id": "non-ascii-structured-instructions", "state": {"ticket": "Je veux annuler mon abonnement 😡", "n": 3},
         "questions": {"lang": {"type": "choice",
                                "instructions": {"tâche": "langue du ticket", "options": ["fr", "de"]},
                                "criteria": ["fr", "de", "en", "日本語"]}}},
        {"id": "noul-labels", "state": "Please send me the invoice again.",
         "questions": {"invoice": {"type": "noul", "instructions": "Is this about an invoice?",
                                   "labels": {"false": "unrelated", "true": "invoice"}}}},
        {"id": "noul-mixed-case-criteria", "state": "The package arrived broken.",
         "questions": {"damaged": {"type": "noul", "instructions": "Was the item damaged?",
                                   "criteria": {"TRUE": "the item arrived damaged", "False": "the item is fine"}}}},
        {"id": "option-over-48-tokens", "state": "My login fails with error 403.",
         "questions": {"cause": {"type": "choice", "instructions": "Most likely cause",
                                 "criteria": {"password": _LONG_OPTION, "outage": "a service outage", "other": None}}}},
        {"id": "collapsed-head", "state": "Route this to the right queue.",
         "questions": {"queue": {"type": "choice", "instructions": "Which queue?",
                                 "criteria": ["queue number %d" % i for i in range(60)]}},
         "controls": {"max_len": 400}},
        {"id": "numeric-and-bool-labels", "state": {"rating": 4, "text": "pretty good overall"},
         "questions": {"stars": {"type": "choice", "instructions": "Stars",
                                 "criteria": [1, 2, 3, 4.5, False, "five"]}}},
    ]
    base = {"type": "choice", "instructions": "Which team should handle this ticket?", "criteria": _TEAM}
    for i, order in enumerate([[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2], [2, 0, 3, 1]]):
        cases.append({"id": "choice-permutation-%d" % i, "state": "I was charged twice for my order.",
                      "questions": {"team": dict(base, option_order=order)}})
    for case in cases:
        case.setdefault("controls", {})
    return cases


# The SIMD extensions that change which kernels PyTorch runs, hence the last bits of an FP32 result.
_KERNEL_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")


def cpu_family() -> str:
    """The CPU as far as FP32 reproducibility goes: vendor, model name and kernel-relevant flags.
    Recorded with the goldens so a test can tell "same machine type, expect identical bits" from not."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        return "%s %s" % (platform.machine(), platform.processor())
    flags = set(info.get("flags", "").split())
    return " / ".join([info.get("vendor_id", "?"), info.get("model name", "?"),
                       ",".join(f for f in _KERNEL_FLAGS if f in flags)])


def weights_sha256(checkpoint_dir: Path) -> str:
    digest = hashlib.sha256()
    with open(Path(checkpoint_dir) / "model.safetensors", "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def record_goldens(checkpoint_dir: Path, name: str, revision: str | None = None) -> dict[str, Any]:
    """Run upstream laya on PyTorch CPU FP32 over the golden set."""
    import laya
    import numpy as np
    import torch
    from laya.common import collate_items

    agent = laya.Agent(str(checkpoint_dir), device="cpu")
    rows = []
    for case in golden_inputs():
        ids = list(case["questions"])
        internal = {qid: agent._to_internal(case["questions"][qid]) for qid in ids}
        items = agent._encode_state(case["state"], ids, internal, **case["controls"])
        with torch.no_grad():
            logits, act = agent._forward(collate_items([items], agent.tok.pad_token_id))
            answers = agent.predict(case["state"], case["questions"], **case["controls"])["answers"]
        rows.append({
            **case,
            "token_ids": [item["ids"] for item in items],
            "markers": [item["markers"] for item in items],
            "logits": [[float(v) for v in logits[j, : len(item["markers"])]] for j, item in enumerate(items)],
            "act_probabilities": [[float(v) for v in act[j]] for j in range(len(items))],
            "answers": answers,
        })
        assert np.isfinite(logits).all()
    recorded = {
        "checkpoint": {"name": name, "revision": revision, "weights_sha256": weights_sha256(checkpoint_dir)},
        "reference": {"laya": laya.__version__ if hasattr(laya, "__version__") else "0.4.15",
                      "torch": torch.__version__, "device": "cpu", "precision": "fp32", "cpu": cpu_family()},
        "rows": rows,
    }
    # JSON-pure, exactly as a golden file reads back (numeric labels become string keys).
    return json.loads(json.dumps(recorded, ensure_ascii=False))


def write_goldens(goldens: dict[str, Any], directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / GOLDENS_FILE
    path.write_text(json.dumps(goldens, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def load_goldens(path: Path) -> dict[str, Any]:
    path = Path(path)
    if path.is_dir():
        path = path / GOLDENS_FILE
    return json.loads(path.read_text(encoding="utf-8"))
