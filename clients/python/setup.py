"""Builds llm_client with its gRPC stubs (pyproject.toml holds the metadata).

The stubs (llm_client/pb: *_pb2.py, *_pb2.pyi, *_pb2_grpc.py) are generated
from ../../proto/llm/v1/*.proto by grpcio-tools, a build requirement, as the
CMake build generates them into build/python (clients/python/CMakeLists.txt):
each proto is copied to llm_client/pb/NAME.proto first, so that the stubs
import each other as llm_client.pb.* and the proto package stays llm.v1.

Stubs from grpcio-tools X check at import that grpcio >= X and that protobuf
is at least the version of the protoc X bundles: the package's dependencies
are those versions (and protobuf below the next major version).
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import shutil
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PROTO_DIR = HERE.parent.parent / "proto" / "llm" / "v1"


def protos() -> list[Path]:
    found = sorted(PROTO_DIR.glob("*.proto"))
    if not found:
        raise SystemExit(f"llm_client: no .proto files in {PROTO_DIR}: build it from the "
                         f"project's checkout (pip install ./clients/python)")
    return found


def dependencies() -> list[str]:
    tools = importlib.metadata.version("grpcio-tools")
    protobuf = importlib.metadata.version("protobuf")  # grpcio-tools' own, its protoc's version
    major = int(protobuf.split(".")[0])
    return [f"grpcio>={tools}", f"protobuf>={protobuf},<{major + 1}"]


class BuildPyWithStubs(build_py):
    """build_py, then the stubs into the build directory's llm_client/pb."""

    def run(self):
        super().run()
        from grpc_tools import protoc  # a build requirement (pyproject.toml)

        out = Path(self.build_lib)
        pb = out / "llm_client" / "pb"
        pb.mkdir(parents=True, exist_ok=True)
        (pb / "__init__.py").touch()
        well_known = importlib.resources.files("grpc_tools") / "_proto"
        with tempfile.TemporaryDirectory() as stage:
            staged = Path(stage) / "llm_client" / "pb"
            staged.mkdir(parents=True)
            names = []
            for proto in protos():
                shutil.copy(proto, staged / proto.name)
                names.append(f"llm_client/pb/{proto.name}")
            args = ["grpc_tools.protoc", f"-I{stage}", f"-I{well_known}", f"--python_out={out}",
                    f"--pyi_out={out}", f"--grpc_python_out={out}", *names]
            if protoc.main(args) != 0:
                raise SystemExit(f"llm_client: protoc failed on {', '.join(names)}")


setup(cmdclass={"build_py": BuildPyWithStubs}, install_requires=dependencies())
