"""The model library: every model in the folders the user chose and in other apps' stores (the Hugging Face cache,
LM Studio, Ollama), described from their headers on a worker thread; the Models tab and the model switcher."""
