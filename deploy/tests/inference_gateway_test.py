#!/usr/bin/env python3
"""deploy/k8s/overlays/inference-gateway: its Gateway API and Inference
Extension objects validate against those projects' own CRDs, and its parts
fit together as docs/operations.md ("Behind the Kubernetes inference
gateway") says.

1. Every Gateway, HTTPRoute and InferencePool of the rendered overlay is of a
   served version of its CRD and validates against the CRD's
   openAPIV3Schema, strictly: an unknown field is an error (as the API
   server's strict field validation makes it), and an int-or-string field
   takes either. The CRDs are the copies in ../shared/k8s-crds
   ($LLM_SHARED_DIR/k8s-crds), beside the checkout; without them the test is
   skipped, saying so. Objects with an unknown field, a wrong type or a
   missing required field are validated too, to prove that they are
   rejected. (The CRDs' CEL rules, x-kubernetes-validations, are not
   evaluated. The built-in objects are validated by validate_schemas_test.)
2. The pieces fit: the InferencePool selects the model pods, and its target
   port is the gateway sidecar's API port (its --listen); the sidecar
   generates on its own pod's model server (--model=127.0.0.1:<its port>);
   the endpointPickerRef names the EPP's Service and a port that reaches the
   EPP's --grpc-port; the EPP serves this pool (--pool-name,
   --pool-namespace) and scrapes the model server's metrics port
   (--model-server-metrics-port, model_server's --metrics_listen) for the
   vllm: names that model_svc/server/model_metrics.cc exports; its config
   file is the mounted ConfigMap's, every pluginRef there names a plugin,
   and the session-affinity-scorer is among them; its Role lets it watch
   pods and InferencePools; the HTTPRoute's parent is the Gateway and its
   backend the InferencePool, with no filter that could drop the
   X-Session-Id header or the llm-d-session cookie; the NetworkPolicies let
   the proxy reach the sidecars' and the EPP's ports, the EPP the metrics
   port, and the sidecars the tokenizer; no standalone gateway is left.

    python3 deploy/tests/inference_gateway_test.py

Exit status 0: pass; 1: fail; 77: skipped (no kubectl, or no CRDs).
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

import manifests as m
from manifest_invariants_test import GATEWAY_CLIENT_LABEL, NAME, pod_labels, selects

TEST = "inference_gateway_test"
OVERLAY = "inference-gateway"
CRD_FILES = ("inference.networking.k8s.io_inferencepools.yaml",
             "gateway.networking.k8s.io_httproutes.yaml",
             "gateway.networking.k8s.io_gateways.yaml")
METRICS_SOURCE = m.ROOT / "model_svc" / "server" / "model_metrics.cc"
EPP_METRIC_FLAGS = {
    "total-queued-requests-metric": "vllm:num_requests_waiting",
    "total-running-requests-metric": "vllm:num_requests_running",
    "kv-cache-usage-percentage-metric": "vllm:kv_cache_usage_perc",
    "cache-info-metric": "vllm:cache_config_info",
}
SESSION_HEADERS = ("x-session-id", "cookie")

errors: list[str] = []


def expect(ok: bool, message: str) -> bool:
    if not ok:
        errors.append(message)
    return ok


# ---------------------------------------------------------------------------
# 1. The CRDs' schemas.

def crd_dir() -> Path:
    shared = os.environ.get("LLM_SHARED_DIR") or str(m.ROOT.parent / "shared")
    return Path(shared) / "k8s-crds"


def strict(schema: dict) -> dict:
    """The schema as the API server applies it with strict field validation:
    objects with properties admit no others (unless they preserve unknown
    fields), int-or-string fields take an integer or a string."""
    s = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, list):
            for n in node:
                walk(n)
            return
        if not isinstance(node, dict):
            return
        if node.get("x-kubernetes-int-or-string"):
            node.pop("type", None)
            node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        if ("properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        for key, value in node.items():
            if key == "properties":
                for prop in value.values():
                    walk(prop)
            elif key in ("items", "additionalProperties", "not"):
                walk(value)
            elif key in ("allOf", "anyOf", "oneOf"):
                walk(value)
    walk(s)
    return s


def load_crds() -> dict[tuple[str, str, str], dict]:
    """(group, version, kind) -> the served version's strict schema."""
    directory = crd_dir()
    missing = [f for f in CRD_FILES if not (directory / f).exists()]
    if missing:
        print(f"{TEST}: SKIPPED: the CRDs {', '.join(missing)} are not in {directory} "
              "(../shared/k8s-crds beside the checkout, or $LLM_SHARED_DIR/k8s-crds)")
        sys.exit(m.SKIP)
    schemas = {}
    for name in CRD_FILES:
        crd = m.load(TEST, (directory / name).read_text())[0]
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served"):
                schemas[(group, version["name"], kind)] = strict(
                    version["schema"]["openAPIV3Schema"])
    return schemas


