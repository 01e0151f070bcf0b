"""The chart installed into the local API server, and the real binaries run as its
ServiceAccounts (tokens from TokenRequest, so the server enforces the chart's RBAC): a
controller, a sidecar routing to one live and one dead backend, and the injector.

- Every API call the controller and the injector make is allowed by the rendered Roles and
  ClusterRoles, verb by verb, and every rule is used.
- The dashboard's and the alerts' expressions use only metrics and labels the binaries export.
- The injector fills its Secret, writes its CA into the webhook, and answers an AdmissionReview
  over TLS with the golden patch.
- `kubectl rollcall check` passes on this install and names the failure when RBAC lacks a
  verb, a pool has a problem, or the controller is down."""

import base64
import http.server
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import threading
import unittest
import urllib.request

import chartkit as kit
import manifests
import promql

SYSTEM = {}
CONTROLLER_USER = f"system:serviceaccount:{kit.NAMESPACE}:rollcall-controller"
INJECTOR_USER = f"system:serviceaccount:{kit.NAMESPACE}:rollcall-injector"
# Granted on purpose, but not called in this run (with the reason).
NOT_EXERCISED = {
    (CONTROLLER_USER, "create", "authorization.k8s.io", "subjectaccessreviews", ""):
        "the sidecar here watches a pool in its own namespace, which needs no review",
    (CONTROLLER_USER, "patch", "events.k8s.io", "events", ""):
        "kube-runtime's Recorder patches an Event only when one status write repeats it",
}
# Labels Prometheus adds to every series from the scrape target.
TARGET_LABELS = {"namespace", "pod", "instance", "job", "container", "service", "endpoint"}


class Backend(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def slice_for(name, port):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": "shop", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True, "serving": True},
                           "targetRef": {"kind": "Pod", "name": name, "namespace": "shop"}}]}


def leader_endpoints(cluster):
    """The endpoints of the controller Service's one EndpointSlice, which the leader writes."""
    found = cluster.get(f"/apis/discovery.k8s.io/v1/namespaces/{kit.NAMESPACE}/endpointslices/rollcall-controller")
    return found.get("endpoints") or []


