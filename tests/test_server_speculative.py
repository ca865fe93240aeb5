"""Speculative decoding in `petit serve` (issue 32): `--draft MODEL` / `--draft self:TYPE` loaded once beside the
model, `--lookup`, and a request's own `speculative` field. Concurrent greedy requests answer what the plain server
answers, the timings count the drafts, and wrong values are 400s naming the field."""
import threading

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from petit.assets import default_model_path  # noqa: E402
from petit.cli import main  # noqa: E402
from petit.server import Server  # noqa: E402
from petit.server.engine import ServerWorker  # noqa: E402
from test_cli_chat import ANSWERS, QUESTIONS  # noqa: E402

MODEL = default_model_path()
SPEC_TIMINGS = {"draft_n", "draft_n_accepted", "tokens_per_pass"}


def error(message, param, code="invalid_value"):
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def body(question, **extra):
    return {"model": "m", "messages": [{"role": "user", "content": question}], "temperature": 0, "max_tokens": 24,
            **extra}


def ask_all(url, questions, **extra):
    """Every question at once (they share the engine's steps); the JSON replies in order."""
    out = [None] * len(questions)

    def ask(i, q):
        out[i] = httpx.post(f"{url}/chat/completions", json=body(q, **extra), timeout=120).json()
    threads = [threading.Thread(target=ask, args=(i, q)) for i, q in enumerate(questions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def serve(**kw):
    return Server(ServerWorker(MODEL, max_tokens=24, **kw), port=0).start()


@pytest.fixture(scope="module")
def self_draft():
    server = serve(draft="self:q4_0", draft_max=4)
    yield server
    server.stop()
    assert not any(t.name.startswith("petit-") and t.is_alive() for t in threading.enumerate())


@pytest.fixture(scope="module")
def plain():
    server = serve()
    yield server
    server.stop()


def test_a_self_draft_answers_concurrent_requests_as_plain_and_counts_its_drafts(self_draft):
    out = ask_all(self_draft.url, QUESTIONS)
    assert [r["choices"][0]["message"]["content"] for r in out] == ANSWERS
    assert all(SPEC_TIMINGS <= set(r["timings"]) for r in out)
    drafted = sum(r["timings"]["draft_n"] for r in out)
    accepted = sum(r["timings"]["draft_n_accepted"] for r in out)
    assert drafted > 0 and 0 < accepted <= drafted
    for r in out:                # tokens per target pass: the reply's tokens over its passes (prompt included)
        t = r["timings"]
        assert t["tokens_per_pass"] > 0 and t["draft_n_accepted"] <= t["draft_n"]
    assert self_draft.engine.draft_model.weight_type == "q4_0"


def test_a_request_chooses_lookup_or_none_on_a_draft_model_server(self_draft):
    out = ask_all(self_draft.url, QUESTIONS[:4], speculative={"draft": "lookup", "draft_max": 2})
    assert [r["choices"][0]["message"]["content"] for r in out] == ANSWERS[:4]
    assert all(SPEC_TIMINGS <= set(r["timings"]) for r in out)
    out = ask_all(self_draft.url, QUESTIONS[:4], speculative={"draft": "none"})
    assert [r["choices"][0]["message"]["content"] for r in out] == ANSWERS[:4]
    assert all(not SPEC_TIMINGS & set(r["timings"]) for r in out)


def test_a_draft_model_with_its_own_cache_answers_as_plain():
    """A separate draft file (here the bundled model itself: every draft is accepted) keeps a draft KV cache per
    session; its passes are batched on the engine's thread."""
    server = serve(draft=MODEL)
    try:
        out = ask_all(server.url, QUESTIONS)
        assert [r["choices"][0]["message"]["content"] for r in out] == ANSWERS
        t = [r["timings"] for r in out]
        assert all(x["draft_n_accepted"] == x["draft_n"] for x in t) and sum(x["draft_n"] for x in t) > 0
        # the same conversation again: the draft cache rewinds to what it shares and the answers stay
        assert [r["choices"][0]["message"]["content"] for r in ask_all(server.url, QUESTIONS[:3])] == ANSWERS[:3]
    finally:
        server.stop()


def test_a_plain_server_speculates_per_request_with_lookup(plain):
    r = httpx.post(f"{plain.url}/chat/completions", timeout=60,
                   json=body("count from 1 to 9", speculative={"draft": "lookup", "draft_max": 3, "draft_min": 1}))
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "1 2 3 4 5 6 7 8 9"
    t = r.json()["timings"]
    assert SPEC_TIMINGS <= set(t) and t["draft_n"] > 0
    r = httpx.post(f"{plain.url}/chat/completions", json=body("count from 1 to 9"), timeout=60)
    assert not SPEC_TIMINGS & set(r.json()["timings"])


@pytest.mark.parametrize("value, expected", [
    ({"draft": "model"}, error("Invalid value for 'speculative.draft': this server has no draft model (start it with "
                               "--draft MODEL or --draft self:TYPE), so 'model' is not available.",
                               "speculative.draft")),
    ({"draft": "ngram"}, error("Invalid value for 'speculative.draft': expected one of 'lookup', 'model', 'none', "
                               "got 'ngram'.", "speculative.draft")),
    ({"draft": 1}, error("Invalid type for 'speculative.draft': expected a string, but got an integer instead.",
                         "speculative.draft", "invalid_type")),
    ({"draft_max": 0}, error("Invalid 'speculative.draft_max': integer below minimum value. Expected a value >= 1, "
                             "but got 0 instead.", "speculative.draft_max", "integer_below_min_value")),
    ({"draft_max": 65}, error("Invalid 'speculative.draft_max': integer above maximum value. Expected a value <= "
                              "64, but got 65 instead.", "speculative.draft_max", "integer_above_max_value")),
    ({"draft_max": 2.5}, error("Invalid type for 'speculative.draft_max': expected an integer, but got a number "
                               "instead.", "speculative.draft_max", "invalid_type")),
    ({"draft_min": 5, "draft_max": 2}, error("Invalid value for 'speculative.draft_min': draft_min (5) is above "
                                             "draft_max (2).", "speculative.draft_min")),
    ({"draft_min": 9}, error("Invalid value for 'speculative.draft_min': draft_min (9) is above draft_max (8).",
                             "speculative.draft_min")),
    ({"drafts": 3}, error("Invalid value for 'speculative': unknown field 'drafts' (the fields are draft, draft_max, "
                          "draft_min).", "speculative")),
    ("lookup", error("Invalid type for 'speculative': expected an object, but got a string instead.", "speculative",
                     "invalid_type")),
])
def test_bad_speculative_fields_are_400s(plain, value, expected):
    r = httpx.post(f"{plain.url}/chat/completions", json=body("hi", speculative=value), timeout=30)
    assert (r.status_code, r.json()) == (400, expected)
    r = httpx.post(f"{plain.url}/completions", json={"model": "m", "prompt": "hi", "speculative": value}, timeout=30)
    assert (r.status_code, r.json()) == (400, expected)


def test_cli_serve_refuses_a_bad_draft_flag(capsys):
    assert main(["serve", "--draft", "self:q3", "--port", "0"]) == 2
    assert "--draft self:q3: the weight type after self: must be one of" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["serve", "--draft", "m.petit", "--lookup"])
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_a_draft_of_another_vocabulary_stops_the_server_with_the_reason():
    with pytest.raises(RuntimeError, match="the draft model's vocabulary .* does not match the target's"):
        serve(draft="tests/fixtures/hf/llama")


def root(server):
    return server.url.removesuffix("/v1")


def test_the_ollama_routes_take_the_speculative_field_and_count_the_drafts(plain):
    """Ollama's /api/chat and /api/generate read Petit's `speculative` field (top level, beside `options`): the same
    greedy text as without it, and the last line counts the drafts; a bad value is Ollama's {"error": ...} 400."""
    ask = {"model": plain.model_id, "messages": [{"role": "user", "content": "count from 1 to 9"}], "stream": False,
           "options": {"temperature": 0, "num_predict": 24}}
    spec = {"draft": "lookup", "draft_max": 3, "draft_min": 1}
    r = httpx.post(f"{root(plain)}/api/chat", json={**ask, "speculative": spec}, timeout=60)
    assert r.status_code == 200 and r.json()["message"]["content"] == "1 2 3 4 5 6 7 8 9"
    assert r.json()["draft_n"] > 0 and 0 <= r.json()["draft_n_accepted"] <= r.json()["draft_n"]
    r = httpx.post(f"{root(plain)}/api/chat", json=ask, timeout=60)
    assert r.json()["message"]["content"] == "1 2 3 4 5 6 7 8 9" and "draft_n" not in r.json()
    r = httpx.post(f"{root(plain)}/api/generate", timeout=60,
                   json={"model": plain.model_id, "prompt": "count from 1 to 9", "stream": False,
                         "options": {"temperature": 0, "num_predict": 24}, "speculative": spec})
    assert r.status_code == 200 and r.json()["response"] == "1 2 3 4 5 6 7 8 9" and r.json()["draft_n"] > 0
    r = httpx.post(f"{root(plain)}/api/chat", json={**ask, "speculative": {"draft": "model"}}, timeout=30)
    assert (r.status_code, r.json()) == (400, {"error": "Invalid value for 'speculative.draft': this server has no "
                                                        "draft model (start it with --draft MODEL or --draft "
                                                        "self:TYPE), so 'model' is not available."})
