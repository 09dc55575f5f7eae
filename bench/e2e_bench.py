#!/usr/bin/env python3
"""End-to-end benchmark: generation through both gRPC services (tokenizer_server,
model_server, `llm generate`) against the in-process engine (build/bin/llm-bench)
with the same number of threads.

    python3 bench/e2e_bench.py [--threads 2] [--repetitions 5] [-n 128] [-p 512]

Decode: `llm generate --raw --ignore-eos --temperature 0 --max-tokens n+1
--speculate 0` (one token a step, as llm-bench's; speculation has its own
bench, speculative_bench.py)
reports tokens/s over the n decode steps after the first token (prompt
prefilled, each step = DecodeStream request -> logits -> client sampler ->
detokenize); llm-bench's tg test runs n decode steps in process. The ratio
(e2e / in-process, medians) is the cost of the services; the target is >= 0.95.
Also measured: greedy without lookahead, with full float32 and float16 logits
instead of the default top-1, with the tokenizer DecodeStream detokenizer
instead of the cached one, and sampling. Beside each rate, the mean forward
step (the model server's llm_engine_step_seconds_total over its steps, and
llm-bench's decode_step_ms): what is left of the time per token is the time
between steps.

TTFT: a prompt of p tokens (from tests/data/lighthouses.txt, different in each
repetition so that no prefix cache helps), `llm generate --max-tokens 1`:
the time from the command's start of work (before Encode) to the first token,
beside the in-process prefill time of p tokens (p / llm-bench's pp rate).

Runs alternate so that other load on the machine hits both sides alike: each
repetition runs the in-process side and every e2e path, the in-process side
first in even repetitions and last in odd ones (the e2e paths then in reverse
order), so the default path is always next to its in-process pair. Prints a
table and writes build/bench/e2e.json.

--pin puts the model server's compute threads and llm-bench on cores
0..threads-1, and the model server's other threads (gRPC's: model_server
--pin_threads), the client and the tokenizer server on the others (threads
must leave some), as in a cluster where the client runs on another machine
and the server's RPC threads on cores the forward pass does not use;
without it every process shares every core, and the client's and the RPC
threads' CPU comes out of the forward pass's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "build" / "bin"
OUT = ROOT / "build" / "bench"
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def log(msg: str) -> None:
    print(f"e2e_bench: {msg}", file=sys.stderr, flush=True)


# With --pin: the cores of the model side (model_server, llm-bench) and of the
# client side (llm, tokenizer_server); None leaves every process on every core.
CORES: dict[str, set[int] | None] = {"model": None, "client": None}


def on_cores(side: str):
    """A preexec_fn that pins the child to `side`'s cores (or None)."""
    cores = CORES[side]
    return None if cores is None else (lambda: os.sched_setaffinity(0, cores))


