#!/usr/bin/env python3
"""`pip install ./clients/python` into a fresh venv works, and the package imports.

Copies clients/python and proto/ (the layout setup.py reads) into a temporary
directory, so that the checkout gets no build files, makes the venv
BUILD_DIR/pip-install-venv (--clear), pip-installs the copy into it (from PyPI:
setuptools and grpcio-tools to build, grpcio and protobuf to run; pip's cache
makes later runs quick), and checks in that venv: llm_client and its stubs
import, the stubs are those of the current protos (ModelInfo.file_name), a
message round-trips, and the package requires grpcio and protobuf; it has no
grammar engine library, so structured output raises Unsupported saying how to
give one, and with LLM_CONSTRAIN_LIBRARY pointing at the build's
(BUILD_DIR/bin/libllm_constrain.so, where it was built) it compiles and matches
a constraint. Without PyPI it fails, saying so.

    python3 clients/python/tests/pip_install_test.py [--build-dir build]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CHECK = r"""
import importlib.metadata
import llm_client
from llm_client import Client, LlmError
from llm_client.pb import model_pb2, model_pb2_grpc, tokenizer_pb2, tokenizer_pb2_grpc
info = model_pb2.ModelInfo(file_name="SmolLM2-135M-Instruct.Q4_1.gguf", vocab_size=49152)
back = model_pb2.ModelInfo.FromString(info.SerializeToString())
assert back.file_name == info.file_name and back.vocab_size == 49152, back
assert hasattr(model_pb2_grpc, "ModelStub") and hasattr(tokenizer_pb2_grpc, "TokenizerStub")
requires = " ".join(importlib.metadata.requires("llm-inference-client") or [])
assert "grpcio" in requires and "protobuf" in requires, requires
print("imported llm_client from", llm_client.__file__, "requires:", requires)
"""

# Structured output: the installed package has no library of its own.
CONSTRAIN_CHECK = r"""
import os
from llm_client import Unsupported
from llm_client.constrain import Compiler, ConstraintSpec
try:
    compiler = Compiler([b"", b"a", b"b"], end_ids=[0])
    assert os.environ.get("LLM_CONSTRAIN_LIBRARY"), "a library without LLM_CONSTRAIN_LIBRARY"
    m = compiler.compile(ConstraintSpec("regex", text="ab")).matcher()
    assert m.forced_tokens() == [1, 2], m.forced_tokens()
    print("structured output with LLM_CONSTRAIN_LIBRARY:", os.environ["LLM_CONSTRAIN_LIBRARY"])
except Unsupported as e:
    assert not os.environ.get("LLM_CONSTRAIN_LIBRARY"), e
    assert "LLM_CONSTRAIN_LIBRARY" in str(e), e
    print("without a library: Unsupported, naming LLM_CONSTRAIN_LIBRARY")
"""


def run(cmd: list[str], what: str) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-20:])
        sys.exit(f"pip_install_test: FAILED: {what}:\n{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=str(ROOT / "build"))
    args = parser.parse_args()
    venv = Path(args.build_dir).resolve() / "pip-install-venv"
    python = venv / "bin/python"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp)
        ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
        shutil.copytree(ROOT / "clients/python", src / "clients/python", ignore=ignore)
        shutil.copytree(ROOT / "proto", src / "proto")
        run([sys.executable, "-m", "venv", "--clear", str(venv)], f"python3 -m venv {venv}")
        run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--no-input", "--timeout", "30", str(src / "clients/python")],
            "pip install ./clients/python (needs PyPI for grpcio, protobuf and, to build, "
            "setuptools and grpcio-tools)")
    env = {k: v for k, v in os.environ.items() if k != "LLM_CONSTRAIN_LIBRARY"}
    library = Path(args.build_dir).resolve() / "bin/libllm_constrain.so"
    runs = [(CHECK, env), (CONSTRAIN_CHECK, env)]
    if library.exists():
        runs.append((CONSTRAIN_CHECK, dict(env, LLM_CONSTRAIN_LIBRARY=str(library))))
    for code, run_env in runs:
        r = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                           cwd=tempfile.gettempdir(), env=run_env)
        print(r.stdout + r.stderr, end="")
        if r.returncode != 0:
            sys.exit("pip_install_test: FAILED: the installed package does not work\n"
                     f"0 passed, {len(runs)} failed")
    print(f"{len(runs)} passed, 0 failed")


if __name__ == "__main__":
    main()
