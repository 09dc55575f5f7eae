#!/usr/bin/env python3
"""The rendered overlays keep the promises docs/operations.md makes.

For deploy/k8s/overlays/{cpu,gpu}, rendered with `kubectl kustomize`:

- every object is in one namespace and carries app.kubernetes.io/part-of;
- the tokenizer and the gateway are Deployments scaled by CPU-utilization
  HPAs (and have no `replicas` of their own); the model server is a
  StatefulSet whose serviceName is a headless Service, and whose --pod_name
  is $(POD_NAME) with POD_NAME from the downward API (metadata.name);
- each workload: selector matches its pod labels; its serving port (`grpc`
  for the servers, `http` for the gateway) is the port of --listen (on all
  interfaces) and of its Service; the servers' startup, readiness and
  liveness probes are native gRPC probes of that port; its metrics port
  (`metrics` for the servers, --metrics_listen; `admin` for the gateway,
  --admin_listen, the listener with workers of its own that serves only
  /health and /metrics, in plain HTTP even where the API port serves HTTPS)
  is --metrics_listen / --admin_listen's port, on all interfaces, and the
  one that the prometheus.io annotations name (path /metrics, scheme http);
  the gateway's three probes are plain-HTTP GETs of its admin port (never of
  the API port, whose workers slow clients can hold), readiness on /health,
  the others on /health or /metrics; a preStop sleep; a
  terminationGracePeriodSeconds above that sleep plus --drain_seconds (the
  gateway: --drain_timeout); cpu and memory requests and limits (requests
  <= limits); non-root, no privilege escalation; a PodDisruptionBudget; a
  NetworkPolicy that admits to the gRPC ports only pods labelled
  llm.example/client: "true" and the gateway's pods (of this namespace), to
  the gateway's API port only pods labelled llm.example/gateway-client:
  "true", and to the metrics (admin) port scrapers (llm.example/metrics-
  scraper: "true") and nobody else;
- the gateway sets MALLOC_ARENA_MAX to 1..its CPU limit in cores;
- the gateway reaches both services: its --tokenizer names the tokenizer's
  Service and port, its --model dns:///the model's headless Service and
  port, and both services' NetworkPolicies admit its pods;
- gpu overlay: the model server asks for one nvidia.com/gpu, runs the CUDA
  image, and has a GPU nodeSelector and toleration; nothing else asks for a
  GPU (and in the cpu overlay nothing does).

For deploy/k8s/overlays/cpu-tls: the gateway passes the same workload
checks (its API port serves HTTPS there, its Service says appProtocol
https; its probes and scrapes stay plain HTTP on the admin port); every
gRPC server serves TLS, and the gateway verifies them (--tls_ca) and, where
they require client certificates (--tls_ca), presents one; its TLS files are
on a mounted Secret; it names the services by their `NAME.NAMESPACE.svc`
names, which the certificate holds.

    python3 deploy/tests/manifest_invariants_test.py

Exit status 0: pass; 1: fail; 77: skipped (no kubectl).
"""

from __future__ import annotations

import manifests as m

TEST = "manifest_invariants_test"
CLIENT_LABEL = ("llm.example/client", "true")
GATEWAY_CLIENT_LABEL = ("llm.example/gateway-client", "true")
SCRAPER_LABEL = ("llm.example/metrics-scraper", "true")
NAME = "app.kubernetes.io/name"
# The gateway's endpoints that need no API key (gateway/http_auth.h): the
# only ones a probe or a scraper can use.
UNGUARDED_PATHS = ("/health", "/metrics")
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


def serving_port(c: dict) -> tuple[str | None, int | None]:
    """("grpc" or "http", its containerPort): the port the container serves."""
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    for kind in ("grpc", "http"):
        if kind in ports:
            return kind, ports[kind]
    return None, None


def gateway_selectors(objs: list[dict]) -> list[dict]:
    """The pod labels (app.kubernetes.io/name) of the HTTP gateways."""
    out = []
    for w in m.workloads(objs):
        if serving_port(w["spec"]["template"]["spec"]["containers"][0])[0] == "http":
            out.append({NAME: pod_labels(w).get(NAME)})
    return out


