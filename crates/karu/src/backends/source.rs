//! The source backend (spec §5.8).

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

/// Expired-token codes and 401 (no region correction for Source).
pub(super) fn correction(status: u16, body: &[u8], signed: bool) -> Option<super::Correction> {
    let _ = (status, body, signed);
    None
}
