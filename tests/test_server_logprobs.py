"""`logprobs` / `top_logprobs` and `logit_bias` on a real `petit serve` with the bundled model: the values are the
log-softmax of the engine's own logits (after the bias), in OpenAI's chat shape and the legacy completions shape,
streamed and not, through the `openai` client and raw HTTP; a banned token never appears, a forced one always does;
bad values are 400s naming the field."""
import json
import threading

import numpy as np
import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

import petit  # noqa: E402
from petit.assets import default_model_path  # noqa: E402
from petit.generation.session import Session  # noqa: E402
from petit.server import Server  # noqa: E402
from petit.server.engine import ServerWorker  # noqa: E402

MODEL = default_model_path()
CHATML = "<|im_start|>user\nwhat is 3 plus 4?<|im_end|>\n<|im_start|>assistant\n"
# the server decodes token by token, the reference prefills the whole text at once (both into an int8 KV cache):
# equal here to the last bit, the margin leaves room for a kernel that sums a prefill's rows in another order
TOL = 1e-4


@pytest.fixture(scope="module")
def server():
    server = Server(ServerWorker(MODEL, max_tokens=16), port=0).start()
    yield server
    server.stop()
    assert not any(t.name.startswith("petit-") and t.is_alive() for t in threading.enumerate())


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=30) as client:
        yield client


@pytest.fixture
def http(server):
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


@pytest.fixture(scope="module")
def model():
    return petit.load(MODEL)


def log_softmax_rows(model, ids, bias=None):
    """The engine's log-probabilities of each next token after ids[:i+1], the bias added to the logits."""
    cache = model.new_cache(model.context_length, "int8")
    logits = np.asarray(model.forward(ids, cache, all_logits=True), dtype=np.float64)[:, :model.tokenizer.vocab_size]
    for token, value in (bias or {}).items():
        logits[:, token] = -np.inf if value == -100 else logits[:, token] + value
    top = logits.max(axis=1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))


def chat_ids(model, text):
    return Session(model).prompt_ids([{"role": "user", "content": text}])


def expected_chat(model, prompt_ids, reply_ids, top, bias=None):
    """For each reply token: (its logprob, the top alternatives as (id, logprob)), from the engine's logits."""
    rows = log_softmax_rows(model, prompt_ids + reply_ids, bias)
    out = []
    for i, token in enumerate(reply_ids):
        row = rows[len(prompt_ids) - 1 + i]
        order = sorted(range(row.size), key=lambda t: (-row[t], t))[:top]
        out.append((row[token], [(t, row[t]) for t in order]))
    return out


def test_chat_logprobs_are_the_engines_log_softmax(client, model):
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "count from 3 to 9"}],
                                       logprobs=True, top_logprobs=3)
    c = r.choices[0]
    assert c.message.content == "3 4 5 6 7 8 9" and c.finish_reason == "stop"
    content = c.logprobs.content
    tok = model.tokenizer
    reply = [tok.encode(e.token) for e in content]
    assert "".join(e.token for e in content) == c.message.content       # the end token is not reported
    assert all(len(ids) == 1 for ids in reply)
    expected = expected_chat(model, chat_ids(model, "count from 3 to 9"), [ids[0] for ids in reply], 3)
    for entry, (logprob, top) in zip(content, expected):
        assert entry.bytes == list(entry.token.encode())
        assert entry.logprob == pytest.approx(logprob, abs=TOL)
        assert len(entry.top_logprobs) == 3
        assert [tok.encode(a.token) for a in entry.top_logprobs] == [[t] for t, _ in top]
        assert [a.logprob for a in entry.top_logprobs] == pytest.approx([lp for _, lp in top], abs=TOL)
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob >= entry.top_logprobs[2].logprob
        assert all(a.bytes == list(a.token.encode()) for a in entry.top_logprobs)


def test_chat_logprobs_without_alternatives_and_off(http):
    body = {"model": "m", "messages": [{"role": "user", "content": "what is 12 plus 7?"}], "logprobs": True}
    choice = http.post("/chat/completions", json=body).json()["choices"][0]
    assert choice["message"]["content"] == "19"
    (entry,) = choice["logprobs"]["content"]
    assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"}
    assert (entry["token"], entry["bytes"], entry["top_logprobs"]) == ("19", [49, 57], [])
    assert choice["logprobs"]["refusal"] is None
    assert http.post("/chat/completions", json={**body, "logprobs": False}).json()["choices"][0]["logprobs"] is None


