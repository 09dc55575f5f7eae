#!/usr/bin/env python3
"""Every flag that the deployment passes to a server exists in that server.

For each container of the rendered overlays (deploy/k8s/overlays/{cpu,gpu})
and the CMD of each Dockerfile in deploy/docker, the binary is the basename of
command[0] (tokenizer_server or model_server), and:

1. every `--flag` in its arguments (written with dashes or underscores, as
   `--flag=value` or `--flag value`, booleans also as `--noflag`) is one that
   `build/bin/BINARY --help` lists;
2. every `$(VAR)` in the arguments resolves, as the kubelet resolves it, from
   the container's env (value, fieldRef, resourceFieldRef, configMapKeyRef)
   and envFrom (the ConfigMaps in the rendered output);
3. the binary accepts the resolved arguments: `build/bin/BINARY ARGS --version`
   parses every flag and value exactly as at start-up (an unknown flag or a
   bad value exits non-zero) and exits 0 without opening any file;
4. the servers start with them: for each overlay, tokenizer_server and
   model_server are started with the resolved arguments (only --listen and
   --metrics_listen moved to 127.0.0.1:0, /models/NAME mapped to the
   repository's models/NAME, and --backend=cuda run as --backend=auto),
   `llm health` must see both SERVING, and on SIGTERM each must exit 0 within
   its --drain_seconds plus 10 s. (Skipped, with a note, when models/ has not
   been fetched: scripts/fetch-model.sh.)

    python3 deploy/tests/server_flags_test.py --build-dir build

Exit status 0: pass; 1: fail; 77: skipped (no kubectl).
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import manifests as m

TEST = "server_flags_test"
SERVERS = ("tokenizer_server", "model_server")
HELP_FLAG = re.compile(r"^\s+--([A-Za-z0-9_]+) \(", re.M)

errors: list[str] = []


def help_flags(binary: Path) -> set[str]:
    r = subprocess.run([str(binary), "--help"], capture_output=True, text=True)
    flags = set(HELP_FLAG.findall(r.stdout + r.stderr))
    if not flags:
        m.fail(TEST, f"`{binary} --help` lists no flags:\n{(r.stdout + r.stderr).strip()}")
    return flags


def flag_names(args: list[str]) -> list[str]:
    names = []
    for a in args:
        if a == "--":
            break
        if a.startswith("-") and a != "-":
            names.append(a.lstrip("-").split("=", 1)[0])
    return names


def check(binary_name: str, args: list[str], where: str, build_dir: Path,
          known: dict[str, set[str]]) -> int:
    """Checks one command line (args already expanded); returns its flag count."""
    if binary_name not in SERVERS:
        errors.append(f"{where}: runs {binary_name!r}, not one of {', '.join(SERVERS)} "
                      "(extend deploy/tests/server_flags_test.py)")
        return 0
    binary = build_dir / "bin" / binary_name
    if binary_name not in known:
        if not binary.exists():
            m.fail(TEST, f"{binary} is missing: build it first (cmake --build --preset default)")
        known[binary_name] = help_flags(binary)
    flags = known[binary_name]
    for raw in flag_names(args):
        name = raw.replace("-", "_")
        if name in flags or (name.startswith("no") and name[2:] in flags):
            continue
        errors.append(f"{where}: --{raw} is not a flag of {binary_name} "
                      f"(its flags: {', '.join(sorted(flags))})")
    r = subprocess.run([str(binary), *args, "--version"], capture_output=True, text=True)
    if r.returncode != 0:
        errors.append(f"{where}: {binary_name} rejects {' '.join(args)}:\n"
                      f"{(r.stdout + r.stderr).strip()}")
    return len(flag_names(args))


def dockerfile_cmds() -> list[tuple[str, list[str]]]:
    """(where, argv) of each exec-form CMD / ENTRYPOINT in deploy/docker/Dockerfile.*."""
    out = []
    for path in sorted((m.ROOT / "deploy" / "docker").glob("Dockerfile*")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            match = re.match(r"^\s*(CMD|ENTRYPOINT)\s+(\[.*\])\s*$", line)
            if match:
                out.append((f"{path.relative_to(m.ROOT)}:{n}", json.loads(match.group(2))))
    return out


def local_args(args: list[str]) -> list[str] | None:
    """The arguments with --listen and --metrics_listen on free loopback ports, /models/NAME
    mapped to the repository's models/NAME (None when that file is missing), and
    --backend=cuda as --backend=auto (CUDA where this machine has a GPU, else the CPU: the
    flag is still parsed, and the gpu overlay's servers still start here)."""
    out = []
    for a in args:
        key = a.lstrip("-").split("=", 1)[0].replace("-", "_")
        if a.startswith("-") and key in ("listen", "metrics_listen"):
            out.append(f"--{key}=127.0.0.1:0")
            continue
        if a.startswith("-") and key == "backend" and a.endswith("=cuda"):
            out.append("--backend=auto")
            continue
        match = re.search(r"/models/([^/\s]+)$", a)
        if match:
            local = m.ROOT / "models" / match.group(1)
            if not local.exists():
                return None
            a = a[: match.start()] + str(local)
        out.append(a)
    return out


def start_servers(overlay: str, lines: dict[str, list[str]], build_dir: Path) -> str:
    """Starts both servers of one overlay with their resolved arguments, waits
    until both are SERVING, stops them with SIGTERM; returns a summary."""
    where = f"overlays/{overlay}: start"
    local = {b: local_args(a) for b, a in lines.items()}
    if any(v is None for v in local.values()):
        return f"{where}: NOTE: not started, models/ lacks the model (scripts/fetch-model.sh)"
    procs: dict[str, subprocess.Popen] = {}
    addr: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for binary in SERVERS:
                with open(Path(tmp) / f"{binary}.log", "w") as log:
                    procs[binary] = subprocess.Popen(
                        [str(build_dir / "bin" / binary), *local[binary]],
                        stdout=subprocess.PIPE, stderr=log, text=True)
                line = procs[binary].stdout.readline()
                port = re.search(r"listening on port (\d+)", line)
                if not port:
                    errors.append(f"{where}: {binary} did not start: {line!r}\n"
                                  + (Path(tmp) / f"{binary}.log").read_text())
                    return f"{where}: failed"
                addr[binary] = f"127.0.0.1:{port.group(1)}"
            health = subprocess.run(
                [str(build_dir / "bin" / "llm"), "health", "--tokenizer", addr["tokenizer_server"],
                 "--model", addr["model_server"], "--wait", "120"],
                capture_output=True, text=True)
            if health.returncode != 0:
                output = (health.stdout + health.stderr).strip()
                errors.append(f"{where}: not both SERVING: {output}")
                return f"{where}: failed"
            took = {}
            for binary, proc in procs.items():
                drain = float(m.flag_value(lines[binary], "drain_seconds") or 5)
                t0 = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                try:
                    rc = proc.wait(timeout=drain + 10)
                except subprocess.TimeoutExpired:
                    errors.append(
                        f"{where}: {binary} still running {drain + 10:.0f} s after SIGTERM")
                    continue
                took[binary] = time.monotonic() - t0
                if rc != 0:
                    errors.append(f"{where}: {binary} exited {rc} on SIGTERM:\n"
                                  + (Path(tmp) / f"{binary}.log").read_text())
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    return (f"{where}: both SERVING, then exited on SIGTERM in "
            + ", ".join(f"{b} {t:.1f} s" for b, t in took.items()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", type=Path, default=m.ROOT / "build")
    args = ap.parse_args()
    known: dict[str, set[str]] = {}
    checked = []
    started: dict[str, dict[str, list[str]]] = {}
    for overlay in m.OVERLAYS:
        objs = m.objects(TEST, overlay)
        started[overlay] = {}
        for w in m.workloads(objs):
            spec = w["spec"]["template"]["spec"]
            for c in spec.get("initContainers", []) + spec["containers"]:
                where = f"overlays/{overlay}: {w['kind']}/{w['metadata']['name']} {c['name']}"
                command = c.get("command") or []
                if not command:
                    errors.append(f"{where}: no `command` (the test needs it to know the binary)")
                    continue
                argv = m.resolved_argv(objs, w, c, where, errors)
                n = check(Path(argv[0]).name, argv[1:], where, args.build_dir, known)
                checked.append(f"{where} ({n} flags)")
                started[overlay][Path(argv[0]).name] = argv[1:]
    for where, argv in dockerfile_cmds():
        n = check(Path(argv[0]).name, argv[1:], where, args.build_dir, known)
        checked.append(f"{where} ({n} flags)")
    if not checked:
        m.fail(TEST, "no container or Dockerfile CMD was found to check")
    if not errors:
        seen: dict[str, str] = {}
        for overlay, lines in started.items():
            if sorted(lines) != sorted(SERVERS):
                errors.append(f"overlays/{overlay}: expected one container of each of "
                              f"{', '.join(SERVERS)}, found {', '.join(sorted(lines)) or 'none'}")
                continue
            key = json.dumps(lines, sort_keys=True)
            if key in seen:
                checked.append(f"overlays/{overlay}: start: same command lines as {seen[key]}")
                continue
            seen[key] = f"overlays/{overlay}"
            checked.append(start_servers(overlay, lines, args.build_dir))
    if errors:
        m.fail(TEST, f"{len(errors)} problem(s):\n  " + "\n  ".join(errors))
    print(f"{TEST}: PASS:\n  " + "\n  ".join(checked))


if __name__ == "__main__":
    main()
