"""The chart, offline, with Helm's own engine: strict lint and render for the default and
several non-default value sets, every manifest valid for two Kubernetes versions, values
that break values.schema.json refused with their message, the CRD identical to crds/, and
RBAC free of wildcards."""

import json
import os
import unittest

import helm_python as helm
import yaml

import chartkit as kit


class Lint(unittest.TestCase):
    def test_every_value_set_lints_strictly(self):
        for name, values in kit.VARIANTS.items():
            for version in kit.KUBE_VERSIONS:
                with self.subTest(values=name, kube=version):
                    report = helm.lint(kit.CHART, values, strict=True, namespace=kit.NAMESPACE,
                                       kube_version=f"v{version}")
                    problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
                    self.assertEqual(problems, [], f"{name} on {version}")


class Render(unittest.TestCase):
    def test_every_manifest_validates_against_the_kubernetes_schemas(self):
        for name, values in kit.VARIANTS.items():
            docs = kit.documents(values)
            self.assertGreater(len(docs), 5, name)
            for version in kit.KUBE_VERSIONS:
                for doc in docs:
                    if doc["kind"] in kit.FOREIGN_KINDS:
                        continue
                    with self.subTest(values=name, kube=version, object=f"{doc['kind']}/{doc['metadata']['name']}"):
                        kit.validate(doc, version)

    def test_defaults_render_what_an_install_needs(self):
        docs = kit.documents()
        kinds = sorted({(d["kind"], d["metadata"]["name"]) for d in docs})
        for expected in [("Deployment", "rollcall-controller"), ("Service", "rollcall-controller"),
                         ("ServiceAccount", "rollcall-controller"), ("ClusterRole", "rollcall-controller"),
                         ("Role", "rollcall-controller"), ("PodDisruptionBudget", "rollcall-controller"),
                         ("Deployment", "rollcall-injector"), ("Service", "rollcall-injector"),
                         ("MutatingWebhookConfiguration", "rollcall-injector"),
                         ("Secret", "rollcall-injector-tls"), ("ConfigMap", "rollcall-injector")]:
            self.assertIn(expected, kinds)
        self.assertNotIn("NetworkPolicy", {k for k, _ in kinds})
        self.assertNotIn("ServiceMonitor", {k for k, _ in kinds})

    def test_controller_runs_hardened_with_leader_election_and_probes(self):
        deployment = kit.find(kit.documents(), "Deployment", "rollcall-controller")
        spec = deployment["spec"]
        self.assertEqual(spec["replicas"], 2)
        pod = spec["template"]["spec"]
        self.assertTrue(pod["securityContext"]["runAsNonRoot"])
        self.assertEqual(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault")
        self.assertIn("podAntiAffinity", pod["affinity"])
        self.assertGreaterEqual(pod["terminationGracePeriodSeconds"], 15)
        container = pod["containers"][0]
        security = container["securityContext"]
        self.assertEqual(security["capabilities"]["drop"], ["ALL"])
        self.assertTrue(security["readOnlyRootFilesystem"])
        self.assertFalse(security["allowPrivilegeEscalation"])
        # Every running replica is Ready; the Service finds the leader by its Pod label, so
        # updates can roll one replica at a time.
        self.assertEqual(container["readinessProbe"]["httpGet"]["path"], "/readyz/replica")
        self.assertIn("--leader-endpointslice=rollcall-controller", container["args"])
        self.assertEqual(container["readinessProbe"]["failureThreshold"], 3, "a busy second is not unready")
        self.assertEqual(spec["strategy"]["type"], "RollingUpdate")
        self.assertEqual(spec["strategy"]["rollingUpdate"], {"maxSurge": 0, "maxUnavailable": 1})
        service = kit.find(kit.documents(), "Service", "rollcall-controller")
        # No selector: the leader writes the slice's endpoint, and the controller may patch only
        # that slice, never a Pod.
        self.assertNotIn("selector", service["spec"])
        leader_slice = kit.find(kit.documents(), "EndpointSlice", "rollcall-controller")
        self.assertEqual(leader_slice["metadata"]["labels"]["kubernetes.io/service-name"], "rollcall-controller")
        self.assertEqual(leader_slice["endpoints"], [])
        self.assertEqual({p["name"] for p in leader_slice["ports"]}, {p["name"] for p in service["spec"]["ports"]})
        rules = [rule for rule, _ in kit.rbac_rules(kit.documents(), "rollcall-controller")]
        self.assertFalse([r for r in rules if "pods" in r["resources"]], "no rule on pods")
        slice_rules = [r for r in rules if "endpointslices" in r["resources"] and "patch" in r["verbs"]]
        self.assertEqual([r.get("resourceNames") for r in slice_rules], [["rollcall-controller"]])
        self.assertEqual(container["livenessProbe"]["httpGet"]["path"], "/livez")
        args = container["args"]
        for flag in ["--lease-duration=15s", "--lease-grace=10s", "--lease-namespace=rollcall-system",
                     "--metrics-listen=0.0.0.0:9300", "--grpc-listen=0.0.0.0:8300"]:
            self.assertIn(flag, args)
        self.assertIn("requests", container["resources"])
        env = {e["name"]: e for e in container["env"]}
        self.assertEqual(env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name")

    def test_every_container_is_hardened_in_every_value_set(self):
        for name, values in kit.VARIANTS.items():
            for doc in kit.documents(values):
                if doc["kind"] != "Deployment":
                    continue
                for container in doc["spec"]["template"]["spec"]["containers"]:
                    with self.subTest(values=name, container=container["name"]):
                        security = container["securityContext"]
                        self.assertTrue(security["runAsNonRoot"])
                        self.assertTrue(security["readOnlyRootFilesystem"])
                        self.assertEqual(security["capabilities"]["drop"], ["ALL"])
                        self.assertEqual(security["seccompProfile"]["type"], "RuntimeDefault")

    def test_webhook_ignores_failures_and_only_sees_labelled_namespaces(self):
        webhook = kit.find(kit.documents(), "MutatingWebhookConfiguration", "rollcall-injector")["webhooks"][0]
        self.assertEqual(webhook["failurePolicy"], "Ignore")
        self.assertEqual(webhook["sideEffects"], "None")
        self.assertEqual(webhook["namespaceSelector"]["matchLabels"], {"rollcall.dev/inject": "enabled"})
        excluded = webhook["namespaceSelector"]["matchExpressions"][0]["values"]
        self.assertIn("kube-system", excluded)
        self.assertIn("rollcall-system", excluded)
        self.assertNotIn("caBundle", webhook["clientConfig"])
        self.assertEqual(webhook["rules"][0]["operations"], ["CREATE"])

    def test_injector_settings_are_the_golden_tests_settings(self):
        config = kit.find(kit.documents(), "ConfigMap", "rollcall-injector")
        rendered = json.loads(config["data"]["sidecar.json"])
        with open(os.path.join(kit.ROOT, "injector", "tests", "golden", "settings.json")) as f:
            golden = json.load(f)
        self.assertEqual(rendered, golden, "regenerate injector/tests/golden/settings.json from the chart")

    def test_cert_manager_mode_replaces_the_self_managed_secret(self):
        docs = kit.documents(kit.VARIANTS["cert-manager"])
        kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
        self.assertIn(("Certificate", "rollcall-injector"), kinds)
        self.assertNotIn(("Secret", "rollcall-injector-tls"), kinds)
        webhook = kit.find(docs, "MutatingWebhookConfiguration", "rollcall-injector")
        self.assertEqual(webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                         "rollcall-system/rollcall-injector")
        role = kit.find(docs, "Role", "rollcall-injector")
        self.assertEqual(role["rules"][0]["verbs"], ["get"])
        self.assertNotIn(("ClusterRole", "rollcall-injector"), kinds)

    def test_dashboard_is_grafana_json_and_alerts_cover_the_issue(self):
        docs = kit.documents(kit.VARIANTS["monitoring"])
        dashboard = json.loads(kit.find(docs, "ConfigMap", "rollcall-dashboards")["data"]["rollcall.json"])
        titles = [p["title"] for p in dashboard["panels"]]
        for wanted in ["Endpoint state, sidecars per state", "Ejections by reason", "Pools in panic",
                       "Requests versus attempts", "Retry budget used", "Roster propagation"]:
            self.assertIn(wanted, titles)
        rule = kit.find(docs, "PrometheusRule", "rollcall")
        alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]}
        self.assertLessEqual({"RollcallPoolPanic", "RollcallEjectedShareHigh", "RollcallSidecarNotConnected",
                              "RollcallRetryBudgetNearlyExhausted"}, alerts)
        expr = next(r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]
                    if r.get("alert") == "RollcallEjectedShareHigh")
        self.assertIn("> 0.5", expr, "the threshold comes from the values")


