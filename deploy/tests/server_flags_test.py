#!/usr/bin/env python3
"""Every flag that the deployment passes to a server exists in that server.

For each container of the rendered overlays (deploy/k8s/overlays/{cpu,gpu,
cpu-tls}) and the CMD of each Dockerfile in deploy/docker, the binary is the
basename of command[0] (tokenizer_server, model_server or llm_gateway), and:

1. every `--flag` in its arguments (written with dashes or underscores, as
   `--flag=value` or `--flag value`, booleans also as `--noflag`) is one that
   `build/bin/BINARY --help` lists;
2. every `$(VAR)` in the arguments resolves, as the kubelet resolves it, from
   the container's env (value, fieldRef, resourceFieldRef, configMapKeyRef)
   and envFrom (the ConfigMaps in the rendered output);
3. the binary accepts the resolved arguments: `build/bin/BINARY ARGS --version`
   parses every flag and value exactly as at start-up (an unknown flag or a
   bad value exits non-zero) and exits 0 without opening any file;
4. the servers start with them: for overlays cpu and gpu, tokenizer_server
   and model_server are started with the resolved arguments (only --listen
   and --metrics_listen moved to 127.0.0.1:0, /models/NAME mapped to the
   repository's models/NAME, and --backend=cuda run as --backend=auto),
   `llm health` must see both SERVING; then llm_gateway starts with its
   resolved arguments (--listen and --admin_listen on 127.0.0.1:0, and
   --tokenizer / --model, which name the cluster's Services, pointed at
   those two servers), every one of its httpGet probes and its Prometheus
   scrape path must answer 200 on the listener behind the container port
   they name (`http`: --listen, `admin`: --admin_listen; the scrape with the
   gateway's metrics), and on SIGTERM it must exit 0
   within its terminationGracePeriodSeconds; on SIGTERM each server must exit
   0 within its --drain_seconds plus 10 s. (Skipped, with a note, when
   models/ has not been fetched: scripts/fetch-model.sh.) cpu-tls is checked
   by 1-3 only (its TLS files exist in the cluster only), and so is
   inference-gateway (its containers of this project's image: the model
   server and its gateway sidecar).

    python3 deploy/tests/server_flags_test.py --build-dir build

Exit status 0: pass; 1: fail; 77: skipped (no kubectl).
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import manifests as m

TEST = "server_flags_test"
SERVERS = ("tokenizer_server", "model_server")
GATEWAY = "llm_gateway"
BINARIES = SERVERS + (GATEWAY,)
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
    if binary_name not in BINARIES:
        errors.append(f"{where}: runs {binary_name!r}, not one of {', '.join(BINARIES)} "
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


LISTEN_FLAGS = ("listen", "metrics_listen", "admin_listen")
# The container port behind each listening flag of the gateway, and the line
# on its stdout that gives the port it bound.
GATEWAY_PORTS = {"http": ("listen", re.compile(r"llm_gateway: listening on port (\d+)")),
                 "admin": ("admin_listen", re.compile(r"llm_gateway: admin on port (\d+)"))}


def local_args(args: list[str], services: dict[str, str] | None = None) -> list[str] | None:
    """The arguments with --listen, --metrics_listen and --admin_listen on free loopback
    ports, /models/NAME mapped to the repository's models/NAME (None when that file is
    missing), and
    --backend=cuda as --backend=auto (CUDA where this machine has a GPU, else the CPU: the
    flag is still parsed, and the gpu overlay's servers still start here). `services`
    (flag -> address) replaces the gateway's --tokenizer and --model, which name the
    cluster's Services."""
    out = []
    for a in args:
        key = a.lstrip("-").split("=", 1)[0].replace("-", "_")
        if a.startswith("-") and key in LISTEN_FLAGS:
            out.append(f"--{key}=127.0.0.1:0")
            continue
        if a.startswith("-") and services and key in services:
            out.append(f"--{key}={services[key]}")
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


def http_get(url: str) -> tuple[int, str]:
    """GET url (HTTPS unverified: the kubelet does not verify either)."""
    context = ssl._create_unverified_context() if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(url, timeout=10, context=context) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except OSError as e:
        return 0, str(e)


def check_gateway(overlay: str, gateway: dict, addr: dict[str, str], build_dir: Path,
                  tmp: str) -> str:
    """Starts the gateway of one overlay over the running servers, GETs its
    probes' and scrape paths, stops it with SIGTERM; returns a summary."""
    where = f"overlays/{overlay}: start {GATEWAY}"
    args = local_args(gateway["args"], {"tokenizer": addr["tokenizer_server"],
                                        "model": addr["model_server"]})
    log_path = Path(tmp) / f"{GATEWAY}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([str(build_dir / "bin" / GATEWAY), *args],
                                stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        # The ports it bound, by container port name: one stdout line each, in
        # GATEWAY_PORTS's order, for the listeners its flags ask for.
        ports: dict[str, str] = {}
        for name, (flag, pattern) in GATEWAY_PORTS.items():
            if m.flag_value(args, flag) is None:
                continue
            line = proc.stdout.readline()
            port = pattern.search(line)
            if not port:
                errors.append(f"{where}: did not start its {name} port (--{flag}): {line!r}\n"
                              + log_path.read_text())
                return f"{where}: failed"
            ports[name] = port.group(1)
        gets = []
        for probe, get, port_name in gateway["gets"]:
            if port_name not in ports:
                errors.append(f"{where}: {probe} is on container port {port_name!r}, which is "
                              f"none of the gateway's listeners ({', '.join(ports)})")
                continue
            scheme = get.get("scheme", "HTTP").lower()
            url = f"{scheme}://127.0.0.1:{ports[port_name]}{get.get('path', '/')}"
            status, body = http_get(url)
            gets.append(f"{probe} {port_name}:{get.get('path')} {status}")
            if status != 200:
                errors.append(f"{where}: {probe} GET {url} answered {status}: {body[:300]}")
            if probe == "scrape" and "llm_gateway_requests_total" not in body:
                errors.append(f"{where}: the scrape path {url} has no llm_gateway metrics")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=gateway["grace"])
        except subprocess.TimeoutExpired:
            errors.append(f"{where}: still running {gateway['grace']} s after SIGTERM "
                          "(terminationGracePeriodSeconds)")
            return f"{where}: failed"
        if rc != 0:
            errors.append(f"{where}: exited {rc} on SIGTERM:\n" + log_path.read_text())
        return (f"{where}: {', '.join(gets)}; exited on SIGTERM in "
                f"{time.monotonic() - t0:.1f} s")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def start_servers(overlay: str, lines: dict[str, list[str]], build_dir: Path,
                  gateway: dict | None) -> str:
    """Starts both servers of one overlay with their resolved arguments, waits
    until both are SERVING, checks the overlay's gateway over them, stops them
    with SIGTERM; returns a summary."""
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
            gateway_summary = ""
            if gateway is not None:
                gateway_summary = "\n  " + check_gateway(overlay, gateway, addr, build_dir, tmp)
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
            + ", ".join(f"{b} {t:.1f} s" for b, t in took.items()) + gateway_summary)


