"""Generator version 2: version 1's worlds plus severity tickets, a second review pool and text facts."""

from __future__ import annotations

import random
from collections.abc import Iterator

from . import data_v1 as v1
from .data_v1 import (
    GREETINGS,
    PRODUCTS,
    RATING_INSTRUCTIONS,
    RATING_SCALES,
    REVIEW_ASPECTS,
    TONE_TEXT,
    TOPIC_FALLBACK,
    TOPIC_INSTRUCTIONS,
    TOPIC_LABELS,
    URGENCY_INSTRUCTIONS,
    URGENCY_SCALES,
    URGENCY_TEXT,
)
from .examples import Example, choice_question, noul_question, one_hot, ordinal_target, render_state, sentence_case

# ------------------------------------------------- version 2: severity, ratings, text facts
# Added after the first stage's learning curve: score and noul barely moved while choice learned.
# Real tickets carry their urgency in what happened, not in a stock phrase ("no rush", "ASAP"),
# and yes/no questions ask about many more facts than the few the first version drew.

# (team, problem) by severity: 0 cosmetic or a wish, 1 minor with a workaround, 2 blocks someone's
# work, 3 an outage, lost money or a security problem for many.
SEVERITY_ISSUES = [
    [("tech", "the footer of your homepage has a spelling mistake"),
     ("tech", "the icons look a little blurry on my new monitor"),
     ("feedback", "it would be nice to have a keyboard shortcut for search"),
     ("feedback", "could you add an export to PDF some day"),
     ("billing", "the help article about invoices links to an old page"),
     ("tech", "the colour of the save button changed and I liked the old one better"),
     ("sales", "I'm wondering whether you will ever offer a Linux version"),
     ("account", "I'd like to change my display name when someone has a moment")],
    [("tech", "exports are a bit slower than they used to be"),
     ("tech", "one chart shows yesterday's numbers until I refresh the page"),
     ("tech", "notifications sometimes arrive a few minutes late"),
     ("account", "the app logs me out about once a week"),
     ("billing", "the invoice PDF shows my old street name"),
     ("shipping", "the tracking page has not updated for a day"),
     ("tech", "the sidebar covers part of the text on small screens")],
    [("account", "I can't sign in and I have a client presentation in two hours"),
     ("tech", "the report export fails and the auditors need it tomorrow morning"),
     ("tech", "none of my files have synced since yesterday so I can't work from my laptop"),
     ("billing", "my card is refused and the subscription expires tonight"),
     ("shipping", "the parts for our event tomorrow have not arrived"),
     ("account", "my account is locked and I can't do my job today"),
     ("tech", "the app crashes every time I try to send the weekly payroll")],
    [("tech", "the whole platform is down for all of our customers"),
     ("tech", "checkout fails for every single customer and we are losing sales by the minute"),
     ("account", "someone else has logged into our admin account and changed the passwords"),
     ("tech", "every order placed since midnight has vanished from the system"),
     ("tech", "your API returns errors for every request in production"),
     ("account", "none of our 300 employees can sign in this morning"),
     ("billing", "you charged all of our 2,000 members twice and they are flooding us with complaints")],
]
ESCALATE_NOUL = ["Does this need an immediate response?", "Should this be escalated?",
                 "Should the on-call engineer be paged?", "Is this an emergency?", "Is this a high-priority ticket?",
                 "Can this wait until next week?"]   # the last one holds for the calm levels only

MORE_REVIEW_TEXT = [
    ["Stopped working after three days and the seller never answered.", "Do not buy this {p}, it is junk.",
     "The {p} fell apart the first time I used it. Returned it.", "One star is too many for this {p}."],
    ["The {p} works, barely, and it feels like it will break soon.", "I expected much more from this {p}.",
     "Too many flaws: the {p} is noisy and awkward to use."],
    ["The {p} does what it says, no more, no less.", "Some things I like about the {p}, some I don't.",
     "An ordinary {p}. Fine for the price."],
    ["Really nice {p}, only the instructions could be clearer.", "Happy with the {p}, would recommend it.",
     "The {p} works well and looks good; a small scratch on arrival."],
    ["I adore this {p}, it is perfect in every way.", "Could not be happier with the {p}.",
     "This {p} is brilliant, I already ordered a second one."],
]

MESSAGE_OPENINGS = ["Hi,", "Hello,", "", "Good afternoon,", "Dear team,"]
MESSAGE_BODIES = ["I am writing about my recent order.", "I have a note about our account.",
                  "This is about the service last week.", "Following up on my previous email.",
                  "Quick message about the booking."]