class Crd(unittest.TestCase):
    def test_chart_crd_is_the_generated_one(self):
        with open(os.path.join(kit.ROOT, "crds", "backendpool.yaml")) as f:
            generated = f.read()
        with open(os.path.join(kit.CHART, "crds", "backendpool.yaml")) as f:
            chart = f.read()
        self.assertEqual(chart, generated, "copy crds/backendpool.yaml into charts/rollcall/crds/")
        self.assertEqual(os.listdir(os.path.join(kit.CHART, "crds")), ["backendpool.yaml"])


class Rbac(unittest.TestCase):
    def test_no_wildcards_in_any_value_set(self):
        for name, values in kit.VARIANTS.items():
            for doc in kit.documents(values):
                if doc["kind"] not in ("Role", "ClusterRole"):
                    continue
                for rule in doc["rules"]:
                    for field in ("verbs", "resources", "apiGroups", "resourceNames"):
                        with self.subTest(values=name, role=doc["metadata"]["name"], field=field):
                            self.assertNotIn("*", rule.get(field, []))
                            self.assertFalse(any("*" in v for v in rule.get(field, []) if v))


class Schema(unittest.TestCase):
    """A wrong value fails at install, with a message naming it."""

    def refused(self, values, *fragments):
        with self.assertRaises(helm.HelmError) as caught:
            kit.render(values)
        message = str(caught.exception)
        for fragment in fragments:
            self.assertIn(fragment, message)
        return message

    def test_typos_and_wrong_types_are_refused(self):
        self.refused({"controler": {}}, "controler")
        self.refused({"controller": {"replicas": 0}}, "replicas")
        self.refused({"controller": {"replicas": "two"}}, "replicas")
        self.refused({"injector": {"failurePolicy": "Maybe"}}, "failurePolicy")
        self.refused({"controller": {"lease": {"duration": "15", "grace": "5s"}}}, "duration")
        self.refused({"sidecar": {"adminPort": 70000}}, "adminPort")
        self.refused({"sidecar": {"http1Engine": "turbo"}}, "http1Engine")
        self.refused({"injector": {"certificates": {"mode": "vault"}}}, "mode")
        self.refused({"controller": {"resources": {"limits": {"memory": "lots"}}}}, "memory")
        self.refused({"monitoring": {"prometheusRule": {"enabled": True, "ejectedShareThreshold": 3}}},
                     "ejectedShareThreshold")

    def test_roster_tls_needs_both_the_certificate_and_the_ca(self):
        self.refused({"controller": {"tls": {"secretName": "roster-tls"}}},
                     "controller.tls.secretName", "sidecar.controllerCA.configMap")
        self.refused({"sidecar": {"controllerCA": {"configMap": "roster-ca"}}},
                     "controller.tls.secretName")
        docs = kit.documents(kit.VARIANTS["roster-tls"])
        deployment = next(d for d in docs if d["kind"] == "Deployment"
                          and d["metadata"]["name"] == "rollcall-controller")
        pod = deployment["spec"]["template"]["spec"]
        args = pod["containers"][0]["args"]
        mount = pod["containers"][0]["volumeMounts"][0]["mountPath"]
        self.assertIn(f"--tls-cert-file={mount}/tls.crt", args)
        self.assertIn(f"--tls-key-file={mount}/tls.key", args)
        self.assertEqual(pod["volumes"], [{"name": "roster-tls", "secret": {"secretName": "rollcall-controller-tls"}}])

    def test_the_roster_channel_is_tls_by_default_with_the_injectors_certificate(self):
        docs = kit.documents()
        named = {(d["kind"], d["metadata"]["name"]): d for d in docs}
        secret = named[("Secret", "rollcall-controller-tls")]
        self.assertNotIn("data", secret, "created empty: the injector fills it, upgrades keep it")
        controller = named[("Deployment", "rollcall-controller")]["spec"]["template"]["spec"]
        args = controller["containers"][0]["args"]
        self.assertIn("--tls-cert-file=/var/run/secrets/rollcall.dev/roster-tls/tls.crt", args)
        self.assertEqual(controller["volumes"],
                         [{"name": "roster-tls", "secret": {"secretName": "rollcall-controller-tls"}}])
        injector = named[("Deployment", "rollcall-injector")]["spec"]["template"]["spec"]
        self.assertIn("--roster-secret=rollcall-controller-tls", injector["containers"][0]["args"])
        role = named[("Role", "rollcall-injector")]
        self.assertEqual(role["rules"][0]["resourceNames"], ["rollcall-injector-tls", "rollcall-controller-tls"])
        settings = json.loads(named[("ConfigMap", "rollcall-injector")]["data"]["sidecar.json"])
        self.assertEqual(settings["controllerURL"], f"https://rollcall-controller.{kit.NAMESPACE}.svc:8300")
        self.assertFalse(settings["insecurePlaintext"])
        self.assertNotIn("appProtocol", named[("Service", "rollcall-controller")]["spec"]["ports"][0])

    def test_plaintext_is_asked_for_by_name_and_tls_without_an_injector_needs_a_certificate(self):
        self.refused({"injector": {"enabled": False}}, "controller.tls.plaintext=true", "controller.tls.secretName")
        self.refused({"injector": {"certificates": {"mode": "cert-manager"}}}, "injector.certificates.mode=self")
        self.refused({"controller": {"tls": {"plaintext": True, "secretName": "x"}},
                      "sidecar": {"controllerCA": {"configMap": "y"}}}, "choose one")
        named = {(d["kind"], d["metadata"]["name"]): d for d in kit.documents({"controller": {"tls": {"plaintext": True}}})}
        self.assertNotIn(("Secret", "rollcall-controller-tls"), named)
        controller = named[("Deployment", "rollcall-controller")]["spec"]["template"]["spec"]
        self.assertFalse(any(a.startswith("--tls-") for a in controller["containers"][0]["args"]))
        injector = named[("Deployment", "rollcall-injector")]["spec"]["template"]["spec"]
        self.assertFalse(any(a.startswith("--roster-") for a in injector["containers"][0]["args"]))
        settings = json.loads(named[("ConfigMap", "rollcall-injector")]["data"]["sidecar.json"])
        self.assertEqual(settings["controllerURL"], f"http://rollcall-controller.{kit.NAMESPACE}.svc:8300")
        self.assertTrue(settings["insecurePlaintext"])
        self.assertEqual(named[("Service", "rollcall-controller")]["spec"]["ports"][0]["appProtocol"], "kubernetes.io/h2c")

    def test_the_http1_engine_reaches_the_injector_only_when_chosen(self):
        """Unset, the settings carry no engine (each sidecar runs its own default); set, the
        injector gets it as the golden engine-default cases have it."""
        default = json.loads(kit.find(kit.documents(), "ConfigMap", "rollcall-injector")["data"]["sidecar.json"])
        self.assertNotIn("http1Engine", default)
        chosen = kit.find(kit.documents({"sidecar": {"http1Engine": "fast"}}), "ConfigMap", "rollcall-injector")
        settings = json.loads(chosen["data"]["sidecar.json"])
        with open(os.path.join(kit.ROOT, "injector", "tests", "golden", "engine-default-fast.settings.json")) as f:
            golden = json.load(f)
        self.assertEqual(settings, golden)

    def test_the_default_values_pass_the_schema(self):
        with open(os.path.join(kit.CHART, "values.yaml")) as f:
            values = yaml.safe_load(f)
        chart = helm.Chart.load(kit.CHART)
        chart.validate_schema(values)


if __name__ == "__main__":
    unittest.main()
