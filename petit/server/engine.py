"""The engine worker: one thread owns the model and runs the forward passes of every reply in progress together.

Up to `max_batch` jobs (default 8) generate at once, each on a generation Session of its own (its own KV cache and
sampler), in a thread of its own that runs the ordinary token loop (petit.generation). Their forward passes do not
run in those threads: `model.forward` hands the pass to the worker and waits. Once every reply in progress has asked
for its next pass (or ended), the worker runs them all as one `Model.forward_batch` step, which reads the weights
once for all of them, and hands each its logits. A new job joins at the next step (its prompt's prefill shares the
step with the others' decode); a job that ends or whose client leaves drops out of the next. A sequence gets the same
logits in a batch as alone, so a reply is the one it would be alone (greedy: the same text; seeded: the same draws).

Sessions (their KV caches) outlive their jobs: a new job takes the idle one used last for its kind (chat or
completion), so the prefix it shares with the previous request (the system prompt, the earlier turns of a
conversation) is not prefilled again when requests come one at a time. At most `max_batch` sessions exist, and
fewer when `max_cache_mib` (default 2048) cannot hold that many KV caches of the context's size (always at least
one); a job beyond that waits in the queue until a reply ends.

A job streams Events through its `emit` callback (called on its generation thread): a Delta when the first token
is generated (its text may be empty) and for every later token that completes some text (only for a streamed job),
then Done (with the whole text), or Failed. A job that asks for log-probabilities, biases the logits or must match a
grammar (response_format, a forced tool call) samples through a petit.generation.logits.Shaped sampler; its
Deltas and Done then carry the tokens' log-probabilities. Failed.started tells whether a Delta was sent before it, so
the HTTP side knows whether it may still answer with an ordinary JSON error.

The queue holds at most `max_queue` waiting jobs besides the running ones; submit() refuses more (429). A job's
`cancel()` (the client went away) stops it after the current token, or skips it if it has not started.
"""
import sys
import threading
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from petit.chat.template import TemplateError
from petit.generation.logits import Shaped
from petit.generation.sample import Sampler, resolve
from petit.generation.session import ContextFullError, Params, Stats
from petit.generation.speculative import (LookupDrafter, Speculation, check_rollback, load_draft_model,
                                          make_drafter)
from petit.server import tools as tool_formats
from petit.server.errors import invalid_value
from petit.server.schema import ApiError
from petit.server.sse import TokenInfo


@dataclass
class Delta:
    text: str
    logprobs: list | None = None    # the tokens this text completes (and those before it that completed none)


@dataclass
class Done:
    text: str                 # the whole reply
    finish_reason: str        # "stop" or "length"
    usage: dict
    timings: dict
    logprobs: list | None = None    # every token's (logprobs requested), as petit.server.sse.TokenInfo
    pending: list | None = None     # a stream's tokens not yet sent with a Delta
    stats: object = None            # the reply's petit.generation.session.Stats


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
    logprobs: bool = False    # report each token's log-probability, with top_logprobs alternatives
    top_logprobs: int = 0
    logit_bias: dict | None = None
    grammar: str | None = None      # a compiled grammar the reply must match (response_format, a forced tool call)
    tools: list | None = None       # for the chat template (tool_choice other than "none")
    speculative: dict | None = None  # the request's {"draft", "draft_max", "draft_min"} (None: the server's)
    lora: list | None = None  # the request's [{"id", "scale"}, ...] (None: the server's default adapter)
    cancelled: bool = False   # a plain flag: set from any thread (even a signal handler), read between tokens
    stats: object = field(default=None, repr=False)   # the reply's Stats once the job ran
    session: object = field(default=None, repr=False)   # the generation Session it runs on, while it runs
    shaped: object = field(default=None, repr=False)    # the sampler the reply draws with (a Shaped one or not)

    def cancel(self) -> None:
        self.cancelled = True


class _Forward:
    """A generation's request for a forward pass (of the target or the draft model), answered by the worker's next
    step."""

    def __init__(self, model, ids, cache, all_logits: bool, adapter=None):
        self.model, self.ids, self.cache, self.all_logits = model, ids, cache, all_logits
        self.adapter = adapter               # (index, scale) of the run-time adapter the pass runs with, or None
        self.logits = self.error = None
        self.done = False


