"""The indexing job the Documents panel runs on a Worker thread: open the index (a connection of that thread),
load the embedding model when one is chosen and not loaded yet, and sync."""
from app.documents.index import DocumentIndex
from app.documents.retrieve import QueryEmbedder


def index_job(db_path: str, model_path: str, embedder: QueryEmbedder | None, stop, report=None) -> tuple:
    """Sync the index at `db_path`; returns (SyncResult, the QueryEmbedder used or None, model_path).
    `model_path`: the embedding model ("" for BM25 only), `embedder` the one already loaded for it (None: load it
    here); `stop()` says the panel is closing."""
    if model_path and embedder is None:
        import petit
        report({"phase": "loading", "done": 0, "total": 0, "name": model_path})
        embedder = QueryEmbedder(petit.Embedder.open(model_path))
    index = DocumentIndex(db_path)
    try:
        result = index.sync(embedder if model_path else None, model_path, report=report, cancelled=stop)
    finally:
        index.close()
    return result, (embedder if model_path else None), model_path
