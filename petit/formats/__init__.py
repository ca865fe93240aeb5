"""File formats: pure readers and writers that know nothing of model families (they never import petit.models or
petit.loading).

    petit_file.py     `.petit` model files: memory-mapped reader, checked atomic writer (docs/petit-format.md)
    safetensors.py    `.safetensors` files, without the safetensors package
    torch_bin.py      `pytorch_model.bin` (torch's zip format), without torch and without running its pickle
    tensor_file.py    what the two checkpoint readers share
    checkpoint.py     a Hugging Face folder's weights (sharded or not, either format) as one flat view
    metadata.py       a Hugging Face folder's side files (tokenizer_config.json, generation_config.json, ...)
"""
