"""Generator version 3's new worlds: reviews composed from what the writer says about the item.

Versions 1 and 2 draw a review's whole text from a few stock sentences per star level, so a model
can learn the phrases instead of the opinion. Here the text is built from clauses about the item
itself (how it works, looks, lasts; the price, delivery, service) drawn from per-category pools,
and the star level decides how many of them are good or bad. Rating, sentiment and yes/no
questions then follow from that balance. Also: plain product descriptions with no opinion in them
(neutral), and version 2's message facts asked without repeating one fact twice.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from . import data_v2 as v2
from .data_v1 import RATING_INSTRUCTIONS, RATING_SCALES, sentiment_question
from .data_v2 import FACT_QUESTIONS, FACT_SENTENCES, MESSAGE_BODIES, MESSAGE_OPENINGS
from .examples import Example, noul_question, ordinal_target, render_state, sentence_case

# Each category: the items, then clauses a reviewer says when it is good and when it is not.
CATEGORIES = {
    "kitchen": (["toaster", "rice cooker", "air fryer", "stand mixer", "espresso machine", "frying pan", "juicer"],
                ["the {p} heats up in no time", "cleaning the {p} takes a minute",
                 "the {p} is quiet enough to use at dawn",
                 "the results from the {p} are consistent every time", "the {p} feels sturdy and well made",
                 "the controls on the {p} are simple"],
                ["the {p} started leaking in the second week", "the non-stick coating on the {p} is already peeling",
                 "the {p} rattles like a lawnmower", "the {p} burns everything on the lowest setting",
                 "a part of the {p} snapped off during normal use", "the {p} takes ages to warm up"]),
    "electronics": (["wireless headset", "bluetooth speaker", "smartwatch", "tablet", "e-reader", "webcam",
                     "power bank"],
                    ["the battery on the {p} keeps going for days", "the {p} connected on the first try",
                     "the sound from the {p} is rich and clear", "the screen on the {p} is sharp even in sunlight",
                     "setting up the {p} was painless", "the {p} charges quickly"],
                    ["the {p} drops the connection every few minutes", "the battery on the {p} is flat by lunchtime",
                     "the {p} freezes and needs a restart daily", "the {p} gets uncomfortably hot",
                     "the audio from the {p} crackles at any volume",
                     "the {p} died just after the return window closed"]),
    "stay": (["guesthouse", "resort", "hostel", "holiday flat", "city hotel", "campsite"],
             ["our room at the {p} was bright and immaculate", "the people running the {p} were warm and attentive",
              "the {p} is a short walk from everything", "the beds at the {p} were wonderfully comfortable",
              "the view from the {p} was stunning", "check-in at the {p} took two minutes"],
             ["the bathroom at the {p} had mould on the ceiling", "reception at the {p} was unhelpful and curt",
              "we barely slept because the {p} was so noisy", "the {p} looked nothing like the photos",
              "there was no hot water at the {p} for two days", "the sheets at the {p} were stained"]),
    "dining": (["bistro", "sushi bar", "taqueria", "steakhouse", "bakery", "noodle shop"],
               ["every dish at the {p} was full of flavour", "the portions at the {p} are generous",
                "our server at the {p} was friendly and quick", "the desserts at the {p} are a treat",
                "the {p} has a lovely relaxed atmosphere", "the ingredients at the {p} taste fresh"],
               ["we waited over an hour for our mains at the {p}", "the fish at the {p} tasted off",
                "the {p} overcharged us and argued about it", "the tables at the {p} were sticky",
                "half of the menu at the {p} was unavailable", "the staff at the {p} ignored us all evening"]),
    "media": (["thriller", "cookbook", "podcast", "documentary", "board game", "video game", "audiobook"],
              ["the {p} had me hooked from the first minute", "the {p} is clever and often very funny",
               "the recipes in the {p} actually work", "the {p} is beautifully made",
               "I keep coming back to the {p}", "the {p} is packed with surprises"],
              ["the {p} is slow and repetitive", "the ending of the {p} makes no sense",
               "the {p} is full of mistakes", "I gave up on the {p} halfway through",
               "the {p} is shallow and forgettable", "the {p} feels like a cheap copy of better ones"]),
    "clothing": (["rain jacket", "pair of boots", "wool sweater", "pair of jeans", "sports bra", "winter coat"],
                 ["the {p} fits like it was made for me", "the {p} is warm without being bulky",
                  "the fabric of the {p} is soft and thick", "the {p} still looks new after many washes",
                  "the {p} is comfortable from morning to night", "the stitching on the {p} is neat"],
                 ["the {p} shrank after a single wash", "the zip on the {p} jammed in the first week",
                  "the {p} is much smaller than the size chart says", "the colour of the {p} ran into my other laundry",
                  "the {p} gave me blisters", "a seam on the {p} split open"]),
    "software": (["budgeting app", "photo editor", "password manager", "language app", "note-taking app",
                  "VPN service"],
                 ["the {p} is intuitive from the start", "the {p} syncs across my devices instantly",
                  "the {p} saves me hours every week", "updates to the {p} keep making it better",
                  "the {p} runs smoothly on my old laptop", "the {p} has every feature I need"],
                 ["the {p} crashes whenever I open a large file", "the latest update of the {p} wiped my settings",
                  "the {p} is painfully slow", "the {p} keeps nagging me to upgrade",
                  "the {p} lost a week of my data", "I can't find anything in the {p}'s menus"]),
}
# Clauses about the purchase rather than the item: a question can ask whether they come up.
ASPECT_CLAUSES = {
    "price": (["it is worth every penny", "it costs half what the big brands charge", "the price is very reasonable"],
              ["it is overpriced for what you get", "at this price I expected far better",
               "it is way too expensive"]),
    "delivery": (["it was delivered the day after I ordered", "the parcel arrived early and well packed",
                  "shipping was fast"],
                 ["the delivery was two weeks late", "the box arrived crushed", "the courier left it in the rain"]),
    "service": (["customer service sorted out my question right away", "the seller was helpful and polite",
                 "support replied within the hour"],
                ["customer service never answered my emails", "the seller refused to help",
                 "support kept sending me copy-paste replies"]),
}
VERDICTS = [
    ["Never again.", "Save yourself the trouble.", "Utterly disappointing.", "I want my money back.",
     "Zero stars if I could."],
    ["Not recommended.", "I regret this purchase.", "Pretty poor overall.", "I expected much more."],
    ["It's fine, I suppose.", "Neither great nor terrible.", "Mixed feelings.", "It's okay for occasional use."],
    ["Happy overall.", "I'd recommend it.", "Good buy.", "Pleased with it."],
    ["Highly recommended!", "Could not ask for more.", "An absolute gem.", "Ten out of ten.",
     "I'm delighted with it."],
]
JOINERS = ["", "", "Also, ", "On top of that, ", "And "]
MORE_RATING_INSTRUCTIONS = ["How positive is this review?", "Star rating", "How much did they like it?",
                            "Give this review a score.", "How happy is the reviewer?", "Overall rating of the review"]
POLARITY_NOUL = {True: ["Is the review positive?", "Did the reviewer like it?", "Is the writer pleased?",
                        "Would the reviewer buy it again?", "Is this a favourable review?"],
                 False: ["Is the review negative?", "Is the reviewer unhappy?", "Did they dislike it?",
                         "Is the writer disappointed?", "Is this a bad review?"]}
MENTION_NOUL = {"price": ["Does the reviewer mention the price?", "Is cost or value discussed?",
                          "Does the review talk about money?"],
                "delivery": ["Does the review mention delivery?", "Is shipping discussed?"],
                "service": ["Does the reviewer mention customer service?", "Is the seller's support discussed?"]}
COMPLAINT_NOUL = {"price": ["Does the reviewer complain about the price?", "Is the reviewer unhappy with the cost?"],
                  "delivery": ["Does the reviewer complain about delivery?", "Was shipping a problem?"],
                  "service": ["Does the reviewer complain about customer service?", "Was the seller unhelpful?"],
                  "item": ["Does the reviewer complain about the {p} itself?", "Is something wrong with the {p}?"]}
# Good and bad clause counts for 0..4 stars: (low, high) each.
BALANCE = [((0, 0), (2, 3)), ((0, 1), (1, 2)), ((1, 1), (1, 1)), ((1, 2), (1, 1)), ((2, 3), (0, 0))]


def composed_review(rng: random.Random) -> Iterator[Example]:
    """A review whose star level sets how many good and bad things it says about the item."""
    stars = rng.randint(0, 4)
    items, good, bad = CATEGORIES[rng.choice(list(CATEGORIES))]
    item = rng.choice(items)
    (g_lo, g_hi), (b_lo, b_hi) = BALANCE[stars]
    clauses = [(c, True) for c in rng.sample(good, rng.randint(g_lo, g_hi))]
    clauses += [(c, False) for c in rng.sample(bad, rng.randint(b_lo, b_hi))]
    mentioned: dict[str, bool] = {}
    for aspect, (praise, blame) in ASPECT_CLAUSES.items():
        if rng.random() < 0.3 and not (stars == 2 and mentioned):   # a mixed review stays balanced
            # Mostly in line with the overall opinion; a mixed review can go either way.
            positive = stars >= 3 if stars != 2 and rng.random() < 0.85 else rng.random() < 0.5
            mentioned[aspect] = positive
            clauses.append((rng.choice(praise if positive else blame), positive))
    rng.shuffle(clauses)
    sentences, named = [], False
    for i, (text, _) in enumerate(clauses):
        if named and text.startswith("the {p} ") and rng.random() < 0.6:
            text = "it " + text[len("the {p} "):]   # named once, then "it", as people write
        named = named or "{p}" in text
        sentences.append(sentence_case((rng.choice(JOINERS) if i else "") + text.format(p=item)) + ".")
    if rng.random() < 0.65:
        sentences.insert(rng.choice([0, len(sentences)]), rng.choice(VERDICTS[stars]))
    state = render_state(rng, " ".join(sentences), "review")

    scale = rng.choice(RATING_SCALES)
    yield Example(state, {"t": "score", "ins": rng.choice(RATING_INSTRUCTIONS + MORE_RATING_INSTRUCTIONS),
                          "crit": list(scale)}, ordinal_target(len(scale), stars / 4), "composed-rating")
    if rng.random() < 0.5:
        q, target = sentiment_question(rng, "positive" if stars >= 3 else "negative" if stars <= 1 else "neutral")
        yield Example(state, q, target, "composed-sentiment")
    kind = rng.choice(["polarity", "mention", "complaint"])
    if kind == "polarity" and stars != 2:   # a mixed review is neither; it gets a complaint question instead
        asked = rng.random() < 0.5
        q, target = noul_question(rng.choice(POLARITY_NOUL[asked]), (stars >= 3) == asked)
    elif kind == "mention":
        aspect = rng.choice(list(MENTION_NOUL))
        q, target = noul_question(rng.choice(MENTION_NOUL[aspect]), aspect in mentioned)
    else:
        aspect = rng.choice(list(COMPLAINT_NOUL))
        if aspect == "item":   # every item clause names the item; the purchase clauses do not
            holds = any(not ok for text, ok in clauses if "{p}" in text)
        else:
            holds = mentioned.get(aspect) is False
        q, target = noul_question(rng.choice(COMPLAINT_NOUL[aspect]).format(p=item), holds)
    yield Example(state, q, target, "composed-fact")


DESCRIPTION_FACTS = [
    "the {p} comes in {n} colours", "the box holds the {p}, a spare part and a warranty card",
    "the {p} weighs about {w} grams", "the {p} was delivered on {d}", "I ordered the {p} for my {r}",
    "the {p} is model number {m}", "the {p} replaces the one I had before", "the {p} measures {n}0 by {w} millimetres",
    "the manual for the {p} is in {n} languages", "I picked the {p} up from the shop on {d}",
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
DESCRIPTION_NO = ["Is the review positive?", "Is the review negative?", "Is the writer complaining?",
                  "Is this a complaint?", "Is the writer disappointed?", "Is the writer pleased?",
                  "Is the writer angry?"]
DESCRIPTION_YES = ["Is the text about a {p}?", "Does the message describe the {p}?"]
RELATIVES = ["sister", "father", "flatmate", "office", "grandmother", "son"]


def product_description(rng: random.Random) -> Iterator[Example]:
    """Facts about an item with no opinion in them: neutral, and no complaint or praise."""
    items = CATEGORIES[rng.choice(["kitchen", "electronics", "clothing"])][0]
    item = rng.choice(items)
    facts = rng.sample(DESCRIPTION_FACTS, rng.randint(1, 3))
    text = " ".join(sentence_case(f.format(p=item, n=rng.randint(2, 9), w=rng.randint(120, 900), d=rng.choice(DAYS),
                                       r=rng.choice(RELATIVES),
                                       m="%s-%d" % (rng.choice("ABKXZ"), rng.randint(100, 999)))) + "."
                    for f in facts)
    state = render_state(rng, text, "message")
    q, target = sentiment_question(rng, "neutral")
    yield Example(state, q, target, "description-sentiment")
    if rng.random() < 0.3:
        q, target = noul_question(rng.choice(DESCRIPTION_YES).format(p=item), True)
    else:
        q, target = noul_question(rng.choice(DESCRIPTION_NO), False)
    yield Example(state, q, target, "description-fact")


MORE_FACT_SENTENCES = {
    "anger": ["This is completely unacceptable!", "I am furious with how I've been treated.",
              "I'm fed up with your excuses.", "Honestly, I'm livid."],
    "cancel": ["Please close my account once this billing period ends.", "We won't be renewing our contract.",
               "I'm moving over to a competitor.", "Cancel my membership, effective today."],
}
MORE_FACT_QUESTIONS = {
    "anger": ["Is the writer angry?", "Is the customer upset?", "Does the message sound furious?"],
    "cancel": ["Does the customer want to cancel?", "Is the writer ending the service?", "Will we lose this customer?"],
}
V3_FACT_SENTENCES = {**FACT_SENTENCES, **MORE_FACT_SENTENCES}
V3_FACT_QUESTIONS = {**FACT_QUESTIONS, **MORE_FACT_QUESTIONS}


def distinct_message_facts(rng: random.Random) -> Iterator[Example]:
    """Version 2's message facts with two more kinds, each world asked about two different facts."""
    present = [name for name in V3_FACT_SENTENCES if rng.random() < 0.3]
    sentences = [rng.choice(MESSAGE_BODIES)] + [rng.choice(V3_FACT_SENTENCES[name]) for name in present]
    rng.shuffle(sentences)
    state = render_state(rng, " ".join(p for p in [rng.choice(MESSAGE_OPENINGS)] + sentences if p), "message")
    first = rng.choice(present) if present and rng.random() < 0.5 else rng.choice(list(V3_FACT_QUESTIONS))
    second = rng.choice([name for name in V3_FACT_QUESTIONS if name != first])
    for name in (first, second):
        q, target = noul_question(rng.choice(V3_FACT_QUESTIONS[name]), name in present)
        yield Example(state, q, target, "message-fact")


# Version 3: version 2 with composed reviews and product descriptions, and message facts never asked twice.
DOMAINS = tuple(pair for pair in v2.DOMAINS if pair[0] is not v2.message_facts) + (
    (distinct_message_facts, 3), (composed_review, 4), (product_description, 1))