def schema_errors(schemas: dict, obj: dict) -> list[str]:
    """Why `obj` does not validate against its CRD ([] if it does)."""
    import jsonschema
    group, _, version = obj.get("apiVersion", "").rpartition("/")
    schema = schemas.get((group, version, obj.get("kind")))
    if schema is None:
        return [f"{obj.get('apiVersion')} {obj.get('kind')} is no served version of the CRDs"]
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
            for e in validator.iter_errors(obj)]


BROKEN = {
    "unknown field": {"spec": {"selector": {"matchLabels": {"a": "b"}},
                               "targetPorts": [{"number": 8080}], "notAField": 1}},
    "wrong type": {"spec": {"selector": {"matchLabels": {"a": "b"}},
                            "targetPorts": [{"number": "8080"}]}},
    "missing required field": {"spec": {"targetPorts": [{"number": 8080}]}},
}


def check_schemas(objs: list[dict]) -> list[str]:
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        m.fail(TEST, f"{sys.executable} has no jsonschema: install python3-jsonschema "
                     "(scripts/setup.sh)")
    schemas = load_crds()
    for name, spec in BROKEN.items():
        obj = {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
               "metadata": {"name": "broken"}, **spec}
        if not schema_errors(schemas, obj):
            m.fail(TEST, f"the InferencePool schema accepted a broken object ({name}); "
                         "it cannot be trusted")
    groups = {g for g, _, _ in schemas}
    checked = []
    for o in objs:
        if o["apiVersion"].rpartition("/")[0] not in groups:
            continue
        where = f"{o['kind']}/{o['metadata']['name']}"
        problems = schema_errors(schemas, o)
        expect(not problems, f"{where} does not validate against its CRD: {'; '.join(problems)}")
        checked.append(where)
    for kind in ("Gateway", "HTTPRoute", "InferencePool"):
        expect(bool(m.find(objs, kind)), f"the overlay has no {kind}")
    return checked


# ---------------------------------------------------------------------------
# 2. The pieces fit.

def one(objs: list[dict], kind: str, name: str | None = None) -> dict:
    found = m.find(objs, kind, name)
    if len(found) != 1:
        m.fail(TEST, f"expected one {kind}{'/' + name if name else ''}, found {len(found)}")
    return found[0]


def container(workload: dict, binary: str) -> dict:
    for c in workload["spec"]["template"]["spec"]["containers"]:
        if Path((c.get("command") or [""])[0]).name == binary:
            return c
    m.fail(TEST, f"{workload['kind']}/{workload['metadata']['name']} runs no {binary}")
    return {}


def port_of(address: str | None) -> int | None:
    return int(address.rpartition(":")[2]) if address and ":" in address else None


def admits(policy: dict, port: int, labels: dict[str, str]) -> bool:
    """Whether the NetworkPolicy lets pods with `labels` reach `port`."""
    for rule in policy["spec"].get("ingress", []):
        if not any(p.get("port") == port for p in rule.get("ports", [])):
            continue
        for peer in rule.get("from", []):
            if selects(peer.get("podSelector", {}), labels):
                return True
    return False


