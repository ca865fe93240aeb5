"""petit.generation's shared pieces: TextStream (the one place that turns Steps into text: detokenizer, then stop
strings) and the tokenizer protocol's one answer to "does a plain-text prompt start with BOS" (`adds_bos`), which
Session.complete, `petit run`, the server's completions and `petit chat`'s raw mode all use."""
from pathlib import Path

import pytest

import petit
from petit.generation import Params, Session, Step
from petit.generation.detokenize import TextStream

HF = Path(__file__).parent / "fixtures" / "hf"


@pytest.fixture(scope="module")
def tok():
    from petit.assets import default_model_path
    return petit.load(default_model_path()).tokenizer


def _texts(tok, ids, stops, last=None):
    stream, out = TextStream(tok, stops), []
    for i, t in enumerate(ids):
        step = Step(t, finish_reason=last if i == len(ids) - 1 else None)
        out.append((stream.fill(step), step.text, step.finish_reason))
    return out


def test_a_stop_string_split_across_tokens_is_never_shown(tok):
    ids = tok.encode("count 1 2 STOP 3 4")
    out = _texts(tok, ids, ["STOP"])
    hits = [i for i, (hit, _, _) in enumerate(out) if hit]
    assert len(hits) == 1 and out[hits[0]][2] == "stop"
    assert "".join(text for _, text, _ in out[:hits[0] + 1]) == "count 1 2 "
    assert len(tok.encode("STOP", add_bos=False)) > 1          # the stop string really spans several tokens


def test_text_held_back_for_a_stop_string_is_shown_when_the_reply_ends(tok):
    ids = tok.encode("the ax", add_bos=False)
    # the end-of-turn token ends the reply: its own text is not shown, the held-back "x" (it might begin "xyz") is
    out = _texts(tok, ids + [tok.token_to_id("<|im_end|>")], ["xyz"], last="stop")
    assert "".join(text for _, text, _ in out) == "the ax" and "<|im_end|>" not in out[-1][1]
    assert out[-3][1] == " a" and out[-2][1] == "" and out[-1][1] == "x"
    # the length cap flushes it too
    out = _texts(tok, ids, ["xyz"], last="length")
    assert "".join(text for _, text, _ in out) == "the ax" and out[-1][2] == "length"


def test_a_byte_level_tokenizer_that_adds_bos_starts_every_completion_with_it(tmp_path):
    import models
    from petit.tokenizer import Tokenizer
    d = models.byte_tokenizer(models.TINY["vocab_size"])
    d.update(bos_token="<|im_start|>", add_bos=True)
    models.write_model(tmp_path / "m.petit", tokenizer=d)
    model = petit.load(tmp_path / "m.petit")
    assert model.tokenizer.adds_bos is True and Tokenizer.from_dict({**d, "add_bos": False}).adds_bos is False
    steps = list(Session(model).complete("hello", Params(max_tokens=1)))
    assert steps[0].stats.prompt_tokens == len(model.tokenizer.encode("hello", add_bos=False)) + 1


def _folder_that_adds_bos(tmp_path, name="llama"):
    """The llama fixture with a tokenizer.json whose post-processor puts <s> before plain text, as Llama 2's does."""
    import json
    import shutil
    folder = tmp_path / name
    shutil.copytree(HF / name, folder)
    tj = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    bos = next(t["id"] for t in tj["added_tokens"] if t["content"] == "<s>")
    tj["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [bos], "tokens": ["<s>"]}}}
    (folder / "tokenizer.json").write_text(json.dumps(tj), encoding="utf-8")
    return folder


@pytest.mark.parametrize("adds", [True, False])
def test_a_hugging_face_completion_starts_as_hugging_face_encodes_plain_text(tmp_path, adds):
    model = petit.load(_folder_that_adds_bos(tmp_path) if adds else HF / "llama", weights="f32")
    tok = model.tokenizer
    assert tok.adds_bos is adds
    expected = tok.hf_encode("Hello world")                  # Hugging Face's encode(text): BOS as it adds it, or none
    assert (expected[0] == tok.bos_id) is adds
    session = Session(model)
    steps = list(session.complete("Hello world", Params(max_tokens=1)))
    assert steps[0].stats.prompt_tokens == len(expected) and session._cached[:len(expected)] == expected


def test_petit_chat_raw_mode_and_petit_run_start_with_the_bos_the_tokenizer_adds(tmp_path):
    import subprocess
    import sys

    import models
    d = models.byte_tokenizer(models.TINY["vocab_size"])
    d.update(bos_token="<|im_start|>", add_bos=True)
    models.write_model(tmp_path / "m.petit", tokenizer=d)          # no chat template: `petit chat` is raw mode
    n = len(petit.load(tmp_path / "m.petit").tokenizer.encode("hello", add_bos=False)) + 1
    chat = subprocess.run([sys.executable, "-m", "petit.cli", "chat", str(tmp_path / "m.petit"), "--greedy", "-n", "2",
                           "--stats"], input="hello\n", capture_output=True, text=True, timeout=120)
    assert chat.returncode == 0, chat.stderr
    assert f"[{n} prompt tokens (0 reused), " in chat.stderr
    run = subprocess.run([sys.executable, "-m", "petit.cli", "run", str(tmp_path / "m.petit"), "--greedy", "-n", "2",
                          "-p", "hello"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert f"[{n} prompt tokens, " in run.stderr
