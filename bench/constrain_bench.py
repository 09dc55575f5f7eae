#!/usr/bin/env python3
"""Mask and compile time of client/constrain against xgrammar's and llguidance's
Python packages, on the same JSON schemas, instances and token ids, on one thread.

    python3 bench/constrain_bench.py            # SmolLM2 (49k) and Gemma 3 (262k), ~3 minutes

What it does:
  1. makes sure xgrammar and llguidance can be imported: if not, creates the venv
     build/bench-venv, pip-installs them there and re-runs itself in it. xgrammar is
     installed without its declared dependencies torch, triton and transformers'
     models (gigabytes): its Python package imports torch only for its bitmask
     helpers, so the benchmark puts a stand-in module named torch in place before
     importing it and hands it numpy arrays (DLPack), as its API allows;
  2. builds build/bin/constrain_bench (skipped with --no-build);
  3. per vocabulary: runs constrain_bench on bench/constrain_cases.json, which
     writes the vocabulary, every instance's token ids and our timings;
  4. feeds the same token ids to xgrammar (the same version as ours, compiling the
     schema as client/constrain prepared it) and to llguidance (the original schema),
     timing every mask (fill_next_token_bitmask) and every compile;
  5. prints per vocabulary the mask p50 / p99 (microseconds per token), compile
     first and cached p50 / p99, how many instances each accepted, and the ratios;
     writes everything to build/bench/constrain.json.

The Python figures include the cost of one call through the binding; the line
"call floor" is the p50 of a trivial call (is_terminated / is_stopped) of each
package, to read them by.
"""
from __future__ import annotations

import argparse
import importlib.machinery
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import bench_venv

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
OUT = BUILD / "bench"
BENCH_BIN = BUILD / "bin" / "constrain_bench"
CASES = ROOT / "bench" / "constrain_cases.json"
MODELS = {
    "smollm2": ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": ROOT / "models" / "gemma-3-270m-q4_k_m.gguf",
}
XGRAMMAR_VERSION = "0.2.9"  # the version cmake/xgrammar.cmake pins
# xgrammar's declared dependencies, less torch, triton and the models' stack.
XGRAMMAR_DEPS = ["apache-tvm-ffi>=0.1.11", "pydantic", "transformers", "numpy",
                 "typing-extensions>=4.9.0"]
IN_VENV_ENV = "LLM_CONSTRAIN_BENCH_IN_VENV"


