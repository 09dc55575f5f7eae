#!/usr/bin/env python3
"""Prefix-cache benchmark: the model server with --prefix_cache (the default)
against the same server with --prefix_cache=false, on the same GGUF and
threads, as ratios.

    python3 bench/prefix_cache_bench.py [--rounds 5] [--threads 2] [--system 1000]
                                        [--sessions 16] [--shared 500] [-n 16]

TTFT: a first session prefills a system prompt of --system tokens and a
question of 24; a second session prefills the same system prompt and another
question. The figure is the second Prefill's latency (the time to its first
token's logits), cached against uncached; the system prompt differs in every
round, so that only the first session's blocks can help.

Throughput: --sessions sessions at once, each prefilling a shared prefix of
--shared tokens and 24 tokens of its own, then decoding -n tokens greedily
(Decode with top-1 logits); the figure is the prompt and generated tokens of
all sessions over the wall time. The shared prefix is new in every round;
the first session to reach the server computes it, the others find it.

Token ids are drawn at random from the vocabulary (the forward pass does not
care what they say). The two servers run one at a time, in alternating order
from round to round, so that other load hits both alike. Prints medians and
writes build/bench/prefix_cache.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path

from servers import BIN, MODEL, ROOT, model_stubs, start  # bench/servers.py

OUT = ROOT / "build" / "bench"
grpc, model_pb2, model_pb2_grpc = model_stubs()

QUESTION = 24  # tokens of each session's own part
TOP1 = model_pb2.LogitsOptions(encoding=model_pb2.LogitsOptions.LOGITS_TOP_N, top_n=1)


def log(msg: str) -> None:
    print(f"prefix_cache_bench: {msg}", file=sys.stderr, flush=True)


class Server:
    def __init__(self, model: str, threads: int, cache: bool):
        self.proc, address = start(
            "model_server", ["--model", model, "--threads", str(threads),
                             f"--prefix_cache={'true' if cache else 'false'}"], "prefix_cache_bench")
        self.channel = grpc.insecure_channel(address)
        self.stub = model_pb2_grpc.ModelStub(self.channel)
        deadline = time.monotonic() + 120
        while True:  # UNAVAILABLE while the model loads
            try:
                info = self.stub.Info(model_pb2.ModelInfoRequest(), wait_for_ready=True,
                                      timeout=120)
                break
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        assert info.prefix_cache == cache, "the server did not take --prefix_cache"
        self.vocab = info.vocab_size

    def close(self) -> None:
        self.channel.close()
        self.proc.terminate()
        self.proc.wait()

    def prefill(self, tokens: list[int]) -> tuple[str, int, float]:
        """A new session with `tokens`: its id, the argmax and the latency."""
        start = time.perf_counter()
        r = self.stub.Prefill(model_pb2.PrefillRequest(
            tokens=tokens, logits=TOP1))
        return r.session_id, r.logits.top_ids[0], time.perf_counter() - start

    def decode(self, session: str, token: int) -> int:
        r = self.stub.Decode(model_pb2.DecodeTokenRequest(
            session_id=session, token=token, logits=TOP1))
        return r.logits.top_ids[0]

    def release(self, session: str) -> None:
        self.stub.Release(model_pb2.ReleaseRequest(session_id=session))


def ttft(server: Server, rng: random.Random, system: int) -> float:
    prompt = [rng.randrange(server.vocab) for _ in range(system)]
    first, _, _ = server.prefill(prompt + [rng.randrange(server.vocab) for _ in range(QUESTION)])
    second, _, latency = server.prefill(
        prompt + [rng.randrange(server.vocab) for _ in range(QUESTION)])
    server.release(first)
    server.release(second)
    return latency


def throughput(server: Server, rng: random.Random, sessions: int, shared: int, n: int) -> float:
    prefix = [rng.randrange(server.vocab) for _ in range(shared)]
    prompts = [prefix + [rng.randrange(server.vocab) for _ in range(QUESTION)]
               for _ in range(sessions)]
    errors: list[BaseException] = []

    def run(prompt: list[int]) -> None:
        try:
            session, token, _ = server.prefill(prompt)
            for _ in range(n):
                token = server.decode(session, token)
            server.release(session)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(p,)) for p in prompts]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return sessions * (shared + QUESTION + n) / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(MODEL))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--system", type=int, default=1000, help="system prompt tokens (TTFT)")
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--shared", type=int, default=500, help="shared prefix tokens (throughput)")
    ap.add_argument("-n", type=int, default=16, help="tokens each session decodes")
    args = ap.parse_args()
    if not (BIN / "model_server").exists():
        sys.exit("prefix_cache_bench: build first (cmake --build --preset default)")

    results: dict[bool, dict[str, list[float]]] = {
        c: {"ttft_s": [], "tokens_per_s": []} for c in (True, False)}
    rng = random.Random(1)
    for r in range(args.rounds):
        for cache in ((True, False) if r % 2 == 0 else (False, True)):
            server = Server(args.model, args.threads, cache)
            try:
                seed = rng.randrange(1 << 30)  # the same prompts for both sides of a round
                results[cache]["ttft_s"].append(ttft(server, random.Random(seed), args.system))
                results[cache]["tokens_per_s"].append(
                    throughput(server, random.Random(seed + 1), args.sessions, args.shared,
                               args.n))
            finally:
                server.close()
        log(f"round {r + 1}/{args.rounds}: TTFT {results[True]['ttft_s'][-1] * 1e3:.1f} ms "
            f"cached, {results[False]['ttft_s'][-1] * 1e3:.1f} ms uncached")

    med = {c: {k: statistics.median(v) for k, v in results[c].items()} for c in (True, False)}
    ttft_ratio = med[False]["ttft_s"] / med[True]["ttft_s"]
    tput_ratio = med[True]["tokens_per_s"] / med[False]["tokens_per_s"]
    print(f"model {Path(args.model).name}, {args.threads} threads, {args.rounds} rounds (medians)")
    print("| test | prefix cache | no prefix cache | ratio |")
    print("|---|---|---|---|")
    print(f"| TTFT, 2nd session sharing {args.system} system tokens (+{QUESTION}) | "
          f"{med[True]['ttft_s'] * 1e3:.1f} ms | {med[False]['ttft_s'] * 1e3:.1f} ms | "
          f"**{ttft_ratio:.2f}x** |")
    print(f"| {args.sessions} sessions sharing {args.shared} tokens (+{QUESTION}, "
          f"{args.n} decoded each), tokens/s | {med[True]['tokens_per_s']:.0f} | "
          f"{med[False]['tokens_per_s']:.0f} | **{tput_ratio:.2f}x** |")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "prefix_cache.json").write_text(json.dumps(
        {"args": vars(args), "cached": results[True], "uncached": results[False],
         "ttft_ratio": ttft_ratio, "throughput_ratio": tput_ratio}, indent=2))


if __name__ == "__main__":
    main()
