//! Test support for karu: deterministic content (every byte a function of object and offset),
//! and, as the remote issues land, servers and proxies to read it through.

pub mod content;
