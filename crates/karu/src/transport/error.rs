//! Transport failures and their classification from the error's structure (downcasts along
//! the source chain, `io::ErrorKind`, hyper's predicates), never from message text.

use std::error::Error as StdError;
use std::fmt;
use std::io;

use super::connector::ConnectTimeout;
use super::dns::ResolveError;
use super::tls::UntrustedSetup;
use crate::Status;

/// What kind of failure a transport error is; the engine decides what to retry from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum TransportErrorKind {
    /// The host name did not resolve.
    Resolve,
    /// No connection could be made (refused, unreachable, proxy refused the tunnel).
    Connect,
    /// Connection setup ran out of time.
    Timeout,
    /// The TLS handshake failed (untrusted certificate, name mismatch, protocol).
    Tls,
    /// The connection broke: reset, send or receive error, or an empty reply.
    Io,
    /// The peer broke HTTP: an unparsable response, an HTTP/2 protocol error.
    Protocol,
    /// A cross-origin redirect while `KARU_HTTP_HEADERS` is set.
    RedirectBlocked,
    /// A redirect to a scheme other than http and https.
    RedirectProtocol,
    /// More redirects than allowed.
    TooManyRedirects,
    /// The request could not be built: a bad URL (or header).
    InvalidUrl,
    /// TLS could not be set up: the configured CA options are unreadable or hold no
    /// certificate.
    Setup,
}

impl TransportErrorKind {
    /// The karu status this failure maps to by default (spec §5.4): a blocked redirect is an
    /// HTTP error, a bad URL a URI error, unusable CA options a configuration error,
    /// everything else a network error.
    pub(crate) fn status(self) -> Status {
        match self {
            TransportErrorKind::RedirectBlocked => Status::Http,
            TransportErrorKind::InvalidUrl => Status::Uri,
            TransportErrorKind::Setup => Status::Config,
            _ => Status::Network,
        }
    }
}

/// A failure to exchange a request and response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TransportError {
    /// What kind of failure.
    pub kind: TransportErrorKind,
    /// Human-readable cause chain.
    pub message: String,
}

impl TransportError {
    /// An error of `kind` with `message`.
    pub(crate) fn new(kind: TransportErrorKind, message: impl Into<String>) -> TransportError {
        TransportError {
            kind,
            message: message.into(),
        }
    }

    /// Classifies an error from hyper-util's client, or from reading a hyper body.
    pub(crate) fn classify(err: &(dyn StdError + 'static)) -> TransportError {
        let chain = causes(err);
        TransportError {
            kind: kind_of(&chain),
            message: message_of(&chain),
        }
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for TransportError {}

impl From<TransportError> for crate::Error {
    fn from(e: TransportError) -> crate::Error {
        crate::Error::new(e.kind.status(), e.message.clone()).caused_by(e)
    }
}

/// The error and its causes. `io::Error::source` skips the error it wraps (it returns the
/// wrapped error's source), so for an `io::Error` the wrapped error is visited explicitly:
/// that is where rustls errors and hyper-rustls's wrapping live.
fn causes<'a>(top: &'a (dyn StdError + 'static)) -> Vec<&'a (dyn StdError + 'static)> {
    let mut out = Vec::new();
    let mut next = Some(top);
    while let Some(e) = next {
        out.push(e);
        if out.len() >= 32 {
            break;
        }
        next = match e.downcast_ref::<io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as &(dyn StdError + 'static)),
            None => e.source(),
        };
    }
    out
}

fn kind_of(chain: &[&(dyn StdError + 'static)]) -> TransportErrorKind {
    use TransportErrorKind as K;
    let any = |f: &dyn Fn(&(dyn StdError + 'static)) -> bool| chain.iter().any(|e| f(*e));
    if any(&|e| e.is::<ResolveError>()) {
        return K::Resolve;
    }
    if any(&|e| e.is::<UntrustedSetup>()) {
        return K::Setup;
    }
    if any(&|e| {
        e.is::<ConnectTimeout>()
            || e.downcast_ref::<io::Error>()
                .is_some_and(|io| io.kind() == io::ErrorKind::TimedOut)
    }) {
        return K::Timeout;
    }
    if any(&|e| e.is::<rustls::Error>()) {
        return K::Tls;
    }
    let connect = chain.first().is_some_and(|e| {
        e.downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some_and(|c| c.is_connect())
    });
    if connect {
        return K::Connect;
    }
    for e in chain {
        if let Some(h) = e.downcast_ref::<hyper::Error>()
            && (h.is_parse() || h.is_parse_status())
        {
            return K::Protocol;
        }
        if let Some(h2) = e.downcast_ref::<h2::Error>() {
            // A peer that closes or refuses politely is a broken connection (retryable
            // upstream); any other reason is a protocol failure.
            let polite = h2.is_io()
                || matches!(
                    h2.reason(),
                    Some(h2::Reason::NO_ERROR | h2::Reason::REFUSED_STREAM | h2::Reason::CANCEL)
                );
            return if polite { K::Io } else { K::Protocol };
        }
    }
    K::Io
}

/// The chain's messages joined with ": ", skipping repeats (wrappers often repeat the text).
fn message_of(chain: &[&(dyn StdError + 'static)]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for e in chain {
        let s = e.to_string();
        if !s.is_empty() && !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_wrapped_errors_are_seen() {
        let tls = io::Error::other(io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        ));
        let e = TransportError::classify(&tls);
        assert_eq!(e.kind, TransportErrorKind::Tls);
        assert!(
            e.message.contains("invalid peer certificate"),
            "{}",
            e.message
        );

        let dns = io::Error::other(ResolveError {
            host: "h.invalid".into(),
            detail: "nope".into(),
        });
        assert_eq!(
            TransportError::classify(&dns).kind,
            TransportErrorKind::Resolve
        );

        let timed = io::Error::new(io::ErrorKind::TimedOut, "slow");
        assert_eq!(
            TransportError::classify(&timed).kind,
            TransportErrorKind::Timeout
        );

        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(
            TransportError::classify(&reset).kind,
            TransportErrorKind::Io
        );
    }

    #[test]
    fn statuses() {
        assert_eq!(TransportErrorKind::RedirectBlocked.status(), Status::Http);
        assert_eq!(TransportErrorKind::Tls.status(), Status::Network);
        let e: crate::Error = TransportError::new(TransportErrorKind::InvalidUrl, "bad").into();
        assert_eq!(e.status(), Status::Uri);
    }
}
