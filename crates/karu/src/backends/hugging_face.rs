//! The Hugging Face backend (spec §5.8).

use super::{ByteRange, Prepared};
use crate::config::Settings;
use crate::error::Result;
use crate::locator::Locator;

pub(super) fn prepare(
    settings: &Settings,
    locator: &Locator,
    range: ByteRange,
    if_match: Option<&str>,
) -> Result<Prepared> {
    let _ = (settings, range, if_match);
    Err(super::not_built(locator, locator.backend()))
}
