"""The `petit chat` loop: read a line, run it as a /command or send it to the model, stream the reply.

Replies go to stdout and everything else (the prompt, notices, errors) to stderr, so `petit chat < questions.txt >
answers.txt` holds the replies only. When stdin is a terminal, readline (where Python has it) gives line editing and
a history kept across runs in the user's data folder.

The loop owns the conversation (the messages, or in raw mode the transcript's token ids) and hands it, with the
generation parameters, to the Session on every line; the Session keeps only the KV cache.
"""
import os
import sys
from contextlib import closing

from petit.generation.session import ContextFullError

HELP = """commands:
  /help          this list
  /reset         start the conversation over (the system prompt stays)
  /system        show the system prompt
  /system TEXT   set the system prompt and start over
  /exit, /quit   leave (Ctrl+D too)
  //TEXT         send "/TEXT" to the model (a message that starts with a slash)
Ctrl+C stops the reply in progress."""
HISTORY_FILE = "chat_history"
HISTORY_LENGTH = 1000


def data_dir() -> str:
    """The folder the desktop app keeps its data in (app/paths.py: $PETIT_DATA_DIR, else Qt's AppDataLocation for
    organisation and application "Petit"), found without Qt."""
    if os.environ.get("PETIT_DATA_DIR"):
        return os.environ["PETIT_DATA_DIR"]
    if sys.platform == "win32":
        base = os.environ.get("APPDATA") or os.path.join(os.path.expanduser("~"), "AppData", "Roaming")
    elif sys.platform == "darwin":
        base = os.path.join(os.path.expanduser("~"), "Library", "Application Support")
    else:
        base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "Petit", "Petit")


class _History:
    """readline's line editing and a persistent history, when stdin is a terminal and Python has readline."""

    def __init__(self):
        self.readline = None
        if not sys.stdin.isatty():
            return
        try:
            import readline
        except ImportError:              # Windows without pyreadline: plain input, no history
            return
        self.readline = readline
        self.path = os.path.join(data_dir(), HISTORY_FILE)
        readline.set_history_length(HISTORY_LENGTH)
        try:
            readline.read_history_file(self.path)
        except (FileNotFoundError, PermissionError):
            pass                         # the first run, or a folder we may not read: start with no history
        except OSError as e:
            print(f"petit chat: cannot read the history {self.path}: {e.strerror or e}", file=sys.stderr)

    def save(self) -> None:
        if self.readline is None:
            return
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self.readline.write_history_file(self.path)
        except OSError as e:
            print(f"petit chat: cannot save the history to {self.path}: {e.strerror or e}", file=sys.stderr)