def setUpModule():
    kit.skip_without_binaries("rollcall-devcluster", "rollcall-controller", "rollcall-sidecar",
                              "rollcall-injector", "kubectl-rollcall")
    cluster = kit.Cluster()
    procs = kit.Processes(cluster.dir)
    SYSTEM.update(cluster=cluster, procs=procs)
    kit.install(cluster)
    controller_kubeconfig = cluster.kubeconfig_for(
        cluster.service_account_token(kit.NAMESPACE, "rollcall-controller"), os.path.join(cluster.dir, "controller.kubeconfig"))
    injector_kubeconfig = cluster.kubeconfig_for(
        cluster.service_account_token(kit.NAMESPACE, "rollcall-injector"), os.path.join(cluster.dir, "injector.kubeconfig"))

    backend = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Backend)
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    SYSTEM["backend"] = backend
    dead_port = kit.free_port()
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    cluster.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
                   "spec": {"ports": [{"name": "http", "port": 80}]}})
    cluster.apply(slice_for("web-live", backend.server_address[1]))
    cluster.apply(slice_for("web-dead", dead_port))
    cluster.apply({"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool",
                   "metadata": {"name": "web", "namespace": "shop"},
                   "spec": {"service": {"name": "web", "port": "http"}, "healthCheck": {"type": "None"},
                            "outlierDetection": {"consecutiveGatewayErrors": 3}}})

    config = cluster.get(f"/api/v1/namespaces/{kit.NAMESPACE}/configmaps/rollcall-injector")
    settings = os.path.join(cluster.dir, "sidecar.json")
    with open(settings, "w") as f:
        f.write(config["data"]["sidecar.json"])
    webhook, webhook_admin = kit.free_port(), kit.free_port()
    SYSTEM["webhook_url"] = f"https://127.0.0.1:{webhook}"
    SYSTEM["injector_admin"] = f"http://127.0.0.1:{webhook_admin}"
    SYSTEM["injector"] = procs.start("injector", [
        kit.binary("rollcall-injector"), f"--listen=127.0.0.1:{webhook}", f"--admin-listen=127.0.0.1:{webhook_admin}",
        f"--config={settings}", f"--namespace={kit.NAMESPACE}", *injector_args(), "--resync=2s"],
        {"KUBECONFIG": injector_kubeconfig, "RUST_LOG": "info"})
    kit.wait_for("the injector serves a certificate",
                 lambda: kit.http_get(f"{SYSTEM['injector_admin']}/readyz")[0] == 200, timeout=60,
                 process=SYSTEM["injector"])
    # The roster channel is TLS by default: the injector issues the controller's certificate
    # into rollcall-controller-tls; the controller serves it from files, as the kubelet mounts
    # the Secret for it.
    kit.wait_for("the injector issues the roster certificate", lambda: "tls.crt" in (cluster.get(
        f"/api/v1/namespaces/{kit.NAMESPACE}/secrets/rollcall-controller-tls").get("data") or {}), timeout=60)
    roster_dir = os.path.join(cluster.dir, "roster-tls")
    os.makedirs(roster_dir, exist_ok=True)
    SYSTEM["roster_dir"] = roster_dir
    SYSTEM["roster_ca"] = mount_roster_secret(cluster, roster_dir)

    # The controller names itself in the chart's EndpointSlice while it leads (--leader-endpointslice).
    grpc, metrics = kit.free_port(), kit.free_port()
    SYSTEM["grpc"] = grpc
    SYSTEM["controller_metrics"] = f"http://127.0.0.1:{metrics}"
    SYSTEM["controller"] = procs.start("controller", [
        kit.binary("rollcall-controller"), "run", f"--grpc-listen=127.0.0.1:{grpc}",
        f"--metrics-listen=127.0.0.1:{metrics}", "--identity=rollcall-controller-0",
        f"--lease-namespace={kit.NAMESPACE}", "--lease-duration=4s", "--lease-grace=2s", "--restart-grace=1s",
        "--leader-endpointslice=rollcall-controller", *controller_tls_args(roster_dir)],
        {"KUBECONFIG": controller_kubeconfig, "POD_NAME": "rollcall-controller-0", "POD_IP": "127.0.0.1",
         "RUST_LOG": "info"})
    kit.wait_for("the controller leads", lambda: kit.http_get(f"{SYSTEM['controller_metrics']}/readyz")[0] == 200,
                 timeout=60, process=SYSTEM["controller"])

    kit.wait_for("the leader names itself in the Service's EndpointSlice",
                 lambda: leader_endpoints(cluster), timeout=30)
    SYSTEM["leader_endpoints"] = leader_endpoints(cluster)
    SYSTEM["replica_ready"] = kit.http_get(f"{SYSTEM['controller_metrics']}/readyz/replica")[0]

    # The sidecar runs as Pod shop/client-0 and presents a token bound to it (audience
    # rollcall), as the injected projected volume gives it; the controller reviews it.
    # It is scheduled on Node node-a, whose zone the controller reads for it.
    cluster.apply({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "node-a", "labels": {"topology.kubernetes.io/zone": "zone-a"}}})
    cluster.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "client", "namespace": "shop"}})
    cluster.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client-0", "namespace": "shop"},
                   "spec": {"serviceAccountName": "client", "nodeName": "node-a",
                            "containers": [{"name": "app", "image": "app"}]}})
    pod = cluster.get("/api/v1/namespaces/shop/pods/client-0")
    token = cluster.ok("POST", "/api/v1/namespaces/shop/serviceaccounts/client/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["rollcall"], "expirationSeconds": 3600,
                 "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "client-0",
                                    "uid": pod["metadata"]["uid"]}}})["status"]["token"]
    token_file = os.path.join(cluster.dir, "client-0.token")
    with open(token_file, "w") as f:
        f.write(token)
    listen, admin = kit.free_port(), kit.free_port()
    SYSTEM["sidecar_admin"] = f"http://127.0.0.1:{admin}"
    SYSTEM["sidecar"] = procs.start("sidecar", [
        kit.binary("rollcall-sidecar"), f"--controller=https://127.0.0.1:{grpc}",
        f"--pool=shop/web=127.0.0.1:{listen}", f"--admin-listen=127.0.0.1:{admin}"],
        {"POD_NAME": "client-0", "POD_NAMESPACE": "shop", "ROLLCALL_LOG": "info",
         "ROLLCALL_TOKEN_FILE": token_file, **roster_trust()})

    def both_endpoints():
        code, body = kit.http_get(f"{SYSTEM['sidecar_admin']}/endpoints")
        return code == 200 and sum(len(p["endpoints"]) for p in json.loads(body)["pools"]) == 2
    kit.wait_for("the sidecar has the roster", both_endpoints, timeout=60, process=SYSTEM["sidecar"])
    # Traffic: tries that reach the dead endpoint fail to connect and are retried on the live
    # one, until three in a row eject it.
    failures = [code for code, _ in (kit.http_get(f"http://127.0.0.1:{listen}/") for _ in range(60)) if code != 200]
    SYSTEM["client_failures"] = failures

    def ejected():
        pool = cluster.get("/apis/rollcall.dev/v1alpha1/namespaces/shop/backendpools/web")
        return (pool or {}).get("status", {}).get("endpoints", {}).get("ejected") == 1
    kit.wait_for("the pool's status shows the ejection", ejected, timeout=60)
    kit.wait_for("the EndpointEjected Event", lambda: any(
        e.get("reason") == "EndpointEjected"
        for e in cluster.get("/apis/events.k8s.io/v1/namespaces/shop/events")["items"]), timeout=30)

    SYSTEM["scrapes"] = {name: kit.http_get(f"{url}/metrics")[1] for name, url in [
        ("controller", SYSTEM["controller_metrics"]), ("sidecar", SYSTEM["sidecar_admin"]),
        ("injector", SYSTEM["injector_admin"])]}


