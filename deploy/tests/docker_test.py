#!/usr/bin/env python3
"""The Dockerfiles in deploy/docker stay in step with the build (no image is
built here: that takes minutes and a Docker daemon).

For each Dockerfile.*:
- the build stage installs every package of scripts/setup.sh that the
  servers' build needs (all but the test, benchmark, fuzzing and tooling
  ones listed in TEST_ONLY below), copies every source directory that the
  top-level CMakeLists.txt adds (all but tests/, bench/, deploy/), builds
  tokenizer_server, model_server and llm with LLM_BUILD_TESTS=OFF and
  LLM_BUILD_BENCH=OFF, and writes runtime-packages.txt with
  deploy/docker/runtime-packages.sh;
- the runtime stage installs runtime-packages.txt, copies the three
  binaries, runs as a non-root USER and has the model at the path the
  ConfigMaps name.
And deploy/docker/runtime-packages.sh, run on build/bin's binaries, finds the
package of every library they load (on Debian; skipped without dpkg).

    python3 deploy/tests/docker_test.py --build-dir build

Exit status 0: pass; 1: fail.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path

import manifests as m

TEST = "docker_test"
DOCKER = m.ROOT / "deploy" / "docker"
BINARIES = ("tokenizer_server", "model_server", "llm", "llm_gateway")
# Shared objects llm_gateway loads from beside itself (gateway/http_tls.h):
# built, passed to runtime-packages.sh and copied into the binaries' folder.
GATEWAY_SHIMS = {"llm_civetweb_ssl": "libllm_civetweb_ssl.so",
                 "llm_civetweb_crypto": "libllm_civetweb_crypto.so"}
# scripts/setup.sh packages that the images do not need to build the servers.
TEST_ONLY = {
    "ccache", "git", "ca-certificates", "openssl",
    "libgtest-dev", "libgmock-dev", "libbenchmark-dev", "clang-14", "libclang-rt-14-dev",
    "clang-format",
    "python3", "python3-venv", "python3-pip", "python3-grpcio", "python3-grpc-tools",
    "python3-yaml", "python3-jsonschema", "curl",
    "json-schema-test-suite",  # the schema compiler's conformance test
}
# Source directories the images do not build from (clients/python: the Python
# package, for users of the services, not part of the servers' images).
NOT_IN_IMAGE = {"tests", "bench", "deploy", "clients/python"}

errors: list[str] = []


def expect(ok: bool, message: str) -> bool:
    if not ok:
        errors.append(message)
    return ok


def setup_packages() -> set[str]:
    text = (m.ROOT / "scripts" / "setup.sh").read_text()
    match = re.search(r"^PACKAGES=\((.*?)^\)", text, re.S | re.M)
    if not match:
        m.fail(TEST, "scripts/setup.sh has no PACKAGES=( ... ) list")
    words = re.sub(r"#.*", "", match.group(1)).split()
    return set(words)


def source_dirs() -> set[str]:
    text = (m.ROOT / "CMakeLists.txt").read_text()
    dirs = set(re.findall(r"add_subdirectory\(\s*([A-Za-z0-9_./-]+)", text))
    return {d for d in dirs if d not in NOT_IN_IMAGE}


def stages(dockerfile: Path) -> dict[str, str]:
    """Stage name -> its text (instructions with continuations joined)."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    out: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        match = re.match(r"^\s*FROM\s+\S+(?:\s+AS\s+(\S+))?", line, re.I)
        if match:
            name = (match.group(1) or f"stage{len(out)}").lower()
            out[name] = ""
        if name:
            out[name] += line + "\n"
    return out


def apt_packages(stage: str) -> set[str]:
    pkgs: set[str] = set()
    for match in re.finditer(r"apt-get install ([^&\n]*)", stage):
        pkgs |= {w for w in match.group(1).split() if not w.startswith("-")}
    return pkgs