def peer_allowed(peer: dict, allowed: list[tuple[dict, bool]]) -> bool:
    """Whether a NetworkPolicy peer is one of `allowed`: (matchLabels, any
    namespace?); a same-namespace one must have no namespaceSelector."""
    if "ipBlock" in peer:
        return False
    labels = peer.get("podSelector", {}).get("matchLabels")
    for match, any_namespace in allowed:
        if labels == match and (any_namespace or "namespaceSelector" not in peer):
            return True
    return False


def check_workload(objs: list[dict], w: dict, where: str) -> None:
    pod = w["spec"]["template"]["spec"]
    labels = pod_labels(w)
    expect(selects(w["spec"]["selector"], labels), f"{where}: selector does not match pod labels")
    expect(labels.get(PART_OF[0]) == PART_OF[1], f"{where}: pod labels lack {PART_OF[0]}")
    expect(len(pod["containers"]) == 1, f"{where}: expected one container")
    c = pod["containers"][0]
    argv = m.resolved_argv(objs, w, c, where, errors)
    args = argv[1:]

    # The serving port: container port, --listen, probes, Service.
    kind, port = serving_port(c)
    if not expect(kind is not None, f"{where}: no container port named grpc or http"):
        return
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    notes = w["spec"]["template"]["metadata"].get("annotations", {})
    https = kind == "http" and m.flag_value(args, "http_tls_cert") is not None
    # Probes and scrapes: the servers' --metrics_listen on the `metrics` port;
    # the gateway's --admin_listen on the `admin` port, whose own workers
    # answer GET /health and /metrics however busy the API port is (slow
    # clients, floods of connections), in plain HTTP even where the API port
    # serves HTTPS. Both on all interfaces: the kubelet and Prometheus come
    # from outside the pod.
    metrics_name, metrics_flag = ("metrics", "metrics_listen") if kind == "grpc" else \
        ("admin", "admin_listen")
    metrics_port = ports.get(metrics_name)
    if expect(metrics_port is not None, f"{where}: no container port named {metrics_name}"):
        metrics = m.flag_value(args, metrics_flag) or ""
        metrics_host, _, metrics_listen_port = metrics.rpartition(":")
        expect(metrics_listen_port == str(metrics_port),
               f"{where}: --{metrics_flag}={metrics} is not port {metrics_port}")
        expect(metrics_host in ("0.0.0.0", "[::]"),
               f"{where}: --{metrics_flag}={metrics} is not on all interfaces")
        expect(notes.get("prometheus.io/scrape") == "true" and
               notes.get("prometheus.io/port") == str(metrics_port),
               f"{where}: the pod template lacks the prometheus.io scrape annotations of port "
               f"{metrics_port} ({metrics_name}): scrape {notes.get('prometheus.io/scrape')}, "
               f"port {notes.get('prometheus.io/port')}")
        expect(notes.get("prometheus.io/path") == "/metrics",
               f"{where}: prometheus.io/path is not /metrics")
        expect(notes.get("prometheus.io/scheme", "http") == "http",
               f"{where}: prometheus.io/scheme is {notes.get('prometheus.io/scheme')}, but port "
               f"{metrics_port} ({metrics_name}) serves plain HTTP")
    listen = m.flag_value(args, "listen") or ""
    host, _, listen_port = listen.rpartition(":")
    expect(listen_port == str(port), f"{where}: --listen={listen} is not port {port}")
    expect(host in ("0.0.0.0", "[::]"), f"{where}: --listen={listen} is not on all interfaces")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe)
        if not expect(p is not None, f"{where}: no {probe}"):
            continue
        if kind == "grpc":
            expect(p.get("grpc", {}).get("port") == port,
                   f"{where}: {probe} is not a gRPC probe of port {port}")
            continue
        # The gateway: on the admin port, never on the API port, where slow
        # clients can hold every worker and fail the probes.
        get = p.get("httpGet")
        if not expect(get is not None and metrics_port is not None and
                      get.get("port") in (metrics_port, metrics_name),
                      f"{where}: {probe} is not an HTTP GET of port {metrics_port} "
                      f"({metrics_name}): {get}"):
            continue
        paths = ("/health",) if probe == "readinessProbe" else UNGUARDED_PATHS
        expect(get.get("path") in paths,
               f"{where}: {probe} GETs {get.get('path')}, not one of {', '.join(paths)} "
               "(readiness must follow the services; other paths need the API key)")
        scheme = get.get("scheme", "HTTP")
        expect(scheme == "HTTP",
               f"{where}: {probe} uses {scheme}, but the {metrics_name} port serves plain HTTP")
    services = [s for s in m.find(objs, "Service") if selects(s["spec"].get("selector"), labels)]
    if expect(len(services) == 1, f"{where}: {len(services)} Services select its pods, not 1"):
        sp = services[0]["spec"]["ports"]
        expect(any(p["port"] == port and p.get("targetPort") in (kind, port) for p in sp),
               f"{where}: Service {services[0]['metadata']['name']} does not expose port {port}")
        if kind == "http":
            expect(all(p.get("appProtocol") == ("https" if https else "http") for p in sp),
                   f"{where}: Service {services[0]['metadata']['name']}'s appProtocol is not "
                   f"{'https' if https else 'http'}")

    # Draining: preStop sleep + the drain < terminationGracePeriodSeconds
    # (the servers' --drain_seconds, the gateway's --drain_timeout).
    pre = c.get("lifecycle", {}).get("preStop", {})
    sleep = None
    if "sleep" in pre:
        sleep = float(pre["sleep"]["seconds"])
    elif pre.get("exec", {}).get("command", [None])[0] == "sleep":
        sleep = float(pre["exec"]["command"][1])
    drain_flag = "drain_timeout" if kind == "http" else "drain_seconds"
    drain = m.flag_value(args, drain_flag)
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if expect(sleep is not None, f"{where}: no preStop sleep") and \
            expect(drain is not None, f"{where}: no --{drain_flag}"):
        expect(grace > sleep + float(drain),
               f"{where}: terminationGracePeriodSeconds {grace} is not above the preStop sleep "
               f"{sleep:g} s plus --{drain_flag} {drain}")

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
    expect(sc.get("readOnlyRootFilesystem") is True, f"{where}: readOnlyRootFilesystem is not true")

    # Disruption budget and network policy.
    pdbs = [p for p in m.find(objs, "PodDisruptionBudget")
            if selects(p["spec"]["selector"], labels)]
    expect(len(pdbs) == 1, f"{where}: {len(pdbs)} PodDisruptionBudgets select its pods, not 1")
    policies = [p for p in m.find(objs, "NetworkPolicy")
                if selects(p["spec"]["podSelector"], labels)]
    # Who may reach the serving port: gRPC clients and the gateway's pods (this
    # namespace) for the servers; the gateway's clients for the gateway.
    if kind == "grpc":
        serving_peers = [(dict([CLIENT_LABEL]), True)] + \
            [(g, False) for g in gateway_selectors(objs)]
        # A model server with --peers: its own pods too (live migration).
        if m.flag_value(args, "peers"):
            serving_peers.append(({"app.kubernetes.io/name": labels["app.kubernetes.io/name"]},
                                  False))
    else:
        serving_peers = [(dict([GATEWAY_CLIENT_LABEL]), True)]
    # Scrapers reach the metrics (gateway: admin) port, and only that one; the
    # kubelet's probes come from the node, which NetworkPolicy does not govern.
    scraper_peers = [(dict([SCRAPER_LABEL]), True)]
    scrapers_admitted = False
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
                allowed = []
                if rule_ports in ([port], [kind]):
                    allowed += serving_peers
                if metrics_port is not None and rule_ports in ([metrics_port], [metrics_name]):
                    allowed += scraper_peers
                    scrapers_admitted |= any(peer_allowed(peer, scraper_peers) for peer in peers)
                if not expect(bool(allowed), f"{where}: NetworkPolicy {name}: an ingress rule "
                                             f"opens other ports than {port} and "
                                             f"{metrics_port} ({metrics_name}), one per rule: "
                                             f"{rule_ports}"):
                    continue
                expect(bool(peers) and all(peer_allowed(peer, allowed) for peer in peers),
                       f"{where}: NetworkPolicy {name}: an ingress rule of port(s) {rule_ports} "
                       f"admits more than " + " or ".join(f"{d}" for d, _ in allowed))
        expect(metrics_port is None or scrapers_admitted,
               f"{where}: no NetworkPolicy rule lets scrapers ({SCRAPER_LABEL[0]}) reach port "
               f"{metrics_port} ({metrics_name})")


