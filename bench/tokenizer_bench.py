#!/usr/bin/env python3
"""Tokenizer benchmark: our C++ encoder (build/bin/tokenizer_bench) against
OpenAI's tiktoken (PyPI `tiktoken`), single-threaded, on the same inputs.

    python3 bench/tokenizer_bench.py [--encodings cl100k_base,o200k_base] [--repeat 5]
    python3 bench/tokenizer_bench.py --only-jsonl      # the whole-process figure alone

What it does (bench/README.md has the details):
  1. makes sure tiktoken can be imported: if not, creates the venv
     build/bench-venv, installs tiktoken there with pip and re-runs itself in it;
  2. builds build/bin/tokenizer_bench (cmake preset `default`, -j2) unless
     --no-build;
  3. writes the ~10 MB mixed corpus build/bench/corpus.txt, deterministically,
     from the texts of the shared test vectors;
  4. for each encoding: runs tokenizer_bench on the corpus (with --worst-case),
     loads tiktoken offline from the same .tiktoken file and .json sidecar,
     times enc.encode_ordinary on exactly the same chunks, checks that both give
     the same token ids, and times tiktoken on the same worst-case inputs
     (each run in a child process, killed after --timeout seconds);
  5. whole process: `llm tokenize --vocab X --jsonl` against a Python process
     doing json.loads + tiktoken encode_ordinary + json.dumps, each reading the
     ~8 MB of JSON lines build/bench/corpus.jsonl and writing the same bytes
     (checked), wall time from start to exit, vocabulary load included;
  6. prints tables and writes the summary to build/bench/tokenizer.json.

Exit status: 0 when every comparison that ran agreed, 1 on a token mismatch
(or JSON lines output that differs), 2 on a setup error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import select
import statistics
import subprocess
import sys
import time
from array import array
from pathlib import Path

import bench_venv

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
OUT = BUILD / "bench"
BENCH_BIN = BUILD / "bin" / "tokenizer_bench"
LLM_BIN = BUILD / "bin" / "llm"

CORPUS_SEED = 20240611
CORPUS_TARGET_BYTES = 10_000_000
# The vectors include four stress strings (20,000 x 'a', 5,000 spaces,
# 3,000 x 'ab', 2,000 newlines) that make up half of their bytes; they belong to
# the worst-case measurement, not to a corpus of ordinary text.
STRESS_MIN_BYTES = 1000
CHUNK_BYTES = 65536
SMALL_BYTES = 100_000
LARGE_BYTES = 1_000_000
CASE_BUDGET_S = 10.0
JSONL_TARGET_BYTES = 8_000_000
IN_VENV_ENV = "LLM_TOKENIZER_BENCH_IN_VENV"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def die(msg: str, code: int = 2) -> None:
    log(f"tokenizer_bench.py: {msg}")
    sys.exit(code)


# ---------------------------------------------------------------------------
# tiktoken: import it, or install it into build/bench-venv and re-run there.

def ensure_tiktoken() -> None:
    bench_venv.ensure_packages("import tiktoken", [["tiktoken"]], IN_VENV_ENV, die)


def load_tiktoken(vocab: Path, sidecar: dict):
    """tiktoken.Encoding from the local .tiktoken file and sidecar; no network."""
    os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read the file directly, write no cache copy
    import tiktoken
    import tiktoken.load

    data = vocab.read_bytes()
    want = sidecar.get("sha256")
    if want and hashlib.sha256(data).hexdigest() != want:
        die(f"{vocab}: sha256 differs from the sidecar's")
    ranks = tiktoken.load.load_tiktoken_bpe(str(vocab))
    return tiktoken.Encoding(sidecar["name"], pat_str=sidecar["pat_str"],
                             mergeable_ranks=ranks,
                             special_tokens=sidecar["special_tokens"])


# ---------------------------------------------------------------------------
# Inputs.

def build_corpus(vectors: Path, target: int, seed: int) -> tuple[bytes, dict]:
    texts = [json.loads(line)["text"] for line in vectors.open(encoding="utf-8") if line.strip()]
    keep = [t.encode("utf-8") for t in texts]
    keep = [b for b in keep if 0 < len(b) < STRESS_MIN_BYTES]
    rng = random.Random(seed)
    parts: list[bytes] = []
    size = 0
    rounds = 0
    while size < target:
        order = keep[:]
        rng.shuffle(order)
        rounds += 1
        for b in order:
            parts.append(b)
            size += len(b) + 1
            if size >= target:
                break
    corpus = b"\n".join(parts)
    info = {"vectors": str(vectors), "texts_in_vectors": len(texts), "texts_used": len(keep),
            "excluded_texts": len(texts) - len(keep),
            "excluded_rule": f"empty or >= {STRESS_MIN_BYTES} bytes",
            "seed": seed, "shuffled_rounds": rounds, "pieces": len(parts),
            "bytes": len(corpus), "sha256": hashlib.sha256(corpus).hexdigest()}
    return corpus, info


def split_chunks(data: bytes, target: int) -> list[bytes]:
    """tokenizer_bench.cc's SplitChunks, byte for byte."""
    chunks = []
    pos = 0
    n = len(data)
    while pos < n:
        end = n
        if target > 0 and n - pos > target:
            nl = data.find(b"\n", pos + target - 1)
            if nl != -1:
                end = nl + 1
        chunks.append(data[pos:end])
        pos = end
    return chunks


