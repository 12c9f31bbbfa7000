//! Remote probes: `stat` (one GET of byte 0) and `read_ends` (head and suffix in one round
//! trip; where the backend cannot answer suffix ranges, the head, then the tail by offset
//! pinned by `If-Match`), through the batch path's attempt loop, validation and retries.

use std::time::SystemTime;

use http::HeaderMap;
use http::header::LAST_MODIFIED;

use super::{Ends, ObjectInfo, visible_size};
use crate::backends::{self, ByteRange};
use crate::batch::Shared;
use crate::dest;
use crate::engine::exchange::{self, Access, Env, Handler, RangeRead, Step};
use crate::engine::remote::LoopState;
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::transport::Response;
use crate::validate::condition::Condition;
use crate::validate::{self, Suffix};

/// True for 2xx and 416: answers a probe judges itself; others are classified as errors.
fn judged_by_probe(status: u16) -> bool {
    (200..300).contains(&status) || status == 416
}

/// `Range: bytes=0-0`: the object's size and strong ETag.
struct SizeProbe;

impl Handler for SizeProbe {
    type Output = (u64, Option<String>, Option<SystemTime>);

    fn next_request(&self) -> (ByteRange, Option<Condition>) {
        (ByteRange::Span { first: 0, last: 0 }, None)
    }

    async fn on_response(
        &mut self,
        env: &Env<'_>,
        url: &str,
        resp: Response,
    ) -> Step<Self::Output> {
        if !judged_by_probe(resp.status) {
            return exchange::error_step(env, url, resp, false).await;
        }
        // Two bytes are enough to tell a one-byte body from a longer one.
        let (status, headers) = (resp.status, resp.headers);
        let body = match exchange::bounded_prefix(env.settings, url, resp.body, 2).await {
            Ok(body) => body,
            Err(stalled) => return stalled,
        };
        match validate::probe_size(url, status, &headers, body.len() as u64) {
            Ok((total, etag)) => {
                let modified = headers.get(LAST_MODIFIED).and_then(|v| v.to_str().ok());
                Step::Done((total, etag, super::http_date(modified)))
            }
            Err(e) => Step::Fail(e),
        }
    }
}

/// `Range: bytes=-want`: the object's last bytes, or word that the server ignored the form.
struct SuffixProbe {
    want: u64,
}

/// What a suffix request brought back.
enum Tail {
    /// The last `data.len()` bytes of an object of `total` bytes.
    Bytes {
        data: Vec<u8>,
        total: u64,
        etag: Option<String>,
        last_modified: Option<SystemTime>,
    },
    /// The server does not do suffix ranges.
    Ignored,
}

impl Handler for SuffixProbe {
    type Output = Tail;

    fn next_request(&self) -> (ByteRange, Option<Condition>) {
        (ByteRange::Suffix(self.want), None)
    }

    async fn on_response(&mut self, env: &Env<'_>, url: &str, resp: Response) -> Step<Tail> {
        if !judged_by_probe(resp.status) {
            return exchange::error_step(env, url, resp, false).await;
        }
        let (status, headers): (u16, HeaderMap) = (resp.status, resp.headers);
        // One byte past `want` tells a too-long 200 without reading all of it.
        let max = usize::try_from(self.want.saturating_add(1)).unwrap_or(usize::MAX);
        let body = match exchange::bounded_prefix(env.settings, url, resp.body, max).await {
            Ok(body) => body,
            Err(stalled) => return stalled,
        };
        match validate::suffix_answer(url, self.want, status, &headers, body.len() as u64) {
            Ok(Suffix::Ignored) => Step::Done(Tail::Ignored),
            Ok(Suffix::Tail {
                first: _,
                len,
                total,
                etag,
            }) => {
                let len = (len as usize).min(body.len());
                let modified = headers.get(LAST_MODIFIED).and_then(|v| v.to_str().ok());
                Step::Done(Tail::Bytes {
                    data: body[body.len() - len..].to_vec(),
                    total,
                    etag,
                    last_modified: super::http_date(modified),
                })
            }
            Err(e) => Step::Fail(e),
        }
    }
}

