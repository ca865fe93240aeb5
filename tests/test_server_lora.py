"""`petit serve --lora FILE [--lora-scale S]` (issue 33): the server's model runs the adapter, as `petit chat --lora`
does, and answers as the model with the adapter merged in (petit.loading.lora.merge, the run-time adapter's
reference); the flags are checked before the server listens."""
import os

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

import petit  # noqa: E402
from petit.cli.commands import build_parser, main  # noqa: E402
from petit.cli.serve import prepare_model  # noqa: E402
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


def _answers(prepare):
    server = Server(ServerWorker(QWEN2, weights="f32", max_tokens=12, prepare=prepare), port=0).start()
    try:
        return [httpx.post(f"{server.url}/completions", json={"model": "m", "prompt": p, "temperature": 0,
                                                               "max_tokens": 12}, timeout=120).json()
                ["choices"][0]["text"] for p in PROMPTS]
    finally:
        server.stop()


def test_served_adapter_answers_as_the_merged_model(adapter):
    args = build_parser().parse_args(["serve", QWEN2, "--lora", adapter, "--lora-scale", "1.5"])
    served = _answers(prepare_model(args))
    assert served == _answers(lambda model: merge(model, adapter, 1.5))
    assert served != _answers(None)                      # and not as the base without it


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
        Server(ServerWorker(llama, max_tokens=8, prepare=prepare_model(args)), port=0).start()
