"""`petit serve` through the official `openai` client, against a real uvicorn server on a free loopback port: chat
and completions, streamed (with and without usage) and not, per-request sampling fields, models.list(); and the
command line end to end."""
import os
import signal
import subprocess
import sys
import threading

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

import petit  # noqa: E402
from petit.assets import default_model_path  # noqa: E402
from petit.server import Server  # noqa: E402
from petit.server.engine import ServerWorker  # noqa: E402
from petit.generation.session import Session  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHATML = "<|im_start|>user\nwhat is 3 plus 4?<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def server():
    server = Server(ServerWorker(default_model_path(), max_tokens=32), port=0).start()
    yield server
    server.stop()
    assert not any(t.name.startswith("petit-") and t.is_alive() for t in threading.enumerate())


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url, api_key="anything", max_retries=0, timeout=10) as client:
        yield client


@pytest.fixture(scope="module")
def prompt_len():
    session = Session(petit.load(default_model_path()))

    def count(text):
        return len(session.prompt_ids([{"role": "user", "content": text}]))
    return count


def user(text):
    return [{"role": "user", "content": text}]


def test_models_list_and_retrieve(client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["default-q8_0"]
    m = models.data[0]
    assert m.object == "model" and m.owned_by == "petit" and isinstance(m.created, int)
    assert client.models.retrieve("default-q8_0").id == "default-q8_0"
    with pytest.raises(openai.NotFoundError) as e:
        client.models.retrieve("gpt-4")
    assert e.value.code == "model_not_found"


def test_chat_answers_with_usage(client, prompt_len):
    r = client.chat.completions.create(model="default-q8_0", messages=user("what is 12 plus 7?"))
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-") and r.model == "default-q8_0"
    assert len(r.choices) == 1
    c = r.choices[0]
    assert (c.index, c.message.role, c.message.content, c.finish_reason) == (0, "assistant", "19", "stop")
    n = prompt_len("what is 12 plus 7?")
    # "19" is one token and <|im_end|> a second: the end token is generated, so it counts
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (n, 2, n + 2)
    assert isinstance(r.usage.prompt_tokens_details.cached_tokens, int)


def test_the_kv_cache_is_reused_across_requests(client, prompt_len):
    messages = user("what is 12 plus 7?")
    client.chat.completions.create(model="m", messages=messages)
    follow = messages + [{"role": "assistant", "content": "19"},
                         {"role": "user", "content": "which is bigger, 2 or 16?"}]
    r = client.chat.completions.create(model="m", messages=follow)
    assert r.choices[0].message.content == "16"
    # the first request's prompt and the reply token fed back ("19"; <|im_end|> was sampled, never fed) are reused
    assert r.usage.prompt_tokens_details.cached_tokens == prompt_len("what is 12 plus 7?") + 1


def test_chat_stream_without_usage(client):
    chunks = list(client.chat.completions.create(model="m", messages=user("count from 3 to 9"), stream=True))
    assert len({(c.id, c.created) for c in chunks}) == 1
    assert all(c.object == "chat.completion.chunk" and c.usage is None for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "3 4 5 6 7 8 9"
    assert [c.choices[0].finish_reason for c in chunks][-2:] == [None, "stop"]


def test_chat_stream_with_usage(client, prompt_len):
    chunks = list(client.chat.completions.create(model="m", messages=user("count from 3 to 9"), stream=True,
                                                 stream_options={"include_usage": True}))
    last = chunks[-1]
    assert last.choices == [] and last.usage.prompt_tokens == prompt_len("count from 3 to 9")
    assert last.usage.completion_tokens == 8        # "3", " 4", ..., " 9", <|im_end|>
    assert "".join(c.choices[0].delta.content or "" for c in chunks[:-1]) == "3 4 5 6 7 8 9"
    assert chunks[-2].choices[0].finish_reason == "stop"


def test_completions_have_no_template(client):
    r = client.completions.create(model="m", prompt=CHATML, max_tokens=8)
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert (r.choices[0].text, r.choices[0].finish_reason) == ("7", "stop")
    assert r.usage.completion_tokens == 2
    r2 = client.completions.create(model="m", prompt=[CHATML], max_tokens=8)
    assert r2.choices[0].text == "7"
    assert r2.usage.prompt_tokens_details.cached_tokens == r2.usage.prompt_tokens - 1    # all but the last token


def test_completions_stream_with_and_without_usage(client):
    chunks = list(client.completions.create(model="m", prompt=CHATML, max_tokens=8, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == "7"
    assert chunks[-1].choices[0].finish_reason == "stop" and chunks[-1].usage is None
    chunks = list(client.completions.create(model="m", prompt=CHATML, max_tokens=8, stream=True,
                                            stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 2


def test_request_fields_override_the_launch_defaults(client):
    r = client.chat.completions.create(model="m", messages=user("count from 3 to 9"), max_tokens=3)
    assert (r.choices[0].message.content, r.choices[0].finish_reason) == ("3 4 5", "length")
    r = client.chat.completions.create(model="m", messages=user("count from 3 to 9"), max_completion_tokens=2,
                                       max_tokens=50)
    assert r.choices[0].message.content == "3 4"
    r = client.chat.completions.create(model="m", messages=user("count from 3 to 9"), stop=[" 6", "x"])
    assert (r.choices[0].message.content, r.choices[0].finish_reason) == ("3 4 5", "stop")
    sampled = [client.chat.completions.create(model="m", messages=user("name a colour"), temperature=1.5, seed=s,
                                              extra_body={"top_k": 40, "min_p": 0.01}).choices[0].message.content
               for s in (7, 7)]
    assert sampled[0] == sampled[1]                 # same seed, same reply


def test_unknown_fields_and_client_extras_are_accepted(client):
    r = client.chat.completions.create(model="m", messages=[{"role": "developer", "content": "be brief"},
                                                            {"role": "user", "content": "what is 12 plus 7?"}],
                                       n=1, user="u1", parallel_tool_calls=False, metadata={"a": "b"},
                                       extra_body={"no_such_field": 1})
    assert r.choices[0].message.content


def test_a_prompt_longer_than_the_context_is_a_400(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=user("hello " * 200))
    assert e.value.code == "context_length_exceeded" and e.value.param == "messages"
    assert "maximum context length is 128 tokens" in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        list(client.chat.completions.create(model="m", messages=user("hello " * 200), stream=True))
    assert e.value.code == "context_length_exceeded"


def test_the_command_line_serves_until_interrupted(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, "-m", "petit.cli", "serve", "--port", "0", "-n", "8", "--stats",
                          "--log-requests"],
                         cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in p.stderr:                   # the banner names the port chosen
            lines.append(line)
            if "listening on" in line:
                break
        url = lines[-1].split("listening on ")[1].split()[0]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), lines
        with openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=10) as c:
            r = c.chat.completions.create(model="m", messages=user("what is 12 plus 7?"))
        assert r.choices[0].message.content == "19"
        after = sorted([p.stderr.readline(), p.stderr.readline()])         # --stats's line, --log-requests's
        assert after[0].startswith("petit serve: 127.0.0.1 POST /v1/chat/completions 200 ") and \
            after[0].endswith(" ms\n"), after
        assert after[1].startswith("petit serve: chat ["), after
        p.send_signal(signal.SIGINT)
        rest = p.communicate(timeout=10)[1]
        assert p.returncode == 0 and "petit serve: stopped" in rest
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()


def test_serve_takes_the_chat_options():
    from petit.cli.commands import build_parser
    from petit.cli.serve import cmd_serve
    args = build_parser().parse_args(["serve", "m.petit", "-t", "0.5", "--stop", "END", "--ctx", "64", "--port", "0",
                                      "--api-key", "k", "--max-queue", "2", "--allowed-host", "box", "--max-batch", "3",
                                      "--no-mmap"])
    assert args.func is cmd_serve
    assert (args.model_arg, args.temperature, args.stop, args.ctx, args.host, args.port) == \
           ("m.petit", 0.5, ["END"], 64, "127.0.0.1", 0)
    assert (args.api_key, args.max_queue, args.allowed_host, args.max_batch, args.mmap) == ("k", 2, ["box"], 3, False)
