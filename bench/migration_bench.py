#!/usr/bin/env python3
"""Live migration benchmark (docs/operations.md, "A rolling update with zero
re-prefill"): two model servers on loopback (the default model,
--prefix_cache=false so that a prefill computes everything), A with
--peers A,B. A session of N random token ids is prefilled on A; A gets
SIGTERM and moves it to B (export, ImportSession under the same id); the
migration time is what A reports for the session ("migration: session ... in
X ms": export + transfer + import), against prefilling the same N tokens on
B (the re-prefill a client would otherwise pay). Then --sessions sessions of
--parallel_tokens tokens are moved with --migrate_parallel 1 and 4: the
whole migration's time.

    python3 bench/migration_bench.py [--sizes 512,2048,8192] [--rounds 3] [--threads 2]

Prints medians and writes build/bench/migration.json.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import socket
import statistics
import subprocess
import time

from servers import BIN, MODEL, ROOT, model_stubs  # bench/servers.py

OUT = ROOT / "build" / "bench"
grpc, model_pb2, model_pb2_grpc = model_stubs()

TOP1 = model_pb2.LogitsOptions(encoding=model_pb2.LogitsOptions.LOGITS_TOP_N, top_n=1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A model_server on a fixed port (the peers must know it in advance),
    its stderr kept for the migration lines."""

    def __init__(self, port: int, peers: str, threads: int, parallel: int = 4):
        flags = ["--model", str(MODEL), "--listen", f"127.0.0.1:{port}", "--threads",
                 str(threads), "--metrics_listen", "", "--prefix_cache=false", "--kv_cache_mb",
                 "1024", "--drain_seconds", "120", "--migrate_parallel", str(parallel),
                 "--log_level", "warning"]
        if peers:
            flags += ["--peers", peers]
        self.proc = subprocess.Popen([str(BIN / "model_server"), *flags],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}",
                                        options=[("grpc.max_receive_message_length", -1)])
        self.stub = model_pb2_grpc.ModelStub(channel)
        for _ in range(1200):
            try:
                self.vocab = self.stub.Info(model_pb2.ModelInfoRequest(), timeout=10).vocab_size
                return
            except grpc.RpcError:
                time.sleep(0.1)
        raise SystemExit("migration_bench: model_server did not start")

    def prefill(self, tokens: list[int]) -> tuple[str, float]:
        t0 = time.perf_counter()
        sid = self.stub.Prefill(model_pb2.PrefillRequest(tokens=tokens, logits=TOP1),
                                timeout=600).session_id
        return sid, time.perf_counter() - t0

    def drain(self) -> str:
        """SIGTERM; returns its stderr once it exited."""
        self.proc.terminate()
        _, err = self.proc.communicate(timeout=300)
        return err


def moved_ms(log: str) -> dict[str, float]:
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r"migration: session (\S+) \(.*\) -> \S+ in (\d+) ms", log)}


def total_s(log: str) -> float:
    m = re.search(r"migration: (\d+) sessions moved .* in ([\d.]+) s", log)
    return float(m.group(2)) if m else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="512,2048,8192")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--parallel_tokens", type=int, default=1024)
    args = ap.parse_args()
    pa, pb = free_port(), free_port()
    peers = f"127.0.0.1:{pa},127.0.0.1:{pb}"
    b = Server(pb, "", args.threads)
    rows = []
    try:
        for n in [int(x) for x in args.sizes.split(",")]:
            for r in range(args.rounds):
                a = Server(pa, peers, args.threads)
                tokens = [random.randrange(a.vocab) for _ in range(n)]
                sid, _ = a.prefill(tokens)
                log = a.drain()
                ms = moved_ms(log).get(sid)
                if ms is None:
                    raise SystemExit(f"migration_bench: session not moved:\n{log}")
                # The same tokens prefilled on B: the re-prefill it saved.
                again, prefill_s = b.prefill(tokens)
                for s in (sid, again):
                    b.stub.Release(model_pb2.ReleaseRequest(session_id=s))
                rows.append({"tokens": n, "migrate_s": ms / 1e3, "reprefill_s": prefill_s})
                print(f"{n} tokens: migrated in {ms:.0f} ms, re-prefill {prefill_s * 1e3:.0f} ms",
                      flush=True)
        par = []
        for parallel in (1, 4):
            a = Server(pa, peers, args.threads, parallel)
            ids = [a.prefill([random.randrange(a.vocab) for _ in range(args.parallel_tokens)])[0]
                   for _ in range(args.sessions)]
            took = total_s(a.drain())
            for s in ids:
                b.stub.Release(model_pb2.ReleaseRequest(session_id=s))
            par.append({"parallel": parallel, "sessions": args.sessions,
                        "tokens": args.parallel_tokens, "total_s": took})
            print(f"{args.sessions} sessions of {args.parallel_tokens} tokens, "
                  f"--migrate_parallel {parallel}: {took:.2f} s", flush=True)
    finally:
        b.proc.terminate()
        b.proc.communicate(timeout=300)
    print(f"migration vs re-prefill, {args.threads} threads, median of {args.rounds}:")
    print("| tokens | migrate, ms | re-prefill, ms | ratio |")
    print("|---|---|---|---|")
    summary = []
    for n in sorted({r["tokens"] for r in rows}):
        m = statistics.median(r["migrate_s"] for r in rows if r["tokens"] == n)
        p = statistics.median(r["reprefill_s"] for r in rows if r["tokens"] == n)
        summary.append({"tokens": n, "migrate_s": m, "reprefill_s": p, "ratio": p / m})
        print(f"| {n} | {m * 1e3:.0f} | {p * 1e3:.0f} | {p / m:.1f}x |")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "migration.json").write_text(json.dumps(
        {"rounds": rows, "median": summary, "parallel": par}, indent=1))


if __name__ == "__main__":
    main()
