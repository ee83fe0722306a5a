//! Who may make a request (RFC 2326 §D.1, with the Digest of `rtsp::auth`): a request whose
//! URL names a mount that is not public needs a configured user allowed to play it; OPTIONS
//! never does (it names nothing and clients send it first), nor a request for `*`. A session
//! belongs to the user who set it up: another user's credentials on it get 403.
//!
//! Wrong credentials are counted per connection; at [`MAX_FAILURES`] the 401 closes the
//! connection, so guessing costs a TCP handshake per few guesses.

use rtsp_types::{headers, Method};

use super::{Ctx, Lookup, Reply, RtspServer};
use crate::rtsp::auth::{Asking, Verdict};
use crate::rtsp::request;
use metronome_time::Timestamp;

/// Wrong credentials one connection may send before its 401 closes it.
pub(crate) const MAX_FAILURES: u32 = 3;

impl RtspServer {
    /// The user a request is made as (`None`: no authentication needed), or the 401/403.
    pub(super) fn authorize(
        &mut self,
        now: Timestamp,
        ctx: &Ctx<'_>,
        session: Lookup,
    ) -> Result<Option<String>, Reply> {
        let Some(auth) = &self.cfg.auth else {
            return Ok(None);
        };
        let owner = match session {
            Lookup::Found(id) => self.sessions.get(&id).and_then(|s| s.user.clone()),
            _ => None,
        };
        let target = ctx.req.request_uri().and_then(|url| {
            let t = request::target(url)?;
            Some((url, t.mount))
        });
        let (url, mount) = match target {
            Some(t) if *ctx.req.method() != Method::Options => t,
            _ => return Ok(owner),
        };
        if auth.spec().is_public(&mount) {
            return Ok(None);
        }
        let method = ctx.req.method().into();
        let asking = Asking {
            now,
            peer: ctx.peer.ip(),
            method,
            url,
            mount: &mount,
            authorization: ctx.req.header(&headers::AUTHORIZATION).map(|v| v.as_str()),
            session_user: owner.as_deref(),
            secure: self.cfg.secure,
        };
        match auth.check(&asking) {
            Verdict::Pass(user) => {
                self.auth_failures.remove(&ctx.conn);
                if owner.is_some_and(|o| o != user) {
                    return Err(Reply::error(403, "the session belongs to another user"));
                }
                Ok(Some(user))
            }
            Verdict::Forbidden(reason) => Err(Reply::error(403, reason)),
            Verdict::Challenge {
                reason,
                stale,
                failed,
            } => {
                let challenge = auth.challenge(now, ctx.peer.ip(), stale, self.cfg.secure);
                let reply = Reply::error(401, reason).header(headers::WWW_AUTHENTICATE, challenge);
                Err(self.count_failure(ctx, failed, reply))
            }
        }
    }

    /// Counts a wrong answer; the one that reaches [`MAX_FAILURES`] closes the connection.
    fn count_failure(&mut self, ctx: &Ctx<'_>, failed: bool, mut reply: Reply) -> Reply {
        if !failed {
            return reply;
        }
        let n = self.auth_failures.entry(ctx.conn).or_insert(0);
        *n += 1;
        if *n >= MAX_FAILURES {
            reply.reason = reply
                .reason
                .map(|r| format!("{r}; {MAX_FAILURES} wrong answers, the connection closes"));
            reply.headers.push((headers::CONNECTION, "close".into()));
        }
        reply
    }
}