/// Reads absolute `[start, start + len)` into a vector; returns it with what the exchange
/// learnt (it may be shorter when the object ends first).
async fn read_span(
    env: &Env<'_>,
    locator: &Locator,
    start: u64,
    len: u64,
    if_match: Option<&str>,
) -> Result<(Vec<u8>, exchange::Fetched)> {
    // Room for the whole span is reserved up front (or the read fails with `NoMem`); bytes
    // then fill it in order, so a span past the object's end costs no more than it holds.
    let mut buf = Vec::new();
    usize::try_from(len)
        .ok()
        .and_then(|n| buf.try_reserve_exact(n).ok())
        .ok_or_else(|| dest::no_memory(usize::try_from(len).unwrap_or(usize::MAX)))
        .map_err(|e| e.context(locator.display()))?;
    if len == 0 {
        let fetched = exchange::Fetched {
            end: start,
            total: None,
            etag: None,
            last_modified: None,
        };
        return Ok((buf, fetched));
    }
    let fetched = {
        // Bytes arrive in order from `start`, and again from an earlier offset after a
        // restart: overwrite what is there, append the rest.
        let sink = |at: u64, data: &[u8], _version: Option<&str>| {
            let i = (at - start) as usize;
            if buf.len() < i {
                buf.resize(i, 0);
            }
            let overlap = (buf.len() - i).min(data.len());
            buf[i..i + overlap].copy_from_slice(&data[..overlap]);
            buf.extend_from_slice(&data[overlap..]);
        };
        let pin = if_match.map(|t| Condition::IfMatch(t.to_owned()));
        let mut read = RangeRead::new(env.settings, start, start + len - 1, pin.as_ref(), sink);
        exchange::run(env, locator, &Access::default(), &mut read).await?
    };
    buf.truncate((fetched.end - start) as usize);
    Ok((buf, fetched))
}

/// Size and strong ETag with one one-byte GET.
pub(crate) async fn stat(state: &LoopState, locator: &Locator) -> Result<ObjectInfo> {
    let env = state.probe_env(None);
    let (total, etag, last_modified) =
        exchange::run(&env, locator, &Access::default(), &mut SizeProbe).await?;
    Ok(ObjectInfo {
        size: visible_size(locator, total),
        etag,
        last_modified,
    })
}

fn changed(locator: &Locator) -> Error {
    Error::new(
        Status::Precondition,
        format!(
            "{}: the object changed between reading its head and its tail",
            locator.display()
        ),
    )
}

/// The `If-Unmodified-Since` pin a head answer gives: its `Last-Modified` and object size.
fn date_pin(f: &exchange::Fetched) -> Option<Condition> {
    Some(Condition::IfUnmodifiedSince {
        date: f.last_modified.clone()?,
        total: f.total,
    })
}

/// Two sizes or strong tags that differ prove a change; a missing one proves nothing.
fn consistent<T: PartialEq>(a: &Option<T>, b: &Option<T>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}

/// Head and tail of the visible object in (usually) one round trip; `counters`, when given,
/// receives the exchanges' statistics (a download sums its probe's).
pub(crate) async fn read_ends(
    state: &LoopState,
    locator: &Locator,
    head: u64,
    tail: u64,
    counters: Option<&Shared>,
) -> Result<Ends> {
    if head == 0 && tail == 0 {
        let info = stat(state, locator).await?;
        return Ok(Ends {
            head: Vec::new(),
            tail: Vec::new(),
            info,
            date_pin: None,
        });
    }
    let env = state.probe_env(counters);
    let woff = locator.window_offset();
    // The visible object ends by byte 2^64 - 1: longer ends ask for nothing more.
    let (head, tail) = (head.min(u64::MAX - woff), tail.min(u64::MAX - woff));
    match locator.window_length() {
        Some(wlen) => bounded(&env, locator, woff, wlen, head, tail).await,
        None => open(&env, locator, woff, head, tail).await,
    }
}

/// A bounded window: both ends by absolute offset, requested together.
async fn bounded(
    env: &Env<'_>,
    locator: &Locator,
    woff: u64,
    wlen: u64,
    head: u64,
    tail: u64,
) -> Result<Ends> {
    let h = head.min(wlen);
    let t = tail.min(wlen);
    let wend = woff + wlen;
    let ended = |end: u64| {
        Error::new(
            Status::Range,
            format!("{}: object ended at byte {end}", locator.display()),
        )
    };
    // The tail needs its own request only when the window is longer than the head part.
    let need_tail = t > 0 && wlen > h;
    let (head_res, tail_res) = tokio::join!(read_span(env, locator, woff, h, None), async {
        if need_tail {
            Some(read_span(env, locator, wend - t, t, None).await)
        } else {
            None
        }
    });
    let (head_buf, head_f) = head_res?;
    if (head_buf.len() as u64) < h {
        return Err(ended(head_f.end));
    }
    let mut etag = head_f.etag.clone();
    let tail_buf = match tail_res {
        Some(r) => {
            let (buf, f) = r?;
            if (buf.len() as u64) < t {
                return Err(ended(f.end));
            }
            if !consistent(&head_f.etag, &f.etag) || !consistent(&head_f.total, &f.total) {
                return Err(changed(locator));
            }
            etag = etag.or(f.etag);
            buf
        }
        None => head_buf[(h - t.min(h)) as usize..].to_vec(),
    };
    let date_pin = date_pin(&head_f);
    Ok(Ends {
        head: head_buf,
        tail: tail_buf,
        info: ObjectInfo {
            size: wlen,
            etag,
            last_modified: super::http_date(head_f.last_modified.as_deref()),
        },
        date_pin,
    })
}