def check_dockerfile(path: Path, needed: set[str], dirs: set[str], model_paths: set[str]) -> None:
    name = path.name
    st = stages(path)
    build, runtime = st.get("build"), st.get("runtime")
    if not (expect(build is not None, f"{name}: no stage `AS build`") and
            expect(runtime is not None, f"{name}: no stage `AS runtime`")):
        return
    expect(list(st)[-1] == "runtime", f"{name}: the last stage is not `runtime`")
    missing = needed - apt_packages(build)
    expect(not missing, f"{name}: the build stage does not install {', '.join(sorted(missing))} "
                        "(scripts/setup.sh lists it; add it, or to TEST_ONLY in "
                        "deploy/tests/docker_test.py if the servers do not need it)")
    copied = set(re.findall(r"^\s*COPY\s+(\S+)\s", build, re.M))
    for d in sorted(dirs):
        expect(d in copied, f"{name}: the build stage does not COPY {d}/ (CMakeLists.txt adds it)")
    expect("CMakeLists.txt" in copied, f"{name}: the build stage does not COPY CMakeLists.txt")
    for flag in ("-DLLM_BUILD_TESTS=OFF", "-DLLM_BUILD_BENCH=OFF"):
        expect(flag in build, f"{name}: the build stage does not configure with {flag}")
    target = re.search(r"--target\s+([^&\n]*)", build)
    expect(target is not None and set(BINARIES) <= set(target.group(1).split()),
           f"{name}: the build stage does not build {', '.join(BINARIES)}")
    expect(target is not None and set(GATEWAY_SHIMS) <= set(target.group(1).split()),
           f"{name}: the build stage does not build {', '.join(GATEWAY_SHIMS)}")
    packages_call = re.search(r"runtime-packages\.sh\s+([^>]*)>", build)
    for so in GATEWAY_SHIMS.values():
        expect(packages_call is not None and f"/bin/{so}" in packages_call.group(1),
               f"{name}: runtime-packages.sh is not run on {so}")
    expect("runtime-packages.sh" in build and "runtime-packages.txt" in build,
           f"{name}: the build stage does not list the runtime packages")
    expect("runtime-packages.txt" in runtime and "apt-get install" in runtime,
           f"{name}: the runtime stage does not install runtime-packages.txt")
    for b in BINARIES:
        expect(re.search(rf"COPY --from=build .*/bin/{b}\b", runtime) is not None,
               f"{name}: the runtime stage does not copy {b}")
    # The shims in the same COPY (the same folder) as llm_gateway.
    gateway_copy = re.search(r"COPY --from=build (.*/bin/llm_gateway\b.*)", runtime)
    for so in GATEWAY_SHIMS.values():
        expect(gateway_copy is not None and f"/bin/{so}" in gateway_copy.group(1),
               f"{name}: the runtime stage does not copy {so} beside llm_gateway")
    user = re.findall(r"^\s*USER\s+(\S+)", runtime, re.M)
    expect(bool(user) and user[-1].split(":")[0] not in ("root", "0"),
           f"{name}: the runtime stage does not end as a non-root USER")
    copied_models = set(re.findall(r"COPY --from=model \S+/(\S+\.gguf) (/\S+)", runtime))
    in_image = {dest.rstrip("/") + "/" + f for f, dest in copied_models}
    for p in sorted(model_paths):
        expect(p in in_image, f"{name}: the ConfigMaps name {p}, which the image does not hold "
                              f"(it holds {', '.join(sorted(in_image)) or 'no model'})")


def model_paths_in_configmaps() -> set[str]:
    paths = set()
    for env in (m.ROOT / "deploy" / "k8s" / "base").glob("*.env"):
        for line in env.read_text().splitlines():
            key, _, value = line.partition("=")
            if value.startswith("/models/"):
                paths.add(value.strip())
    return paths


def check_runtime_packages(build_dir: Path) -> str:
    if not (shutil.which("dpkg") and shutil.which("ldd")):
        return "runtime-packages.sh: NOTE: not run (no dpkg/ldd here)"
    bins = [build_dir / "bin" / b for b in BINARIES]
    if not all(b.exists() for b in bins):
        m.fail(TEST, f"{build_dir}/bin lacks {', '.join(BINARIES)}: build them first")
    r = subprocess.run(["bash", str(DOCKER / "runtime-packages.sh"), *map(str, bins)],
                       capture_output=True, text=True)
    pkgs = r.stdout.split()
    if not expect(r.returncode == 0, f"runtime-packages.sh failed: {r.stderr.strip()}"):
        return "runtime-packages.sh: failed"
    grpc = [p for p in pkgs if p.startswith("libgrpc++")]
    expect(bool(grpc) and "libc6" in pkgs,
           f"runtime-packages.sh found implausible packages: {' '.join(pkgs)}")
    return f"runtime-packages.sh: {' '.join(pkgs)}"


def check_chroot_stand_in(path: Path) -> None:
    """deploy/docker/chroot_build.py, which runs the Dockerfiles' steps where
    Docker is absent, knows every instruction and has a stand-in for every
    base image of `path`."""
    import sys
    sys.path.insert(0, str(DOCKER))
    import chroot_build
    unknown = {k for k, _ in chroot_build.instructions(path)} - chroot_build.SUPPORTED
    expect(not unknown, f"{path.name}: chroot_build.py does not run {sorted(unknown)}")
    for image in chroot_build.base_images(path):
        try:
            chroot_build.stand_in(image)
        except SystemExit as e:
            expect(False, f"{path.name}: {e}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", type=Path, default=m.ROOT / "build")
    args = ap.parse_args()
    needed = setup_packages() - TEST_ONLY
    dirs = source_dirs()
    models = model_paths_in_configmaps()
    dockerfiles = sorted(DOCKER.glob("Dockerfile.*"))
    if not dockerfiles:
        m.fail(TEST, "deploy/docker has no Dockerfile.*")
    for d in dockerfiles:
        check_dockerfile(d, needed, dirs, models)
        check_chroot_stand_in(d)
    summary = check_runtime_packages(args.build_dir)
    if errors:
        m.fail(TEST, f"{len(errors)} problem(s):\n  " + "\n  ".join(errors))
    print(f"{TEST}: PASS: {', '.join(d.name for d in dockerfiles)} install "
          f"{', '.join(sorted(needed))}; copy {', '.join(sorted(dirs))}; hold "
          f"{', '.join(sorted(models))}\n  {summary}")


if __name__ == "__main__":
    main()
