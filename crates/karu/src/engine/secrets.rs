//! The secrets in play for one exchange, gathered into the redactor that every error leaving
//! the exchange passes through (issue 12, defect 5): the secret options for the object's
//! path, the locator's own URL secrets, the credentials each attempt signed with, and the
//! credential headers each attempt sent (signatures, tokens read from files).

use std::sync::Arc;

use http::header::{HeaderName, HeaderValue};

use crate::config::Settings;
use crate::credentials::{Auth, Resolved};
use crate::error::Error;
use crate::locator::{Backend, Locator};
use crate::transport::Request;
use crate::validate::redact::{Redactor, is_credential_field};

/// What the attempts of one exchange sent that a message must not show. Success pays only
/// for a few shared references (header values share their bytes with the request; no text
/// is copied); the redactor is built when an error leaves.
#[derive(Default)]
pub(crate) struct Sent {
    /// Credential headers as sent (name, value), each value once.
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The credentials attempts signed with, each once.
    credentials: Vec<Arc<Resolved>>,
}

impl Sent {
    /// Notes an attempt's request and the credentials it was signed with.
    pub(crate) fn note(&mut self, request: &Request, auth: &Auth) {
        for (name, value) in &request.headers {
            if is_credential_field(name.as_str()) && !self.headers.iter().any(|(_, v)| v == value) {
                self.headers.push((name.clone(), value.clone()));
            }
        }
        if let Auth::Signed(resolved) = auth
            && !self.credentials.iter().any(|c| Arc::ptr_eq(c, resolved))
        {
            self.credentials.push(Arc::clone(resolved));
        }
    }
}

/// `error` with every secret of the exchange hidden from its message.
pub(crate) fn redact(settings: &Settings, locator: &Locator, sent: &Sent, error: Error) -> Error {
    redactor(settings, locator, sent).error(error)
}

/// The redactor of one exchange.
fn redactor(settings: &Settings, locator: &Locator, sent: &Sent) -> Redactor {
    let mut r = Redactor::default();
    for (name, value) in settings.secret_options(locator.identity()) {
        match name {
            // A user header may be an API key whatever its name: long values are hidden.
            "KARU_HTTP_HEADERS" => {
                for (n, v) in settings.http_headers().unwrap_or_default() {
                    r.opaque(v);
                    r.header(n, v);
                }
            }
            "KARU_HTTP_PROXY" => r.url(value),
            "KARU_HTTP_PROXY_CREDENTIALS" => r.user_password(value),
            _ => r.secret(value),
        }
    }
    if locator.backend() == Backend::Http {
        r.url(locator.identity());
    }
    for resolved in &sent.credentials {
        let c = &resolved.credentials;
        for value in [
            &c.access_key_id,
            &c.secret_access_key,
            &c.session_token,
            &c.bearer_token,
            &c.sas_token,
        ] {
            r.secret(value);
        }
    }
    for (name, value) in &sent.headers {
        // Values are text: they were built from strings.
        if let Ok(value) = value.to_str() {
            r.header(name.as_str(), value);
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Credentials};
    use crate::error::Status;

    #[test]
    fn gathers_options_locator_credentials_and_headers() {
        let mut config = Config::empty();
        for (name, value) in [
            ("AWS_SECRET_ACCESS_KEY", "option-secret-key"),
            (
                "AZURE_STORAGE_CONNECTION_STRING",
                "AccountName=a;AccountKey=Y29ubmtleQ==",
            ),
            ("HF_TOKEN", "hf_optiontoken"),
            (
                "KARU_HTTP_HEADERS",
                "X-Api-Key: header-api-key\nX-Custom: custom-header-value\nAccept: text/plain",
            ),
            ("KARU_HTTP_PROXY", "http://puser:proxy-pass@127.0.0.1:3128"),
        ] {
            config.set(name, Some(value)).unwrap();
        }
        let settings = config.freeze().unwrap();
        let locator = Locator::parse("https://u:url-pass@h/o?token=url-token").unwrap();
        let mut sent = Sent::default();
        let auth = Auth::Signed(Arc::new(Resolved::new(Credentials {
            session_token: "resolved-session".into(),
            bearer_token: "resolved-bearer".into(),
            ..Credentials::default()
        })));
        let request = Request {
            uri: "https://h/o".parse().unwrap(),
            headers: [
                ("authorization", "AWS4-HMAC-SHA256 Signature=sent-sig"),
                ("range", "bytes=0-9"),
            ]
            .into_iter()
            .map(|(n, v)| (HeaderName::from_static(n), HeaderValue::from_static(v)))
            .collect(),
        };
        sent.note(&request, &auth);
        sent.note(&request, &auth);
        assert_eq!((sent.headers.len(), sent.credentials.len()), (1, 1));
        let echoed = "option-secret-key Y29ubmtleQ== hf_optiontoken header-api-key custom-header-value \
                      proxy-pass cHVzZXI6cHJveHktcGFzcw== url-pass url-token resolved-session \
                      resolved-bearer AWS4-HMAC-SHA256 Signature=sent-sig bytes=0-9 text/plain";
        let e = redact(&settings, &locator, &sent, Error::new(Status::Http, echoed));
        assert_eq!(e.status(), Status::Http);
        assert_eq!(
            e.message(),
            format!("{} bytes=0-9 text/plain", ["<redacted>"; 12].join(" "))
        );
    }
}
