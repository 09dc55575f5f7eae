"""Paths and server start-up shared by the Python benchmarks in bench/."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "build" / "bin"
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def start(name: str, flags: list[str], who: str = "bench") -> tuple[subprocess.Popen, str]:
    """Starts build/bin/`name` on a free loopback port; returns the process and
    its address, from the "... port N" line it prints once it listens (the
    model may still be loading then: the servers answer UNAVAILABLE until it
    is)."""
    proc = subprocess.Popen([str(BIN / name), "--listen", "127.0.0.1:0", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    m = re.search(r" port (\d+)", proc.stdout.readline())
    if not m:
        proc.kill()
        sys.exit(f"{who}: {name} did not start")
    return proc, f"127.0.0.1:{m.group(1)}"


def start_services(model: str, threads: int, who: str = "bench"
                   ) -> tuple[list[subprocess.Popen], str, str]:
    """A tokenizer server and a model server (no metrics listener) on `model`:
    the processes (to terminate) and the two addresses."""
    tok_proc, tokenizer = start("tokenizer_server", ["--vocab", model], who)
    model_proc, model_addr = start("model_server", ["--model", model, "--threads", str(threads),
                                                    "--metrics_listen", ""], who)
    return [tok_proc, model_proc], tokenizer, model_addr


def spread(values: list[float]) -> str:
    """min / median / max, one decimal each."""
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


def model_stubs():
    """(grpc, model_pb2, model_pb2_grpc) from build/python (the llm_client_python
    target). Re-runs the script under /usr/bin/python3 when this Python has no
    grpc module (Debian's python3-grpcio is that one's: scripts/setup.sh)."""
    sys.path.insert(0, str(ROOT / "build" / "python"))
    try:
        import grpc
    except ImportError:
        if sys.executable != "/usr/bin/python3" and Path("/usr/bin/python3").exists():
            os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])
        raise
    from llm_client.pb import model_pb2, model_pb2_grpc
    return grpc, model_pb2, model_pb2_grpc
