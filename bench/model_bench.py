#!/usr/bin/env python3
"""Model benchmark: our engine (build/bin/llm-bench) against llama.cpp's own
llama-bench and llama-batched-bench, on the same GGUF files and threads.

    python3 bench/model_bench.py [--threads 2] [--rounds 12] [--samples 3]
                                 [--quants Q4_1,Q4_0,Q4_K_M] [-p 512] [-n 128]
                                 [--sessions 1,4,16] [--model PATH] [--bandwidth]

(--model: that file alone, as it is, instead of the default model's
quantizations; e.g. models/gemma-3-270m-q4_k_m.gguf, or a 1B-class shape from
`llm-random-model --shape llama3.2-1b --out /tmp/llama3.2-1b.gguf`.
--bandwidth: llm-bench measures the read bandwidth of --threads threads each
round, and both sides' decode is printed as a share of it: weight bytes per
token x tokens per second / GB per second.)

The anchor is llama.cpp itself, not a binding: the first run downloads the
current llama-cpp-python source distribution from PyPI (LLAMA_CPP_PYTHON in
llama_build.py; it vendors llama.cpp), and builds its tools with CMake in
build/bench-llama.cpp/build (llama_build.build_llama: Release, the same compiler
as ours, GGML_NATIVE, except on a CPU with AMX, where llama.cpp's AMX path
crashes: there the CPU's AVX / AVX-512 extensions one by one and AMX off;
several minutes on 2 cores). The build flags are printed and kept in the JSON.
Nothing of it is kept in the repository.

Files: the default model (Q4_1) and, made from it with
`llama-quantize --allow-requantize`, Q4_0 (llama.cpp's tuned path: it repacks
Q4_0 weights for AVX2 / AVX-512) and Q4_K_M. Requantizing a quantized file
loses quality; both sides read the same file, and the speed is what is
measured.

Method, per file and round: each side runs pp{p} (a prefill of p random
tokens in one batch) and tg{n} (n single-token decode steps), --samples times
each after its own warm-up (llama-bench -r S; llm-bench --repetitions S: the
round's figure is their mean, and their standard deviation is kept), and the
side that goes first alternates from round to round, so that the machine's
phases hit both. The aggregate decode of K concurrent sequences is llm-bench
--sessions K --repetitions S against llama-batched-bench -npp 1 -ntg n -npl K
(S_TG: tokens of all sequences per second) run S times (their mean).

Beside every round the JSON keeps the load average at its start and end and
the CPU that other processes used meanwhile (/proc/stat less this script's
process tree, in cores; run_record.MachineLoad), and the table prints their
ranges: figures from a busy machine are marked as such.

Prints, per test, each side's min / median / max rate and the min / median /
max of the per-round ratios (ours / llama.cpp), and writes
build/bench/model-<UTC time>.json (a new file each run; none is overwritten).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
from pathlib import Path

from llama_build import (LLAMA_CPP_PYTHON, build_flags, build_llama, built_without_amx,
                         cpu_flags, has_amx, tool_logger)
from run_record import MachineLoad, describe, new_stamp

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
OUT = BUILD / "bench"
DEFAULT_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
TOOLS = ["llama-bench", "llama-batched-bench", "llama-quantize"]


log, run = tool_logger("model_bench")


def llama_tools() -> Path:
    """llama.cpp's tools (built on first use); their bin dir. Says how they were built."""
    bin_dir = build_llama(TOOLS, log, run)
    log(f"llama.cpp {LLAMA_CPP_PYTHON} tools in {bin_dir}: {build_flags()}")
    if has_amx() and not built_without_amx():
        log("WARNING: this CPU has AMX and the llama.cpp build has AMX on (it may crash)")
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


def llama_bench(tools: Path, model: Path, threads: int, p: int, n: int,
                samples: int) -> dict[str, float]:
    res = run([str(tools / "llama-bench"), "-m", str(model), "-t", str(threads), "-p", str(p),
               "-n", str(n), "-r", str(samples), "-o", "json"])
    out = {}
    for row in json.loads(res.stdout):
        key = ("prefill" if row.get("n_prompt", 0) > 0 and row.get("n_gen", 0) == 0 else
               "decode" if row.get("n_gen", 0) > 0 and row.get("n_prompt", 0) == 0 else None)
        if key:
            out[key] = float(row["avg_ts"])
            out[f"{key}_stddev"] = float(row.get("stddev_ts", 0.0))
    return out


def llama_batched(tools: Path, model: Path, threads: int, n: int, sessions: list[int],
                  samples: int) -> dict[str, float]:
    """S_TG of each sequence count: the mean (and stddev) of `samples` runs."""
    ctx = max(sessions) * (n + 1) + 64
    got: dict[int, list[float]] = {}
    for _ in range(samples):
        res = run([str(tools / "llama-batched-bench"), "-m", str(model), "-t", str(threads),
                   "-tb", str(threads), "-c", str(ctx), "-b", "2048", "-ub", "512", "-npp", "1",
                   "-ntg", str(n), "-npl", ",".join(map(str, sessions)),
                   "--output-format", "jsonl"])
        for line in (res.stdout + "\n" + res.stderr).splitlines():  # its log goes to either
            line = line.strip()
            if line.startswith("{"):
                row = json.loads(line)
                got.setdefault(int(row["pl"]), []).append(float(row["speed_tg"]))
    out = {}
    for k, values in got.items():
        out[f"sessions{k}"] = statistics.fmean(values)
        out[f"sessions{k}_stddev"] = statistics.stdev(values) if len(values) > 1 else 0.0
    return out


