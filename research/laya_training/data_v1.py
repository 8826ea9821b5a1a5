"""Generator version 1: support tickets, reviews, moderated comments, internal requests, conversations.

Each world's text comes from a few stock phrases per class; the label names, descriptions, scales,
instructions and option order are drawn. Versions 2-5 keep these worlds and add others.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from .examples import (
    Example,
    choice_question,
    noul_question,
    one_hot,
    ordinal_target,
    render_state,
    restated_question,
    sentence_case,
)

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



def _ticket(rng: random.Random) -> Iterator[Example]:
    topic = rng.choice(list(TOPIC_TEXT))
    urgency = rng.randint(0, 3)
    tone = rng.choice(["positive", "neutral", "negative", "negative"])
    refund = topic in ("billing", "shipping") and rng.random() < 0.4
    churn = rng.random() < 0.3
    order_no = rng.random() < 0.3
    if churn and tone == "positive":
        tone = "negative"
    parts = [rng.choice(GREETINGS), sentence_case(rng.choice(TOPIC_TEXT[topic]))
             + (" (order #%d)" % rng.randint(10000, 99999) if order_no else "") + "."]
    extras = [sentence_case(rng.choice(URGENCY_TEXT[urgency])) + ".", rng.choice(TONE_TEXT[tone])]
    if refund:
        extras.append(rng.choice(REFUND_TEXT))
    extras.append(rng.choice(CHURN_TEXT) if churn else rng.choice(LOYAL_TEXT))
    rng.shuffle(extras)
    text = " ".join(p for p in parts + extras if p)
    if rng.random() < 0.3:
        text += " " + rng.choice(NAMES)
    state = render_state(rng, text, "ticket")

    pools = {name: TOPIC_LABELS[name] for name in TOPIC_LABELS}
    if topic in ("feedback",):
        pools.pop("sales") if rng.random() < 0.5 else None
    made = choice_question(rng, topic if topic != "feedback" else "other", pools, TOPIC_INSTRUCTIONS,
                            TOPIC_FALLBACK.get(topic))
    if made:
        q, index = made
        yield Example(state, q, one_hot(len(q["crit"]), index), "ticket-topic")
        yield restated_question(rng, state, q, index, "ticket-topic")
    scale = rng.choice(URGENCY_SCALES)
    yield Example(state, {"t": "score", "ins": rng.choice(URGENCY_INSTRUCTIONS), "crit": list(scale)},
                  ordinal_target(len(scale), urgency / 3), "ticket-urgency")
    facts = {"churn": churn, "refund": refund, "negative": tone == "negative", "urgent": urgency >= 2,
             "order_number": order_no}
    for name in ("billing", "tech", "shipping", "account"):
        facts["topic:" + name] = topic == name
    fact = rng.choice(list(facts))
    q, target = noul_question(rng.choice(TICKET_NOUL[fact]), facts[fact])
    yield Example(state, q, target, "ticket-fact")
    if rng.random() < 0.4:
        q, target = sentiment_question(rng, tone)
        yield Example(state, q, target, "ticket-sentiment")
        yield restated_question(rng, state, q, target.index(1.0), "ticket-sentiment")


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
    state = render_state(rng, " ".join(sentences), "review")
    scale = rng.choice(RATING_SCALES)
    yield Example(state, {"t": "score", "ins": rng.choice(RATING_INSTRUCTIONS), "crit": list(scale)},
                  ordinal_target(len(scale), stars / 4), "review-rating")
    fact = rng.choice(list(REVIEW_NOUL))
    holds = stars >= 3 if fact == "recommend" else fact.split(":")[1] in aspects
    q, target = noul_question(rng.choice(REVIEW_NOUL[fact]), holds)
    yield Example(state, q, target, "review-fact")


def _comment(rng: random.Random) -> Iterator[Example]:
    kind = rng.choice(list(COMMENT_TEXT))
    text = rng.choice(COMMENT_TEXT[kind]).format(u=rng.choice(URLS))
    state = render_state(rng, text, "comment")
    made = choice_question(rng, kind, MODERATION_LABELS, MODERATION_INSTRUCTIONS)
    if made:
        q, index = made
        yield Example(state, q, one_hot(len(q["crit"]), index), "moderation")
        yield restated_question(rng, state, q, index, "moderation")
    fact = rng.choice(list(MODERATION_NOUL))
    holds = kind != "ok" if fact == "remove" else kind == fact
    q, target = noul_question(rng.choice(MODERATION_NOUL[fact]), holds)
    yield Example(state, q, target, "moderation-fact")


def _internal(rng: random.Random) -> Iterator[Example]:
    dept = rng.choice(list(DEPARTMENT_TEXT))
    state = render_state(rng, rng.choice(GREETINGS[2:]) + " " + rng.choice(DEPARTMENT_TEXT[dept]), "email")
    made = choice_question(rng, dept, DEPARTMENT_LABELS, DEPARTMENT_INSTRUCTIONS)
    if made:
        q, index = made
        yield Example(state, q, one_hot(len(q["crit"]), index), "routing")
        yield restated_question(rng, state, q, index, "routing")
    other = rng.choice([d for d in DEPARTMENT_TEXT if d != dept]) if rng.random() < 0.5 else dept
    label = DEPARTMENT_LABELS[other][0][0]
    q, target = noul_question(rng.choice(["Is this a matter for %s?", "Should %s handle this?"]) % label, other == dept)
    yield Example(state, q, target, "routing-fact")


def _conversation(rng: random.Random) -> Iterator[Example]:
    topic = rng.choice(["billing", "tech", "account", "shipping"])
    resolved = rng.random() < 0.5
    turns = [{"role": "user", "content": sentence_case(rng.choice(TOPIC_TEXT[topic])) + "."},
             {"role": "assistant", "content": rng.choice(AGENT_REPLIES)},
             {"role": "user", "content": rng.choice(RESOLVED_TEXT[0 if resolved else 1])}]
    q, target = noul_question(rng.choice(CONVERSATION_NOUL), resolved)
    yield Example(turns, q, target, "conversation-resolved")
    made = choice_question(rng, topic, {n: TOPIC_LABELS[n] for n in TOPIC_LABELS}, TOPIC_INSTRUCTIONS,
                            TOPIC_FALLBACK.get(topic))
    if made:
        q, index = made
        yield Example(turns, q, one_hot(len(q["crit"]), index), "conversation-topic")
        yield restated_question(rng, turns, q, index, "conversation-topic")



DOMAINS = ((_ticket, 5), (_review, 2), (_comment, 2), (_internal, 2), (_conversation, 2))
