"""The injector's certificates without cert-manager, on the local API server with the chart
installed and the injector running as its ServiceAccount, with lifetimes of seconds: it fills
the chart's empty Secret and writes its CA into the webhook; it renews the serving certificate
from the same CA when a third of its life is left; it renews the CA too, keeping the previous
one in the caBundle while it is valid, and serves a certificate the new bundle verifies. The
controller's roster certificate follows in its own Secret. No key material reaches its log."""

import base64
import os
import shutil
import socket
import ssl
import unittest

import chartkit as kit


def pem_blocks(text):
    return [b for b in text.split("-----END CERTIFICATE-----") if "BEGIN CERTIFICATE" in b]


class Rotation(unittest.TestCase):
    def setUp(self):
        kit.skip_without_binaries("rollcall-devcluster", "rollcall-injector")
        self.cluster = kit.Cluster()
        self.procs = kit.Processes(self.cluster.dir)
        self.addCleanup(shutil.rmtree, self.cluster.dir, True)
        self.addCleanup(self.cluster.stop)
        self.addCleanup(self.procs.stop_all)

    def secret(self):
        data = self.cluster.get(f"/api/v1/namespaces/{kit.NAMESPACE}/secrets/rollcall-injector-tls").get("data") or {}
        return {k: base64.b64decode(v).decode() for k, v in data.items()}

    def roster(self):
        data = self.cluster.get(f"/api/v1/namespaces/{kit.NAMESPACE}/secrets/rollcall-controller-tls").get("data") or {}
        return {k: base64.b64decode(v).decode() for k, v in data.items()}

    def bundle(self):
        webhook = self.cluster.get("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/rollcall-injector")
        ca_bundle = webhook["webhooks"][0]["clientConfig"].get("caBundle")
        return base64.b64decode(ca_bundle).decode() if ca_bundle else ""

    def test_certificates_are_created_and_renewed(self):
        kit.install(self.cluster)
        token = self.cluster.service_account_token(kit.NAMESPACE, "rollcall-injector")
        kubeconfig = self.cluster.kubeconfig_for(token, os.path.join(self.cluster.dir, "injector.kubeconfig"))
        config = self.cluster.get(f"/api/v1/namespaces/{kit.NAMESPACE}/configmaps/rollcall-injector")
        settings = os.path.join(self.cluster.dir, "sidecar.json")
        with open(settings, "w") as f:
            f.write(config["data"]["sidecar.json"])
        port, admin = kit.free_port(), kit.free_port()
        injector = self.procs.start("injector", [
            kit.binary("rollcall-injector"), f"--listen=127.0.0.1:{port}", f"--admin-listen=127.0.0.1:{admin}",
            f"--config={settings}", f"--namespace={kit.NAMESPACE}", "--roster-secret=rollcall-controller-tls",
            "--cert-validity=9s", "--ca-validity=15s", "--resync=1s"],
            {"KUBECONFIG": kubeconfig, "RUST_LOG": "debug"})

        first = kit.wait_for("the Secret is filled", lambda: self.secret().get("tls.crt") and self.secret(),
                             timeout=30, process=injector)
        self.assertEqual(self.bundle().strip(), first["ca.crt"].strip())
        # The controller's roster certificate, from the same CA, without the CA key.
        roster = kit.wait_for("the roster Secret is filled", lambda: (r := self.roster()).get("tls.crt") and r,
                              timeout=30, process=injector)
        self.assertEqual(set(roster), {"ca.crt", "tls.crt", "tls.key"})
        self.assertEqual(roster["ca.crt"].strip(), first["ca.crt"].strip())

        renewed = kit.wait_for("the serving certificate is renewed",
                               lambda: (s := self.secret())["tls.crt"] != first["tls.crt"] and s, timeout=30, process=injector)
        self.assertEqual(renewed["ca.crt"], first["ca.crt"], "a certificate renewal must keep the CA")

        rotated = kit.wait_for("the CA is renewed", lambda: (s := self.secret())["ca.crt"] != first["ca.crt"] and s,
                               timeout=30, process=injector)
        self.assertEqual(rotated["ca-previous.crt"], first["ca.crt"])
        bundle = kit.wait_for("the caBundle trusts both CAs", lambda: len(pem_blocks(self.bundle())) == 2 and self.bundle(),
                              timeout=10)
        self.assertIn(rotated["ca.crt"].strip(), bundle)
        self.assertIn(first["ca.crt"].strip(), bundle)
        # The roster Secret follows the rotation: a certificate from the new CA, and both CAs
        # for sidecars to trust while the old one is valid.
        roster_now = kit.wait_for("the roster Secret trusts both CAs", lambda: len(pem_blocks(
            (r := self.roster())["ca.crt"])) == 2 and r, timeout=10)
        self.assertIn(rotated["ca.crt"].strip(), roster_now["ca.crt"])
        self.assertIn(first["ca.crt"].strip(), roster_now["ca.crt"])
        self.assertNotEqual(roster_now["tls.crt"], roster["tls.crt"])

        def serves_the_new_certificate():
            try:
                context = ssl.create_default_context(cadata=rotated["ca.crt"])
                with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                    with context.wrap_socket(raw, server_hostname=f"rollcall-injector.{kit.NAMESPACE}.svc"):
                        return True
            except ssl.SSLError:
                return False
        kit.wait_for("the injector serves a certificate of the new CA", serves_the_new_certificate, timeout=15)

        metrics = kit.http_get(f"http://127.0.0.1:{admin}/metrics")[1]
        self.assertRegex(metrics, r'rollcall_injector_certificate_renewals_total\{what="authority"\} [2-9]')
        self.procs.stop(injector)
        log = self.procs.log(injector)
        self.assertIn("renewed the webhook's certificate", log)
        self.assertNotIn("PRIVATE KEY", log)
        self.assertNotIn(rotated["tls.key"].splitlines()[1], log)
        self.assertNotIn(roster_now["tls.key"].splitlines()[1], log)
        self.assertRegex(metrics, r'rollcall_injector_certificate_renewals_total\{what="roster"\} [2-9]')


if __name__ == "__main__":
    unittest.main()