class _BatchedModel:
    """The model as the generations see it: forward() waits for the worker to run the pass in one step with the
    other generations' (ServerWorker._step); everything else is the model itself."""

    def __init__(self, model, worker: "ServerWorker"):
        self._model, self._worker = model, worker
        self.adapter = None                  # the adapter of the job its session runs (ServerWorker._begin)

    def __getattr__(self, name):
        return getattr(self._model, name)

    def forward(self, token_ids, cache, all_logits: bool = False):
        return self._worker._forward(_Forward(self._model, token_ids, cache, all_logits, self.adapter))


def _internal(e: BaseException) -> ApiError:
    return ApiError(500, f"internal error: {type(e).__name__}: {e}")


class ServerWorker:
    """Loads the model on its worker thread, then serves jobs.

    Args:
        path: the .petit model file; weights: convert the weights at load (as `petit chat --weights`); mmap:
            False reads the weights into memory (as `--no-mmap`); repack: as petit.load's (False: `--no-repack`).
        sampler: model -> the launch Sampler (flags resolved against the model's generation defaults); each
            request's fields override its settings. Default: the model's generation defaults.
        system: a system prompt for chat requests that bring none. template: a chat template instead of the
            model's; raw: no chat endpoint (as `--format raw`).
        max_tokens, stop: the defaults of requests that give none.
        n_ctx, kv_type, reuse_cache: as for petit.generation.Session; drop_old_turns, ctx_shift, n_keep: as for its
            Params.
        max_queue: jobs that may wait besides the running ones.
        max_batch: the most jobs that generate together (one forward step for all of them); more wait in the queue.
        max_cache_mib: the KV caches' memory budget: fewer jobs run together when it cannot hold max_batch caches.
        on_stats: called with (job, Stats) after each job (for `--stats`).
        prepare: called with the model once it has loaded, before anything runs (`petit serve --gpu` attaches the
            OpenCL offload there).
        lookup: decode speculatively with prompt lookup by default (`--lookup`).
        draft: a draft model (`--draft MODEL` or `self:TYPE`), loaded once beside the model; requests then draft
            with it by default. Its passes run on the worker too, batched with the other requests' draft passes.
        draft_max, draft_min: the draft lengths of requests that give none.
        A request's `speculative` field ({"draft": "lookup" | "model" | "none", "draft_max", "draft_min"}) chooses
        for itself; "model" needs `draft`.
        adapters: LoRA adapter files [(path, scale)] (`--lora`, issue 33), read once at load; the first runs by default
            at its scale, and a request's `lora` field ([{"id": i, "scale": s}], llama.cpp's server's) chooses one
            of them or none. A step runs each adapter's passes together; a session whose cache was computed with
            another adapter prefills its next prompt from the start.

    After a run, `steps` counts the forward steps, `shared_steps` those that ran more than one job, and
    `largest_batch` is the most jobs one step ran.
    """

    def __init__(self, path, *, weights=None, sampler: Callable | None = None, system: str | None = None,
                 template: str | None = None, raw: bool = False, max_tokens: int = 256, stop=(),
                 n_ctx: int | None = None, kv_type: str | None = None, drop_old_turns: bool = False,
                 reuse_cache: bool = True, max_queue: int = 16, max_batch: int = 8, max_cache_mib: int = 2048,
                 on_stats: Callable | None = None, mmap: bool = True, repack: bool | None = None,
                 ctx_shift: bool = False, n_keep: int = 0, lookup: bool = False, draft: str | None = None,
                 draft_max: int = 8, draft_min: int = 1, prepare: Callable | None = None, adapters=()):
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch must be a positive integer, got {max_batch!r}")
        self.path, self.weights, self.mmap, self.repack = str(path), weights, mmap, repack
        self._make_sampler = sampler or (lambda model: Sampler(**resolve({}, model.metadata.get("generation"))))
        self.system, self.template, self.raw = system, template, raw
        self.max_tokens, self.stop = max_tokens, list(stop)
        self.n_ctx, self.kv_type, self.drop_old_turns, self.reuse_cache = n_ctx, kv_type, drop_old_turns, reuse_cache
        self.ctx_shift, self.n_keep = ctx_shift, n_keep
        self.max_queue, self.on_stats = max_queue, on_stats
        self._prepare = prepare
        if not 1 <= draft_min <= draft_max:
            raise ValueError(f"need 1 <= draft_min <= draft_max, got {draft_min}, {draft_max}")
        self.draft, self.draft_max, self.draft_min = draft, draft_max, draft_min
        self.default_draft = "model" if draft is not None else "lookup" if lookup else "none"
        self.draft_model = self._self_draft = None
        self._drafters: dict[int, dict] = {}   # id(session) -> {"lookup": ..., "model": ...}
        self.max_batch, self.max_cache_mib = max_batch, max_cache_mib
        self.adapter_files = [(str(p), float(scale)) for p, scale in adapters]
        self._adapters: list = []            # read at load
        self._adapter_now = None             # the (index, scale) attached to the model, or None
        self.state = "loading"               # -> "ready" | "failed"; stopping is separate
        self.load_error: BaseException | None = None
        self.model = self.sampler = self.n_ctx_effective = None
        self._chat = self._raw = None
        self._waiting: deque[Job] = deque()
        self._cond = threading.Condition()
        self._active: dict[int, Job] = {}      # id -> the jobs generating (each with its .session)
        self._idle: list = []                  # (the kind it last served, Session), the most recent last
        self._n_sessions = self.slots = 0
        self._pending: list[_Forward] = []     # passes asked for the next step
        self._thinking = 0                     # active generations not waiting in _forward
        self._threads: list[threading.Thread] = []
        self.steps = self.shared_steps = self.largest_batch = 0
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
        """request_stop() and wait for the worker thread (and the generations) to end."""
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
        return bool(self._active)

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
            if len(self._waiting) + bool(self._active) > self.max_queue:     # waiting, + 1 when some run
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
                while True:
                    if not self._stopping:
                        self._admit()
                    if self._pending and self._thinking == 0:   # every generation waits for its pass: a step
                        batch, self._pending = self._pending, []
                        break
                    if self._stopping and not self._active:
                        batch = None
                        break
                    self._cond.wait(0.25)
                if batch is None:
                    waiting, self._waiting = list(self._waiting), deque()
                    break
            self._step(batch)
        for thread in self._threads:
            thread.join()
        for job in waiting:
            job.emit(Failed(ApiError(503, "The server is shutting down.", code="unavailable"), False))

    def _admit(self) -> None:
        """Start the waiting jobs there is a session for, in arrival order (under the lock)."""
        while self._waiting:
            job = self._waiting[0]
            if job.cancelled:                # the client left while waiting
                self._waiting.popleft()
                continue
            session = self._take_session(job.kind)
            if session is None:
                return
            self._waiting.popleft()
            job.session, self._active[id(job)] = session, job
            self._thinking += 1
            self._threads = [t for t in self._threads if t.is_alive()]
            thread = threading.Thread(target=self._generation, args=(job,), name="petit-generation")
            self._threads.append(thread)
            thread.start()

    def _take_session(self, kind: str):
        """The idle session used last for `kind`, else a new one while there is room, else any idle one (its
        cache is simply rewound); None when all are busy."""
        for i in range(len(self._idle) - 1, -1, -1):
            if self._idle[i][0] == kind:
                return self._idle.pop(i)[1]
        if self._n_sessions < self.slots:
            self._n_sessions += 1
            return self._new_session()
        return self._idle.pop()[1] if self._idle else None

    def _generation(self, job: Job) -> None:
        """A job's thread: the token loop, whose forward passes the worker runs (_forward). The session goes back
        before the last event does: a client that sends its next request on the answer finds its cache idle."""
        last = None
        try:
            last = self._run(job)
        finally:
            with self._cond:
                del self._active[id(job)]
                self._idle.append((job.kind, job.session))
                job.session = None
                self._thinking -= 1
                self._cond.notify_all()
            if last is not None:
                job.emit(last)

    def _forward(self, req: _Forward):
        """On a generation thread: queue the pass for the next step and wait for its logits."""
        with self._cond:
            self._pending.append(req)
            self._thinking -= 1
            self._cond.notify_all()
            while not req.done:
                self._cond.wait()
        if req.error is not None:
            raise req.error
        return req.logits

    def _step(self, batch: list) -> None:
        """One forward step over every pending pass; a step that fails runs each pass alone, so only the one that is
        wrong gets the error."""
        groups: dict[tuple, list] = {}       # the target's passes by adapter, the draft model's: one batch each
        for r in batch:
            groups.setdefault((id(r.model), r.adapter), []).append(r)
        for (_, adapter), passes in groups.items():
            if passes[0].model is self.model:
                self._use_adapter(adapter)
            self._run_passes(passes[0].model, passes)
        self.steps += 1
        self.shared_steps += len(batch) > 1
        self.largest_batch = max(self.largest_batch, len(batch))
        with self._cond:
            for r in batch:
                r.done = True
            self._thinking += len(batch)
            self._cond.notify_all()

    @staticmethod
    def _run_passes(model, batch: list) -> None:
        want_all = any(r.all_logits for r in batch)
        try:
            out = model.forward_batch([(r.ids, r.cache) for r in batch], all_logits=want_all)
            for r, logits in zip(batch, out):
                r.logits = logits if r.all_logits or not want_all else logits[-1]
        except Exception:                    # noqa: BLE001 - each pass alone tells whose it is
            for r in batch:
                try:
                    r.logits = model.forward(r.ids, r.cache, r.all_logits)
                except Exception as e:       # noqa: BLE001 - raised in the job's own thread
                    r.error = e

    def _load(self) -> None:
        import petit
        from petit.generation.session import Session
        model = self.model = petit.load(self.path, weights=self.weights, mmap=self.mmap, repack=self.repack)
        if self._prepare is not None:
            self._prepare(model)
        if self.adapter_files:
            from petit.loading.lora import read_adapter
            self._adapters = [read_adapter(path, model) for path, _ in self.adapter_files]
        if model.tokenizer is None:
            raise ValueError(f"{self.path}: the file has no tokenizer, so it cannot be served")
        self.sampler = self._make_sampler(model)
        chat = not self.raw and (self.template or model.metadata.get("chat_template"))
        template = (self.template or model.metadata.get("chat_template")) if chat else None

        if self.default_draft != "none":
            check_rollback(model, "model")
        if self.draft is not None:
            self.draft_model, self._self_draft = load_draft_model(self.draft, self.path, mmap=self.mmap,
                                                                  repack=self.repack)
        lookup = LookupDrafter()             # no state: one for all sessions

        def new_session():                   # every session can serve both kinds of job
            session = Session(_BatchedModel(model, self), template=template, n_ctx=self.n_ctx, kv_type=self.kv_type,
                              reuse_cache=self.reuse_cache)
            drafters = self._drafters[id(session)] = {"lookup": lookup}
            if self.draft_model is not None:     # its own draft cache (or none: a self draft uses the session's)
                drafters["model"] = make_drafter(_BatchedModel(self.draft_model, self), self._self_draft,
                                                 session.model, session.n_ctx)
            return session
        self._new_session = new_session
        first = new_session()
        self._raw, self._chat = first, first if chat else None
        self._idle, self._n_sessions = [(None, first)], 1
        self.n_ctx_effective = first.n_ctx
        draft_cache = getattr(self._drafters[id(first)].get("model"), "cache", None)
        per_session = first.cache.nbytes + (draft_cache.nbytes if draft_cache is not None else 0)
        self.slots = max(1, min(self.max_batch, (self.max_cache_mib << 20) // max(per_session, 1)))

    def check_speculative(self, option: dict | None) -> None:
        """A request's `speculative` field against this server: a 400 naming the field when it cannot be met."""
        if not option:
            return
        draft = option.get("draft", self.default_draft)
        if draft == "model" and self.draft is None:
            raise invalid_value("speculative.draft", "this server has no draft model (start it with --draft MODEL "
                                                     "or --draft self:TYPE), so 'model' is not available.")
        if draft != "none":
            try:
                check_rollback(self.model, "model")
            except ValueError as e:
                raise invalid_value("speculative.draft", f"{e}: only 'none' is available.") from None
        lo, hi = option.get("draft_min", self.draft_min), option.get("draft_max", self.draft_max)
        if lo > hi:
            name = "draft_min" if "draft_min" in option else "draft_max"
            raise invalid_value(f"speculative.{name}", f"draft_min ({lo}) is above draft_max ({hi}).")

    @property
    def default_adapter(self):
        """(0, its scale) when the server has adapters (the first runs by default), else None."""
        return (0, self.adapter_files[0][1]) if self.adapter_files and self.adapter_files[0][1] != 0 else None

    def check_lora(self, option: list | None) -> None:
        """A request's `lora` field against this server's adapters: a 400 naming the entry when it cannot be met."""
        if option is None:
            return
        for i, entry in enumerate(option):
            if not 0 <= entry["id"] < len(self.adapter_files):
                have = (f"ids 0 to {len(self.adapter_files) - 1}" if self.adapter_files else
                        "none (start it with --lora FILE)")
                raise invalid_value(f"lora[{i}].id", f"this server has no adapter {entry['id']}: its adapters are "
                                                     f"{have}.")
        if sum(e["scale"] != 0 for e in option) > 1:
            raise invalid_value("lora", "Petit runs one adapter per request: give one entry a scale other than 0.")

    def _adapter(self, job: Job):
        """The (index, scale) a job runs with, or None."""
        if job.lora is None:
            return self.default_adapter
        return next(((e["id"], float(e["scale"])) for e in job.lora if e["scale"] != 0), None)

    def _use_adapter(self, adapter) -> None:
        """Attach `adapter` ((index, scale) or None) to the model unless it is attached already (on the worker)."""
        if adapter == self._adapter_now:
            return
        from petit.loading.lora import attach, detach
        if adapter is None:
            detach(self.model)
        else:
            attach(self.model, self._adapters[adapter[0]], adapter[1])
        self._adapter_now = adapter

    def _speculation(self, job: Job):
        """The job's Speculation (None: plain decoding): its own choice, else the server's."""
        option = job.speculative or {}
        draft = option.get("draft", self.default_draft)
        if draft == "none":
            return None
        return Speculation(self._drafters[id(job.session)][draft], draft_max=option.get("draft_max", self.draft_max),
                           draft_min=option.get("draft_min", self.draft_min))

    def _messages(self, job: Job) -> list:
        if self.system and job.messages[0]["role"] != "system":
            return [{"role": "system", "content": self.system}] + job.messages
        return job.messages

    @property
    def tool_format(self) -> tuple[str, bool]:
        """The chat template's tool-call format and whether Petit describes the tools itself (tools.detect)."""
        return tool_formats.detect(self._chat.template if self._chat is not None else None)

    def end_ids(self, kind: str) -> list:
        """The tokens that end a reply of `kind` (those a finished grammar allows)."""
        return self._raw.chat_stop_ids if kind == "chat" else self._raw.text_stop_ids

    def _sampler(self, job: Job):
        """The job's Sampler, behind a Shaped one when the request biases, constrains or reports the logits."""
        if not (job.logprobs or job.logit_bias or job.grammar):
            return job.sampler
        matcher = None
        if job.grammar is not None:
            from petit.generation.grammar import GrammarTokenizer
            matcher = GrammarTokenizer.get(self.model.tokenizer, self.end_ids(job.kind)).matcher(job.grammar)
        return Shaped(job.sampler, bias=job.logit_bias, logprobs=job.logprobs, top_logprobs=job.top_logprobs,
                      matcher=matcher)

    def _begin(self, job: Job):
        """The reply generator of a job, given the request's own conversation and parameters (nothing runs until
        the first next())."""
        job.shaped = self._sampler(job)
        job.session.speculation = self._speculation(job)
        adapter, batched = self._adapter(job), job.session.model
        if adapter != batched.adapter:       # its cache holds what another adapter computed
            job.session.forget()
            batched.adapter = adapter
        params = Params(sampler=job.shaped, max_tokens=job.max_tokens, stop=job.stop,
                        drop_old_turns=self.drop_old_turns, ctx_shift=self.ctx_shift,
                        n_keep=self.n_keep)
        if job.kind == "chat":
            if self._chat is None:
                raise ApiError(400, "This model has no chat template (or the server runs with --format raw): "
                                    "use /v1/completions.", param="messages", code="no_chat_template")
            messages = self._messages(job)
            if job.tools:
                _, described = self.tool_format
                params.keep_special = True        # a call's markers may be special tokens
                if described:
                    messages = tool_formats.describe(messages, job.tools)
                else:
                    params.tools = job.tools
            return job.session.reply(messages, params)
        return job.session.complete(job.prompt, params)

    def _token_info(self, records: list, end_ids) -> list:
        """The reply's tokens as TokenInfo (text, bytes, logprob, alternatives), the end token left out."""
        tok = self.model.tokenizer

        def piece(token):
            data = tok.token_bytes(token)
            return data.decode("utf-8", "replace"), data
        out = []
        for r in records:
            if r.token in end_ids:
                continue
            text, data = piece(r.token)
            out.append(TokenInfo(text, data, r.logprob, [(*piece(t), lp) for t, lp in r.top]))
        return out

    def _run(self, job: Job):
        """The token loop; emits the stream's deltas and returns the event that ends the job (None: nobody waits)."""
        if job.cancelled:                    # the client left while waiting
            return None
        started, text, stats = False, [], None
        sent = 0                             # logprob records handed out with Deltas so far
        end_ids = set(self.end_ids(job.kind))
        try:
            reply = self._begin(job)
            records = job.shaped.records if job.logprobs else None
            try:
                for step in reply:
                    stats = step.stats
                    text.append(step.text)
                    if job.stream and (step.text or not started):
                        info = None
                        if records is not None:
                            info, sent = self._token_info(records[sent:], end_ids), len(records)
                        job.emit(Delta(step.text, info))
                    started = True
                    if job.cancelled or self._stopping:
                        break
            finally:
                reply.close()                # the session records what was generated, also when stopped early
        except ApiError as e:
            return Failed(e, started)
        except Exception as e:               # noqa: BLE001 - every failure becomes an answer, the worker lives on
            error = _internal(e) if started else self._explain(job, e)
            started = started and job.stream
            if error.status >= 500:
                traceback.print_exc(file=sys.stderr)
            return Failed(error, started)
        if stats is None:                    # no token at all (max_tokens 0)
            stats = Stats(finish_reason="length")
        job.stats = self.last_stats = stats
        self.jobs_done += 1
        if self.on_stats is not None:
            self.on_stats(job, stats)
        if self._stopping and stats.finish_reason == "cancelled":
            return Failed(ApiError(503, "The server is shutting down.", code="unavailable"), started)
        usage = {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.generated_tokens,
                 "total_tokens": stats.prompt_tokens + stats.generated_tokens,
                 "prompt_tokens_details": {"cached_tokens": stats.reused_tokens}}
        timings = {"prompt_n": stats.prompt_tokens - stats.reused_tokens, "cache_n": stats.reused_tokens,
                   "predicted_n": stats.generated_tokens, "ttft_ms": round(1000 * stats.time_to_first_token, 3),
                   "prompt_per_second": round(stats.prefill_tokens_per_s, 1),
                   "predicted_per_second": round(stats.decode_tokens_per_s, 1)}
        if stats.target_passes:              # speculative decoding (llama.cpp's server names the first two so)
            timings.update(draft_n=stats.drafted_tokens, draft_n_accepted=stats.accepted_tokens,
                           tokens_per_pass=round(stats.tokens_per_pass, 3))
        done = Done("".join(text), stats.finish_reason, usage, timings, stats=stats)
        if job.logprobs:
            done.logprobs = self._token_info(records, end_ids)
            done.pending = self._token_info(records[sent:], end_ids)
        return done

    def _explain(self, job: Job, e: Exception) -> ApiError:
        """Why a job failed before its first token: a template error, a prompt that does not fit, or a bug."""
        if isinstance(e, TemplateError):
            return ApiError(400, str(e), param="messages", code="template_error")
        if not isinstance(e, ValueError):
            return _internal(e)
        tok = self.model.tokenizer
        what, param = ("messages", "messages") if job.kind == "chat" else ("prompt", "prompt")
        try:
            if job.kind == "chat":
                n = len(self._chat.prompt_ids(self._messages(job)))
            else:
                n = len(tok.encode(job.prompt, add_bos=tok.adds_bos))
        except ValueError as e2:             # e.g. a character the tokenizer cannot encode
            return ApiError(400, str(e2), param=param)
        tools = 0                            # the tokens the tools add, however the template takes them
        if isinstance(e, ContextFullError):  # the prompt as it was run
            tools, n = max(0, e.tokens - n) if job.kind == "chat" else 0, e.tokens
        elif n < self.n_ctx_effective:
            return _internal(e)
        parts, also = (f"{n - tools} in the messages, {tools} in the functions; ", " or functions") if tools else \
            ("", "")
        return ApiError(400, f"This model's maximum context length is {self.n_ctx_effective} tokens. However, your "
                             f"{what} resulted in {n} tokens ({parts}at most {self.n_ctx_effective - 1} fit, to leave "
                             f"room for the reply). Please reduce the length of the {what}{also}.",
                        param=param, code="context_length_exceeded")
