#!/usr/bin/env python3
"""The rendered overlays validate against the Kubernetes OpenAPI schemas,
offline and strictly (unknown fields are errors).

The validator is PyPI's kubernetes-validate, which ships the JSON schemas of
every Kubernetes release it knows; it is installed into a virtual environment
under the build directory the first time (pip must reach PyPI then; later runs
reuse it). If it cannot be installed, the test fails and says so: it never
passes without validating. Deliberately broken objects (an unknown field, a
wrong type) are validated too, to prove that the validator rejects them.

    python3 deploy/tests/validate_schemas_test.py --build-dir build [--kubernetes-version 1.32.0]

The inference-gateway overlay's Gateway, HTTPRoute and InferencePool have
no Kubernetes schema (the validator warns and skips them): inference_gateway_test
validates them against their CRDs; any other kind without a schema fails.

Exit status 0: pass; 1: fail; 77: skipped (no kubectl).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import venv
from pathlib import Path

import manifests as m

TEST = "validate_schemas_test"
PACKAGE = "kubernetes-validate==1.37.0"  # schemas of Kubernetes 1.25 ... 1.37

# Objects the validator must reject: an unknown field (strictness) and a
# wrong type.
_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: broken
spec:
  selector:
    matchLabels: {{app: broken}}
  template:
    metadata:
      labels: {{app: broken}}
    spec:
      containers:
        - name: c
          image: x
          livenessProbe:
            grpc:
              port: {port}
{extra}"""
BROKEN = {
    "unknown-field": _DEPLOYMENT.format(port=50051, extra="          notAField: true\n"),
    "wrong-type": _DEPLOYMENT.format(port='"not-a-number"', extra=""),
}


def validator(build_dir: Path) -> Path:
    """kubernetes-validate from the venv build/deploy-venv, installed if needed."""
    env_dir = build_dir / "deploy-venv"
    exe = env_dir / "bin" / "kubernetes-validate"
    py = env_dir / "bin" / "python"
    if exe.exists():
        r = subprocess.run([str(py), "-m", "pip", "show", "--quiet", PACKAGE.split("==")[0]],
                           capture_output=True, text=True)
        version = PACKAGE.split("==")[1]
        shown = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
        if r.returncode == 0 and version in shown.stdout + shown.stderr:
            return exe
    print(f"{TEST}: installing {PACKAGE} into {env_dir} (from PyPI)")
    try:
        venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    except Exception as e:  # noqa: BLE001 - any failure is reported as such
        m.fail(TEST, f"cannot create a virtual environment at {env_dir} ({e}); "
                     "install python3-venv (scripts/setup.sh)")
    r = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        PACKAGE], capture_output=True, text=True)
    if r.returncode != 0 or not exe.exists():
        m.fail(TEST, f"could not install {PACKAGE} from PyPI, so the manifests were NOT "
                     f"validated (pip exited {r.returncode}):\n{(r.stdout + r.stderr).strip()}")
    return exe


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", type=Path, default=m.ROOT / "build")
    ap.add_argument("--kubernetes-version", default="1.32.0")
    args = ap.parse_args()
    m.renderer(TEST)  # skips before installing anything when kubectl is missing

    out_dir = args.build_dir / "deploy"
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    overlays = m.ALL_OVERLAYS + (m.INFERENCE_GATEWAY,)
    for overlay in overlays:
        path = out_dir / f"{overlay}.yaml"
        path.write_text(m.render(TEST, overlay))
        files.append(path)
    broken = {}
    for name, text in BROKEN.items():
        broken[name] = out_dir / f"broken-{name}.yaml"
        broken[name].write_text(text)

    exe = validator(args.build_dir)
    base = [str(exe), "--kubernetes-version", args.kubernetes_version, "--strict"]

    for name, path in broken.items():
        r = subprocess.run(base + ["--quiet", str(path)], capture_output=True, text=True)
        if r.returncode == 0:
            m.fail(TEST, f"the validator accepted a broken Deployment ({name}: {path}); "
                         "it cannot be trusted")

    r = subprocess.run(base + [str(f) for f in files], capture_output=True, text=True)
    output = (r.stdout + r.stderr).strip()
    print(output)
    if r.returncode != 0:
        m.fail(TEST, f"the manifests do not validate against Kubernetes {args.kubernetes_version}")
    # Kinds without a Kubernetes schema are only warned about: only the CRD
    # kinds that inference_gateway_test validates may be among them.
    unknown = re.findall(r"Couldn't find schema for kind (\S+)", output)
    if set(unknown) - set(m.CRD_KINDS):
        m.fail(TEST, f"no schema was found for {sorted(set(unknown) - set(m.CRD_KINDS))}, "
                     "so they were NOT validated")
    passed = output.count(" passed ")
    if passed == 0:
        m.fail(TEST, "the validator reported no object as passed")
    print(f"{TEST}: PASS: {passed} objects of {', '.join(overlays)} valid against "
          f"Kubernetes {args.kubernetes_version} (strict)")


if __name__ == "__main__":
    main()
