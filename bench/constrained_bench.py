#!/usr/bin/env python3
"""Structured generation's cost: greedy generation under a JSON schema
against the same generation unconstrained, with the default model, as
ratios (issue 29).

    python3 bench/constrained_bench.py [--rounds 5] [--threads 2] [--streams 16]

One stream (`llm generate` processes, one at a time, --speculate 0, the chat
template), two cases:
  - "no forced tokens": a schema (an array of 5 objects of 3 fixed keys)
    with any whitespace allowed (the default), where the grammar forces
    almost nothing: the cost of the masks;
  - "forced tokens": the same schema with --compact-json, where every key,
    its quotes and the separators are forced (fed in the step of the token
    before them, with no draw).
The unconstrained side generates the same prompt with --ignore-eos and
--max-tokens set to the tokens the constrained side generated (found by a
first, unmeasured constrained run; greedy, so every run is the same), so
both time as many tokens. The figure is tokens over the generation's time
(`llm generate --json`'s time to first token, which includes the prefill
and the first mask, plus its decode time).

Under load (through one llm_gateway, so that the schema is compiled once,
as a server does): --streams chat requests at once, each its own prompt,
under response_format json_schema (any whitespace: the gateway has no
compact option), against the same requests unconstrained with "ignore_eos"
and max_tokens set to the constrained one's completion_tokens. The figure
is all completion tokens over the wall time from the first request sent to
the last answer.

Rounds alternate which side goes first. Prints the medians and their
ratios (constrained / unconstrained: above 1 is faster under the
constraint) and writes build/bench/constrained.json. Beside the rates,
which other load on the machine moves by tens of percent, it prints what
does not move with it: the model server's engine steps for the same tokens
(llm_engine_steps_total: forced tokens ride in the step of the token before
them), and the CPU time of the client side (the `llm` processes; under
load the gateway, which computes all 16 streams' masks).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from servers import BIN, MODEL, ROOT, spread, start  # bench/servers.py

OUT = ROOT / "build" / "bench"

# Five people of three fixed keys: about 100 tokens, keys every few tokens.
PEOPLE = {
    "type": "array", "minItems": 5, "maxItems": 5,
    "items": {"type": "object",
              "properties": {"name": {"type": "string", "maxLength": 24},
                             "age": {"type": "integer", "minimum": 0, "maximum": 120},
                             "city": {"type": "string", "maxLength": 24}},
              "required": ["name", "age", "city"], "additionalProperties": False}}
PROMPT = "List five famous people as JSON: the name, the age and the city of each."
# The load test's prompts (one a stream).
SUBJECTS = ["famous scientists", "painters", "football players", "writers", "singers",
            "film directors", "chess players", "explorers", "inventors", "poets",
            "architects", "composers", "astronauts", "chefs", "mathematicians", "actors"]


def log(msg: str) -> None:
    print(f"constrained_bench: {msg}", file=sys.stderr, flush=True)


class Counters:
    """The model server's engine steps (Prometheus text on --metrics_listen)
    and a process's CPU time, read before and after a measurement."""

    def __init__(self, metrics: str, gateway_pid: int):
        self.metrics = metrics
        self.gateway_pid = gateway_pid

    def read(self) -> dict[str, float]:
        with urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=10) as r:
            text = r.read().decode()
        steps = float(re.search(r"^llm_engine_steps_total (\S+)$", text, re.M).group(1))
        fields = Path(f"/proc/{self.gateway_pid}/stat").read_text().rsplit(")", 1)[1].split()
        gateway_cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {"steps": steps, "gateway_cpu_s": gateway_cpu,
                "llm_cpu_s": children.ru_utime + children.ru_stime}

    @staticmethod
    def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        return {k: after[k] - before[k] for k in before}


def llm_generate(tokenizer: str, model: str, flags: list[str]) -> dict:
    """One `llm generate --json` run (its token lines to a file, not a pipe
    this script would wake on); its summary."""
    with tempfile.TemporaryFile(mode="w+") as out:
        r = subprocess.run([str(BIN / "llm"), "generate", "--tokenizer", tokenizer, "--model",
                            model, "--json", "--temperature", "0", "--speculate", "0",
                            "--prompt", PROMPT, *flags],
                           stdout=out, stderr=subprocess.PIPE, text=True, timeout=600)
        if r.returncode != 0:
            sys.exit(f"constrained_bench: llm generate failed: {r.stderr}")
        out.seek(0)
        s = json.loads(out.read().strip().splitlines()[-1])
    seconds = s["time_to_first_token_ms"] / 1e3
    if s["tokens"] > 1:
        seconds += (s["tokens"] - 1) / s["tokens_per_second"]
    return {"tokens": s["tokens"], "forced": s["forced_tokens"], "seconds": seconds,
            "tokens_per_s": s["tokens"] / seconds}


def chat(gateway: str, model_id: str, subject: str, extra: dict) -> dict:
    body = {"model": model_id, "temperature": 0, "max_tokens": 200,
            "messages": [{"role": "user", "content": f"List five {subject} as JSON: the name, "
                                                     "the age and the city of each."}], **extra}
    req = urllib.request.Request(f"http://{gateway}/v1/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def batch(gateway: str, model_id: str, extras: list[dict]) -> tuple[int, float]:
    """The requests at once, one a subject: (completion tokens, wall seconds)."""
    results: list[dict | None] = [None] * len(extras)
    errors: list[BaseException] = []
    go = threading.Barrier(len(extras) + 1)

    def run(i: int) -> None:
        try:
            go.wait()
            results[i] = chat(gateway, model_id, SUBJECTS[i % len(SUBJECTS)], extras[i])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(extras))]
    for t in threads:
        t.start()
    go.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return sum(r["usage"]["completion_tokens"] for r in results), elapsed