def ours(model: Path, threads: int, p: int, n: int, sessions: list[int], samples: int,
         bandwidth: bool = False) -> dict:
    cmd = [str(BUILD / "bin" / "llm-bench"), f"--model={model}", f"--threads={threads}",
           f"-p={p}", f"-n={n}", f"--repetitions={samples}"]
    if sessions:
        cmd.append("--sessions=" + ",".join(map(str, sessions)))
    if bandwidth:
        cmd.append("--measure_bandwidth")
    res = json.loads(run(cmd).stdout.strip().splitlines()[-1])
    out = {"prefill": res["prefill_tok_s"], "decode": res["decode_tok_s"],
           "prefill_stddev": res.get("prefill_tok_s_stddev", 0.0),
           "decode_stddev": res.get("decode_tok_s_stddev", 0.0)}
    if bandwidth:
        # The larger of llm-bench's two readings (before and after its
        # decode runs): a VM's bandwidth can change between them.
        out["read_gb_s"] = max(res["read_gb_s"], res.get("read_gb_s_after", 0.0))
        out["decode_weight_bytes"] = res["decode_weight_bytes"]
    for k, v in res.get("aggregate_decode_tok_s", {}).items():
        out[f"sessions{k}"] = v
        out[f"sessions{k}_stddev"] = res.get("aggregate_decode_tok_s_stddev", {}).get(k, 0.0)
    return out


def spread(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def cpu_model() -> str:
    """/proc/cpuinfo's model name, and whether it has AVX-512 / AMX."""
    name = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    flags = cpu_flags()
    extras = [label for flag, label in (("avx512f", "AVX-512"), ("avx512_fp16", "AVX512-FP16"),
                                        ("amx_int8", "AMX")) if flag in flags]
    return f"{name}, {os.cpu_count()} CPUs" + (f" ({', '.join(extras)})" if extras else "")


def machine_line(machine: list[dict]) -> str:
    """The load average and other processes' CPU over the rounds, as ranges."""
    loads = [x for m in machine for x in (m["loadavg_start"], m["loadavg_end"]) if x is not None]
    others = [m["other_cpus"] for m in machine if m["other_cpus"] is not None]
    text = "machine during the rounds: load average "
    text += f"{min(loads):.2f}-{max(loads):.2f}" if loads else "?"
    text += ", other processes " + (f"{min(others):.2f}-{max(others):.2f} CPUs (median "
                                    f"{statistics.median(others):.2f})" if others else "?")
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--samples", type=int, default=3,
                    help="timed samples of each test per side and round (their mean counts)")
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
    if args.rounds < 1 or args.samples < 1:
        ap.error("--rounds and --samples must be >= 1")

    tools = llama_tools()
    if not args.no_build:
        log("building llm-bench")
        run(["cmake", "--build", str(BUILD), "--target", "llm_bench_tool", "-j2"], cwd=ROOT)
    stamp = new_stamp(OUT, "model", ".json")
    result = {"stamp": stamp, "threads": args.threads, "rounds": args.rounds,
              "samples": args.samples, "cpu": cpu_model(), "llama_cpp_python": LLAMA_CPP_PYTHON,
              "llama_cpp_build": build_flags(), "files": {}}
    tests = [("prefill", f"pp{args.p}"), ("decode", f"tg{args.n}")]
    tests += [(f"sessions{k}", f"{k} sessions") for k in sessions]
    models = ([Path(args.model).resolve()] if args.model
              else [model_file(quant, tools) for quant in args.quants.split(",")])
    for model in models:
        samples: dict[str, dict[str, list[float]]] = {}
        machine: list[dict] = []
        for r in range(args.rounds):
            order = ("llama.cpp", "ours") if r % 2 == 0 else ("ours", "llama.cpp")
            meter = MachineLoad()
            for side in order:
                if side == "ours":
                    got = ours(model, args.threads, args.p, args.n, sessions, args.samples,
                               args.bandwidth)
                else:
                    got = llama_bench(tools, model, args.threads, args.p, args.n, args.samples)
                    if sessions:
                        got.update(llama_batched(tools, model, args.threads, args.n, sessions,
                                                 args.samples))
                for key, value in got.items():
                    samples.setdefault(key, {}).setdefault(side, []).append(value)
            machine.append(meter.stop())
            log(f"{model.name}: round {r + 1}/{args.rounds} done ({describe(machine[-1])})")
        print(f"\n{model.name}, {args.threads} threads, {args.rounds} rounds x {args.samples} "
              f"samples (min / median / max of the rounds' means)")
        print(f"llama.cpp {LLAMA_CPP_PYTHON}: {result['llama_cpp_build']}; CPU: {result['cpu']}")
        print(machine_line(machine) + "\n")
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
            file_result[label] = {
                "ours": mine, "llama.cpp": theirs,
                "ours_stddev": samples.get(f"{key}_stddev", {}).get("ours"),
                "llama.cpp_stddev": samples.get(f"{key}_stddev", {}).get("llama.cpp"),
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
        file_result["machine_per_round"] = machine
        result["files"][model.name] = file_result
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"model-{stamp}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
