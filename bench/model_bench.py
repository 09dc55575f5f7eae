#!/usr/bin/env python3
"""Model benchmark: our engine (build/bin/llm-bench) against llama.cpp's own
llama-bench and llama-batched-bench, on the same GGUF files and threads.

    python3 bench/model_bench.py [--threads 2] [--rounds 12] [--quants Q4_1,Q4_0,Q4_K_M]
                                 [-p 512] [-n 128] [--sessions 1,4,16] [--model PATH]
                                 [--bandwidth]

(--model: that file alone, as it is, instead of the default model's
quantizations; e.g. models/gemma-3-270m-q4_k_m.gguf, or a 1B-class shape from
`llm-random-model --shape llama3.2-1b --out /tmp/llama3.2-1b.gguf`.
--bandwidth: llm-bench measures the read bandwidth of --threads threads each
round, and both sides' decode is printed as a share of it: weight bytes per
token x tokens per second / GB per second.)

The anchor is llama.cpp itself, not a binding: the first run downloads the
current llama-cpp-python source distribution from PyPI (LLAMA_CPP_PYTHON below;
it vendors llama.cpp), and builds its llama-bench, llama-batched-bench and
llama-quantize with CMake in build/bench-llama.cpp (Release, GGML_NATIVE, the
same compiler as ours; several minutes on 2 cores). Nothing of it is kept in
the repository.

Files: the default model (Q4_1) and, made from it with
`llama-quantize --allow-requantize`, Q4_0 (llama.cpp's tuned path: it repacks
Q4_0 weights for AVX2 / AVX-512) and Q4_K_M. Requantizing a quantized file
loses quality; both sides read the same file, and the speed is what is
measured.

Method, per file and round: each side runs pp{p} (a prefill of p random
tokens in one batch) and tg{n} (n single-token decode steps), once each after
its own warm-up (llama-bench -r 1; llm-bench --repetitions 1), and the side
that goes first alternates from round to round, so that the machine's phases
hit both. The aggregate decode of K concurrent sequences is llm-bench
--sessions K against llama-batched-bench -npp 1 -ntg n -npl K (S_TG: tokens of
all sequences per second), once per round.

Prints, per test, each side's min / median / max rate and the min / median /
max of the per-round ratios (ours / llama.cpp), and writes
build/bench/model.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
from pathlib import Path

from llama_build import LLAMA_CPP_PYTHON, LLAMA_DIR, llama_source, tool_logger

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
OUT = BUILD / "bench"
DEFAULT_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
TOOLS = ("llama-bench", "llama-batched-bench", "llama-quantize")


log, run = tool_logger("model_bench")


def llama_tools() -> Path:
    """Builds llama.cpp's tools from the llama-cpp-python sdist; their bin dir."""
    bin_dir = LLAMA_DIR / "build" / "bin"
    if all((bin_dir / t).exists() for t in TOOLS):
        return bin_dir
    src = llama_source(log, run)
    log("building llama-bench, llama-batched-bench, llama-quantize (several minutes)")
    run(["cmake", "-S", str(src / "vendor" / "llama.cpp"), "-B", str(LLAMA_DIR / "build"),
         "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF",
         "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF",
         "-DLLAMA_OPENSSL=OFF"])
    run(["cmake", "--build", str(LLAMA_DIR / "build"), "-j", str(os.cpu_count() or 2),
         "--target", *TOOLS])
    return bin_dir


def model_file(quant: str, tools: Path) -> Path:
    """The default model in `quant` (Q4_1: the file itself; others requantized)."""
    if quant.upper() == "Q4_1":
        return DEFAULT_MODEL
    out = OUT / f"SmolLM2-135M-Instruct.{quant.upper()}.gguf"
    if not out.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        log(f"making {out.name} with llama-quantize --allow-requantize")
        run([str(tools / "llama-quantize"), "--allow-requantize", str(DEFAULT_MODEL), str(out),
             quant.upper(), "2"])
    return out


def llama_bench(tools: Path, model: Path, threads: int, p: int, n: int) -> dict[str, float]:
    res = run([str(tools / "llama-bench"), "-m", str(model), "-t", str(threads), "-p", str(p),
               "-n", str(n), "-r", "1", "-o", "json"])
    out = {}
    for row in json.loads(res.stdout):
        if row.get("n_prompt", 0) > 0 and row.get("n_gen", 0) == 0:
            out["prefill"] = float(row["avg_ts"])
        elif row.get("n_gen", 0) > 0 and row.get("n_prompt", 0) == 0:
            out["decode"] = float(row["avg_ts"])
    return out


def llama_batched(tools: Path, model: Path, threads: int, n: int,
                  sessions: list[int]) -> dict[int, float]:
    ctx = max(sessions) * (n + 1) + 64
    res = run([str(tools / "llama-batched-bench"), "-m", str(model), "-t", str(threads),
               "-tb", str(threads), "-c", str(ctx), "-b", "2048", "-ub", "512", "-npp", "1",
               "-ntg", str(n), "-npl", ",".join(map(str, sessions)), "--output-format", "jsonl"])
    out = {}
    for line in (res.stdout + "\n" + res.stderr).splitlines():  # its log goes to either
        line = line.strip()
        if line.startswith("{"):
            row = json.loads(line)
            out[int(row["pl"])] = float(row["speed_tg"])
    return out


def ours(model: Path, threads: int, p: int, n: int, sessions: list[int],
         bandwidth: bool = False) -> dict:
    cmd = [str(BUILD / "bin" / "llm-bench"), f"--model={model}", f"--threads={threads}",
           f"-p={p}", f"-n={n}", "--repetitions=1"]
    if sessions:
        cmd.append("--sessions=" + ",".join(map(str, sessions)))
    if bandwidth:
        cmd.append("--measure_bandwidth")
    res = json.loads(run(cmd).stdout.strip().splitlines()[-1])
    out = {"prefill": res["prefill_tok_s"], "decode": res["decode_tok_s"]}
    if bandwidth:
        out["read_gb_s"] = res["read_gb_s"]
        out["decode_weight_bytes"] = res["decode_weight_bytes"]
    for k, v in res.get("aggregate_decode_tok_s", {}).items():
        out[f"sessions{k}"] = v
    return out


def spread(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--quants", default="Q4_1,Q4_0,Q4_K_M")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--sessions", default="1,4,16",
                    help="aggregate decode with these sequence counts ('' skips it)")
    ap.add_argument("--no-build", action="store_true", help="do not build llm-bench")
    ap.add_argument("--model", help="benchmark this GGUF file alone (ignores --quants)")
    ap.add_argument("--bandwidth", action="store_true",
                    help="measure the read bandwidth each round (llm-bench --measure_bandwidth) "
                         "and print both sides' decode as a share of it")
    args = ap.parse_args()
    sessions = [int(s) for s in args.sessions.split(",") if s]

    tools = llama_tools()
    if not args.no_build:
        log("building llm-bench")
        run(["cmake", "--build", str(BUILD), "--target", "llm_bench_tool", "-j2"], cwd=ROOT)
    result = {"threads": args.threads, "rounds": args.rounds,
              "llama_cpp_python": LLAMA_CPP_PYTHON, "files": {}}
    tests = [("prefill", f"pp{args.p}"), ("decode", f"tg{args.n}")]
    tests += [(f"sessions{k}", f"{k} sessions") for k in sessions]
    models = ([Path(args.model).resolve()] if args.model
              else [model_file(quant, tools) for quant in args.quants.split(",")])
    for model in models:
        samples: dict[str, dict[str, list[float]]] = {}
        for r in range(args.rounds):
            log(f"{model.name}: round {r + 1}/{args.rounds}")
            order = ("llama.cpp", "ours") if r % 2 == 0 else ("ours", "llama.cpp")
            for side in order:
                if side == "ours":
                    got = ours(model, args.threads, args.p, args.n, sessions, args.bandwidth)
                else:
                    got = llama_bench(tools, model, args.threads, args.p, args.n)
                    if sessions:
                        for k, v in llama_batched(tools, model, args.threads, args.n,
                                                  sessions).items():
                            got[f"sessions{k}"] = v
                for key, value in got.items():
                    samples.setdefault(key, {}).setdefault(side, []).append(value)
        print(f"\n{model.name}, {args.threads} threads, {args.rounds} rounds "
              f"(min / median / max)\n")
        print(f"{'':<12}{'ours, tok/s':^26}{'llama.cpp, tok/s':^26}{'ours / llama.cpp':^22}")
        print(f"{'test':<12}" + f"{'min':>8}{'median':>9}{'max':>9}" * 2
              + f"{'min':>8}{'median':>7}{'max':>7}")
        file_result = {}
        for key, label in tests:
            mine, theirs = samples.get(key, {}).get("ours"), samples.get(key, {}).get("llama.cpp")
            if not mine or not theirs:
                continue
            ratios = [a / b for a, b in zip(mine, theirs)]
            m, t, q = spread(mine), spread(theirs), spread(ratios)
            print(f"{label:<12}{m[0]:8.0f}{m[1]:9.0f}{m[2]:9.0f}{t[0]:8.0f}{t[1]:9.0f}{t[2]:9.0f}"
                  f"{q[0]:8.2f}{q[1]:7.2f}{q[2]:7.2f}")
            file_result[label] = {"ours": mine, "llama.cpp": theirs,
                                  "ratio_min_median_max": [round(x, 3) for x in q]}
        if args.bandwidth and samples.get("read_gb_s"):
            # Decode's share of the measured read bandwidth: weight bytes per
            # token x tokens per second / GB per second, round by round.
            reads = samples["read_gb_s"]["ours"]
            weight = samples["decode_weight_bytes"]["ours"][0]
            shares = {side: [weight * rate / 1e9 / bw for rate, bw in
                             zip(samples["decode"][side], reads)]
                      for side in ("ours", "llama.cpp")}
            r = spread(reads)
            print(f"\nread bandwidth, {args.threads} threads: {r[0]:.1f} / {r[1]:.1f} / {r[2]:.1f} "
                  f"GB/s; decode reads {weight / 1e6:.0f} MB a token")
            for side, vals in shares.items():
                s = spread(vals)
                print(f"decode share of it, {side}: {s[0]:.1%} / {s[1]:.1%} / {s[2]:.1%}")
            file_result["bandwidth"] = {"read_gb_s": reads, "decode_weight_bytes": weight,
                                        "decode_share": shares}
        result["files"][model.name] = file_result
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "model.json").write_text(json.dumps(result, indent=1) + "\n")
    log(f"wrote {OUT / 'model.json'}")


if __name__ == "__main__":
    main()