def rendered_args(name, container):
    """The args the installed chart gives one container."""
    deployment = SYSTEM["cluster"].get(f"/apis/apps/v1/namespaces/{kit.NAMESPACE}/deployments/{name}")
    spec = deployment["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == container)["args"]


def injector_args():
    """The chart's injector arguments about the roster certificate (the rest are this machine's)."""
    return [a for a in rendered_args("rollcall-injector", "injector") if a.startswith("--roster-")]


def controller_tls_args(roster_dir):
    """The chart's --tls-* arguments, with the mount path moved to where the test writes the Secret."""
    mount = "/var/run/secrets/rollcall.dev/roster-tls"
    args = [a for a in rendered_args("rollcall-controller", "controller") if a.startswith("--tls-")]
    assert len(args) == 2, f"the chart serves the roster port without TLS: {args}"
    return [a.replace(mount, roster_dir) for a in args]


def mount_roster_secret(cluster, directory):
    """Write rollcall-controller-tls's keys as files, as the kubelet does; return its ca.crt."""
    data = cluster.get(f"/api/v1/namespaces/{kit.NAMESPACE}/secrets/rollcall-controller-tls")["data"]
    for key in ("tls.crt", "tls.key", "ca.crt"):
        path = os.path.join(directory, key)
        with open(path + ".new", "w") as f:
            f.write(base64.b64decode(data[key]).decode())
        os.replace(path + ".new", path)
    return base64.b64decode(data["ca.crt"]).decode()


def roster_trust():
    """What an injected sidecar is given to trust the controller, dialled here by address."""
    return {"ROLLCALL_CONTROLLER_CA_PEM": SYSTEM["roster_ca"],
            "ROLLCALL_CONTROLLER_SERVER_NAME": f"rollcall-controller.{kit.NAMESPACE}.svc"}


def with_real_ca(golden):
    """A golden patch with the fixed test CA replaced by the CA this injector hands out."""
    with open(os.path.join(manifests.GOLDEN, "controller-ca.pem")) as f:
        fixture = f.read()
    text = json.dumps(golden)
    assert json.dumps(fixture)[1:-1] in text, "the golden patch hands sidecars no controller CA"
    return json.loads(text.replace(json.dumps(fixture)[1:-1], json.dumps(SYSTEM["roster_ca"])[1:-1]))


def tearDownModule():
    if "procs" in SYSTEM:
        SYSTEM["procs"].stop_all()
    if "backend" in SYSTEM:
        SYSTEM["backend"].shutdown()
    if "cluster" in SYSTEM:
        SYSTEM["cluster"].stop()
        if not os.environ.get("ROLLCALL_KEEP_LOGS"):
            shutil.rmtree(SYSTEM["cluster"].dir, True)


def rule_allows(rule, entry):
    resource = entry["resource"] + (f"/{entry['subresource']}" if entry.get("subresource") else "")
    names = rule.get("resourceNames") or []
    return (entry["verb"] in rule["verbs"] and entry["apiGroup"] in rule["apiGroups"]
            and resource in rule["resources"] and (not names or entry.get("name") in names))


class Rbac(unittest.TestCase):
    def check_account(self, user, account):
        docs = kit.documents()
        rules = kit.rbac_rules(docs, account)
        calls = [e for e in SYSTEM["cluster"].requests_log() if e["user"] == user and e["resource"]]
        self.assertGreaterEqual(len(calls), 3, f"{account} made no calls")
        refused = [e for e in calls if e["code"] == 403]
        self.assertEqual(refused, [], f"{account} was refused")
        for call in calls:
            allowed = [r for r, scope in rules if rule_allows(r, call) and scope in (None, call.get("namespace"))]
            with self.subTest(call=f"{call['verb']} {call['apiGroup']}/{call['resource']}/{call.get('subresource', '')} {call.get('name', '')}"):
                self.assertTrue(allowed, "no rule of the chart allows it")
        for rule, scope in rules:
            for verb in rule["verbs"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        name_list = rule.get("resourceNames") or [""]
                        for name in name_list:
                            key = (user, verb, group, resource, name)
                            if key in NOT_EXERCISED:
                                continue
                            used = any(rule_allows({**rule, "verbs": [verb], "apiGroups": [group],
                                                    "resources": [resource]}, c)
                                       and scope in (None, c.get("namespace")) for c in calls)
                            with self.subTest(granted=f"{verb} {group}/{resource} {name}".strip()):
                                self.assertTrue(used, f"{account} is granted this but never used it")
        for wildcard in [r for r, _ in rules if "*" in r["verbs"] + r["resources"] + r["apiGroups"]]:
            self.fail(f"wildcard rule {wildcard}")

    def test_the_controller_calls_exactly_what_its_rbac_grants(self):
        self.check_account(CONTROLLER_USER, "rollcall-controller")

    def test_the_injector_calls_exactly_what_its_rbac_grants(self):
        self.check_account(INJECTOR_USER, "rollcall-injector")

    def test_clients_got_no_failure_through_the_ejection(self):
        self.assertEqual(SYSTEM["client_failures"], [])

    def test_the_sidecar_learns_its_nodes_zone_from_the_controller(self):
        log = SYSTEM["procs"].log(SYSTEM["sidecar"])
        self.assertRegex(log, r"zone from the controller.*zone-a", log[-2000:])

    def test_the_leader_is_the_one_endpoint_of_the_selectorless_controller_service(self):
        # Seen while the controller led (a later test stops it, and it empties the slice).
        endpoints = SYSTEM["leader_endpoints"]
        self.assertEqual(len(endpoints), 1, endpoints)
        self.assertEqual(endpoints[0]["addresses"], ["127.0.0.1"])
        self.assertEqual(endpoints[0]["targetRef"]["name"], "rollcall-controller-0")
        self.assertTrue(endpoints[0]["conditions"]["ready"])
        self.assertEqual(SYSTEM["replica_ready"], 200)
        service = SYSTEM["cluster"].get(f"/api/v1/namespaces/{kit.NAMESPACE}/services/rollcall-controller")
        self.assertNotIn("selector", service["spec"])
        found = SYSTEM["cluster"].get(f"/apis/discovery.k8s.io/v1/namespaces/{kit.NAMESPACE}/endpointslices/rollcall-controller")
        self.assertEqual([p["name"] for p in found["ports"]], ["grpc", "metrics"], "the chart's ports stay")


class Metrics(unittest.TestCase):
    def exported(self):
        series, helps = {}, {}
        for text in SYSTEM["scrapes"].values():
            s, h = promql.parse_exposition(text)
            for name, labels in s.items():
                merged = series.setdefault(name, {})
                for label, values in labels.items():
                    merged.setdefault(label, set()).update(values)
            helps.update(h)
        return series, helps

    def expressions(self):
        docs = kit.documents(kit.VARIANTS["monitoring"])
        dashboard = json.loads(kit.find(docs, "ConfigMap", "rollcall-dashboards")["data"]["rollcall.json"])
        found = [("dashboard " + p["title"], t["expr"]) for p in dashboard["panels"] for t in p.get("targets", [])]
        for variable in dashboard["templating"]["list"]:
            query = variable.get("query")
            if isinstance(query, dict):
                found.append(("dashboard variable " + variable["name"], query["query"]))
        rule = kit.find(docs, "PrometheusRule", "rollcall")
        found += [("alert " + r["alert"], r["expr"]) for g in rule["spec"]["groups"] for r in g["rules"]]
        return found

    def test_expressions_use_only_exported_metrics_and_labels(self):
        series, helps = self.exported()
        self.assertIn("rollcall_retries_total", series, "the run produced no retries")
        expressions = self.expressions()
        self.assertGreater(len(expressions), 20)
        for where, expr in expressions:
            with self.subTest(where=where, expr=expr):
                values_query = promql.label_values_query(expr)
                if values_query:
                    metric, label = values_query
                    self.assertTrue(metric in series and label in series[metric], f"{metric}{{{label}}}")
                    continue
                metrics, grouping = promql.uses(expr)
                self.assertTrue(metrics, "no metric in it")
                labels_of_expr = set()
                for metric, matchers in metrics.items():
                    self.assertTrue(metric in series, f"{metric} is not exported")
                    labels = set(series[metric])
                    labels_of_expr |= labels
                    family = metric.rsplit("_bucket", 1)[0]
                    for label, op, value in matchers:
                        self.assertTrue(label in labels | TARGET_LABELS, f"{metric} has no label {label}")
                        if op == "=" and label in labels and not value.startswith("$"):
                            known = series[metric][label] | set(re.findall(r"\w+", helps.get(family, "")))
                            self.assertTrue(value in known, f"{metric}{{{label}}} never takes the value {value!r}")
                for label in grouping - {"le"}:
                    self.assertTrue(label in labels_of_expr | TARGET_LABELS, f"no metric in it has label {label}")


class Injector(unittest.TestCase):
    def test_it_keeps_its_certificate_and_answers_with_the_golden_patch(self):
        cluster = SYSTEM["cluster"]
        secret = cluster.get(f"/api/v1/namespaces/{kit.NAMESPACE}/secrets/rollcall-injector-tls")
        self.assertLessEqual({"ca.crt", "ca.key", "tls.crt", "tls.key"}, set(secret["data"]))
        webhook = cluster.get("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/rollcall-injector")
        bundle = base64.b64decode(webhook["webhooks"][0]["clientConfig"]["caBundle"]).decode()
        self.assertEqual(bundle.strip(), base64.b64decode(secret["data"]["ca.crt"]).decode().strip())

        with open(os.path.join(manifests.GOLDEN, "one-pool.pod.json")) as f:
            pod = json.load(f)
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": "7b1d", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                              "resource": {"group": "", "version": "v1", "resource": "pods"},
                              "namespace": "shop", "operation": "CREATE", "userInfo": {"username": "tests"},
                              "object": pod}}
        tls = ssl.create_default_context(cadata=bundle)
        tls.check_hostname = False  # the certificate names the Service; checked below by name
        request = urllib.request.Request(f"{SYSTEM['webhook_url']}/mutate", data=json.dumps(review).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, context=tls, timeout=10) as answer:
            response = json.load(answer)["response"]
        self.assertEqual(response["uid"], "7b1d")
        self.assertTrue(response["allowed"])
        self.assertEqual(response["patchType"], "JSONPatch")
        with open(os.path.join(manifests.GOLDEN, "one-pool.expected.json")) as f:
            golden = with_real_ca(json.load(f)["patch"])
        self.assertEqual(json.loads(base64.b64decode(response["patch"])), golden)

        # The certificate chains to the caBundle and is for the Service's name, as the API
        # server checks it; any other name is refused.
        port = int(SYSTEM["webhook_url"].rsplit(":", 1)[1])
        checked = ssl.create_default_context(cadata=bundle)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with checked.wrap_socket(raw, server_hostname=f"rollcall-injector.{kit.NAMESPACE}.svc") as tls_socket:
                self.assertTrue(tls_socket.getpeercert())
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with self.assertRaises(ssl.SSLCertVerificationError):
                checked.wrap_socket(raw, server_hostname="elsewhere.example")
        with open(os.path.join(manifests.GOLDEN, "malformed-annotation.pod.json")) as f:
            malformed = dict(review, request=dict(review["request"], object=json.load(f)))
        request = urllib.request.Request(f"{SYSTEM['webhook_url']}/mutate", data=json.dumps(malformed).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, context=tls, timeout=10) as answer:
            refused = json.load(answer)["response"]
        self.assertFalse(refused["allowed"])
        self.assertIn("rollcall.dev/pools: entry 1", refused["status"]["message"])


