"""Where models are found: the folders the user chose, and the stores of other apps when they exist. Each location
yields candidate (path, display name) pairs; nothing here opens a model.

- Hugging Face cache: hub/models--ORG--NAME/snapshots/REVISION/ (the one refs/main names when present, else each),
  a folder with config.json, or GGUF files in it.
- LM Studio: ~/.lmstudio/models/PUBLISHER/MODEL/*.gguf (older installs: ~/.cache/lm-studio/models), or a folder
  with config.json.
- Ollama: ~/.ollama/models (or $OLLAMA_MODELS): manifests/HOST/NAMESPACE/NAME/TAG are JSON manifests whose layer of
  mediaType application/vnd.ollama.image.model names the GGUF blob (digest sha256:HEX, stored as blobs/sha256-HEX).
"""
import json
import os
from dataclasses import dataclass

OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
MODEL_EXTENSIONS = (".petit", ".gguf")
MAX_DEPTH = 4                  # how deep a chosen folder is searched


@dataclass(frozen=True)
class Candidate:
    path: str                  # a model file or folder to describe (for Ollama: the blob)
    name: str                  # what the list calls it
    source: str                # "folder", "Hugging Face cache", "LM Studio", "Ollama"
    problem: str = ""          # why it cannot be opened, when that is known before reading it (a missing blob)


def home() -> str:
    return os.path.expanduser("~")


def known_stores(home_dir: str | None = None, environ=os.environ) -> list[tuple[str, str]]:
    """(source, folder) of the other apps' stores that exist on this machine."""
    h = home_dir or home()
    hf = environ.get("HF_HUB_CACHE") or os.path.join(environ.get("HF_HOME") or os.path.join(h, ".cache",
                                                                                            "huggingface"), "hub")
    stores = [("Hugging Face cache", hf), ("LM Studio", os.path.join(h, ".lmstudio", "models")),
              ("LM Studio", os.path.join(h, ".cache", "lm-studio", "models")),
              ("Ollama", environ.get("OLLAMA_MODELS") or os.path.join(h, ".ollama", "models"))]
    return [(s, p) for s, p in stores if os.path.isdir(p)]


def is_model_folder(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "config.json"))


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def folder_candidates(root: str, source: str = "folder", depth: int = MAX_DEPTH, prefix: str = "",
                      dirs: list | None = None) -> list[Candidate]:
    """Model files and Hugging Face folders under `root` (searched `depth` levels deep; hidden entries skipped).
    `dirs` collects every folder visited (to watch for changes)."""
    out = []
    if dirs is not None:
        dirs.append(root)
    if is_model_folder(root):
        return [Candidate(root, prefix or os.path.basename(os.path.normpath(root)), source)]
    for name in _listdir(root):
        if name.startswith("."):
            continue
        path = os.path.join(root, name)
        label = f"{prefix}/{name}" if prefix else name
        if os.path.isdir(path):
            if depth > 0:
                out += folder_candidates(path, source, depth - 1, label, dirs)
        elif name.lower().endswith(MODEL_EXTENSIONS):
            out.append(Candidate(path, label, source))
    return out


def hf_cache_candidates(hub: str, dirs: list | None = None) -> list[Candidate]:
    out = []
    if dirs is not None:
        dirs.append(hub)
    for repo in _listdir(hub):
        if not repo.startswith("models--"):
            continue
        name = repo[len("models--"):].replace("--", "/")
        snapshots = os.path.join(hub, repo, "snapshots")
        if dirs is not None and os.path.isdir(snapshots):
            dirs.append(snapshots)
        revisions = _listdir(snapshots)
        try:
            with open(os.path.join(hub, repo, "refs", "main")) as f:
                main = f.read().strip()
        except OSError:
            main = ""
        if main in revisions:
            revisions = [main]
        for rev in revisions:
            label = name if len(revisions) == 1 else f"{name}@{rev[:8]}"
            out += folder_candidates(os.path.join(snapshots, rev), "Hugging Face cache", 2, label, dirs)
    return out


def ollama_candidates(root: str, dirs: list | None = None) -> list[Candidate]:
    manifests = os.path.join(root, "manifests")
    found = []
    for folder, subdirs, files in os.walk(manifests):
        subdirs.sort()
        if dirs is not None:
            dirs.append(folder)
        for tag in sorted(files):
            found.append(os.path.join(folder, tag))
    out = []
    for manifest in found:
        parts = os.path.relpath(manifest, manifests).split(os.sep)
        # HOST/NAMESPACE/NAME/TAG; the official library is shown as NAME:TAG, like `ollama list`
        host, repo, tag = parts[0], "/".join(parts[1:-1]), parts[-1]
        if host == "registry.ollama.ai" and repo.startswith("library/"):
            repo = repo[len("library/"):]
        elif host != "registry.ollama.ai":
            repo = f"{host}/{repo}"
        name = f"{repo}:{tag}"
        out.append(_ollama_blob(root, manifest, name))
    return out


def _ollama_blob(root: str, manifest: str, name: str) -> Candidate:
    try:
        with open(manifest, encoding="utf-8") as f:
            layers = json.load(f).get("layers") or []
    except (OSError, ValueError, AttributeError) as e:
        return Candidate(manifest, name, "Ollama", f"unreadable manifest {manifest}: {e}")
    digest = next((la.get("digest") for la in layers if isinstance(la, dict)
                   and la.get("mediaType") == OLLAMA_MODEL_LAYER), None)
    if not isinstance(digest, str) or ":" not in digest:
        return Candidate(manifest, name, "Ollama", f"the manifest {manifest} names no model layer")
    blob = os.path.join(root, "blobs", digest.replace(":", "-", 1))
    if not os.path.isfile(blob):
        return Candidate(blob, name, "Ollama", f"the model's blob {blob} is missing (an interrupted pull?)")
    return Candidate(blob, name, "Ollama")


def bundled_candidates() -> list[Candidate]:
    """The models that ship with Petit, so a fresh install lists the model it has loaded."""
    from petit.assets import bundled_models
    return [Candidate(path, os.path.basename(path), "bundled") for path in bundled_models()]


def candidates(folders: list[str], stores: list[tuple[str, str]], dirs: list | None = None) -> list[Candidate]:
    """Every candidate of the chosen folders, the stores and the bundled models (last), each path once."""
    out = []
    for folder in folders:
        if os.path.isdir(folder):
            out += folder_candidates(folder, "folder", dirs=dirs)
        elif os.path.isfile(folder):
            out.append(Candidate(folder, os.path.basename(folder), "folder"))
    for source, root in stores:
        if source == "Hugging Face cache":
            out += hf_cache_candidates(root, dirs)
        elif source == "Ollama":
            out += ollama_candidates(root, dirs)
        else:
            out += folder_candidates(root, source, depth=3, dirs=dirs)
    out += bundled_candidates()
    seen, unique = set(), []
    for c in out:
        key = os.path.realpath(c.path)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique
