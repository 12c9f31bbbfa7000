//! The s3 backend (spec §5.8).

use super::{ByteRange, Prepared, Signing};
use crate::config::Settings;
use crate::error::Result;
use crate::locator::Locator;

pub(super) fn prepare(
    settings: &Settings,
    locator: &Locator,
    range: ByteRange,
    if_match: Option<&str>,
    signing: Signing<'_>,
) -> Result<Prepared> {
    let _ = (settings, range, if_match, signing);
    Err(super::not_built(locator, locator.backend()))
}

/// Region hints (`x-amz-bucket-region`, `<Region>`) and expired-token codes.
pub(super) fn correction(
    status: u16,
    headers: &::http::HeaderMap,
    body: &[u8],
    used_region: Option<&str>,
    signed: bool,
) -> Option<super::Correction> {
    let _ = (status, headers, body, used_region, signed);
    None
}
