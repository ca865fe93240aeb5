"""The Models tab: every model of the chosen folders and of the Hugging Face cache, LM Studio and Ollama stores,
described from headers on a worker thread, with why a model cannot be opened; refreshed when files change; the
model switcher above the chat and per-model settings following the model."""
import json
import os
import shutil

import pytest

import petit
from app.library import panel as panel_module
from app.models.memory import MemoryInfo
from petit.assets import bundled_models

from app_helpers import DEFAULT, HF_FIXTURES, TIMEOUT_MS, send_and_wait

FIXTURES = os.path.dirname(HF_FIXTURES)
GGUF = os.path.join(FIXTURES, "gguf", "llama", "q4_0.gguf")
GB = 1 << 30
BUNDLED = len(bundled_models())     # default-q8_0.petit and default-q4_0.petit, listed in every scan


@pytest.fixture(autouse=True)
def memory(monkeypatch):
    """This machine has 8 GB, 2 GB of it available (the fit column's figures are exact)."""
    monkeypatch.setattr(panel_module, "machine_memory", lambda: MemoryInfo(8 * GB, 2 * GB))


def _refuse_loading(monkeypatch):
    """Scanning reads headers only: building a model from now on fails the test."""
    def refuse(*_a, **_k):
        raise AssertionError("the scan loaded a model")
    monkeypatch.setattr(petit, "load", refuse)


def _stores(home):
    """A Hugging Face cache (a snapshot of symlinks into blobs/, refs/main naming it), an LM Studio tree and an
    Ollama tree (a manifest naming its GGUF blob, and one whose blob is missing)."""
    repo = home / ".cache" / "huggingface" / "hub" / "models--Tiny--qwen2"
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    (repo / "snapshots" / "old999").mkdir()          # an older revision: refs/main says which one is current
    src = os.path.join(HF_FIXTURES, "qwen2")
    for name in os.listdir(src):
        if name.endswith((".json", ".safetensors")):
            blob = repo / "blobs" / f"blob-{name}"
            shutil.copy(os.path.join(src, name), blob)
            os.symlink(os.path.join("..", "..", "blobs", blob.name), snapshot / name)
    lms = home / ".lmstudio" / "models" / "petit-fixtures" / "tiny-GGUF"
    lms.mkdir(parents=True)
    shutil.copy(GGUF, lms / "tiny-q4_0.gguf")
    ollama = home / ".ollama" / "models"
    (ollama / "blobs").mkdir(parents=True)
    digest = "ab" * 32
    shutil.copy(GGUF, ollama / "blobs" / f"sha256-{digest}")
    library = ollama / "manifests" / "registry.ollama.ai" / "library"
    for name, tag, d in (("tiny", "latest", digest), ("gone", "7b", "cd" * 32)):
        (library / name).mkdir(parents=True)
        (library / name / tag).write_text(json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": "sha256:" + "0" * 64,
                       "size": 10},
            "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{d}", "size": 66592},
                       {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "1" * 64,
                        "size": 5}]}))
    return ollama / "blobs" / ("sha256-" + "cd" * 32)