def test_streamed_chat_logprobs_ride_with_their_text(client, model):
    chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "count from 3 to 9"}],
                                                 logprobs=True, top_logprobs=1, stream=True))
    pieces = [(c.choices[0].delta.content, c.choices[0].logprobs) for c in chunks if c.choices]
    assert pieces[0] == ("", None)                                   # the role chunk
    texts = [(text, [e.token for e in lp.content]) for text, lp in pieces[1:-1]]
    assert texts == [("3", ["3"]), (" 4", [" 4"]), (" 5", [" 5"]), (" 6", [" 6"]), (" 7", [" 7"]), (" 8", [" 8"]),
                     (" 9", [" 9"])]
    assert pieces[-1] == (None, None) and chunks[-1].choices[0].finish_reason == "stop"
    whole = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "count from 3 to 9"}],
                                           logprobs=True, top_logprobs=1)
    streamed = [e.logprob for _, lp in pieces[1:-1] for e in lp.content]
    assert streamed == pytest.approx([e.logprob for e in whole.choices[0].logprobs.content], abs=1e-9)


def test_completion_logprobs_have_the_legacy_shape(http, model):
    r = http.post("/completions", json={"model": "m", "prompt": "<|im_start|>user\ncount from 3 to 9<|im_end|>\n"
                                                                 "<|im_start|>assistant\n", "logprobs": 2}).json()
    choice = r["choices"][0]
    assert choice["text"] == "3 4 5 6 7 8 9"
    lp = choice["logprobs"]
    assert set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
    assert lp["tokens"] == ["3", " 4", " 5", " 6", " 7", " 8", " 9"]
    assert lp["text_offset"] == [0, 1, 3, 5, 7, 9, 11]
    tok = model.tokenizer
    prompt = tok.encode("<|im_start|>user\ncount from 3 to 9<|im_end|>\n<|im_start|>assistant\n")
    expected = expected_chat(model, prompt, [tok.encode(t)[0] for t in lp["tokens"]], 2)
    assert lp["token_logprobs"] == pytest.approx([e[0] for e in expected], abs=TOL)
    for alternatives, (_, top) in zip(lp["top_logprobs"], expected):
        assert list(alternatives) == [tok.decode([t]) for t, _ in top]
        assert list(alternatives.values()) == pytest.approx([v for _, v in top], abs=TOL)


def test_streamed_completion_logprobs_continue_the_offsets(http):
    body = {"model": "m", "prompt": "<|im_start|>user\ncount from 3 to 9<|im_end|>\n<|im_start|>assistant\n",
            "logprobs": 0, "stream": True}
    with http.stream("POST", "/completions", json=body) as s:
        events = [json.loads(line[6:]) for line in s.iter_lines() if line.startswith("data: {")]
    parts = [e["choices"][0]["logprobs"] for e in events[:-1]]
    assert [p["tokens"] for p in parts] == [["3"], [" 4"], [" 5"], [" 6"], [" 7"], [" 8"], [" 9"]]
    assert [p["text_offset"] for p in parts] == [[0], [1], [3], [5], [7], [9], [11]]
    assert [p["top_logprobs"] for p in parts] == [[{}]] * 7
    assert events[-1]["choices"][0] == {"text": "", "index": 0, "logprobs": None, "finish_reason": "stop"}


def test_the_logprobs_are_those_after_the_bias(http, model):
    tok = model.tokenizer
    nineteen, twenty = tok.encode("19")[0], tok.encode("20")[0]
    bias = {nineteen: -100, twenty: 3.5}
    body = {"model": "m", "messages": [{"role": "user", "content": "what is 12 plus 7?"}], "logprobs": True,
            "top_logprobs": 2, "max_tokens": 1, "logit_bias": {str(k): v for k, v in bias.items()}}
    (entry,) = http.post("/chat/completions", json=body).json()["choices"][0]["logprobs"]["content"]
    assert entry["token"] == "20"
    row = log_softmax_rows(model, chat_ids(model, "what is 12 plus 7?"), bias)[-1]
    assert entry["logprob"] == pytest.approx(row[twenty], abs=TOL)
    assert "19" not in [a["token"] for a in entry["top_logprobs"]]          # banned: not even an alternative


