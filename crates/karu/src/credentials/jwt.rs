//! RS256 JSON Web Tokens for the OAuth JWT-bearer grant of Google service accounts.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

/// How long an assertion is valid, as Google requires (one hour).
const LIFETIME_SECS: u64 = 3600;

/// An RSA private key that signs assertions.
pub(crate) struct SigningKey(RsaKeyPair);

impl SigningKey {
    /// Parses a PEM RSA key (PKCS#8 `PRIVATE KEY` or PKCS#1 `RSA PRIVATE KEY`). Literal `\n`
    /// sequences (as JSON-escaped keys pasted into options often have) become newlines and CR
    /// characters are dropped first. The error never shows the key.
    pub(crate) fn from_pem(pem: &str) -> Result<SigningKey, &'static str> {
        let pem = pem.replace("\\n", "\n").replace('\r', "");
        const NOT_RSA: &str = "is not a PEM RSA private key";
        let key = match PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|_| NOT_RSA)? {
            PrivateKeyDer::Pkcs8(der) => RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()),
            PrivateKeyDer::Pkcs1(der) => RsaKeyPair::from_der(der.secret_pkcs1_der()),
            _ => return Err(NOT_RSA),
        };
        key.map(SigningKey).map_err(|_| NOT_RSA)
    }

    /// The signed assertion `header.claims.signature` for `issuer` asking for `scope` from
    /// `audience` (the token URL), issued at Unix time `now` and valid for an hour.
    pub(super) fn assertion(
        &self,
        key_id: Option<&str>,
        issuer: &str,
        scope: &str,
        audience: &str,
        now: u64,
    ) -> Result<String, &'static str> {
        let mut header = json!({"alg": "RS256", "typ": "JWT"});
        if let Some(kid) = key_id {
            header["kid"] = Value::from(kid);
        }
        let claims = json!({
            "iss": issuer,
            "scope": scope,
            "aud": audience,
            "iat": now,
            "exp": now + LIFETIME_SECS,
        });
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let mut signature = vec![0; self.0.public_modulus_len()];
        self.0
            .sign(
                &RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                signed.as_bytes(),
                &mut signature,
            )
            .map_err(|_| "could not be used to sign a JWT")?;
        Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}

#[cfg(test)]
mod tests {
    use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
    use aws_lc_rs::rsa::{KeyPair, KeySize};
    use aws_lc_rs::signature::{self, KeyPair as _, UnparsedPublicKey};
    use base64::engine::general_purpose::STANDARD;

    use super::*;

    fn pem_of(der: &[u8]) -> String {
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            STANDARD.encode(der)
        )
    }

    #[test]
    fn assertions_verify_with_the_public_key() {
        let pair = KeyPair::generate(KeySize::Rsa2048).unwrap();
        let der: Pkcs8V1Der = pair.as_der().unwrap();
        // JSON-escaped newlines and CRLF line ends are accepted.
        let escaped = pem_of(der.as_ref())
            .replace('\n', "\\n")
            .replace("-----\\n", "-----\r\n");
        let key = SigningKey::from_pem(&escaped).unwrap();
        let jwt = key
            .assertion(Some("kid1"), "sa@p.iam", "s1", "https://aud", 1_000)
            .unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let decode = |p: &str| -> Value {
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap()
        };
        assert_eq!(
            decode(parts[0]),
            json!({"alg": "RS256", "typ": "JWT", "kid": "kid1"})
        );
        assert_eq!(
            decode(parts[1]),
            json!({"iss": "sa@p.iam", "scope": "s1", "aud": "https://aud", "iat": 1000, "exp": 4600})
        );
        let public = UnparsedPublicKey::new(
            &signature::RSA_PKCS1_2048_8192_SHA256,
            pair.public_key().as_ref(),
        );
        let signed = &jwt[..jwt.rfind('.').unwrap()];
        let sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        public.verify(signed.as_bytes(), &sig).unwrap();
        assert!(public.verify(b"other", &sig).is_err());
    }

    #[test]
    fn non_rsa_or_garbled_keys_are_refused() {
        assert_eq!(
            SigningKey::from_pem("not a key").err(),
            Some("is not a PEM RSA private key")
        );
        let garbled = pem_of(b"\x30\x03\x02\x01\x00");
        assert!(SigningKey::from_pem(&garbled).is_err());
    }
}
