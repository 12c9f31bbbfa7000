//! karu reads exact byte ranges from local files, HTTP(S) servers and cloud object stores.
//!
//! A caller describes reads (a [`Locator`], an offset, a length, a destination and a tag);
//! karu plans them into as few transfers as its guards allow and completes each read on its
//! own, with its own status.

mod error;
mod locator;
mod transport;

pub use error::{Error, Result, Status};
pub use locator::{Backend, Locator, Window};
