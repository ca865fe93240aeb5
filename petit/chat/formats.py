"""Built-in chat formats for `--format`, for models whose files carry no template (or to override one).

Each is the common form of that family's template: messages rendered in order, the generation prompt opening the
assistant turn. A model's own template (rendered by petit.chat.template) always describes the model best; these exist
for models that ship none. "raw" is not a template: it is the completion notebook (`petit chat`'s raw mode over
petit.generation.Session.complete).
"""
from petit.chat.template import render_template

FORMATS = {
    "chatml": (
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"),
    "llama3": (
        "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n'"
        " + m['content'] | trim + '<|eot_id|>' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"),
    "llama2": (
        "{% if messages and messages[0]['role'] == 'system' %}{% set sys = '<<SYS>>\\n' + messages[0]['content'] +"
        " '\\n<</SYS>>\\n\\n' %}{% set msgs = messages[1:] %}{% else %}{% set sys = '' %}{% set msgs = messages %}"
        "{% endif %}{% for m in msgs %}{% if m['role'] == 'user' %}{{ bos_token + '[INST] ' + (sys if loop.first"
        " else '') + m['content'] | trim + ' [/INST]' }}{% elif m['role'] == 'assistant' %}"
        "{{ ' ' + m['content'] | trim + ' ' + eos_token }}{% endif %}{% endfor %}"),
    "mistral": (
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}{{ '[INST] ' + m['content'] + ' [/INST]' }}"
        "{% elif m['role'] == 'assistant' %}{{ m['content'] + eos_token }}{% else %}"
        "{{ raise_exception('Only user and assistant roles are supported') }}{% endif %}{% endfor %}"),
    "zephyr": (
        "{% for m in messages %}{{ '<|' + m['role'] + '|>\\n' + m['content'] + eos_token + '\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"),
    "gemma": (
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}"
        "{{ raise_exception('System role not supported') }}{% endif %}"
        "{% set role = 'model' if m['role'] == 'assistant' else m['role'] %}"
        "{{ '<start_of_turn>' + role + '\\n' + m['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"),
    "phi3": (
        "{% for m in messages %}{{ '<|' + m['role'] + '|>\\n' + m['content'] + '<|end|>\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}"),
}
NAMES = tuple(FORMATS) + ("raw",)


def get_format(name: str) -> str:
    """The template text of a built-in format.

    Raises:
        ValueError: an unknown name, listing the known ones.
    """
    if name not in FORMATS:
        raise ValueError(f"unknown chat format {name!r}: choose one of {', '.join(NAMES)}")
    return FORMATS[name]


__all__ = ["FORMATS", "NAMES", "get_format", "render_template"]