def build_jsonl(vectors: Path, target: int, seed: int) -> tuple[bytes, dict]:
    """JSON lines {"text": ...} of the same vector texts as the corpus, shuffled
    round after round; each line written by json.dumps with ensure_ascii chosen
    at random (non-ASCII as \\uXXXX escapes, surrogate pairs above U+FFFF, or as
    raw UTF-8), so both kinds of input are read."""
    texts = [json.loads(line)["text"] for line in vectors.open(encoding="utf-8") if line.strip()]
    keep = [t for t in texts if 0 < len(t.encode("utf-8")) < STRESS_MIN_BYTES]
    rng = random.Random(seed)
    lines: list[bytes] = []
    size = 0
    while size < target:
        order = keep[:]
        rng.shuffle(order)
        for t in order:
            line = json.dumps({"text": t}, ensure_ascii=rng.random() < 0.5).encode("utf-8")
            lines.append(line)
            size += len(line) + 1
            if size >= target:
                break
    data = b"\n".join(lines) + b"\n"
    return data, {"lines": len(lines), "bytes": len(data), "seed": seed,
                  "sha256": hashlib.sha256(data).hexdigest()}


# ---------------------------------------------------------------------------
# Timing tiktoken.

def time_tiktoken(enc, chunks: list[str], repeat: int) -> tuple[list[float], int, list[int]]:
    ids: list[int] = []
    for c in chunks:  # warm-up pass, also the ids for the comparison
        ids.extend(enc.encode_ordinary(c))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = 0
        for c in chunks:
            n += len(enc.encode_ordinary(c))
        times.append(time.perf_counter() - t0)
        if n != len(ids):
            die("tiktoken's token count changed between passes")
    return times, len(ids), ids


def worker(args) -> None:
    """Child process: time tiktoken on one worst-case input; one line per run."""
    sidecar = json.loads(Path(args.sidecar).read_text())
    enc = load_tiktoken(Path(args.vocab), sidecar)
    text = Path(args.input).read_bytes().decode("utf-8")
    print("ready", flush=True)
    spent = 0.0
    for run in range(args.repeat + 1):  # run 0 is the warm-up
        t0 = time.perf_counter()
        n = len(enc.encode_ordinary(text))
        s = time.perf_counter() - t0
        print(json.dumps({"run": run, "s": s, "tokens": n}), flush=True)
        if run > 0:
            spent += s
            if spent >= args.budget:
                break


