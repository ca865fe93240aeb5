"""Chat templates and chat formats: `template.py` renders a model's own Jinja chat template as transformers does;
`formats.py` holds the built-in formats (`--format chatml`, ...) for models that ship no template."""
