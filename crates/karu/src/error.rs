//! The one error type of karu: a [`Status`] that mirrors the C statuses one to one, and a message.

use std::fmt;
use std::sync::Arc;

/// Outcome codes, identical in value to the C ABI's `karu_status`.
///
/// `Ok`, `End` and `Timeout` are non-negative; every other variant is a failure.
/// `Timeout` is also a per-read failure (a read that ran out of its deadline).
///
/// ```
/// use karu::Status;
/// assert_eq!(Status::Range.code(), -8);
/// assert_eq!(Status::from_code(-13), Some(Status::NotFound));
/// assert_eq!(Status::NotFound.as_str(), "object not found");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// Success.
    Ok,
    /// A batch has no more completions.
    End,
    /// A wait or a read ran out of time.
    Timeout,
    /// A locator could not be parsed.
    Uri,
    /// The locator names something karu does not read (an unknown `/vsi*/` handler, a backend
    /// not built in, an ETag on a local file).
    Unsupported,
    /// A bad argument.
    Invalid,
    /// Memory could not be allocated.
    NoMem,
    /// A local file error; the message keeps the operating system's text.
    Io,
    /// A network failure (connect, DNS, TLS, reset, truncated body).
    Network,
    /// An HTTP status or a response that does not prove what was asked.
    Http,
    /// The range passes the end of the object or of the locator's window.
    Range,
    /// The server refused the credentials (401, 403).
    Auth,
    /// The operation was cancelled.
    Cancelled,
    /// An invalid configuration value.
    Config,
    /// Credentials could not be obtained.
    Credentials,
    /// The object does not exist.
    NotFound,
    /// A version condition (If-Match) failed.
    Precondition,
}

impl Status {
    const ALL: [Status; 17] = [
        Status::Ok,
        Status::End,
        Status::Timeout,
        Status::Uri,
        Status::Unsupported,
        Status::Invalid,
        Status::NoMem,
        Status::Io,
        Status::Network,
        Status::Http,
        Status::Range,
        Status::Auth,
        Status::Cancelled,
        Status::Config,
        Status::Credentials,
        Status::NotFound,
        Status::Precondition,
    ];

    /// The C ABI value of this status.
    pub fn code(self) -> i32 {
        match self {
            Status::Ok => 0,
            Status::End => 1,
            Status::Timeout => 2,
            Status::Uri => -1,
            Status::Unsupported => -2,
            Status::Invalid => -3,
            Status::NoMem => -4,
            Status::Io => -5,
            Status::Network => -6,
            Status::Http => -7,
            Status::Range => -8,
            Status::Auth => -9,
            Status::Cancelled => -10,
            Status::Config => -11,
            Status::Credentials => -12,
            Status::NotFound => -13,
            Status::Precondition => -14,
        }
    }

    /// The status with the given C ABI value, if there is one.
    pub fn from_code(code: i32) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.code() == code)
    }

    /// The fixed description the C ABI's `karu_status_string` returns.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::End => "batch drained",
            Status::Timeout => "timed out",
            Status::Uri => "malformed URI",
            Status::Unsupported => "unsupported virtual filesystem",
            Status::Invalid => "invalid argument",
            Status::NoMem => "out of memory",
            Status::Io => "file error",
            Status::Network => "network error",
            Status::Http => "http error",
            Status::Range => "range past end of object",
            Status::Auth => "not authorized",
            Status::Cancelled => "cancelled",
            Status::Config => "invalid configuration",
            Status::Credentials => "credentials unavailable",
            Status::NotFound => "object not found",
            Status::Precondition => "precondition failed",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure: its [`Status`] and a message that names the object (redacted) or the function.
/// A failure that came from the operating system or the transport keeps that cause as its
/// [`source`](std::error::Error::source).
///
/// ```
/// use karu::{Error, Status};
/// let e = Error::new(Status::Uri, "empty URI");
/// assert_eq!(e.status(), Status::Uri);
/// assert_eq!(e.to_string(), "empty URI");
/// assert!(std::error::Error::source(&e).is_none());
/// ```
#[derive(Clone, Debug)]
pub struct Error {
    status: Status,
    message: String,
    /// Shared, so errors stay `Clone` (one transfer's failure completes all its reads).
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

/// Two errors are equal when their status and message are: the cause explains, it does not
/// identify.
impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        self.status == other.status && self.message == other.message
    }
}

impl Eq for Error {}

impl Error {
    /// An error with this status and message.
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
            source: None,
        }
    }

    /// The same error, caused by `source` (an I/O or transport failure).
    pub(crate) fn caused_by(self, source: impl std::error::Error + Send + Sync + 'static) -> Error {
        Error {
            source: Some(Arc::new(source)),
            ..self
        }
    }

    /// The status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The message (never empty for errors karu makes).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error with its message rewritten by `redact`. The cause is kept only when
    /// `redact` leaves its text as it is: a cause must not show what the message hides.
    pub(crate) fn redacted(self, redact: impl Fn(&str) -> String) -> Error {
        let source = self.source.filter(|s| {
            let text = s.to_string();
            redact(&text) == text
        });
        Error {
            message: redact(&self.message),
            source,
            ..self
        }
    }

    /// The same error with `prefix: ` put in front of its message.
    pub fn context(self, prefix: impl fmt::Display) -> Error {
        Error {
            message: format!("{prefix}: {}", self.message),
            ..self
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            f.write_str(self.status.as_str())
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// karu's result type.
///
/// ```
/// fn identity_of(uri: &str) -> karu::Result<String> {
///     Ok(karu::Locator::parse(uri)?.identity().to_string())
/// }
/// assert_eq!(identity_of("s3://bucket/key").unwrap(), "/vsis3/bucket/key");
/// assert_eq!(identity_of("").unwrap_err().status(), karu::Status::Uri);
/// ```
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_is_none() {
        for s in Status::ALL {
            assert_eq!(Status::from_code(s.code()), Some(s));
        }
        assert_eq!(Status::from_code(3), None);
        assert_eq!(Status::from_code(-15), None);
    }

    #[test]
    fn redaction_drops_a_cause_that_shows_what_the_message_hides() {
        use std::error::Error as _;
        let hide = |t: &str| t.replace("s3cr3t", "<redacted>");
        let io = |text: &str| std::io::Error::other(text.to_owned());
        let e = Error::new(Status::Network, "token s3cr3t").caused_by(io("sent s3cr3t"));
        let e = e.redacted(hide);
        assert_eq!(e.message(), "token <redacted>");
        assert!(e.source().is_none());
        let e = Error::new(Status::Network, "token s3cr3t").caused_by(io("reset"));
        assert_eq!(e.redacted(hide).source().unwrap().to_string(), "reset");
    }
}
