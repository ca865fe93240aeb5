"""The generation worker: a QObject living on its own QThread that owns the model and its generation Session.

Its slots run on that thread, one at a time, in the order they were requested; the GUI thread only sends it
requests (through queued signals) and receives value-type results, so it never waits on the engine. Signals are
named for past events (`tokens_decoded`, `finished`, `failed`, `model_changed`, `measured`, `progressed`).

Cancelling is by request id and thread-safe: `cancel(before)` stops every request whose id is below `before`,
within one token (Session.cancel for the one in progress, a check between tokens, and a check when a queued
request starts).

The conversation is the caller's (the chat's stored messages): every request passes it, with its parameters, to
`Session.reply`; the Session keeps only the KV cache of what it last saw.
"""
from contextlib import closing
from dataclasses import asdict

from PySide6.QtCore import QObject, Signal, Slot

from app.remote.api import ChatStream, RemoteError, request_body
from app.remote.model import RemoteModel
from app.tools.formats import model_message, prepare_local, read_calls
from petit.generation import Params, Sampler, Session


class GenerationWorker(QObject):
    model_changed = Signal(object)            # ModelInfo of the model now in use
    tokens_decoded = Signal(int, str)         # request id, text of the next token(s)
    finished = Signal(int, str, object)       # request id, the whole reply, a result dict (see _result)
    failed = Signal(int, str)                 # request id, the engine's message
    measured = Signal(int, int, int)          # request id, context tokens used, context size
    progressed = Signal(int, int, int)        # request id, context tokens used so far by the reply's turn, size

    def __init__(self):
        super().__init__()
        self.model = None
        self.session: Session | None = None
        self._session_key = self._speculation_key = None
        self._draft = None                        # the draft model speculation loaded (its own file)
        self._cancel_before = 0
        self._stream: ChatStream | None = None    # the remote reply in progress

    def cancel(self, before: int) -> None:
        """Stop every request with an id below `before`. Safe from any thread."""
        if before > self._cancel_before:
            self._cancel_before = before
        session = self.session
        if session is not None:
            session.cancel()
        stream = self._stream
        if stream is not None:
            stream.abort()

    def _cancelled(self, request_id: int) -> bool:
        return request_id < self._cancel_before

    @Slot(object, object)
    def set_model(self, model, info) -> None:
        """Use `model` from now on (the old one is closed: nothing else holds it)."""
        old, self.model, self.session, self._session_key = self.model, model, None, None
        self._close_draft()
        if old is not None and old is not model:
            old.close()
        self.model_changed.emit(info)

    def close_model(self) -> None:
        self._close_draft()
        if self.model is not None:
            self.model.close()
        self.model, self.session = None, None

    def _session(self, options: dict) -> Session:
        """The session for these options: rebuilt when the template, context size or KV type change (a new KV
        cache); otherwise the same one, so the cache of earlier turns is reused."""
        if self.model is None:
            raise ValueError("no model is loaded")
        key = (options.get("template"), options.get("n_ctx"), options.get("kv_type"))
        if self.session is None or key != self._session_key:
            self.session = Session(self.model, template=key[0], n_ctx=key[1], kv_type=key[2])
            self._session_key, self._speculation_key = key, None
        self._speculate(options)
        return self.session

    def _speculate(self, options: dict) -> None:
        """Set the session's speculative decoding to the options' (None / "lookup" / "model" with `draft_model`);
        a draft model is loaded once and kept while the option and the session stay. Raises ValueError (shown to
        the user) when the draft cannot draft for this model."""
        from petit.generation import LookupDrafter, Speculation, check_rollback, load_draft
        kind = options.get("speculation")
        key = (kind, options.get("draft_model") if kind == "model" else None)
        if key == self._speculation_key:
            return
        session, self._speculation_key = self.session, None
        session.speculation = None
        self._close_draft()
        if kind is None:
            self._speculation_key = key
            return
        check_rollback(self.model, "model")
        if kind == "lookup":
            drafter = LookupDrafter()
        else:
            if not key[1]:
                raise ValueError("speculative decoding with a draft model: choose the draft model's file in "
                                 "Settings (or turn speculation off)")
            drafter = load_draft(key[1], self.model, self.model.path, session.n_ctx)
            self._draft = drafter.model
        session.speculation = Speculation(drafter)
        self._speculation_key = key

    def _close_draft(self) -> None:
        if self._draft is not None:
            self._draft.close()
            self._draft = None

    @staticmethod
    def _params(options: dict) -> Params:
        return Params(sampler=Sampler(**options["sampler"]), max_tokens=options["max_tokens"],
                      drop_old_turns=options["drop_old_turns"], ctx_shift=options.get("ctx_shift", False),
                      n_keep=options.get("n_keep", 0))

    @staticmethod
    def _history(options: dict, history: list) -> list:
        system = options.get("system")
        return ([{"role": "system", "content": system}] if system else []) + [model_message(m) for m in history]

    def _messages(self, options: dict, history: list, text: str) -> list:
        """The conversation to answer: `text` as the last user message, unless it is empty after tool results
        (the model answers them)."""
        messages = self._history(options, history)
        if text or not history or history[-1]["role"] != "tool":
            messages.append({"role": "user", "content": text})
        return messages

    @Slot(int, object, str, object, str)
    def generate(self, request_id: int, history: list, text: str, options: dict, partial: str = "") -> None:
        """Answer `text` after `history` (a list of {"role", "content"}); emits tokens_decoded as the reply
        decodes, then finished (also when cancelled: with the partial reply) or failed. With `partial`, the reply
        goes on from that text (Continue): only the new text is decoded, and the whole reply is `partial` + it."""
        if self._cancelled(request_id):
            self.finished.emit(request_id, partial, {"finish_reason": "cancelled", "generated_tokens": 0})
            return
        if isinstance(self.model, RemoteModel):
            self._generate_remote(request_id, history, text, options, partial)
            return
        stats, parts, fmt = None, [partial], None
        try:
            session = self._session(options)
            messages, params = self._messages(options, history, text), self._params(options)
            if options.get("tools"):
                messages, fmt = prepare_local(session, messages, params, options)
            with closing(session.reply(messages, params, partial=partial or None)) as steps:
                for count, step in enumerate(steps, 1):
                    stats = step.stats
                    self.progressed.emit(request_id, stats.prompt_tokens + count, session.n_ctx)
                    if step.text:
                        parts.append(step.text)
                        self.tokens_decoded.emit(request_id, step.text)
                    if self._cancelled(request_id):
                        break
        except Exception as e:          # the engine's message (context full, template error...) for the user
            self.failed.emit(request_id, str(e) or type(e).__name__)
            return
        reply, result = "".join(parts), self._result(session, stats)
        if fmt is not None and not self._cancelled(request_id):     # a stopped reply's calls are not made
            reply, result["tool_calls"] = read_calls(fmt, reply)
        self.finished.emit(request_id, reply, result)

    def _generate_remote(self, request_id: int, history: list, text: str, options: dict, partial: str,
                         refused: str = "") -> None:
        """The same request, answered by an OpenAI-compatible server. A failure before the first token is a
        failure; after it, the text received is kept and the result says what cut it off. A server that rejects
        the tools offered (a model without tool support) is asked again without them (`refused`: what it said)."""
        messages = self._messages(options, history, text)
        if partial:
            messages.append({"role": "assistant", "content": partial})
        stream = ChatStream(self.model.backend, request_body(self.model.model, messages, options))
        self._stream, parts = stream, [partial]
        try:
            if self._cancelled(request_id):
                stream.abort()
            for piece in stream:
                parts.append(piece)
                self.tokens_decoded.emit(request_id, piece)
                if self._cancelled(request_id):
                    stream.abort()
        except RemoteError as e:
            if len(parts) == 1 and options.get("tools") and e.status in (400, 422) and not self._cancelled(request_id):
                self._stream = None
                plain = {k: v for k, v in options.items() if k not in ("tools", "tool_choice")}
                self._generate_remote(request_id, history, text, plain, partial, str(e))
                return
            if len(parts) == 1:
                self.failed.emit(request_id, str(e))
                return
            result = stream.stats()
            result.update(finish_reason="error", error=str(e))
            self.finished.emit(request_id, "".join(parts), result)
            return
        except Exception as e:          # an unexpected answer: said, never a traceback
            self.failed.emit(request_id, f"{type(e).__name__}: {e}")
            return
        finally:
            self._stream = None
        result = stream.stats()
        if refused:
            result["tools_refused"] = refused
        if self._cancelled(request_id):
            result["finish_reason"] = "cancelled"
        else:                                # a stopped reply's calls are not made
            result["tool_calls"] = stream.tool_calls
        result["context_used"] = result.get("prompt_tokens", 0) + result["generated_tokens"]
        self.finished.emit(request_id, "".join(parts), result)

    @staticmethod
    def _result(session: Session, stats) -> dict:
        """The reply's Stats as a dict, with the context figures the status bar shows."""
        stats = asdict(stats) if stats is not None else {"finish_reason": "length", "generated_tokens": 0}
        stats["context_used"] = stats.get("prompt_tokens", 0) + stats["generated_tokens"]
        stats["context_size"] = session.n_ctx
        stats.setdefault("dropped_messages", 0)
        return stats

    @Slot(int, object, object)
    def measure(self, request_id: int, history: list, options: dict) -> None:
        """How many context tokens the conversation takes (rendered with the template), for the status bar; a
        remote model's are counted by its server (the reply's usage)."""
        if isinstance(self.model, RemoteModel):
            return
        try:
            session = self._session(options)
            messages = self._history(options, history)
            used = len(session.prompt_ids(messages)) if messages else 0
            self.measured.emit(request_id, used, session.n_ctx)
        except Exception:               # a template that rejects this history: the next send reports it
            pass