FACT_SENTENCES = {
    "date": ["Can we meet on Thursday at 3 pm?", "The delivery is planned for 12 March.",
             "I'll be in the office next Monday morning.", "The deadline is Friday at noon."],
    "amount": ["I paid 89.50 euros for it.", "The total came to $240.", "You took 15 pounds too much.",
               "The quote said 1,200 dollars."],
    "question": ["Could you tell me what happens next?", "Is there anything else you need from me?",
                 "Why did nobody call me back?", "Do you ship to Norway?"],
    "order_number": ["My order number is A-48213.", "Reference: #551902.", "Tracking code ZX-2231-77.",
                     "It's order 7730194."],
    "return": ["I would like to send it back.", "How do I return the item?", "I want to exchange it for another size.",
               "Please arrange a pickup so I can return it."],
    "complaint": ["I'm not happy with how this was handled.", "This is not the service I paid for.",
                  "Frankly the whole experience was a disappointment.", "I want to make a formal complaint."],
    "thanks": ["Thank you for your help!", "Many thanks to your colleague.", "I really appreciate it.",
               "Thanks a lot for the quick reply."],
}
FACT_QUESTIONS = {
    "date": ["Does the message mention a date or time?", "Is a day or time given?", "Is there a deadline or date?"],
    "amount": ["Does the message mention an amount of money?", "Is a price or sum stated?"],
    "question": ["Is the writer asking a question?", "Does the message contain a question?"],
    "order_number": ["Does the message include an order or tracking number?", "Is a reference number given?"],
    "return": ["Does the customer want to return the item?", "Is a return or exchange requested?"],
    "complaint": ["Is this a complaint?", "Is the writer complaining?"],
    "thanks": ["Is the writer thanking someone?", "Does the message express gratitude?"],
}


def _severity_ticket(rng: random.Random) -> Iterator[Example]:
    """A ticket whose urgency follows from what happened; a stock urgency phrase only sometimes."""
    level = rng.randint(0, 3)
    topic, problem = rng.choice(SEVERITY_ISSUES[level])
    parts = [rng.choice(GREETINGS), sentence_case(problem) + "."]
    if rng.random() < 0.3:
        parts.append(sentence_case(rng.choice(URGENCY_TEXT[level])) + ".")
    if rng.random() < 0.3:
        parts.append(rng.choice(TONE_TEXT["negative" if level >= 2 else "neutral"]))
    state = render_state(rng, " ".join(p for p in parts if p), "ticket")
    scale = rng.choice(URGENCY_SCALES)
    yield Example(state, {"t": "score", "ins": rng.choice(URGENCY_INSTRUCTIONS), "crit": list(scale)},
                  ordinal_target(len(scale), level / 3), "severity-urgency")
    instruction = rng.choice(ESCALATE_NOUL)
    holds = level <= 1 if instruction.startswith("Can this wait") else level >= 2
    q, target = noul_question(instruction, holds)
    yield Example(state, q, target, "severity-fact")
    made = choice_question(rng, topic if topic != "feedback" else "other", dict(TOPIC_LABELS), TOPIC_INSTRUCTIONS,
                            TOPIC_FALLBACK.get(topic))
    if made and rng.random() < 0.5:
        q, index = made
        yield Example(state, q, one_hot(len(q["crit"]), index), "severity-topic")


def _rated_review(rng: random.Random) -> Iterator[Example]:
    """A review in the second phrase pool, rated on a drawn scale, with a recommend/positive fact."""
    stars = rng.randint(0, 4)
    product = rng.choice(PRODUCTS)
    sentences = [rng.choice(MORE_REVIEW_TEXT[stars]).format(p=product)]
    if rng.random() < 0.5:
        aspect = rng.choice(list(REVIEW_ASPECTS))
        sentences.append(rng.choice(REVIEW_ASPECTS[aspect]))
    rng.shuffle(sentences)
    state = render_state(rng, " ".join(sentences), "review")
    scale = rng.choice(RATING_SCALES)
    yield Example(state, {"t": "score", "ins": rng.choice(RATING_INSTRUCTIONS), "crit": list(scale)},
                  ordinal_target(len(scale), stars / 4), "review-rating")
    positive = rng.random() < 0.5
    instruction = rng.choice(["Is the review positive?", "Is the reviewer satisfied?", "Did they like it?"] if positive
                             else ["Is the review negative?", "Is the reviewer disappointed?", "Did they dislike it?"])
    if stars != 2:
        q, target = noul_question(instruction, (stars >= 3) == positive)
        yield Example(state, q, target, "review-fact")


def message_facts(rng: random.Random) -> Iterator[Example]:
    """A short message with a few drawn facts in it, asked whether one of them (or another) holds."""
    present = [name for name in FACT_SENTENCES if rng.random() < 0.35]
    sentences = [rng.choice(MESSAGE_BODIES)] + [rng.choice(FACT_SENTENCES[name]) for name in present]
    rng.shuffle(sentences)
    state = render_state(rng, " ".join(p for p in [rng.choice(MESSAGE_OPENINGS)] + sentences if p), "message")
    asked = rng.sample(list(FACT_QUESTIONS), 2)
    if present and rng.random() < 0.5:
        asked[0] = rng.choice(present)
    for name in asked:
        q, target = noul_question(rng.choice(FACT_QUESTIONS[name]), name in present)
        yield Example(state, q, target, "message-fact")



# Version 2 keeps every version-1 world and adds severity tickets, more reviews and text facts.
DOMAINS = v1.DOMAINS + ((_severity_ticket, 4), (_rated_review, 2), (message_facts, 3))
