#!/usr/bin/env python3
"""Serving benchmark: this project's HTTP stack (scripts/serve.sh: gateway,
tokenizer service, model service) against llama.cpp's llama-server, on the
same GGUF and threads, both driven over the OpenAI API (streaming chat
completions) by NVIDIA's load generator aiperf.

    python3 bench/serving_bench.py [--threads 2] [--rounds 2] [--quick]
        [--workloads chat,prefix,multiturn,long] [--concurrency 1,4,16,64]
        [--model PATH] [--no-build] [--model-flag=--FLAG=VALUE ...]

Workloads (aiperf's synthetic prompts; greedy, temperature 0, ignore_eos, so
that every request generates exactly its output length on both sides):
  chat       256 prompt tokens / 128 output, at each --concurrency
  prefix     a shared 1,000-token system prompt, 32-token user turns, 32 output,
             4 users (the prefix cache)
  multiturn  conversations of 8 turns (64-token user turns, 32 output each, the
             history sent again every turn), 4 users; ours gets the
             conversation's id in X-Session-Id (aiperf --session-header), so it
             keeps the conversation's KV session
  long       one 7,800-token prompt decoding 256 tokens (the model's 8k context)

Each side, per workload and concurrency, gets a fresh server with its best
settings for the load:
  ours       scripts/serve.sh --no-build (its defaults: continuous batching,
             automatic prefix cache, 64 requests generating at once), with
             model_server --threads T and --kv_cache_mb sized for the same
             tokens as llama-server's -c (at least serve.sh's 512), and any
             --model-flag given (e.g. --model-flag=--prefill_step_tokens=0,
             prompts filling each step; the report records them)
  llama.cpp  llama-server -t T -tb T --parallel N (N = the concurrency) with
             -c N x the workload's longest request (a slot each), continuous
             batching (its default), prompt cache (cache_prompt, its default)
             and --cache-reuse 256
One request per run is a warm-up (not counted; none for `long`). The side
that goes first alternates from round to round. Printed per run: output tok/s,
requests/s, TTFT p50 / p99, ITL p50 / p99 and the 1-minute load average
before and after it; at the end, per workload and concurrency, each side's
median over the rounds and the ratio ours / llama.cpp, and the issue's targets
(32: at 16 and 64 users >= 5x output tok/s and p99 TTFT <= 1/4; at 1 user ITL
no worse; on prefix and multiturn p50 TTFT >= 5x better), met or missed.
Writes build/bench/serving-<time>.json (never an earlier one) and aiperf's
artifacts under build/bench/serving-<time>/.

First run: builds llama-server from the llama-cpp-python sdist that
model_bench.py uses (bench/llama_build.py: AMX off where the CPU has it),
creates the venv build/aiperf-venv with aiperf==AIPERF and gguf==GGUF_PY, and
derives a Hugging Face tokenizer from the GGUF into build/bench/ (transformers'
GGUF reader) for aiperf's synthetic prompts: nothing is downloaded but the
pinned packages.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from llama_build import (LLAMA_CPP_PYTHON, build_flags, build_llama, built_without_amx,
                         has_amx, tool_logger)
from run_record import new_stamp

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
OUT = BUILD / "bench"
VENV = BUILD / "aiperf-venv"
AIPERF = "0.13.0"
GGUF_PY = "0.19.0"
DEFAULT_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
SIDES = ("ours", "llama.cpp")
MAX_RUN_S = 300  # seconds of requests per run, at most
POLL_RATE = 200  # aiperf's request-issuing ticks a second (see aiperf_cmd)


log, run = tool_logger("serving_bench")


@dataclass
class Workload:
    """One aiperf load shape. `slot_ctx`: the tokens one request can reach
    (prompt, chat template, history and output), what a llama-server slot and
    our KV pool are sized by."""
    name: str
    concurrency: list[int]
    isl: int
    osl: int
    slot_ctx: int
    requests: dict[int, int] = field(default_factory=dict)  # per concurrency
    extra: list[str] = field(default_factory=list)  # more aiperf flags
    conversations: int = 0  # multi-turn: conversations instead of requests
    warmup: int = 1


def workloads(concurrency: list[int], quick: bool) -> dict[str, Workload]:
    # Requests per run: a few times the concurrency, as few as give a p99 that
    # means something and keep the default run near 20 minutes on 2 cores.
    chat_requests = {c: (max(2, c) if quick else max(4, 2 * c if c <= 16 else c))
                     for c in concurrency}
    return {
        "chat": Workload("chat", concurrency, 256, 128, 512, chat_requests),
        "prefix": Workload("prefix", [4], 32, 32, 1280, {4: 8 if quick else 16},
                           ["--shared-system-prompt-length", "1000"]),
        "multiturn": Workload("multiturn", [4], 64, 32, 1024, {},
                              ["--conversation-turn-mean", "8",
                               "--conversation-turn-stddev", "0"],
                              conversations=4 if quick else 8),
        "long": Workload("long", [1], 7800, 256, 8192, {1: 1}, warmup=0),
    }


# --- tools -------------------------------------------------------------------

def ensure_aiperf() -> Path:
    """build/aiperf-venv/bin/aiperf, installed (pinned) on first use."""
    py = VENV / "bin" / "python"
    check = (f"import importlib.metadata as m, transformers; "
             f"assert m.version('aiperf') == '{AIPERF}' and m.version('gguf') == '{GGUF_PY}'")
    if py.exists() and subprocess.run([str(py), "-c", check], capture_output=True).returncode == 0:
        return VENV / "bin" / "aiperf"
    if not py.exists():
        log(f"creating venv {VENV}")
        run([sys.executable, "-m", "venv", str(VENV)])
    log(f"installing aiperf=={AIPERF} and gguf=={GGUF_PY} into {VENV} (first run only)")
    run([str(py), "-m", "pip", "install", "-q", f"aiperf=={AIPERF}", f"gguf=={GGUF_PY}"])
    return VENV / "bin" / "aiperf"


_DERIVE = r"""
# transformers' own GGUF tokenizer conversion, fed by the gguf package's
# reader (transformers' GGUF reader, behind from_pretrained(gguf_file=...),
# imports torch, which aiperf does not need).
import json, sys
from pathlib import Path
import gguf
from transformers import PreTrainedTokenizerFast
from transformers.integrations.gguf.gguf_tokenizer_mapping import (
    GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer)
