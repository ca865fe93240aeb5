"""The Documents tab (issue 35): a folder added is indexed on a worker with a progress bar; a question in the chat
gets the best passages before it (the prompt the bundled model sees holds them, numbered), the reply names its
sources as links (kept in its meta, so they come back after a restart) and a click shows the passage; a file
changed on disk is indexed again; "Use documents in chat" off sends the question alone."""
import os

from app_helpers import TIMEOUT_MS, open_window, wait_idle

from app.documents.prompt import INSTRUCTION

ST_BERT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "st_bert")
FACT = "Varnholm choir: Thursdays."          # short: the bundled model's context is 128 tokens


def _folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "choir.md").write_text(f"{FACT}\n")
    (docs / "goats.txt").write_text("Odile keeps 41 goats.\n")
    (docs / "bridge.html").write_text("<p>The Amber bridge is 52 metres long.</p><script>x()</script>")
    return docs


def _wait_indexed(qtbot, panel, files: int):
    qtbot.waitUntil(lambda: not panel.slot.busy and panel.last_result is not None and
                    len(panel.index.documents()) == files, timeout=TIMEOUT_MS)


def _spy_prompts(window) -> list:
    sent = []
    original = window.generation.generate

    def generate(history, text, options, partial=""):
        sent.append(text)
        return original(history, text, options, partial)
    window.generation.generate = generate
    return sent


def test_a_folder_is_indexed_and_the_reply_cites_the_passage(qtbot, window, tmp_path):
    panel = window.documents
    assert window.tabs.tabText(window.tabs.indexOf(panel)) == "Documents"
    progress = []
    panel.progress.valueChanged.connect(progress.append)
    panel.add_paths([str(_folder(tmp_path))])
    assert not panel.progress.isHidden()                      # shown while indexing
    _wait_indexed(qtbot, panel, 3)
    assert panel.progress.isHidden() and progress and progress[-1] == 3
    assert panel.status.text() == "3 documents, 3 passages indexed (keywords only)."
    assert panel.roots_list.item(0).text() == f"{tmp_path / 'docs'}  (3 files, 3 passages)"
    sent = _spy_prompts(window)
    window.chat.send("Varnholm choir day?")
    wait_idle(qtbot, window)
    assert sent == [f"Sources:\n[1] choir.md, line 1:\n{FACT}\n\n{INSTRUCTION}\nQuestion: Varnholm choir day?"]
    assert window.page.view.error.text() == ""
    user, reply = window.chat.messages
    assert user.content == "Varnholm choir day?"                    # the chat shows the question alone
    assert reply.role == "assistant" and reply.meta["sources"][0]["name"] == "choir.md"
    widget = window.page.view.widgets[1]
    sources = widget.sources
    assert sources.isVisibleTo(widget) and sources.link_texts() == ["[1] choir.md, line 1"]
    assert sources.links.text() == 'Sources: <a href="source:1">[1] choir.md, line 1</a>'
    assert not sources.passage.isVisibleTo(widget)
    sources.links.linkActivated.emit("source:1")               # what a click on the link sends
    assert sources.passage.isVisibleTo(widget)
    assert sources.passage.text() == f"[1] {tmp_path / 'docs' / 'choir.md'}, line 1\n\n{FACT}"
    sources.links.linkActivated.emit("source:1")               # a second click hides it
    assert not sources.passage.isVisibleTo(widget)
    assert not window.page.view.widgets[0].sources.isVisibleTo(window.page.view.widgets[0])  # the question's
    # kept with the reply: the same sources after a restart
    stored = window.chat.store.messages(window.chat.chat_id)[1]
    assert stored.meta["sources"] == reply.meta["sources"]
    # Regenerate answers with the same passages, whatever the index holds now
    (tmp_path / "docs" / "choir.md").write_text("Varnholm choir: Mondays now.\n")
    window.chat.regenerate()
    wait_idle(qtbot, window)
    assert sent[-1] == sent[0] and window.chat.messages[1].meta["sources"] == reply.meta["sources"]


