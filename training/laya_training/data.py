"""The seeded synthetic generator the demo checkpoint's decision head is trained on.

Each example is a small "world" drawn first (a ticket's topic, urgency, tone, whether the
customer wants a refund or threatens to leave; a review's star rating; a comment's moderation
class; an internal request's department), then rendered as text — plain, JSON or a conversation
— and asked about with one question whose answer follows from the world. Label names,
descriptions, scales, instructions and option order are all drawn, so the head has to match
option text against the state rather than memorise label positions.

Examples are in upstream's internal question form (`{"t", "ins", "crit"}`) with a target
distribution over the options in `crit` order. Same seed, same examples.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# --------------------------------------------------------------------------- support tickets

TOPIC_TEXT = {
    "billing": [
        "I was billed twice this month", "my invoice shows the wrong amount",
        "the payment failed but the money still left my account", "why did my subscription price go up",
        "I need a copy of last month's receipt", "there is a charge on my card I don't recognise",
        "the discount code was not applied to my bill", "you charged me after I downgraded my plan",
        "my credit card was declined although it is valid", "the VAT on my invoice is wrong",
        "I was charged for a plan I never ordered", "the annual renewal fee was taken without notice",
    ],
    "tech": [
        "the app crashes whenever I open the settings", "I get an error 500 when uploading files",
        "your website has been down all morning", "sync stopped working after the last update",
        "the dashboard keeps loading forever", "notifications are not arriving on my phone",
        "exports come out as empty files", "the search returns nothing even for exact names",
        "the integration with our CRM throws a timeout", "the mobile app freezes on startup",
        "images fail to load in the editor", "the API returns malformed JSON since yesterday",
    ],
    "account": [
        "I can't log in to my account", "the password reset email never arrives",
        "my account got locked after three attempts", "I want to change the email address on my profile",
        "the two-factor code is never accepted", "I need to add a colleague as an admin",
        "my username was changed without my permission", "I can't sign in with my Google account anymore",
    ],
    "shipping": [
        "my package has not arrived yet", "tracking says delivered but nothing came",
        "the parcel arrived damaged", "I received the wrong item", "the delivery is two weeks late",
        "the courier left my order at the wrong address", "half of my order is missing from the box",
        "the tracking number you sent does not work",
    ],
    "sales": [
        "do you offer a discount for students", "does the premium plan include API access",
        "I would like a quote for fifty seats", "can we upgrade our team to the enterprise tier",
        "is there a free trial for the business plan", "what does the pro plan cost per year",
        "we are interested in a volume licence for our school",
    ],
    "feedback": [
        "I just wanted to share an idea for the app", "here is a suggestion for your next release",
        "I wanted to tell you what I think of the new design", "what are your office hours",
        "where is your company based", "I have a general question about your company",
    ],
}

# Label names a question may use for a topic, with an optional description each.
TOPIC_LABELS = {
    "billing": [("billing", "payments, invoices, refunds"), ("payments", "charges and refunds"),
                ("finance", "invoices and billing questions"), ("invoices", None), ("billing", None),
                ("accounts receivable", "money owed and paid")],
    "tech": [("tech", "bugs, outages, login"), ("technical", "errors, crashes, things not working"),
             ("it support", "software problems"), ("bug", None), ("engineering", "product defects"),
             ("tech", None), ("technical support", "anything broken in the product")],
    "account": [("account", "login, password, profile"), ("access", "sign-in problems"), ("login", None),
                ("account management", "users, profiles, permissions")],
    "shipping": [("shipping", "deliveries and packages"), ("delivery", "late or lost parcels"),
                 ("logistics", None), ("orders", "order status and delivery"), ("shipping", None)],
    "sales": [("sales", "pricing, quotes, upgrades"), ("pre-sales", "questions before buying"),
              ("upgrades", None), ("sales", None), ("commercial", "plans and prices")],
    "other": [("other", "anything else"), ("general", "everything else"), ("misc", None), ("other", None)],
}
# Who gets a topic when its own team is not among the options.
TOPIC_FALLBACK = {"account": ["account", "tech", "other"], "feedback": ["other"]}
TOPIC_INSTRUCTIONS = [
    "Which team should handle this ticket?", "Route this message to the right queue.",
    "What is this ticket about?", "Classify the customer's request.", "Which department owns this?",
    "Pick the category of this support request.", "Where should this email go?", "topic",
]

URGENCY_TEXT = [
    ["no rush at all", "whenever you get a chance", "just curious", "it's not important",
     "take your time", "no hurry on this one"],
    ["would be nice to sort this out this week", "please look into it when possible",
     "it is a bit annoying", "I'd appreciate an answer in the next few days"],
    ["I need this fixed soon", "this is blocking my work", "please respond today",
     "we have a deadline tomorrow", "this is getting serious"],
    ["URGENT: our whole team is stuck", "production is down and we are losing money every minute",
     "this is an emergency", "please fix this immediately", "we cannot operate at all right now",
     "ASAP, our customers are affected"],
]
URGENCY_SCALES = [
    ["low", "medium", "high", "critical"], ["not urgent", "somewhat urgent", "urgent", "critical"],
    ["can wait", "this week", "today", "right now"], ["low", "medium", "high"],
    ["p4", "p3", "p2", "p1"], ["trivial", "minor", "moderate", "major", "blocker"],
    ["none", "low", "elevated", "high", "extreme"], ["relaxed", "normal", "pressing", "emergency"],
]
URGENCY_INSTRUCTIONS = [
    "How urgent is this ticket?", "Rate the urgency.", "What priority should this get?",
    "How quickly does this need a response?", "severity", "How time-critical is the request?",
]

TONE_TEXT = {
    "positive": ["Thanks so much, you are great!", "I love your product.", "Your team has always been helpful.",
                 "Keep up the good work!", "Really happy with the service so far."],
    "neutral": ["", "", "Thanks.", "Regards.", "Let me know."],
    "negative": ["I'm really frustrated.", "This is ridiculous.", "I am very disappointed with your service.",
                 "Honestly this is unacceptable.", "I'm fed up with this."],
}
REFUND_TEXT = ["I want my money back.", "Please refund me.", "I'd like a full refund.",
               "Give me a refund for this.", "I expect the amount to be returned to my card."]
CHURN_TEXT = ["I'm going to cancel my subscription.", "I'm switching to another provider.",
              "Please close my account.", "If this isn't fixed I will cancel.",
              "This is the last month I'm paying for this.", "I'm moving to your competitor."]
LOYAL_TEXT = ["I've been a happy customer for years.", "I plan to keep using you.", "", ""]
GREETINGS = ["", "", "Hi,", "Hello team,", "Good morning,", "Hey,", "Dear support,"]
NAMES = ["Ana", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Gustav", "Hiro", "Ines", "Jonas", "Kemi", "Luca"]

TICKET_NOUL = {
    "churn": ["Is the customer about to cancel?", "Is this customer at risk of churning?",
              "Does the user threaten to leave?", "Will the customer cancel?", "churn risk"],
    "refund": ["Does the customer ask for a refund?", "Is the user requesting their money back?",
               "refund requested?", "Does the message ask to be reimbursed?"],
    "negative": ["Is the customer upset?", "Is the tone negative?", "Is the writer unhappy?",
                 "Does the customer sound angry?"],
    "urgent": ["Is this urgent?", "Does this need immediate attention?", "Should this be escalated now?"],
    "order_number": ["Does the message include an order number?", "Is an order id mentioned?"],
    "topic:billing": ["Is this about a billing problem?", "Is this a payment issue?"],
    "topic:tech": ["Is this a technical issue?", "Is something broken in the product?"],
    "topic:shipping": ["Is this about a delivery?", "Is the problem with shipping?"],
    "topic:account": ["Is this about logging in or the account?"],
}
SENTIMENT_LABELS = [
    {"positive": "positive", "neutral": "neutral", "negative": "negative"},
    {"positive": "happy", "neutral": "indifferent", "negative": "angry"},
    {"positive": "satisfied", "neutral": "neutral", "negative": "dissatisfied"},
    {"positive": "good", "neutral": "mixed", "negative": "bad"},
]
SENTIMENT_INSTRUCTIONS = ["What is the sentiment?", "How does the customer feel?", "tone of the message",
                          "Classify the writer's mood."]

# -------------------------------------------------------------------------------- reviews

PRODUCTS = ["headphones", "blender", "hotel", "pizza place", "novel", "phone case", "running shoes",
            "vacuum cleaner", "coffee maker", "backpack", "laptop stand", "yoga mat", "hair dryer"]
REVIEW_TEXT = [
    ["Complete waste of money, the {p} broke after two days.", "Worst {p} I have ever had.",
     "Avoid this {p} at all costs.", "Terrible {p}, I regret buying it."],
    ["Disappointing {p}, it does not do what it promises.", "The {p} is below average and feels cheap.",
     "Not great. The {p} has too many problems."],
    ["The {p} is okay, nothing special.", "Average {p}: some good points, some bad.",
     "It's a decent {p} for the price, but I expected more."],
    ["Pretty good {p}, just a few minor issues.", "I like the {p}, would buy again with small reservations.",
     "Solid {p}, does the job well."],
    ["Absolutely love this {p}!", "Best {p} I've bought this year, flawless.",
     "Outstanding {p}, exceeded every expectation.", "Perfect {p}, five stars from me."],
]
REVIEW_ASPECTS = {
    "price": ["It was quite expensive.", "Great value for what I paid.", "The price is fair."],
    "delivery": ["It arrived a day early.", "Shipping took forever.", "The parcel came quickly."],
    "quality": ["The build quality is solid.", "The material feels flimsy."],
}
RATING_SCALES = [
    ["1 star", "2 stars", "3 stars", "4 stars", "5 stars"], ["terrible", "poor", "average", "good", "excellent"],
    ["negative", "mixed", "positive"], ["1", "2", "3", "4", "5"], ["bad", "ok", "great"],
    ["very unsatisfied", "unsatisfied", "neutral", "satisfied", "very satisfied"],
]
RATING_INSTRUCTIONS = ["How many stars would this review give?", "Rate the review.",
                       "How satisfied is the reviewer?", "rating", "Score the customer's opinion."]
REVIEW_NOUL = {
    "recommend": ["Would the reviewer recommend it?", "Is the reviewer happy with the purchase?"],
    "aspect:price": ["Does the review mention the price?", "Is cost discussed?"],
    "aspect:delivery": ["Does the review talk about delivery?", "Is shipping mentioned?"],
}

# ----------------------------------------------------------------------------- moderation

COMMENT_TEXT = {
    "spam": ["Buy cheap followers now at {u}", "Click here to win a free iPhone: {u}",
             "CRYPTO GIVEAWAY!!! send 1 coin get 2 back {u}", "Make $5000 a week from home, visit {u}",
             "Hot singles in your area {u}", "Best casino bonus, sign up at {u}"],
    "abuse": ["You're an idiot and everyone knows it.", "Nobody wants you here, get lost.",
              "Shut up, you pathetic loser.", "People like you are garbage.", "I will find you and make you pay."],
    "ok": ["Great article, thanks for sharing.", "I disagree, but you make some good points.",
           "Does anyone know when the next part comes out?", "This helped me fix my bike, cheers!",
           "Interesting take, I had never thought of it that way.", "The recipe worked perfectly."],
}
MODERATION_LABELS = {
    "spam": [("spam", "unsolicited advertising or scams"), ("spam", None), ("advertising", "promotions and links"),
             ("scam", None)],
    "abuse": [("abuse", "insults or threats"), ("harassment", None), ("toxic", "hostile or hateful language"),
              ("abusive", None)],
    "ok": [("ok", "acceptable content"), ("safe", None), ("fine", "nothing wrong"), ("allowed", None)],
}
MODERATION_INSTRUCTIONS = ["Moderate this comment.", "What kind of comment is this?", "moderation label",
                           "Should this comment be flagged, and why?"]
MODERATION_NOUL = {
    "spam": ["Is this spam?", "Is this an advertisement or scam?"],
    "abuse": ["Is this comment abusive?", "Does it insult someone?"],
    "remove": ["Should this comment be removed?", "Does this violate the rules?"],
}
URLS = ["bit.ly/x9k2", "www.best-deal.biz", "win-now.example", "tinyurl.com/f4ke"]

# ------------------------------------------------------------------------ internal routing

DEPARTMENT_TEXT = {
    "hr": ["I'd like to book two weeks of vacation in August.", "How do I update my parental leave request?",
           "Can someone explain the new remote work policy?", "I want to report a conflict with my manager."],
    "legal": ["Please review the attached NDA before we sign.", "A customer sent a GDPR data deletion request.",
              "We received a cease and desist letter.", "Can we use this image without a licence?"],
    "it": ["My laptop won't boot after the update.", "The VPN keeps disconnecting.",
           "I need access to the shared drive.", "My keyboard stopped working."],
    "finance": ["Please approve my expense report for the conference.", "A supplier says their invoice is unpaid.",
                "What is the budget code for marketing?", "I need a purchase order for new chairs."],
    "marketing": ["Can we schedule the newsletter for Friday?", "We need a banner for the trade fair.",
                  "The social media campaign needs new copy."],
}
DEPARTMENT_LABELS = {
    "hr": [("hr", "people, leave, policies"), ("human resources", None), ("people team", "staff matters")],
    "legal": [("legal", "contracts, compliance, privacy"), ("legal", None), ("compliance", "laws and regulations")],
    "it": [("it", "computers, accounts, network"), ("it helpdesk", None), ("internal it", "devices and access")],
    "finance": [("finance", "expenses, budgets, invoices"), ("accounting", None), ("finance", None)],
    "marketing": [("marketing", "campaigns and content"), ("marketing", None), ("communications", "newsletters, ads")],
}
DEPARTMENT_INSTRUCTIONS = ["Which department should receive this request?", "Route this internal request.",
                           "Who should answer this employee?", "department"]

# ------------------------------------------------------------------------- conversations

RESOLVED_TEXT = [["That worked, thank you!", "Perfect, it's fixed now.", "Great, all good now."],
                 ["It's still not working.", "That didn't help at all.", "Same problem as before."]]
AGENT_REPLIES = ["Could you try restarting and let me know?", "I've reset it on our side, please check again.",
                 "Thanks for reaching out, I've escalated this.", "Please clear your cache and retry."]
CONVERSATION_NOUL = ["Was the customer's issue resolved?", "Did the support agent solve the problem?",
                     "Is the problem fixed by the end of the chat?"]


@dataclass(frozen=True)
class Example:
    state: Any
    question: dict[str, Any]   # upstream's internal form: {"t", "ins", "crit"}
    target: list[float]        # a distribution over the options, in `crit` order
    domain: str


def _sentence(text: str) -> str:
    """Upper-case the first letter only (str.capitalize would lower-case "VAT" and "API")."""
    return text[:1].upper() + text[1:]


def one_hot(k: int, i: int) -> list[float]:
    return [1.0 if j == i else 0.0 for j in range(k)]


def ordinal_target(k: int, x: float, spread: float = 0.35) -> list[float]:
    """Mass on the level nearest `x` (0..1) and a little on its neighbours: within one level counts."""
    centre = x * (k - 1)
    weights = [pow(2.718281828, -((j - centre) ** 2) / (2 * spread ** 2)) for j in range(k)]
    total = sum(weights)
    return [w / total for w in weights]


def _choice_question(rng: random.Random, answer: str, pools: dict[str, list], instructions: list[str],
                     fallback: list[str] | None = None, k_max: int = 8) -> tuple[dict, int] | None:
    """A choice over `answer` (or its fallback) plus distractor labels; None if none applies."""
    candidates = fallback or [answer]
    others = [name for name in pools if name not in candidates]
    rng.shuffle(others)
    chosen = others[: rng.randint(1, min(k_max - 1, len(others)))]
    # Sometimes the answer's own team is missing and a fallback has to take the ticket.
    present = [c for c in candidates if c in pools]
    if len(present) > 1 and rng.random() < 0.35:
        present = present[1:]
    chosen.append(present[0])
    if "other" in pools and "other" not in chosen and rng.random() < 0.5:
        chosen.append("other")
    rng.shuffle(chosen)
    crit: dict[str, Any] = {}
    described = rng.random() < 0.7
    for name in chosen:
        label, desc = rng.choice(pools[name])
        if label in crit:
            return None
        crit[label] = desc if described else None
    winner = next(c for c in candidates if c in chosen)
    index = chosen.index(winner)
    return {"t": "choice", "ins": rng.choice(instructions), "crit": crit}, index


def _noul(instruction: str, holds: bool) -> tuple[dict, list[float]]:
    return {"t": "noul", "ins": instruction, "crit": None}, one_hot(2, int(holds))


RESTATEMENTS = ["Is this about %s?", "Is this %s?", "Would you classify this as %s?", "Does this belong to %s?",
                "Is it a matter of %s?", "Should this be labelled %s?", "%s?"]


def _restated(rng: random.Random, state: Any, question: dict[str, Any], index: int, domain: str) -> Example:
    """A yes/no question that names one option of a choice question (the right one half the time).

    Ties noul to the same option-versus-state matching that choice learns, with as many
    phrasings as the choice questions have labels and descriptions."""
    labels = list(question["crit"])
    picked = index if rng.random() < 0.5 else rng.choice([i for i in range(len(labels)) if i != index] or [index])
    desc = question["crit"][labels[picked]]
    named = "%s (%s)" % (labels[picked], desc) if desc and rng.random() < 0.5 else labels[picked]
    q, target = _noul(rng.choice(RESTATEMENTS) % named, picked == index)
    return Example(state, q, target, domain + "-restated")


def _ticket(rng: random.Random) -> Iterator[Example]:
    topic = rng.choice(list(TOPIC_TEXT))
    urgency = rng.randint(0, 3)
    tone = rng.choice(["positive", "neutral", "negative", "negative"])
    refund = topic in ("billing", "shipping") and rng.random() < 0.4
    churn = rng.random() < 0.3
    order_no = rng.random() < 0.3
    if churn and tone == "positive":
        tone = "negative"
    parts = [rng.choice(GREETINGS), _sentence(rng.choice(TOPIC_TEXT[topic]))
             + (" (order #%d)" % rng.randint(10000, 99999) if order_no else "") + "."]
    extras = [_sentence(rng.choice(URGENCY_TEXT[urgency])) + ".", rng.choice(TONE_TEXT[tone])]
    if refund:
        extras.append(rng.choice(REFUND_TEXT))
    extras.append(rng.choice(CHURN_TEXT) if churn else rng.choice(LOYAL_TEXT))
    rng.shuffle(extras)
    text = " ".join(p for p in parts + extras if p)
    if rng.random() < 0.3:
        text += " " + rng.choice(NAMES)
    state = _render(rng, text, "ticket")

    pools = {name: TOPIC_LABELS[name] for name in TOPIC_LABELS}
    if topic in ("feedback",):
        pools.pop("sales") if rng.random() < 0.5 else None
    made = _choice_question(rng, topic if topic != "feedback" else "other", pools, TOPIC_INSTRUCTIONS,
                            TOPIC_FALLBACK.get(topic))
    if made:
        q, index = made
        yield Example(state, q, one_hot(len(q["crit"]), index), "ticket-topic")
        yield _restated(rng, state, q, index, "ticket-topic")
    scale = rng.choice(URGENCY_SCALES)
    yield Example(state, {"t": "score", "ins": rng.choice(URGENCY_INSTRUCTIONS), "crit": list(scale)},
                  ordinal_target(len(scale), urgency / 3), "ticket-urgency")
    facts = {"churn": churn, "refund": refund, "negative": tone == "negative", "urgent": urgency >= 2,
             "order_number": order_no}
    for name in ("billing", "tech", "shipping", "account"):
        facts["topic:" + name] = topic == name
    fact = rng.choice(list(facts))
    q, target = _noul(rng.choice(TICKET_NOUL[fact]), facts[fact])
    yield Example(state, q, target, "ticket-fact")
    if rng.random() < 0.4:
        q, target = sentiment_question(rng, tone)
        yield Example(state, q, target, "ticket-sentiment")
        yield _restated(rng, state, q, target.index(1.0), "ticket-sentiment")


def sentiment_question(rng: random.Random, label: str, label_sets: list[dict[str, str]] | None = None,
                       instructions: list[str] | None = None) -> tuple[dict, list[float]]:
    """positive / neutral / negative under drawn names, in shuffled order; `label` is the answer."""
    names = rng.choice(label_sets or SENTIMENT_LABELS)
    order = list(names)
    rng.shuffle(order)
    ins = rng.choice(instructions or SENTIMENT_INSTRUCTIONS)
    q = {"t": "choice", "ins": ins, "crit": {names[o]: None for o in order}}
    return q, one_hot(3, order.index(label))


def _review(rng: random.Random) -> Iterator[Example]:
    product = rng.choice(PRODUCTS)
    stars = rng.randint(0, 4)
    aspects = [a for a in REVIEW_ASPECTS if rng.random() < 0.35]
    sentences = [rng.choice(REVIEW_TEXT[stars]).format(p=product)] + [rng.choice(REVIEW_ASPECTS[a]) for a in aspects]
    rng.shuffle(sentences)
    state = _render(rng, " ".join(sentences), "review")
    scale = rng.choice(RATING_SCALES)
    yield Example(state, {"t": "score", "ins": rng.choice(RATING_INSTRUCTIONS), "crit": list(scale)},
                  ordinal_target(len(scale), stars / 4), "review-rating")
    fact = rng.choice(list(REVIEW_NOUL))
    holds = stars >= 3 if fact == "recommend" else fact.split(":")[1] in aspects
    q, target = _noul(rng.choice(REVIEW_NOUL[fact]), holds)
    yield Example(state, q, target, "review-fact")


def _comment(rng: random.Random) -> Iterator[Example]:
    kind = rng.choice(list(COMMENT_TEXT))
    text = rng.choice(COMMENT_TEXT[kind]).format(u=rng.choice(URLS))
    state = _render(rng, text, "comment")
    made = _choice_question(rng, kind, MODERATION_LABELS, MODERATION_INSTRUCTIONS)
    if made:
        q, index = made
        yield Example(state, q, one_hot(len(q["crit"]), index), "moderation")
        yield _restated(rng, state, q, index, "moderation")
    fact = rng.choice(list(MODERATION_NOUL))
    holds = kind != "ok" if fact == "remove" else kind == fact
    q, target = _noul(rng.choice(MODERATION_NOUL[fact]), holds)
    yield Example(state, q, target, "moderation-fact")


def _internal(rng: random.Random) -> Iterator[Example]:
    dept = rng.choice(list(DEPARTMENT_TEXT))
    state = _render(rng, rng.choice(GREETINGS[2:]) + " " + rng.choice(DEPARTMENT_TEXT[dept]), "email")
    made = _choice_question(rng, dept, DEPARTMENT_LABELS, DEPARTMENT_INSTRUCTIONS)
    if made:
        q, index = made
        yield Example(state, q, one_hot(len(q["crit"]), index), "routing")
        yield _restated(rng, state, q, index, "routing")
    other = rng.choice([d for d in DEPARTMENT_TEXT if d != dept]) if rng.random() < 0.5 else dept
    label = DEPARTMENT_LABELS[other][0][0]
    q, target = _noul(rng.choice(["Is this a matter for %s?", "Should %s handle this?"]) % label, other == dept)
    yield Example(state, q, target, "routing-fact")


def _conversation(rng: random.Random) -> Iterator[Example]:
    topic = rng.choice(["billing", "tech", "account", "shipping"])
    resolved = rng.random() < 0.5
    turns = [{"role": "user", "content": _sentence(rng.choice(TOPIC_TEXT[topic])) + "."},
             {"role": "assistant", "content": rng.choice(AGENT_REPLIES)},
             {"role": "user", "content": rng.choice(RESOLVED_TEXT[0 if resolved else 1])}]
    q, target = _noul(rng.choice(CONVERSATION_NOUL), resolved)
    yield Example(turns, q, target, "conversation-resolved")
    made = _choice_question(rng, topic, {n: TOPIC_LABELS[n] for n in TOPIC_LABELS}, TOPIC_INSTRUCTIONS,
                            TOPIC_FALLBACK.get(topic))
    if made:
        q, index = made
        yield Example(turns, q, one_hot(len(q["crit"]), index), "conversation-topic")
        yield _restated(rng, turns, q, index, "conversation-topic")


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
    parts = [rng.choice(GREETINGS), _sentence(problem) + "."]
    if rng.random() < 0.3:
        parts.append(_sentence(rng.choice(URGENCY_TEXT[level])) + ".")
    if rng.random() < 0.3:
        parts.append(rng.choice(TONE_TEXT["negative" if level >= 2 else "neutral"]))
    state = _render(rng, " ".join(p for p in parts if p), "ticket")
    scale = rng.choice(URGENCY_SCALES)
    yield Example(state, {"t": "score", "ins": rng.choice(URGENCY_INSTRUCTIONS), "crit": list(scale)},
                  ordinal_target(len(scale), level / 3), "severity-urgency")
    instruction = rng.choice(ESCALATE_NOUL)
    holds = level <= 1 if instruction.startswith("Can this wait") else level >= 2
    q, target = _noul(instruction, holds)
    yield Example(state, q, target, "severity-fact")
    made = _choice_question(rng, topic if topic != "feedback" else "other", dict(TOPIC_LABELS), TOPIC_INSTRUCTIONS,
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
    state = _render(rng, " ".join(sentences), "review")
    scale = rng.choice(RATING_SCALES)
    yield Example(state, {"t": "score", "ins": rng.choice(RATING_INSTRUCTIONS), "crit": list(scale)},
                  ordinal_target(len(scale), stars / 4), "review-rating")
    positive = rng.random() < 0.5
    instruction = rng.choice(["Is the review positive?", "Is the reviewer satisfied?", "Did they like it?"] if positive
                             else ["Is the review negative?", "Is the reviewer disappointed?", "Did they dislike it?"])
    if stars != 2:
        q, target = _noul(instruction, (stars >= 3) == positive)
        yield Example(state, q, target, "review-fact")


def _message_facts(rng: random.Random) -> Iterator[Example]:
    """A short message with a few drawn facts in it, asked whether one of them (or another) holds."""
    present = [name for name in FACT_SENTENCES if rng.random() < 0.35]
    sentences = [rng.choice(MESSAGE_BODIES)] + [rng.choice(FACT_SENTENCES[name]) for name in present]
    rng.shuffle(sentences)
    state = _render(rng, " ".join(p for p in [rng.choice(MESSAGE_OPENINGS)] + sentences if p), "message")
    asked = rng.sample(list(FACT_QUESTIONS), 2)
    if present and rng.random() < 0.5:
        asked[0] = rng.choice(present)
    for name in asked:
        q, target = _noul(rng.choice(FACT_QUESTIONS[name]), name in present)
        yield Example(state, q, target, "message-fact")


def _render(rng: random.Random, text: str, kind: str) -> Any:
    """Plain text most of the time; sometimes a JSON record carrying the text and a few fields."""
    roll = rng.random()
    if roll < 0.6:
        return text
    if roll < 0.9:
        record: dict[str, Any] = {kind: text}
        if rng.random() < 0.5:
            record["customer_id"] = rng.randint(1000, 9999)
        if rng.random() < 0.4:
            record["channel"] = rng.choice(["email", "chat", "web form", "phone transcript"])
        return record
    return text


DOMAINS = ((_ticket, 5), (_review, 2), (_comment, 2), (_internal, 2), (_conversation, 2))
# Version 2 keeps every version-1 world and adds severity tickets, more reviews and text facts.
DOMAINS_V2 = DOMAINS + ((_severity_ticket, 4), (_rated_review, 2), (_message_facts, 3))
KNOWN_VERSIONS = (1, 2, 3, 4, 5)


def domains(version: int) -> tuple:
    """The (maker, weight) pairs of a generator version."""
    if version not in KNOWN_VERSIONS:
        raise ValueError("unknown generator version %r; known: %s" % (version, list(KNOWN_VERSIONS)))
    if version == 1:
        return DOMAINS
    if version == 2:
        return DOMAINS_V2
    # Imported here: version 3's module builds on this one's pools and helpers.
    from . import demo_data_v3 as v3

    # Version 3: version 2 with composed reviews and product descriptions, and message facts never asked twice.
    kept = tuple(pair for pair in DOMAINS_V2 if pair[0] is not _message_facts)
    v3_domains = kept + ((v3.distinct_message_facts, 3), (v3.composed_review, 4), (v3.product_description, 1))
    if version == 3:
        return v3_domains
    from . import demo_data_v4 as v4

    # Version 4: version 3 with wide-vocabulary workplace requests, customer messages and forum comments.
    v4_domains = v3_domains + ((v4.workplace_request, 5), (v4.customer_message, 5), (v4.forum_comment, 2))
    if version == 4:
        return v4_domains
    from . import demo_data_v5 as v5

    # Version 5: version 4 with rated visits to places and services, moderated comments of four kinds and
    # internal requests over a second subject pool.
    return v4_domains + ((v5.rated_experience, 4), (v5.moderated_comment, 3), (v5.workplace_request_wide, 3))


def generate(n_worlds: int, seed: int, version: int = 1) -> list[Example]:
    """Examples from `n_worlds` drawn worlds (1-4 questions each); deterministic in `seed` and `version`."""
    pairs = domains(version)
    rng = random.Random(seed)
    makers = [maker for maker, weight in pairs for _ in range(weight)]
    examples: list[Example] = []
    for _ in range(n_worlds):
        examples.extend(rng.choice(makers)(rng))
    return examples