class RosterTLS(unittest.TestCase):
    """TLS on the roster channel with no configuration: the injector issues the controller's
    certificate from the CA the API server already trusts for the webhook, the controller
    serves it, sidecars verify it by the Service's name, and a renewal is served without a
    restart while the sidecar keeps its roster."""

    def served(self, name):
        """The certificate (DER) a fresh handshake with the roster port shows for `name`."""
        checked = ssl.create_default_context(cadata=SYSTEM["roster_ca"])
        checked.set_alpn_protocols(["h2"])
        with socket.create_connection(("127.0.0.1", SYSTEM["grpc"]), timeout=10) as raw:
            with checked.wrap_socket(raw, server_hostname=name) as tls_socket:
                return tls_socket.getpeercert(binary_form=True)

    def test_the_controller_serves_the_injectors_certificate_and_a_renewal_without_a_restart(self):
        cluster = SYSTEM["cluster"]
        path = f"/api/v1/namespaces/{kit.NAMESPACE}/secrets/rollcall-controller-tls"
        secret = cluster.get(path)
        self.assertEqual({"ca.crt", "tls.crt", "tls.key"}, set(secret["data"]),
                         "the roster Secret never holds the CA key")
        injector_ca = base64.b64decode(cluster.get(
            f"/api/v1/namespaces/{kit.NAMESPACE}/secrets/rollcall-injector-tls")["data"]["ca.crt"]).decode()
        self.assertEqual(SYSTEM["roster_ca"].strip(), injector_ca.strip())
        service_name = f"rollcall-controller.{kit.NAMESPACE}.svc"
        first = self.served(service_name)
        with self.assertRaises(ssl.SSLCertVerificationError):
            self.served("elsewhere.example")
        # Plaintext h2c on the roster port gets no answer but a TLS alert or a close.
        with socket.create_connection(("127.0.0.1", SYSTEM["grpc"]), timeout=10) as raw:
            raw.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            self.assertFalse(raw.recv(64).startswith(b"\x00\x00"), "an HTTP/2 frame over plaintext")

        # Renewal: the Secret loses its pair; the injector issues a new one on its next round,
        # the kubelet (here: the test) swaps the files, the controller serves it from a fresh
        # handshake on, and the sidecar still has its roster.
        secret["data"] = {}
        cluster.ok("PUT", path, secret)
        kit.wait_for("the injector issues a new roster certificate", lambda: "tls.crt" in (
            cluster.get(path).get("data") or {}), timeout=30, process=SYSTEM["injector"])
        mount_roster_secret(cluster, SYSTEM["roster_dir"])
        kit.wait_for("the controller serves the renewed certificate", lambda: self.served(service_name) != first,
                     timeout=40, process=SYSTEM["controller"])
        code, body = kit.http_get(f"{SYSTEM['sidecar_admin']}/endpoints")
        self.assertEqual(code, 200)
        self.assertEqual(sum(len(p["endpoints"]) for p in json.loads(body)["pools"]), 2)

    def test_a_sidecar_refuses_a_plaintext_controller_on_another_host(self):
        run = subprocess.run([kit.binary("rollcall-sidecar"), "--controller=http://10.255.255.1:8300",
                              "--pool=shop/web=127.0.0.1:0", "--admin-listen=127.0.0.1:0"],
                             capture_output=True, text=True, timeout=30,
                             env={"POD_NAME": "x", "POD_NAMESPACE": "shop", "PATH": os.environ.get("PATH", "")})
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("--insecure-plaintext-controller", run.stderr)


