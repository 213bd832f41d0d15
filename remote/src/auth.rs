//! Credentials: the shared token (a metadata header compared in constant
//! time), TLS identities (given files or a generated self-signed
//! certificate) and the loopback rule for `--insecure`.

use std::net::SocketAddr;

use sha2::{Digest, Sha256};
use tonic::metadata::MetadataValue;
use tonic::{Request, Status};

/// The metadata header carrying the token (`Bearer <token>`).
pub const TOKEN_HEADER: &str = "authorization";
/// The metadata header naming the session.
pub const SESSION_HEADER: &str = "x-backplane-session";
/// The environment variable the server and the client read the token from.
pub const TOKEN_ENV: &str = "BACKPLANE_REMOTE_TOKEN";

/// Equal byte strings, in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Server-side check of every request's token; `None` accepts all
/// (Unix sockets, whose file mode is the credential, or client certificates).
#[derive(Clone)]
pub struct TokenCheck {
    expected: Option<Vec<u8>>,
}

impl TokenCheck {
    /// Checks for `token`, or nothing.
    pub fn new(token: Option<&str>) -> TokenCheck {
        TokenCheck {
            expected: token.map(|t| format!("Bearer {t}").into_bytes()),
        }
    }
}

impl tonic::service::Interceptor for TokenCheck {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let Some(expected) = &self.expected else {
            return Ok(req);
        };
        match req.metadata().get(TOKEN_HEADER) {
            Some(v) if constant_time_eq(v.as_bytes(), expected) => Ok(req),
            Some(_) => Err(Status::unauthenticated("wrong token")),
            None => Err(Status::unauthenticated(
                "no token: this server needs `authorization: Bearer <token>`",
            )),
        }
    }
}

/// Client-side: adds the token and the session to every request.
#[derive(Clone)]
pub struct ClientHeaders {
    /// `Bearer <token>` when a token is configured.
    pub token: Option<MetadataValue<tonic::metadata::Ascii>>,
    /// The session, once opened.
    pub session: Option<u64>,
}

impl tonic::service::Interceptor for ClientHeaders {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(t) = &self.token {
            req.metadata_mut().insert(TOKEN_HEADER, t.clone());
        }
        if let Some(s) = self.session {
            req.metadata_mut()
                .insert(SESSION_HEADER, MetadataValue::from(s));
        }
        Ok(req)
    }
}

/// A PEM certificate and key.
#[derive(Clone, Debug)]
pub struct Identity {
    /// Certificate chain, PEM.
    pub cert_pem: String,
    /// Private key, PEM.
    pub key_pem: String,
}

impl Identity {
    /// A self-signed certificate for `localhost`, `127.0.0.1`, `::1` and
    /// the given extra names.
    pub fn self_signed(extra_names: &[String]) -> Result<Identity, String> {
        let mut names = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
        ];
        names.extend(extra_names.iter().cloned());
        let ck = rcgen::generate_simple_self_signed(names)
            .map_err(|e| format!("generating a self-signed certificate: {e}"))?;
        Ok(Identity {
            cert_pem: ck.cert.pem(),
            key_pem: ck.signing_key.serialize_pem(),
        })
    }

    /// A new certificate authority (`CN=<name>`, self-signed, allowed to
    /// sign) and `clients` client certificates it signed (`CN=<name>
    /// client <k>`, extended key usage client authentication): what a
    /// server's `--client-ca` and its clients' `BACKPLANE_REMOTE_CERT` /
    /// `_KEY` need, for tests and small setups without a PKI of their own.
    pub fn client_ca(name: &str, clients: usize) -> Result<(Identity, Vec<Identity>), String> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose,
        };
        let fail = |what: &str, e: rcgen::Error| format!("generating {what}: {e}");
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(|e| fail("a CA", e))?;
        ca.distinguished_name.push(DnType::CommonName, name);
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().map_err(|e| fail("a CA key", e))?;
        let ca_cert = ca.self_signed(&ca_key).map_err(|e| fail("a CA", e))?;
        let authority = Identity {
            cert_pem: ca_cert.pem(),
            key_pem: ca_key.serialize_pem(),
        };
        let issuer = Issuer::from_params(&ca, &ca_key);
        let mut out = Vec::with_capacity(clients);
        for k in 0..clients {
            let cn = format!("{name} client {k}");
            let mut p = CertificateParams::new(vec![format!("client-{k}.invalid")])
                .map_err(|e| fail(&cn, e))?;
            p.distinguished_name.push(DnType::CommonName, cn.as_str());
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            let key = KeyPair::generate().map_err(|e| fail(&cn, e))?;
            let cert = p.signed_by(&key, &issuer).map_err(|e| fail(&cn, e))?;
            out.push(Identity {
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
            });
        }
        Ok((authority, out))
    }

    /// SHA-256 of the certificate's PEM text, hex (printed at server start
    /// so that an operator can check the file a client trusts).
    pub fn fingerprint(&self) -> String {
        hex(&Sha256::digest(self.cert_pem.as_bytes()))
    }
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `--insecure` is allowed only on loopback addresses.
pub fn insecure_allowed(addr: &SocketAddr) -> Result<(), String> {
    if addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(format!(
            "--insecure refused on {addr}: plain TCP only on loopback (127.0.0.0/8, ::1); use TLS"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_compare_matches_equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }

    #[test]
    fn insecure_is_refused_off_loopback() {
        assert!(insecure_allowed(&"127.0.0.1:1".parse().unwrap()).is_ok());
        assert!(insecure_allowed(&"[::1]:1".parse().unwrap()).is_ok());
        let err = insecure_allowed(&"0.0.0.0:1".parse().unwrap()).unwrap_err();
        assert!(err.contains("only on loopback"), "{err}");
    }
}