def _read_line(history: _History) -> str | None:
    """The next line without its newline; None at the end of input (Ctrl+D)."""
    if history.readline is not None and sys.stdout.isatty():
        try:
            return input("> ")           # readline draws the prompt itself, to redraw it while editing
        except EOFError:
            return None
    if sys.stdin.isatty():
        print("> ", end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    return line.rstrip("\n") if line else None


class ChatLoop:
    """The loop over one generation Session: a chat (its messages, after an optional system prompt), or with `raw`
    the completion notebook (each line is appended to one running transcript, the model's continuations included,
    and the model continues it); run() returns the exit code."""

    def __init__(self, session, params, *, raw: bool, system: str | None = None, stats: bool = False, out=None,
                 err=None):
        self.session, self.params, self.raw, self.stats = session, params, raw, stats
        self.out, self.err = out or sys.stdout, err or sys.stderr
        self.messages: list[dict] = []           # the chat, a system prompt first
        self.transcript_ids: list[int] = []      # raw mode's running transcript
        self.last_stats = None                   # of the last reply
        self.reset(system)

    def reset(self, system: str | None = None) -> None:
        """Forget the conversation (keeping, or replacing, the system prompt)."""
        messages = self.messages
        old = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
        system = old if system is None else system
        self.messages = [{"role": "system", "content": system}] if system else []
        self.transcript_ids = []

    def say(self, text: str) -> None:
        print(text, file=self.err, flush=True)

    def run(self) -> int:
        history = _History()
        try:
            while True:
                try:
                    line = _read_line(history)
                except KeyboardInterrupt:        # Ctrl+C at the prompt: a fresh prompt, not an exit
                    print(file=self.err)
                    continue
                if line is None:
                    if sys.stdin.isatty():       # Ctrl+D: the shell's prompt on a line of its own
                        print(file=self.err)
                    return 0
                text = line.strip()
                if text.startswith("/") and not text.startswith("//"):
                    if self.command(text) == "exit":
                        return 0
                elif text:
                    self.reply(line[line.index("/") + 1:] if text.startswith("//") else line)
        finally:
            history.save()

    def command(self, text: str) -> str | None:
        name, _, arg = text.partition(" ")
        arg = arg.strip()
        if name in ("/exit", "/quit", "/reset", "/help") and arg:
            self.say(f"petit chat: {name} takes no text (/help lists the commands)")
        elif name in ("/exit", "/quit"):
            return "exit"
        elif name == "/help":
            self.say(HELP)
        elif name == "/reset":
            self.reset()
            self.say("(conversation reset)")
        elif name == "/system":
            self.system(arg)
        else:
            self.say(f"petit chat: unknown command {name} (/help lists the commands; //TEXT sends a message "
                     f"that starts with a slash)")
        return None

    def system(self, arg: str) -> None:
        if self.raw:
            self.say("(raw mode: no system prompt; --format picks a chat format)" if not arg else
                     "petit chat: raw mode has no system prompt (--format picks a chat format)")
            return
        if arg:
            self.reset(arg)
            self.say("(conversation reset)")
            return
        messages = self.messages
        current = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
        self.say(f"(system prompt: {current})" if current else "(no system prompt)")

    def _steps(self, text: str):
        """The reply's Steps and what to remember once it ends (given the generated tokens and the reply text)."""
        session, tok = self.session, self.session.tokenizer
        if self.raw:
            # the first line starts the transcript with a BOS when the tokenizer adds one to plain text
            ids = self.transcript_ids + tok.encode(text, add_bos=tok.adds_bos and not self.transcript_ids)
            if len(ids) == len(self.transcript_ids):
                raise ValueError("nothing to continue: the text is empty")

            def remember(tokens, reply, stats):
                self.transcript_ids = ids + [t for t in tokens if t not in session.text_stop_ids]
            return session.complete(ids, self.params), remember
        messages = self.messages + [{"role": "user", "content": text}]

        def remember(tokens, reply, stats):
            dropped = stats.dropped_messages if stats is not None else 0
            first = stats.dropped_at if dropped else 0          # after the system prompt, or the turns --n-keep kept
            self.messages = messages[:first] + messages[first + dropped:] + [{"role": "assistant", "content": reply}]
        return session.reply(messages, self.params), remember

    def reply(self, text: str) -> None:
        session, stats, tokens, parts = self.session, None, [], []
        told = False

        def tell_dropped():
            n = stats.dropped_turns if stats is not None else 0
            if n:
                turns = "the oldest turn" if n == 1 else f"the {n} oldest turns"
                self.say(f"[dropped {turns} to fit the {session.n_ctx}-token context]")
        remember = None
        try:
            steps, remember = self._steps(text)
            with closing(steps):                 # closed, the Session's statistics are complete
                for step in steps:
                    stats = step.stats
                    tokens.append(step.token)
                    parts.append(step.text)
                    if not told:                 # before the reply: the model no longer sees those turns
                        tell_dropped()
                        told = True
                    if step.text:
                        self.out.write(step.text)
                        self.out.flush()
        except KeyboardInterrupt:                # Ctrl+C stops this reply; the conversation keeps what was said
            print(" [stopped]", file=self.err)
        except ValueError as e:                  # a full context, a template error: say so, keep the conversation
            alone = isinstance(e, ContextFullError) and self.params.drop_old_turns and not self.raw
            self.say(f"petit chat: {e}" + (", even with only this message" if alone else " (/reset starts over)"))
            return
        if remember is not None:
            remember(tokens, "".join(parts), stats)
        self.last_stats = stats
        if not told:
            tell_dropped()
        self.out.write("\n")
        self.out.flush()
        if stats is not None and stats.context_full:
            self.say(f"[the reply was cut short: the {session.n_ctx}-token context is full]")
        if self.stats and stats is not None:
            self.say(str(stats))
