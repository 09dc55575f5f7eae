"""The venv build/bench-venv that the benchmark drivers run in when the Python
packages they compare with are not importable where they were started.

    from bench_venv import ensure_packages
    ensure_packages("import tiktoken", [["tiktoken"]], "LLM_TOKENIZER_BENCH_IN_VENV", die)

returns when `check` (Python code) runs; otherwise creates the venv if needed, runs
`pip install -q` with each argument list of `installs` in it (unless `check` already
runs there) and re-runs the calling script in it, with `env_flag` set so that a
second failure is reported instead of looping.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

VENV = Path(__file__).resolve().parent.parent / "build" / "bench-venv"


def _runs(python: str, check: str) -> bool:
    return subprocess.run([python, "-c", check], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def ensure_packages(check: str, installs: list[list[str]], env_flag: str,
                    die: Callable[[str], None]) -> None:
    if _runs(sys.executable, check):
        return
    if os.environ.get(env_flag) == "1":
        die(f"the packages are still not importable in {sys.executable}")
    py = VENV / "bin" / "python"
    if not (py.exists() and _runs(str(py), check)):
        if not py.exists():
            print(f"creating venv {VENV}", file=sys.stderr, flush=True)
            if subprocess.run([sys.executable, "-m", "venv", str(VENV)]).returncode != 0:
                die("python3 -m venv failed (Debian: apt-get install python3-venv, "
                    "or run scripts/setup.sh)")
        for args in installs:
            print(f"installing {' '.join(args)} into the venv", file=sys.stderr, flush=True)
            if subprocess.run([str(py), "-m", "pip", "install", "-q", *args]).returncode != 0:
                die(f"pip install {' '.join(args)} failed")
    env = dict(os.environ, **{env_flag: "1"})
    script = str(Path(sys.argv[0]).resolve())
    os.execve(str(py), [str(py), script, *sys.argv[1:]], env)