def check_fit(objs: list[dict]) -> None:
    namespace = one(objs, "Namespace")["metadata"]["name"]
    model = one(objs, "StatefulSet", "llm-model")
    pool = one(objs, "InferencePool")
    epp = one(objs, "Deployment", "llm-epp")
    route = one(objs, "HTTPRoute")
    gateway = one(objs, "Gateway")
    expect(not m.find(objs, "Deployment", "llm-gateway"),
           "the base's standalone gateway Deployment is still there")

    # The pool: the model pods, on the sidecar's API port.
    expect(selects(pool["spec"]["selector"], pod_labels(model)),
           "the InferencePool does not select the model pods")
    sidecar = container(model, "llm_gateway")
    server = container(model, "model_server")
    sidecar_args = m.resolved_argv(objs, model, sidecar, "gateway sidecar", errors)
    server_args = m.resolved_argv(objs, model, server, "model_server", errors)
    target = pool["spec"]["targetPorts"][0]["number"]
    http = {p["name"]: p["containerPort"] for p in sidecar.get("ports", [])}.get("http")
    expect(target == http == port_of(m.flag_value(sidecar_args, "listen")),
           f"the pool's target port {target} is not the sidecar's `http` port ({http}) "
           f"and --listen ({m.flag_value(sidecar_args, 'listen')})")
    expect(m.flag_value(sidecar_args, "model") ==
           f"127.0.0.1:{port_of(m.flag_value(server_args, 'listen'))}",
           f"the sidecar's --model ({m.flag_value(sidecar_args, 'model')}) is not its own "
           "pod's model server")

    # The endpoint picker: its Service, this pool, the metrics it scrapes.
    ref = pool["spec"]["endpointPickerRef"]
    epp_c = epp["spec"]["template"]["spec"]["containers"][0]
    epp_args = m.resolved_argv(objs, epp, epp_c, "EPP", errors)

    def epp_flag(name: str) -> str | None:
        return m.flag_value(epp_args, name.replace("-", "_"))

    svc = one(objs, "Service", ref["name"])
    expect(selects(svc["spec"]["selector"], pod_labels(epp)),
           f"Service {ref['name']} does not select the EPP's pods")
    svc_port = [p for p in svc["spec"]["ports"] if p["port"] == ref["port"]["number"]]
    named = {p.get("name"): p["containerPort"] for p in epp_c.get("ports", [])}
    if expect(len(svc_port) == 1, f"Service {ref['name']} has no port {ref['port']['number']}"):
        tp = svc_port[0].get("targetPort")
        expect(named.get(tp, tp) == int(epp_flag("grpc-port") or 9002),
               f"Service {ref['name']}'s port {ref['port']['number']} does not reach the EPP's "
               f"--grpc-port")
    expect(epp_flag("pool-name") == pool["metadata"]["name"],
           f"the EPP's --pool-name is not {pool['metadata']['name']}")
    expect(epp_flag("pool-namespace") == namespace,
           f"the EPP's --pool-namespace is not {namespace}")
    metrics_port = port_of(m.flag_value(server_args, "metrics_listen"))
    expect(epp_flag("model-server-metrics-port") == str(metrics_port),
           f"the EPP scrapes port {epp_flag('model-server-metrics-port')}, not the model "
           f"server's metrics port {metrics_port}")
    exported = METRICS_SOURCE.read_text()
    for flag, name in EPP_METRIC_FLAGS.items():
        expect(epp_flag(flag) == name, f"the EPP's --{flag} is {epp_flag(flag)}, not {name}")
        expect(f'"{name}"' in exported, f"{METRICS_SOURCE.name} does not export {name}")

    # Its plugins: the config file it reads is the mounted ConfigMap's.
    path = Path(epp_flag("config-file") or "")
    mounts = {mt["name"]: mt["mountPath"] for mt in epp_c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in epp["spec"]["template"]["spec"].get("volumes", [])}
    config = None
    for name, mount in mounts.items():
        if str(path.parent) == mount.rstrip("/") and "configMap" in volumes.get(name, {}):
            data = m.config_map(objs, volumes[name]["configMap"]["name"], "EPP", errors)
            config = data.get(path.name)
    if expect(config is not None, f"the EPP's --config-file {path} is in no mounted ConfigMap"):
        cfg = m.load(TEST, config)[0]
        declared = {p.get("name", p["type"]) for p in cfg.get("plugins", [])}
        for profile in cfg.get("schedulingProfiles", []):
            for ref_ in profile.get("plugins", []):
                expect(ref_["pluginRef"] in declared,
                       f"EPP config: pluginRef {ref_['pluginRef']} names no plugin")
        expect("session-affinity-scorer" in declared, "EPP config: no session-affinity-scorer")

    # What it may read.
    role = one(objs, "Role", "llm-epp")
    granted = {(g, r) for rule in role["rules"] if {"list", "watch"} <= set(rule["verbs"])
               for g in rule["apiGroups"] for r in rule["resources"]}
    for need in (("", "pods"), ("inference.networking.k8s.io", "inferencepools")):
        expect(need in granted, f"Role llm-epp does not let the EPP list and watch {need[1]}")
    binding = one(objs, "RoleBinding", "llm-epp")
    expect(binding["subjects"][0]["name"] == epp["spec"]["template"]["spec"]
           .get("serviceAccountName"), "RoleBinding llm-epp does not bind the EPP's account")

    # The route: the Gateway in, the pool out, headers untouched.
    parents = route["spec"]["parentRefs"]
    expect(any(p["name"] == gateway["metadata"]["name"] for p in parents),
           "the HTTPRoute's parent is not the Gateway")
    for rule in route["spec"]["rules"]:
        expect(all(b.get("group") == "inference.networking.k8s.io" and
                   b.get("kind") == "InferencePool" and b["name"] == pool["metadata"]["name"]
                   for b in rule.get("backendRefs", [])),
               "an HTTPRoute rule sends requests elsewhere than the InferencePool")
        for f in rule.get("filters", []):
            removed = [h.lower() for h in
                       f.get("requestHeaderModifier", {}).get("remove", [])]
            expect(not set(removed) & set(SESSION_HEADERS),
                   f"an HTTPRoute filter removes {removed}")

    # Who may reach what.
    proxy = {GATEWAY_CLIENT_LABEL[0]: GATEWAY_CLIENT_LABEL[1]}
    model_np = one(objs, "NetworkPolicy", "llm-model")
    expect(admits(model_np, target, proxy),
           f"NetworkPolicy llm-model does not admit the proxy to port {target}")
    expect(admits(model_np, metrics_port, pod_labels(epp)),
           f"NetworkPolicy llm-model does not admit the EPP to port {metrics_port}")
    expect(admits(one(objs, "NetworkPolicy", "llm-epp"), ref["port"]["number"], proxy),
           f"NetworkPolicy llm-epp does not admit the proxy to port {ref['port']['number']}")
    tokenizer_port = port_of(m.flag_value(sidecar_args, "tokenizer"))
    expect(admits(one(objs, "NetworkPolicy", "llm-tokenizer"), tokenizer_port,
                  pod_labels(model)),
           f"NetworkPolicy llm-tokenizer does not admit the model pods (the sidecars) to port "
           f"{tokenizer_port}")
    expect(pod_labels(model).get(NAME) == "llm-model", "the model pods lost their name label")


def main() -> None:
    objs = m.objects(TEST, OVERLAY)
    checked = check_schemas(objs)
    check_fit(objs)
    if errors:
        m.fail(TEST, f"{len(errors)} problem(s):\n  " + "\n  ".join(errors))
    print(f"{TEST}: PASS: {', '.join(checked)} valid against their CRDs ({crd_dir()}); "
          f"{len(objs)} objects fit together")


if __name__ == "__main__":
    main()