def wait_health(gateway: str) -> str:
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://{gateway}/health", timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit("constrained_bench: the gateway did not become healthy")
        time.sleep(0.1)
    with urllib.request.urlopen(f"http://{gateway}/v1/models", timeout=5) as r:
        return json.loads(r.read())["data"][0]["id"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(MODEL))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--streams", type=int, default=16)
    args = ap.parse_args()
    for name in ("tokenizer_server", "model_server", "llm_gateway", "llm"):
        if not (BIN / name).exists():
            sys.exit(f"constrained_bench: {BIN / name} is missing: build first")
    schema_file = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    schema_file.write(json.dumps(PEOPLE))
    schema_file.close()
    procs = []
    results: dict[str, dict[str, list[float]]] = {}
    # Per case and side: engine steps and client CPU seconds of each run.
    costs: dict[str, dict[str, list[dict[str, float]]]] = {}
    try:
        tok_proc, tokenizer = start("tokenizer_server", ["--vocab", args.model],
                                    "constrained_bench")
        procs.append(tok_proc)
        model_proc, model = start("model_server", ["--model", args.model, "--threads",
                                                   str(args.threads), "--metrics_listen",
                                                   "127.0.0.1:0"], "constrained_bench")
        procs.append(model_proc)
        metrics = "127.0.0.1:" + re.search(r" port (\d+)", model_proc.stdout.readline()).group(1)
        gw_proc, gateway = start("llm_gateway", ["--tokenizer", tokenizer, "--model", model])
        procs.append(gw_proc)
        model_id = wait_health(gateway)
        counters = Counters(metrics, gw_proc.pid)

        # One stream: each case's constrained run once (unmeasured: the
        # servers warm up, and it says how many tokens to time).
        cases = {"no forced tokens": ["--json-schema", schema_file.name],
                 "forced tokens": ["--json-schema", schema_file.name, "--compact-json"]}
        sides: dict[str, dict[str, list[str]]] = {}
        forced: dict[str, int] = {}
        for case, flags in cases.items():
            first = llm_generate(tokenizer, model, flags)
            forced[case] = first["forced"]
            sides[case] = {"constrained": flags,
                           "unconstrained": ["--ignore-eos", "--max-tokens", str(first["tokens"])]}
            log(f"{case}: {first['tokens']} tokens, {first['forced']} forced")
            results[case] = {"constrained": [], "unconstrained": []}
            costs[case] = {"constrained": [], "unconstrained": []}
        # Under load: the constrained answers' lengths (and the schema compiled).
        schema_extra = {"response_format": {"type": "json_schema",
                                            "json_schema": {"name": "people", "schema": PEOPLE}}}
        lengths = [chat(gateway, model_id, SUBJECTS[i % len(SUBJECTS)], schema_extra)
                   ["usage"]["completion_tokens"] for i in range(args.streams)]
        load_case = f"{args.streams} streams at once (gateway)"
        load_sides = {"constrained": [schema_extra] * args.streams,
                      "unconstrained": [{"ignore_eos": True, "max_tokens": n} for n in lengths]}
        results[load_case] = {"constrained": [], "unconstrained": []}
        costs[load_case] = {"constrained": [], "unconstrained": []}
        log(f"{load_case}: {sum(lengths)} tokens a batch")

        for r in range(args.rounds):
            order = ("constrained", "unconstrained") if r % 2 == 0 else (
                "unconstrained", "constrained")
            for case in cases:
                for side in order:
                    before = counters.read()
                    results[case][side].append(
                        llm_generate(tokenizer, model, sides[case][side])["tokens_per_s"])
                    costs[case][side].append(Counters.delta(before, counters.read()))
            for side in order:
                before = counters.read()
                tokens, seconds = batch(gateway, model_id, load_sides[side])
                results[load_case][side].append(tokens / seconds)
                costs[load_case][side].append(Counters.delta(before, counters.read()))
            log(f"round {r + 1}/{args.rounds}: " + "; ".join(
                f"{case} {results[case]['constrained'][-1]:.0f} vs "
                f"{results[case]['unconstrained'][-1]:.0f} tokens/s" for case in results))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        os.unlink(schema_file.name)

    print(f"model {Path(args.model).name}, {args.threads} threads, {args.rounds} rounds, greedy, "
          "tokens/s min / median / max")
    print("| case | constrained | unconstrained | ratio of the medians | engine steps | "
          "client CPU, ms |")
    print("|---|---|---|---|---|---|")
    ratios = {}
    for case, sides_results in results.items():
        c, u = sides_results["constrained"], sides_results["unconstrained"]
        ratios[case] = statistics.median(c) / statistics.median(u)
        note = f" ({forced[case]} forced)" if case in forced else ""
        cpu = "gateway_cpu_s" if case == load_case else "llm_cpu_s"

        def med(side: str, key: str) -> float:
            return statistics.median(x[key] for x in costs[case][side])

        print(f"| {case}{note} | {spread(c)} | {spread(u)} | **{ratios[case]:.2f}x** | "
              f"{med('constrained', 'steps'):.0f} vs {med('unconstrained', 'steps'):.0f} | "
              f"{med('constrained', cpu) * 1e3:.0f} vs {med('unconstrained', cpu) * 1e3:.0f} |")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "constrained.json").write_text(json.dumps(
        {"args": vars(args), "results": results, "costs": costs, "ratios": ratios,
         "forced": forced}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
