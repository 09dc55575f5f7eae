#!/usr/bin/env python3
"""The rendered overlays keep the promises docs/operations.md makes.

For deploy/k8s/overlays/{cpu,gpu}, rendered with `kubectl kustomize`:

- every object is in one namespace and carries app.kubernetes.io/part-of;
- the tokenizer is a Deployment scaled by a CPU-utilization HPA (and has no
  `replicas` of its own); the model server is a StatefulSet whose serviceName
  is a headless Service, and whose --pod_name is $(POD_NAME) with
  POD_NAME from the downward API (metadata.name);
- each workload: selector matches its pod labels; the container port `grpc`
  is the port of --listen (on all interfaces), of the startup, readiness and
  liveness probes (native gRPC) and of its Service; a preStop sleep; a
  terminationGracePeriodSeconds above that sleep plus --drain_seconds; cpu
  and memory requests and limits (requests <= limits); non-root, no privilege
  escalation; a PodDisruptionBudget; a NetworkPolicy that admits only pods
  labelled llm.example/client: "true", to the gRPC port only;
- gpu overlay: the model server asks for one nvidia.com/gpu, runs the CUDA
  image, and has a GPU nodeSelector and toleration; nothing else asks for a
  GPU (and in the cpu overlay nothing does).

    python3 deploy/tests/manifest_invariants_test.py

Exit status 0: pass; 1: fail; 77: skipped (no kubectl).
"""

from __future__ import annotations

import manifests as m

TEST = "manifest_invariants_test"
CLIENT_LABEL = ("llm.example/client", "true")
SCRAPER_LABEL = ("llm.example/metrics-scraper", "true")
PART_OF = ("app.kubernetes.io/part-of", "llm-inference")
GPU = "nvidia.com/gpu"

errors: list[str] = []


def expect(ok: bool, message: str) -> bool:
    if not ok:
        errors.append(message)
    return ok


def selects(selector: dict, labels: dict) -> bool:
    match = (selector or {}).get("matchLabels", selector or {})
    return bool(match) and all(labels.get(k) == v for k, v in match.items())


def pod_labels(w: dict) -> dict:
    return w["spec"]["template"]["metadata"].get("labels", {})


