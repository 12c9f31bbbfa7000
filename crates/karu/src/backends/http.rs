//! Plain HTTP(S): the URL as written, `Range`, `If-Match` and the configured headers.

use super::{ByteRange, Prepared};
use crate::config::{Settings, check_managed_headers};
use crate::error::Result;
use crate::locator::Locator;
use crate::transport::{MAX_REDIRECTS, RedirectPolicy, Request};

pub(super) fn prepare(
    settings: &Settings,
    locator: &Locator,
    range: ByteRange,
    if_match: Option<&str>,
) -> Result<Prepared> {
    let mut headers = vec![("Range".to_owned(), range.header())];
    if let Some(tag) = if_match {
        headers.push(("If-Match".to_owned(), tag.to_owned()));
    }
    let custom = settings.http_headers()?;
    let generated: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
    check_managed_headers(custom, &generated, false)?;
    headers.extend(custom.iter().cloned());
    Ok(Prepared {
        request: Request {
            url: locator.target().to_owned(),
            headers,
        },
        redirect: RedirectPolicy::Follow {
            max: MAX_REDIRECTS,
            same_origin_only: settings.has_http_headers(),
        },
        region: None,
    })
}
