//! What the sidecar presents to the controller: its projected ServiceAccount token, sent as
//! `authorization: Bearer <token>` on every `Watch` and `Report` call. The file is read at each
//! call (each stream open), never cached: the kubelet replaces a projected token well before it
//! expires, and a reconnect must carry the current one. A file that cannot be read fails the
//! call locally with a message naming the file (the roster loops log it and retry), so a
//! missing volume is reported as such, not as the controller's refusal. The token is never
//! logged.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::{Request, Status};

/// Largest token file read (a projected token is about 1 KiB; Kubernetes caps none, but
/// anything this large is not a token).
const MAX_TOKEN_BYTES: u64 = 64 * 1024;

/// Adds the token to each call; does nothing without a token file.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    token_file: Option<Arc<PathBuf>>,
}

/// Why the token could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot read the ServiceAccount token file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the ServiceAccount token file {0} is empty")]
    Empty(PathBuf),
    #[error("the ServiceAccount token file {0} is larger than 64 KiB: not a token")]
    TooLarge(PathBuf),
    #[error(
        "the ServiceAccount token file {0} holds characters a token cannot have (it must be \
         printable ASCII)"
    )]
    NotAscii(PathBuf),
}

// === impl Credentials ===

impl Credentials {
    /// Send the token in `path` (`None`: send nothing, for a controller run with
    /// `--insecure-no-auth`).
    pub fn new(token_file: Option<PathBuf>) -> Self {
        Self {
            token_file: token_file.map(Arc::new),
        }
    }

    /// The file the token is read from, if any.
    pub fn token_file(&self) -> Option<&Path> {
        self.token_file.as_deref().map(PathBuf::as_path)
    }
}

impl Interceptor for Credentials {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(path) = &self.token_file {
            let value = bearer(path).map_err(|e| Status::unauthenticated(e.to_string()))?;
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }
}

/// `Bearer <token>` from the file at `path`, surrounding whitespace removed.
pub fn bearer(path: &Path) -> Result<MetadataValue<Ascii>, TokenError> {
    let read = |source| TokenError::Read {
        path: path.to_path_buf(),
        source,
    };
    let size = std::fs::metadata(path).map_err(read)?.len();
    if size > MAX_TOKEN_BYTES {
        return Err(TokenError::TooLarge(path.to_path_buf()));
    }
    let bytes = std::fs::read(path).map_err(read)?;
    let token = std::str::from_utf8(&bytes)
        .map_err(|_| TokenError::NotAscii(path.to_path_buf()))?
        .trim();
    if token.is_empty() {
        return Err(TokenError::Empty(path.to_path_buf()));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TokenError::NotAscii(path.to_path_buf()));
    }
    format!("Bearer {token}")
        .parse()
        .map_err(|_| TokenError::NotAscii(path.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(credentials: &mut Credentials) -> Result<Option<String>, Status> {
        let request = credentials.call(Request::new(()))?;
        Ok(request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned))
    }

    #[test]
    fn sends_the_current_token_at_every_call() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "first.jwt\n").unwrap();
        let mut credentials = Credentials::new(Some(path.clone()));
        assert_eq!(
            header(&mut credentials).unwrap().as_deref(),
            Some("Bearer first.jwt")
        );
        // The kubelet swaps the file: the next call carries the new token.
        std::fs::write(&path, "second.jwt").unwrap();
        assert_eq!(
            header(&mut credentials).unwrap().as_deref(),
            Some("Bearer second.jwt")
        );
    }

    #[test]
    fn without_a_token_file_nothing_is_sent() {
        assert_eq!(header(&mut Credentials::default()).unwrap(), None);
    }

    #[test]
    fn unusable_files_fail_the_call_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let cases: [(&str, &[u8], &str); 4] = [
            ("missing", b"", "cannot read"),
            ("empty", b"  \n", "is empty"),
            ("binary", b"ab\xffcd", "printable ASCII"),
            ("spaced", b"two words", "printable ASCII"),
        ];
        for (name, contents, says) in cases {
            let path = dir.path().join(name);
            if name != "missing" {
                std::fs::write(&path, contents).unwrap();
            }
            let status = header(&mut Credentials::new(Some(path.clone()))).unwrap_err();
            assert_eq!(status.code(), tonic::Code::Unauthenticated, "{name}");
            assert!(
                status.message().contains(says),
                "{name}: {}",
                status.message()
            );
            assert!(
                status.message().contains(&*path.to_string_lossy()),
                "{name}: {}",
                status.message()
            );
        }
        let large = dir.path().join("large");
        std::fs::write(&large, vec![b'a'; 70 * 1024]).unwrap();
        assert!(matches!(bearer(&large), Err(TokenError::TooLarge(_))));
    }
}
