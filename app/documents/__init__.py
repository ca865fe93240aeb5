"""Documents in the app (issue 35): files and folders the user adds are read, split into passages, indexed in a
SQLite file beside the app's database (FTS5 for BM25, float32 vectors when an embedding model is chosen), and the
passages that best answer a question are put before it in the chat, numbered, so the reply can cite them.

readers, chunks, index, retrieve and prompt import no Qt; panel and sources_view are the widgets."""
