#!/usr/bin/env python3
"""The HTTP gateway's cost: greedy decode through llm_gateway (streamed
/v1/completions over HTTP, server-sent events) against `llm generate` (the C++
client over gRPC) on the same services, prompt and settings, as a ratio; and
the time to first token that the gateway adds.

    python3 bench/gateway_bench.py [--threads 2] [--rounds 5] [-n 128] [-p 128]

Both sides run the same client library (the gateway is a client of the
tokenizer and model services): greedy (lookahead on), --ignore-eos /
"ignore_eos", n + 1 tokens, the prompt sent raw (no chat template). Decode
rate: tokens after the first per second, from the first token to the last
(`llm generate --json`'s tokens_per_second; for the gateway, timed here at the
arrival of the first token's event and of the stream's end, this reader
asleep in between). Time to first token: the gateway's, from
this script's request to the first token's event (HTTP, JSON, encoding the
prompt, the prefill of p tokens); `llm`'s, from the start of its generation
(after Encode) to the first sampled token; their difference is the overhead
of going through the gateway (and Encode). Rounds alternate the order of the
two sides; each round uses another prompt of p tokens (tests/data/
lighthouses.txt). Prints min / median / max and the ratios of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from servers import BIN, MODEL, ROOT, spread, start, start_services  # bench/servers.py


def log(msg: str) -> None:
    print(f"gateway_bench: {msg}", file=sys.stderr, flush=True)


def prompts(tokenizer: str, p: int, count: int) -> list[str]:
    """`count` different prompts of p tokens each, from lighthouses.txt."""
    text = (ROOT / "tests" / "data" / "lighthouses.txt").read_text()
    while len(text) < 8 * p * (count + 1):
        text += "\n" + text
    tok = subprocess.run([str(BIN / "llm"), "tokenize", "--server", tokenizer],
                         input=json.dumps({"text": text}) + "\n", capture_output=True, text=True,
                         check=True)
    ids = json.loads(tok.stdout)["ids"]
    out = []
    for i in range(count):
        chunk = ids[i * p:(i + 1) * p]
        detok = subprocess.run([str(BIN / "llm"), "detokenize", "--server", tokenizer],
                               input=json.dumps({"ids": chunk}) + "\n", capture_output=True,
                               text=True, check=True)
        out.append(json.loads(detok.stdout)["text"])
    return out


def via_gateway(gateway: str, model_id: str, prompt: str, n: int) -> dict:
    """One streamed completion. Times the first token's event; then, so that
    this reader does not wake at every token on the cores the servers compute
    on, asks the kernel (SO_RCVLOWAT) to wake it only at the end of the
    stream, whose arrival ends the decode (the last events follow the last
    token at once)."""
    host, port = gateway.split(":")
    body = json.dumps({"model": model_id, "prompt": prompt, "max_tokens": n + 1,
                       "temperature": 0, "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    request = (f"POST /v1/completions HTTP/1.1\r\nHost: {gateway}\r\nConnection: close\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
               ).encode() + body
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.connect((host, int(port)))
    start = time.perf_counter()
    sock.sendall(request)
    buf = b""
    first = None
    while True:
        data = sock.recv(1 << 20)
        if not data:
            break
        buf += data
        if first is None and re.search(rb'"text":"[^"]', buf):
            first = time.perf_counter()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1 << 30)
    end = time.perf_counter()
    sock.close()
    usage = None
    for line in buf.decode(errors="replace").split("\n"):
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        j = json.loads(line[6:])
        if "error" in j:
            sys.exit(f"gateway_bench: {j['error']}")
        if j.get("usage"):
            usage = j["usage"]
    if first is None or usage is None:
        sys.exit("gateway_bench: no token or no usage in the stream")
    tokens = usage["completion_tokens"]
    return {"ttft_ms": (first - start) * 1e3, "tokens": tokens,
            "tokens_per_second": (tokens - 1) / (end - first)}


def via_llm(tokenizer: str, model: str, prompt: str, n: int) -> dict:
    with tempfile.TemporaryFile(mode="w+") as out:
        r = subprocess.run([str(BIN / "llm"), "generate", "--tokenizer", tokenizer, "--model",
                            model, "--raw", "--json", "--temperature", "0", "--ignore-eos",
                            "--speculate", "0",  # as the gateway's default
                            "--max-tokens", str(n + 1), "--prompt", prompt],
                           stdout=out, stderr=subprocess.PIPE, text=True, timeout=600)
        if r.returncode != 0:
            sys.exit(f"gateway_bench: llm generate failed: {r.stderr}")
        out.seek(0)
        s = json.loads(out.read().strip().splitlines()[-1])
    return {"ttft_ms": s["time_to_first_token_ms"], "tokens": s["tokens"],
            "tokens_per_second": s["tokens_per_second"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-n", type=int, default=128, help="decode tokens after the first")
    ap.add_argument("-p", type=int, default=128, help="prompt tokens")
    ap.add_argument("--model", default=str(MODEL))
    args = ap.parse_args()
    for name in ("tokenizer_server", "model_server", "llm_gateway", "llm"):
        if not (BIN / name).exists():
            sys.exit(f"gateway_bench: {BIN / name} is missing: build first")
    procs = []
    try:
        procs, tokenizer, model = start_services(args.model, args.threads, "gateway_bench")
        gw_proc, gateway = start("llm_gateway", ["--tokenizer", tokenizer, "--model", model])
        procs.append(gw_proc)
        models = json.load(urllib.request.urlopen(f"http://{gateway}/v1/models", timeout=60))
        model_id = models["data"][0]["id"]
        texts = prompts(tokenizer, args.p, args.rounds + 1)
        via_gateway(gateway, model_id, texts[-1], 8)  # warm both paths
        via_llm(tokenizer, model, texts[-1], 8)
        results = {"gateway": [], "llm": []}
        for r in range(args.rounds):
            order = ["gateway", "llm"] if r % 2 == 0 else ["llm", "gateway"]
            for side in order:
                run = (via_gateway(gateway, model_id, texts[r], args.n) if side == "gateway"
                       else via_llm(tokenizer, model, texts[r], args.n))
                if run["tokens"] != args.n + 1:
                    sys.exit(f"gateway_bench: {side} generated {run['tokens']} tokens")
                results[side].append(run)
                log(f"round {r + 1} {side}: {run['tokens_per_second']:.1f} tok/s, "
                    f"TTFT {run['ttft_ms']:.1f} ms")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
    rate = {s: [r["tokens_per_second"] for r in v] for s, v in results.items()}
    ttft = {s: [r["ttft_ms"] for r in v] for s, v in results.items()}
    med = statistics.median
    print(f"greedy decode of {args.n} tokens after a {args.p}-token prompt, {args.threads} "
          f"threads, {args.rounds} rounds (min / median / max):")
    print("| path | decode tok/s | time to first token, ms |")
    print("|---|---|---|")
    print(f"| llm generate (gRPC) | {spread(rate['llm'])} | {spread(ttft['llm'])} |")
    print(f"| llm_gateway (HTTP, SSE) | {spread(rate['gateway'])} | {spread(ttft['gateway'])} |")
    pairs = [g / l for g, l in zip(rate["gateway"], rate["llm"])]
    print(f"decode ratio gateway / llm: {med(rate['gateway']) / med(rate['llm']):.3f} of the "
          f"medians; per round (the two sides run back to back) {spread([100 * r for r in pairs])}"
          f" %")
    print(f"time to first token added by the gateway (medians): "
          f"{med(ttft['gateway']) - med(ttft['llm']):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
