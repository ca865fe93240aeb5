"""User stop strings over streamed text: text that might be the start of a stop string is held back until it is
known not to be, so a stop string is never shown, even when it arrives split across tokens.

Their number and length are capped: every generated token is checked against every stop string, so 50,000 of them
(or one of megabytes) would slow each token down by that much. OpenAI documents "up to 4"; Petit allows more, as
Continue sends a dozen or more (its language keywords) to a local server, and each may be up to 1,000 characters.
"""

MAX_STOPS = 64           # stop strings a generation may have
MAX_STOP_LENGTH = 1000   # characters in each


def check_stop_strings(stops) -> list:
    """Return the non-empty stop strings of `stops` (empty ones stop nothing).

    Raises:
        ValueError: more than MAX_STOPS of them, or one longer than MAX_STOP_LENGTH characters; the message says
            which and the limit.
    """
    stops = list(stops)
    for i, s in enumerate(stops):
        if not isinstance(s, str):
            raise ValueError(f"stop string {i} is a {type(s).__name__}, not a string")
        if len(s) > MAX_STOP_LENGTH:
            raise ValueError(f"stop string {i} is {len(s)} characters long; at most {MAX_STOP_LENGTH} are supported")
    kept = [s for s in stops if s]
    if len(kept) > MAX_STOPS:
        raise ValueError(f"{len(kept)} stop strings given; at most {MAX_STOPS} are supported")
    return kept


class StopStrings:
    def __init__(self, stops=()):
        """Raises ValueError if `stops` passes the limits (see check_stop_strings)."""
        self.stops = check_stop_strings(stops)
        self.held = ""

    def push(self, text: str) -> tuple[str, bool]:
        """Add streamed text; returns (text safe to show, whether a stop string was reached). After a stop, the
        text before it is returned and everything from the stop string on is dropped."""
        buf = self.held + text
        hits = [i for i in (buf.find(s) for s in self.stops) if i >= 0]
        if hits:
            self.held = ""
            return buf[:min(hits)], True
        keep = 0                     # the longest tail of buf that begins some stop string
        for s in self.stops:
            for n in range(min(len(s) - 1, len(buf)), keep, -1):
                if buf.endswith(s[:n]):
                    keep = n
                    break
        self.held = buf[len(buf) - keep:] if keep else ""
        return buf[:len(buf) - keep], False

    def flush(self) -> str:
        held, self.held = self.held, ""
        return held
