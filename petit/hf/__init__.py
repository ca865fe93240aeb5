"""Hugging Face tokenizers (tokenizer.json, through the `tokenizers` library). The folder's other files are read by
petit.formats (checkpoint, metadata) and the folder is loaded by petit.loading.folder."""
