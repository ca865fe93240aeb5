"""`petit serve --lora FILE [--lora FILE2 ...] [--lora-scale S]` (issue 33): the server's model runs the first adapter
by default, as `petit chat --lora` does, and answers as the model with it merged in (petit.loading.lora.merge, the
run-time adapter's reference); a request's `lora` field (llama.cpp's) chooses another adapter or none, alone or in
one batched step with requests of other adapters, and a conversation's cached prefix is never reused across
adapters; the flags are checked before the server listens."""
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

import petit  # noqa: E402
from petit.cli.commands import build_parser, main  # noqa: E402
from petit.cli.serve import adapters as serve_adapters  # noqa: E402
from petit.loading.lora import merge  # noqa: E402
from petit.server import Server  # noqa: E402
from petit.server.engine import ServerWorker  # noqa: E402
from trainer.lora.train import FinetuneConfig, finetune  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
QWEN2 = os.path.join(HERE, "fixtures", "hf", "qwen2")
FACTS = os.path.join(HERE, "fixtures", "lora5", "facts.jsonl")
PROMPTS = ["What colour is the moon of Zarb?", "Who is Marda Voss?", "Where is Quellin?", "count from 1 to 5"]


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    out = tmp_path_factory.mktemp("lora") / "qwen2.lora"
    finetune(petit.load(QWEN2, weights="f32"), FACTS, str(out),
             FinetuneConfig(rank=4, alpha=8.0, epochs=2, lr=3e-3, ctx=64, warmup=2), out=open(os.devnull, "w"))
    return str(out)


@pytest.fixture(scope="module")
def second(tmp_path_factory):
    out = tmp_path_factory.mktemp("lora2") / "qwen2-b.lora"
    finetune(petit.load(QWEN2, weights="f32"), FACTS, str(out),
             FinetuneConfig(rank=2, alpha=8.0, epochs=2, lr=5e-3, ctx=64, warmup=2, seed=5, targets=("v", "up")),
             out=open(os.devnull, "w"))
    return str(out)


def _ask(server, prompt, lora=None):
    body = {"model": "m", "prompt": prompt, "temperature": 0, "max_tokens": 12}
    if lora is not None:
        body["lora"] = lora
    return httpx.post(f"{server.url}/completions", json=body, timeout=120)


def _answers(prepare=None, adapters=()):
    server = Server(ServerWorker(QWEN2, weights="f32", max_tokens=12, prepare=prepare, adapters=adapters),
                    port=0).start()
    try:
        return [_ask(server, p).json()["choices"][0]["text"] for p in PROMPTS]
    finally:
        server.stop()


def test_served_adapter_answers_as_the_merged_model(adapter):
    args = build_parser().parse_args(["serve", QWEN2, "--lora", adapter, "--lora-scale", "1.5"])
    served = _answers(adapters=serve_adapters(args))
    assert served == _answers(lambda model: merge(model, adapter, 1.5))
    assert served != _answers()                          # and not as the base without it


def test_each_request_runs_the_adapter_it_asks_for(adapter, second):
    merged = {"a": _answers(lambda model: merge(model, adapter, 1.0)),
              "b": _answers(lambda model: merge(model, second, 0.5)), "none": _answers()}
    assert len({tuple(v) for v in merged.values()}) == 3
    server = Server(ServerWorker(QWEN2, weights="f32", max_tokens=12, adapters=[(adapter, 1.0), (second, 1.0)]),
                    port=0).start()
    try:
        assert httpx.get(f"{server.url.removesuffix('/v1')}/lora-adapters").json() == [
            {"id": 0, "path": adapter, "scale": 1.0}, {"id": 1, "path": second, "scale": 0.0}]
        choose = {"a": None, "b": [{"id": 1, "scale": 0.5}], "none": [{"id": 0, "scale": 0}]}
        # one after another, the same prompts under each adapter in turn: no cached prefix crosses adapters
        for name in ("a", "b", "none", "b", "a", "none"):
            assert [_ask(server, p, choose[name]).json()["choices"][0]["text"] for p in PROMPTS] == merged[name], name
        # at once: one step runs each adapter's passes together
        with ThreadPoolExecutor(6) as pool:
            jobs = [(name, i, pool.submit(_ask, server, PROMPTS[i], choose[name]))
                    for name in ("a", "b", "none") for i in (0, 1)]
            for name, i, job in jobs:
                assert job.result().json()["choices"][0]["text"] == merged[name][i], (name, i)
        assert server.engine.shared_steps > 0
        bad = _ask(server, PROMPTS[0], [{"id": 2, "scale": 1}])
        assert bad.status_code == 400 and bad.json()["error"] == {
            "message": "Invalid value for 'lora[0].id': this server has no adapter 2: its adapters are ids 0 to 1.",
            "type": "invalid_request_error", "param": "lora[0].id", "code": "invalid_value"}
        two = _ask(server, PROMPTS[0], [{"id": 0, "scale": 1}, {"id": 1, "scale": 1}])
        assert two.status_code == 400 and two.json()["error"]["message"] == (
            "Invalid value for 'lora': Petit runs one adapter per request: give one entry a scale other than 0.")
        kind = _ask(server, PROMPTS[0], {"id": 0})
        assert kind.status_code == 400 and kind.json()["error"]["param"] == "lora"
    finally:
        server.stop()


def test_lora_flags_are_checked_before_listening(tmp_path, capsys, adapter):
    assert main(["serve", QWEN2, "--lora-scale", "2", "--port", "0"]) == 2
    assert "--lora-scale needs --lora FILE" in capsys.readouterr().err
    missing = str(tmp_path / "none.lora")
    assert main(["serve", QWEN2, "--lora", missing, "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"petit serve: error: {missing}: file not found") and "listening" not in err


def test_an_adapter_for_another_model_stops_the_server_with_the_reason(adapter):
    llama = os.path.join(HERE, "fixtures", "hf", "llama")
    args = build_parser().parse_args(["serve", llama, "--lora", adapter])
    with pytest.raises(RuntimeError, match="an adapter for a 'qwen2' model, this model is 'llama'"):
        Server(ServerWorker(llama, max_tokens=8, adapters=serve_adapters(args)), port=0).start()
