"""Starting the project's servers from a Python test: tokenizer_server,
model_server and llm_gateway on free loopback ports (stdlib only).

    with GatewayServices(build_dir, model_path, gateway_flags=["--max_concurrent", "1"]) as s:
        s.url        # "http://127.0.0.1:PORT" of the gateway
        s.gateway    # its Server (pid, port, log)

Each server runs with --listen 127.0.0.1:0; its "listening on port N" line
(stdout) gives the port, its stderr goes to a log file that log_tail() shows
when a test fails. Leaving the block stops all three (SIGTERM, then SIGKILL
after 15 s). report(checks) prints a test's named checks and gives its exit
status.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"


class ServerError(RuntimeError):
    pass


def report(checks: dict[str, bool]) -> int:
    """Prints each check ("ok  " or "FAIL" and its name), then "N passed, N
    failed"; returns the exit status (0 when all passed)."""
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    failed = sum(not ok for ok in checks.values())
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 0 if failed == 0 else 1


class Server:
    def __init__(self, bin_dir: Path, name: str, flags: list[str], log_dir: Path):
        self.name = name
        self.log = log_dir / f"{name}.log"
        self._log_file = open(self.log, "w")
        self.proc = subprocess.Popen([str(bin_dir / name), "--listen", "127.0.0.1:0", *flags],
                                     stdout=subprocess.PIPE, stderr=self._log_file, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on port (\d+)", line)
        if not m:
            self.stop()
            raise ServerError(f"{name}: no 'listening on port' line ({line!r}); its log:\n"
                              f"{self.log_tail()}")
        self.port = int(m.group(1))
        self.address = f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 15) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self._log_file.close()


def http_json(url: str, body: dict | None = None, timeout: float = 60,
              headers: dict | None = None) -> tuple[int, dict]:
    """(status, parsed JSON body) of a GET (body None) or a JSON POST."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


class GatewayServices:
    """tokenizer_server, model_server (--kv_cache_mb kv_cache_mb) and
    llm_gateway (gateway_flags added) over `model`; waits until the gateway's
    /health answers 200. `api_key`: the gateway requires it
    (--http_auth_token_file)."""

    def __init__(self, build_dir: Path, model: Path = DEFAULT_MODEL, *,
                 gateway_flags: list[str] = (), kv_cache_mb: int = 64,
                 model_flags: list[str] = (), api_key: str = ""):
        self.bin_dir = Path(build_dir).resolve() / "bin"
        self.model = Path(model)
        self.gateway_flags = list(gateway_flags)
        self.model_flags = ["--kv_cache_mb", str(kv_cache_mb), *model_flags]
        self.api_key = api_key
        self.servers: list[Server] = []

    def __enter__(self) -> "GatewayServices":
        if not self.model.exists():
            raise ServerError(f"{self.model} missing (run scripts/fetch-model.sh)")
        self._tmp = tempfile.TemporaryDirectory(prefix="llm_gateway_test_")
        log_dir = Path(self._tmp.name)
        gateway_flags = list(self.gateway_flags)
        if self.api_key:
            key_file = log_dir / "api.key"
            key_file.write_text(self.api_key + "\n")
            gateway_flags += ["--http_auth_token_file", str(key_file)]
        try:
            self.tokenizer = self._start(log_dir, "tokenizer_server", ["--vocab", str(self.model)])
            self.model_server = self._start(log_dir, "model_server",
                                            ["--model", str(self.model), *self.model_flags])
            self.gateway = self._start(log_dir, "llm_gateway",
                                       ["--tokenizer", self.tokenizer.address,
                                        "--model", self.model_server.address,
                                        *gateway_flags])
            self.url = f"http://127.0.0.1:{self.gateway.port}"
            deadline = time.monotonic() + 120
            while True:
                try:
                    status, _ = http_json(self.url + "/health", timeout=10)
                except OSError:
                    status = 0
                if status == 200:
                    break
                if time.monotonic() > deadline:
                    raise ServerError(f"the gateway's /health is {status} after 120 s:\n"
                                      + self.logs())
                time.sleep(0.1)
            auth = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            _, models = http_json(self.url + "/v1/models", headers=auth)
            self.model_id = models["data"][0]["id"]
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self, log_dir: Path, name: str, flags: list[str]) -> Server:
        s = Server(self.bin_dir, name, flags, log_dir)
        self.servers.append(s)
        return s

    def logs(self) -> str:
        return "\n".join(f"--- {s.name}:\n{s.log_tail()}" for s in self.servers)

    def __exit__(self, *exc) -> None:
        for s in reversed(self.servers):
            s.stop()
        self.servers = []
        self._tmp.cleanup()
