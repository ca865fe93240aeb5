"""The engine worker: one thread owns the model and its sessions and answers jobs one at a time, in arrival order.

Chat jobs run on one generation Session and completion jobs on another, each with its own KV cache, so the prefix
a request shares with the previous request of its kind (the system prompt, the earlier turns of a conversation) is
not prefilled again. A job streams Events through its `emit` callback (called on the worker thread): a Delta when
the first token is generated (its text may be empty) and for every later token that completes some text (only for
a streamed job), then Done (with the whole text), or Failed. Failed.started tells whether a Delta was sent before
it, so the HTTP side knows whether it may still answer with an ordinary JSON error.

The queue holds at most `max_queue` waiting jobs besides the running one; submit() refuses more (429). A job's
`cancel()` (the client went away) stops it after the current token, or skips it if it has not started.
"""
import sys
import threading
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from petit.chat.template import TemplateError
from petit.generation.sample import Sampler, resolve
from petit.generation.session import Params, Stats
from petit.server.schema import ApiError


@dataclass
class Delta:
    text: str


@dataclass
class Done:
    text: str                 # the whole reply
    finish_reason: str        # "stop" or "length"
    usage: dict
    timings: dict


@dataclass
class Failed:
    error: ApiError
    started: bool             # a Delta was emitted before the failure


@dataclass
class Job:
    kind: str                 # "chat" or "completion"
    emit: Callable[[object], None]
    sampler: Sampler
    max_tokens: int
    stop: list
    messages: list | None = None
    prompt: str | None = None
    stream: bool = True       # False: no Deltas, only the Done (one hand-over between threads, not one per token)
    cancelled: bool = False   # a plain flag: set from any thread (even a signal handler), read between tokens
    stats: object = field(default=None, repr=False)   # the reply's Stats once the job ran

    def cancel(self) -> None:
        self.cancelled = True


def _internal(e: BaseException) -> ApiError:
    return ApiError(500, f"internal error: {type(e).__name__}: {e}")