def check_workload(objs: list[dict], w: dict, where: str) -> None:
    pod = w["spec"]["template"]["spec"]
    labels = pod_labels(w)
    expect(selects(w["spec"]["selector"], labels), f"{where}: selector does not match pod labels")
    expect(labels.get(PART_OF[0]) == PART_OF[1], f"{where}: pod labels lack {PART_OF[0]}")
    expect(len(pod["containers"]) == 1, f"{where}: expected one container")
    c = pod["containers"][0]
    argv = m.resolved_argv(objs, w, c, where, errors)
    args = argv[1:]

    # The gRPC port: container port, --listen, probes, Service.
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    if not expect("grpc" in ports, f"{where}: no container port named grpc"):
        return
    port = ports["grpc"]
    # Metrics: --metrics_listen on the `metrics` port, announced to Prometheus.
    metrics_port = ports.get("metrics")
    if expect(metrics_port is not None, f"{where}: no container port named metrics"):
        metrics = m.flag_value(args, "metrics_listen") or ""
        expect(metrics.rpartition(":")[2] == str(metrics_port),
               f"{where}: --metrics_listen={metrics} is not port {metrics_port}")
        notes = w["spec"]["template"]["metadata"].get("annotations", {})
        expect(notes.get("prometheus.io/scrape") == "true" and
               notes.get("prometheus.io/port") == str(metrics_port),
               f"{where}: the pod template lacks the prometheus.io scrape annotations")
    listen = m.flag_value(args, "listen") or ""
    host, _, listen_port = listen.rpartition(":")
    expect(listen_port == str(port), f"{where}: --listen={listen} is not port {port}")
    expect(host in ("0.0.0.0", "[::]"), f"{where}: --listen={listen} is not on all interfaces")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe)
        if expect(p is not None, f"{where}: no {probe}"):
            expect(p.get("grpc", {}).get("port") == port,
                   f"{where}: {probe} is not a gRPC probe of port {port}")
    services = [s for s in m.find(objs, "Service") if selects(s["spec"].get("selector"), labels)]
    if expect(len(services) == 1, f"{where}: {len(services)} Services select its pods, not 1"):
        sp = services[0]["spec"]["ports"]
        expect(any(p["port"] == port and p.get("targetPort") in ("grpc", port) for p in sp),
               f"{where}: Service {services[0]['metadata']['name']} does not expose port {port}")

    # Draining: preStop sleep + --drain_seconds < terminationGracePeriodSeconds.
    pre = c.get("lifecycle", {}).get("preStop", {})
    sleep = None
    if "sleep" in pre:
        sleep = float(pre["sleep"]["seconds"])
    elif pre.get("exec", {}).get("command", [None])[0] == "sleep":
        sleep = float(pre["exec"]["command"][1])
    drain = m.flag_value(args, "drain_seconds")
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if expect(sleep is not None, f"{where}: no preStop sleep") and \
            expect(drain is not None, f"{where}: no --drain_seconds"):
        expect(grace > sleep + float(drain),
               f"{where}: terminationGracePeriodSeconds {grace} is not above the preStop sleep "
               f"{sleep:g} s plus --drain_seconds {drain}")

    # Resources and security.
    res = c.get("resources", {})
    for r in ("cpu", "memory"):
        req, lim = res.get("requests", {}).get(r), res.get("limits", {}).get(r)
        if expect(req is not None and lim is not None, f"{where}: no {r} request and limit"):
            expect(m.quantity(req) <= m.quantity(lim), f"{where}: {r} request above its limit")
    sc, psc = c.get("securityContext", {}), pod.get("securityContext", {})
    expect(sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True, f"{where}: not runAsNonRoot")
    expect(sc.get("allowPrivilegeEscalation") is False,
           f"{where}: allowPrivilegeEscalation is not false")

    # Disruption budget and network policy.
    pdbs = [p for p in m.find(objs, "PodDisruptionBudget")
            if selects(p["spec"]["selector"], labels)]
    expect(len(pdbs) == 1, f"{where}: {len(pdbs)} PodDisruptionBudgets select its pods, not 1")
    policies = [p for p in m.find(objs, "NetworkPolicy")
                if selects(p["spec"]["podSelector"], labels)]
    if expect(len(policies) >= 1, f"{where}: no NetworkPolicy selects its pods"):
        for p in policies:
            name = p["metadata"]["name"]
            expect("Ingress" in p["spec"].get("policyTypes", []),
                   f"{where}: NetworkPolicy {name} does not restrict Ingress")
            rules = p["spec"].get("ingress", [])
            expect(bool(rules), f"{where}: NetworkPolicy {name} admits nothing")
            for rule in rules:
                peers = rule.get("from", [])
                rule_ports = [q.get("port") for q in rule.get("ports", [])]
                # Clients reach the gRPC port; scrapers the metrics port.
                allowed = CLIENT_LABEL
                if metrics_port is not None and rule_ports in ([metrics_port], ["metrics"]):
                    allowed = SCRAPER_LABEL
                else:
                    expect(rule_ports in ([port], ["grpc"]),
                           f"{where}: NetworkPolicy {name}: an ingress rule opens other ports "
                           f"than {port}")
                expect(bool(peers) and all(
                    peer.get("podSelector", {}).get("matchLabels") == dict([allowed])
                    and "ipBlock" not in peer for peer in peers),
                    f"{where}: NetworkPolicy {name}: an ingress rule admits more than pods "
                    f"labelled {allowed[0]}={allowed[1]}")


