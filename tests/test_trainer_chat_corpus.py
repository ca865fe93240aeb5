"""The generated ChatML corpus: determinism, format, correct answers, and held-out questions kept out."""

import re

import pytest

from trainer.chat_corpus import (
    CHAT_TEMPLATE, COLOURS, GREETINGS, OPPOSITES, SPECIAL_TOKENS, TASKS, make_split, render_turn, tasks,
)

TURN_RE = re.compile(r"<\|im_start\|>user\n(.*?)<\|im_end\|>\n<\|im_start\|>assistant\n(.*?)<\|im_end\|>\n", re.S)


@pytest.fixture(scope="module")
def split():
    return make_split(seed=3, n=4000)


def test_deterministic_for_a_seed(split):
    assert make_split(seed=3, n=4000).train_text == split.train_text
    assert make_split(seed=4, n=4000).train_text != split.train_text
    assert tasks() == tasks() == split.heldout


def test_chatml_format(split):
    turns = TURN_RE.findall(split.train_text)
    assert "".join(render_turn(q, a) for q, a in turns) == split.train_text, "text outside the ChatML turns"
    assert turns == [t for d in split.dialogues for t in d]
    assert len(split.dialogues) == 4000 and all(1 <= len(d) <= 3 for d in split.dialogues)
    assert SPECIAL_TOKENS == ["<|im_start|>", "<|im_end|>"]
    expected = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
    assert render_turn("hi", "Hello!") == expected


def test_heldout_questions_never_in_training_text(split):
    held = [(q, a) for pairs in split.heldout.values() for q, a in pairs]
    assert len(held) >= 150
    for q, _ in held:
        assert f"<|im_start|>user\n{q}<|im_end|>" not in split.train_text, f"held-out question leaked: {q!r}"
    train_questions = {q for d in split.dialogues for q, _ in d}
    assert not train_questions & {q for q, _ in held}


def test_heldout_operand_pairs_absent_in_every_phrasing(split):
    pairs = set()
    for q, _ in split.heldout["addition"]:
        a, b = map(int, re.findall(r"\d+", q))
        pairs.add((a, b))
    for q, _ in (t for d in split.dialogues for t in d):
        nums = tuple(map(int, re.findall(r"\d+", q)))
        if ("+" in q or "plus" in q or q.startswith("add ")) and len(nums) == 2:
            assert nums not in pairs, f"held-out addition pair {nums} in training question {q!r}"


def _check_answer(question, a):
    q = question.lower()
    nums = list(map(int, re.findall(r"\d+", q)))
    if "+" in q or "plus" in q or q.startswith("add "):
        return a == str(nums[0] + nums[1])
    if "subtract" in q:
        return a == str(nums[1] - nums[0])
    if "-" in q or "minus" in q:
        return a == str(nums[0] - nums[1])
    if "count" in q or "list the numbers" in q:
        return a == " ".join(map(str, range(nums[0], nums[1] + 1)))
    if "bigger" in q:
        return a == str(max(nums))
    if "smaller" in q:
        return a == str(min(nums))
    if "backwards" in q or "reverse the word" in q:
        word = re.search(r"(?:spell|reverse the word|what is) \"?(\w+)", q).group(1)
        return a == word[::-1]
    letter = re.search(r"\b(after|before) ([A-Z])\b", question)
    if letter:
        return ord(a) == ord(letter.group(2)) + (1 if letter.group(1) == "after" else -1)
    colour = re.search(r"(?:colou?r is|colou?r of) (.+?)[?.]$", q)
    if colour:
        return (colour.group(1), a) in COLOURS
    opposite = re.search(r"opposite of \"?(\w+)", q)
    if opposite:
        return (opposite.group(1), a) in OPPOSITES
    return question in GREETINGS.get(a, ())


def test_answers_are_correct(split):
    for q, a in [t for d in split.dialogues for t in d] + [p for ps in split.heldout.values() for p in ps]:
        assert _check_answer(q, a), f"wrong answer {a!r} for {q!r}"


def test_every_task_has_heldout_pairs_and_several_phrasings():
    heldout = tasks()
    assert set(heldout) == {"addition", "subtraction", "counting", "reverse", "compare", "colours", "opposites",
                            "alphabet", "greetings"}
    for name, pairs in heldout.items():
        assert pairs and all(isinstance(q, str) and isinstance(a, str) and q and a for q, a in pairs), name
        assert len(set(pairs)) == len(pairs)
        if name != "greetings":
            assert len(TASKS[name].phrasings) >= 3, name
    assert all(int(x) < 50 for q, _ in heldout["addition"] for x in re.findall(r"\d+", q))


def test_chat_template_is_chatml():
    assert "<|im_start|>" in CHAT_TEMPLATE and "add_generation_prompt" in CHAT_TEMPLATE


@pytest.mark.parametrize("n", [-1, 1.5, True])
def test_make_split_rejects_bad_n(n):
    with pytest.raises(ValueError, match="n must be a non-negative integer"):
        make_split(0, n)


def test_corpus_is_identical_under_any_string_hash_seed():
    # the recipe of the bundled model must rebuild it exactly: no set iteration order may leak into the corpus
    import subprocess
    import sys
    code = ("import hashlib; from trainer.chat_corpus import make_split; "
            "print(hashlib.sha256(make_split(1337, 2000).train_text.encode()).hexdigest())")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**__import__("os").environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outs) == 1