class ServerWorker:
    """Loads the model on its worker thread, then serves jobs.

    Args:
        path: the .petit model file; weights: convert the weights at load (as `petit chat --weights`); mmap:
            False reads the weights into memory (as `--no-mmap`).
        sampler: model -> the launch Sampler (flags resolved against the model's generation defaults); each
            request's fields override its settings. Default: the model's generation defaults.
        system: a system prompt for chat requests that bring none. template: a chat template instead of the
            model's; raw: no chat endpoint (as `--format raw`).
        max_tokens, stop: the defaults of requests that give none.
        n_ctx, kv_type, reuse_cache: as for petit.generation.Session; drop_old_turns: as for its Params.
        max_queue: jobs that may wait besides the running one.
        on_stats: called with (job, Stats) after each job (for `--stats`).
    """

    def __init__(self, path, *, weights=None, sampler: Callable | None = None, system: str | None = None,
                 template: str | None = None, raw: bool = False, max_tokens: int = 256, stop=(),
                 n_ctx: int | None = None, kv_type: str | None = None, drop_old_turns: bool = False,
                 reuse_cache: bool = True, max_queue: int = 16, on_stats: Callable | None = None, mmap: bool = True):
        self.path, self.weights, self.mmap = str(path), weights, mmap
        self._make_sampler = sampler or (lambda model: Sampler(**resolve({}, model.metadata.get("generation"))))
        self.system, self.template, self.raw = system, template, raw
        self.max_tokens, self.stop = max_tokens, list(stop)
        self.n_ctx, self.kv_type, self.drop_old_turns, self.reuse_cache = n_ctx, kv_type, drop_old_turns, reuse_cache
        self.max_queue, self.on_stats = max_queue, on_stats
        self.state = "loading"               # -> "ready" | "failed"; stopping is separate
        self.load_error: BaseException | None = None
        self.model = self.sampler = self.n_ctx_effective = None
        self._chat = self._raw = None
        self._waiting: deque[Job] = deque()
        self._cond = threading.Condition()
        self._running: Job | None = None
        self._stopping = False               # a plain flag, safe to set from a signal handler
        self._ready = threading.Event()
        self.jobs_done = 0
        self.last_stats = None
        self._thread = threading.Thread(target=self._main, name="petit-engine")

    # ---- life cycle ----
    def start(self) -> "ServerWorker":
        """Load the model and serve jobs, on the worker thread (a second call does nothing)."""
        if self._thread.ident is None:
            self._thread.start()
        return self

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait for the load to end; True when the model is ready."""
        self._ready.wait(timeout)
        return self.state == "ready"

    def request_stop(self) -> None:
        """Stop soon: the running job ends after its current token, the waiting ones are failed (503). Only sets
        flag, so it is safe from a signal handler; an idle worker notices within a quarter second."""
        self._stopping = True

    def close(self, timeout: float | None = 10.0) -> None:
        """request_stop() and wait for the worker thread to end."""
        self.request_stop()
        with self._cond:
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # ---- the HTTP side ----
    @property
    def has_chat(self) -> bool:
        return self._chat is not None

    @property
    def queued(self) -> int:
        return len(self._waiting)

    @property
    def busy(self) -> bool:
        return self._running is not None

    def make_sampler(self, overrides: dict) -> Sampler:
        """The launch sampler's settings with a request's overrides; a bad value is a 400 naming the field."""
        base = self.sampler
        settings = {"temperature": base.temperature, "top_k": base.top_k, "top_p": base.top_p, "min_p": base.min_p,
                    "repetition_penalty": base.repetition_penalty, "frequency_penalty": base.frequency_penalty,
                    "presence_penalty": base.presence_penalty, "seed": base.seed}
        settings.update(overrides)
        try:
            return Sampler(**settings)
        except ValueError as e:
            name = str(e).split()[0]
            raise ApiError(400, f"Invalid value for '{name}': {e}.", param=name, code="invalid_value") from None

    def submit(self, job: Job) -> None:
        """Queue a job. Raises ApiError: 503 while loading or stopping, 429 when the queue is full."""
        if self.state == "loading":
            raise ApiError(503, "The model is loading; retry shortly.", code="model_loading",
                           headers={"Retry-After": "1"})
        with self._cond:                     # _stopping is read under the lock the worker drains the queue under
            if self.state != "ready" or self._stopping:
                raise ApiError(503, "The server is shutting down.", code="unavailable")
            if len(self._waiting) + (self._running is not None) > self.max_queue:     # the running one + waiting
                raise ApiError(429, f"The server is busy: {len(self._waiting)} requests are already waiting "
                                    f"(the queue holds {self.max_queue}). Retry shortly.",
                               code="rate_limit_exceeded", headers={"Retry-After": "1"})
            self._waiting.append(job)
            self._cond.notify()

    # ---- the worker thread ----
    def _main(self) -> None:
        try:
            self._load()
        except BaseException as e:           # a bad file: the server reports it and exits
            self.load_error, self.state = e, "failed"
            self._ready.set()
            return
        self.state = "ready"
        self._ready.set()
        while True:
            with self._cond:
                while not self._waiting and not self._stopping:
                    self._cond.wait(0.25)
                if self._stopping:
                    waiting, self._waiting = list(self._waiting), deque()
                    break
                job = self._running = self._waiting.popleft()
            try:
                self._run(job)
            finally:
                self._running = None
        for job in waiting:
            job.emit(Failed(ApiError(503, "The server is shutting down.", code="unavailable"), False))

    def _load(self) -> None:
        import petit
        from petit.generation.session import Session
        model = self.model = petit.load(self.path, weights=self.weights, mmap=self.mmap)
        if model.tokenizer is None:
            raise ValueError(f"{self.path}: the file has no tokenizer, so it cannot be served")
        self.sampler = self._make_sampler(model)
        if not self.raw and (self.template or model.metadata.get("chat_template")):
            self._chat = Session(model, template=self.template, n_ctx=self.n_ctx, kv_type=self.kv_type,
                                 reuse_cache=self.reuse_cache)
        self._raw = Session(model, n_ctx=self.n_ctx, kv_type=self.kv_type, reuse_cache=self.reuse_cache)
        self.n_ctx_effective = self._raw.n_ctx

    def _messages(self, job: Job) -> list:
        if self.system and job.messages[0]["role"] != "system":
            return [{"role": "system", "content": self.system}] + job.messages
        return job.messages

    def _begin(self, job: Job):
        """The reply generator of a job, given the request's own conversation and parameters (nothing runs until
        the first next())."""
        params = Params(sampler=job.sampler, max_tokens=job.max_tokens, stop=job.stop,
                        drop_old_turns=self.drop_old_turns)
        if job.kind == "chat":
            if self._chat is None:
                raise ApiError(400, "This model has no chat template (or the server runs with --format raw): "
                                    "use /v1/completions.", param="messages", code="no_chat_template")
            return self._chat.reply(self._messages(job), params)
        return self._raw.complete(job.prompt, params)

    def _run(self, job: Job) -> None:
        if job.cancelled:                    # the client left while waiting
            return
        started, text, stats = False, [], None
        try:
            reply = self._begin(job)
            try:
                for step in reply:
                    stats = step.stats
                    text.append(step.text)
                    if job.stream and (step.text or not started):
                        job.emit(Delta(step.text))
                    started = True
                    if job.cancelled or self._stopping:
                        break
            finally:
                reply.close()                # the session records what was generated, also when stopped early
        except ApiError as e:
            job.emit(Failed(e, started))
            return
        except Exception as e:               # noqa: BLE001 - every failure becomes an answer, the worker lives on
            error = _internal(e) if started else self._explain(job, e)
            started = started and job.stream
            if error.status >= 500:
                traceback.print_exc(file=sys.stderr)
            job.emit(Failed(error, started))
            return
        if stats is None:                    # no token at all (max_tokens 0)
            stats = Stats(finish_reason="length")
        job.stats = self.last_stats = stats
        self.jobs_done += 1
        if self.on_stats is not None:
            self.on_stats(job, stats)
        if self._stopping and stats.finish_reason == "cancelled":
            job.emit(Failed(ApiError(503, "The server is shutting down.", code="unavailable"), started))
            return
        usage = {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.generated_tokens,
                 "total_tokens": stats.prompt_tokens + stats.generated_tokens,
                 "prompt_tokens_details": {"cached_tokens": stats.reused_tokens}}
        timings = {"prompt_n": stats.prompt_tokens - stats.reused_tokens, "cache_n": stats.reused_tokens,
                   "predicted_n": stats.generated_tokens, "ttft_ms": round(1000 * stats.time_to_first_token, 3),
                   "prompt_per_second": round(stats.prefill_tokens_per_s, 1),
                   "predicted_per_second": round(stats.decode_tokens_per_s, 1)}
        job.emit(Done("".join(text), stats.finish_reason, usage, timings))

    def _explain(self, job: Job, e: Exception) -> ApiError:
        """Why a job failed before its first token: a template error, a prompt that does not fit, or a bug."""
        if isinstance(e, TemplateError):
            return ApiError(400, str(e), param="messages", code="template_error")
        if not isinstance(e, ValueError):
            return _internal(e)
        tok = self.model.tokenizer
        try:
            if job.kind == "chat":
                n = len(self._chat.prompt_ids(self._messages(job)))
            else:
                n = len(tok.encode(job.prompt, add_bos=tok.adds_bos))
        except ValueError as e2:             # e.g. a character the tokenizer cannot encode
            return ApiError(400, str(e2), param="messages" if job.kind == "chat" else "prompt")
        if n >= self.n_ctx_effective:
            what, param = ("messages", "messages") if job.kind == "chat" else ("prompt", "prompt")
            return ApiError(400, f"This model's maximum context length is {self.n_ctx_effective} tokens. However, "
                                 f"your {what} resulted in {n} tokens (at most {self.n_ctx_effective - 1} fit, to "
                                 f"leave room for the reply). Please reduce the length of the {what}.",
                            param=param, code="context_length_exceeded")
        return _internal(e)
