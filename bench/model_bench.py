#!/usr/bin/env python3
"""Model benchmark: our engine (build/bin/llm-bench) against llama.cpp
(PyPI `llama-cpp-python`, which builds llama.cpp from source) on the same GGUF
file and the same number of threads.

    python3 bench/model_bench.py [--model models/SmolLM2-135M-Instruct.Q4_1.gguf]
                                 [--threads 2] [-p 512] [-n 128] [--repetitions 5]

Both sides measure what llama-bench calls pp512 and tg128: a prefill of 512
random tokens in one batch from an empty cache, and 128 single-token decode
steps from an empty cache; one warm-up run, then the mean rate over the
repetitions. The llama.cpp side calls Llama.eval() from Python, which adds a
few microseconds per call (under 1% of a decode step here). The engine side
also reports aggregate decode throughput with 1, 4 and 16 concurrent sessions.

Prints a table with the ratios (ours / llama.cpp) and writes
build/bench/model.json. The first run creates build/bench-venv and installs
llama-cpp-python there (pip compiles llama.cpp: several minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
VENV = BUILD / "bench-venv"
OUT = BUILD / "bench"
LLAMA_CPP_PYTHON = "llama-cpp-python==0.3.16"
IN_VENV_ENV = "LLM_MODEL_BENCH_IN_VENV"


def log(msg: str) -> None:
    print(f"model_bench: {msg}", file=sys.stderr, flush=True)


def ensure_llama_cpp() -> None:
    try:
        import llama_cpp  # noqa: F401
        return
    except ImportError:
        pass
    if os.environ.get(IN_VENV_ENV):
        sys.exit("model_bench: llama_cpp still missing inside the venv")
    py = VENV / "bin" / "python"
    if not py.exists():
        log(f"creating {VENV}")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    probe = subprocess.run([str(py), "-c", "import llama_cpp"], capture_output=True)
    if probe.returncode != 0:
        log(f"installing {LLAMA_CPP_PYTHON} (pip builds llama.cpp; several minutes)")
        subprocess.run([str(py), "-m", "pip", "install", "-q", LLAMA_CPP_PYTHON], check=True)
    os.environ[IN_VENV_ENV] = "1"
    os.execv(str(py), [str(py), __file__] + sys.argv[1:])


def llama_cpp_rates(model: str, threads: int, p: int, n: int, reps: int) -> dict:
    from llama_cpp import Llama

    llm = Llama(model_path=model, n_ctx=max(p, n) + 16, n_batch=max(p, 1), n_ubatch=max(p, 1),
                n_threads=threads, n_threads_batch=threads, verbose=False)
    vocab = llm.n_vocab()
    rng = random.Random(42)

    def pp() -> float:
        tokens = [rng.randrange(vocab) for _ in range(p)]
        llm.reset()
        start = time.perf_counter()
        llm.eval(tokens)
        return p / (time.perf_counter() - start)

    def tg() -> float:
        tokens = [rng.randrange(vocab) for _ in range(n)]
        llm.reset()
        start = time.perf_counter()
        for t in tokens:
            llm.eval([t])
        return n / (time.perf_counter() - start)

    out = {}
    for name, fn, count in (("prefill", pp, p), ("decode", tg, n)):
        if count <= 0:
            continue
        fn()
        rates = [fn() for _ in range(reps)]
        out[f"{name}_tok_s"] = round(statistics.mean(rates), 2)
        out[f"{name}_tok_s_stddev"] = round(statistics.stdev(rates), 2) if reps > 1 else 0.0
    return out


def ours(model: str, threads: int, p: int, n: int, reps: int, sessions: str) -> dict:
    cmd = [str(BUILD / "bin" / "llm-bench"), f"--model={model}", f"--threads={threads}",
           f"-p={p}", f"-n={n}", f"--repetitions={reps}"]
    if sessions:
        cmd.append(f"--sessions={sessions}")
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"model_bench: llm-bench failed:\n{res.stderr}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--sessions", default="1,4,16")
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    ensure_llama_cpp()
    if not args.no_build:
        log("building llm-bench")
        subprocess.run(["cmake", "--build", str(BUILD), "--target", "llm_bench_tool", "-j2"],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    # Alternate the two sides so that machine noise hits both.
    log("llama.cpp ...")
    theirs = llama_cpp_rates(args.model, args.threads, args.p, args.n, args.repetitions)
    log("ours ...")
    mine = ours(args.model, args.threads, args.p, args.n, args.repetitions, args.sessions)
    result = {"model": args.model, "threads": args.threads, "ours": mine, "llama.cpp": theirs}
    print(f"\nmodel {Path(args.model).name}, {args.threads} threads, "
          f"{args.repetitions} repetitions after a warm-up\n")
    print(f"{'test':<12}{'ours tok/s':>14}{'llama.cpp tok/s':>18}{'ratio':>8}")
    for key, label in (("prefill_tok_s", f"pp{args.p}"), ("decode_tok_s", f"tg{args.n}")):
        if key in mine and key in theirs:
            ratio = mine[key] / theirs[key]
            result[f"{key.split('_')[0]}_ratio"] = round(ratio, 3)
            print(f"{label:<12}{mine[key]:>14.1f}{theirs[key]:>18.1f}{ratio:>8.2f}")
    agg = mine.get("aggregate_decode_tok_s", {})
    if agg:
        base = agg.get("1")
        print("\naggregate decode through the step loop (ours):")
        for k, v in agg.items():
            scale = f"  ({v / base:.2f}x one session)" if base else ""
            print(f"  {k:>3} sessions: {v:8.1f} tok/s{scale}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "model.json").write_text(json.dumps(result, indent=1) + "\n")
    log(f"wrote {OUT / 'model.json'}")


if __name__ == "__main__":
    main()
