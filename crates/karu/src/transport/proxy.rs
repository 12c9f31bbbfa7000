//! The HTTP proxy option: `http://host:port` (scheme optional, port 1080 by default as in
//! libcurl), with credentials from `proxy_credentials` or the proxy URL's user information.
//!
//! `http://` targets go to the proxy in absolute form (the connector marks the connection as
//! proxied); `https://` targets go through a CONNECT tunnel. Only HTTP proxies are supported.

use base64::Engine as _;
use http::{HeaderValue, Uri};
use percent_encoding::percent_decode_str;

use crate::{Error, Status};

/// libcurl's default proxy port.
const DEFAULT_PROXY_PORT: u16 = 1080;

/// A parsed proxy.
#[derive(Clone, Debug)]
pub(crate) struct ProxyConfig {
    /// `http://host:port/`: where the connector opens TCP connections.
    pub uri: Uri,
    /// `Basic ...` for `Proxy-Authorization`, when credentials were given.
    pub auth: Option<HeaderValue>,
}

/// Parses the proxy options; an empty or blank `proxy` means no proxy.
pub(crate) fn parse(
    proxy: Option<&str>,
    credentials: Option<&str>,
) -> Result<Option<ProxyConfig>, Error> {
    let Some(proxy) = proxy.map(str::trim).filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let full = if proxy.contains("://") {
        proxy.to_owned()
    } else {
        format!("http://{proxy}")
    };
    // The proxy URL may carry a password: messages show it redacted.
    let bad = |why: &str| {
        let shown = crate::locator::redact_url(&full);
        Error::new(Status::Config, format!("invalid proxy {shown:?}: {why}"))
    };
    let url = url::Url::parse(&full).map_err(|e| bad(&e.to_string()))?;
    if url.scheme() != "http" {
        return Err(bad(&format!(
            "proxy scheme {:?} is not supported (only http)",
            url.scheme()
        )));
    }
    let host = url.host_str().ok_or_else(|| bad("no host"))?;
    let port = url.port().unwrap_or(DEFAULT_PROXY_PORT);
    let uri: Uri = format!("http://{host}:{port}/")
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;

    let from_url = (!url.username().is_empty()).then(|| {
        let user = percent_decode_str(url.username()).decode_utf8_lossy();
        let pass = percent_decode_str(url.password().unwrap_or("")).decode_utf8_lossy();
        format!("{user}:{pass}")
    });
    let credentials = credentials
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .or(from_url);
    let auth = match credentials {
        Some(c) => {
            let encoded = base64::engine::general_purpose::STANDARD.encode(c.as_bytes());
            let mut value = HeaderValue::from_str(&format!("Basic {encoded}"))
                .map_err(|_| bad("credentials cannot be sent"))?;
            value.set_sensitive(true);
            Some(value)
        }
        None => None,
    };
    Ok(Some(ProxyConfig { uri, auth }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_hide_the_password() {
        let e = parse(Some("ftp://user:pr0xy-pass@h:1"), None).unwrap_err();
        assert_eq!(e.status(), Status::Config);
        assert!(!e.message().contains("pr0xy-pass"), "{e}");
        assert!(e.message().contains("<redacted>@h:1"), "{e}");
        let e = parse(Some("user:pr0xy-pass@"), None).unwrap_err();
        assert!(!e.message().contains("pr0xy-pass"), "{e}");
    }

    #[test]
    fn forms() {
        assert!(parse(None, None).unwrap().is_none());
        assert!(parse(Some("  "), Some("u:p")).unwrap().is_none());
        let p = parse(Some("127.0.0.1:3128"), None).unwrap().unwrap();
        assert_eq!(p.uri, "http://127.0.0.1:3128/");
        assert!(p.auth.is_none());
        let p = parse(Some("http://proxy.example"), Some("user:pass"))
            .unwrap()
            .unwrap();
        assert_eq!(p.uri, "http://proxy.example:1080/");
        assert_eq!(p.auth.unwrap(), "Basic dXNlcjpwYXNz");
        let p = parse(Some("http://us%40er:p%3Ass@[::1]:8080"), None)
            .unwrap()
            .unwrap();
        assert_eq!(p.uri, "http://[::1]:8080/");
        // "us@er:p:ss"
        assert_eq!(p.auth.unwrap(), "Basic dXNAZXI6cDpzcw==");
    }

    #[test]
    fn rejects() {
        for bad in ["socks5://127.0.0.1:1080", "https://proxy:443", "http://"] {
            let e = parse(Some(bad), None).unwrap_err();
            assert_eq!(e.status(), Status::Config, "{bad}");
        }
    }
}