def check_overlay(overlay: str) -> int:
    objs = m.objects(TEST, overlay)
    namespaces = {o["metadata"].get("namespace") for o in objs if o["kind"] != "Namespace"}
    ns_objs = m.find(objs, "Namespace")
    expect(len(namespaces) == 1 and None not in namespaces,
           f"{overlay}: objects are in namespaces {namespaces}, not one")
    expect([n["metadata"]["name"] for n in ns_objs] == list(namespaces),
           f"{overlay}: the Namespace object is not the objects' namespace")
    for o in objs:
        expect(o["metadata"].get("labels", {}).get(PART_OF[0]) == PART_OF[1],
               f"{overlay}: {o['kind']}/{o['metadata']['name']} lacks label {PART_OF[0]}")

    tok = m.find(objs, "Deployment", "llm-tokenizer")
    model = m.find(objs, "StatefulSet", "llm-model")
    if not (expect(len(tok) == 1, f"{overlay}: no Deployment llm-tokenizer") and
            expect(len(model) == 1, f"{overlay}: no StatefulSet llm-model")):
        return len(objs)
    tok, model = tok[0], model[0]
    for w in m.workloads(objs):
        check_workload(objs, w, f"{overlay}: {w['kind']}/{w['metadata']['name']}")

    # Tokenizer: HPA on CPU utilization owns the replica count.
    hpas = [h for h in m.find(objs, "HorizontalPodAutoscaler")
            if h["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                               "name": "llm-tokenizer"}]
    if expect(len(hpas) == 1, f"{overlay}: no HPA targets Deployment llm-tokenizer"):
        metrics = hpas[0]["spec"].get("metrics", [])
        expect(any(x.get("resource", {}).get("name") == "cpu" and
                   x["resource"]["target"]["type"] == "Utilization" for x in metrics),
               f"{overlay}: the tokenizer HPA does not scale on CPU utilization")
    expect("replicas" not in tok["spec"],
           f"{overlay}: Deployment llm-tokenizer sets replicas (the HPA owns them)")

    # Model: headless Service, session prefix from the pod name.
    svc = m.find(objs, "Service", model["spec"].get("serviceName"))
    if expect(len(svc) == 1, f"{overlay}: the StatefulSet's serviceName names no Service"):
        expect(svc[0]["spec"].get("clusterIP") == "None",
               f"{overlay}: Service {svc[0]['metadata']['name']} is not headless")
        expect(selects(svc[0]["spec"].get("selector"), pod_labels(model)),
               f"{overlay}: the headless Service does not select the model pods")
    c = model["spec"]["template"]["spec"]["containers"][0]
    expect(m.flag_value(c.get("args", []), "pod_name") == "$(POD_NAME)",
           f"{overlay}: model_server's --pod_name is not $(POD_NAME)")
    pod_name = [e for e in c.get("env", []) if e["name"] == "POD_NAME"]
    expect(bool(pod_name) and pod_name[0].get("valueFrom", {}).get("fieldRef", {})
           .get("fieldPath") == "metadata.name",
           f"{overlay}: POD_NAME does not come from the downward API (metadata.name)")

    # GPUs: only the gpu overlay's model server asks for one.
    for w in m.workloads(objs):
        pod = w["spec"]["template"]["spec"]
        for ct in pod["containers"]:
            gpus = ct.get("resources", {}).get("limits", {}).get(GPU)
            where = f"{overlay}: {w['kind']}/{w['metadata']['name']}"
            if overlay == "gpu" and w is model:
                expect(str(gpus) == "1", f"{where}: limits {GPU} is {gpus}, not 1")
                expect("cuda" in ct["image"], f"{where}: image {ct['image']} is not the CUDA one")
                expect(bool(pod.get("nodeSelector")), f"{where}: no nodeSelector for GPU nodes")
                expect(any(t.get("key") == GPU for t in pod.get("tolerations", [])),
                       f"{where}: no toleration for {GPU}")
            else:
                expect(gpus is None, f"{where}: asks for {GPU}")
                expect("cuda" not in ct["image"], f"{where}: runs the CUDA image {ct['image']}")
    return len(objs)


def main() -> None:
    counts = {overlay: check_overlay(overlay) for overlay in m.OVERLAYS}
    if errors:
        m.fail(TEST, f"{len(errors)} problem(s):\n  " + "\n  ".join(errors))
    print(f"{TEST}: PASS: " + ", ".join(f"{o} ({n} objects)" for o, n in counts.items()))


if __name__ == "__main__":
    main()
