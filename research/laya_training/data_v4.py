"""Generator version 4's new worlds: wider vocabulary, so the head matches meaning, not stock sentences.

Versions 1-3 draw a ticket's or an internal request's subject from a handful of sentences per
class (four per department), which a model can memorise without learning what the labels mean.
Here a request is a generic frame around one of many subjects per class (a dozen or more), so the
same frame appears under every label and only the subject decides; more departments are drawn
than any one question lists. Customer messages state their wishes (a refund, cancelling, a
return) and their mood in many ways, or not at all; forum comments are built from parts.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from . import data_v3 as v3
from .data_v1 import GREETINGS, NAMES, TOPIC_INSTRUCTIONS, TOPIC_LABELS, URLS, sentiment_question
from .examples import Example, choice_question, noul_question, one_hot, render_state, restated_question, sentence_case

# ------------------------------------------------------------------------ workplace requests

# The subject of an employee's request, per department: noun phrases that fit any frame below.
WORKPLACE_SUBJECTS = {
    "hr": ["my holiday allowance for next year", "the sick note from my doctor", "a new starter's first week",
           "the job interview panel for Tuesday", "my annual performance review", "the pension scheme enrolment",
           "a complaint about a colleague's behaviour", "switching to a four-day week", "my notice period",
           "the training budget for my team", "unpaid leave to care for my mother", "the staff wellbeing survey",
           "a reference letter for a former employee", "the hiring plan for two engineers"],
    "legal": ["the terms of the partnership contract", "a trademark for our new product name",
              "the privacy notice on the sign-up page", "a claim a customer's lawyer sent us",
              "the liability clause in the lease", "whether we may reuse a competitor's photo",
              "the data processing agreement with our vendor", "a subpoena that arrived by post",
              "the export rules for shipping to Iran", "the non-compete in an offer letter",
              "a copyright notice on our blog", "the consent wording for marketing emails",
              "the dispute with our former landlord"],
    "it": ["my laptop's battery that drains in an hour", "the printer on the second floor",
           "a phishing email I just received", "access to the finance share", "my Outlook calendar",
           "a licence for the design software", "the Wi-Fi in the west wing", "a second monitor for my desk",
           "resetting my network password", "the video-call headset that crackles", "installing Python on my PC",
           "the shared mailbox for support", "my phone that won't sync email"],
    "finance": ["the reimbursement for my train tickets", "next quarter's budget forecast",
                "a vendor payment that bounced", "the company credit card limit", "the per diem for the Berlin trip",
                "an overdue customer invoice", "the cost centre for the new project", "the payroll tax filing",
                "a refund to a client we overcharged", "the depreciation of the new servers",
                "the year-end audit schedule", "approving a purchase over 5,000 euros"],
    "marketing": ["the brochure for the spring fair", "our follower numbers on LinkedIn",
                  "the slogan for the autumn campaign", "photos for the new product page", "the customer newsletter",
                  "a booth at the industry conference", "the logo on the sponsorship banner",
                  "an interview request from a journalist", "the launch video script", "our ads on search engines",
                  "the case study with our biggest client", "the blog post about the new feature"],
    "facilities": ["the air conditioning in the open-plan area", "a water leak under the kitchen sink",
                   "the broken blinds in room 12", "booking the large boardroom", "desks for the new joiners",
                   "the lift that keeps stopping between floors", "a parking space for a visitor",
                   "the cleaning rota for the office", "the fridge that smells awful",
                   "a burnt-out lamp in the stairwell",
                   "moving our team to the fourth floor", "the noise from the building works next door"],
    "security": ["a stranger who followed me through the door", "my lost access badge",
                 "the alarm code for the back entrance", "a suspicious parcel at reception",
                 "visitor passes for the auditors", "the CCTV camera in the car park", "a break-in at the warehouse",
                 "keys for the server cage", "tailgating at the main gate", "the night guard's rounds"],
}
WORKPLACE_LABELS = {
    "hr": [("hr", "people, leave, policies"), ("human resources", None), ("people team", "staff matters"),
           ("hr", "hiring, contracts of employment, well-being")],
    "legal": [("legal", "contracts, compliance, privacy"), ("legal", None), ("compliance", "laws and regulations"),
              ("legal counsel", "agreements, disputes, intellectual property")],
    "it": [("it", "computers, accounts, network"), ("it helpdesk", None), ("internal it", "devices and access"),
           ("tech support", "hardware and software at work")],
    "finance": [("finance", "expenses, budgets, invoices"), ("accounting", None), ("finance", None),
                ("controlling", "money in and out")],
    "marketing": [("marketing", "campaigns and content"), ("marketing", None), ("communications", "newsletters, ads"),
                  ("brand", "press, social media, events")],
    "facilities": [("facilities", "building, rooms, maintenance"), ("facilities", None),
                   ("office management", "the premises and equipment"), ("maintenance", None)],
    "security": [("security", "access, badges, safety"), ("security", None),
                 ("physical security", "guards and alarms")],
}
WORKPLACE_FRAMES = [
    "Can someone help me with {x}?", "I have a question about {x}.", "Who do I talk to about {x}?",
    "There's a problem with {x}.", "Quick one: {x}.", "Could you look into {x} for me?",
    "I'm writing regarding {x}.", "Need some support on {x}, please.", "Who owns {x}? Not sure where to ask.",
    "Following up on {x} from last week.", "Reminder: {x} still needs sorting out.", "Re: {x}",
    "Is anyone handling {x}?", "{X} - can this be sorted before Friday?",
]
WORKPLACE_INSTRUCTIONS = ["Which department should receive this request?", "Route this internal request.",
                          "Who should answer this employee?", "department", "Which team handles this?",
                          "Forward this to the right department.", "Owner of the request"]
ASKED_FOR = ["Is this a matter for %s?", "Should %s handle this?", "Does this go to %s?", "Is %s responsible?"]


def workplace_request(rng: random.Random) -> Iterator[Example]:
    """An employee's request: a generic frame around one department's subject."""
    return employee_request(rng, WORKPLACE_SUBJECTS, WORKPLACE_FRAMES, "workplace")


def employee_request(rng: random.Random, subjects: dict[str, list[str]], frames: list[str],
                     domain: str) -> Iterator[Example]:
    """One of `frames` around a subject of a department drawn from `subjects`, asked about its department."""
    dept = rng.choice(list(subjects))
    subject = rng.choice(subjects[dept])
    frame = rng.choice(frames)
    text = frame.replace("{X}", sentence_case(subject)).replace("{x}", subject)
    opener = rng.choice(GREETINGS)
    signature = " " + rng.choice(NAMES) if rng.random() < 0.3 else ""
    state = render_state(rng, (opener + " " if opener else "") + text + signature, "email")
    made = choice_question(rng, dept, WORKPLACE_LABELS, WORKPLACE_INSTRUCTIONS, k_max=6)
    if made:
        q, index = made
        yield Example(state, q, one_hot(len(q["crit"]), index), domain)
        yield restated_question(rng, state, q, index, domain)
    other = rng.choice([d for d in subjects if d != dept]) if rng.random() < 0.5 else dept
    q, target = noul_question(rng.choice(ASKED_FOR) % rng.choice(WORKPLACE_LABELS[other])[0], other == dept)
    yield Example(state, q, target, domain + "-fact")


# ------------------------------------------------------------------------- customer messages

CUSTOMER_SUBJECTS = {
    "billing": ["an extra charge of {n} on my statement", "the invoice for March", "my direct debit",
                "the price on my last bill", "a payment that went through twice", "the renewal fee",
                "the card you have on file", "the VAT number on the receipt", "a fee I don't understand"],
    "tech": ["the app, which closes as soon as I tap 'save'", "the upload page, which shows an error",
             "the website, which won't load on my tablet", "the export button, which does nothing",
             "the sync between my phone and laptop", "the video player, which stutters",
             "the calendar view, which is blank", "the search, which returns the wrong results"],
    "shipping": ["parcel {n}, which hasn't moved in a week", "the courier, who left my box in the rain",
                 "the delivery slot I booked", "my order, which arrived with a piece missing",
                 "the package sent to my old address", "the tracking page, which says 'returned to sender'"],
    "sales": ["the price of your team plan", "a quote for {n} licences", "the difference between the plans",
              "whether you offer a nonprofit discount", "adding more seats to our contract",
              "a demo of the enterprise edition"],
}
WISHES = {
    "refund": ["Please put the money back on my card.", "I'd like that amount credited back.",
               "Can you reverse the charge?", "I want to be reimbursed.", "Return my payment, please.",
               "Please pay me back what I was charged.", "I expect a refund within the week.",
               "Where is the money you promised to return?"],
    "cancel": ["I no longer want your service.", "Please end my contract.", "I'm leaving for another company.",
               "Stop my plan when this billing cycle ends.", "Don't renew my subscription.",
               "This was my last order with you.", "I'm done with this service."],
    "return": ["I'd like to send the item back.", "How do I ship it back to you?",
               "Can I swap it for a different size?",
               "Please collect it, I don't want it.", "I'm returning it unused."],
}
WISH_QUESTIONS = {
    "refund": ["Is the customer asking for money back?", "Does the customer want a refund?",
               "Is a reimbursement requested?", "refund?"],
    "cancel": ["Is the customer leaving?", "Does the customer want to cancel?", "Is this customer about to churn?",
               "Will we lose this customer?"],
    "return": ["Does the customer want to return something?", "Is a return requested?"],
}
MOODS = {
    "positive": ["Your people are fantastic.", "Absolutely delighted with you so far.", "Superb service as always.",
                 "I'm really impressed.", "Thank you, you made my day!", "Best support I've ever had.",
                 "Honestly, worth every penny.", "You've been wonderful.", "Top marks to your team.",
                 "I can't praise you enough."],
    "negative": ["I'm extremely annoyed.", "This is a disgrace.", "What a terrible experience.",
                 "I'm losing my patience with you.", "Your service has gone downhill.", "I'm so disappointed.",
                 "This is the worst company I've dealt with.", "Shame on you.", "Completely useless so far.",
                 "I'm angry about this."],
    "neutral": ["", "", "", "Regards.", "Thank you.", "Best wishes."],
}
MOOD_LABELS = [
    {"positive": "positive", "neutral": "neutral", "negative": "negative"},
    {"positive": "happy", "neutral": "neutral", "negative": "unhappy"},
    {"positive": "pleased", "neutral": "indifferent", "negative": "annoyed"},
    {"positive": "satisfied", "neutral": "neutral", "negative": "dissatisfied"},
    {"positive": "praise", "neutral": "neutral", "negative": "complaint"},
]
MOOD_INSTRUCTIONS = ["What is the sentiment?", "How does the customer feel?", "Mood of the writer",
                     "Classify the tone.", "Is the customer happy or not?", "sentiment"]
MOOD_NOUL = {"positive": ["Is the customer happy?", "Is this praise?", "Is the writer satisfied?"],
             "negative": ["Is the customer upset?", "Is the writer unhappy?", "Does this sound like a complaint?"]}


def customer_message(rng: random.Random) -> Iterator[Example]:
    """A customer writes about one subject, maybe wants something, in some mood; each asked about."""
    topic = rng.choice(list(CUSTOMER_SUBJECTS))
    subject = rng.choice(CUSTOMER_SUBJECTS[topic]).format(n=rng.randint(12, 990))
    wishes = [w for w in WISHES if rng.random() < 0.3]
    mood = rng.choice(["positive", "neutral", "negative", "negative"])
    if wishes and mood == "positive" and rng.random() < 0.7:
        mood = "negative"
    opener = rng.choice(["I'm writing about %s.", "It's about %s.", "About %s:", "Regarding %s.",
                         "I need help with %s."]) % subject
    parts = [rng.choice(WISHES[w]) for w in wishes] + [rng.choice(MOODS[mood])]
    rng.shuffle(parts)
    text = " ".join(p for p in [rng.choice(GREETINGS), sentence_case(opener)] + parts if p)
    state = render_state(rng, text, "message")

    pools = {name: TOPIC_LABELS[name] for name in ("billing", "tech", "shipping", "sales", "other")}
    made = choice_question(rng, topic, pools, TOPIC_INSTRUCTIONS, k_max=5)
    if made:
        q, index = made
        yield Example(state, q, one_hot(len(q["crit"]), index), "customer-topic")
    q, target = sentiment_question(rng, mood, MOOD_LABELS, MOOD_INSTRUCTIONS)
    yield Example(state, q, target, "customer-mood")
    wish = rng.choice(wishes) if wishes and rng.random() < 0.5 else rng.choice(list(WISHES))
    q, target = noul_question(rng.choice(WISH_QUESTIONS[wish]), wish in wishes)
    yield Example(state, q, target, "customer-wish")
    polarity = rng.choice(list(MOOD_NOUL))
    q, target = noul_question(rng.choice(MOOD_NOUL[polarity]), mood == polarity)
    yield Example(state, q, target, "customer-mood-fact")


# ---------------------------------------------------------------------------- forum comments

COMMENT_PARTS = {
    "ok": [["I'm not sure I agree with", "Small correction to", "Thanks for", "Good points in",
            "I have a question about", "Nice summary in", "I'd add one caveat to"],
           ["the second paragraph.", "the chart near the end.", "this guide.", "the numbers quoted here.",
            "the setup steps.", "the point about batteries.", "the comparison table."]],
    "abuse": [["Listen, you", "Nobody asked you,", "Get out of this forum,", "Keep talking and", "Hey"],
              ["clueless clown.", "you'll be sorry, I promise.", "worthless troll.", "I'll come find you.",
               "brainless idiot.", "everyone here despises you."]],
    "spam": [["Earn money fast at", "Cheap watches and bags:", "Free gift cards, just visit", "Lose 10 kg in a week:",
              "Limited offer, click"], ["{u}", "{u} now!!!", "{u} today only", "{u} (100% legit)"]],
}
COMMENT_LABELS = {
    "spam": [("spam", "unsolicited advertising or scams"), ("spam", None), ("advertising", "promotions and links"),
             ("promotion", None)],
    "abuse": [("abuse", "insults or threats"), ("harassment", None), ("toxic", "hostile or hateful language"),
              ("threat", None), ("harassment", "attacks on a person")],
    "ok": [("ok", "acceptable content"), ("safe", None), ("fine", "nothing wrong"), ("normal discussion", None),
           ("acceptable", "on-topic, civil")],
}
COMMENT_INSTRUCTIONS = ["Moderate this comment.", "What kind of comment is this?", "moderation label",
                        "Label this forum post.", "Classify the post for the moderators."]
COMMENT_NOUL = {"spam": ["Is this spam?", "Is it advertising?"],
                "abuse": ["Is this comment abusive?", "Is the writer threatening someone?", "Is it an insult?"],
                "remove": ["Should this comment be removed?", "Does this break the forum rules?"]}


def forum_comment(rng: random.Random) -> Iterator[Example]:
    """A comment from two parts of its class (civil, abusive or spam), moderated."""
    kind = rng.choice(list(COMMENT_PARTS))
    first, second = COMMENT_PARTS[kind]
    text = "%s %s" % (rng.choice(first), rng.choice(second).format(u=rng.choice(URLS)))
    state = render_state(rng, text, "comment")
    made = choice_question(rng, kind, COMMENT_LABELS, COMMENT_INSTRUCTIONS)
    if made:
        q, index = made
        yield Example(state, q, one_hot(len(q["crit"]), index), "forum")
    fact = rng.choice(list(COMMENT_NOUL))
    q, target = noul_question(rng.choice(COMMENT_NOUL[fact]), kind != "ok" if fact == "remove" else kind == fact)
    yield Example(state, q, target, "forum-fact")


# Version 4: version 3 with wide-vocabulary workplace requests, customer messages and forum comments.
DOMAINS = v3.DOMAINS + ((workplace_request, 5), (customer_message, 5), (forum_comment, 2))
