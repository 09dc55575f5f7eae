#!/usr/bin/env python3
"""A rolling restart of two model servers under streaming chats (docs/operations.md,
"A rolling update with zero re-prefill"): a tokenizer server, model servers A and B
(the default model, each with --peers A,B) and llm_gateway over both; --chats
conversations (X-Session-Id) stream greedy turns of --tokens tokens, one after
another, for the whole run. After --warmup seconds A gets SIGTERM (its sessions move
to B), is started again on its port, and once it serves, B gets SIGTERM (its sessions,
A's old ones among them, move to the new A) and is started again. Counts requests
that failed (lost), turns whose history was computed again (usage.prompt_tokens_details.
cached_tokens below the previous turn's prompt and answer: the conversation's named
session was not where the turn went), the gateway's llm_gateway_sessions_rebuilt_total
and llm_gateway_sessions_relocated_total; compares the p50 / p99 inter-token latency
(gaps between streamed chunks, per chat) before the restart and during it.

    python3 bench/rolling_restart_bench.py [--chats 16] [--tokens 24] [--threads 1]

Writes build/bench/rolling_restart.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import socket
import statistics
import subprocess
import threading
import time
import urllib.request

from servers import BIN, MODEL, ROOT, start  # bench/servers.py

OUT = ROOT / "build" / "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_server(port: int, pod: str, peers: str, threads: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [str(BIN / "model_server"), "--model", str(MODEL), "--listen", f"127.0.0.1:{port}",
         "--threads", str(threads), "--metrics_listen", "", "--pod_name", pod, "--peers", peers,
         "--drain_seconds", "60", "--log_level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.readline()  # the port line: listening (the model loads next)
    return proc


def wait_ready(gateway: str, deadline: float = 120) -> None:
    end = time.time() + deadline
    while time.time() < end:
        try:
            urllib.request.urlopen(f"http://{gateway}/health", timeout=5)
            return
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.2)
    raise SystemExit("rolling_restart_bench: gateway not ready")


def metric(gateway: str, name: str) -> float:
    text = urllib.request.urlopen(f"http://{gateway}/metrics", timeout=10).read().decode()
    m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([\d.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


class Chat(threading.Thread):
    def __init__(self, gateway: str, model_id: str, index: int, tokens: int, stop: threading.Event):
        super().__init__(daemon=True)
        self.gateway, self.model_id, self.index, self.tokens, self.stop = (
            gateway, model_id, index, tokens, stop)
        self.gaps: list[tuple[float, float]] = []  # (time, gap in seconds)
        self.turns = 0
        self.failed: list[str] = []
        self.history = 0      # the previous turn's prompt and answer tokens
        self.reprefilled = 0  # turns that found less of the history kept than that
        self.kept = 0         # history tokens kept, all turns

    def usage(self, u: dict) -> None:
        """A turn's usage: with a conversation (named model session), cached_tokens
        counts the history the session kept; less than the previous turn's prompt
        means the history was computed again."""
        cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        if self.history and cached < self.history - 8:  # (the answer may re-encode)
            self.reprefilled += 1
        self.kept += cached
        self.history = u["prompt_tokens"] + u["completion_tokens"]

    def turn(self, messages: list[dict]) -> str:
        host, port = self.gateway.split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        body = json.dumps({"model": self.model_id, "messages": messages, "max_tokens": self.tokens,
                           "temperature": 0, "ignore_eos": True, "stream": True,
                           "stream_options": {"include_usage": True}})
        conn.request("POST", "/v1/chat/completions", body,
                     {"Content-Type": "application/json",
                      "X-Session-Id": f"rolling-{self.index}"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
        text, last = "", None
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            j = json.loads(line[6:])
            if "error" in j:
                raise RuntimeError(str(j["error"]))
            if j.get("usage"):
                self.usage(j["usage"])
            delta = j["choices"][0]["delta"].get("content") if j.get("choices") else None
            if delta:
                now = time.perf_counter()
                if last is not None:
                    self.gaps.append((now, now - last))
                last = now
                text += delta
        conn.close()
        return text

    def run(self) -> None:
        messages = [{"role": "user", "content": f"Tell me a story about the number {self.index}."}]
        while not self.stop.is_set():
            try:
                answer = self.turn(messages)
            except Exception as e:  # noqa: BLE001 - a lost request, counted
                self.failed.append(str(e))
                return
            self.turns += 1
            messages += [{"role": "assistant", "content": answer},
                         {"role": "user", "content": "Go on."}]
            if len(messages) > 40:
                return


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))] * 1e3 if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chats", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=24)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=float, default=20)
    ap.add_argument("--after", type=float, default=10)
    args = ap.parse_args()
    ports = [free_port(), free_port()]
    peers = ",".join(f"127.0.0.1:{p}" for p in ports)
    procs: list[subprocess.Popen] = []
    tok, tokenizer = start("tokenizer_server", ["--vocab", str(MODEL)], "rolling_restart_bench")
    procs.append(tok)
    servers = [model_server(p, f"pod-{i}", peers, args.threads) for i, p in enumerate(ports)]
    gw, gateway = start("llm_gateway", ["--tokenizer", tokenizer, "--model", peers],
                        "rolling_restart_bench")
    procs.append(gw)
    logs: list[str] = []
    try:
        wait_ready(gateway)
        model_id = json.load(urllib.request.urlopen(f"http://{gateway}/v1/models"))["data"][0]["id"]
        stop = threading.Event()
        chats = [Chat(gateway, model_id, i, args.tokens, stop) for i in range(args.chats)]
        for c in chats:
            c.start()
        time.sleep(args.warmup)
        t_start = time.perf_counter()
        for i in range(2):
            old = servers[i]
            old.terminate()
            _, err = old.communicate(timeout=120)
            logs.append(err)
            servers[i] = model_server(ports[i], f"pod-{i}", peers, args.threads)
            time.sleep(3)  # loaded (0.2 s) and found by the gateway's pool at its next refresh
        t_end = time.perf_counter()
        time.sleep(args.after)
        stop.set()
        for c in chats:
            c.join(timeout=300)
        rebuilt = metric(gateway, "llm_gateway_sessions_rebuilt_total")
        relocated = metric(gateway, "llm_gateway_sessions_relocated_total")
    finally:
        for p in servers + procs:
            p.terminate()
        for p in servers + procs:
            try:
                p.communicate(timeout=120)
            except Exception:  # noqa: BLE001
                p.kill()
    before = [g for c in chats for (t, g) in c.gaps if t < t_start]
    during = [g for c in chats for (t, g) in c.gaps if t_start <= t <= t_end]
    lost = sum(1 for c in chats if c.failed)
    moved = [m for log in logs for m in re.findall(r"migration: (\d+) sessions moved.*", log)]
    summary = {
        "chats": args.chats, "turns": sum(c.turns for c in chats), "lost": lost,
        "rebuilt": rebuilt, "relocated": relocated,
        "turns_reprefilled": sum(c.reprefilled for c in chats),
        "history_tokens_kept": sum(c.kept for c in chats), "moved_per_drain": moved,
        "restart_s": t_end - t_start,
        "itl_before_ms": {"p50": pct(before, 50), "p99": pct(before, 99), "n": len(before)},
        "itl_during_ms": {"p50": pct(during, 50), "p99": pct(during, 99), "n": len(during)},
        "errors": [c.failed for c in chats if c.failed],
    }
    print(json.dumps(summary, indent=1))
    for log in logs:
        for line in log.splitlines():
            if "sessions moved" in line:
                print(line)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "rolling_restart.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
