"""A seeded generator of short ChatML dialogues for the bundled default chat model.

Each turn is ``<|im_start|>user\\n{question}<|im_end|>\\n<|im_start|>assistant\\n{answer}<|im_end|>\\n``;
a dialogue has 1-3 turns. Tasks: addition and subtraction of numbers below 50, counting, spelling short
words backwards, comparing two numbers, colours of things, opposites, the order of the alphabet, and
greetings, each with several phrasings.

Held-out evaluation: :func:`tasks` returns a fixed (seed-independent) list of ``(question, answer)`` pairs
per task. For arithmetic, counting and comparison the operand pairs are held out in every phrasing
(and both orders), so they test generalisation; for words, facts, letters and greetings a fact is held
out in one phrasing only (the fact itself must be taught), so they test robustness to phrasing.
:func:`make_split` never emits a held-out question in the training text; the check is on the exact
question string, so it holds whatever the phrasings.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SPECIAL_TOKENS = ["<|im_start|>", "<|im_end|>"]
EOS_TOKEN = "<|im_end|>"
# ChatML, as a Jinja template for the engine's chat renderer.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
_HOLDOUT_SEED = 20240601  # fixed: the held-out set must not depend on the training seed

WORDS = ["cat", "dog", "sun", "car", "hat", "pen", "cup", "box", "bus", "egg", "fox", "map", "owl", "pig",
         "red", "sky", "toy", "web", "zoo", "bag", "bed", "bird", "book", "cake", "coat", "desk", "door",
         "duck", "fish", "frog", "game", "gold", "hand", "home", "king", "lamp", "leaf", "lion", "milk",
         "moon", "nose", "park", "rain", "ring", "road", "rock", "rose", "ship", "shoe", "star", "tree",
         "wind", "wolf", "apple", "bread", "chair", "cloud", "dream", "earth", "green", "horse", "house",
         "light", "music", "night", "ocean", "plant", "river", "smile", "stone", "table", "tiger", "water"]
COLOURS = [("the sky", "blue"), ("grass", "green"), ("snow", "white"), ("a banana", "yellow"),
           ("coal", "black"), ("a tomato", "red"), ("an orange", "orange"), ("the sun", "yellow"),
           ("a strawberry", "red"), ("milk", "white"), ("a lemon", "yellow"), ("a frog", "green"),
           ("chocolate", "brown"), ("the sea", "blue"), ("a carrot", "orange"), ("an elephant", "grey"),
           ("a crow", "black"), ("a cherry", "red"), ("a leaf", "green"), ("a cloud", "white"),
           ("a plum", "purple"), ("a pumpkin", "orange"), ("soil", "brown"), ("a lime", "green"),
           ("ink", "black"), ("a mouse", "grey"), ("sand", "yellow"), ("a fire truck", "red")]
_OPPOSITE_PAIRS = [("hot", "cold"), ("big", "small"), ("up", "down"), ("fast", "slow"), ("happy", "sad"),
                   ("day", "night"), ("open", "closed"), ("wet", "dry"), ("left", "right"), ("in", "out"),
                   ("yes", "no"), ("high", "low"), ("full", "empty"), ("early", "late"), ("hard", "soft"),
                   ("loud", "quiet"), ("rich", "poor"), ("strong", "weak"), ("thick", "thin"),
                   ("first", "last"), ("win", "lose"), ("push", "pull"), ("black", "white"), ("good", "bad")]
OPPOSITES = _OPPOSITE_PAIRS + [(b, a) for a, b in _OPPOSITE_PAIRS]
GREETINGS = {
    "Hello! How can I help you?": ["hello", "Hello", "hi", "Hi", "hey", "Hey there", "Hello!", "Hi!",
                                   "good morning", "Good morning!", "hello there", "Hi there!"],
    "I am fine, thank you!": ["how are you?", "How are you?", "how are you doing?", "How's it going?",
                              "how are you today?", "How are you doing today?"],
    "I am Petit, a small language model.": ["what is your name?", "What's your name?", "who are you?",
                                            "Who are you?", "what are you called?", "What is your name?"],
    "You are welcome!": ["thank you", "Thank you!", "thanks", "Thanks!", "thanks a lot", "Thank you very much!"],
    "Goodbye! Have a nice day.": ["bye", "Bye!", "goodbye", "Goodbye!", "see you later", "See you!"],
}
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class Task:
    """One task: ``items`` (hashable), ``phrasings`` (format functions item -> question), ``answer`` and
    the held-out set. ``holdout_items`` are excluded in every phrasing; ``holdout_combos`` are
    (item, phrasing index) pairs excluded only in that phrasing. ``weight`` is the sampling weight."""
    name: str
    items: tuple
    phrasings: tuple
    answer: object
    weight: float
    holdout_items: frozenset = frozenset()
    holdout_combos: frozenset = frozenset()


def _pairs_task(name, items, phrasings, answer, weight, n_holdout, symmetric=True):
    rng = random.Random(f"{_HOLDOUT_SEED}-{name}")
    held = set(rng.sample(sorted(items), n_holdout))
    if symmetric:  # hold out both orders of an operand pair so the answer cannot leak
        held |= {(b, a) for a, b in held if (b, a) in items}
    return Task(name, tuple(sorted(items)), tuple(phrasings), answer, weight, holdout_items=frozenset(held))


def _combos_task(name, items, phrasings, answer, weight, n_holdout):
    rng = random.Random(f"{_HOLDOUT_SEED}-{name}")
    chosen = rng.sample(sorted(items), n_holdout)
    combos = {(item, rng.randrange(len(phrasings))) for item in chosen}
    return Task(name, tuple(sorted(items)), tuple(phrasings), answer, weight, holdout_combos=frozenset(combos))


def _build_tasks() -> dict[str, Task]:
    add_items = {(a, b) for a in range(50) for b in range(50)}
    sub_items = {(a, b) for a in range(50) for b in range(a + 1)}
    count_items = {(a, b) for a in range(31) for b in range(a + 2, min(a + 9, 31))}
    cmp_items = {(a, b, w) for a in range(50) for b in range(50) if a != b for w in ("bigger", "smaller")}
    alpha_items = {(c, "after") for c in _LETTERS[:-1]} | {(c, "before") for c in _LETTERS[1:]}
    greet_items = [(q, a) for a, qs in GREETINGS.items() for q in qs]
    tasks = [
        _pairs_task("addition", add_items, (
            lambda t: f"what is {t[0]} + {t[1]}?", lambda t: f"What is {t[0]} plus {t[1]}?",
            lambda t: f"{t[0]} + {t[1]} = ?", lambda t: f"add {t[0]} and {t[1]}",
            lambda t: f"what's {t[0]} plus {t[1]}?", lambda t: f"Calculate {t[0]} + {t[1]}."),
            lambda t: str(t[0] + t[1]), 3.0, 30),
        _pairs_task("subtraction", sub_items, (
            lambda t: f"what is {t[0]} - {t[1]}?", lambda t: f"What is {t[0]} minus {t[1]}?",
            lambda t: f"{t[0]} - {t[1]} = ?", lambda t: f"subtract {t[1]} from {t[0]}",
            lambda t: f"Calculate {t[0]} - {t[1]}."),
            lambda t: str(t[0] - t[1]), 3.0, 30, symmetric=False),
        _pairs_task("counting", count_items, (
            lambda t: f"count from {t[0]} to {t[1]}", lambda t: f"Count from {t[0]} to {t[1]}.",
            lambda t: f"please count from {t[0]} to {t[1]}", lambda t: f"list the numbers from {t[0]} to {t[1]}"),
            lambda t: " ".join(str(i) for i in range(t[0], t[1] + 1)), 2.0, 15, symmetric=False),
        _combos_task("reverse", set(WORDS), (
            lambda w: f"spell {w} backwards", lambda w: f'Spell "{w}" backwards.',
            lambda w: f"what is {w} spelled backwards?", lambda w: f"reverse the word {w}"),
            lambda w: w[::-1], 2.0, 20),
        _pairs_task("compare", cmp_items, (
            lambda t: f"which is {t[2]}, {t[0]} or {t[1]}?",
            lambda t: f"Which is {t[2]}: {t[0]} or {t[1]}?",
            lambda t: f"which number is {t[2]}, {t[0]} or {t[1]}?"),
            lambda t: str(max(t[:2]) if t[2] == "bigger" else min(t[:2])), 2.0, 15, symmetric=False),
        _combos_task("colours", set(COLOURS), (
            lambda t: f"what colour is {t[0]}?", lambda t: f"What color is {t[0]}?",
            lambda t: f"what is the colour of {t[0]}?", lambda t: f"Tell me the color of {t[0]}."),
            lambda t: t[1], 1.0, 12),
        _combos_task("opposites", set(OPPOSITES), (
            lambda t: f"what is the opposite of {t[0]}?", lambda t: f"What's the opposite of {t[0]}?",
            lambda t: f"opposite of {t[0]}?", lambda t: f'Give me the opposite of "{t[0]}".'),
            lambda t: t[1], 1.0, 12),
        _combos_task("alphabet", alpha_items, (
            lambda t: f"what comes {t[1]} {t[0]}?", lambda t: f"which letter comes {t[1]} {t[0]}?",
            lambda t: f"What letter is {t[1]} {t[0]} in the alphabet?"),
            lambda t: _LETTERS[_LETTERS.index(t[0]) + (1 if t[1] == "after" else -1)], 2.0, 12),
        _combos_task("greetings", set(greet_items), (lambda t: t[0],), lambda t: t[1], 1.0, 6),
    ]
    # compare: hold out the unordered pair in both orders and both directions
    cmp = tasks[4]
    held = {(a, b, w) for a, b, _ in cmp.holdout_items for a, b in ((a, b), (b, a)) for w in ("bigger", "smaller")}
    tasks[4] = Task(cmp.name, cmp.items, cmp.phrasings, cmp.answer, cmp.weight, holdout_items=frozenset(held))
    return {t.name: t for t in tasks}


TASKS = _build_tasks()


def _heldout_pairs(task: Task) -> list[tuple[str, str]]:
    if task.holdout_combos:
        pairs = [(task.phrasings[k](item), task.answer(item)) for item, k in sorted(task.holdout_combos)]
    else:
        # one question per held-out item, phrasing chosen by a fixed rule, all phrasings covered
        pairs = [(task.phrasings[i % len(task.phrasings)](item), task.answer(item))
                 for i, item in enumerate(sorted(task.holdout_items))]
    return list(dict.fromkeys(pairs))


def tasks() -> dict[str, list[tuple[str, str]]]:
    """Held-out evaluation pairs: {task name: [(question, exact answer), ...]}; the same on every call."""
    return {name: _heldout_pairs(task) for name, task in TASKS.items()}


def render_turn(question: str, answer: str) -> str:
    """One ChatML user/assistant exchange, ending with a newline."""
    return f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n{answer}<|im_end|>\n"


def _sample_turn(task: Task, rng: random.Random, banned: set[str]) -> tuple[str, str]:
    while True:
        item = task.items[rng.randrange(len(task.items))]
        k = rng.randrange(len(task.phrasings))
        if item in task.holdout_items or (item, k) in task.holdout_combos:
            continue
        question = task.phrasings[k](item)
        if question not in banned:
            return question, task.answer(item)


@dataclass
class ChatSplit:
    """Result of :func:`make_split`: the training text, its dialogues as (question, answer) turns, and
    the held-out evaluation pairs (= :func:`tasks`)."""
    train_text: str
    dialogues: list
    heldout: dict


def make_split(seed: int, n: int) -> ChatSplit:
    """Generate ``n`` training dialogues (1-3 turns each) deterministically from ``seed``.

    No held-out question of :func:`tasks` ever appears as a user turn of the training text.

    Raises:
        ValueError: If n is not a non-negative integer.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    heldout = tasks()
    banned = {q for pairs in heldout.values() for q, _ in pairs}
    rng = random.Random(seed)
    names = list(TASKS)
    weights = [TASKS[name].weight for name in names]
    dialogues = []
    for _ in range(n):
        n_turns = rng.choice((1, 1, 2, 3))
        dialogues.append([_sample_turn(TASKS[rng.choices(names, weights)[0]], rng, banned)
                          for _ in range(n_turns)])
    text = "".join(render_turn(q, a) for turns in dialogues for q, a in turns)
    return ChatSplit(train_text=text, dialogues=dialogues, heldout=heldout)
