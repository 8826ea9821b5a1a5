"""Generator version 5's new worlds: version 4's recipe (many subjects, generic frames) for the
domains where stage 10 still missed most: experiences with a place or a service rated by what went
well and badly, moderated comments with many ways to be civil, rude, threatening or selling
something, and internal requests with a second, wider pool of subjects.

Used by the stage-11 candidates 11c and 11d only; neither shipped (research/STAGES.md, stage 11).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from . import data_v4 as v4
from .data_v1 import RATING_INSTRUCTIONS, RATING_SCALES, URLS, sentiment_question
from .data_v4 import WORKPLACE_FRAMES, WORKPLACE_SUBJECTS, employee_request
from .examples import Example, choice_question, noul_question, one_hot, ordinal_target, render_state, sentence_case

# ---------------------------------------------------------------------- experiences, rated

# Each place with the facets a visit to it can be judged on (besides staff, waiting and value).
PLACES = {"restaurant": ["food", "cleanliness"], "cafe": ["food", "cleanliness"], "bakery": ["food"],
          "hotel": ["food", "cleanliness"], "campsite": ["cleanliness"], "spa": ["cleanliness", "result"],
          "gym": ["cleanliness"], "hair salon": ["result", "cleanliness"], "dentist": ["result", "cleanliness"],
          "garage": ["result"], "removal firm": ["result"], "bike shop": ["result"], "cinema": ["cleanliness"],
          "taxi company": [], "pharmacy": [], "bank branch": []}
COMMON_FACETS = ["staff", "waiting", "value"]
# What went well or badly, per facet: (good, bad) phrasings, each a full clause.
FACETS = {
    "staff": (["the staff were warm and attentive", "everyone we met was kind", "the owner greeted us by name",
               "our host went out of her way for us", "the team was cheerful and quick"],
              ["the staff were rude to us", "nobody bothered to say hello", "the manager shrugged at our complaint",
               "the person at the desk was dismissive", "we were treated like a nuisance"]),
    "waiting": (["we were seen straight away", "there was no queue at all", "everything was ready on time",
                 "they were punctual to the minute"],
                ["we waited ages for a table", "they turned up very late", "the queue barely moved",
                 "our booking had been lost and we stood around for ages"]),
    "food": (["the food was delicious", "every dish was fresh and hot", "the bread was still warm",
              "portions were generous and tasty"],
             ["the pasta was overcooked", "the soup was far too salty", "my steak was burnt",
              "the salad looked days old"]),
    "cleanliness": (["the place was gleaming", "the rooms smelled fresh", "everything was neat and tidy"],
                    ["the floor was sticky", "the bathroom was filthy", "there was hair on the towels",
                     "the tables were covered in crumbs"]),
    "value": (["it was cheaper than I expected", "good value for the money", "the bill was fair"],
              ["it was a rip-off", "they charged us for extras we never had", "far too pricey for what it was"]),
    "result": (["they did an excellent job", "the result was exactly what I asked for", "the repair has held up",
                "I left feeling great"],
               ["the job was botched", "they had to redo it twice", "the problem came back the next day",
                "I left worse off than I came"]),
}
EXPERIENCE_VERDICTS = [
    ["Avoid.", "Total waste of an evening.", "Never going back.", "One star is too many.", "Dreadful."],
    ["Not impressed.", "Would not return.", "Quite a letdown.", "Below par."],
    ["Nothing to write home about.", "So-so.", "Hit and miss.", "Some good, some bad."],
    ["Would go again.", "A nice visit.", "Worth it.", "Recommended."],
    ["Brilliant!", "Five stars without hesitation.", "Can't wait to go back.", "Simply the best around.",
     "Faultless."],
]
EXPERIENCE_OPENERS = ["We went to this {p} last week.", "First time at this {p}.", "Visited the {p} on Saturday.",
                      "Tried the new {p} in town.", "", "", "My review of this {p}:"]
# Good and bad facet counts for 0..4 stars: (low, high) each.
BALANCE = [((0, 0), (2, 3)), ((0, 1), (1, 2)), ((1, 1), (1, 1)), ((1, 2), (0, 1)), ((2, 3), (0, 0))]
RETURN_NOUL = {True: ["Would the customer go back?", "Will they return?", "Did they enjoy the visit?",
                      "Is the reviewer satisfied?", "Is this a recommendation?"],
               False: ["Was the visit a disappointment?", "Is the customer dissatisfied?",
                       "Is this a warning to others?", "Did they have a bad time?", "Is the reviewer unhappy?"]}
FACET_COMPLAINT = {"staff": ["Does the review complain about the staff?", "Were the employees a problem?"],
                   "waiting": ["Does the reviewer complain about waiting?", "Was there a delay?"],
                   "food": ["Is the food criticised?", "Does the review complain about the food?"],
                   "cleanliness": ["Is the place described as dirty?", "Is hygiene a complaint?"],
                   "value": ["Does the reviewer think it was overpriced?", "Is the price a complaint?"],
                   "result": ["Was the work done badly?", "Is the outcome criticised?"]}
FACET_NAMES = {"staff": ["staff", "service"], "waiting": ["waiting time", "punctuality"], "food": ["food"],
               "cleanliness": ["cleanliness", "hygiene"], "value": ["price", "value for money"],
               "result": ["quality of the work", "outcome"]}


def rated_experience(rng: random.Random) -> Iterator[Example]:
    """A visit to a place or a service: the stars set how many facets went well and how many badly."""
    stars = rng.randint(0, 4)
    place = rng.choice(list(PLACES))
    (g_lo, g_hi), (b_lo, b_hi) = BALANCE[stars]
    facets = COMMON_FACETS + PLACES[place]
    rng.shuffle(facets)
    good = facets[: rng.randint(g_lo, g_hi)]
    bad = facets[len(good): len(good) + rng.randint(b_lo, b_hi)]
    clauses = [(f, True, rng.choice(FACETS[f][0])) for f in good] + [(f, False, rng.choice(FACETS[f][1])) for f in bad]
    rng.shuffle(clauses)
    sentences = [sentence_case(text) + "." for _, _, text in clauses]
    opener = rng.choice(EXPERIENCE_OPENERS).format(p=place)
    if rng.random() < 0.7:
        sentences.insert(rng.choice([0, len(sentences)]), rng.choice(EXPERIENCE_VERDICTS[stars]))
    state = render_state(rng, " ".join(s for s in [opener] + sentences if s), "review")

    scale = rng.choice(RATING_SCALES)
    yield Example(state, {"t": "score", "ins": rng.choice(RATING_INSTRUCTIONS), "crit": list(scale)},
                  ordinal_target(len(scale), stars / 4), "experience-rating")
    mood = "positive" if stars >= 3 else "negative" if stars <= 1 else "neutral"
    if rng.random() < 0.5:
        q, target = sentiment_question(rng, mood)
        yield Example(state, q, target, "experience-sentiment")
    if stars != 2 and rng.random() < 0.5:
        asked = rng.random() < 0.5
        q, target = noul_question(rng.choice(RETURN_NOUL[asked]), (stars >= 3) == asked)
        yield Example(state, q, target, "experience-fact")
    else:
        facet = rng.choice(bad) if bad and rng.random() < 0.5 else rng.choice(facets)
        q, target = noul_question(rng.choice(FACET_COMPLAINT[facet]), facet in bad)
        yield Example(state, q, target, "experience-fact")
    if clauses and rng.random() < 0.4:   # which facet the review is mostly about, when it is about one
        facet, _, _ = clauses[0]
        if len(clauses) == 1:
            others = rng.sample([f for f in facets if f != facet], rng.randint(1, min(3, len(facets) - 1)))
            order = others + [facet]
            rng.shuffle(order)
            q = {"t": "choice", "ins": rng.choice(["What is the review mainly about?", "Main topic of the review",
                                                   "Which aspect does the customer talk about?"]),
                 "crit": {rng.choice(FACET_NAMES[f]): None for f in order}}
            if len(q["crit"]) == len(order):
                yield Example(state, q, one_hot(len(order), order.index(facet)), "experience-aspect")


# ---------------------------------------------------------------------------- moderation

CIVIL_OPENERS = ["Thanks for", "I really enjoyed", "Not convinced by", "Could you clarify", "I found a typo in",
                 "Bookmarking", "My experience differs from", "Loved",
                 "Quick question about", "Helpful write-up on", "Sharing this with my team:"]
CIVIL_OBJECTS = ["the section on pensions", "your point about remote work", "the gardening tips",
                 "the benchmark results", "the step where you flash the firmware", "this recipe", "the history part",
                 "the argument about rents", "the interview with the mayor", "the photos from the trip",
                 "the budget spreadsheet", "the chess analysis"]
INSULT_TARGETS = ["you", "the author", "whoever wrote this", "this moron", "people like you"]
INSULTS = ["{t} should be ashamed, what a pathetic excuse for a writer", "{t} clearly can't think straight, idiot",
           "{t} make me sick, you filthy rat", "nobody cares what {t} think, loser", "{t} are a disgrace and a joke",
           "{t} are too stupid to be online", "shut your mouth, {t} halfwit"]
THREATS = ["Keep it up and you'll find out what happens to people who cross me.",
           "One more word and you'll regret being born.", "Someone should teach you a lesson with a bat.",
           "Say that again and I'll break your legs.", "Next time we meet, you won't walk away.",
           "Delete this or I'll make your life hell.", "I'm coming for you and your family."]
SPAM_PITCHES = ["Be your own boss with our passive income course", "Replica sneakers at 90% off",
                "Hot stock tip, shares will triple",
                "Miracle pills melt belly fat", "Your parcel is on hold, pay the fee", "Claim your free crypto airdrop",
                "Cheap essays written for you"]
SPAM_CALLS = [" at {u}", " - visit {u}", "!!! {u}", ", details: {u}", ", DM me or go to {u}"]
MODERATION_V5_LABELS = {
    "ok": [("allow", "fine to publish"), ("keep", None), ("approve", "civil and on topic"), ("ok", None)],
    "insult": [("insult", "attacks a person"), ("remove", "abusive or hateful"), ("harassment", None),
               ("toxic", "rude, hostile language")],
    "threat": [("threat", "threatens violence or harm"), ("violent threat", None), ("intimidation", None)],
    "spam": [("spam", "ads, scams, links"), ("advertising", None), ("scam", "fraudulent offers")],
}
MODERATION_V5_INSTRUCTIONS = ["Moderation decision for this comment.", "How should moderators treat this?",
                              "Label the comment.", "comment category", "Review this post."]
MODERATION_V5_NOUL = {"insult": ["Does the comment insult someone?", "Is the writer being rude to a person?"],
                      "threat": ["Does the comment threaten anyone?", "Is someone being intimidated?"],
                      "spam": ["Is this spam?", "Is it selling something?", "Does it contain a scam?"],
                      "remove": ["Should this be taken down?", "Is this comment against the rules?"]}


def moderated_comment(rng: random.Random) -> Iterator[Example]:
    """A comment that is civil, insulting, threatening or spam, built from many parts."""
    kind = rng.choice(["ok", "ok", "insult", "threat", "spam"])
    if kind == "ok":
        text = "%s %s%s" % (rng.choice(CIVIL_OPENERS), rng.choice(CIVIL_OBJECTS), rng.choice([".", "!", "?", "."]))
    elif kind == "insult":
        text = sentence_case(rng.choice(INSULTS).format(t=rng.choice(INSULT_TARGETS))) + rng.choice([".", "!"])
    elif kind == "threat":
        text = rng.choice(THREATS)
    else:
        text = rng.choice(SPAM_PITCHES) + rng.choice(SPAM_CALLS).format(u=rng.choice(URLS))
    state = render_state(rng, text, "comment")
    made = choice_question(rng, kind, MODERATION_V5_LABELS, MODERATION_V5_INSTRUCTIONS, k_max=4)
    if made:
        q, index = made
        yield Example(state, q, one_hot(len(q["crit"]), index), "moderation-v5")
    fact = rng.choice(list(MODERATION_V5_NOUL))
    holds = kind != "ok" if fact == "remove" else kind == fact
    q, target = noul_question(rng.choice(MODERATION_V5_NOUL[fact]), holds)
    yield Example(state, q, target, "moderation-v5-fact")


# ------------------------------------------------------------------------ workplace requests

MORE_WORKPLACE_SUBJECTS = {
    "hr": ["the dress code for client visits", "a grievance I want to raise", "my probation period ending",
           "the bonus letter I never received", "relocating to the Lisbon office", "jury duty next month",
           "changing my working hours after my return"],
    "legal": ["a supplier threatening to sue us", "signing the NDA with the startup",
              "the warranty terms on our website", "who owns the code a freelancer wrote",
              "the cookie banner on our shop",
              "an accessibility complaint under the new law"],
    "it": ["the slow shared drive", "my laptop, which won't boot", "malware on the reception PC",
           "restoring a deleted folder from backup", "the sticky keys on my keyboard",
           "admin rights to install a plugin"],
    "finance": ["an invoice from the cleaning company", "a late payment penalty", "the bank details of a supplier",
                "the mileage rate for my car trips", "the forecast for the sales team",
                "a missing receipt for the hotel"],
    "marketing": ["our stand at the trade show", "a social media post that got angry replies",
                  "the branding on the new van", "the podcast we are sponsoring", "flyers for the open day"],
    "facilities": ["a broken toilet on the ground floor", "the front door lock", "mice in the storeroom",
                   "the flickering lights in corridor B", "the windows that won't close",
                   "a wobbly handrail on the stairs"],
    "security": ["someone trying door handles in the car park", "a badge that stopped working",
                 "a visitor who wandered into the lab", "the fire exit that was left open"],
}
MORE_FRAMES = ["Hello, {x} needs attention.", "FYI {x} - who handles this?", "Urgent: {x}.",
               "Not sure who to ask, but {x}.", "Hoping you can sort out {x}.", "Could we discuss {x}?",
               "Just flagging {x}."]


def workplace_request_wide(rng: random.Random) -> Iterator[Example]:
    """Version 4's employee request over both subject pools and both sets of frames."""
    pools = {dept: WORKPLACE_SUBJECTS[dept] + MORE_WORKPLACE_SUBJECTS[dept] for dept in WORKPLACE_SUBJECTS}
    return employee_request(rng, pools, WORKPLACE_FRAMES + MORE_FRAMES, "workplace-wide")


# Version 5: version 4 with rated visits to places and services, moderated comments of four kinds and
# internal requests over a second subject pool.
DOMAINS = v4.DOMAINS + ((rated_experience, 4), (moderated_comment, 3), (workplace_request_wide, 3))