model, out = Path(sys.argv[1]), Path(sys.argv[2])
r = gguf.GGUFReader(str(model))
def field(key, default=None):
    f = r.fields.get(key)
    return default if f is None else f.contents()
arch = field("general.architecture")
groups = {group: {name: field("tokenizer." + key) for key, name in renames.items()
                  if "tokenizer." + key in r.fields}
          for group, renames in GGUF_TOKENIZER_MAPPING.items()}
tokens = groups["tokenizer"]["tokens"]
backend, _ = convert_gguf_tokenizer(arch, groups["tokenizer"])
special = {name: tokens[field("tokenizer.ggml." + key)]
           for name, key in (("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"),
                             ("unk_token", "unknown_token_id"), ("pad_token", "padding_token_id"))
           if field("tokenizer.ggml." + key) is not None}
tok = PreTrainedTokenizerFast(tokenizer_object=backend, **special,
                              chat_template=groups["tokenizer_config"].get("chat_template"))
tok.save_pretrained(str(out))
layers = field(f"{arch}.block_count")
heads = field(f"{arch}.attention.head_count")
kv_heads = field(f"{arch}.attention.head_count_kv", heads)
head_dim = field(f"{arch}.embedding_length") // heads
k_dim = field(f"{arch}.attention.key_length", head_dim)
v_dim = field(f"{arch}.attention.value_length", head_dim)
(out / "kv.json").write_text(json.dumps(
    {"arch": arch, "kv_bytes_per_token_f16": layers * kv_heads * (k_dim + v_dim) * 2}))
"""


def derive_tokenizer(model: Path) -> tuple[Path, int]:
    """A Hugging Face tokenizer made from the GGUF (build/bench/tokenizer-<name>)
    and the model's f16 KV bytes per token."""
    out = OUT / f"tokenizer-{model.stem}"
    if not (out / "kv.json").exists():
        log(f"deriving a Hugging Face tokenizer from {model.name} into {out}")
        out.mkdir(parents=True, exist_ok=True)
        run([str(VENV / "bin" / "python"), "-c", _DERIVE, str(model), str(out)],
            env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"))
    return out, json.loads((out / "kv.json").read_text())["kv_bytes_per_token_f16"]


# --- servers -----------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url: str, timeout: float = 5) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def wait_healthy(url: str, proc: subprocess.Popen, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"serving_bench: {what} exited ({proc.returncode}); its log is in the "
                     "run's artifact folder")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"serving_bench: {what} not healthy after {timeout:.0f} s")


