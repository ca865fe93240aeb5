"""The OpenAI-compatible server with a mixture-of-experts model (tests/fixtures/hf_moe) or a state-space one
(tests/fixtures/hf_ssm), exactly as with a dense one: replies streamed and not, the same greedy text both ways, and
the cache of an earlier turn reused (a recurrent state from the snapshot at the end of the prompt)."""
import json
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from petit.server import Server  # noqa: E402
from petit.server.engine import ServerWorker  # noqa: E402

FIX = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("case", ["hf_moe/qwen3_moe", "hf_moe/qwen2_moe", "hf_moe/mixtral", "hf_moe/deepseek_v3",
                                  "hf_ssm/mamba", "hf_ssm/lfm2"])
def test_a_moe_or_state_space_model_serves_chat_completions(case):
    server = Server(ServerWorker(str(FIX / case), max_tokens=8), port=0).start()
    try:
        body = {"model": "m", "messages": [{"role": "user", "content": "hello"}], "temperature": 0, "max_tokens": 6}
        with httpx.Client(base_url=server.url, timeout=30) as c:
            first = c.post("/chat/completions", json=body)
            assert first.status_code == 200, first.text
            r = first.json()
            text = r["choices"][0]["message"]["content"]
            assert r["usage"]["completion_tokens"] <= 6 and r["choices"][0]["finish_reason"] in ("length", "stop")
            again = c.post("/chat/completions", json=body).json()       # the same prompt: its cache is reused
            assert again["choices"][0]["message"]["content"] == text
            assert again["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
            with c.stream("POST", "/chat/completions", json={**body, "stream": True}) as s:
                events = [json.loads(line[6:]) for line in s.iter_lines() if line.startswith("data: {")]
            assert "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"]) == text
    finally:
        server.stop()
    assert not server.alive
