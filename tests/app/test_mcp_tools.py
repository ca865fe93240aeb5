"""MCP tools in the chat (app/tools): a real MCP server process (tests/mcp_server_fixture.py, over stdio) listed in
mcp.json; the model calls one of its tools (a remote backend scripted to return `tool_calls`, or the bundled model
made to call through the tool-call grammar), the call is shown and asked for, and its result reaches the model and
the reply. Every server process and the sessions' thread are gone after the window closes."""
import json
import os
import sys

import httpx
import pytest
from PySide6.QtCore import Qt

import app.remote.api as api
from app.tools.loop import ABANDONED, MAX_ROUNDS, REFUSED

from app_helpers import TIMEOUT_MS, wait_idle
from remote_helpers import MemoryKeyring, sse

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TESTS)
from models import TINY, write_model  # noqa: E402

FIXTURE = os.path.join(TESTS, "mcp_server_fixture.py")


def fixture_processes() -> list:
    """The pids of this test process's children that run the fixture server (Linux /proc)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"mcp_server_fixture" in cmd:
            out.append(int(pid))
    return out


@pytest.fixture(autouse=True)
def memory_keyring():
    import keyring
    before = keyring.get_keyring()
    keyring.set_keyring(MemoryKeyring())
    yield
    keyring.set_keyring(before)


def write_config(data_dir, servers: dict) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "mcp.json").write_text(json.dumps({"mcpServers": servers}))


@pytest.fixture
def tools_window(qtbot, make_window, data_dir):
    """A window whose mcp.json lists the fixture server as "test", ready; at the end its process and the sessions'
    thread must be gone."""
    write_config(data_dir, {"test": {"command": sys.executable, "args": [FIXTURE]}})
    hubs = []

    def make(**kwargs):
        w = make_window(**kwargs)
        qtbot.waitUntil(lambda: [s.state for _c, s in w.tools.servers()] != ["starting"], timeout=30000)
        assert [(s.state, s.error) for _c, s in w.tools.servers()] == [("ready", "")]
        tree = w.tools_panel.tree                           # the tab heard of it (a queued signal)
        qtbot.waitUntil(lambda: tree.topLevelItemCount() == 1 and tree.topLevelItem(0).childCount() == 4,
                        timeout=TIMEOUT_MS)
        hubs.append(w.tools.hub)
        return w
    yield make
    for hub in hubs:
        hub.close()
        assert not hub._thread.is_alive(), "the MCP sessions' thread still runs"
    assert fixture_processes() == [], "an MCP server process was left running"


# ---- a remote backend that calls a tool, then answers with its result ----
def scripted_backend(monkeypatch, call: dict, seen: list):
    """An OpenAI-compatible endpoint: a request that ends with the user's message gets `call` as a tool call; one
    that ends with a tool result gets "Result: <the tool's text>"."""
    def handler(request):
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"object": "list", "data": [{"id": "m"}]})
        body = json.loads(request.content)
        seen.append(body)
        last = body["messages"][-1]
        if last["role"] == "tool":
            chunks = sse(f"Result: {last['content']}") + sse("", "stop")
        else:
            piece = {"index": 0, "id": "call_1", "type": "function",
                     "function": {"name": call["name"], "arguments": ""}}
            args = json.dumps(call["arguments"])
            chunks = _tool_chunk([piece]) + _tool_chunk([{"index": 0, "function": {"arguments": args[:5]}}]) \
                + _tool_chunk([{"index": 0, "function": {"arguments": args[5:]}}]) + sse("", "tool_calls")
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=chunks + b"data: [DONE]\n\n")
    monkeypatch.setattr(api, "transport", httpx.MockTransport(handler))


def _tool_chunk(calls: list) -> bytes:
    chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
             "choices": [{"index": 0, "delta": {"tool_calls": calls}, "finish_reason": None}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def use_scripted_remote(qtbot, w):
    box = w.backends_box
    box.name_edit.setText("example")
    box.url_edit.setText("https://api.example/v1")
    box.add_button.click()
    qtbot.waitUntil(lambda: "m (example)" in [label for _k, label in w.page.switcher.items()], timeout=TIMEOUT_MS)
    items = [label for _k, label in w.page.switcher.items()]
    w.page.switcher.combo.activated.emit(items.index("m (example)"))
    qtbot.waitUntil(lambda: not w.models.loading and w.models.info is not None
                    and w.models.info.weight_type == "remote", timeout=TIMEOUT_MS)


def wait_for_call(qtbot, w):
    qtbot.waitUntil(lambda: len(w.tool_turns._boxes) == 1, timeout=TIMEOUT_MS)
    return next(iter(w.tool_turns._boxes.values()))


def roles(w) -> list:
    return [m.role for m in w.chat.messages]


def test_a_tool_call_is_asked_for_then_run_and_its_result_reaches_the_reply(qtbot, tools_window, monkeypatch):
    seen = []
    scripted_backend(monkeypatch, {"name": "add", "arguments": {"a": 2, "b": 3}}, seen)
    w = tools_window()
    assert [t.name for t in w.tools.tools()] == ["add", "lookup", "slow", "crash"]
    use_scripted_remote(qtbot, w)
    w.chat.send("what is 2 + 3?")
    box = wait_for_call(qtbot, w)
    assert box.label.text() == "Tool call on test: <code>add(a=2, b=3)</code>"
    assert not box.run_button.isHidden() and not box.skip_button.isHidden()
    assert roles(w) == ["user", "assistant"] and not w.chat.busy     # waiting for the user's word, non-modal
    assert [t["function"]["name"] for t in seen[0]["tools"]] == ["add", "lookup", "slow", "crash"]
    box.run_button.click()
    qtbot.waitUntil(lambda: roles(w) == ["user", "assistant", "tool", "assistant"], timeout=TIMEOUT_MS)
    wait_idle(qtbot, w)
    assert box.state.text() == "done"
    assert w.chat.messages[2].content == "2 + 3 = 5"
    assert w.chat.messages[3].content == "Result: 2 + 3 = 5"
    assert seen[1]["messages"][-2:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
        {"role": "tool", "content": "2 + 3 = 5", "tool_call_id": "call_1", "name": "add"}]
    result = w.page.view.widgets[2]
    assert result.title.text() == "<b>Tool result: add</b>"
    assert "called add(a=2, b=3)" in w.page.view.widgets[1].footer.text()
    assert not result.body.isHidden() and result.fold_button.text() == "Hide"
    result.fold_button.click()
    assert result.body.isHidden() and result.fold_button.text() == "Show"
    chat_id = w.chat.chat_id
    w.close()
    again = tools_window()                           # a restart shows the calls and their results as they were
    assert again.chat.chat_id == chat_id
    assert [(m.role, m.content) for m in again.chat.messages] == [
        ("user", "what is 2 + 3?"), ("assistant", ""), ("tool", "2 + 3 = 5"), ("assistant", "Result: 2 + 3 = 5")]
    assert again.page.view.widgets[2].title.text() == "<b>Tool result: add</b>"


def test_skip_tells_the_model_the_call_was_refused(qtbot, tools_window, monkeypatch):
    seen = []
    scripted_backend(monkeypatch, {"name": "lookup", "arguments": {"key": "fruit"}}, seen)
    w = tools_window()
    use_scripted_remote(qtbot, w)
    w.chat.send("which fruit?")
    box = wait_for_call(qtbot, w)
    box.skip_button.click()
    qtbot.waitUntil(lambda: len(roles(w)) == 4, timeout=TIMEOUT_MS)
    wait_idle(qtbot, w)
    assert box.state.text() == "skipped"
    assert w.chat.messages[2].content == REFUSED
    assert seen[1]["messages"][-1]["content"] == REFUSED
    assert w.chat.messages[3].content == f"Result: {REFUSED}"


def test_a_new_message_answers_a_call_still_waiting(qtbot, tools_window, monkeypatch):
    seen = []
    scripted_backend(monkeypatch, {"name": "lookup", "arguments": {"key": "fruit"}}, seen)
    w = tools_window()
    use_scripted_remote(qtbot, w)
    w.chat.send("which fruit?")
    wait_for_call(qtbot, w)
    w.chat.send("never mind")
    qtbot.waitUntil(lambda: len(seen) == 2, timeout=TIMEOUT_MS)
    assert [(m["role"], m.get("content")) for m in seen[1]["messages"]][-2:] == [
        ("tool", ABANDONED), ("user", "never mind")]


@pytest.mark.parametrize("tool,message", [
    ("slow", 'the tool "slow" of server "test" did not answer within 1 s'),
    ("crash", 'the tool "crash" of server "test" failed: MCPError: Connection closed'),
])
def test_a_tool_that_hangs_or_crashes_gives_a_clear_result_and_no_hang(qtbot, tools_window, monkeypatch, tool,
                                                                       message):
    seen = []
    scripted_backend(monkeypatch, {"name": tool, "arguments": {}}, seen)
    w = tools_window()
    w.tools.timeout = 1
    w.tools_panel.ask_box.click()                    # run without asking
    assert w.tools.ask is False
    use_scripted_remote(qtbot, w)
    w.chat.send("go")
    qtbot.waitUntil(lambda: len(roles(w)) == 4, timeout=TIMEOUT_MS)
    wait_idle(qtbot, w)
    assert w.chat.messages[2].content == message and w.chat.messages[2].meta["error"] is True
    assert w.chat.messages[3].content == f"Result: {message}"


def test_a_backend_that_refuses_tools_is_asked_again_without_them(qtbot, tools_window, monkeypatch):
    seen = []

    def handler(request):
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"object": "list", "data": [{"id": "m"}]})
        body = json.loads(request.content)
        seen.append(body)
        if "tools" in body:
            return httpx.Response(400, json={"error": {"message": "m does not support tools"}})
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=sse("plain answer") + sse("", "stop") + b"data: [DONE]\n\n")
    monkeypatch.setattr(api, "transport", httpx.MockTransport(handler))
    w = tools_window()
    use_scripted_remote(qtbot, w)
    w.chat.send("hello")
    wait_idle(qtbot, w)
    assert ["tools" in body for body in seen] == [True, False]
    assert w.chat.messages[-1].content == "plain answer"
    assert w.page.view.widgets[-1].footer.text().endswith("answered without tools: the server refused them")
    assert w.page.view.error.isHidden()


def test_a_model_that_keeps_calling_tools_is_stopped_after_max_rounds(qtbot, tools_window, monkeypatch):
    seen = []

    def handler(request):
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"object": "list", "data": [{"id": "m"}]})
        seen.append(json.loads(request.content))
        piece = {"index": 0, "id": f"call_{len(seen)}", "type": "function",
                 "function": {"name": "add", "arguments": json.dumps({"a": len(seen), "b": 1})}}
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=_tool_chunk([piece]) + sse("", "tool_calls") + b"data: [DONE]\n\n")
    monkeypatch.setattr(api, "transport", httpx.MockTransport(handler))
    w = tools_window()
    w.tools_panel.ask_box.click()
    use_scripted_remote(qtbot, w)
    w.chat.send("count")
    qtbot.waitUntil(lambda: w.page.view.error.text() != "", timeout=TIMEOUT_MS)
    wait_idle(qtbot, w)
    assert len(seen) == MAX_ROUNDS + 1
    assert roles(w) == ["user"] + ["assistant", "tool"] * (MAX_ROUNDS + 1)
    assert [m.content for m in w.chat.messages[2:-1:2]] == [f"{n} + 1 = {n + 1}" for n in range(1, MAX_ROUNDS + 1)]
    assert w.chat.messages[-1].content == (f"Not run: the model already made {MAX_ROUNDS} rounds of tool calls for "
                                           "this message.")
    assert w.page.view.error.text() == (f"The model kept calling tools ({MAX_ROUNDS} rounds): it was stopped. Ask "
                                        "again, or turn tools off in the Tools tab.")


# ---- a local model, made to call a tool by the tool-call grammar ----
WORDS = {"fruit": "plum", "colour": "teal"}


def test_a_local_model_forced_to_call_a_tool_is_given_its_result(qtbot, tools_window, tmp_path):
    path = tmp_path / "tiny.petit"         # a random model with room for the tools' description (the bundled one has
    write_model(path, dict(TINY, max_position_embeddings=2048), seed=5)      # 128 positions)
    w = tools_window(model_path=str(path))
    server = w.tools_panel.tree.topLevelItem(0)
    for i in range(server.childCount()):              # only lookup is offered: the user turned the others off
        if server.child(i).text(0) != "lookup":
            server.child(i).setCheckState(0, Qt.CheckState.Unchecked)
    assert [t.name for t in w.tools.tools()] == ["lookup"]
    w.tool_turns.force_first = True
    w.settings_panel.set_value("max_tokens", 160)   # a byte tokenizer: a token a character
    sent = []
    generate = w.generation.generate
    w.generation.generate = lambda history, text, options, partial="": (
        sent.append((history, text, options)), generate(history, text, options, partial))[1]
    w.chat.send("Which fruit is kept?")
    box = wait_for_call(qtbot, w)
    assert sent[0][2]["tool_choice"] == "required"
    assert [t["function"]["name"] for t in sent[0][2]["tools"]] == ["lookup"]
    call = w.chat.messages[1].meta["tool_calls"][0]
    key = json.loads(call["function"]["arguments"])["key"]
    assert call["function"]["name"] == "lookup" and key in WORDS
    box.run_button.click()
    qtbot.waitUntil(lambda: len(sent) == 2, timeout=TIMEOUT_MS)
    wait_idle(qtbot, w)
    assert w.chat.messages[2].role == "tool" and w.chat.messages[2].content == f"the {key} is {WORDS[key]}"
    history, text, options = sent[1]
    assert text == "" and options["tool_choice"] == "auto"       # the model answers the result on its own
    assert history[-1] == {"role": "tool", "content": f"the {key} is {WORDS[key]}", "tool_call_id": call["id"],
                           "name": "lookup"}
    prompt = w.generation.worker.session.tokenizer.decode(w.generation.worker.session._cached)
    assert f"the {key} is {WORDS[key]}" in prompt                # the model read the tool's result


# ---- the Tools tab ----
def test_the_tools_tab_lists_the_servers_tools_and_says_what_is_wrong(qtbot, make_window, data_dir):
    write_config(data_dir, {
        "test": {"command": sys.executable, "args": [FIXTURE]},
        "broken": {"command": sys.executable, "args": ["-c", "import sys; sys.stderr.write('no key given\\n'); "
                                                             "sys.exit(2)"]},
        "bad": {"command": "python", "args": "server.py"},
        "off": {"command": "python", "disabled": True}})
    w = make_window()
    panel = w.tools_panel
    tree = panel.tree

    def shown():
        return [(tree.topLevelItem(i).text(0), tree.topLevelItem(i).text(1)) for i in range(tree.topLevelItemCount())]
    qtbot.waitUntil(lambda: shown() == [("test", "ready"), ("broken", "failed"), ("off", "disabled in mcp.json")],
                    timeout=30000)
    test = tree.topLevelItem(0)
    assert [(test.child(i).text(0), test.child(i).text(1)) for i in range(test.childCount())] == [
        ("add", "Add two integers."), ("lookup", "The word kept under a key."), ("slow", "Answers after a minute."),
        ("crash", "The server exits without answering.")]
    args = "-c import sys; sys.stderr.write('no key given\\n'); sys.exit(2)"
    assert panel.errors.text() == "\n".join([
        f'{data_dir / "mcp.json"}: server "bad": "args" must be a list of strings',
        f'server "broken" ({sys.executable} {args}) could not start: MCPError: Connection closed; it said: no key '
        f'given'])
    assert panel.ask_box.isChecked()
    (data_dir / "mcp.json").write_text("{")                  # edited: Reload reads it again
    panel.reload_button.click()
    assert panel.errors.text() == f"{data_dir / 'mcp.json'}: not valid JSON: Expecting property name enclosed in " \
                                  "double quotes at line 1, column 2"
    assert tree.topLevelItemCount() == 0 and w.tools.tools() == []
    assert fixture_processes() == []                         # the old servers were stopped


def test_the_tools_turned_off_and_ask_before_running_are_kept_after_a_restart(qtbot, tools_window):
    w = tools_window()
    slow = w.tools_panel.tree.topLevelItem(0).child(2)
    assert slow.text(0) == "slow" and slow.checkState(0) == Qt.CheckState.Checked
    slow.setCheckState(0, Qt.CheckState.Unchecked)
    w.tools_panel.ask_box.click()
    assert [t.name for t in w.tools.tools()] == ["add", "lookup", "crash"] and w.tools.ask is False
    w.close()
    again = tools_window()
    assert [t.name for t in again.tools.tools()] == ["add", "lookup", "crash"]
    assert again.tools_panel.tree.topLevelItem(0).child(2).checkState(0) == Qt.CheckState.Unchecked
    assert not again.tools_panel.ask_box.isChecked() and again.tools.ask is False


def test_another_mcp_file_is_read_and_kept_after_a_restart(qtbot, data_dir, tmp_path):
    """The Tools tab's "Use another file…" reads the servers from the file chosen (Claude Desktop's config keeps them
    under the same "mcpServers"), remembers it across a restart, and "Use the default file" goes back."""
    from app_helpers import open_window
    write_config(data_dir, {})                                      # the data folder's own file: no servers
    other = tmp_path / "claude_desktop_config.json"
    other.write_text(json.dumps({"mcpServers": {"later": {"command": "not-started", "disabled": True}}}))
    first = open_window(qtbot)
    try:
        panel = first.tools_panel
        assert panel.tree.topLevelItemCount() == 0 and not panel.default_button.isEnabled()
        panel.choose_button.click()
        assert panel.file_dialog.isVisible()                          # open(), not exec(): nothing waits on it
        panel.file_dialog.fileSelected.emit(str(other))             # what choosing the file and Open send
        panel.file_dialog.close()
        qtbot.waitUntil(lambda: panel.tree.topLevelItemCount() == 1, timeout=TIMEOUT_MS)
        item = panel.tree.topLevelItem(0)
        assert (item.text(0), item.text(1)) == ("later", "disabled in mcp.json")
        assert f"<code>{other}</code>" in panel.intro.text() and panel.default_button.isEnabled()
    finally:
        first.close()
    second = open_window(qtbot)
    try:
        panel = second.tools_panel
        assert second.tools.path == str(other) and f"<code>{other}</code>" in panel.intro.text()
        assert panel.tree.topLevelItem(0).text(0) == "later"
        panel.default_button.click()
        assert second.tools.path == str(data_dir / "mcp.json") and panel.tree.topLevelItemCount() == 0
        assert not panel.default_button.isEnabled()
    finally:
        second.close()
    assert fixture_processes() == []
