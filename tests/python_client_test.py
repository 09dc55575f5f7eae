#!/usr/bin/env python3
"""A Python gRPC client of both services, against the C++ client.

Generates Python stubs from proto/llm/v1/*.proto into a temporary directory
(Debian's python3-grpc-tools; its bundled protoc predates proto3 `optional`,
so when it refuses tokenizer.proto the system protoc with grpc_python_plugin,
from protobuf-compiler-grpc, is used instead), starts build/bin/
tokenizer_server and build/bin/model_server on free loopback ports, runs a
greedy generation in Python (Encode -> Prefill -> DecodeStream, argmax of
top-1 logits, stop at EOS) and compares its tokens and text with
`build/bin/llm generate --json --temperature 0 --raw`.

    python3 tests/python_client_test.py [--build-dir build] [--model PATH]

Run by ctest (tests/CMakeLists.txt) with Debian's /usr/bin/python3, which has
python3-grpcio. Exit status 0 when the two agree.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "The three primary colors are"
MAX_TOKENS = 24


def generate_stubs(out: Path) -> None:
    protos = ["llm/v1/tokenizer.proto", "llm/v1/model.proto"]
    cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}",
           f"--python_out={out}", f"--grpc_python_out={out}", *protos]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT / "proto")
    if r.returncode == 0:
        return
    protoc, plugin = shutil.which("protoc"), shutil.which("grpc_python_plugin")
    if not protoc or not plugin:
        sys.exit(f"python_client_test: grpc_tools.protoc failed ({r.stderr.strip()}) and "
                 "protoc / grpc_python_plugin are missing")
    cmd = [protoc, f"-I{ROOT / 'proto'}", f"--python_out={out}", f"--grpc_out={out}",
           f"--plugin=protoc-gen-grpc={plugin}", *protos]
    subprocess.run(cmd, check=True, cwd=ROOT / "proto")


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


def wait_ready(call, what: str, timeout: float = 60.0):
    import grpc
    deadline = time.time() + timeout
    while True:
        try:
            return call()
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNAVAILABLE or time.time() > deadline:
                sys.exit(f"python_client_test: {what}: {e.code()} {e.details()}")
            time.sleep(0.1)


def python_greedy(tok_addr: str, model_addr: str, prompt: str) -> tuple[list[int], str]:
    import grpc
    from llm.v1 import model_pb2, model_pb2_grpc, tokenizer_pb2, tokenizer_pb2_grpc

    tok = tokenizer_pb2_grpc.TokenizerStub(grpc.insecure_channel(tok_addr))
    model = model_pb2_grpc.ModelStub(grpc.insecure_channel(model_addr))
    info = wait_ready(lambda: tok.Info(tokenizer_pb2.InfoRequest(), timeout=10), "tokenizer Info")
    wait_ready(lambda: model.Info(model_pb2.ModelInfoRequest(), timeout=10), "model Info")
    end_ids = set()
    if info.HasField("eos_id"):
        end_ids.add(info.eos_id)
    if info.HasField("eot_id"):
        end_ids.add(info.eot_id)

    ids = list(tok.Encode(tokenizer_pb2.EncodeRequest(
        text=prompt.encode(), options=tokenizer_pb2.EncodeOptions(add_bos=info.add_bos)),
        timeout=10).ids)
    top1 = model_pb2.LogitsOptions(encoding=model_pb2.LogitsOptions.LOGITS_TOP_N, top_n=1)
    prefill = model.Prefill(model_pb2.PrefillRequest(tokens=ids, logits=top1), timeout=60)
    session = prefill.session_id
    out: list[int] = []
    token = prefill.logits.top_ids[0]
    requests: queue.Queue = queue.Queue()

    def request_iter():
        while (t := requests.get()) is not None:
            yield model_pb2.DecodeTokenRequest(session_id=session, token=t, logits=top1)

    responses = model.DecodeStream(request_iter(), timeout=120)
    while token not in end_ids:
        out.append(token)
        if len(out) == MAX_TOKENS:
            break
        requests.put(token)
        token = next(responses).logits.top_ids[0]
    requests.put(None)
    for _ in responses:  # the server ends the call after our half-close
        pass
    model.Release(model_pb2.ReleaseRequest(session_id=session), timeout=10)
    text = tok.Decode(tokenizer_pb2.DecodeRequest(ids=out), timeout=10).text
    return out, text.decode("utf-8", errors="replace")


def cpp_greedy(llm: Path, tok_addr: str, model_addr: str, prompt: str) -> tuple[list[int], str]:
    r = subprocess.run([str(llm), "generate", "--json", "--raw", "--temperature", "0",
                        "--max-tokens", str(MAX_TOKENS), "--prompt", prompt,
                        "--tokenizer", tok_addr, "--model", model_addr],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f"python_client_test: llm generate failed ({r.returncode}): {r.stderr}")
    tokens, text = [], ""
    for line in r.stdout.splitlines():
        j = json.loads(line)
        if "stop_reason" in j:
            continue
        text += j["text"]
        if j["token"] is not None:
            tokens.append(j["token"])
    return tokens, text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", type=Path, default=ROOT / "build")
    ap.add_argument("--model", type=Path, default=ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf")
    args = ap.parse_args()
    if not args.model.exists():
        sys.exit(f"python_client_test: {args.model} missing (run scripts/fetch-model.sh)")
    bin_dir = args.build_dir.resolve() / "bin"

    with tempfile.TemporaryDirectory(prefix="llm_pystubs_") as stubs:
        generate_stubs(Path(stubs))
        sys.path.insert(0, stubs)
        servers = []
        try:
            tok_proc, tok_addr = start_server(bin_dir / "tokenizer_server",
                                              ["--vocab", str(args.model)])
            servers.append(tok_proc)
            model_proc, model_addr = start_server(bin_dir / "model_server",
                                                  ["--model", str(args.model),
                                                   "--kv_cache_mb", "64"])
            servers.append(model_proc)
            py_tokens, py_text = python_greedy(tok_addr, model_addr, PROMPT)
            cpp_tokens, cpp_text = cpp_greedy(bin_dir / "llm", tok_addr, model_addr, PROMPT)
        finally:
            for p in servers:
                p.terminate()
            for p in servers:
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()

    print(f"python: {py_tokens}\n        {py_text!r}")
    print(f"llm:    {cpp_tokens}\n        {cpp_text!r}")
    ok = bool(py_tokens) and py_tokens == cpp_tokens and py_text == cpp_text
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
