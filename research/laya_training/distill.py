"""Choice questions labelled by the pretrained encoder itself, over the words of its own vocabulary.

Measured (`research/scripts/baseline_demo.py`): MiniLM's sentence embeddings alone, comparing a state with
each option's "label: description", pick the expected option of 82-83% of the hand-written choice
questions; the head trained on the generator's worlds picks 57-67%. The head learns the
generator's few phrasings per label instead of what the words mean, and the generator cannot
list every word a user may write.

So: short requests about one word of the tokenizer's vocabulary ("Who deals with the
auditorium?"), asked to choose among labels from a wide inventory, with the teacher's similarity
distribution as the soft target. Only questions where the teacher clearly prefers one option are
kept (most vocabulary words are names or fit no label), and only when the word alone points to the
same label as the whole request (so the frame's own wording does not decide). On the generator's own multi-sentence
worlds the same teacher agrees with the generator's answer only 60% of the time, which is why it
labels these one-topic texts and not those.

The teacher is the unmodified PyPI encoder, loaded separately from the model being trained.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from pathlib import Path

from .baseline import SentenceEncoder, option_text
from .examples import Example

# Labels a question may offer, with a description: teams, departments, topics, intents, moods.
LABEL_INVENTORY: list[tuple[str, str | None]] = [
    ("billing", "payments, invoices, refunds"), ("technical support", "bugs, errors, outages"),
    ("shipping", "deliveries and parcels"), ("sales", "prices, quotes, new customers"),
    ("account access", "logins and passwords"), ("returns", "sending items back, exchanges"),
    ("human resources", "staff, leave, hiring, payroll"), ("legal", "contracts, lawsuits, privacy law"),
    ("it helpdesk", "computers, software, network"), ("finance", "budgets, expenses, accounting"),
    ("marketing", "advertising, campaigns, press"), ("facilities", "the building, rooms, repairs"),
    ("security", "badges, alarms, safety"), ("procurement", "buying from suppliers"),
    ("spam", "ads and scams"), ("harassment", "insults and threats"), ("praise", "compliments and thanks"),
    ("complaint", "dissatisfaction, grievances"), ("cancellation", "ending a subscription or contract"),
    ("refund request", "wanting money back"), ("bug report", "something in the software is broken"),
    ("travel", "trips, flights, hotels"), ("food", "restaurants, cooking, meals"), ("health", "illness, doctors"),
    ("sports", "games, teams, athletes"), ("weather", "rain, heat, storms"), ("music", "songs, bands, concerts"),
    ("politics", "elections, government"), ("education", "schools, courses, exams"),
    ("real estate", "houses, rent, leases"), ("insurance", "policies and claims"), ("banking", "accounts, loans"),
    ("electronics", "phones, laptops, gadgets"), ("clothing", "shoes, jackets, sizes"),
    ("furniture", "chairs, tables, sofas"), ("cars", "vehicles and repairs"), ("pets", "dogs, cats, animals"),
    ("gardening", "plants and lawns"), ("books", "novels and reading"), ("cleaning", "dirt, dust, washing"),
    ("taxes", "tax returns and duties"), ("recruitment", "job applications and interviews"),
    ("events", "conferences and meetings"), ("scheduling", "dates, times, appointments"),
    ("privacy", "personal data"), ("science", "research and experiments"), ("art", "painting, museums"),
    ("religion", "faith and churches"), ("military", "armies and wars"), ("medicine", "drugs and treatment"),
    ("energy", "electricity, gas, heating"), ("construction", "building works and materials"),
]
FRAMES = ["I have a question about the {w}.", "Can someone help with the {w}?", "Problem with the {w}.",
          "It's about the {w}.", "Who deals with the {w}?", "We need to talk about the {w}.",
          "Quick note regarding the {w}.", "Any update on the {w}?", "Re: {w}", "{W}",
          "Could you look at the {w} today?", "Something about the {w} again."]
INSTRUCTIONS = ["Which label fits best?", "Classify this text.", "Pick the category.", "topic",
                "What is this about?", "Choose the best matching label.", "Route this.", "Tag the message."]


def vocabulary_words(vocab_file: Path) -> list[str]:
    """Whole lower-case words of four letters or more from a WordPiece vocabulary, in file order."""
    words = (line.strip() for line in vocab_file.read_text(encoding="utf-8").splitlines())
    return [w for w in words if re.fullmatch(r"[a-z]{4,}", w)]


def teacher_questions(words: Sequence[str], n_questions: int, seed: int, teacher: SentenceEncoder,
                      temperature: float = 0.05, min_similarity: float = 0.3, min_margin: float = 0.05,
                      batch_size: int = 512) -> list[Example]:
    """Up to `n_questions` choice questions with the teacher's softmax(cosine / temperature) as target:
    each offers the label closest to its text and 1-5 others, and is kept only when that label's
    cosine is >= `min_similarity` and beats every other offered one by `min_margin`. Words are taken
    in a seeded order (several passes, other frames, if needed). Deterministic in `seed`."""
    import torch

    rng = random.Random(seed)
    described = teacher.embed([option_text(*item) for item in LABEL_INVENTORY])
    bare = teacher.embed([label for label, _ in LABEL_INVENTORY])
    examples: list[Example] = []
    for _ in range(4):   # passes over the vocabulary
        order = list(words)
        rng.shuffle(order)
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            texts = [f.replace("{W}", w[:1].upper() + w[1:]).replace("{w}", w)
                     for f, w in zip((rng.choice(FRAMES) for _ in chunk), chunk, strict=True)]
            vectors, alone = teacher.embed(texts), teacher.embed(chunk)
            for text, vec, word_vec in zip(texts, vectors, alone, strict=True):
                with_description = rng.random() < 0.6
                labels = described if with_description else bare
                sims = (labels @ vec).tolist()
                best = max(range(len(sims)), key=lambda i: sims[i])
                if int((labels @ word_vec).argmax()) != best:
                    continue   # the frame, not the word, chose the label ("Who deals with ..." reads as facilities)
                others = rng.sample([i for i in range(len(sims)) if i != best], rng.randint(1, 5))
                if sims[best] < min_similarity or sims[best] - max(sims[i] for i in others) < min_margin:
                    continue
                pool = others + [best]
                rng.shuffle(pool)
                target = torch.softmax(torch.tensor([sims[i] for i in pool]) / temperature, -1).tolist()
                crit = {LABEL_INVENTORY[i][0]: LABEL_INVENTORY[i][1] if with_description else None for i in pool}
                question = {"t": "choice", "ins": rng.choice(INSTRUCTIONS), "crit": crit}
                examples.append(Example(text, question, target, "teacher-choice"))
                if len(examples) == n_questions:
                    return examples
    return examples
