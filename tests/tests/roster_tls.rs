//! The roster port over TLS: the controller serves a certificate from files (as a mounted
//! `kubernetes.io/tls` Secret gives it), the real sidecar trusts only the CA it is given
//! (`--controller-ca`) and gets its roster, a sidecar trusting another CA gets nothing and says
//! why, and a renewed certificate written over the files is served from the next handshake on,
//! without a restart.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rollcall_e2e::{PATIENCE, demo_api, run_dir, wait_log};
use rollcall_testkit::system::identity::{self, TokenFile};
use rollcall_testkit::system::{Controller, LocalApi, POOL_YAML, Sidecar};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// A CA, and where its certificate is written.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    cert: PathBuf,
}

fn ca(dir: &Path, name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let cert = params.self_signed(&key).unwrap();
    let path = dir.join(format!("{name}-ca.crt"));
    std::fs::write(&path, cert.pem()).unwrap();
    Ca {
        issuer: Issuer::new(params, key),
        cert: path,
    }
}

/// A serving certificate for `localhost` signed by `ca`, written (atomically, as the kubelet
/// swaps a Secret volume) to `tls.crt` and `tls.key` in `dir`; returns its DER.
fn serving_cert(ca: &Ca, dir: &Path) -> Vec<u8> {
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    identity::write_atomically(&dir.join("tls.key"), &key.serialize_pem()).unwrap();
    identity::write_atomically(&dir.join("tls.crt"), &cert.pem()).unwrap();
    cert.der().to_vec()
}

/// The certificate a fresh handshake with `port` is shown, trusting `ca`.
async fn served_cert(port: u16, ca: &Path) -> Vec<u8> {
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(ca).unwrap();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
        let cert: CertificateDer<'static> = cert.unwrap();
        roots.add(cert).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("the handshake succeeds with the right CA");
    let (_, session) = tls.get_ref();
    assert_eq!(session.alpn_protocol(), Some(&b"h2"[..]));
    session.peer_certificates().unwrap()[0].to_vec()
}

/// Pod `shop/<pod>` with its projected token, and the real sidecar for it, dialling `url` and
/// trusting only `ca`.
async fn sidecar_trusting(
    api: &LocalApi,
    dir: &Path,
    url: &str,
    pod: &str,
    ca: &Path,
) -> (Sidecar, TokenFile) {
    let who = identity::create_pod(&api.client, "shop", "client", pod)
        .await
        .unwrap();
    let path = dir.join(format!("{pod}.token"));
    let token = TokenFile::project(&api.client, &who, &path, Duration::from_secs(3600))
        .await
        .unwrap();
    let args = [format!("--controller-ca={}", ca.display())];
    let sidecar = Sidecar::controlled_with(url, "shop/web", pod, Some(&path), &args, dir)
        .await
        .unwrap();
    (sidecar, token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecars_follow_the_controller_over_tls_and_a_renewed_certificate_is_served() {
    let dir = run_dir("roster-tls");
    let (api, backends) = demo_api(&dir, "roster-tls-test", &[POOL_YAML.to_string()])
        .await
        .unwrap();
    let ours = ca(&dir, "cluster");
    let first = serving_cert(&ours, &dir);
    let flags = [
        format!("--tls-cert-file={}", dir.join("tls.crt").display()),
        format!("--tls-key-file={}", dir.join("tls.key").display()),
    ];
    let mut controller = Controller::start(&api.kubeconfig, "rollcall-controller-0", &dir, &flags)
        .await
        .unwrap();
    controller.wait_ready(PATIENCE).await.unwrap();
    let url = format!("https://localhost:{}", controller.grpc.port());

    let (sidecar, _token) = sidecar_trusting(&api, &dir, &url, "client-a", &ours.cert).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while sidecar
        .pool("shop/web")
        .await
        .map_or(0, |p| p.endpoints.len())
        != backends.len()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no roster over TLS; sidecar log:\n{}\ncontroller log:\n{}",
            sidecar.process.log_tail(30),
            controller.process.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A sidecar that trusts another CA never gets a roster, and its log says why.
    let stranger = ca(&dir, "stranger");
    let (distrusting, _token_b) =
        sidecar_trusting(&api, &dir, &url, "client-b", &stranger.cert).await;
    wait_log(&distrusting.process, "invalid peer certificate").await;
    assert_eq!(
        distrusting
            .pool("shop/web")
            .await
            .map_or(0, |p| p.endpoints.len()),
        0
    );

    // Renewal: the files are replaced; the next handshake shows the new certificate.
    assert_eq!(served_cert(controller.grpc.port(), &ours.cert).await, first);
    let renewed = serving_cert(&ours, &dir);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while served_cert(controller.grpc.port(), &ours.cert).await != renewed {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the renewed certificate was never served; controller log:\n{}",
            controller.process.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The connected sidecar kept its stream through the renewal.
    assert_eq!(
        sidecar.pool("shop/web").await.map(|p| p.endpoints.len()),
        Some(backends.len())
    );
}