def start(name: str, flags: list[str], lines: int = 1) -> tuple[subprocess.Popen, list[str]]:
    """Starts a server; the addresses of its first `lines` "... port N" lines.
    (With --pin the model server places its own threads: --pin_threads.)"""
    side = "model" if name == "model_server" else "client"
    proc = subprocess.Popen([str(BIN / name), "--listen", "127.0.0.1:0", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=None if side == "model" else on_cores(side))
    addrs = []
    for _ in range(lines):
        m = re.search(r" port (\d+)", proc.stdout.readline())
        if not m:
            proc.kill()
            sys.exit(f"e2e_bench: {name} did not start")
        addrs.append(f"127.0.0.1:{m.group(1)}")
    return proc, addrs


def step_seconds(metrics_addr: str) -> tuple[float, float]:
    """The model server's (time in forward steps, steps) so far."""
    text = urllib.request.urlopen(f"http://{metrics_addr}/metrics", timeout=10).read().decode()
    value = lambda name: float(re.search(rf"^{name} (\S+)", text, re.M).group(1))
    return value("llm_engine_step_seconds_total"), value("llm_engine_steps_total")


def llm_generate(addrs: tuple[str, str], prompt: str, flags: list[str]) -> dict:
    # The streamed JSON lines go to a file, read afterwards: a pipe would wake
    # this Python process at every token, on the cores the servers compute on,
    # and the bench would time its own reader.
    with tempfile.TemporaryFile(mode="w+") as out:
        r = subprocess.run([str(BIN / "llm"), "generate", "--tokenizer", addrs[0], "--model",
                            addrs[1], "--raw", "--json", "--speculate", "0", "--prompt", prompt,
                            *flags],
                           stdout=out, stderr=subprocess.PIPE, text=True, timeout=600,
                           preexec_fn=on_cores("client"))
        if r.returncode != 0:
            sys.exit(f"e2e_bench: llm generate failed: {r.stderr}")
        out.seek(0)
        return json.loads(out.read().strip().splitlines()[-1])


def llm_bench(threads: int, p: int, n: int, reps: int) -> dict:
    r = subprocess.run([str(BIN / "llm-bench"), "--model", str(MODEL), "--threads", str(threads),
                        "-p", str(p), "-n", str(n), "--repetitions", str(reps)],
                       capture_output=True, text=True, timeout=900, preexec_fn=on_cores("model"))
    if r.returncode != 0:
        sys.exit(f"e2e_bench: llm-bench failed: {r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def prompt_of_tokens(addrs: tuple[str, str], p: int, prefix: str) -> str:
    """`prefix` and the start of lighthouses.txt, cut to p token ids."""
    text = (ROOT / "tests" / "data" / "lighthouses.txt").read_text()
    while len(text) < 8 * p:
        text += "\n" + text
    tok = subprocess.run([str(BIN / "llm"), "tokenize", "--server", addrs[0]],
                         input=json.dumps({"text": prefix + text}) + "\n", capture_output=True,
                         text=True, check=True)
    ids = json.loads(tok.stdout)["ids"][:p]
    detok = subprocess.run([str(BIN / "llm"), "detokenize", "--server", addrs[0]],
                           input=json.dumps({"ids": ids}) + "\n", capture_output=True, text=True,
                           check=True)
    return json.loads(detok.stdout)["text"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("-n", type=int, default=128, help="decode steps")
    ap.add_argument("-p", type=int, default=512, help="prompt tokens for TTFT")
    ap.add_argument("--pin", action="store_true",
                    help="the model server's compute threads and llm-bench on cores "
                    "0..threads-1; gRPC's threads, the client and the tokenizer on the others")
    args = ap.parse_args()
    if args.pin:
        cores = sorted(os.sched_getaffinity(0))
        if args.threads >= len(cores):
            sys.exit(f"e2e_bench: --pin needs --threads below the {len(cores)} cores")
        CORES["model"] = set(cores[:args.threads])
        CORES["client"] = set(cores[args.threads:])
    for b in ("tokenizer_server", "model_server", "llm", "llm-bench"):
        if not (BIN / b).exists():
            sys.exit(f"e2e_bench: build/bin/{b} missing: cmake --build --preset default")
    if not MODEL.exists():
        sys.exit("e2e_bench: model missing: scripts/fetch-model.sh")
    log(f"load average before: {os.getloadavg()[0]:.2f}")

    tok_proc, (tok_addr,) = start("tokenizer_server", ["--vocab", str(MODEL)])
    model_flags = ["--model", str(MODEL), "--threads", str(args.threads),
                   "--metrics_listen", "127.0.0.1:0"] + (["--pin_threads"] if args.pin else [])
    model_proc, (model_addr, metrics_addr) = start("model_server", model_flags, lines=2)
    addrs = (tok_addr, model_addr)
    try:
        subprocess.run([str(BIN / "llm"), "health", "--tokenizer", tok_addr, "--model", model_addr,
                        "--wait", "120"], check=True, capture_output=True)
        short = "Once upon a time, in a small village by the sea,"
        decode_flags = ["--ignore-eos", "--temperature", "0", "--max-tokens", str(args.n + 1)]
        variants = {
            "e2e greedy (top-1 logits)": [],
            "e2e greedy, no lookahead": ["--nolookahead"],
            "e2e greedy, full fp32 logits": ["--logits", "full"],
            "e2e greedy, fp16 logits": ["--logits", "fp16"],
            "e2e greedy, DecodeStream detokenizer": ["--detokenize", "stream"],
            "e2e sampled (T 0.8, top-k 40: top-40 logits)": ["--temperature", "0.8", "--seed", "1"],
        }
        log("warm-up")
        llm_generate(addrs, short, decode_flags)
        engine_rates: list[float] = []
        engine_steps: list[float] = []
        rates: dict[str, list[float]] = {k: [] for k in variants}
        steps: dict[str, list[float]] = {k: [] for k in variants}
        for rep in range(args.repetitions):
            log(f"decode repetition {rep + 1}/{args.repetitions}")
            # Even repetitions run the in-process side first, then the e2e
            # paths; odd ones the e2e paths in reverse order, then the
            # in-process side: the default path always sits next to the
            # in-process run it is paired with, and a drift of the machine's
            # speed favours neither side.
            names = list(variants) if rep % 2 == 0 else list(reversed(variants))

            def in_process() -> None:
                b = llm_bench(args.threads, 0, args.n, 1)
                engine_rates.append(b["decode_tok_s"])
                engine_steps.append(b["decode_step_ms"])

            if rep % 2 == 0:
                in_process()
            for name in names:
                before = step_seconds(metrics_addr)
                rates[name].append(llm_generate(addrs, short, decode_flags + variants[name])
                                   ["tokens_per_second"])
                after = step_seconds(metrics_addr)
                steps[name].append(1000 * (after[0] - before[0]) / (after[1] - before[1]))
            if rep % 2 == 1:
                in_process()
        log(f"TTFT with a {args.p}-token prompt")
        ttft, prompt_tokens = [], 0
        for rep in range(args.repetitions):
            long_prompt = prompt_of_tokens(addrs, args.p, f"Run {rep}. ")
            s = llm_generate(addrs, long_prompt, ["--temperature", "0", "--max-tokens", "1"])
            ttft.append(s["time_to_first_token_ms"])
            prompt_tokens = s["prompt_tokens"]
        pp = llm_bench(args.threads, args.p, 0, args.repetitions)["prefill_tok_s"]
    finally:
        for proc in (tok_proc, model_proc):
            proc.terminate()
            proc.wait(timeout=30)

    engine = statistics.median(engine_rates)
    rows = []
    pinned = (f", model side on cores {sorted(CORES['model'])}, client side on "
              f"{sorted(CORES['client'])}" if args.pin else "")
    print(f"\nEnd-to-end decode, SmolLM2-135M Q4_1, {args.threads} threads, {args.n} tokens "
          f"(medians of {args.repetitions}){pinned}\n")
    # "paired": the median over repetitions of (e2e run / the in-process run
    # of the same repetition, run just before or, every other repetition,
    # just after the default path), which a slow drift of the machine's speed
    # moves less.
    # "step ms": the mean forward step; 1000 / tok/s minus it is the time
    # between steps.
    print(f"| {'path':<46} | {'tok/s':>7} | {'vs in-process':>13} | {'paired':>6} | "
          f"{'step ms':>7} |")
    print(f"|{'-' * 48}|{'-' * 9}|{'-' * 15}|{'-' * 8}|{'-' * 9}|")
    engine_step = statistics.median(engine_steps)
    print(f"| {'in-process engine (llm-bench tg)':<46} | {engine:7.1f} | {1.0:13.3f} | "
          f"{1.0:6.3f} | {engine_step:7.2f} |")
    for name, values in rates.items():
        m = statistics.median(values)
        paired = statistics.median(v / e for v, e in zip(values, engine_rates))
        step = statistics.median(steps[name])
        rows.append({"path": name, "tok_s": m, "ratio": m / engine, "paired_ratio": paired,
                     "step_ms": step, "runs": values, "step_ms_runs": steps[name]})
        print(f"| {name:<46} | {m:7.1f} | {m / engine:13.3f} | {paired:6.3f} | {step:7.2f} |")
    ttft_ms = statistics.median(ttft)
    in_process_ms = 1000.0 * args.p / pp
    print(f"\nTime to first token, {prompt_tokens}-token prompt: {ttft_ms:.1f} ms end to end "
          f"(in-process prefill of {args.p} tokens: {in_process_ms:.1f} ms at {pp:.0f} tok/s)")
    ratio = rows[0]["ratio"]
    print(f"\nratio e2e / in-process (default greedy path): {ratio:.3f}, paired "
          f"{rows[0]['paired_ratio']:.3f} ({'meets' if ratio >= 0.95 else 'below'} the 0.95 "
          f"target)")
    OUT.mkdir(parents=True, exist_ok=True)
    result = {
        "model": str(MODEL.relative_to(ROOT)), "threads": args.threads, "n": args.n,
        "pinned": args.pin,
        "repetitions": args.repetitions, "in_process_decode_tok_s": engine,
        "in_process_runs": engine_rates, "in_process_step_ms": engine_step,
        "in_process_step_ms_runs": engine_steps, "e2e": rows, "ratio": ratio,
        "ttft_prompt_tokens": prompt_tokens, "ttft_ms": ttft_ms, "ttft_runs": ttft,
        "in_process_prefill_tok_s": pp, "in_process_prefill_ms": in_process_ms,
        "load_average_after": os.getloadavg()[0], "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (OUT / "e2e.json").write_text(json.dumps(result, indent=2) + "\n")
    log(f"wrote {OUT / 'e2e.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