def admits(objs: list[dict], target: dict, port: int, source_labels: dict) -> bool:
    """Whether some NetworkPolicy that selects `target`'s pods lets pods with
    `source_labels` (same namespace) reach `port`."""
    for p in m.find(objs, "NetworkPolicy"):
        if not selects(p["spec"]["podSelector"], pod_labels(target)):
            continue
        for rule in p["spec"].get("ingress", []):
            if port not in [q.get("port") for q in rule.get("ports", [])]:
                continue
            for peer in rule.get("from", []):
                if "ipBlock" not in peer and selects(peer.get("podSelector", {}), source_labels):
                    return True
    return False


def check_gateway(objs: list[dict], overlay: str, tls: bool) -> None:
    """The gateway Deployment: scaled by a CPU HPA, and able to reach both
    services by the names and ports of their Services."""
    gateway = m.find(objs, "Deployment", "llm-gateway")
    if not expect(len(gateway) == 1, f"{overlay}: no Deployment llm-gateway"):
        return
    gw = gateway[0]
    where = f"{overlay}: Deployment/llm-gateway"
    c = gw["spec"]["template"]["spec"]["containers"][0]
    expect(c.get("command") == ["llm_gateway"], f"{where}: does not run llm_gateway")
    args = m.resolved_argv(objs, gw, c, where, errors)[1:]
    hpas = [h for h in m.find(objs, "HorizontalPodAutoscaler")
            if h["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                               "name": "llm-gateway"}]
    if expect(len(hpas) == 1, f"{overlay}: no HPA targets Deployment llm-gateway"):
        expect(any(x.get("resource", {}).get("name") == "cpu" and
                   x["resource"]["target"]["type"] == "Utilization"
                   for x in hpas[0]["spec"].get("metrics", [])),
               f"{overlay}: the gateway HPA does not scale on CPU utilization")
    expect("replicas" not in gw["spec"],
           f"{overlay}: Deployment llm-gateway sets replicas (the HPA owns them)")
    # glibc's malloc arenas bounded by the CPU limit, not the node's cores
    # (8 per core, each holding freed memory of the requests its threads
    # served: the memory limit would not hold on a large node).
    arenas = m.container_env(objs, gw, c, where, errors).get("MALLOC_ARENA_MAX", "")
    cpu_limit = m.quantity(c.get("resources", {}).get("limits", {}).get("cpu", 0))
    expect(arenas.isdigit() and 1 <= int(arenas) <= max(1, -(-cpu_limit // 1)),
           f"{where}: MALLOC_ARENA_MAX is {arenas or 'not set'}, not 1 to its CPU limit "
           f"({cpu_limit:g} cores)")
    namespace = gw["metadata"].get("namespace")
    servers = {"tokenizer": m.find(objs, "Deployment", "llm-tokenizer"),
               "model": m.find(objs, "StatefulSet", "llm-model")}
    for flag, prefix in (("tokenizer", ""), ("model", "dns:///")):
        address = m.flag_value(args, flag) or ""
        if not (expect(address.startswith(prefix), f"{where}: --{flag}={address} does not start "
                                                    f"with {prefix!r}") and servers[flag]):
            continue
        host, _, port = address[len(prefix):].rpartition(":")
        name, _, domain = host.partition(".")
        expect(domain in ("", f"{namespace}.svc", f"{namespace}.svc.cluster.local"),
               f"{where}: --{flag}={address} is not a Service of namespace {namespace}")
        if tls:
            expect(domain.startswith(f"{namespace}.svc"),
                   f"{where}: --{flag}={address}: over TLS, name the service as its "
                   f"certificate does ({name}.{namespace}.svc)")
        server = servers[flag][0]
        svc = m.find(objs, "Service", name)
        if not expect(len(svc) == 1, f"{where}: --{flag}={address} names no Service"):
            continue
        expect(selects(svc[0]["spec"].get("selector"), pod_labels(server)),
               f"{where}: --{flag}: Service {name} does not select the {flag} pods")
        expect(any(str(p["port"]) == port for p in svc[0]["spec"]["ports"]),
               f"{where}: --{flag}: Service {name} has no port {port}")
        if flag == "model":
            expect(svc[0]["spec"].get("clusterIP") == "None",
                   f"{where}: --model=dns:///... needs the headless Service, {name} is not")
        grpc_port = serving_port(server["spec"]["template"]["spec"]["containers"][0])[1]
        expect(admits(objs, server, grpc_port, pod_labels(gw)),
               f"{where}: no NetworkPolicy lets the gateway's pods reach the {flag} pods")


def check_tls_overlay(overlay: str) -> int:
    """overlays/cpu-tls: the gateway passes the workload checks and speaks TLS
    to servers that serve it."""
    objs = m.objects(TEST, overlay)
    gateway = m.find(objs, "Deployment", "llm-gateway")
    if not expect(len(gateway) == 1, f"{overlay}: no Deployment llm-gateway"):
        return len(objs)
    gw = gateway[0]
    where = f"{overlay}: Deployment/llm-gateway"
    check_workload(objs, gw, where)
    check_gateway(objs, overlay, tls=True)
    c = gw["spec"]["template"]["spec"]["containers"][0]
    args = m.resolved_argv(objs, gw, c, where, errors)[1:]
    for flag in ("http_tls_cert", "http_tls_key"):
        expect(m.flag_value(args, flag) is not None, f"{where}: no --{flag} (HTTPS)")
    for name in ("llm-tokenizer", "llm-model"):
        server = [w for w in m.workloads(objs) if w["metadata"]["name"] == name]
        if not expect(len(server) == 1, f"{overlay}: no workload {name}"):
            continue
        sc = server[0]["spec"]["template"]["spec"]["containers"][0]
        sargs = m.resolved_argv(objs, server[0], sc, f"{overlay}: {name}", errors)[1:]
        if expect(m.flag_value(sargs, "tls_cert") is not None, f"{overlay}: {name} has no TLS"):
            expect(m.flag_value(args, "tls_ca") is not None,
                   f"{where}: {name} serves TLS, the gateway has no --tls_ca to verify it")
        if m.flag_value(sargs, "tls_ca") is not None:
            expect(m.flag_value(args, "tls_cert") is not None and
                   m.flag_value(args, "tls_key") is not None,
                   f"{where}: {name} requires client certificates, the gateway presents none")
    # Every file flag of the gateway lies on a mounted Secret volume.
    volumes = {v["name"]: v for v in gw["spec"]["template"]["spec"].get("volumes", [])}
    mounts = [(mt["mountPath"].rstrip("/") + "/", volumes.get(mt["name"], {}))
              for mt in c.get("volumeMounts", [])]
    for flag in ("tls_ca", "tls_cert", "tls_key", "http_tls_cert", "http_tls_key"):
        path = m.flag_value(args, flag)
        if path is None:
            continue
        expect(any(path.startswith(mp) and "secret" in v for mp, v in mounts),
               f"{where}: --{flag}={path} is not on a mounted Secret volume")
    return len(objs)


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

    # Gateway: HPA, and the services it must reach.
    check_gateway(objs, overlay, tls=False)

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
    counts["cpu-tls"] = check_tls_overlay("cpu-tls")
    if errors:
        m.fail(TEST, f"{len(errors)} problem(s):\n  " + "\n  ".join(errors))
    print(f"{TEST}: PASS: " + ", ".join(f"{o} ({n} objects)" for o, n in counts.items()))


if __name__ == "__main__":
    main()
