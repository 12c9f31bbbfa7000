//! One-off requests with any method and a small body, for credential endpoints (STS, OAuth
//! token endpoints, container and instance metadata). They use the client's proxy, CA
//! settings, connect timeout and User-Agent, but no pool: credential calls are rare.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, PROXY_AUTHORIZATION, USER_AGENT};
use http::{HeaderMap, Method};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::{Transport, TransportError, TransportErrorKind, parse_url};

/// A request to a credential endpoint.
#[derive(Clone, Debug)]
pub(crate) struct Call {
    /// `GET`, `POST` or `PUT`.
    pub(crate) method: Method,
    /// An absolute `http://` or `https://` URL.
    pub(crate) url: String,
    /// Headers (names and values with CR, LF or a colon in a name are refused).
    pub(crate) headers: Vec<(String, String)>,
    /// The body (empty for GET).
    pub(crate) body: Bytes,
}

impl Call {
    /// A request with no headers and no body.
    pub(crate) fn new(method: Method, url: impl Into<String>) -> Call {
        Call {
            method,
            url: url.into(),
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    /// Adds a header.
    pub(crate) fn header(mut self, name: &str, value: impl Into<String>) -> Call {
        self.headers.push((name.to_owned(), value.into()));
        self
    }

    /// Sets a body with its content type.
    pub(crate) fn body(mut self, content_type: &str, body: impl Into<Bytes>) -> Call {
        self.headers
            .push(("Content-Type".to_owned(), content_type.to_owned()));
        self.body = body.into();
        self
    }
}

/// A complete answer, whatever its status.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    /// The status code.
    pub(crate) status: u16,
    /// The whole body (at most the limit given to [`call`]).
    pub(crate) body: Bytes,
}

/// Sends `call` (no redirects) and reads a body of at most `limit` bytes; a longer body is
/// an error.
pub(crate) async fn call(
    transport: &Arc<Transport>,
    call: Call,
    limit: usize,
) -> Result<Answer, TransportError> {
    let uri = parse_url(&call.url)?;
    let plain = uri.scheme_str() == Some("http");
    let mut headers = HeaderMap::with_capacity(call.headers.len() + 2);
    for (name, value) in &call.headers {
        let bad = |what: &str| {
            TransportError::new(
                TransportErrorKind::InvalidUrl,
                format!("invalid credential request header {what} {name:?}"),
            )
        };
        let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad("name"))?;
        let v = HeaderValue::from_str(value).map_err(|_| bad("value for"))?;
        headers.append(n, v);
    }
    if let Some(agent) = transport.options.user_agent.as_deref()
        && !agent.is_empty()
        && !headers.contains_key(USER_AGENT)
        && let Ok(v) = HeaderValue::from_str(agent)
    {
        headers.insert(USER_AGENT, v);
    }
    if plain && let Some(auth) = transport.proxy.as_ref().and_then(|p| p.auth.clone()) {
        headers.insert(PROXY_AUTHORIZATION, auth);
    }
    let mut req = http::Request::new(Full::new(call.body));
    *req.method_mut() = call.method;
    *req.uri_mut() = uri;
    *req.headers_mut() = headers;
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_max_idle_per_host(0)
        .build(transport.connector());
    let resp = client
        .request(req)
        .await
        .map_err(|e| TransportError::classify(&e))?;
    let (parts, body) = resp.into_parts();
    let body = Limited::new(body, limit).collect().await.map_err(|e| {
        if e.is::<http_body_util::LengthLimitError>() {
            TransportError::new(
                TransportErrorKind::Protocol,
                format!("credential response is larger than {limit} bytes"),
            )
        } else {
            TransportError::new(TransportErrorKind::Io, e.to_string())
        }
    })?;
    Ok(Answer {
        status: parts.status.as_u16(),
        body: body.to_bytes(),
    })
}
