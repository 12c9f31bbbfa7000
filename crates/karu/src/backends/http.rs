//! Plain HTTP(S): the URL as written, `Range`, `If-Match` and the configured headers.

use super::Prepared;
use super::attempt::Attempt;
use crate::error::Result;

pub(super) fn prepare(a: &Attempt) -> Result<Prepared> {
    a.finish(
        a.uri(a.locator.target())?,
        a.read_headers()?,
        a.follow_redirects(),
        false,
    )
}
