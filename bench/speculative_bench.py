#!/usr/bin/env python3
"""Speculative decoding (llm generate --speculate K, n-gram proposals from the
conversation) against plain decoding: greedy (or seeded sampled) decode tokens/s on a task whose
answer repeats its input (rewriting a piece of code with one change) and on
free chat, with the default model, as ratios to K = 0, with the acceptance
rate (accepted / proposed tokens) and the tokens per decode step.

    python3 bench/speculative_bench.py [--threads 2] [--rounds 3] [-k 2 4 8]
        [--max-tokens 192] [--temperature 0] [--streams 1]

Each run is `llm generate --json --temperature 0 --max-tokens N --speculate K`
(the model's chat template; lookahead as by default; --temperature T samples with llm's other defaults and --seed 1)
against one tokenizer_server and one model_server. The output does not
depend on K (greedy, or seeded sampling): the script checks that every K
gives the same text. Decode rate: the
summary's tokens_per_second (tokens after the first, per second from the
first token to the last). Rounds rotate the order of the K values. Prints
min / median / max per task and K, and the ratio of the medians to K = 0.
With --streams N, N such generations run at once (N sessions batched by the
model server): the rate is then their tokens over the wall time, which is
what speculation costs the other sessions of a batch when its rows are
rejected.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from servers import BIN, MODEL, spread, start_services  # bench/servers.py

CODE = '''def area(width, height):
    """Returns the area of a rectangle."""
    if width < 0 or height < 0:
        raise ValueError("negative size")
    return width * height


def perimeter(width, height):
    """Returns the perimeter of a rectangle."""
    if width < 0 or height < 0:
        raise ValueError("negative size")
    return 2 * (width + height)


def describe(width, height):
    return f"{width} x {height}: area {area(width, height)}, perimeter {perimeter(width, height)}"
'''

TASKS = {
    "echo (rewrite code)": "Rewrite this Python code with one change: rename the function "
                           "`area` to `surface` everywhere. Reply with the complete code only."
                           "\n\n```python\n" + CODE + "```",
    "free chat": "Write a short story about a lighthouse keeper who finds a message in a "
                 "bottle.",
}


def log(msg: str) -> None:
    print(f"speculative_bench: {msg}", file=sys.stderr, flush=True)


def generate(tokenizer: str, model: str, prompt: str, k: int, max_tokens: int,
             temperature: float = 0.0, streams: int = 1) -> dict:
    """`streams` generations of `prompt` at once; the first one's summary,
    with its text, and, over all of them, "aggregate_tokens_per_second": their
    tokens over the wall time from the first start to the last end."""
    cmd = [str(BIN / "llm"), "generate", "--tokenizer", tokenizer, "--model", model, "--json",
           "--temperature", str(temperature), "--seed", "1", "--max-tokens", str(max_tokens),
           "--speculate", str(k), "--prompt", prompt]
    outs = [tempfile.TemporaryFile(mode="w+") for _ in range(streams)]
    start_time = time.perf_counter()
    procs = [subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True) for out in outs]
    summaries = []
    for proc, out in zip(procs, outs):
        _, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            sys.exit(f"speculative_bench: llm generate failed: {err}")
        out.seek(0)
        lines = [json.loads(line) for line in out.read().strip().splitlines()]
        out.close()
        summary = lines[-1]
        summary["text"] = "".join(line["text"] for line in lines[:-1])
        summaries.append(summary)
    wall = time.perf_counter() - start_time
    first = summaries[0]
    first["aggregate_tokens_per_second"] = sum(x["tokens"] for x in summaries) / wall
    first["texts"] = [x["text"] for x in summaries]
    return first


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-k", type=int, nargs="+", default=[2, 4, 8], help="--speculate values")
    ap.add_argument("--max-tokens", type=int, default=192)
    ap.add_argument("--temperature", type=float, default=0.0,
                    help="0: greedy; else sampling with llm's defaults and --seed 1")
    ap.add_argument("--model", default=str(MODEL))
    ap.add_argument("--streams", type=int, default=1,
                    help="generations at once, each its own session (the rate is then the "
                         "aggregate: all their tokens over the wall time, prefill included)")
    args = ap.parse_args()
    for name in ("tokenizer_server", "model_server", "llm"):
        if not (BIN / name).exists():
            sys.exit(f"speculative_bench: {BIN / name} is missing: build first")
    ks = [0] + [k for k in args.k if k != 0]
    runs: dict[tuple[str, int], list[dict]] = {}
    procs = []
    try:
        procs, tokenizer, model = start_services(args.model, args.threads, "speculative_bench")
        generate(tokenizer, model, "Hello", 4, 8)  # warm up
        for task, prompt in TASKS.items():
            for r in range(args.rounds):
                order = ks[r % len(ks):] + ks[:r % len(ks)]
                for k in order:
                    s = generate(tokenizer, model, prompt, k, args.max_tokens, args.temperature,
                                 args.streams)
                    if args.streams > 1:
                        s["tokens_per_second"] = s["aggregate_tokens_per_second"]
                    runs.setdefault((task, k), []).append(s)
                    log(f"{task}, k={k}, round {r + 1}: {s['tokens']} tokens, "
                        f"{s['tokens_per_second']:.1f} tok/s, accepted {s['accepted_tokens']}"
                        f"/{s['proposed_tokens']}")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
    med = statistics.median
    mode = "greedy" if args.temperature == 0 else f"sampled (temperature {args.temperature})"
    what = "decode" if args.streams == 1 else \
        f"{args.streams} streams at once, aggregate (prefill included)"
    print(f"{mode} {what}, up to {args.max_tokens} tokens, {args.threads} threads, "
          f"{args.rounds} rounds (min / median / max):")
    print("| task | k | tokens | decode tok/s | ratio to k=0 | accepted / proposed | "
          "tokens per step |")
    print("|---|---|---|---|---|---|---|")
    for task in TASKS:
        base = med([s["tokens_per_second"] for s in runs[(task, 0)]])
        text = runs[(task, 0)][0]["text"]
        for k in ks:
            ss = runs[(task, k)]
            for s in ss:
                if any(t != text for t in s["texts"]):
                    sys.exit(f"speculative_bench: {task}, k={k}: the output differs from k=0's")
            rate = [s["tokens_per_second"] for s in ss]
            s = ss[0]
            proposed, accepted = s["proposed_tokens"], s["accepted_tokens"]
            acceptance = f"{accepted} / {proposed} ({100 * accepted / proposed:.0f} %)" \
                if proposed else "-"
            # Decode steps: tokens after the first, minus those accepted (fed
            # by an earlier step).
            steps = max(s["tokens"] - 1 - accepted, 1)
            per_step = (s["tokens"] - 1) / steps
            print(f"| {task} | {k} | {s['tokens']} | {spread(rate)} | {med(rate) / base:.2f} | "
                  f"{acceptance} | {per_step:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
