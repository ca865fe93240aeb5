"""`python -m app.server.runner MODEL [petit serve options]`: `petit serve`, plus one line on stderr per HTTP request
(`petit serve: 127.0.0.1 GET /v1/models 200 1 ms`), for the Server tab's live log.

`petit serve` itself logs only the generations (with --stats); this wraps the ASGI app that petit.server builds
(petit.server.app.create_app) in RequestLog, in this child process only, then runs petit's own `serve` command."""
import sys
import time


class RequestLog:
    """ASGI middleware: after each HTTP request, `petit serve: CLIENT METHOD PATH STATUS MS ms` on stderr. Every other
    attribute is the wrapped app's (petit reads its `hosts`)."""

    def __init__(self, app, stream=None):
        self.app = app
        self.stream = stream

    def __getattr__(self, name):
        if name == "app":
            raise AttributeError(name)
        return getattr(self.app, name)

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http":
            return await self.app(scope, receive, send)
        t0, status = time.perf_counter(), None

        async def send_logged(message):
            nonlocal status
            if message.get("type") == "http.response.start":
                status = message.get("status")
            await send(message)
        try:
            await self.app(scope, receive, send_logged)
        finally:
            client = (scope.get("client") or ("-",))[0]
            ms = 1000 * (time.perf_counter() - t0)
            print(f"petit serve: {client} {scope.get('method', '-')} {scope.get('path', '')} "
                  f"{status if status is not None else 'disconnected'} {ms:.0f} ms",
                  file=self.stream or sys.stderr, flush=True)


def main(argv=None) -> int:
    import petit.server.app as server_app
    from petit.cli import main as cli_main

    create_app = server_app.create_app
    server_app.create_app = lambda *args, **kwargs: RequestLog(create_app(*args, **kwargs))
    return cli_main(["serve", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