def check(*args):
    cluster = SYSTEM["cluster"]
    run = subprocess.run([kit.binary("kubectl-rollcall"), "check", "-o", "json", *args],
                         env={**os.environ, "KUBECONFIG": cluster.kubeconfig}, capture_output=True, text=True, timeout=60)
    try:
        report = json.loads(run.stdout)
    except ValueError:
        raise AssertionError(f"not JSON: {run.stdout}\n{run.stderr}")
    failed = [c for cat in report["categories"] for c in cat["checks"] if c["result"] == "error"]
    return run.returncode, report, failed


class InjectedSidecar(unittest.TestCase):
    def test_the_sidecar_starts_with_the_injected_command_line(self):
        """The injected container's args and env, as the golden patches have them (the plain one
        and the one with every sidecar option an annotation can set), with only the addresses
        moved to this machine's free ports: the real sidecar accepts them and gets ready."""
        for case in ("one-pool", "sidecar-threads", "sidecar-max-idle-connections", "engine-default-fast"):
            with self.subTest(case=case):
                self.start_injected(case)

    def start_injected(self, case):
        container = manifests.injected(case)["spec"]["initContainers"][0]
        listen, admin = kit.free_port(), kit.free_port()
        moved = {"--controller=": f"--controller=https://127.0.0.1:{SYSTEM['grpc']}",
                 "--admin-listen=": f"--admin-listen=127.0.0.1:{admin}"}
        args = []
        for arg in container["args"]:
            prefix = next((p for p in moved if arg.startswith(p)), None)
            args.append(moved[prefix] if prefix else arg.replace("127.0.0.1:15001", f"127.0.0.1:{listen}"))
        self.assertEqual(len(args), len(container["args"]))
        env = {e["name"]: e.get("value", "") for e in container["env"]}
        self.assertIn("ROLLCALL_CONTROLLER_CA_PEM", env, "the injected sidecar is handed the controller's CA")
        env.update(POD_NAME="web-1", POD_NAMESPACE="shop", **roster_trust())
        sidecar = SYSTEM["procs"].start(f"injected-sidecar-{case}", [kit.binary("rollcall-sidecar"), *args], env)
        try:
            kit.wait_for("the injected sidecar is ready",
                         lambda: kit.http_get(f"http://127.0.0.1:{admin}/ready")[0] == 200, timeout=30, process=sidecar)
        finally:
            SYSTEM["procs"].stop(sidecar)


