"""Hugging Face model folders: checkpoint readers (safetensors, pytorch_model.bin), tokenizer.json, the folder's
configs, and the loader that quantizes while it reads."""
