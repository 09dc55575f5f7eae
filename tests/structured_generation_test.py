#!/usr/bin/env python3
"""Generation under a constraint with the real default model (issue 29).

Starts build/bin/tokenizer_server, two model_servers over the default model
(one as it runs by default, one with --max_batch_tokens 16, which prefills a
prompt in chunks of 16 tokens) and llm_gateway, then, for each schema of
tests/data/structured_generation_schemas.json (50+ of different shapes:
nested objects, arrays with bounds, enums, anyOf, numbers with ranges,
strings with patterns and formats, $ref, each with a prompt):

  - generates greedily with `llm generate --json-schema FILE --json
    --temperature 0` (and the schema's own extra flags, --compact-json for
    some); every output that ends with eos or a stop string must parse as
    JSON and validate against its schema (python3-jsonschema, draft 2020-12,
    formats checked); outputs cut by --max-tokens are counted, not
    validated;
  - for the schemas marked "equal": the same tokens with --speculate 0 (the
    default run proposes 3), with --lookahead=false, and on the chunked
    model server;
  - through the gateway (response_format json_schema, greedy): the same
    text as `llm generate` for the schemas without extra flags;
  - the "refused" schemas: `llm generate` exits 2 naming the feature.

    python3 tests/structured_generation_test.py [--build-dir build] [--jobs 3]
        [--only NAME ...] [--max-tokens 160]

Run by ctest with Debian's /usr/bin/python3 (python3-jsonschema, installed
by scripts/setup.sh). Prints a line per schema and a summary; exit status 0
when every check passes.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonschema

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llm_servers import DEFAULT_MODEL, GatewayServices, Server, http_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests/data/structured_generation_schemas.json"
# A hang guard only: a generation of 160 tokens takes seconds.
RUN_TIMEOUT_S = 180

RFC3339_TIME = r"(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})"


def format_checker() -> jsonschema.FormatChecker:
    """Debian's jsonschema checks date, email, ipv4, ipv6, uuid and time by
    itself; date-time, uri and hostname need packages Debian 12 leaves out,
    so they are checked here (RFC 3339, RFC 3986's scheme ":" rest, RFC 1123
    labels)."""
    fc = jsonschema.FormatChecker()

    def time_ok(s: str) -> bool:
        m = re.fullmatch(RFC3339_TIME, s)
        return bool(m) and int(m[1]) < 24 and int(m[2]) < 60 and int(m[3]) <= 60

    @fc.checks("time")
    def _time(s: object) -> bool:
        return not isinstance(s, str) or time_ok(s)

    @fc.checks("date-time")
    def _date_time(s: object) -> bool:
        if not isinstance(s, str):
            return True
        m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})[Tt](.*)", s)
        if not m or not time_ok(m[2]):
            return False
        try:
            datetime.date.fromisoformat(m[1])
        except ValueError:
            return False
        return True

    @fc.checks("uri")
    def _uri(s: object) -> bool:
        return not isinstance(s, str) or bool(
            re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s\"<>\\^`{|}]*", s))

    @fc.checks("hostname")
    def _hostname(s: object) -> bool:
        return not isinstance(s, str) or bool(re.fullmatch(
            r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
            r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*", s))

    return fc


def llm_generate(llm: Path, tok: str, model: str, schema: Path, prompt: str,
                 flags: list[str], max_tokens: int) -> dict:
    """One `llm generate --json` run: its exit status, tokens, text, summary
    and stderr."""
    cmd = [str(llm), "generate", "--tokenizer", tok, "--model", model, "--json",
           "--temperature", "0", "--max-tokens", str(max_tokens), "--json-schema",
           str(schema), "--prompt", prompt, *flags]
    start = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"rc": None, "error": f"no answer in {RUN_TIMEOUT_S} s (a hang?)", "cmd": cmd}
    out = {"rc": r.returncode, "stderr": r.stderr.strip(), "tokens": [], "text": "",
           "summary": None, "seconds": time.monotonic() - start, "cmd": cmd}
    if r.returncode != 0:
        return out
    for line in r.stdout.splitlines():
        j = json.loads(line)
        if "stop_reason" in j:
            out["summary"] = j
            continue
        out["text"] += j["text"]
        if j.get("token") is not None and j["token"] >= 0:
            out["tokens"].append(j["token"])
    return out


def gateway_chat(url: str, model_id: str, prompt: str, schema: dict, max_tokens: int) -> dict:
    status, body = http_json(url + "/v1/chat/completions", {
        "model": model_id, "messages": [{"role": "user", "content": prompt}],
        "temperature": 0, "max_tokens": max_tokens,
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "answer", "schema": schema}}},
        timeout=RUN_TIMEOUT_S)
    return {"status": status, "body": body}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", type=Path, default=ROOT / "build")
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--jobs", type=int, default=3,
                    help="generations at once (the model server batches them; its kernels are "
                    "batch invariant, so greedy outputs do not depend on it)")
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--only", nargs="*", default=None, help="run these schemas only")
    args = ap.parse_args()
    if not args.model.exists():
        sys.exit(f"structured_generation_test: {args.model} missing (run scripts/fetch-model.sh)")
    bin_dir = args.build_dir.resolve() / "bin"
    llm = bin_dir / "llm"
    data = json.loads(DATA.read_text())
    schemas = [s for s in data["schemas"] if args.only is None or s["name"] in args.only]
    refused = [s for s in data["refused"] if args.only is None or s["name"] in args.only]
    fc = format_checker()
    failures: list[str] = []
    started = time.monotonic()

    with tempfile.TemporaryDirectory(prefix="llm_sg_test_") as tmp, \
            GatewayServices(args.build_dir, args.model) as services:
        tmp_dir = Path(tmp)
        chunked = Server(bin_dir, "model_server",
                         ["--model", str(args.model), "--kv_cache_mb", "64",
                          "--max_batch_tokens", "16"], tmp_dir)
        try:
            tok = services.tokenizer.address
            model = services.model_server.address

            # Written once, before any run reads them (a run of the same
            # schema must never see a file being rewritten).
            files = {}
            for s in [*schemas, *refused]:
                files[s["name"]] = tmp_dir / f"{s['name']}.json"
                files[s["name"]].write_text(json.dumps(s["schema"]))

            # Every run to do: (schema, variant, model address, extra flags).
            jobs = []
            for s in schemas:
                base = s.get("flags", [])
                jobs.append((s, "base", model, base))
                if s.get("equal"):
                    jobs.append((s, "speculate 0", model, [*base, "--speculate", "0"]))
                    jobs.append((s, "lookahead off", model, [*base, "--lookahead=false"]))
                    jobs.append((s, "chunked prefill", chunked.address, base))
            with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
                futures = {
                    (s["name"], variant): pool.submit(llm_generate, llm, tok, addr,
                                                      files[s["name"]], s["prompt"], flags,
                                                      args.max_tokens)
                    for s, variant, addr, flags in jobs}
                gateway_runs = {
                    s["name"]: pool.submit(gateway_chat, services.url, services.model_id,
                                           s["prompt"], s["schema"], args.max_tokens)
                    for s in schemas if not s.get("flags")}
                refused_runs = {
                    s["name"]: pool.submit(llm_generate, llm, tok, model, files[s["name"]],
                                           "Answer in JSON.", [], 8)
                    for s in refused}
                runs = {k: f.result() for k, f in futures.items()}
                gateway = {k: f.result() for k, f in gateway_runs.items()}
                refusals = {k: f.result() for k, f in refused_runs.items()}
        finally:
            chunked.stop()

    counts = {"finished": 0, "valid": 0, "cut": 0, "forced": 0, "tokens": 0,
              "equal": 0, "equal_checked": 0, "gateway_same": 0, "proposed": 0, "accepted": 0,
              "short_prompts": 0}
    for s in schemas:
        name = s["name"]
        r = runs[(name, "base")]
        if r["rc"] != 0:
            why = r.get("stderr") or r.get("error")
            failures.append(f"{name}: llm generate exit {r['rc']}: {why}")
            print(f"FAIL {name}: exit {r['rc']} {why}")
            continue
        summary = r["summary"]
        stop = summary["stop_reason"]
        counts["tokens"] += summary["tokens"]
        counts["forced"] += summary["forced_tokens"]
        verdict = ""
        if stop in ("eos", "stop"):
            counts["finished"] += 1
            try:
                value = json.loads(r["text"])
                errors = sorted(jsonschema.Draft202012Validator(s["schema"], format_checker=fc)
                                .iter_errors(value), key=str)
                if errors:
                    verdict = f"INVALID: {errors[0].message}"
                else:
                    verdict = "valid"
                    counts["valid"] += 1
            except json.JSONDecodeError as e:
                verdict = f"NOT JSON: {e}"
            if verdict != "valid":
                failures.append(f"{name}: {verdict}: {r['text']!r}")
        elif stop == "length":
            counts["cut"] += 1
            verdict = "cut by max_tokens"
        else:
            verdict = f"stop_reason {stop}"
            failures.append(f"{name}: unexpected stop_reason {stop}")
        compact = " ".join(r["text"].split())
        print(f"{'ok  ' if verdict in ('valid', 'cut by max_tokens') else 'FAIL'} {name}: "
              f"{verdict}; {summary['tokens']} tokens ({summary['forced_tokens']} forced) "
              f"{' '.join(s.get('flags', []))}: {compact[:100]}")
        if s.get("equal"):
            # The comparisons mean something only if the default run
            # speculated and the chunked server had more than a chunk to
            # prefill (both checked over all the schemas below).
            counts["proposed"] += summary["proposed_tokens"]
            counts["accepted"] += summary["accepted_tokens"]
            if summary["prompt_tokens"] <= 16:
                counts["short_prompts"] += 1
            for variant in ("speculate 0", "lookahead off", "chunked prefill"):
                v = runs[(name, variant)]
                counts["equal_checked"] += 1
                if v["rc"] == 0 and v["tokens"] == r["tokens"] and v["text"] == r["text"]:
                    counts["equal"] += 1
                else:
                    detail = v.get("stderr") or v.get("error") or f"{v['text']!r} vs {r['text']!r}"
                    failures.append(f"{name}: {variant} differs from the default run: {detail}")
                    print(f"FAIL {name}: {variant} differs: {detail}")
        if name in gateway:
            g = gateway[name]
            if g["status"] != 200:
                failures.append(f"{name}: gateway {g['status']}: {g['body']}")
                print(f"FAIL {name}: gateway {g['status']}: {g['body']}")
            else:
                content = g["body"]["choices"][0]["message"]["content"]
                if content == r["text"]:
                    counts["gateway_same"] += 1
                else:
                    failures.append(f"{name}: the gateway answered {content!r}, "
                                    f"llm generate {r['text']!r}")
                    print(f"FAIL {name}: gateway {content!r} != llm generate {r['text']!r}")

    refused_ok = 0
    for s in refused:
        r = refusals[s["name"]]
        if r["rc"] == 2 and s["error"] in r["stderr"]:
            refused_ok += 1
            print(f"ok   refused {s['name']}: {r['stderr']}")
        else:
            failures.append(f"refused {s['name']}: exit {r['rc']}, want 2 naming "
                            f"{s['error']!r}: {r.get('stderr') or r.get('error')}")
            print(f"FAIL refused {s['name']}: exit {r['rc']}: {r.get('stderr') or r.get('error')}")

    if any(s.get("equal") for s in schemas):
        if counts["accepted"] == 0:
            failures.append("the default runs of the 'equal' schemas accepted no speculated token "
                            f"({counts['proposed']} proposed): --speculate 0 compared nothing")
        if counts["short_prompts"]:
            failures.append(f"{counts['short_prompts']} 'equal' prompts fit one prefill chunk of "
                            "16 tokens: the chunked prefill compared nothing")
    if any(s.get("flags") for s in schemas) and counts["forced"] == 0:
        failures.append("no forced token in any generation (--compact-json forces keys)")
    print(f"{len(schemas)} schemas: {counts['finished']} finished (eos/stop), {counts['valid']} "
          f"valid; {counts['cut']} cut by max_tokens {args.max_tokens}; {counts['tokens']} tokens, "
          f"{counts['forced']} forced; greedy equality {counts['equal']}/{counts['equal_checked']} "
          f"(--speculate 0, --lookahead=false, chunked prefill over "
          f"{sum(1 for s in schemas if s.get('equal'))} schemas, speculation accepted "
          f"{counts['accepted']}/{counts['proposed']} proposed); gateway = llm generate "
          f"{counts['gateway_same']}/{len(gateway)}; refused {refused_ok}/{len(refused)}; "
          f"{time.monotonic() - started:.0f} s")
    for f in failures:
        print(f"FAIL {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
