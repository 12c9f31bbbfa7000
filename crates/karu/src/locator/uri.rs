//! Terminal URIs: one object, no `/vsisubfile/` around it. Local paths, `file://`, HTTP(S),
//! the cloud schemes and their `/vsi*/` aliases.

use super::{Backend, Inner, Window, encode_key, redact_url, uri_error, window};
use crate::error::{Error, Result, Status};

/// A cloud scheme, its `/vsi*/` alias (also its canonical prefix) and the grammar quoted
/// when a locator does not fit it.
struct Cloud {
    scheme: &'static str,
    vsi: &'static str,
    backend: Backend,
    grammar: &'static str,
}

const CLOUDS: [Cloud; 6] = [
    Cloud {
        scheme: "s3",
        vsi: "/vsis3/",
        backend: Backend::S3,
        grammar: "s3://bucket/key",
    },
    Cloud {
        scheme: "gs",
        vsi: "/vsigs/",
        backend: Backend::Gcs,
        grammar: "gs://bucket/key",
    },
    Cloud {
        scheme: "az",
        vsi: "/vsiaz/",
        backend: Backend::Azure,
        grammar: "az://container/blob",
    },
    Cloud {
        scheme: "abfs",
        vsi: "/vsiadls/",
        backend: Backend::AzureDataLake,
        grammar: "abfs://container/blob",
    },
    Cloud {
        scheme: "hf",
        vsi: "/vsihf/",
        backend: Backend::HuggingFace,
        grammar: "hf://owner/name/path",
    },
    Cloud {
        scheme: "source",
        vsi: "/vsisource/",
        backend: Backend::Source,
        grammar: "source://account/product/key",
    },
];

const VSICURL: &str = "/vsicurl/";

/// Parses one terminal URI, with its optional `#bytes=` window.
pub(super) fn parse_terminal(s: &str) -> Result<Inner> {
    // Which backend comes before which window: an unknown handler is the first thing to say.
    check_handler(s)?;
    let (base, window) = window::split_fragment(s)?;
    let mut inner = parse_base(base)?;
    inner.window = window;
    Ok(inner)
}

/// Rejects `/vsi*` handlers karu does not have (archives, streaming aliases, `/vsimem/`...).
fn check_handler(s: &str) -> Result<()> {
    if !s.starts_with("/vsi") {
        return Ok(());
    }
    // The handler runs up to and including the slash after its name, as in `/vsis3/`.
    let handler = match s[1..].find('/') {
        Some(i) => &s[..i + 2],
        None => s,
    };
    let known =
        handler == "/vsisubfile/" || handler == VSICURL || CLOUDS.iter().any(|c| c.vsi == handler);
    if known {
        return Ok(());
    }
    Err(Error::new(
        Status::Unsupported,
        format!(
            "unsupported virtual filesystem '{handler}'; Karu supports /vsisubfile/, /vsicurl/, \
             /vsis3/, /vsigs/, /vsiaz/, /vsiadls/, /vsihf/ and /vsisource/ \
             (no *_streaming aliases)"
        ),
    ))
}

/// Parses a terminal URI whose `#bytes=` window is already removed.
fn parse_base(s: &str) -> Result<Inner> {
    if s.is_empty() {
        return Err(uri_error("empty URI"));
    }
    if let Some(url) = s.strip_prefix(VSICURL) {
        if url.is_empty() {
            return Err(uri_error("/vsicurl/ has no target"));
        }
        return match url.split_once("://") {
            Some(("http" | "https", _)) => http(url),
            _ => Err(uri_error("/vsicurl/ target must be an HTTP URL")),
        };
    }
    if s.starts_with("/vsi") {
        // `check_handler` let it through, so it is one of the cloud aliases.
        for cloud in &CLOUDS {
            if let Some(rest) = s.strip_prefix(cloud.vsi) {
                if rest.is_empty() {
                    return Err(uri_error(format!("{} has no target", cloud.vsi)));
                }
                return parse_cloud(cloud, rest);
            }
        }
    }
    let Some((scheme, rest)) = s.split_once("://") else {
        return Ok(local(s.to_string(), s.to_string()));
    };
    match scheme {
        "http" | "https" => http(s),
        "file" if rest.is_empty() => Err(uri_error("file:// has no path")),
        "file" => Ok(local(s.to_string(), rest.to_string())),
        _ => match CLOUDS.iter().find(|c| c.scheme == scheme) {
            Some(cloud) => parse_cloud(cloud, rest),
            // Redacted: whatever the scheme, the text may carry a password or a signature.
            None => Err(uri_error(format!("unknown scheme in '{}'", redact_url(s)))),
        },
    }
}

