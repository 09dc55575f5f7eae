#!/usr/bin/env python3
"""The Python client package (clients/python, llm_client) against the C++ client.

Starts build/bin/tokenizer_server and build/bin/model_server on free loopback
ports and runs llm_client (its stubs generated at build time into
build/python/llm_client/pb) over them: a greedy generation (Encode -> Prefill
-> DecodeStream, stop at EOS or max_tokens) whose tokens, text and logprobs
must equal `build/bin/llm generate --json --temperature 0 --raw`'s; the same
run streamed (its pieces join to the same text); seeded sampling that repeats
with its seed; a stop string; a bad parameter raising InvalidArgument.

    python3 tests/python_client_test.py [--build-dir build] [--model PATH]

Run by ctest (tests/CMakeLists.txt) with Debian's /usr/bin/python3, which has
python3-grpcio. Prints each check; exit status 0 when all pass.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from llm_servers import report

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "The three primary colors are"
MAX_TOKENS = 24


def start_server(binary: Path, flags: list[str]) -> tuple[subprocess.Popen, str]:
    """Starts a server on 127.0.0.1:0 and returns it with its address."""
    proc = subprocess.Popen([str(binary), "--listen", "127.0.0.1:0", *flags],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r"listening on port (\d+)", line)
    if not m:
        proc.kill()
        sys.exit(f"python_client_test: no port line from {binary.name}: {line!r}")
    return proc, f"127.0.0.1:{m.group(1)}"


def python_runs(tok_addr: str, model_addr: str) -> dict:
    """The Python client's greedy run of PROMPT, a streamed one, and seeded
    sampling runs."""
    from llm_client import Client, InvalidArgument

    with Client(tok_addr, model_addr, wait_ready=60) as c:
        greedy = c.generate(PROMPT, temperature=0, max_tokens=MAX_TOKENS)
        stream = c.stream(PROMPT, temperature=0, max_tokens=MAX_TOKENS)
        pieces = list(stream)
        sampled = [c.generate(PROMPT, temperature=0.9, top_k=40, top_p=0.95, seed=s,
                              max_tokens=16) for s in (11, 11, 12)]
        full = c.generate(PROMPT, temperature=0.8, seed=3, max_tokens=4)  # full logits
        # A stop string: the greedy text up to its second word, cut before it.
        words = greedy.text.split(" ")
        stop_at = " " + words[2]
        stopped = c.generate(PROMPT, temperature=0, max_tokens=MAX_TOKENS, stop=[stop_at])
        try:
            c.generate(PROMPT, top_p=0)
            bad = None
        except InvalidArgument as e:
            bad = e
    return {"greedy": greedy, "pieces": pieces, "stream": stream.result, "sampled": sampled,
            "full": full, "stop_at": stop_at, "stopped": stopped, "bad": bad}


def cpp_greedy(llm: Path, tok_addr: str, model_addr: str,
               prompt: str) -> tuple[list[int], str, list[float]]:
    r = subprocess.run([str(llm), "generate", "--json", "--raw", "--temperature", "0",
                        "--max-tokens", str(MAX_TOKENS), "--prompt", prompt,
                        "--tokenizer", tok_addr, "--model", model_addr],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f"python_client_test: llm generate failed ({r.returncode}): {r.stderr}")
    tokens, text, logprobs = [], "", []
    for line in r.stdout.splitlines():
        j = json.loads(line)
        if "stop_reason" in j:
            continue
        text += j["text"]
        if j["token"] is not None:
            tokens.append(j["token"])
            logprobs.append(j["logprob"])
    return tokens, text, logprobs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", type=Path, default=ROOT / "build")
    ap.add_argument("--model", type=Path, default=ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf")
    args = ap.parse_args()
    if not args.model.exists():
        sys.exit(f"python_client_test: {args.model} missing (run scripts/fetch-model.sh)")
    build = args.build_dir.resolve()
    bin_dir = build / "bin"
    if not (build / "python/llm_client/pb/model_pb2_grpc.py").exists():
        sys.exit(f"python_client_test: {build}/python/llm_client/pb missing "
                 "(build the llm_client_python target)")
    sys.path.insert(0, str(build / "python"))

    servers = []
    try:
        tok_proc, tok_addr = start_server(bin_dir / "tokenizer_server",
                                          ["--vocab", str(args.model)])
        servers.append(tok_proc)
        model_proc, model_addr = start_server(bin_dir / "model_server",
                                              ["--model", str(args.model),
                                               "--kv_cache_mb", "64"])
        servers.append(model_proc)
        py = python_runs(tok_addr, model_addr)
        cpp_tokens, cpp_text, cpp_logprobs = cpp_greedy(bin_dir / "llm", tok_addr, model_addr,
                                                        PROMPT)
    finally:
        for p in servers:
            p.terminate()
        for p in servers:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()

    g = py["greedy"]
    print(f"python: {g.tokens}\n        {g.text!r} ({g.stop_reason})")
    print(f"llm:    {cpp_tokens}\n        {cpp_text!r}")
    a, b, c = py["sampled"]
    checks = {
        "greedy tokens and text equal llm generate --json --temperature 0 --raw":
            bool(g.tokens) and g.tokens == cpp_tokens and g.text == cpp_text,
        "greedy logprobs equal llm's (1e-4)":
            len(g.logprobs) == len(cpp_logprobs)
            and all(abs(x - y) < 1e-4 for x, y in zip(g.logprobs, cpp_logprobs)),
        "the stream's pieces join to the same text and tokens":
            "".join(py["pieces"]) == g.text and py["stream"].tokens == g.tokens
            and len(py["pieces"]) > 1,
        "seeded top-k/top-p sampling repeats with the seed, differs with another":
            a.tokens == b.tokens and a.text == b.text and a.tokens != c.tokens
            and len(a.tokens) == 16 and a.stop_reason == "length",
        "sampling over full logits (no top_k) runs":
            len(py["full"].tokens) == 4 and py["full"].seed == 3,
        f"stop string {py['stop_at']!r} cuts the text before it":
            py["stopped"].stop_reason == "stop" and py["stop_at"] in g.text
            and py["stopped"].text == g.text[:g.text.index(py["stop_at"])],
        "a bad parameter raises InvalidArgument naming it":
            py["bad"] is not None and py["bad"].param == "top_p",
    }
    return report(checks)


if __name__ == "__main__":
    sys.exit(main())
