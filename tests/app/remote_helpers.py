"""Shared pieces of the remote-backend tests: an in-memory keyring, a real `petit serve` on loopback, and a tiny
scripted HTTP server that plays what a misbehaving server does (slow, silent, gone mid-reply)."""
import json
import select
import socket
import threading
import time
from contextlib import contextmanager

import keyring
import keyring.backend

from petit.assets import default_model_path


class MemoryKeyring(keyring.backend.KeyringBackend):
    priority = 1

    def __init__(self):
        super().__init__()
        self.secrets = {}

    def set_password(self, service, username, password):
        self.secrets[(service, username)] = password

    def get_password(self, service, username):
        return self.secrets.get((service, username))

    def delete_password(self, service, username):
        if (service, username) not in self.secrets:
            raise keyring.errors.PasswordDeleteError(username)
        del self.secrets[(service, username)]


@contextmanager
def petit_serve(api_key=None):
    """`petit serve` of the bundled model on 127.0.0.1 (a free port), in this process."""
    from petit.server import Server
    from petit.server.engine import ServerWorker
    server = Server(ServerWorker(default_model_path(), max_tokens=32), port=0, api_key=api_key).start()
    try:
        yield server
    finally:
        server.stop()


def sse(text: str, finish=None) -> bytes:
    chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
             "choices": [{"index": 0, "delta": {"content": text} if text else {}, "finish_reason": finish}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


MODELS_BODY = json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]}).encode()


class ScriptedServer:
    """An HTTP/1.1 server on 127.0.0.1 answering GET /v1/models with one model, and POST /v1/chat/completions with
    a chunked SSE stream played by `script(send)`: send(bytes) writes one chunk; returning ends the stream
    properly, raising `Gone` drops the connection mid-body (the server went away)."""

    class Gone(Exception):
        pass

    def __init__(self, script, before_headers: float = 0):
        """before_headers: seconds to wait, silent, before the answer starts (a long prefill)."""
        self.script, self.before_headers = script, before_headers
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.closed = threading.Event()         # the client closed its connection (Stop)
        self.asked = threading.Event()          # a chat completion was requested
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="scripted-http", daemon=True)
        self._thread.start()

    def _serve(self):
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                part = conn.recv(65536)
                if not part:
                    return
                data += part
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")), b"0"))
            while len(body) < length:
                body += conn.recv(65536)
            if head.startswith(b"GET"):
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(MODELS_BODY)).encode() + b"\r\nConnection: close\r\n\r\n" + MODELS_BODY)
                return
            self.asked.set()
            if self.before_headers:
                readable, _, _ = select.select([conn], [], [], self.before_headers)
                if readable and conn.recv(1) == b"":
                    self.closed.set()                   # the client hung up before the answer began
                return
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                         b"Connection: close\r\n\r\n")

            def send(b: bytes):
                conn.sendall(b"%x\r\n%s\r\n" % (len(b), b))
            try:
                self.script(send)
                send(b"data: [DONE]\n\n")
                conn.sendall(b"0\r\n\r\n")
            except self.Gone:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                self.closed.set()

    def stop(self):
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def slow_forever(send, stop_after=None):
    """A token every 20 ms until the client hangs up."""
    i = 0
    while True:
        send(sse(f"w{i} "))
        i += 1
        time.sleep(0.02)