def test_a_banned_token_never_appears_and_a_forced_one_is_chosen(client, model):
    tok = model.tokenizer
    messages = [{"role": "user", "content": "count from 3 to 9"}]
    banned = [tok.encode(t)[0] for t in (" 4", " 5", " 6")]
    for seed in (1, 2, 3):
        r = client.chat.completions.create(model="m", messages=messages, temperature=1.5, seed=seed, max_tokens=12,
                                           logit_bias={str(t): -100 for t in banned}, logprobs=True)
        ids = [tok.encode(e.token) for e in r.choices[0].logprobs.content]
        assert not any(i in banned for piece in ids for i in piece), r.choices[0].message.content
    x = tok.encode("x")[0]
    for seed in (1, 2):
        r = client.chat.completions.create(model="m", messages=messages, temperature=2.0, seed=seed, max_tokens=4,
                                           logit_bias={str(x): 100})
        assert (r.choices[0].message.content, r.choices[0].finish_reason) == ("xxxx", "length")


def error(message, param, code="invalid_value"):
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


@pytest.mark.parametrize("fields, expected", [
    ({"top_logprobs": 2}, error("Invalid value for 'top_logprobs': 'logprobs' must be set to true when "
                                "'top_logprobs' is given.", "top_logprobs")),
    ({"logprobs": True, "top_logprobs": 21},
     error("Invalid 'top_logprobs': integer above maximum value. Expected a value <= 20, but got 21 instead.",
           "top_logprobs", "integer_above_max_value")),
    ({"logprobs": True, "top_logprobs": -1},
     error("Invalid 'top_logprobs': integer below minimum value. Expected a value >= 0, but got -1 instead.",
           "top_logprobs", "integer_below_min_value")),
    ({"logprobs": 1}, error("Invalid type for 'logprobs': expected a boolean, but got an integer instead.",
                            "logprobs", "invalid_type")),
    ({"logit_bias": {"abc": 1}}, error("Invalid key in 'logit_bias': abc. You should only be submitting "
                                       "non-negative integers.", "logit_bias")),
    ({"logit_bias": {"-3": 1}}, error("Invalid key in 'logit_bias': -3. You should only be submitting "
                                      "non-negative integers.", "logit_bias")),
    ({"logit_bias": {"5": 101}}, error("Invalid value for 'logit_bias': the bias of token 5 is 101; it must be "
                                       "between -100 and 100.", "logit_bias")),
    ({"logit_bias": {"5": "high"}}, error("Invalid type for 'logit_bias.5': expected a number, but got a string "
                                          "instead.", "logit_bias.5", "invalid_type")),
    ({"logit_bias": [5]}, error("Invalid type for 'logit_bias': expected an object, but got an array instead.",
                                "logit_bias", "invalid_type")),
    ({"logit_bias": {"512": 1}}, error("Invalid key in 'logit_bias': 512 is not a token id of this model (its "
                                       "vocabulary has 512 tokens, 0 to 511).", "logit_bias")),
])
def test_bad_logprobs_and_bias_fields_are_400s(http, fields, expected):
    r = http.post("/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields})
    assert (r.status_code, r.json()) == (400, expected)


@pytest.mark.parametrize("value, expected", [
    (6, error("Invalid 'logprobs': integer above maximum value. Expected a value <= 5, but got 6 instead.",
              "logprobs", "integer_above_max_value")),
    (True, error("Invalid type for 'logprobs': expected an integer, but got a boolean instead.", "logprobs",
                 "invalid_type")),
])
def test_bad_completion_logprobs_are_400s(http, value, expected):
    r = http.post("/completions", json={"model": "m", "prompt": CHATML, "logprobs": value})
    assert (r.status_code, r.json()) == (400, expected)


def test_the_openai_client_reads_completion_logprobs(client):
    r = client.completions.create(model="m", prompt=CHATML, max_tokens=8, logprobs=2)
    lp = r.choices[0].logprobs
    assert (r.choices[0].text, lp.tokens, lp.text_offset) == ("7", ["7"], [0])
    assert list(lp.top_logprobs[0]) == ["7", "6"] and lp.token_logprobs[0] == lp.top_logprobs[0]["7"]
    chunks = list(client.completions.create(model="m", prompt=CHATML, max_tokens=8, logprobs=1, stream=True))
    assert [c.choices[0].logprobs.tokens for c in chunks if c.choices[0].logprobs] == [["7"]]
