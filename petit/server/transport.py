"""What carries a request to the engine and a reply back: the JSON body read within its size limit, the events of one
job moved from the engine thread onto the event loop while the client is watched (a client that goes away is noticed
at once), and the streamed response that cancels its job however it ends. The OpenAI routes (app.py) and Ollama's
(ollama.py) share them."""
import asyncio
import json

from starlette.responses import StreamingResponse

from petit.server.schema import ApiError


# ---- request bodies ----
async def read_json(request, limit: int) -> dict:
    too_large = ApiError(413, f"The request body is larger than the limit of {limit} bytes.",
                         code="request_too_large")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)

    def no_constants(name):
        raise ValueError(f"{name} is not valid JSON")
    try:
        body = json.loads(b"".join(chunks), parse_constant=no_constants)
    except (ValueError, RecursionError) as e:    # (UnicodeDecodeError is a ValueError; RecursionError: [[[[...)
        raise ApiError(400, f"We could not parse the JSON body of your request ({e}). The API expects a JSON "
                            "object.", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
    return body


# ---- waiting on the engine while watching the client ----
async def _disconnected(request) -> None:
    """Returns when the client has gone away (the body was read already, so receive() waits for that)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


class Events:
    """The events of one job, moved from the engine thread onto the event loop, read while watching the client."""

    def __init__(self, request):
        self.queue: asyncio.Queue = asyncio.Queue()
        self.loop = asyncio.get_running_loop()
        self.watcher = asyncio.ensure_future(_disconnected(request))

    def emit(self, ev) -> None:              # on the engine thread
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, ev)
        except RuntimeError:                 # the loop is closed: nobody is listening any more
            pass

    async def next(self):
        """The next event, or None once the client has disconnected."""
        if not self.queue.empty():
            return self.queue.get_nowait()
        if self.watcher.done():
            return None
        get = asyncio.ensure_future(self.queue.get())
        try:
            await asyncio.wait({get, self.watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not get.done():
                get.cancel()                 # (a cancelled Queue.get loses no item)
        # a task asked to cancel is not cancelled() until the loop runs it again: only a done get has a result
        return get.result() if get.done() and not get.cancelled() else None

    def close(self) -> None:
        self.watcher.cancel()


class EventStream(StreamingResponse):
    """text/event-stream (or another streamed type); on_close() runs however the response ends (done, failed, the
    client gone)."""

    def __init__(self, chunks, on_close, media_type: str = "text/event-stream"):
        super().__init__(chunks, media_type=media_type,
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self.on_close = on_close

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.on_close()