def test_the_sources_come_back_after_a_restart_and_a_changed_file_is_indexed_again(qtbot, tmp_path):
    first = open_window(qtbot)
    first.documents.add_paths([str(_folder(tmp_path))])
    _wait_indexed(qtbot, first.documents, 3)
    first.chat.send("Odile goats?")
    wait_idle(qtbot, first)
    first.close()
    second = open_window(qtbot)
    try:
        _wait_indexed(qtbot, second.documents, 3)            # synced at start: nothing changed
        assert second.documents.last_result.unchanged == 3
        widget = second.page.view.widgets[1]
        assert widget.sources.link_texts()[0] == "[1] goats.txt, line 1"
        (tmp_path / "docs" / "goats.txt").write_text("Odile keeps 43 goats since May.\n")
        qtbot.waitUntil(lambda: second.documents.last_result.updated == 1, timeout=TIMEOUT_MS)
        assert second.documents.sources_for("goats Odile")[0]["text"] == "Odile keeps 43 goats since May."
    finally:
        second.close()


def test_with_use_in_chat_off_the_question_goes_alone(qtbot, window, tmp_path):
    panel = window.documents
    panel.add_paths([str(_folder(tmp_path))])
    _wait_indexed(qtbot, panel, 3)
    panel.use_in_chat.setChecked(False)
    sent = _spy_prompts(window)
    window.chat.send("Odile goats?")
    wait_idle(qtbot, window)
    assert sent == ["Odile goats?"]
    assert "sources" not in window.chat.messages[1].meta
    assert not window.page.view.widgets[1].sources.isVisibleTo(window.page.view.widgets[1])


def test_a_file_that_cannot_be_read_is_named_and_removing_a_folder_empties_the_index(qtbot, window, tmp_path):
    panel = window.documents
    docs = _folder(tmp_path)
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 nothing")
    panel.add_paths([str(docs)])
    _wait_indexed(qtbot, panel, 4)
    assert panel.status.text().startswith("3 documents, 3 passages indexed (keywords only).\nbroken.pdf is not a "
                                          "readable PDF: ")
    panel.roots_list.item(0).setSelected(True)
    panel.remove_selected()
    qtbot.waitUntil(lambda: not panel.slot.busy and panel.index.documents() == [], timeout=TIMEOUT_MS)
    assert panel.roots_list.count() == 0 and panel.sources_for("goats") == []
    assert os.path.exists(panel.index.path)


def test_an_embedding_model_embeds_the_passages_and_a_bad_one_is_named(qtbot, window, tmp_path):
    panel = window.documents
    panel.add_paths([str(_folder(tmp_path))])
    _wait_indexed(qtbot, panel, 3)
    panel.set_embedding_model(ST_BERT)
    qtbot.waitUntil(lambda: not panel.slot.busy and panel.embedder is not None, timeout=TIMEOUT_MS)
    assert panel.status.text() == "3 documents, 3 passages indexed (keywords and embeddings)."
    assert panel.last_result.embedded == 3 and len(panel.index.vectors()[0]) == 3
    sources = panel.sources_for("Odile goats?", {"n_ctx": 128})
    assert sources[0]["name"] == "goats.txt" and [s["n"] for s in sources] == list(range(1, len(sources) + 1))
    assert sum(len(s["text"]) for s in sources) <= 128
    panel.set_embedding_model(str(tmp_path / "no-model"))
    qtbot.waitUntil(lambda: not panel.slot.busy and panel.status.text().startswith("Indexing failed"),
                    timeout=TIMEOUT_MS)
    assert panel.status.text() == (f"Indexing failed: {tmp_path / 'no-model'}: embeddings are read from a Hugging Face "
                                   "folder saved by sentence-transformers or a GGUF file with a pooling key (.petit "
                                   "embedding files are not supported yet)")
    assert panel.embedder is None and panel.sources_for("Odile goats?")[0]["name"] == "goats.txt"   # BM25 goes on
    panel.set_embedding_model("")
    qtbot.waitUntil(lambda: not panel.slot.busy and panel.status.text().endswith("(keywords only)."),
                    timeout=TIMEOUT_MS)
    assert len(panel.index.vectors()[0]) == 0