def _folder(tmp_path):
    folder = tmp_path / "my-models"
    folder.mkdir()
    shutil.copy(DEFAULT, folder / "default-q8_0.petit")
    (folder / "broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    return folder


def _rows(panel):
    """The rows by name, the bundled models' left out (they are listed last in every scan)."""
    rows = [panel.row_texts(r) for r in range(panel.table.rowCount())]
    return {r[0]: r for r in rows if r[7] != "bundled"}


def _wait_scanned(qtbot, window, count):
    """Until the scan lists `count` models besides the bundled ones."""
    qtbot.waitUntil(lambda: not window.library.scanning and window.models_panel.table.rowCount() == count + BUNDLED,
                    timeout=TIMEOUT_MS)


def test_every_store_and_folder_is_listed_with_its_figures(qtbot, make_window, home_dir, tmp_path, monkeypatch):
    missing_blob = _stores(home_dir)
    folder = _folder(tmp_path)
    w = make_window()
    _refuse_loading(monkeypatch)
    w.models_panel.add_folder(str(folder))
    _wait_scanned(qtbot, w, 6)
    rows = _rows(w.models_panel)
    # name, family, parameters, weights, size, context, memory (weights + KV at the chosen context + 10 %), source
    assert rows["default-q8_0.petit"] == [
        "default-q8_0.petit", "llama", "853k", "q8_0", "904.3 kB", "128",
        "fits: needs 1.0 MB at context 128, 2.0 GB available", "folder"]
    assert rows["Tiny/qwen2"][:6] == ["Tiny/qwen2", "qwen2", "82.5k", "f32", "335.9 kB", "128"]
    assert rows["Tiny/qwen2"][7] == "Hugging Face cache"
    assert rows["petit-fixtures/tiny-GGUF/tiny-q4_0.gguf"][1:6] == ["llama", "103k", "Q4_0", "65.0 kB", "128"]
    assert rows["petit-fixtures/tiny-GGUF/tiny-q4_0.gguf"][7] == "LM Studio"
    assert rows["tiny:latest"][1:8] == ["llama", "103k", "Q4_0", "65.0 kB", "128",
                                       "fits: needs 89.1 kB at context 128, 2.0 GB available", "Ollama"]
    # what cannot be opened is listed, with the reason
    assert rows["gone:7b"][6] == f"cannot open: the model's blob {missing_blob} is missing (an interrupted pull?)"
    assert rows["broken.gguf"][6].startswith(f"cannot open: {folder / 'broken.gguf'}: header: the file is 15 bytes")
    assert w.models_panel.status.text() == "8 models (2 cannot be opened or run: the reason is in the Memory column)"


def test_a_fresh_install_lists_the_bundled_models(qtbot, make_window, monkeypatch):
    """No folder chosen, no other app's store: the list shows the models that ship with Petit, not "No models"."""
    w = make_window()
    _refuse_loading(monkeypatch)
    w.library.refresh()
    _wait_scanned(qtbot, w, 0)
    rows = [w.models_panel.row_texts(r) for r in range(w.models_panel.table.rowCount())]
    assert [(r[0], r[1], r[3], r[7]) for r in rows] == [("default-q4_0.petit", "llama", "q4_0", "bundled"),
                                                        ("default-q8_0.petit", "llama", "q8_0", "bundled")]
    assert w.models_panel.status.text() == "2 models"
    w.models_panel.table.selectRow(1)
    assert w.models_panel.open_button.isEnabled()


def test_the_scan_reads_the_models_on_a_worker_thread(qtbot, make_window, tmp_path, monkeypatch):
    import threading
    folder = _folder(tmp_path)
    threads = []
    original = petit.describe

    def describe(path):
        threads.append(threading.current_thread())
        return original(path)
    monkeypatch.setattr(petit, "describe", describe)
    w = make_window()
    w.models_panel.add_folder(str(folder))
    _wait_scanned(qtbot, w, 2)
    assert len(threads) == 2 + BUNDLED and threading.main_thread() not in threads


def test_the_fit_follows_the_context_chosen_in_the_models_settings(qtbot, make_window, tmp_path, monkeypatch):
    folder = tmp_path / "m"
    folder.mkdir()
    shutil.copy(DEFAULT, folder / "a.petit")
    w = make_window()
    # (926,016 bytes of weights + the int8 KV cache: 2 x 4 layers x 64 values x n_ctx) x 1.1, against 1010 kB
    monkeypatch.setattr(panel_module, "machine_memory", lambda: MemoryInfo(8 * GB, 1010 * 1024))
    w.models_panel.add_folder(str(folder))
    _wait_scanned(qtbot, w, 1)
    assert w.models_panel.row_texts(0)[6] == "too big: needs 1.0 MB at context 128, 1010.0 kB available"
    w.settings_panel.store.set(str(folder / "a.petit"), {"n_ctx": 16})
    w.library.refresh()
    qtbot.waitUntil(lambda: "context 16" in w.models_panel.row_texts(0)[6], timeout=TIMEOUT_MS)
    assert w.models_panel.row_texts(0)[6] == "fits: needs 1003.5 kB at context 16, 1010.0 kB available"


def test_a_new_file_in_a_watched_folder_appears_and_a_removed_one_goes(qtbot, make_window, tmp_path):
    folder = _folder(tmp_path)
    w = make_window()
    w.models_panel.add_folder(str(folder))
    _wait_scanned(qtbot, w, 2)
    shutil.copy(GGUF, folder / "new.gguf")
    qtbot.waitUntil(lambda: "new.gguf" in _rows(w.models_panel), timeout=TIMEOUT_MS)
    os.remove(folder / "broken.gguf")
    qtbot.waitUntil(lambda: "broken.gguf" not in _rows(w.models_panel), timeout=TIMEOUT_MS)
    assert sorted(_rows(w.models_panel)) == ["default-q8_0.petit", "new.gguf"]


def test_the_folders_are_kept_across_a_restart(qtbot, make_window, tmp_path):
    folder = _folder(tmp_path)
    w = make_window()
    w.models_panel.add_folder(str(folder))
    _wait_scanned(qtbot, w, 2)
    w.close()
    w2 = make_window()
    _wait_scanned(qtbot, w2, 2)
    assert w2.models_panel.folder_list.item(0).text() == str(folder)
    w2.models_panel.folder_list.setCurrentRow(0)
    w2.models_panel.remove_button.click()
    _wait_scanned(qtbot, w2, 0)
    assert w2.models_panel.status.text() == "2 models"      # the bundled ones


def test_opening_a_model_from_the_list_loads_it_into_the_chat(qtbot, make_window, tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    shutil.copytree(os.path.join(HF_FIXTURES, "qwen2"), folder / "qwen2")
    w = make_window()
    w.tabs.setCurrentWidget(w.models_panel)
    w.models_panel.add_folder(str(folder))
    _wait_scanned(qtbot, w, 1)
    w.models_panel.table.selectRow(0)
    assert w.models_panel.open_button.isEnabled()
    w.models_panel.open_button.click()
    assert w.tabs.currentWidget() is w.page
    qtbot.waitUntil(lambda: not w.models.loading and w.models.info.name == "qwen2", timeout=TIMEOUT_MS)
    assert w.page.switcher.combo.currentText() == "qwen2"


def test_an_unreadable_model_cannot_be_opened_from_the_list(qtbot, make_window, tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "broken.petit").write_bytes(b"nonsense here")
    w = make_window()
    w.models_panel.add_folder(str(folder))
    _wait_scanned(qtbot, w, 1)
    w.models_panel.table.selectRow(0)
    assert not w.models_panel.open_button.isEnabled()
    assert w.models_panel.row_texts(0)[6] == (f"cannot open: {folder / 'broken.petit'}: header: file is 13 bytes, "
                                             "shorter than the 64-byte header")


def test_the_switcher_changes_the_model_and_its_settings_follow(qtbot, make_window, tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    shutil.copy(GGUF, folder / "tiny.gguf")
    w = make_window()
    w.models_panel.add_folder(str(folder))
    qtbot.waitUntil(lambda: len(w.page.switcher.items()) == 3, timeout=TIMEOUT_MS)
    # the library's models first (the bundled ones last), then the recent ones not among them
    assert [label for _k, label in w.page.switcher.items()] == ["tiny.gguf", "default-q4_0.petit (bundled)",
                                                                "default-q8_0.petit (bundled)"]
    assert w.page.switcher.combo.currentText() == "default-q8_0.petit (bundled)"
    w.settings_panel.set_value("max_tokens", 7)
    w.page.switcher.combo.activated.emit(0)
    qtbot.waitUntil(lambda: not w.models.loading and w.models.info.name == "tiny", timeout=TIMEOUT_MS)
    assert w.page.switcher.combo.currentText() == "tiny.gguf"
    assert w.settings_panel.fields["max_tokens"].get() == 256          # tiny's own (default) settings
    w.settings_panel.set_value("max_tokens", 3)
    w.page.switcher.combo.activated.emit(2)
    qtbot.waitUntil(lambda: not w.models.loading and w.models.info.name == "default-q8_0", timeout=TIMEOUT_MS)
    assert w.settings_panel.fields["max_tokens"].get() == 7
    assert send_and_wait(qtbot, w, "what is 12 plus 7?") == "19"