class Server:
    """A server process in its own process group, stopped with SIGTERM."""

    def __init__(self, cmd: list[str], log_path: Path, what: str, url: str | None = None):
        self.what = what
        self.log_file = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=self.log_file, text=True, start_new_session=True)
        if url is None:  # serve.sh prints "gateway listening on URL" once all are up
            for line in self.proc.stdout:
                if line.startswith("gateway listening on "):
                    url = line.split()[-1]
                    break
            else:
                self.stop()
                sys.exit(f"serving_bench: {what} did not start; see {log_path}")
        self.url = url
        wait_healthy(url, self.proc, what)
        self.model_id = http_json(url + "/v1/models")["data"][0]["id"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log_file.close()


def start_ours(model: Path, threads: int, kv_mb: int, concurrency: int, log_path: Path,
               model_flags: list[str]) -> Server:
    return Server(["bash", "scripts/serve.sh", "--no-build", "--no-metrics", "--port", "0",
                   "--model", str(model), f"--model-flag=--threads={threads}",
                   f"--model-flag=--kv_cache_mb={kv_mb}",
                   *[f"--model-flag={f}" for f in model_flags],
                   f"--gateway-flag=--max_concurrent={max(64, concurrency)}"],
                  log_path, "scripts/serve.sh")


def start_llama(server_bin: Path, model: Path, threads: int, concurrency: int, ctx: int,
                log_path: Path) -> Server:
    port = free_port()
    return Server([str(server_bin), "-m", str(model), "-t", str(threads), "-tb", str(threads),
                   "--host", "127.0.0.1", "--port", str(port), "--parallel", str(concurrency),
                   "-c", str(ctx), "--cache-reuse", "256"],
                  log_path, "llama-server", url=f"http://127.0.0.1:{port}")


# --- aiperf ------------------------------------------------------------------

METRICS = {  # our name: (aiperf tag, statistic)
    "out_tok_s": ("output_token_throughput", "avg"),
    "req_s": ("request_throughput", "avg"),
    "ttft_p50": ("time_to_first_token", "p50"),
    "ttft_p99": ("time_to_first_token", "p99"),
    "itl_p50": ("inter_token_latency", "p50"),
    "itl_p99": ("inter_token_latency", "p99"),
}


def aiperf_cmd(aiperf: Path, tokenizer: Path, server: Server, wl: Workload, concurrency: int,
               side: str, artifacts: Path) -> list[str]:
    cmd = [str(aiperf), "profile", "--model", server.model_id, "--url", server.url,
           "--endpoint-type", "chat", "--streaming", "--tokenizer", str(tokenizer),
           "--use-server-token-count", "--use-legacy-max-tokens",
           "--extra-inputs", json.dumps({"temperature": 0, "ignore_eos": True}),
           "--isl", str(wl.isl), "--isl-stddev", "0", "--osl", str(wl.osl), "--osl-stddev", "0",
           "--concurrency", str(concurrency), "--random-seed", "42",
           # With --concurrency alone (its concurrency-burst pattern) aiperf's
           # timing manager polls for a free slot in a busy loop: a whole core of
           # this machine's two. A constant POLL_RATE a second caps its polling
           # (a request waits up to 1/POLL_RATE s for its turn once a slot frees).
           "--request-rate", str(POLL_RATE), "--arrival-pattern", "constant",
           # Distinct prompts: aiperf makes only --request-count of them otherwise,
           # and the warm-up's comes again.
           "--num-dataset-entries", str(max(100, wl.requests.get(concurrency, 0) + 8)),
           "--ui", "none", "--no-server-metrics", "--no-gpu-telemetry",
           "--workers-max", "1", "--record-processors", "1",
           # A new connection per request: a kept-alive one that llama-server
           # closed while idle failed a request (ServerDisconnectedError).
           "--connection-reuse-strategy", "never",
           # A cap, not the length: a run on a machine too busy to finish it
           # stops sending after this and counts what is back 60 s later.
           "--benchmark-duration", str(MAX_RUN_S), "--benchmark-grace-period", "60",
           "--artifact-dir", str(artifacts), *wl.extra]
    if wl.conversations:
        cmd += ["--conversation-num", str(wl.conversations)]
        if side == "ours":  # the conversation's id keeps its KV session
            cmd += ["--session-header", "X-Session-Id"]
    else:
        cmd += ["--request-count", str(wl.requests[concurrency])]
    if wl.warmup:  # its prompt starts with "[warmup]": no prefix shared with the rest
        cmd += ["--warmup-request-count", str(wl.warmup),
                "--cache-bust", "warmup-isolation-first-turn"]
    return cmd


def read_metrics(artifacts: Path) -> dict[str, float]:
    data = json.loads((artifacts / "profile_export_aiperf.json").read_text())
    records = data.get("records", data)
    out = {}
    for name, (tag, stat) in METRICS.items():
        entry = records.get(tag)
        if entry is None:
            sys.exit(f"serving_bench: no {tag} in {artifacts}/profile_export_aiperf.json")
        out[name] = float(entry[stat])
    for tag in ("error_request_count", "request_count"):
        if tag in records:
            out[tag] = float(records[tag]["avg"])
    return out


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has been busy (not idle or waiting), /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """CPU seconds of this script's ended children (and theirs, waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(side: str, wl: Workload, concurrency: int, args, ctx: dict, folder: Path) -> dict:
    """One server started, one aiperf run against it, the server stopped: the
    metrics, the load average before and after, and the CPU that other
    processes than the server, aiperf and this script took meanwhile."""
    folder.mkdir(parents=True, exist_ok=True)
    tokens = concurrency * wl.slot_ctx
    busy0, ours0, self0, t_start = (busy_cpu_seconds(), children_cpu_seconds(),
                                    time.process_time(), time.monotonic())
    if side == "ours":
        kv_mb = max(512, math.ceil(tokens * ctx["kv_bytes"] / 2**20))
        server = start_ours(args.model, args.threads, kv_mb, concurrency, folder / "server.log",
                            args.model_flag)
    else:
        server = start_llama(ctx["server_bin"], args.model, args.threads, concurrency, tokens,
                             folder / "server.log")
    load_before = os.getloadavg()[0]
    try:
        cmd = aiperf_cmd(ctx["aiperf"], ctx["tokenizer"], server, wl, concurrency, side, folder)
        t0 = time.monotonic()
        # Not HF_HUB_OFFLINE: aiperf 0.13.0 then looks a local tokenizer folder up
        # in the Hub's cache, and fails; a local path is read as it is otherwise.
        res = subprocess.run(cmd, capture_output=True, text=True,
                             env=dict(os.environ, HF_HUB_DISABLE_TELEMETRY="1"))
        wall = time.monotonic() - t0
    finally:
        server.stop()
    (folder / "aiperf.log").write_text(res.stdout + res.stderr)
    if res.returncode != 0:
        sys.exit(f"serving_bench: aiperf failed ({res.returncode}) on {side} {wl.name} "
                 f"c={concurrency}; see {folder / 'aiperf.log'}:\n{res.stderr[-3000:]}")
    got = read_metrics(folder)
    mine = children_cpu_seconds() - ours0 + time.process_time() - self0
    others = max(0.0, busy_cpu_seconds() - busy0 - mine)
    got.update(load_before=load_before, load_after=os.getloadavg()[0], wall_s=wall,
               other_cpus=others / (time.monotonic() - t_start))
    return got


# --- report ------------------------------------------------------------------

COLUMNS = [("out_tok_s", "out tok/s", 1), ("req_s", "req/s", 2), ("ttft_p50", "TTFT p50", 0),
           ("ttft_p99", "TTFT p99", 0), ("itl_p50", "ITL p50", 1), ("itl_p99", "ITL p99", 1)]


def run_line(side: str, got: dict) -> str:
    vals = "  ".join(f"{label} {got[key]:.{d}f}" for key, label, d in COLUMNS)
    errors = got.get("error_request_count", 0)
    return (f"{side:9s} {vals} (ms)  load {got['load_before']:.2f} -> {got['load_after']:.2f}, "
            f"other processes {got['other_cpus']:.2f} CPUs"
            + (f"  ERRORS {errors:.0f}" if errors else ""))


def median_of(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def rows(results: dict):
    """Per cell and side: (workload, users, side, the formatted medians, the load
    average's span, the other CPUs' span); then (workload, users, None, the
    ratios ours / llama.cpp, "", "")."""
    for cell, sides in results.items():
        wl, c = cell.split("@")
        med = {s: {k: median_of(sides[s], k) for k, _, _ in COLUMNS} for s in SIDES}
        for s in SIDES:
            loads = [r[x] for r in sides[s] for x in ("load_before", "load_after")]
            others = [r["other_cpus"] for r in sides[s]]
            yield (wl, c, s, [f"{med[s][k]:.{d}f}" for k, _, d in COLUMNS],
                   f"{min(loads):.1f}-{max(loads):.1f}", f"{min(others):.2f}-{max(others):.2f}")
        yield (wl, c, None, [f"{med['ours'][k] / med['llama.cpp'][k]:.2f}x"
                             if med["llama.cpp"][k] else "-" for k, _, _ in COLUMNS], "", "")


def table(results: dict) -> str:
    head = (f"{'workload':10s} {'users':>5s} {'side':10s}"
            + "".join(f"{label:>10s}" for _, label, _ in COLUMNS) + "  load avg  other CPUs")
    lines = [head, "-" * len(head)]
    for wl, c, side, vals, loads, others in rows(results):
        first = f"{wl:10s} {c:>5s} {side:10s}" if side else f"{'':16s} {'ours/llama':10s}"
        lines.append((first + "".join(f"{v:>10s}" for v in vals)
                      + f"  {loads:8s}  {others}").rstrip())
    lines.append("(medians over the rounds; TTFT and ITL in ms; ratios ours / llama.cpp: "
                 "above 1 is better for tok/s and req/s, below 1 for latencies; load "
                 "average (1 min) before and after the runs, min-max; other CPUs: the CPUs "
                 "that processes other than the server and aiperf kept busy, min-max)")
    return "\n".join(lines)


def markdown(results: dict) -> str:
    """The table as Markdown (for bench/README.md)."""
    lines = ["| workload | users | side | " + " | ".join(label for _, label, _ in COLUMNS)
             + " | load avg | other CPUs |", "|" + "---|" * (len(COLUMNS) + 5)]
    for wl, c, side, vals, loads, others in rows(results):
        if side is None:
            wl, c, side, vals = "", "", "**ours / llama**", [f"**{v}**" for v in vals]
        lines.append(f"| {wl} | {c} | {side} | " + " | ".join(vals) + f" | {loads} | {others} |")
    return "\n".join(lines)


def targets(results: dict) -> list[str]:
    """Issue 32's targets, each met or missed, for the cells this run has."""
    def med(cell, side, key):
        return median_of(results[cell][side], key)
    out = []
    for c in (16, 64):
        cell = f"chat@{c}"
        if cell in results:
            tput = med(cell, "ours", "out_tok_s") / med(cell, "llama.cpp", "out_tok_s")
            ttft = med(cell, "ours", "ttft_p99") / med(cell, "llama.cpp", "ttft_p99")
            out.append(f"chat, {c} users: output tok/s {tput:.2f}x llama-server's (target >= 5x): "
                       f"{'met' if tput >= 5 else 'MISSED'}")
            out.append(f"chat, {c} users: p99 TTFT {ttft:.2f}x llama-server's (target <= 0.25x): "
                       f"{'met' if ttft <= 0.25 else 'MISSED'}")
    if "chat@1" in results:
        for key in ("itl_p50", "itl_p99"):
            r = med("chat@1", "ours", key) / med("chat@1", "llama.cpp", key)
            out.append(f"chat, 1 user: {key.replace('_', ' ').upper()} {r:.2f}x llama-server's "
                       f"(target <= 1x): {'met' if r <= 1 else 'MISSED'}")
    for wl in ("prefix", "multiturn"):
        for cell in (k for k in results if k.startswith(wl + "@")):
            r = med(cell, "llama.cpp", "ttft_p50") / med(cell, "ours", "ttft_p50")
            out.append(f"{wl}, {cell.split('@')[1]} users: p50 TTFT {r:.2f}x better than "
                       f"llama-server's (target >= 5x): {'met' if r >= 5 else 'MISSED'}")
    return out


def interrupt(*_) -> None:
    raise KeyboardInterrupt


def main() -> None:
    # Ctrl-C or SIGTERM ends the run with a report of the cells finished, even
    # where the script was started in the background (SIGINT ignored there).
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 2; --quick: 1)")
    ap.add_argument("--workloads", default="chat,prefix,multiturn,long")
    ap.add_argument("--concurrency", default="1,4,16,64", help="chat's concurrencies")
    ap.add_argument("--quick", action="store_true",
                    help="one round, fewer requests per run (a smoke test, a few minutes)")
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--no-build", action="store_true",
                    help="do not build tokenizer_server, model_server, llm_gateway and llm")
    ap.add_argument("--model-flag", action="append", default=[], metavar="--FLAG=VALUE",
                    help="an extra model_server flag for our side (repeatable), e.g. "
                         "--model-flag=--prefill_step_tokens=0")
    args = ap.parse_args()
    args.model = args.model.resolve()
    rounds = args.rounds or (1 if args.quick else 2)
    concurrency = [int(c) for c in args.concurrency.split(",") if c]
    all_workloads = workloads(concurrency, args.quick)
    names = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in names if w not in all_workloads]
    if unknown or not names or rounds < 1 or args.threads < 1 or min(concurrency, default=0) < 1:
        ap.error(f"--workloads takes {','.join(all_workloads)} (got {args.workloads}); "
                 "--rounds, --threads and --concurrency must be >= 1")
    if not args.model.exists():
        ap.error(f"no such model file: {args.model}")

    if not args.no_build:
        log("building tokenizer_server, model_server, llm_gateway and llm")
        run(["cmake", "--build", str(BUILD), "-j2", "--target", "tokenizer_server",
             "model_server", "llm_gateway", "llm"], cwd=ROOT)
    server_bin = build_llama(["llama-server"], log, run) / "llama-server"
    log(f"llama-server: {build_flags()}")
    if has_amx():
        log("llama-server: this CPU has AMX; "
            + ("built with GGML_NATIVE=OFF and AMX off (llama.cpp's AMX path crashes here)"
               if built_without_amx() else
               "WARNING: build/bench-llama.cpp/build was not built with AMX off"))
    aiperf = ensure_aiperf()
    tokenizer, kv_bytes = derive_tokenizer(args.model)
    ctx = {"server_bin": server_bin, "aiperf": aiperf, "tokenizer": tokenizer,
           "kv_bytes": kv_bytes}

    stamp = new_stamp(OUT, "serving", ".json", "")
    folder = OUT / f"serving-{stamp}"
    cells = [(all_workloads[w], c) for w in names for c in all_workloads[w].concurrency]
    results: dict[str, dict[str, list[dict]]] = {
        f"{wl.name}@{c}": {s: [] for s in SIDES} for wl, c in cells}
    log(f"{len(cells)} workload/concurrency cells x {rounds} rounds x 2 sides, "
        f"threads {args.threads}, model {args.model.name}; artifacts in {folder}"
        + (f"; ours with {' '.join(args.model_flag)}" if args.model_flag else ""))
    interrupted = False
    try:
        for r in range(rounds):
            order = SIDES if r % 2 == 0 else SIDES[::-1]
            for wl, c in cells:
                for side in order:
                    where = folder / f"round{r + 1}" / f"{wl.name}-c{c}-{side.replace('.', '')}"
                    got = one_run(side, wl, c, args, ctx, where)
                    results[f"{wl.name}@{c}"][side].append(got)
                    log(f"round {r + 1}/{rounds} {wl.name} c={c}: {run_line(side, got)}")
    except KeyboardInterrupt:  # Ctrl-C: report what both sides have finished
        interrupted = True
        log("interrupted: the report below has the cells both sides finished")
        results = {cell: sides for cell, sides in results.items() if all(sides.values())}

    report = {"time": stamp, "threads": args.threads, "rounds": rounds, "model": args.model.name,
              "aiperf": AIPERF, "llama_cpp_python": LLAMA_CPP_PYTHON, "quick": args.quick,
              "model_flags": args.model_flag,
              "interrupted": interrupted,
              "command": " ".join(["python3", "bench/serving_bench.py", *sys.argv[1:]]),
              "workloads": {wl.name: {k: v for k, v in vars(wl).items() if k != "name"}
                            for wl, _ in cells},
              "results": results}
    OUT.mkdir(parents=True, exist_ok=True)
    out_json = OUT / f"serving-{stamp}.json"
    out_json.write_text(json.dumps(report, indent=1))
    out_md = OUT / f"serving-{stamp}.md"
    out_md.write_text(markdown(results) + "\n\n" + "\n".join(f"- {t}" for t in targets(results))
                      + "\n")
    print(table(results))
    print()
    print("\n".join(targets(results)))
    log(f"wrote {out_json} and {out_md} (the table in Markdown)")


if __name__ == "__main__":
    main()
