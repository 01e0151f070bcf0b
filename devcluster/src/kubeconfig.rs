//! The kubeconfig a client needs for this server: one cluster (HTTPS on 127.0.0.1, its CA
//! inline), one user with the admin token, one context. kubectl, kube-rs and Helm read it
//! unmodified.

use std::path::Path;

use base64::Engine as _;

/// The kubeconfig YAML for `server` (`https://127.0.0.1:PORT`), its CA and `token`.
pub fn render(server: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: devcluster\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
         users:\n\
         - name: devcluster-admin\n  user:\n    token: {token}\n\
         contexts:\n\
         - name: devcluster\n  context:\n    cluster: devcluster\n    user: devcluster-admin\n    namespace: default\n\
         current-context: devcluster\n\
         preferences: {{}}\n"
    )
}

/// Write it where `path` says, readable by its owner only (it holds a token).
pub fn write(path: &Path, server: &str, ca_pem: &str, token: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    // Written aside and renamed, so a reader never sees half a file.
    let partial = path.with_extension("partial");
    std::fs::write(&partial, render(server, ca_pem, token))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o600))?;
    }
    std::fs::rename(&partial, path)
}
