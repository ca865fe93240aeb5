"""Text files attached to a message: read (UTF-8 text only, up to MAX_BYTES), and laid out in the message the
model sees after the user's own text. The stored message keeps the user's text and the files apart (its meta's
"attachments": [{"name", "text"}]), so the chat shows what the user typed and names the files."""
import os

MAX_BYTES = 1 << 20


class AttachmentError(ValueError):
    pass


def read_attachment(path: str) -> dict:
    """{"name", "text"} of a text file; AttachmentError naming why a file cannot be attached."""
    name = os.path.basename(path)
    try:
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            raise AttachmentError(f"{name} is {size / (1 << 20):.1f} MB; a text attachment can be at most 1 MB")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise AttachmentError(f"{name} cannot be read: {e.strerror or e}") from None
    if b"\0" in data:
        raise AttachmentError(f"{name} is not a text file (it holds binary data)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise AttachmentError(f"{name} is not UTF-8 text (byte {e.start} cannot be decoded)") from None
    return {"name": name, "text": text.replace("\r\n", "\n")}


def with_attachments(text: str, attachments: list) -> str:
    """The message as the model reads it: the user's text, then each file in a fenced block under its name."""
    parts = [text] if text else []
    for a in attachments or []:
        fence = "````" if "```" in a["text"] else "```"
        parts.append(f"Attached file {a['name']}:\n{fence}\n{a['text'].rstrip(chr(10))}\n{fence}")
    return "\n\n".join(parts)
