"""`petit serve`: an OpenAI-compatible HTTP server for one model (docs/server.md).

    from petit.server import Server
    from petit.server.engine import ServerWorker
    server = Server(ServerWorker("model.petit"), port=0).start()   # a background thread; port 0 = a free port
    print(server.url)                                                 # http://127.0.0.1:PORT/v1
    server.stop()

The routes are in app.py (Starlette) and, for Ollama's API, ollama.py; request validation in schema.py (and
features.py: logprobs, logit_bias, response_format, tools), errors in errors.py, the checks against the model and
the grammars in constraints.py, tool-call formats in tools.py, request bodies and streamed events in transport.py,
the OpenAI response shapes in sse.py and the ServerWorker (the thread that owns the model and answers the queued
jobs) in engine.py. Starlette and uvicorn are imported only when a server is built.
"""
import os
import socket
import threading
import time

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8080


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (so a port in use is a plain OSError, and port 0 picks a free port).

    The socket is made with proto IPPROTO_TCP, not 0 (as socket.create_server makes it): asyncio sets TCP_NODELAY
    on a connection only when its socket says it is TCP, and without it every keep-alive response waits ~40 ms for
    the client's delayed ACK between its headers and its body."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                         proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        if os.name != "nt":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


class Server:
    """An engine behind the HTTP routes, on a uvicorn server.

    Args:
        engine: a petit.server.engine.ServerWorker (started here if it is not yet).
        host, port: where to listen (port 0: a free port; see .port).
        api_key: when set, every route but /health needs `Authorization: Bearer API_KEY`.
        allowed_hosts: Host names accepted besides localhost and the bound address ("*": any).
        max_body: the largest request body, in bytes.
        model_id: the id /v1/models reports (default: the model file's name without .petit).
        request_log: called with a petit.server.app.LoggedRequest (client, method, path, status, duration_s)
            after each HTTP request, on the server's thread (see request_line for the one-line form).
        embeddings: a petit.server.embeddings.EmbeddingService, the embedding model served beside the chat model
            (/v1/embeddings, /api/embed), or None.
    """

    def __init__(self, engine, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, api_key: str | None = None,
                 allowed_hosts=(), max_body: int | None = None, model_id: str | None = None,
                 log_level: str = "warning", request_log=None, embeddings=None):
        import uvicorn

        from petit.server.app import MAX_BODY, HostPolicy, create_app
        self.engine, self.host = engine, host
        self.hosts = HostPolicy(host, allowed_hosts)
        self.model_id = model_id or os.path.basename(engine.path).removesuffix(".petit")
        created = int(os.path.getmtime(engine.path))
        self.app = create_app(engine, model_id=self.model_id, created=created, api_key=api_key,
                              hosts=self.hosts, max_body=max_body or MAX_BODY, request_log=request_log,
                              embeddings=embeddings)
        self.sock = bind(host, port)
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level=log_level, access_log=False, lifespan="off",
                                timeout_graceful_shutdown=10, server_header=False)

        class _Uvicorn(uvicorn.Server):
            def handle_exit(self, sig, frame):       # Ctrl+C: end the running reply and the queue too
                engine.request_stop()
                super().handle_exit(sig, frame)
        self.uvicorn = _Uvicorn(config)
        self._thread = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def alive(self) -> bool:
        """Whether the server's thread (after start()) or the engine's is still running."""
        return (self._thread is not None and self._thread.is_alive()) or self.engine.alive

    def run(self, on_ready=None) -> None:
        """Serve until Ctrl+C / SIGTERM (on the main thread) or stop(); then stop the engine. The model loads
        meanwhile (requests get 503 until it is ready); on_ready() runs once it is, and a failed load stops the
        server (see engine.load_error)."""
        self.engine.start()

        def stop_if_the_load_fails():
            if not self.engine.wait_ready():
                self.uvicorn.should_exit = True
            elif on_ready is not None:
                on_ready()
        threading.Thread(target=stop_if_the_load_fails, name="petit-load-watch", daemon=True).start()
        try:
            self.uvicorn.run(sockets=[self.sock])
        finally:
            self.engine.close()
            self.sock.close()

    def start(self, timeout: float = 10.0, wait_ready: bool = True) -> "Server":
        """Serve on a background thread; returns once the server accepts connections (and, with wait_ready, the
        model is loaded)."""
        self._thread = threading.Thread(target=self.run, name="petit-server")
        self._thread.start()

        def up() -> bool:
            return self.uvicorn.started and not (wait_ready and self.engine.state == "loading")
        deadline = time.monotonic() + timeout
        while not up() and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self.uvicorn.started or wait_ready and self.engine.state != "ready":
            self.stop()
            raise RuntimeError(f"the server did not start: {self.engine.load_error or 'timeout'}")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the engine (the running reply and the queue end) and the server, and wait for both threads."""
        self.engine.request_stop()
        self.uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self.engine.close(timeout)
