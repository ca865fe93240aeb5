"""What the wizard trains on: a UTF-8 text file, or the built-in generated chat corpus (ChatML dialogues; the loss
is on the answers). `load` reads or generates the text on the training worker; `char_vocab` sizes a character
tokenizer for the estimates without reading a whole large file on the GUI thread."""
import os
from dataclasses import dataclass
from functools import lru_cache

from trainer.chat_corpus import EOS_TOKEN, SPECIAL_TOKENS, make_split

DEFAULT_CHAT_EXAMPLES = 20000
SAMPLE_BYTES = 1 << 20               # what char_vocab reads of a file


@dataclass(frozen=True)
class Corpus:
    kind: str                        # "chat" or "file"
    path: str = ""
    chat_examples: int = DEFAULT_CHAT_EXAMPLES

    @property
    def chat(self) -> bool:
        return self.kind == "chat"

    def describe(self) -> str:
        if self.chat:
            return f"the built-in chat corpus ({self.chat_examples:,} dialogues)"
        return os.path.basename(self.path)


def load(corpus: Corpus, seed: int) -> tuple[str, dict]:
    """-> (text, the data_info the checkpoint records). Raises ValueError with a sentence a user can act on."""
    if corpus.chat:
        info = {"source": "chat", "chat_examples": corpus.chat_examples, "chat_loss": "answers"}
        return make_split(seed, corpus.chat_examples).train_text, info
    return read_text(corpus.path), {"source": "file", "path": os.path.abspath(corpus.path)}


def learn_tokenizer(text: str, config, chat: bool) -> dict:
    """The tokenizer trainer.train would learn from `text` itself (the same arguments), learned before it is
    called so that the Train tab can say that this is what it is doing."""
    from trainer.bpe import train_tokenizer
    return train_tokenizer(text, mode=config.tokenizer,
                           vocab_size=config.vocab_size if config.tokenizer == "bpe" else None,
                           special_tokens=SPECIAL_TOKENS if chat else [], eos_token=EOS_TOKEN if chat else None)


def read_text(path: str, limit: int | None = None) -> str:
    if not path:
        raise ValueError("choose a text file to train on")
    try:
        with open(path, "rb") as f:
            data = f.read() if limit is None else f.read(limit)
    except FileNotFoundError:
        raise ValueError(f"the corpus file {path} does not exist") from None
    except IsADirectoryError:
        raise ValueError(f"{path} is a folder, not a text file") from None
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8", errors="strict" if limit is None else "ignore")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not UTF-8 text (bad byte at offset {e.start})") from None


def file_summary(path: str) -> str:
    """'1.21 MB' or why the file cannot be used."""
    from trainer.export import format_size
    try:
        return format_size(os.path.getsize(path)) + " of text"
    except OSError as e:
        return f"cannot read it: {e.strerror or e}"


def char_vocab(corpus: Corpus) -> int:
    """The size of a character tokenizer for this corpus (from the first MB of a file: an estimate)."""
    if corpus.chat:
        return _chat_chars()
    try:
        return max(1, len(set(read_text(corpus.path, SAMPLE_BYTES))))
    except ValueError:
        return 96


@lru_cache(maxsize=1)
def _chat_chars() -> int:
    text = make_split(1, 500).train_text
    for token in SPECIAL_TOKENS:
        text = text.replace(token, "")
    return len(set(text)) + len(SPECIAL_TOKENS)
