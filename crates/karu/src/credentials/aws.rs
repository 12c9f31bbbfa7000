//! The native aws credential chain (spec §5.9). Built with its backend.

use super::{LoadContext, Resolved};
use crate::error::Result;

/// Loads credentials for `ctx.path`; `Ok(None)` when no source has any.
pub(super) fn load(ctx: &LoadContext) -> Result<Option<Resolved>> {
    let _ = ctx;
    Ok(None)
}