def jsonl_worker(args) -> None:
    """Child process: the Python whole-process anchor. JSON lines on stdin,
    {"ids":[...]} lines on stdout, the bytes `llm tokenize --jsonl` writes."""
    sidecar = json.loads(Path(args.sidecar).read_text())
    enc = load_tiktoken(Path(args.vocab), sidecar)
    out = sys.stdout
    encode = enc.encode_ordinary
    for line in sys.stdin:
        out.write(json.dumps({"ids": encode(json.loads(line)["text"])},
                             separators=(",", ":")) + "\n")


def time_process(cmd: list[str], input_path: Path, output_path: Path) -> float:
    """Wall seconds of one run of `cmd`, stdin from input_path, stdout to
    output_path."""
    with input_path.open("rb") as fin, output_path.open("wb") as fout:
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdin=fin, stdout=fout)
        s = time.perf_counter() - t0
    if r.returncode != 0:
        die(f"{' '.join(cmd)} exited with {r.returncode}")
    return s


def run_jsonl(name: str, vocab: Path, sidecar_path: Path, jsonl_path: Path,
              repeat: int) -> dict:
    """Whole processes on the JSON lines, alternating ours and Python's so that
    other load hits both; one untimed warm-up each (page cache), then `repeat`
    timed runs; medians. The outputs must be the same bytes."""
    ours_cmd = [str(LLM_BIN), "tokenize", "--vocab", str(vocab), "--jsonl"]
    py_cmd = [sys.executable, str(Path(__file__).resolve()), "--jsonl-worker", "--vocab",
              str(vocab), "--sidecar", str(sidecar_path)]
    ours_out = OUT / f"{name}.llm.jsonl.out"
    py_out = OUT / f"{name}.tiktoken.jsonl.out"
    log(f"{name}: whole process on {jsonl_path.name}: {' '.join(ours_cmd)} / python json + tiktoken")
    time_process(ours_cmd, jsonl_path, ours_out)
    time_process(py_cmd, jsonl_path, py_out)
    same = ours_out.read_bytes() == py_out.read_bytes()
    ours_t: list[float] = []
    py_t: list[float] = []
    for _ in range(repeat):
        ours_t.append(time_process(ours_cmd, jsonl_path, ours_out))
        py_t.append(time_process(py_cmd, jsonl_path, py_out))
    ours_s = statistics.median(ours_t)
    py_s = statistics.median(py_t)
    return {"encoding": name, "bytes": jsonl_path.stat().st_size, "repeat": repeat,
            "llm_s": ours_s, "llm_min_s": min(ours_t), "tiktoken_s": py_s,
            "tiktoken_min_s": min(py_t), "ratio": py_s / ours_s,
            "ratio_of_min": min(py_t) / min(ours_t), "same_output": same,
            "output_lines": ours_out.read_bytes().count(b"\n")}


