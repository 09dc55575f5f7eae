#!/usr/bin/env python3
"""`kubectl kustomize deploy/k8s/overlays/OVERLAY` builds, and its output has
every object the deployment needs (parsed as YAML).

    python3 deploy/tests/kustomize_build_test.py cpu|gpu

Exit status 0: pass; 1: fail; 77: skipped (no kubectl).
"""

from __future__ import annotations

import sys

import manifests as m

EXPECTED = [
    ("Namespace", None),
    ("Deployment", "llm-tokenizer"),
    ("Service", "llm-tokenizer"),
    ("HorizontalPodAutoscaler", "llm-tokenizer"),
    ("PodDisruptionBudget", "llm-tokenizer"),
    ("NetworkPolicy", "llm-tokenizer"),
    ("StatefulSet", "llm-model"),
    ("Service", "llm-model"),
    ("PodDisruptionBudget", "llm-model"),
    ("NetworkPolicy", "llm-model"),
    ("Deployment", "llm-gateway"),
    ("Service", "llm-gateway"),
    ("HorizontalPodAutoscaler", "llm-gateway"),
    ("PodDisruptionBudget", "llm-gateway"),
    ("NetworkPolicy", "llm-gateway"),
]


def main() -> None:
    if len(sys.argv) != 2 or sys.argv[1] not in m.ALL_OVERLAYS:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(m.ALL_OVERLAYS)}")
    overlay = sys.argv[1]
    test = f"kustomize_build_test[{overlay}]"
    objs = m.objects(test, overlay)
    missing = [f"{kind}/{name or '*'}" for kind, name in EXPECTED if not m.find(objs, kind, name)]
    if missing:
        m.fail(test, f"the rendered overlay lacks {', '.join(missing)}")
    for o in objs:
        if not o.get("apiVersion") or not o.get("kind") or not o.get("metadata", {}).get("name"):
            m.fail(test, f"an object without apiVersion, kind or name: {o}")
    print(f"{test}: PASS: {len(objs)} objects: "
          + ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in objs))


if __name__ == "__main__":
    main()