fn local(identity: String, target: String) -> Inner {
    Inner {
        backend: Backend::File,
        identity,
        target,
        container: String::new(),
        key: String::new(),
        window: Window::default(),
    }
}

/// An HTTP(S) URL is kept exactly as written (callers encode it); it needs a host part.
fn http(url: &str) -> Result<Inner> {
    let after = &url[url.find("://").map_or(0, |i| i + 3)..];
    let authority = &after[..after.find(['/', '?', '#']).unwrap_or(after.len())];
    if authority.is_empty() {
        return Err(uri_error("HTTP URL has no authority"));
    }
    Ok(Inner {
        backend: Backend::Http,
        identity: url.to_string(),
        target: url.to_string(),
        container: String::new(),
        key: String::new(),
        window: Window::default(),
    })
}

/// `rest` is what follows `scheme://` (or the `/vsi*/` alias), written as `container/key`.
fn parse_cloud(cloud: &Cloud, rest: &str) -> Result<Inner> {
    // Both `bucket` and `bucket/` lack a key; the message names the bucket alone.
    let grammar_error = || {
        let written = rest.strip_suffix('/').unwrap_or(rest);
        uri_error(format!("expected {} in '{written}'", cloud.grammar))
    };
    if cloud.backend == Backend::HuggingFace {
        return match hugging_face(rest) {
            Some(parsed) => parsed,
            None => Err(grammar_error()),
        };
    }
    // Split at the first slash; the key is kept byte for byte (`a//b`, spaces, dots).
    match rest.split_once('/') {
        Some((container, key)) if !container.is_empty() && !key.is_empty() => {
            let identity = format!("{}{rest}", cloud.vsi);
            Ok(Inner {
                backend: cloud.backend,
                target: identity.clone(),
                identity,
                container: container.to_string(),
                key: key.to_string(),
                window: Window::default(),
            })
        }
        _ => Err(grammar_error()),
    }
}

/// `[datasets/|spaces/]owner/name[@revision]/path`. `None` when the shape is wrong; an
/// error when the shape is right but the name or revision is empty.
fn hugging_face(rest: &str) -> Option<Result<Inner>> {
    let (kind, repo) = ["datasets/", "spaces/"]
        .iter()
        .find_map(|kind| rest.strip_prefix(kind).map(|repo| (*kind, repo)))
        .unwrap_or(("", rest));
    let (owner, after_owner) = repo.split_once('/')?;
    // The revision cannot hold a `/`: the repository segment ends at the next one.
    let (name_rev, path) = after_owner.split_once('/')?;
    if owner.is_empty() || path.is_empty() {
        return None;
    }
    let (name, revision) = name_rev.split_once('@').unwrap_or((name_rev, "main"));
    if name.is_empty() || revision.is_empty() {
        return Some(Err(uri_error("hf:// has an empty repository or revision")));
    }
    let container = format!("{kind}{owner}/{name}");
    let target = format!(
        "/{container}/resolve/{}/{}",
        encode_key(revision),
        encode_key(path)
    );
    Some(Ok(Inner {
        backend: Backend::HuggingFace,
        // Verbatim, `@revision` included: two revisions are two objects.
        identity: format!("/vsihf/{rest}"),
        target,
        container,
        key: path.to_string(),
        window: Window::default(),
    }))
}