def die(msg: str) -> None:
    print(f"constrain_bench.py: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


def ensure_packages() -> None:
    check = ("import importlib.metadata as m; "
             f"assert m.version('xgrammar') == '{XGRAMMAR_VERSION}'; import llguidance, numpy")
    bench_venv.ensure_packages(check, [["--no-deps", f"xgrammar=={XGRAMMAR_VERSION}"],
                                       ["llguidance", *XGRAMMAR_DEPS]], IN_VENV_ENV, die)


def import_xgrammar():
    """xgrammar with a stand-in torch (see the module docstring)."""
    import tvm_ffi  # noqa: F401  (first: it must see that torch is absent)

    class _Stub(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return type(name, (), {})

    torch = _Stub("torch")
    torch.__spec__ = importlib.machinery.ModuleSpec("torch", None)
    torch.tensor = lambda *a, **k: None
    sys.modules.setdefault("torch", torch)
    import xgrammar
    return xgrammar


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    v = sorted(values)
    rank = max(1, min(len(v), -(-len(v) * p // 100)))  # nearest rank, as check.cc
    return v[int(rank) - 1]


def allowed(bitmask, token: int) -> bool:
    return bool((int(bitmask[0, token // 32]) >> (token % 32)) & 1)


def feed(instances, repeat, new_matcher, fill, accept, end_ids, bitmask):
    """Masks timed over `repeat` passes; the verdicts of the first pass."""
    mask_us: list[float] = []
    verdicts: list[bool] = []
    for p in range(repeat):
        for inst in instances:
            m = new_matcher()
            ok = True
            for token in inst["ids"]:
                t0 = time.perf_counter_ns()
                fill(m, bitmask)
                mask_us.append((time.perf_counter_ns() - t0) / 1000)
                if not allowed(bitmask, token) or not accept(m, token):
                    ok = False
                    break
            if ok:
                t0 = time.perf_counter_ns()
                fill(m, bitmask)
                mask_us.append((time.perf_counter_ns() - t0) / 1000)
                ok = any(allowed(bitmask, e) for e in end_ids)
            if p == 0:
                verdicts.append(ok)
    return mask_us, verdicts


def call_floor(matcher, method: str) -> float:
    f = getattr(matcher, method)
    times = []
    for _ in range(2000):
        t0 = time.perf_counter_ns()
        f()
        times.append((time.perf_counter_ns() - t0) / 1000)
    return percentile(times, 50)


def run_xgrammar(data, args):
    import numpy as np
    xgr = import_xgrammar()
    vocab = data["vocab"]
    special = set(vocab["special_ids"])
    encoded = [b"" if i in special else bytes.fromhex(h) for i, h in enumerate(vocab["tokens_hex"])]
    info = xgr.TokenizerInfo(encoded, vocab_type=xgr.VocabType.RAW, vocab_size=vocab["size"],
                             stop_token_ids=vocab["end_ids"])
    opts = dict(any_whitespace=True, strict_mode=False, max_whitespace_cnt=20)
    threads = args.threads
    uncached = xgr.GrammarCompiler(info, max_threads=threads, cache_enabled=False)
    cached = xgr.GrammarCompiler(info, max_threads=threads, cache_enabled=True)
    bitmask = np.full((1, (vocab["size"] + 31) // 32), -1, dtype=np.int32)
    result = {"mask_us": [], "compile_first_ms": [], "compile_cached_us": [], "accepted": 0,
              "instances": 0, "errors": []}
    cases = [c for c in data["cases"] if c["compiled"]]
    for _ in range(args.compile_repeat):
        for c in cases:
            t0 = time.perf_counter_ns()
            uncached.compile_json_schema(c["prepared_schema"], **opts)
            result["compile_first_ms"].append((time.perf_counter_ns() - t0) / 1e6)
    floor = None
    for c in cases:
        compiled = cached.compile_json_schema(c["prepared_schema"], **opts)
        for _ in range(args.compile_repeat):
            t0 = time.perf_counter_ns()
            cached.compile_json_schema(c["prepared_schema"], **opts)
            result["compile_cached_us"].append((time.perf_counter_ns() - t0) / 1000)
        masks, verdicts = feed(c["instances"], args.repeat, lambda: xgr.GrammarMatcher(compiled),
                               lambda m, b: m.fill_next_token_bitmask(b),
                               lambda m, t: m.accept_token(t), vocab["end_ids"], bitmask)
        result["mask_us"] += masks
        result["accepted"] += sum(verdicts)
        result["instances"] += len(verdicts)
        if floor is None:
            floor = call_floor(xgr.GrammarMatcher(compiled), "is_terminated")
    result["call_floor_us"] = floor
    return result


class _VocabTokenizer:
    """The TokenizerWrapper llguidance takes: the token bytes, the end token,
    and a greedy longest-match tokenizer (llguidance tokenizes grammar
    literals with it; the instances come as token ids)."""

    def __init__(self, vocab):
        self.tokens = [bytes.fromhex(h) for h in vocab["tokens_hex"]]
        self.eos_token_id = vocab["end_ids"][0]
        self.bos_token_id = None
        self.special_token_ids = sorted(set(vocab["special_ids"]) | set(vocab["end_ids"]))
        special = set(self.special_token_ids)
        self._ids = {t: i for i, t in enumerate(self.tokens) if t and i not in special}
        self._longest = max(len(t) for t in self._ids)

    def __call__(self, s):
        if isinstance(s, str):
            s = s.encode("utf-8")
        ids, i = [], 0
        while i < len(s):
            for n in range(min(self._longest, len(s) - i), 0, -1):
                t = self._ids.get(s[i:i + n])
                if t is not None:
                    ids.append(t)
                    i += n
                    break
            else:
                raise ValueError(f"no token for byte {s[i]}")
        return ids


def run_llguidance(data, args):
    import llguidance
    import llguidance.numpy
    import numpy as np
    vocab = data["vocab"]
    tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_VocabTokenizer(vocab)),
                                 n_vocab=vocab["size"], eos_token=vocab["end_ids"])
    bitmask = llguidance.numpy.allocate_token_bitmask(1, vocab["size"])
    result = {"mask_us": [], "compile_first_ms": [], "compile_cached_us": [], "accepted": 0,
              "instances": 0, "errors": []}
    grammars = {}
    cases = [c for c in data["cases"] if c["compiled"]]
    cases_by_name = {c["name"]: c for c in json.loads(CASES.read_text())}
    for c in cases:
        grammars[c["name"]] = llguidance.LLMatcher.grammar_from_json_schema(
            json.dumps(cases_by_name[c["name"]]["schema"]),
            defaults={"whitespace_flexible": True})
    for _ in range(args.compile_repeat):
        for c in cases:
            t0 = time.perf_counter_ns()
            m = llguidance.LLMatcher(tok, grammars[c["name"]], log_level=0)
            result["compile_first_ms"].append((time.perf_counter_ns() - t0) / 1e6)
            if m.is_error():
                result["errors"].append(f"{c['name']}: {m.get_error()}")
    floor = None
    for c in cases:
        g = grammars[c["name"]]
        masks, verdicts = feed(c["instances"], args.repeat,
                               lambda: llguidance.LLMatcher(tok, g, log_level=0),
                               lambda m, b: llguidance.numpy.fill_next_token_bitmask(m, b),
                               lambda m, t: m.consume_token(t), vocab["end_ids"], bitmask)
        result["mask_us"] += masks
        result["accepted"] += sum(verdicts)
        result["instances"] += len(verdicts)
        if floor is None:
            floor = call_floor(llguidance.LLMatcher(tok, g, log_level=0), "is_stopped")
    result["call_floor_us"] = floor
    return result


def ours(data):
    result = {"mask_us": [], "compile_first_ms": [], "compile_cached_us": [], "accepted": 0,
              "instances": 0, "lazy": []}
    for c in data["cases"]:
        if not c["compiled"]:
            continue
        result["mask_us"] += c["mask_us"]
        result["compile_first_ms"] += c["compile_first_ms"]
        result["compile_cached_us"] += c["compile_cached_us"]
        result["accepted"] += sum(i["accepted"] for i in c["instances"])
        result["instances"] += len(c["instances"])
        if c.get("lazy"):
            result["lazy"].append(c["name"])
    result["call_floor_us"] = 0.0
    return result


def summarize(r):
    return {
        "mask_us_p50": percentile(r["mask_us"], 50),
        "mask_us_p99": percentile(r["mask_us"], 99),
        "masks": len(r["mask_us"]),
        "compile_first_ms_p50": percentile(r["compile_first_ms"], 50),
        "compile_first_ms_p99": percentile(r["compile_first_ms"], 99),
        "compile_cached_us_p50": percentile(r["compile_cached_us"], 50),
        "compile_cached_us_p99": percentile(r["compile_cached_us"], 99),
        "accepted": r["accepted"],
        "instances": r["instances"],
        "call_floor_us": r["call_floor_us"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="smollm2,gemma3")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--compile-repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2,
                        help="threads of one compilation, the same for us and xgrammar")
    parser.add_argument("--no-build", action="store_true")
    args = parser.parse_args()
    ensure_packages()
    if not args.no_build:
        r = subprocess.run(["cmake", "--build", str(BUILD), "--target", "constrain_bench", "-j2"],
                           stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            die("building constrain_bench failed (cmake --preset default first)")
    OUT.mkdir(parents=True, exist_ok=True)
    report = {}
    for name in args.models.split(","):
        model = MODELS.get(name)
        if model is None or not model.exists():
            die(f"no model {name} ({model})")
        dump = OUT / f"constrain_{name}.json"
        r = subprocess.run([str(BENCH_BIN), "--vocab", str(model), "--cases", str(CASES),
                            "--out", str(dump), "--repeat", str(args.repeat),
                            "--compile_repeat", str(args.compile_repeat),
                            "--threads", str(args.threads)], stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            die(f"constrain_bench failed on {model}")
        data = json.loads(dump.read_text())
        refused = [f"{c['name']}: {c['error']}" for c in data["cases"] if not c["compiled"]]
        engines = {"llm": ours(data), "xgrammar": run_xgrammar(data, args),
                   "llguidance": run_llguidance(data, args)}
        rows = {k: summarize(v) for k, v in engines.items()}
        faster_p50 = min(rows["xgrammar"]["mask_us_p50"], rows["llguidance"]["mask_us_p50"])
        ratios = {
            "mask_p50_vs_faster": rows["llm"]["mask_us_p50"] / faster_p50,
            "mask_p99_vs_xgrammar": rows["llm"]["mask_us_p99"] / rows["xgrammar"]["mask_us_p99"],
        }
        report[name] = {"vocab_size": data["vocab"]["size"], "engines": rows, "ratios": ratios,
                        "refused": refused, "lazy": engines["llm"]["lazy"],
                        "llguidance_errors": engines["llguidance"]["errors"]}
        print(f"\n{name}: vocabulary of {data['vocab']['size']} tokens, "
              f"{len(data['cases']) - len(refused)} schemas, {rows['llm']['instances']} instances")
        print(f"{'':12} {'mask p50':>9} {'mask p99':>9} {'first p50':>10} {'first p99':>10} "
              f"{'cached p50':>11} {'cached p99':>11} {'accepted':>9} {'call floor':>10}")
        for k, v in rows.items():
            cached = (f"{v['compile_cached_us_p50']:>9.1f}us {v['compile_cached_us_p99']:>9.1f}us"
                      if v["compile_cached_us_p50"] else f"{'n/a':>11} {'n/a':>11}")
            print(f"{k:12} {v['mask_us_p50']:>7.2f}us {v['mask_us_p99']:>7.1f}us "
                  f"{v['compile_first_ms_p50']:>8.1f}ms {v['compile_first_ms_p99']:>8.1f}ms "
                  f"{cached} {v['accepted']:>4}/{v['instances']:<4} {v['call_floor_us']:>8.2f}us")
        print(f"ratios: mask p50 llm / faster of the two = {ratios['mask_p50_vs_faster']:.2f} "
              f"(target <= 1.2); mask p99 llm / xgrammar = {ratios['mask_p99_vs_xgrammar']:.2f} "
              f"(target <= 1.0)")
        for line in refused:
            print(f"refused by client/constrain: {line}")
        for line in engines["llguidance"]["errors"]:
            print(f"llguidance error: {line}")
    (OUT / "constrain.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
