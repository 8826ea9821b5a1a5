"""The gate's fixed edge cases: the rows every build saw before the corpus, kept in it.

Each stresses one thing the runtime must reproduce token for token: left truncation of a JSON
conversation, a state past `max_len`, non-string instructions, noul labels and mixed-case criteria,
an option over the 48-token cap, a collapsed head, numeric and boolean labels, option-order permutations.
"""

from __future__ import annotations

from typing import Any

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