/// An open window: the head by offset and the tail as a suffix range, at the same time (or,
/// where suffix ranges are refused, the tail by offset once the head told the size).
async fn open(env: &Env<'_>, locator: &Locator, woff: u64, head: u64, tail: u64) -> Result<Ends> {
    let (head_res, tail_res) = tokio::join!(
        async {
            if head > 0 {
                Some(read_span(env, locator, woff, head, None).await)
            } else {
                None
            }
        },
        async {
            if tail > 0 && !backends::answers_suffix_ranges(locator.backend()) {
                Some(Ok(Tail::Ignored))
            } else if tail > 0 {
                Some(
                    exchange::run(
                        env,
                        locator,
                        &Access::default(),
                        &mut SuffixProbe { want: tail },
                    )
                    .await,
                )
            } else {
                None
            }
        }
    );
    let head_part = match head_res.transpose() {
        // A head past the end (416): the visible object may be empty; ask its size.
        Err(e) if e.status() == Status::Range => {
            let (total, etag, last_modified) =
                exchange::run(env, locator, &Access::default(), &mut SizeProbe).await?;
            if total > woff {
                return Err(e);
            }
            return Ok(Ends {
                head: Vec::new(),
                tail: Vec::new(),
                info: ObjectInfo {
                    size: 0,
                    etag,
                    last_modified,
                },
                date_pin: None,
            });
        }
        other => other?,
    };
    let tail_part = tail_res.transpose()?;
    // The object's size and version, from whichever answer told them.
    let (mut total, mut etag) = match &head_part {
        Some((_, f)) => (f.total, f.etag.clone()),
        None => (None, None),
    };
    if let Some(Tail::Bytes {
        total: t, etag: e, ..
    }) = &tail_part
    {
        if !consistent(&total, &Some(*t)) || !consistent(&etag, e) {
            return Err(changed(locator));
        }
        total = Some(*t);
        etag = etag.or(e.clone());
    }
    let total = match (total, &head_part) {
        (Some(t), _) => t,
        // A head that stopped short without a size: the object ended there.
        (None, Some((_, f))) if f.end < woff + head => f.end,
        _ => {
            // No answer told the size (no head, suffix ignored): ask for it.
            let (t, e, _) = exchange::run(env, locator, &Access::default(), &mut SizeProbe).await?;
            if !consistent(&etag, &e) {
                return Err(changed(locator));
            }
            etag = etag.or(e);
            t
        }
    };
    let visible = total.saturating_sub(woff);
    let date_pin = head_part.as_ref().and_then(|(_, f)| date_pin(f));
    let last_modified = match (&head_part, &tail_part) {
        (Some((_, f)), _) => super::http_date(f.last_modified.as_deref()),
        (None, Some(Tail::Bytes { last_modified, .. })) => *last_modified,
        (None, _) => None,
    };
    let head_buf = match head_part {
        Some((mut buf, _)) => {
            buf.truncate(head.min(visible) as usize);
            buf
        }
        None => Vec::new(),
    };
    let t = tail.min(visible);
    let tail_buf = match tail_part {
        None => Vec::new(),
        Some(Tail::Bytes { data, .. }) => {
            data[data.len() - (t as usize).min(data.len())..].to_vec()
        }
        // The head already holds the whole visible object.
        Some(Tail::Ignored) if head_buf.len() as u64 == visible => {
            head_buf[(visible - t) as usize..].to_vec()
        }
        Some(Tail::Ignored) => {
            // No suffix answer: fetch the tail by offset, pinned to the version the head saw.
            let start = woff + visible - t;
            let (buf, f) = match read_span(env, locator, start, t, etag.as_deref()).await {
                Err(e) if e.status() == Status::Precondition => return Err(changed(locator)),
                other => other?,
            };
            if (buf.len() as u64) < t
                || !consistent(&etag, &f.etag)
                || !consistent(&Some(total), &f.total)
            {
                return Err(changed(locator));
            }
            buf
        }
    };
    Ok(Ends {
        head: head_buf,
        tail: tail_buf,
        info: ObjectInfo {
            size: visible,
            etag,
            last_modified,
        },
        date_pin,
    })
}
