#!/usr/bin/env bash
# Prints the Debian/Ubuntu packages that hold the shared libraries the given
# binaries load (ldd, then dpkg -S), one per line, sorted. The Dockerfiles run
# it in their build stage and install exactly these packages in the runtime
# stage, so the images follow the binaries' libraries without a list to keep
# up to date. Fails when a library is missing or belongs to no package.
#
#   deploy/docker/runtime-packages.sh build/bin/tokenizer_server \
#       build/bin/model_server build/bin/llm
#
# On Debian 12 today: libabsl20220623 libc-ares2 libc6 libgcc-s1 libgrpc++1.51
# libgrpc29 libpcre2-8-0 libprotobuf32 libre2-9 libssl3 libstdc++6 libzstd1 zlib1g
# (on Ubuntu 24.04 the same with the t64 suffix where it applies).
#
# RUNTIME_PACKAGES_IGNORE, an extended regex, names libraries to leave out
# even when ldd cannot find them: those the runtime provides, e.g. the NVIDIA
# driver's libcuda.so.1, which the container toolkit mounts into GPU pods.
set -euo pipefail
export RUNTIME_PACKAGES_IGNORE=${RUNTIME_PACKAGES_IGNORE:-}

if (($# == 0)); then
  echo "usage: $0 BINARY..." >&2
  exit 2
fi

status=0
libs=$(ldd "$@" | awk '
  ENVIRON["RUNTIME_PACKAGES_IGNORE"] != "" && $1 ~ ENVIRON["RUNTIME_PACKAGES_IGNORE"] { next }
  /not found/ { print "MISSING " $1; next }
  $2 == "=>" && $3 ~ /^\// { print $3 }
' | sort -u)
if grep -q '^MISSING ' <<<"$libs"; then
  sed -n 's/^MISSING /runtime-packages: library not found: /p' <<<"$libs" >&2
  exit 1
fi

# dpkg knows a file by the path its package installed; with merged /usr that
# may be the /lib or the /usr/lib spelling, of the link or of its target. Ask
# for all of them at once (one dpkg run), then take the first one known.
paths=()
for lib in $libs; do
  real=$(readlink -f "$lib")
  paths+=("$lib" "$real" "/usr$lib" "${real#/usr}")
done
declare -A owner_of
while IFS= read -r line; do
  [[ $line == diversion* ]] && continue
  owner=${line%%: /*}      # "libfoo1:amd64" (or "libfoo1:amd64, libfoo1:i386")
  owner=${owner%%,*}
  owner_of[${line#*: }]=${owner%%:*}
done < <(dpkg -S "${paths[@]}" 2>/dev/null || true)

packages=()
for lib in $libs; do
  real=$(readlink -f "$lib")
  owner=""
  for path in "$lib" "$real" "/usr$lib" "${real#/usr}"; do
    owner=${owner_of[$path]:-}
    [[ -n $owner ]] && break
  done
  if [[ -z $owner ]]; then
    echo "runtime-packages: no package holds $lib" >&2
    status=1
    continue
  fi
  packages+=("$owner")
done
printf '%s\n' "${packages[@]}" | sort -u
exit $status
