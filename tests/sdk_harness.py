"""What the client-SDK tests (openai_sdk_test.py, anthropic_sdk_test.py) share.

A test is a script whose cases are @case functions run in order against one set
of servers (llm_servers.GatewayServices). Its SDK, with every version pinned in a
requirements file, is installed from PyPI into BUILD_DIR/<venv> on the first run
and reused after (remade when the requirements change); the script then runs
itself again with that venv's python (main() below). Without PyPI it fails,
saying so.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ensure_venv(venv: Path, requirements: Path, name: str) -> Path:
    """`venv` with `requirements` installed (made once, under a lock). Returns
    its python. `name` is the test's, for messages."""
    python = venv / "bin/python"
    stamp = venv / "requirements.sha256"
    want = hashlib.sha256(requirements.read_bytes()).hexdigest()
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists() and stamp.exists() and stamp.read_text().strip() == want:
            return python
        print(f"{name}: making {venv} (pip install -r {requirements.name}, from PyPI)",
              flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        r = subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                            "--disable-pip-version-check", "--no-input", "--timeout", "30",
                            "-r", str(requirements)], capture_output=True, text=True)
        if r.returncode != 0:
            tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
            sys.exit(f"{name}: FAILED to install {requirements.name} from PyPI into {venv}: "
                     f"this test needs PyPI once (like scripts/fetch-model.sh), then reuses the "
                     f"venv. pip said:\n{tail}\n0 passed, 1 failed")
        stamp.write_text(want + "\n")
        return python


class Skip(Exception):
    """Raised by a case that cannot run yet; its message says why."""


class Cases(list):
    """The cases of a test, in order; use the object as a decorator."""

    def __call__(self, fn):
        self.append(fn)
        return fn


def check(cond, message: str) -> None:
    if not cond:
        raise AssertionError(message)


def raises(exc_type, fn, **attrs):
    """Calls fn, which must raise exc_type with the given attributes."""
    try:
        fn()
    except exc_type as e:
        for k, v in attrs.items():
            check(getattr(e, k) == v, f"{exc_type.__name__}.{k} is {getattr(e, k)!r}, "
                                      f"not {v!r} ({e})")
        return e
    except Exception as e:  # noqa: BLE001 - report what came instead
        raise AssertionError(f"expected {exc_type.__name__}, got {type(e).__name__}: {e}")
    raise AssertionError(f"expected {exc_type.__name__}, nothing raised")


def run_cases(cases: list, context, services, name_filter: str = "") -> int:
    """Runs the cases on `context`; prints each and the totals; the number failed."""
    cases = [c for c in cases if not name_filter or name_filter in c.__name__]
    failed = skipped = 0
    for c in cases:
        start = time.monotonic()
        try:
            c(context)
            print(f"ok   {c.__name__} ({time.monotonic() - start:.1f} s)", flush=True)
        except Skip as e:
            skipped += 1
            print(f"skip {c.__name__}: {e}", flush=True)
        except Exception:  # noqa: BLE001
            failed += 1
            print(f"FAIL {c.__name__}\n{traceback.format_exc()}", flush=True)
    if failed:
        print(services.logs())
    print(f"{len(cases) - failed - skipped} passed, {failed} failed, {skipped} skipped")
    return failed


def main(script: str, doc: str, requirements: Path, venv_name: str, run) -> int:
    """The command line of an SDK test: --build-dir, --model, -k; re-runs
    `script` in its venv, where run(args) runs the cases."""
    name = Path(script).stem
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--build-dir", type=Path, default=ROOT / "build")
    ap.add_argument("--model", type=Path, default=ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("-k", default="", help="run only the cases whose name contains this")
    ap.add_argument("--in-venv", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.build_dir = args.build_dir.resolve()
    if not args.model.exists():
        sys.exit(f"{name}: {args.model} missing (run scripts/fetch-model.sh)")
    if args.in_venv:
        return run(args)
    python = ensure_venv(args.build_dir / venv_name, requirements, name)
    os.execv(str(python), [str(python), script, "--in-venv", *sys.argv[1:]])
