#!/usr/bin/env python3
"""Structured output from the Python client (llm_client: json_schema=,
regex=, grammar=, choice=) against the real servers and the C++ client.

Starts build/bin/tokenizer_server and build/bin/model_server (the default
model) on free loopback ports and checks, with the grammar engine's library
that the build copies beside the package (build/python/llm_client/):

- a schema-constrained greedy generation parses and validates against its
  schema (python3-jsonschema), and its tokens, text and forced_tokens equal
  `llm generate --raw --json --temperature 0 --json-schema FILE`'s, token for
  token, with any whitespace and with --compact-json (more tokens forced, also
  after drawn tokens); the unconstrained greedy output differs; with
  speculate=4 the tokens are the same;
- a regex, a choice and a GBNF grammar: the same as llm's, and they match;
- seeded sampling over full logits under the schema validates;
- a schema the engine refuses raises InvalidArgument (param json_schema) with
  llm's message; a bad library path, given to Client or in
  LLM_CONSTRAIN_LIBRARY, raises Unsupported naming it.

    python3 tests/python_constrain_test.py [--build-dir build] [--model PATH]

Run by ctest (tests/CMakeLists.txt) with Debian's /usr/bin/python3
(python3-grpcio, python3-jsonschema). Prints each check; exit status 0 when
all pass.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema

from llm_servers import DEFAULT_MODEL, Server, report

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 20},
                    "maxItems": 3},
    },
    "required": ["name", "age", "hobbies"],
    "additionalProperties": False,
}
PERSON_PROMPT = "A person described as JSON:"
MAX_TOKENS = 96
REGEX = r" [0-9]{3}-[0-9]{4}"
CHOICES = ["yes", "no"]
GRAMMAR = 'root ::= " " color ", " color\ncolor ::= "red" | "green" | "blue" | "yellow"\n'
REFUSED = {"type": "object", "not": {"required": ["x"]}}


def llm_generate(llm: Path, tok: str, model: str, prompt: str, *flags: str) -> dict:
    """`llm generate --raw --json --temperature 0`'s tokens, text and summary
    (or its exit status and stderr)."""
    r = subprocess.run([str(llm), "generate", "--raw", "--json", "--temperature", "0",
                        "--max-tokens", str(MAX_TOKENS), "--prompt", prompt, "--tokenizer", tok,
                        "--model", model, *flags], capture_output=True, text=True, timeout=300)
    out = {"status": r.returncode, "stderr": r.stderr.strip(), "tokens": [], "text": ""}
    for line in r.stdout.splitlines() if r.returncode == 0 else []:
        j = json.loads(line)
        if "stop_reason" in j:
            out["summary"] = j
            continue
        out["text"] += j["text"]
        if j["token"] is not None:
            out["tokens"].append(j["token"])
    return out


def bad_library_in_env(build: Path, tok: str, model: str) -> str:
    """What a process with LLM_CONSTRAIN_LIBRARY=/nonexistent/... gets."""
    code = ("from llm_client import Client, Unsupported\n"
            f"c = Client({tok!r}, {model!r}, wait_ready=60)\n"
            "try:\n"
            "    c.generate('x', regex='a')\n"
            "    print('no error')\n"
            "except Unsupported as e:\n"
            "    print(e)\n")
    env = dict(os.environ, PYTHONPATH=str(build / "python"),
               LLM_CONSTRAIN_LIBRARY="/nonexistent/env/libllm_constrain.so")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    return r.stdout + r.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", type=Path, default=Path(__file__).resolve().parent.parent
                    / "build")
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    args = ap.parse_args()
    if not args.model.exists():
        sys.exit(f"python_constrain_test: {args.model} missing (run scripts/fetch-model.sh)")
    build = args.build_dir.resolve()
    if not (build / "python/llm_client/libllm_constrain.so").exists():
        sys.exit(f"python_constrain_test: {build}/python/llm_client/libllm_constrain.so missing "
                 "(build the llm_client_python_constrain target)")
    sys.path.insert(0, str(build / "python"))
    from llm_client import Client, InvalidArgument, Unsupported

    llm = build / "bin/llm"
    tmp = tempfile.TemporaryDirectory(prefix="python_constrain_test_")
    d = Path(tmp.name)
    (d / "person.json").write_text(json.dumps(PERSON))
    (d / "refused.json").write_text(json.dumps(REFUSED))
    (d / "colors.gbnf").write_text(GRAMMAR)
    servers = []
    try:
        servers.append(Server(build / "bin", "tokenizer_server", ["--vocab", str(args.model)], d))
        servers.append(Server(build / "bin", "model_server",
                              ["--model", str(args.model), "--kv_cache_mb", "64"], d))
        tok, model = servers[0].address, servers[1].address
        with Client(tok, model, wait_ready=60) as c:
            py = {
                "schema": c.generate(PERSON_PROMPT, temperature=0, max_tokens=MAX_TOKENS,
                                     json_schema=PERSON),
                "compact": c.generate(PERSON_PROMPT, temperature=0, max_tokens=MAX_TOKENS,
                                      json_schema=json.dumps(PERSON), compact_json=True),
                "speculated": c.generate(PERSON_PROMPT, temperature=0, max_tokens=MAX_TOKENS,
                                         json_schema=PERSON, compact_json=True, speculate=4),
                "free": c.generate(PERSON_PROMPT, temperature=0, max_tokens=MAX_TOKENS),
                "regex": c.generate("Call me at", temperature=0, max_tokens=MAX_TOKENS,
                                    regex=REGEX),
                "choice": c.generate("Is Paris in France? Answer:", temperature=0,
                                     max_tokens=MAX_TOKENS, choice=CHOICES),
                "grammar": c.generate("Two colors:", temperature=0, max_tokens=MAX_TOKENS,
                                      grammar=GRAMMAR),
                "sampled": [c.generate(PERSON_PROMPT, temperature=0.8, seed=s,
                                       max_tokens=MAX_TOKENS, json_schema=PERSON)
                            for s in (1, 2)],
            }
            try:
                c.stream(PERSON_PROMPT, json_schema=REFUSED)
                refused = None
            except InvalidArgument as e:
                refused = e
        try:
            with Client(tok, model, constrain_library="/nonexistent/libllm_constrain.so") as c:
                c.generate(PERSON_PROMPT, choice=CHOICES)
            bad_library = None
        except Unsupported as e:
            bad_library = str(e)
        bad_env = bad_library_in_env(build, tok, model)
        cpp = {
            "schema": llm_generate(llm, tok, model, PERSON_PROMPT, "--json-schema",
                                   str(d / "person.json")),
            "compact": llm_generate(llm, tok, model, PERSON_PROMPT, "--json-schema",
                                    str(d / "person.json"), "--compact-json"),
            "regex": llm_generate(llm, tok, model, "Call me at", "--regex", REGEX),
            "choice": llm_generate(llm, tok, model, "Is Paris in France? Answer:",
                                   *[f for x in CHOICES for f in ("--choice", x)]),
            "grammar": llm_generate(llm, tok, model, "Two colors:", "--grammar",
                                    str(d / "colors.gbnf")),
            "refused": llm_generate(llm, tok, model, PERSON_PROMPT, "--json-schema",
                                    str(d / "refused.json")),
        }
    finally:
        for s in servers:
            s.stop()
        tmp.cleanup()

    def valid(text: str) -> bool:
        try:
            jsonschema.validate(json.loads(text), PERSON)
            return True
        except (ValueError, jsonschema.ValidationError) as e:
            print(f"  not valid: {text!r}: {e}")
            return False

    def same(name: str) -> bool:
        g, r = py[name], cpp[name]
        print(f"{name}: python {g.tokens} {g.text!r} ({g.stop_reason}, {g.forced_tokens} forced)"
              f"\n{' ' * len(name)}  llm    {r['tokens']} {r['text']!r} {r.get('summary')}")
        s = r.get("summary", {})
        return (r["status"] == 0 and bool(g.tokens) and g.tokens == r["tokens"]
                and g.text == r["text"] and g.forced_tokens == s.get("forced_tokens")
                and g.stop_reason == s.get("stop_reason"))

    schema, compact = py["schema"], py["compact"]
    checks = {
        "schema, greedy: the output parses and validates, ends with EOS":
            valid(schema.text) and schema.stop_reason == "eos",
        "schema, greedy: tokens, text, forced_tokens equal llm generate --json-schema's":
            same("schema"),
        "schema, --compact-json: equal llm's, tokens forced after draws too":
            same("compact") and valid(compact.text) and compact.forced_tokens > 2
            and compact.forced_tokens > schema.forced_tokens,
        "the unconstrained greedy output differs":
            py["free"].tokens[:len(schema.tokens)] != schema.tokens,
        "speculate=4 under the schema: the same tokens":
            py["speculated"].tokens == compact.tokens,
        f"regex {REGEX!r}: equal llm's, and matches": same("regex")
            and re.fullmatch(REGEX, py["regex"].text) is not None,
        f"choice {CHOICES}: equal llm's, one of them": same("choice")
            and py["choice"].text in CHOICES,
        "GBNF grammar: equal llm's, and matches": same("grammar")
            and re.fullmatch(r" (red|green|blue|yellow), (red|green|blue|yellow)",
                             py["grammar"].text) is not None,
        "seeded sampling (full logits) under the schema validates":
            all(valid(g.text) and g.stop_reason == "eos" for g in py["sampled"]),
        "a refused schema raises InvalidArgument with llm's message":
            refused is not None and refused.param == "json_schema" and cpp["refused"][
                "status"] == 2 and cpp["refused"]["stderr"].removeprefix("llm: ") in str(refused)
            and "'not'" in str(refused),
        "a bad library path (Client) raises Unsupported naming it":
            bad_library is not None and "/nonexistent/libllm_constrain.so" in bad_library
            and "LLM_CONSTRAIN_LIBRARY" in bad_library,
        "a bad library path (LLM_CONSTRAIN_LIBRARY) raises Unsupported naming it":
            "/nonexistent/env/libllm_constrain.so: no such file" in bad_env,
    }
    print(f"refused: {refused}\nllm:     {cpp['refused']['stderr']}\nbad library: {bad_library}"
          f"\nbad env: {bad_env.strip()}")
    return report(checks)


if __name__ == "__main__":
    sys.exit(main())