def run_worker(vocab: Path, sidecar_path: Path, input_path: Path, repeat: int,
               budget: float, timeout: float) -> dict:
    """Runs worker() in a child; any single encode over `timeout` s kills it."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--vocab", str(vocab),
           "--sidecar", str(sidecar_path), "--input", str(input_path),
           "--repeat", str(repeat), "--budget", str(budget)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    fd = proc.stdout.fileno()
    buf = b""
    times: list[float] = []
    tokens = None
    result: dict = {}
    try:
        deadline = time.monotonic() + 300  # loading the vocabulary
        started = False
        eof = False
        while True:
            if b"\n" not in buf and not eof:
                left = deadline - time.monotonic()
                ready, _, _ = select.select([fd], [], [], max(left, 0))
                if not ready:
                    result = {"status": "timeout" if started else "load_timeout"}
                    break
                data = os.read(fd, 65536)
                eof = not data
                buf += data
                continue
            if b"\n" not in buf:  # end of output
                result = {"status": "done" if times else "failed"}
                break
            line, buf = buf.split(b"\n", 1)
            line = line.strip()
            if line == b"ready":
                started = True
            elif line:
                rec = json.loads(line)
                tokens = rec["tokens"]
                if rec["run"] > 0:
                    times.append(rec["s"])
            deadline = time.monotonic() + timeout
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
    result.update({"runs": len(times), "tokens": tokens,
                   "s": statistics.median(times) if times else None,
                   "min_s": min(times) if times else None})
    if result["status"] == "timeout" and times:
        result["status"] = "partial_timeout"
    return result


# ---------------------------------------------------------------------------

def run_ours(bench: Path, vocab: Path, corpus: Path, repeat: int, chunk_bytes: int,
             ids_out: Path, inputs_dir: Path) -> list[dict]:
    inputs_dir.mkdir(parents=True, exist_ok=True)
    cmd = [str(bench), "--vocab", str(vocab), "--corpus", str(corpus), "--repeat", str(repeat),
           "--chunk-bytes", str(chunk_bytes), "--worst-case", "--ids-out", str(ids_out),
           "--inputs-out", str(inputs_dir), "--case-budget-s", str(CASE_BUDGET_S)]
    log("running " + " ".join(cmd))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        die(f"tokenizer_bench exited with {r.returncode}")
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def build_bench() -> None:
    log("building tokenizer_bench and llm")
    r = subprocess.run(["cmake", "--preset", "default"], cwd=ROOT, stdout=subprocess.DEVNULL)
    if r.returncode == 0:
        r = subprocess.run(["cmake", "--build", "build", "--target", "tokenizer_bench", "llm",
                            "-j2"], cwd=ROOT)
    if r.returncode != 0:
        if not BENCH_BIN.exists():
            die("building tokenizer_bench failed")
        log(f"WARNING: building tokenizer_bench failed; using the existing {BENCH_BIN}")


def machine_info() -> dict:
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "loadavg_at_start": list(os.getloadavg())}


def fmt_s(x) -> str:
    return "-" if x is None else f"{x:.4f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--encodings", default="cl100k_base,o200k_base")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--corpus-bytes", type=int, default=CORPUS_TARGET_BYTES)
    ap.add_argument("--chunk-bytes", type=int, default=CHUNK_BYTES,
                    help="split the corpus at newlines into chunks of about this size "
                         "(0: one call for the whole file)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="worst case: seconds one tiktoken encode may take")
    ap.add_argument("--shared", default=None,
                    help="shared tokenizer data (default $LLM_SHARED_DIR/tokenizer or "
                         "../shared/tokenizer beside the checkout)")
    ap.add_argument("--no-build", action="store_true", help="use build/bin/tokenizer_bench as is")
    ap.add_argument("--skip-worst-case-tiktoken", action="store_true")
    ap.add_argument("--jsonl-bytes", type=int, default=JSONL_TARGET_BYTES,
                    help="whole process: size of the JSON lines input (0: skip that part)")
    ap.add_argument("--only-jsonl", action="store_true",
                    help="run only the whole-process comparison")
    # Child-process mode (internal).
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--jsonl-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--vocab", help=argparse.SUPPRESS)
    ap.add_argument("--sidecar", help=argparse.SUPPRESS)
    ap.add_argument("--input", help=argparse.SUPPRESS)
    ap.add_argument("--budget", type=float, default=CASE_BUDGET_S, help=argparse.SUPPRESS)
    args = ap.parse_args()

    ensure_tiktoken()
    if args.worker:
        worker(args)
        return 0
    if args.jsonl_worker:
        jsonl_worker(args)
        return 0
    import tiktoken

    if args.shared:
        shared = Path(args.shared)
    elif os.environ.get("LLM_SHARED_DIR"):
        shared = Path(os.environ["LLM_SHARED_DIR"]) / "tokenizer"
    else:
        shared = ROOT.parent / "shared" / "tokenizer"
    encodings = [e for e in args.encodings.split(",") if e]
    for e in encodings:
        for suffix in (".tiktoken", ".json"):
            if not (shared / f"{e}{suffix}").exists():
                die(f"missing {shared / (e + suffix)}")
    vectors = shared / "vectors" / f"{encodings[0]}.jsonl"

    if not args.no_build:
        build_bench()
    if not BENCH_BIN.exists():
        die(f"{BENCH_BIN} does not exist; build it (see bench/README.md)")
    if args.jsonl_bytes > 0 and not LLM_BIN.exists():
        die(f"{LLM_BIN} does not exist; build it (see bench/README.md)")

    OUT.mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    corpus, corpus_info = build_corpus(vectors, args.corpus_bytes, CORPUS_SEED)
    corpus_path = OUT / "corpus.txt"
    corpus_path.write_bytes(corpus)
    corpus_info["path"] = str(corpus_path)
    byte_chunks = split_chunks(corpus, args.chunk_bytes)
    str_chunks = [c.decode("utf-8") for c in byte_chunks]
    chunking = (f"newline-{args.chunk_bytes}" if args.chunk_bytes > 0
                and len(corpus) > args.chunk_bytes else "whole")
    log(f"corpus: {len(corpus):,} bytes, {len(byte_chunks)} chunks ({chunking}), "
        f"sha256 {corpus_info['sha256'][:16]}")

    summary = {"tiktoken_version": tiktoken.__version__, "machine": machine,
               "corpus": corpus_info, "chunking": chunking, "repeat": args.repeat,
               "timeout_s": args.timeout, "throughput": [], "worst_case": []}
    ok = True
    for name in [] if args.only_jsonl else encodings:
        vocab = shared / f"{name}.tiktoken"
        sidecar_path = shared / f"{name}.json"
        sidecar = json.loads(sidecar_path.read_text())

        # Ours.
        ids_path = OUT / f"{name}.llm.ids"
        inputs_dir = OUT / "inputs" / name
        lines = run_ours(BENCH_BIN, vocab, corpus_path, args.repeat, args.chunk_bytes, ids_path,
                         inputs_dir)
        ours = next(l for l in lines if l["kind"] == "corpus" and l.get("cache", True))
        ours_nc = next((l for l in lines if l["kind"] == "corpus" and not l.get("cache", True)),
                       None)
        ours_wc = [l for l in lines if l["kind"] == "worst_case"]

        # tiktoken on the same chunks.
        t0 = time.perf_counter()
        enc = load_tiktoken(vocab, sidecar)
        load_s = time.perf_counter() - t0
        log(f"{name}: timing tiktoken {tiktoken.__version__} on {len(str_chunks)} chunks")
        times, tokens, tk_ids = time_tiktoken(enc, str_chunks, args.repeat)
        median = statistics.median(times)
        tk = {"impl": "tiktoken", "kind": "corpus", "encoding": name, "bytes": len(corpus),
              "tokens": tokens, "chunks": len(str_chunks), "chunking": chunking,
              "repeat": args.repeat, "load_s": load_s, "median_s": median, "min_s": min(times),
              "mb_s": len(corpus) / median / 1e6}
        ours_ids = ids_path.read_bytes()
        arr = array("I", tk_ids)
        if sys.byteorder != "little":
            arr.byteswap()
        same_ids = arr.tobytes() == ours_ids
        same_count = ours["tokens"] == tokens
        same_chunks = ours["chunks"] == len(str_chunks) and ours["chunking"] == chunking
        if not (same_ids and same_count and same_chunks):
            ok = False
            log(f"{name}: MISMATCH: tokens ours {ours['tokens']} tiktoken {tokens}, "
                f"ids equal {same_ids}, chunks ours {ours['chunks']} tiktoken "
                f"{len(str_chunks)}")
        del tk_ids, arr
        summary["throughput"].append({
            "encoding": name, "llm": ours, "llm_no_cache": ours_nc, "tiktoken": tk,
            "same_token_count": same_count, "same_ids": same_ids,
            "ratio_mb_s_llm_over_tiktoken": ours["mb_s"] / tk["mb_s"],
            "ratio_mb_s_llm_no_cache_over_tiktoken":
                ours_nc["mb_s"] / tk["mb_s"] if ours_nc else None})

        # Worst case: tiktoken on the inputs tokenizer_bench wrote.
        for wc in ours_wc:
            entry = {"encoding": name, "case": wc["case"], "llm": wc, "tiktoken": None}
            if not args.skip_worst_case_tiktoken:
                tkwc = {"impl": "tiktoken"}
                for label in ("small", "large"):
                    if label == "large" and tkwc["small_s"] is None:
                        # The 100 KB input already failed or timed out.
                        tkwc.update({"large_bytes": None, "large_status": "skipped",
                                     "large_runs": 0, "large_tokens": None, "large_s": None,
                                     "large_min_s": None})
                        continue
                    path = inputs_dir / f"{wc['case']}_{SMALL_BYTES if label == 'small' else LARGE_BYTES}.txt"
                    log(f"{name}: tiktoken worst case {path.name}")
                    r = run_worker(vocab, sidecar_path, path, args.repeat, CASE_BUDGET_S,
                                   args.timeout)
                    tkwc[f"{label}_bytes"] = path.stat().st_size
                    tkwc[f"{label}_status"] = r["status"]
                    tkwc[f"{label}_runs"] = r["runs"]
                    tkwc[f"{label}_tokens"] = r["tokens"]
                    tkwc[f"{label}_s"] = r["s"]
                    tkwc[f"{label}_min_s"] = r["min_s"]
                    if r["tokens"] is not None and r["tokens"] != wc[f"{label}_tokens"]:
                        ok = False
                        log(f"{name}: MISMATCH on {path.name}: tokens ours "
                            f"{wc[f'{label}_tokens']} tiktoken {r['tokens']}")
                if tkwc["small_s"] and tkwc["large_s"] is not None:
                    tkwc["ratio"] = tkwc["large_s"] / tkwc["small_s"]
                    tkwc["ratio_of_min"] = tkwc["large_min_s"] / tkwc["small_min_s"]
                elif tkwc["small_s"] and tkwc["large_status"] == "timeout":
                    tkwc["ratio"] = "timeout"
                    tkwc["ratio_at_least"] = args.timeout / tkwc["small_s"]
                else:
                    tkwc["ratio"] = None
                entry["tiktoken"] = tkwc
            summary["worst_case"].append(entry)

    # Whole process on JSON lines.
    if args.jsonl_bytes > 0:
        jsonl, jsonl_info = build_jsonl(vectors, args.jsonl_bytes, CORPUS_SEED)
        jsonl_path = OUT / "corpus.jsonl"
        jsonl_path.write_bytes(jsonl)
        jsonl_info["path"] = str(jsonl_path)
        summary["jsonl"] = {"input": jsonl_info, "results": []}
        for name in encodings:
            r = run_jsonl(name, shared / f"{name}.tiktoken", shared / f"{name}.json", jsonl_path,
                          args.repeat)
            if not r["same_output"]:
                ok = False
                log(f"{name}: MISMATCH: llm tokenize --jsonl and the Python script wrote "
                    f"different bytes ({OUT / (name + '.llm.jsonl.out')}, "
                    f"{OUT / (name + '.tiktoken.jsonl.out')})")
            summary["jsonl"]["results"].append(r)

    summary["all_match"] = ok
    summary["machine"]["loadavg_at_end"] = list(os.getloadavg())
    (OUT / "tokenizer.json").write_text(json.dumps(summary, indent=2) + "\n")

    # Tables.
    print(f"\ncorpus: {corpus_info['bytes']:,} bytes from {corpus_info['texts_used']} vector "
          f"texts (seed {CORPUS_SEED}), {len(str_chunks)} chunks ({chunking}); "
          f"single thread, median of {args.repeat} after 1 warm-up; MB = 10^6 bytes")
    print(f"tiktoken {tiktoken.__version__}; CPU {machine['cpu']}; load average at start "
          f"{machine['loadavg_at_start'][0]:.2f}\n")
    hdr = f"{'encoding':<12} {'impl':<9} {'tokens':>10} {'median s':>9} {'MB/s':>8} {'same ids':>9}"
    print(hdr)
    print("-" * len(hdr))
    for t in summary["throughput"]:
        for impl, label in (("llm", "llm"), ("llm_no_cache", "llm-nc"), ("tiktoken", "tiktoken")):
            r = t[impl]
            if r is None:
                continue
            print(f"{t['encoding']:<12} {label:<9} {r['tokens']:>10,} {r['median_s']:>9.3f} "
                  f"{r['mb_s']:>8.2f} {str(t['same_ids']):>9}")
    print("(llm-nc: ours with the piece cache off, EncodeOptions::use_piece_cache = false; "
          "its ids are checked equal to llm's by tokenizer_bench)")
    print()
    for t in summary["throughput"]:
        line = (f"{t['encoding']}: ours / tiktoken MB/s = "
                f"{t['ratio_mb_s_llm_over_tiktoken']:.2f}")
        if t["ratio_mb_s_llm_no_cache_over_tiktoken"] is not None:
            line += (f"; with the piece cache off "
                     f"{t['ratio_mb_s_llm_no_cache_over_tiktoken']:.2f}")
        print(line)
    if "jsonl" in summary:
        j = summary["jsonl"]
        print(f"\nwhole process: `llm tokenize --vocab X --jsonl` against Python (json.loads + "
              f"tiktoken encode_ordinary + json.dumps), both reading {j['input']['bytes']:,} bytes "
              f"of JSON lines ({j['input']['lines']:,} lines, {OUT / 'corpus.jsonl'}) and writing "
              f"the same {{\"ids\":[...]}} lines; wall time from start to exit, vocabulary load "
              f"included; median of {args.repeat} alternating runs after 1 warm-up each")
        hdr = (f"{'encoding':<12} {'llm s':>8} {'python s':>9} {'python / llm':>13} "
               f"{'ratio(min)':>10} {'same output':>12}")
        print(hdr)
        print("-" * len(hdr))
        for r in j["results"]:
            print(f"{r['encoding']:<12} {r['llm_s']:>8.3f} {r['tiktoken_s']:>9.3f} "
                  f"{r['ratio']:>13.2f} {r['ratio_of_min']:>10.2f} {str(r['same_output']):>12}")
        print()
        for r in j["results"]:
            t = next((t for t in summary["throughput"] if t["encoding"] == r["encoding"]), None)
            line = f"{r['encoding']}: "
            if t is not None:
                line += f"encoder ours / tiktoken MB/s = {t['ratio_mb_s_llm_over_tiktoken']:.2f}; "
            line += f"whole process python s / llm s = {r['ratio']:.2f}"
            print(line)
    if not summary["worst_case"]:
        print(f"\nsummary: {OUT / 'tokenizer.json'}; all token ids match: {ok}")
        return 0 if ok else 1
    print("\nworst case (no whitespace), one call per input; ratio = time(1 MB) / time(100 KB): "
          "10 = linear, 100 = quadratic")
    hdr = (f"{'encoding':<12} {'case':<13} {'impl':<9} {'t(100KB) s':>11} {'t(1MB) s':>10} "
           f"{'ratio':>9} {'ratio(min)':>10}")
    print(hdr)
    print("-" * len(hdr))
    for w in summary["worst_case"]:
        o = w["llm"]
        print(f"{w['encoding']:<12} {w['case']:<13} {'llm':<9} {fmt_s(o['small_s']):>11} "
              f"{fmt_s(o['large_s']):>10} {o['ratio']:>9.2f} {o['ratio_of_min']:>10.2f}")
        t = w["tiktoken"]
        if t is None:
            continue
        large = fmt_s(t["large_s"]) if t["large_s"] is not None else t["large_status"]
        small = fmt_s(t["small_s"]) if t["small_s"] is not None else t["small_status"]
        ratio_min = "-"
        if isinstance(t["ratio"], float):
            ratio = f"{t['ratio']:.2f}"
            ratio_min = f"{t['ratio_of_min']:.2f}"
        elif t["ratio"] == "timeout":
            ratio = f">{t['ratio_at_least']:.0f}"
        else:
            ratio = "-"
        print(f"{w['encoding']:<12} {w['case']:<13} {'tiktoken':<9} {small:>11} {large:>10} "
              f"{ratio:>9} {ratio_min:>10}")
    print(f"\nsummary: {OUT / 'tokenizer.json'}; all token ids match: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
