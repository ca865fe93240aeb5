#!/usr/bin/env python3
"""Load test of `petit serve`: requests/s and time to first token under 1, 2 and 4 concurrent clients, beside the
same questions answered in-process by a generation Session (no HTTP) in the same run.

Method. The server is a `petit serve --port 0` child process on 127.0.0.1 (loopback only), so the clients (threads
of this process, one keep-alive httpx connection each) do not share its interpreter. Every request is a streamed
chat completion (`stream_options.include_usage`) of one of a fixed list of questions the bundled model answers, with
greedy sampling; the time to first token (TTFT) is measured from sending the request to the first content chunk, so
at concurrency > 1 it includes the time spent waiting in the server's queue. Each level runs until it has answered
--requests requests or --seconds have passed, whichever comes first (requests in flight are then waited for).

The peer is the engine alone: the same questions answered one after the other by a generation Session in this process,
with the same KV-cache prefix reuse, half of its requests before the server levels and half after (the machine's
load drifts). `vs engine` divides the server's requests/s (or TTFT) at each level by the
engine's; `vs c=1` divides each level by the one-client level. One engine answers one request at a time, so more
clients should not raise requests/s (ratio ~1) and should multiply the median TTFT by about the concurrency.

Usage: python bench/bench_server.py [--model M] [--requests 60] [--seconds 15] [--concurrency 1,2,4]
                                    [--max-tokens 32] [--threads N] [--quick]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUESTIONS = ["what is 12 plus 7?", "count from 3 to 9", "which is bigger, 2 or 16?", "what is the opposite of hot?",
             "what comes after C?", "what is 5 plus 3?", "name a colour", "hello"]


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def engine_peer(model_path, n_requests, max_tokens):
    """(requests/s, TTFT list) of the questions answered in-process, one after the other."""
    import petit
    from petit.generation import Params, Session
    session, params = Session(petit.load(model_path)), Params(max_tokens=max_tokens)
    ttfts = []
    for i in range(3):                             # warm-up
        list(session.reply([{"role": "user", "content": QUESTIONS[i]}], params))
    t0 = time.perf_counter()
    for i in range(n_requests):
        t = time.perf_counter()
        first = None
        for step in session.reply([{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}], params):
            if first is None and step.text:
                first = time.perf_counter() - t
        ttfts.append(first if first is not None else time.perf_counter() - t)
    return n_requests / (time.perf_counter() - t0), ttfts


def start_server(model_path, max_tokens, threads):
    cmd = [sys.executable, "-m", "petit.cli", "serve", model_path, "--port", "0", "-n", str(max_tokens), "-t", "0",
           "--max-queue", "64"]
    if threads:
        cmd += ["--threads", str(threads)]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    for line in proc.stderr:
        if "listening on" in line:
            threading.Thread(target=proc.stderr.read, daemon=True).start()    # keep draining
            return proc, line.split("listening on ")[1].split()[0]
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise SystemExit(f"the server did not start: {proc.communicate()[1]}")


def one_request(client, question, max_tokens):
    """(TTFT, latency, completion tokens) of one streamed chat completion."""
    body = {"model": "bench", "messages": [{"role": "user", "content": question}], "max_tokens": max_tokens,
            "stream": True, "stream_options": {"include_usage": True}}
    t = time.perf_counter()
    first, tokens = None, 0
    with client.stream("POST", "/chat/completions", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if chunk["choices"] and chunk["choices"][0]["delta"].get("content") and first is None:
                first = time.perf_counter() - t
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    latency = time.perf_counter() - t
    return (first if first is not None else latency), latency, tokens


def level(url, concurrency, n_requests, seconds, max_tokens):
    import httpx
    lock, results, counter = threading.Lock(), [], [0]

    def client_loop():
        with httpx.Client(base_url=url, timeout=60) as client:
            one_request(client, QUESTIONS[0], max_tokens)            # connect (not counted)
            start.wait()
            while time.perf_counter() < deadline:
                with lock:
                    if counter[0] >= n_requests:
                        return
                    i = counter[0]
                    counter[0] += 1
                r = one_request(client, QUESTIONS[i % len(QUESTIONS)], max_tokens)
                with lock:
                    results.append(r)
    start = threading.Event()
    threads = [threading.Thread(target=client_loop) for _ in range(concurrency)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    t0 = time.perf_counter()
    deadline = t0 + seconds
    start.set()
    for t in threads:
        t.join(seconds + 60)
    wall = time.perf_counter() - t0
    return {"n": len(results), "rps": len(results) / wall, "tok_s": sum(r[2] for r in results) / wall,
            "ttft50": statistics.median(r[0] for r in results), "ttft95": percentile([r[0] for r in results], 0.95),
            "lat50": statistics.median(r[1] for r in results)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a .petit model (default: the bundled one)")
    ap.add_argument("--requests", type=int, default=60, help="requests per level (default 60)")
    ap.add_argument("--seconds", type=float, default=15.0, help="time limit per level (default 15)")
    ap.add_argument("--concurrency", default="1,2,4", help="client counts (default 1,2,4)")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, help="kernel threads of the server and the peer")
    ap.add_argument("--quick", action="store_true", help="12 requests per level, 5 s at most: a smoke test")
    args = ap.parse_args()
    if args.quick:
        args.requests, args.seconds = 12, 5.0
    sys.path.insert(0, ROOT)
    from petit.assets import default_model_path
    model = args.model or default_model_path()
    if args.threads:
        os.environ["PETIT_THREADS"] = str(args.threads)
    levels = [int(c) for c in args.concurrency.split(",")]
    print(f"petit serve load test: {os.path.basename(model)}, max_tokens {args.max_tokens}, greedy, "
          f"{args.requests} requests or {args.seconds:g} s per level; load average {os.getloadavg()[0]:.2f}")

    half = max(1, args.requests // 2)
    before_rps, before_ttft = engine_peer(model, half, args.max_tokens)
    proc, url = start_server(model, args.max_tokens, args.threads)
    try:
        rows = [(c, level(url, c, args.requests, args.seconds, args.max_tokens)) for c in levels]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    after_rps, after_ttft = engine_peer(model, half, args.max_tokens)    # before and after: load drifts
    peer_rps = 2 / (1 / before_rps + 1 / after_rps)
    peer_ttft = before_ttft + after_ttft
    peer_ttft50 = statistics.median(peer_ttft)
    base = rows[0][1]
    print(f"{'clients':>7} {'requests':>8} {'req/s':>7} {'tok/s':>7} {'TTFT p50':>9} {'TTFT p95':>9} {'latency':>8}"
          f" {'req/s vs engine':>15} {'req/s vs c=1':>12} {'TTFT vs engine':>14} {'TTFT vs c=1':>11}")
    print(f"{'engine':>7} {2 * half:>8} {peer_rps:>7.1f} {'':>7} {1000 * peer_ttft50:>7.1f}ms "
          f"{1000 * percentile(peer_ttft, 0.95):>7.1f}ms {'':>8} {'(peer, in-process, no HTTP)':>42}")
    for c, r in rows:
        print(f"{c:>7} {r['n']:>8} {r['rps']:>7.1f} {r['tok_s']:>7.0f} {1000 * r['ttft50']:>7.1f}ms "
              f"{1000 * r['ttft95']:>7.1f}ms {1000 * r['lat50']:>6.1f}ms {r['rps'] / peer_rps:>15.2f} "
              f"{r['rps'] / base['rps']:>12.2f} {r['ttft50'] / peer_ttft50:>14.2f} "
              f"{r['ttft50'] / base['ttft50']:>11.2f}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