def gateway_checks(w: dict, c: dict, args: list[str]) -> dict:
    """What check_gateway needs of the gateway's workload: its arguments, its
    httpGet probes and scrape path (each with the name of the container port
    it reaches), and its grace period."""
    names = {str(p["containerPort"]): p.get("name") for p in c.get("ports", [])}
    gets = []
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = (c.get(probe) or {}).get("httpGet")
        if get is None:
            errors.append(f"{w['metadata']['name']}: {probe} is not an httpGet probe")
        else:
            port = str(get.get("port"))
            gets.append((probe, get, names.get(port, port)))
    notes = w["spec"]["template"]["metadata"].get("annotations", {})
    if notes.get("prometheus.io/scrape") == "true":
        port = str(notes.get("prometheus.io/port"))
        gets.append(("scrape", {"path": notes.get("prometheus.io/path", "/metrics"),
                                "scheme": notes.get("prometheus.io/scheme", "http").upper()},
                     names.get(port, port)))
    grace = w["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
    return {"args": args, "gets": gets, "grace": grace}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", type=Path, default=m.ROOT / "build")
    args = ap.parse_args()
    known: dict[str, set[str]] = {}
    checked = []
    started: dict[str, dict[str, list[str]]] = {}
    gateways: dict[str, dict] = {}
    for overlay in m.ALL_OVERLAYS + (m.INFERENCE_GATEWAY,):
        objs = m.objects(TEST, overlay)
        started[overlay] = {}
        for w in m.workloads(objs):
            spec = w["spec"]["template"]["spec"]
            for c in spec.get("initContainers", []) + spec["containers"]:
                if not c["image"].startswith("llm-inference:"):
                    continue  # not this project's (the inference gateway's EPP)
                where = f"overlays/{overlay}: {w['kind']}/{w['metadata']['name']} {c['name']}"
                command = c.get("command") or []
                if not command:
                    errors.append(f"{where}: no `command` (the test needs it to know the binary)")
                    continue
                argv = m.resolved_argv(objs, w, c, where, errors)
                n = check(Path(argv[0]).name, argv[1:], where, args.build_dir, known)
                checked.append(f"{where} ({n} flags)")
                if Path(argv[0]).name == GATEWAY:
                    gateways[overlay] = gateway_checks(w, c, argv[1:])
                else:
                    started[overlay][Path(argv[0]).name] = argv[1:]
    for where, argv in dockerfile_cmds():
        n = check(Path(argv[0]).name, argv[1:], where, args.build_dir, known)
        checked.append(f"{where} ({n} flags)")
    if not checked:
        m.fail(TEST, "no container or Dockerfile CMD was found to check")
    if not errors:
        seen: dict[str, str] = {}
        for overlay in m.OVERLAYS:
            lines = started[overlay]
            found = sorted(lines) + ([GATEWAY] if overlay in gateways else [])
            if found != sorted(SERVERS) + [GATEWAY]:
                errors.append(f"overlays/{overlay}: expected one container of each of "
                              f"{', '.join(BINARIES)}, found {', '.join(found) or 'none'}")
                continue
            key = json.dumps([lines, gateways[overlay]], sort_keys=True)
            if key in seen:
                checked.append(f"overlays/{overlay}: start: same command lines as {seen[key]}")
                continue
            seen[key] = f"overlays/{overlay}"
            checked.append(start_servers(overlay, lines, args.build_dir, gateways[overlay]))
    if errors:
        m.fail(TEST, f"{len(errors)} problem(s):\n  " + "\n  ".join(errors))
    print(f"{TEST}: PASS:\n  " + "\n  ".join(checked))


if __name__ == "__main__":
    main()
