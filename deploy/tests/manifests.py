"""Shared helpers of the deployment tests: render the kustomize overlays and
read the rendered objects.

The tests run with Debian's python3 (scripts/setup.sh installs python3-yaml);
`kubectl kustomize` renders the overlays (a standalone `kustomize build` is
used when there is no kubectl). Without either, the tests exit with status 77,
which ctest reports as skipped (SKIP_RETURN_CODE in deploy/CMakeLists.txt).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = ("cpu", "gpu")
# Every overlay: the ones above, whose invariants and flags the other tests
# check, and cpu-tls (the cpu overlay with mutual TLS and exec probes), which
# must build and validate.
ALL_OVERLAYS = OVERLAYS + ("cpu-tls",)
# The overlay behind the Kubernetes inference gateway: its built-in objects
# validate as the others do and its containers' flags are checked (steps
# 1-3 of server_flags_test); its own checks, and its Gateway API and
# InferencePool objects against their CRDs, are inference_gateway_test's.
INFERENCE_GATEWAY = "inference-gateway"
# Its kinds that Kubernetes' own schemas lack (validated against the CRDs).
CRD_KINDS = ("Gateway", "HTTPRoute", "InferencePool")
SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests
VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def fail(test: str, message: str) -> None:
    print(f"{test}: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def renderer(test: str) -> list[str]:
    """The command that renders a kustomization directory (given last), or a
    skip when neither kubectl nor kustomize is installed."""
    kubectl = os.environ.get("KUBECTL") or shutil.which("kubectl")
    if kubectl:
        return [kubectl, "kustomize"]
    kustomize = shutil.which("kustomize")
    if kustomize:
        return [kustomize, "build"]
    print(f"{test}: SKIPPED: kubectl is not installed (nor kustomize), so the manifests in "
          f"deploy/k8s cannot be rendered; install kubectl >= 1.27 to run this test")
    sys.exit(SKIP)


def render(test: str, overlay: str) -> str:
    """The YAML that `kubectl kustomize deploy/k8s/overlays/OVERLAY` prints."""
    cmd = renderer(test) + [str(K8S / "overlays" / overlay)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(test, f"`{' '.join(cmd)}` exited {r.returncode}:\n{r.stderr.strip()}")
    if not r.stdout.strip():
        fail(test, f"`{' '.join(cmd)}` printed nothing")
    return r.stdout


def load(test: str, text: str) -> list[dict]:
    try:
        import yaml
    except ImportError:
        fail(test, f"{sys.executable} has no PyYAML: install python3-yaml (scripts/setup.sh)")
    return [d for d in yaml.safe_load_all(text) if d]


def objects(test: str, overlay: str) -> list[dict]:
    return load(test, render(test, overlay))


def find(objs: list[dict], kind: str, name: str | None = None) -> list[dict]:
    return [o for o in objs
            if o.get("kind") == kind and (name is None or o["metadata"]["name"] == name)]


def workloads(objs: list[dict]) -> list[dict]:
    """Every object that runs pods (their pod template is spec.template)."""
    kinds = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}
    return [o for o in objs if o.get("kind") in kinds]


def quantity(value) -> float:
    """A Kubernetes quantity as a number (cores for cpu, bytes for memory)."""
    s = str(value)
    suffixes = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
                "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    for suffix in sorted(suffixes, key=len, reverse=True):
        if s.endswith(suffix):
            return float(s[: -len(suffix)]) * suffixes[suffix]
    return float(s)


def expand(text: str, env: dict[str, str], where: str, errors: list[str]) -> str:
    """Kubernetes' $(VAR) expansion: $$ is a literal $, an undefined $(VAR) is
    left as it is (reported here as an error)."""
    def sub(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        if name not in env:
            errors.append(f"{where}: $({name}) is not defined in the container's env or envFrom")
            return match.group(0)
        return env[name]
    return VAR_REF.sub(sub, text)


def sample_pod_name(workload: dict) -> str:
    name = workload["metadata"]["name"]
    if workload["kind"] == "StatefulSet":
        return f"{name}-0"
    return f"{name}-6d5f7c9b8d-x2x4k"


def resource_value(container: dict, ref: dict, where: str, errors: list[str]) -> str:
    section, _, resource = ref["resource"].partition(".")
    value = container.get("resources", {}).get(section, {}).get(resource)
    if value is None and section == "requests":
        value = container.get("resources", {}).get("limits", {}).get(resource)
    if value is None:
        errors.append(f"{where}: resourceFieldRef {ref['resource']} has no value "
                      "(the node's allocatable would be used)")
        return "1"
    divisor = quantity(ref.get("divisor", "1"))
    return str(math.ceil(quantity(value) / divisor - 1e-9))


def config_map(objs: list[dict], name: str, where: str, errors: list[str]) -> dict[str, str]:
    found = find(objs, "ConfigMap", name)
    if not found:
        errors.append(f"{where}: ConfigMap {name} is not in the rendered output")
        return {}
    return {k: str(v) for k, v in (found[0].get("data") or {}).items()}


def container_env(objs: list[dict], workload: dict, container: dict, where: str,
                  errors: list[str]) -> dict[str, str]:
    """The container's environment as the kubelet builds it (envFrom, then env;
    fieldRefs get a sample pod's values)."""
    env: dict[str, str] = {}
    containers = {c["name"]: c for c in workload["spec"]["template"]["spec"]["containers"]}
    for source in container.get("envFrom", []):
        prefix = source.get("prefix", "")
        if "configMapRef" in source:
            data = config_map(objs, source["configMapRef"]["name"], where, errors)
            env.update({prefix + k: v for k, v in data.items()})
        else:
            errors.append(f"{where}: envFrom {source} cannot be resolved by this test")
    for e in container.get("env", []):
        name = e["name"]
        if "value" in e:
            env[name] = expand(str(e["value"]), env, f"{where} env {name}", errors)
            continue
        ref = e.get("valueFrom", {})
        if "fieldRef" in ref:
            path = ref["fieldRef"]["fieldPath"]
            env[name] = {"metadata.name": sample_pod_name(workload),
                         "metadata.namespace": workload["metadata"].get("namespace", "default"),
                         "status.podIP": "10.0.0.1", "spec.nodeName": "node-1"}.get(path, "x")
        elif "resourceFieldRef" in ref:
            r = ref["resourceFieldRef"]
            target = containers.get(r.get("containerName", container["name"]), container)
            env[name] = resource_value(target, r, f"{where} env {name}", errors)
        elif "configMapKeyRef" in ref:
            r = ref["configMapKeyRef"]
            data = config_map(objs, r["name"], where, errors)
            if r["key"] not in data:
                errors.append(f"{where} env {name}: ConfigMap {r['name']} has no key {r['key']}")
            env[name] = data.get(r["key"], "")
        else:
            errors.append(f"{where} env {name}: valueFrom {ref} cannot be resolved by this test")
    return env


def resolved_argv(objs: list[dict], workload: dict, container: dict, where: str,
                  errors: list[str]) -> list[str]:
    """command + args with every $(VAR) expanded as the kubelet expands it."""
    env = container_env(objs, workload, container, where, errors)
    return [expand(str(a), env, where, errors)
            for a in (container.get("command") or []) + container.get("args", [])]


def flag_value(args: list[str], name: str) -> str | None:
    """The value of --name (or --na-me) in args: --name=value or --name value."""
    for i, a in enumerate(args):
        key, eq, value = a.lstrip("-").partition("=")
        if a.startswith("-") and key.replace("-", "_") == name:
            return value if eq else (args[i + 1] if i + 1 < len(args) else "")
    return None
