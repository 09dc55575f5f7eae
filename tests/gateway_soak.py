#!/usr/bin/env python3
"""A soak of llm_gateway: N concurrent SSE chat streams for a duration, the
gateway's memory sampled all along.

Each of --streams clients streams chat completions back to back (temperature
0.8, top_k --top-k, a seed per request, --max-tokens each) until --duration has passed, so
that N streams are open at every moment; every stream must answer 200, carry
text and a finish_reason, and end with `data: [DONE]`, else it counts as a
failure (lost). The gateway's VmRSS (/proc/PID/status) is sampled every
--sample seconds (0.5), and a line per --report seconds shows the time, RSS, streams done,
failures and tokens/s. At the end: the totals, RSS at the start, its peak,
the end, and the growth over the second half: the median RSS over the last
sixth of the duration minus the median over the sixth that follows mid-run
(medians, robust to a passing spike), with a least-squares trend over the
second half.

    python3 tests/gateway_soak.py --duration 600            # 10 min, own servers
    python3 tests/gateway_soak.py --url http://127.0.0.1:8080 --pid $(pidof llm_gateway)

Without --url it starts tokenizer_server, model_server (--kv_cache_mb 256,
room for 64 sessions) and llm_gateway (--max_concurrent = --streams) from
--build-dir on loopback. With --check (ctest's gateway_load_test: 64 streams,
60 s) it exits 1 unless: no stream failed, every client finished at least one
stream, the RSS growth over the second half is at most --max-rss-growth-mib,
and llm_gateway_generations_active is 0 afterwards.

Why the second half, and the bound: the gateway's memory grows while it warms
up (a Generator per concurrent request, each with its gRPC channels and its
own copy of the vocabulary's token bytes: ~3 MiB apiece, ~200 MiB for 64;
civetweb's worker threads; glibc's per-thread malloc arenas), all within the
first two seconds of 64 concurrent streams. After that every request reuses a
pooled Generator, so the steady state is flat: measured on two loaded cores,
the RSS stayed at 221.1 MiB (another run: 234.8 MiB) from t = 2 s to the end,
growth +0.0 MiB. The bound, 4 MiB, leaves room for an allocator's late arena
and is what a leak of ~1.6 KiB per token or ~40 KiB per stream would add
between the two windows of a 60 s run (~2,500 tokens and ~100 streams apart);
a longer --duration finds smaller leaks. top_k keeps the logits small (40
per token): without it (--top-k 0) every token brings all 49,152 logits
(192 KiB) per stream, and the RSS then swings by 10-15 MiB between windows
with the allocator's reuse of those buffers (measured: +14.2 and -2.8 MiB,
peak ~275 MiB), bounded but too noisy for a tight check.
Prints "N passed, N failed" with --check.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = [
    "Write a short poem about the sea.",
    "Tell me a story about a dragon.",
    "Explain how a bicycle works.",
    "What is the capital of France? Answer in one word.",
    "List three uses of copper.",
    "Describe a sunset in the mountains.",
]


def rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.done = 0
        self.failures: list[str] = []
        self.tokens = 0
        self.finish: dict[str, int] = {}
        self.per_client: dict[int, int] = {}
        self.open_streams = 0

    def add(self, client: int, ok: bool, tokens: int, finish: str | None, why: str = ""):
        with self.lock:
            self.tokens += tokens
            if ok:
                self.done += 1
                self.per_client[client] = self.per_client.get(client, 0) + 1
                self.finish[finish] = self.finish.get(finish, 0) + 1
            else:
                self.failures.append(f"client {client}: {why}")


def one_stream(host: str, port: int, model: str, client: int, seq: int, args
               ) -> tuple[bool, int, str | None, str]:
    """One streamed chat: (ok, content chunks, finish_reason, why not ok)."""
    request = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPTS[(client + seq) % len(PROMPTS)]}],
        "stream": True, "temperature": 0.8, "seed": client * 100003 + seq,
        "max_tokens": args.max_tokens}
    if args.top_k:
        request["top_k"] = args.top_k
    body = json.dumps(request)
    timeout = args.timeout
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return False, 0, None, f"status {resp.status}: {resp.read()[:300]!r}"
        chunks, finish, done, text = 0, None, False, ""
        for raw in resp:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                continue
            event = json.loads(data)
            if "error" in event:
                return False, chunks, None, f"error event {event['error']}"
            for c in event.get("choices", []):
                content = c.get("delta", {}).get("content")
                if content:
                    chunks += 1
                    text += content
                if c.get("finish_reason"):
                    finish = c["finish_reason"]
        if not done:
            return False, chunks, finish, "no [DONE]"
        if finish not in ("stop", "length"):
            return False, chunks, finish, f"finish_reason {finish!r}"
        if not text:
            return False, chunks, finish, "no text"
        return True, chunks, finish, ""
    except (OSError, http.client.HTTPException, ValueError) as e:
        return False, 0, None, f"{type(e).__name__}: {e}"
    finally:
        conn.close()


def metric(url: str, name: str) -> float | None:
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        for line in conn.getresponse().read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    except OSError:
        return None
    finally:
        conn.close()
    return None


def soak(url: str, pid: int, model: str, args) -> int:
    u = urllib.parse.urlparse(url)
    stats = Stats()
    start = time.monotonic()
    deadline = start + args.duration
    samples: list[tuple[float, int]] = []  # (seconds since start, VmRSS KiB)
    stop_sampling = threading.Event()

    def client(i: int):
        seq = 0
        time.sleep(random.Random(i).random() * 0.5)  # not all 64 prefills in one step
        while time.monotonic() < deadline:
            with stats.lock:
                stats.open_streams += 1
            ok, tokens, finish, why = one_stream(u.hostname, u.port, model, i, seq, args)
            with stats.lock:
                stats.open_streams -= 1
            stats.add(i, ok, tokens, finish, why)
            seq += 1
            if not ok and args.check:
                time.sleep(0.2)  # a refused stream (429) must not spin

    def sampler():
        last_report = 0.0
        last_tokens = 0
        print(f"{'t/s':>6} {'RSS MiB':>8} {'open':>5} {'done':>6} {'failed':>6} {'tok/s':>7}",
              flush=True)
        while not stop_sampling.is_set():
            t = time.monotonic() - start
            kib = rss_kib(pid)
            if kib is not None:
                samples.append((t, kib))
            if t - last_report >= args.report or last_report == 0.0:
                with stats.lock:
                    tokens, done, failed, open_ = (stats.tokens, stats.done,
                                                   len(stats.failures), stats.open_streams)
                rate = (tokens - last_tokens) / max(t - last_report, 1e-9) if last_report else 0
                print(f"{t:6.0f} {kib / 1024 if kib else float('nan'):8.1f} {open_:5d} "
                      f"{done:6d} {failed:6d} {rate:7.0f}", flush=True)
                last_report, last_tokens = t, tokens
            stop_sampling.wait(args.sample)

    sampling = threading.Thread(target=sampler, daemon=True)
    sampling.start()
    clients = [threading.Thread(target=client, args=(i,), daemon=True)
               for i in range(args.streams)]
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    elapsed = time.monotonic() - start
    stop_sampling.set()
    sampling.join()
    active_after = metric(url, "llm_gateway_generations_active")

    print(f"\n{args.streams} streams for {args.duration:.0f} s (ran {elapsed:.0f} s): "
          f"{stats.done} streams done, {len(stats.failures)} failed, {stats.tokens} tokens "
          f"({stats.tokens / elapsed:.0f}/s), finish reasons {stats.finish}")
    per = sorted(stats.per_client.get(i, 0) for i in range(args.streams))
    print(f"streams per client: min {per[0]}, median {per[len(per) // 2]}, max {per[-1]}")
    for f in stats.failures[:10]:
        print(f"  failed: {f}")
    growth = None
    half = args.duration / 2
    window = args.duration / 6  # 10 s of a 60 s run
    early = [k for t, k in samples if half <= t <= half + window]
    late = [k for t, k in samples if args.duration - window <= t <= args.duration]
    if early and late and samples:
        growth = (statistics.median(late) - statistics.median(early)) / 1024
        second = [(t, k) for t, k in samples if half <= t <= args.duration]
        slope = 0.0
        if len(second) >= 2:
            ts, ks = [t for t, _ in second], [k / 1024 for _, k in second]
            mt, mk = statistics.fmean(ts), statistics.fmean(ks)
            var = sum((t - mt) ** 2 for t in ts)
            slope = sum((t - mt) * (k - mk) for t, k in zip(ts, ks)) / var if var else 0.0
        print(f"gateway VmRSS: start {samples[0][1] / 1024:.1f} MiB, peak "
              f"{max(k for _, k in samples) / 1024:.1f} MiB, end {samples[-1][1] / 1024:.1f} MiB; "
              f"median {statistics.median(early) / 1024:.1f} MiB over "
              f"[{half:.0f}, {half + window:.0f}] s, {statistics.median(late) / 1024:.1f} MiB "
              f"over [{args.duration - window:.0f}, {args.duration:.0f}] s: growth over the second "
              f"half {growth:+.1f} MiB (bound {args.max_rss_growth_mib} MiB); least-squares "
              f"trend {slope * 60:+.2f} MiB/min")
    print(f"llm_gateway_generations_active afterwards: {active_after}")
    if not args.check:
        return 0 if not stats.failures else 1
    checks = {
        "no stream lost (each 200, text, finish_reason, [DONE])": not stats.failures,
        "every client finished a stream": per[0] >= 1,
        f"RSS growth over the second half <= {args.max_rss_growth_mib} MiB":
            growth is not None and growth <= args.max_rss_growth_mib,
        "generations_active is 0 afterwards": active_after == 0,
    }
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    failed = sum(not ok for ok in checks.values())
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", type=Path, default=ROOT / "build")
    ap.add_argument("--model", type=Path, default=ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--url", help="an already running gateway (then --pid is its process)")
    ap.add_argument("--pid", type=int, help="the gateway's process id, with --url")
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--duration", type=float, default=300, help="seconds")
    ap.add_argument("--max-tokens", type=int, default=32, help="per stream")
    ap.add_argument("--top-k", type=int, default=40,
                    help="top_k of each request (0: none, and the gateway fetches all "
                         "49,152 logits a token)")
    ap.add_argument("--timeout", type=float, default=120, help="per-read socket timeout, s")
    ap.add_argument("--sample", type=float, default=0.5, help="RSS sampling period, s")
    ap.add_argument("--report", type=float, default=5.0, help="progress line period, s")
    ap.add_argument("--check", action="store_true", help="assert (see above); exit 1 if not")
    ap.add_argument("--max-rss-growth-mib", type=float, default=4.0,
                    help="--check's bound on the growth over the second half (see above)")
    args = ap.parse_args()

    if args.url:
        if not args.pid:
            sys.exit("gateway_soak: --url needs --pid (the gateway's process, for its RSS)")
        u = urllib.parse.urlparse(args.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("GET", "/v1/models")
        model = json.loads(conn.getresponse().read())["data"][0]["id"]
        conn.close()
        return soak(args.url, args.pid, model, args)

    sys.path.insert(0, str(ROOT / "tests"))
    from llm_servers import GatewayServices
    with GatewayServices(args.build_dir, args.model, kv_cache_mb=256,
                         gateway_flags=["--max_concurrent", str(args.streams)]) as s:
        print(f"gateway {s.url} (pid {s.gateway.pid}), model_server {s.model_server.address}, "
              f"{args.streams} streams, {args.duration:.0f} s", flush=True)
        rc = soak(s.url, s.gateway.pid, s.model_id, args)
        if rc != 0:
            print(s.logs())
        return rc


if __name__ == "__main__":
    sys.exit(main())
