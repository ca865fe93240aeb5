"""User stop strings over streamed text: text that might be the start of a stop string is held back until it is
known not to be, so a stop string is never shown, even when it arrives split across tokens."""


class StopStrings:
    def __init__(self, stops=()):
        self.stops = [s for s in stops if s]
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