class Check(unittest.TestCase):
    """In order: healthy, then each failure introduced and removed, the controller's death last."""

    def mark_ready(self, name, ready):
        SYSTEM["cluster"].ok("PATCH", f"/apis/apps/v1/namespaces/{kit.NAMESPACE}/deployments/{name}/status",
                             {"status": {"replicas": 2, "readyReplicas": ready, "availableReplicas": ready}},
                             "application/merge-patch+json")

    def test_check_passes_and_names_each_failure(self):
        cluster = SYSTEM["cluster"]
        # What the kubelet and the Deployment controller would report for running pods.
        self.mark_ready("rollcall-controller", 1)
        self.mark_ready("rollcall-injector", 2)
        overrides = ["--controller-metrics", SYSTEM["controller_metrics"], "--webhook-url", SYSTEM["webhook_url"],
                     "--sidecar", SYSTEM["sidecar_admin"], "--pool", "shop/web"]
        code, report, failed = check(*overrides)
        self.assertEqual((code, failed), (0, []), json.dumps(report, indent=1))
        descriptions = [c["description"] for cat in report["categories"] for c in cat["checks"]]
        crd_checks = next(cat for cat in report["categories"] if cat["categoryName"] == "rollcall-crd")["checks"]
        self.assertEqual({c["result"] for c in crd_checks}, {"success"}, json.dumps(crd_checks, indent=1))
        self.assertIn("a controller leads (holds a fresh Lease)", descriptions)
        self.assertIn("its ServiceAccount may make every call the controller makes", descriptions)
        self.assertIn("the webhook answers", descriptions)
        sidecar = next(c for cat in report["categories"] for c in cat["checks"]
                       if c["description"] == f"sidecar {SYSTEM['sidecar_admin']}")
        self.assertIn("Ejected", sidecar["detail"])

        code, report, _ = check("--pre")
        self.assertEqual(code, 0, json.dumps(report, indent=1))

        # RBAC without one verb the controller needs.
        role_path = "/apis/rbac.authorization.k8s.io/v1/clusterroles/rollcall-controller"
        role = cluster.get(role_path)
        broken = json.loads(json.dumps(role))
        for rule in broken["rules"]:
            if rule["resources"] == ["backendpools/status"]:
                rule["verbs"] = []
        broken["rules"] = [r for r in broken["rules"] if r["verbs"]]
        cluster.ok("PUT", role_path, broken)
        code, report, failed = check(*overrides)
        cluster.ok("PUT", role_path, {**role, "metadata": {**role["metadata"], "resourceVersion": None}})
        self.assertEqual(code, 1)
        self.assertEqual([c["description"] for c in failed], ["its ServiceAccount may make every call the controller makes"])
        self.assertIn("patch backendpools/status (rollcall.dev) cluster-wide", failed[0]["detail"])

        # A pool whose Service does not exist.
        cluster.apply({"apiVersion": "rollcall.dev/v1alpha1", "kind": "BackendPool",
                       "metadata": {"name": "ghost", "namespace": "shop"},
                       "spec": {"service": {"name": "nowhere", "port": 80}}})
        kit.wait_for("the ghost pool's status", lambda: (cluster.get(
            "/apis/rollcall.dev/v1alpha1/namespaces/shop/backendpools/ghost") or {}).get("status"), timeout=30)
        code, report, failed = check("--controller-metrics", SYSTEM["controller_metrics"], "--pool", "shop/ghost",
                                     "--sidecar", SYSTEM["sidecar_admin"])
        self.assertEqual(code, 1)
        ready = [c for c in failed if c["description"] == "it is Ready"]
        self.assertTrue(ready, json.dumps(failed, indent=1))
        self.assertIn("nowhere", ready[0]["detail"])

        # The controller stops: it releases the Lease, empties the leader slice, and nothing
        # answers /readyz.
        SYSTEM["procs"].stop(SYSTEM["controller"])
        self.assertEqual(leader_endpoints(cluster), [], "the leader took itself out of the Service")
        code, report, failed = check(*overrides)
        self.assertEqual(code, 1)
        names = [c["description"] for c in failed]
        self.assertIn("a controller leads (holds a fresh Lease)", names)
        self.assertIn("the controller answers /readyz", names)


def load_tests(loader, standard_tests, pattern):
    """RosterTLS needs a live controller and Check stops it at its end: RosterTLS runs first,
    the others in the usual order (by class name)."""
    suite = unittest.TestSuite(loader.loadTestsFromTestCase(RosterTLS))
    for group in standard_tests:
        if not any(isinstance(test, RosterTLS) for test in group):
            suite.addTest(group)
    return suite


if __name__ == "__main__":
    unittest.main()
