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
  - the "refused" schemas: `llm generate` exits 2 naming the feature;
  - the issue's bad inputs (bad_inputs(): a schema of 1 MB, 10,000 nested
    levels, a recursive $ref, a rewrite that would grow past the bound, an
    invalid regex, a GBNF with a syntax error, a constraint that allows no
    token): `llm generate` exits 2 naming the reason, the gateway answers
    400 naming the field (streamed or not), and every server still serves.

    python3 tests/structured_generation_test.py [--build-dir build] [--jobs 3]
        [--only NAME ... | bad_inputs] [--max-tokens 160]

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
import urllib.error
import urllib.request
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


def llm_generate(llm: Path, tok: str, model: str, prompt: str, flags: list[str],
                 max_tokens: int) -> dict:
    """One `llm generate --json` run (flags: the constraint's and any
    other): its exit status, tokens, text, summary and stderr."""
    cmd = [str(llm), "generate", "--tokenizer", tok, "--model", model, "--json",
           "--temperature", "0", "--max-tokens", str(max_tokens), "--prompt", prompt, *flags]
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


def gateway_raw(url: str, model_id: str, fields: str, stream: bool) -> dict:
    """A chat request whose structured-output fields are JSON text (a schema
    too deep for Python's json module to write)."""
    body = (f'{{"model": {json.dumps(model_id)}, "max_tokens": 8, "stream": '
            f'{json.dumps(stream)}, "messages": [{{"role": "user", "content": "Answer."}}], '
            f'{fields}}}').encode()
    req = urllib.request.Request(url + "/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=RUN_TIMEOUT_S) as r:
            return {"status": r.status, "body": r.read().decode(errors="replace")[:400]}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": json.loads(e.read() or b"null")}
    except OSError as e:
        return {"status": None, "body": f"no answer: {e}"}


def bad_inputs(tmp_dir: Path) -> list[dict]:
    """The issue's bad inputs, each a precise error at `llm generate` (exit 2,
    stderr naming `error`) and at the gateway (400, param `param`, message
    naming `error`). `gateway` is the request's structured-output fields as
    JSON text. (A mask of the wrong size cannot be sent by either: a
    constraint of another vocabulary is refused before any call,
    ConstrainedLoopTest; the model service's refusal of such masks over gRPC
    is token_mask_service_test's.)"""
    def write(name: str, text: str) -> str:
        (tmp_dir / name).write_text(text)
        return str(tmp_dir / name)

    # A schema of 1 MB (the request body, under the gateway's 1 MiB, carries it).
    props = []
    size = 0
    while size < 1_000_000:
        props.append(f'"p{len(props)}": {{"type": "string"}}')
        size += len(props[-1]) + 2
    big = '{"type": "object", "properties": {' + ", ".join(props) + "}}"
    # 10,000 nested levels (110 KB).
    deep = '{"items": ' * 10000 + "{}" + "}" * 10000
    # Keywords beside an anyOf are copied into each branch (for xgrammar):
    # 300 branches beside 30 KB would be 9 MB to compile.
    beside = ('{"type": "object", "properties": {'
              + ", ".join(f'"p{i}": {{"type": "string"}}' for i in range(1000))
              + '}, "anyOf": ['
              + ", ".join(f'{{"required": ["p{i}"]}}' for i in range(300)) + "]}")
    loop = ('{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, '
            '"$ref": "#/$defs/a"}')
    bad_gbnf = 'root ::= "a" | ( "b"'
    nothing = r"[^\s\S]"  # a character class of no character

    def schema_format(schema: str) -> str:
        return (f'"response_format": {{"type": "json_schema", "json_schema": '
                f'{{"name": "x", "schema": {schema}}}}}')

    return [
        {"name": "a schema of 1 MB", "flags": ["--json-schema", write("big.json", big)],
         "gateway": schema_format(big), "param": "response_format",
         "error": "the limit is 262144 bytes"},
        {"name": "10,000 nested levels", "flags": ["--json-schema", write("deep.json", deep)],
         "gateway": schema_format(deep), "param": "response_format",
         "error": "deeper than 64 levels"},
        {"name": "10,000 nested levels as a string",
         "flags": ["--json-schema", str(tmp_dir / "deep.json")],
         "gateway": f'"structured_outputs": {{"json": {json.dumps(deep)}}}',
         "param": "structured_outputs.json", "error": "nests deeper than 64 levels"},
        {"name": "a recursive $ref that is nothing else",
         "flags": ["--json-schema", write("loop.json", loop)],
         "gateway": f'"json_schema": {loop}', "param": "json_schema",
         "error": "Circular $ref chain"},
        {"name": "a rewrite of 9 MB (anyOf beside 30 KB)",
         "flags": ["--json-schema", write("beside.json", beside)],
         "gateway": schema_format(beside), "param": "response_format",
         "error": "would make it more than 262144 bytes"},
        {"name": "an invalid regex", "flags": ["--regex", "(ab"],
         "gateway": '"structured_outputs": {"regex": "(ab"}',
         "param": "structured_outputs.regex", "error": "The parenthesis is not closed"},
        {"name": "a GBNF with a syntax error", "flags": ["--grammar", write("bad.gbnf", bad_gbnf)],
         "gateway": f'"grammar": {json.dumps(bad_gbnf)}', "param": "grammar",
         "error": "grammar: EBNF parser error"},
        {"name": "a mask that allows nothing (an empty language)",
         "flags": ["--regex", nothing],
         "gateway": f'"structured_outputs": {{"regex": {json.dumps(nothing)}}}',
         "param": "structured_outputs.regex", "error": "allows no output"},
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", type=Path, default=ROOT / "build")
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--jobs", type=int, default=3,
                    help="generations at once (the model server batches them; its kernels are "
                    "batch invariant, so greedy outputs do not depend on it)")
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--only", nargs="*", default=None,
                    help="run these schemas only (bad_inputs: the bad input table)")
    args = ap.parse_args()
    if not args.model.exists():
        sys.exit(f"structured_generation_test: {args.model} missing (run scripts/fetch-model.sh)")
    bin_dir = args.build_dir.resolve() / "bin"
    llm = bin_dir / "llm"
    data = json.loads(DATA.read_text())
    schemas = [s for s in data["schemas"] if args.only is None or s["name"] in args.only]
    refused = [s for s in data["refused"] if args.only is None or s["name"] in args.only]
    with_bad_inputs = args.only is None or "bad_inputs" in args.only
    fc = format_checker()
    failures: list[str] = []
    started = time.monotonic()

    with tempfile.TemporaryDirectory(prefix="llm_sg_test_") as tmp, \
            GatewayServices(args.build_dir, args.model) as services:
        tmp_dir = Path(tmp)
        bad = bad_inputs(tmp_dir) if with_bad_inputs else []
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
                    (s["name"], variant): pool.submit(
                        llm_generate, llm, tok, addr, s["prompt"],
                        ["--json-schema", str(files[s["name"]]), *flags], args.max_tokens)
                    for s, variant, addr, flags in jobs}
                gateway_runs = {
                    s["name"]: pool.submit(gateway_chat, services.url, services.model_id,
                                           s["prompt"], s["schema"], args.max_tokens)
                    for s in schemas if not s.get("flags")}
                refused_runs = {
                    s["name"]: pool.submit(llm_generate, llm, tok, model, "Answer in JSON.",
                                           ["--json-schema", str(files[s["name"]])], 8)
                    for s in refused}
                bad_runs = {
                    b["name"]: (pool.submit(llm_generate, llm, tok, model, "Answer.", b["flags"],
                                            8),
                                pool.submit(gateway_raw, services.url, services.model_id,
                                            b["gateway"], False),
                                pool.submit(gateway_raw, services.url, services.model_id,
                                            b["gateway"], True))
                    for b in bad}
                runs = {k: f.result() for k, f in futures.items()}
                gateway = {k: f.result() for k, f in gateway_runs.items()}
                refusals = {k: f.result() for k, f in refused_runs.items()}
                bad_results = {k: [f.result() for f in fs] for k, fs in bad_runs.items()}
            # Nothing above crashed or wedged a server.
            health, _ = http_json(services.url + "/health")
            alive = {srv.name: srv.proc.poll() is None
                     for srv in [*services.servers, chunked]}
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

    if args.only is None:
        if counts["accepted"] == 0:
            failures.append("the default runs of the 'equal' schemas accepted no speculated token "
                            f"({counts['proposed']} proposed): --speculate 0 compared nothing")
        if counts["short_prompts"]:
            failures.append(f"{counts['short_prompts']} 'equal' prompts fit one prefill chunk of "
                            "16 tokens: the chunked prefill compared nothing")
        if counts["forced"] == 0:
            failures.append("no forced token in any generation (--compact-json forces keys)")
    bad_ok = 0
    for b in bad:
        llm_run, plain, streamed = bad_results[b["name"]]
        why = []
        if llm_run["rc"] != 2 or b["error"] not in llm_run.get("stderr", ""):
            why.append(f"llm generate exit {llm_run['rc']}, want 2 naming {b['error']!r}: "
                       f"{llm_run.get('stderr') or llm_run.get('error')}")
        for label, g in (("gateway", plain), ("gateway stream", streamed)):
            err = g["body"].get("error", {}) if isinstance(g["body"], dict) else {}
            if g["status"] != 400 or err.get("param") != b["param"] or \
                    b["error"] not in err.get("message", ""):
                why.append(f"{label} {g['status']}, want 400 with param {b['param']!r} naming "
                           f"{b['error']!r}: {g['body']}")
        if why:
            failures.extend(f"bad input {b['name']}: {w}" for w in why)
            print(f"FAIL bad input {b['name']}: {'; '.join(why)[:600]}")
        else:
            bad_ok += 1
            print(f"ok   bad input {b['name']}: exit 2 and 400 {b['param']}: "
                  f"{llm_run['stderr'][:150]}")
    if bad:
        if health != 200:
            failures.append(f"the gateway's /health is {health} after the bad inputs")
        failures.extend(f"{name} exited during the test" for name, up in alive.items() if not up)

    print(f"{len(schemas)} schemas: {counts['finished']} finished (eos/stop), {counts['valid']} "
          f"valid; {counts['cut']} cut by max_tokens {args.max_tokens}; {counts['tokens']} tokens, "
          f"{counts['forced']} forced; greedy equality {counts['equal']}/{counts['equal_checked']} "
          f"(--speculate 0, --lookahead=false, chunked prefill over "
          f"{sum(1 for s in schemas if s.get('equal'))} schemas, speculation accepted "
          f"{counts['accepted']}/{counts['proposed']} proposed); gateway = llm generate "
          f"{counts['gateway_same']}/{len(gateway)}; refused {refused_ok}/{len(refused)}; "
          f"bad inputs {bad_ok}/{len(bad)}; "
          f"{time.monotonic() - started:.0f} s")
    for f in failures:
        print(f"FAIL {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
