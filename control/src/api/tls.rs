//! TLS on the admin listener (`admin.tls`): the server certificate, and
//! with `client_ca` the client certificates it demands (mTLS). rustls with
//! ring, the workspace's one TLS stack.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use crate::config::AdminTls;

/// The acceptor for `tls`, or what is wrong with its files.
pub(crate) fn acceptor(tls: &AdminTls) -> Result<TlsAcceptor, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = certificates(&tls.cert, "admin.tls.cert")?;
    let key = PrivateKeyDer::from_pem_file(&tls.key)
        .map_err(|e| format!("admin.tls.key: {}: {e}", tls.key.display()))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("admin.tls: {e}"))?;
    let builder = match &tls.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates(ca, "admin.tls.client_ca")? {
                roots
                    .add(cert)
                    .map_err(|e| format!("admin.tls.client_ca: {}: {e}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                .build()
                .map_err(|e| format!("admin.tls.client_ca: {}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("admin.tls: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn certificates(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{key}: {}: {e}", path.display()))?
        .collect();
    let certs = certs.map_err(|e| format!("{key}: {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{key}: {}: no PEM certificate in it",
            path.display()
        ));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::PathBuf;

    use super::*;

    fn write(name: &str, text: &str) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("sluice-admin-tls-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn an_acceptor_is_built_from_pem_files_or_the_bad_one_is_named() {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let cert = write("cert.pem", &certified.cert.pem());
        let key = write("key.pem", &certified.key_pair.serialize_pem());
        let empty = write("empty.pem", "");
        let tls = |client_ca: Option<&PathBuf>| AdminTls {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: client_ca.cloned(),
        };
        assert!(acceptor(&tls(None)).is_ok());
        assert!(acceptor(&tls(Some(&cert))).is_ok());
        let err = acceptor(&tls(Some(&empty))).err().unwrap();
        assert_eq!(
            err,
            format!(
                "admin.tls.client_ca: {}: no PEM certificate in it",
                empty.display()
            )
        );
        let missing = PathBuf::from("/nonexistent/cert.pem");
        let err = acceptor(&AdminTls {
            cert: missing.clone(),
            ..tls(None)
        })
        .err()
        .unwrap();
        assert!(
            err.starts_with("admin.tls.cert: /nonexistent/cert.pem: "),
            "{err}"
        );
        for path in [cert, key, empty] {
            std::fs::remove_file(path).unwrap();
        }
    }
}
