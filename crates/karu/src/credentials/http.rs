//! Blocking HTTP for credential endpoints (spec §5.9 "Credential HTTP requests"), used on
//! the credential workers and by probes' lookups: the client's HTTP settings, a connect
//! timeout (default 5 s), a total timeout of twice that (and never past the read's
//! deadline), bodies capped at 1 MiB.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use crate::transport::{Answer, Call};

use crate::error::{Error, Result, Status};
use crate::transport::{self, Transport};

/// Largest credential response body.
pub(crate) const BODY_LIMIT: usize = 1 << 20;

/// Default connect timeout of credential requests.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends credential requests with one client's transport settings.
#[derive(Clone, Debug)]
pub(crate) struct CredentialHttp {
    transport: Arc<Transport>,
}

thread_local! {
    /// One small runtime per thread that makes credential calls, built on first use.
    static RUNTIME: RefCell<Option<tokio::runtime::Runtime>> = const { RefCell::new(None) };
}

impl CredentialHttp {
    /// Uses `transport`'s proxy, CA, User-Agent and DNS cache.
    pub(crate) fn new(transport: Arc<Transport>) -> CredentialHttp {
        CredentialHttp { transport }
    }

    /// Sends `call` and waits for the whole answer, within `timeout` (connect) and twice
    /// that in total, and never past `deadline`. Any status is an answer; transport
    /// failures, an expired deadline and bodies over 1 MiB are `Credentials` errors naming
    /// the URL (without its query).
    pub(crate) fn send(
        &self,
        call: Call,
        timeout: Duration,
        deadline: Option<Instant>,
    ) -> Result<Answer> {
        let shown = call.url.split('?').next().unwrap_or_default().to_owned();
        let mut total = timeout.saturating_mul(2);
        if let Some(d) = deadline {
            total = total.min(d.saturating_duration_since(Instant::now()));
        }
        let fail = |why: String| Error::new(Status::Credentials, format!("{shown}: {why}"));
        if total.is_zero() {
            return Err(fail("request timeout exceeded".into()));
        }
        let transport = Arc::clone(&self.transport);
        let fut = async move {
            tokio::time::timeout(total, transport::call::call(&transport, call, BODY_LIMIT)).await
        };
        let outcome = RUNTIME.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| fail(format!("cannot start a runtime: {e}")))?;
                *slot = Some(rt);
            }
            Ok::<_, Error>(slot.as_ref().expect("runtime built").block_on(fut))
        })?;
        match outcome {
            Err(_) => Err(fail(format!("no answer within {} ms", total.as_millis()))),
            Ok(Err(e)) => Err(fail(e.message)),
            Ok(Ok(answer)) => Ok(answer),
        }
    }
}
