//! The methods that act on sessions (RFC 2326 §10): DESCRIBE, SETUP, PLAY, PAUSE, TEARDOWN.

use metronome_time::Timestamp;
use rtsp_types::headers;
use rtsp_types::Request;

use super::{not_found, Ctx, Lookup, Reply, RtspServer, Session, SessionState};
use crate::rtsp::request::{self, RangeStart};
use crate::rtsp::transport::{self, Offer};
use crate::rtsp::{Backend, Delivery, PlayInfo, SessionId, SetupRequest};

impl RtspServer {
    pub(super) fn describe(&mut self, ctx: &Ctx<'_>, backend: &mut dyn Backend) -> Reply {
        let (url, target) = match target_of(ctx.req) {
            Ok(t) => t,
            Err(reply) => return reply,
        };
        let Some(mount) = backend.mount(&target.mount, ctx.local) else {
            return Reply::error(404, "no such mount");
        };
        if let Some(accept) = ctx.req.header(&headers::ACCEPT) {
            if !request::accepts_sdp(accept.as_str()) {
                return Reply::error(406, "only application/sdp is offered");
            }
        }
        let mut reply = Reply::ok()
            .header(headers::CONTENT_TYPE, "application/sdp")
            .header(
                headers::CONTENT_BASE,
                request::content_base(url, &target.mount),
            );
        reply.body = mount.sdp.into_bytes();
        reply
    }

    pub(super) fn setup(
        &mut self,
        now: Timestamp,
        ctx: &Ctx<'_>,
        session: Lookup,
        user: Option<String>,
        backend: &mut dyn Backend,
    ) -> Reply {
        let (url, target) = match target_of(ctx.req) {
            Ok(t) => t,
            Err(reply) => return reply,
        };
        match session {
            Lookup::NotFound => return not_found(),
            Lookup::Found(id) => {
                let other_mount = self
                    .sessions
                    .get(&id)
                    .is_some_and(|s| s.mount != target.mount);
                let reply = if other_mount {
                    Reply::error(459, "a session serves one mount; SETUP it without Session")
                } else {
                    // RFC 2326 §10.4: a server may refuse to change a session's transport.
                    Reply::error(455, "already set up: TEARDOWN, then SETUP again")
                };
                return reply.session(id);
            }
            Lookup::Absent => {}
        }
        if let Err(reply) = self.room_for_session(ctx) {
            return reply;
        }
        let Some(mount) = backend.mount(&target.mount, ctx.local) else {
            return Reply::error(404, "no such mount");
        };
        let Some(header) = ctx.req.header(&headers::TRANSPORT) else {
            return Reply::error(461, "SETUP needs a Transport header");
        };
        let used_channels = self.channels_in_use(ctx);
        let offer = Offer {
            peer: ctx.peer.ip(),
            multicast: mount.multicast,
            used_channels: &used_channels,
            srtp: mount.srtp,
            feedback: mount.feedback,
        };
        let chosen = match transport::choose(header.as_str(), &offer) {
            Ok(r) => r,
            Err(reason) => return Reply::error(461, reason),
        };
        let id = self.new_id();
        let setup = SetupRequest {
            session: id,
            conn: ctx.conn,
            mount: &target.mount,
            peer: ctx.peer,
            local: ctx.local,
            transport: chosen.requested,
        };
        match backend.setup(&setup) {
            Err(r) => Reply::refusal(r),
            Ok(delivery) => {
                // Content-Base here too (RFC 2326 §12.11): clients that build the PLAY URL from
                // the SETUP response (VLC's SAT>IP client) then name the mount.
                let base = request::content_base(url, &target.mount);
                self.sessions.insert(
                    id,
                    Session {
                        conn: ctx.conn,
                        peer: ctx.peer,
                        mount: target.mount,
                        url: url.to_string(),
                        duration: mount.duration,
                        delivery,
                        state: SessionState::Ready,
                        last_play: None,
                        paused_at: None,
                        last_seen: now,
                        user,
                    },
                );
                Reply::ok()
                    .header(
                        headers::TRANSPORT,
                        transport::describe(&delivery, mount.srtp, chosen.feedback),
                    )
                    .header(headers::CONTENT_BASE, base)
                    .session(id)
            }
        }
    }

    /// 503 when the sessions, in all or from the client's address, are at their limit.
    fn room_for_session(&self, ctx: &Ctx<'_>) -> Result<(), Reply> {
        if self.sessions.len() >= self.cfg.max_sessions {
            return Err(Reply::error(503, "too many sessions"));
        }
        let ip = ctx.peer.ip();
        let from_ip = self.sessions.values().filter(|s| s.peer.ip() == ip).count();
        if from_ip >= self.cfg.max_sessions_per_address {
            return Err(Reply::error(503, "too many sessions from this address"));
        }
        Ok(())
    }

    /// The interleaved channels this connection's sessions already use.
    fn channels_in_use(&self, ctx: &Ctx<'_>) -> Vec<u8> {
        self.sessions
            .values()
            .filter(|s| s.conn == ctx.conn)
            .filter_map(|s| match s.delivery {
                Delivery::Interleaved {
                    rtp_channel,
                    rtcp_channel,
                    ..
                } => Some([rtp_channel, rtcp_channel]),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// The session a PLAY or PAUSE is for, checked against the Request-URI.
    fn session_for(
        &self,
        ctx: &Ctx<'_>,
        session: Lookup,
        method: &str,
    ) -> Result<SessionId, Reply> {
        let id = match session {
            Lookup::Absent => {
                return Err(Reply::error(
                    455,
                    format!("{method} before SETUP (no Session)"),
                ))
            }
            Lookup::NotFound => return Err(not_found()),
            Lookup::Found(id) => id,
        };
        let (_, target) = target_of(ctx.req)?;
        match self.sessions.get(&id) {
            Some(s) if s.mount == target.mount => Ok(id),
            _ => Err(Reply::error(459, "the URL is not the session's mount").session(id)),
        }
    }

    pub(super) fn play(
        &mut self,
        ctx: &Ctx<'_>,
        session: Lookup,
        backend: &mut dyn Backend,
    ) -> Reply {
        let id = match self.session_for(ctx, session, "PLAY") {
            Ok(id) => id,
            Err(reply) => return reply,
        };
        let Some(s) = self.sessions.get_mut(&id) else {
            return not_found();
        };
        let range = ctx
            .req
            .header(&headers::RANGE)
            .map(|v| request::range_start(v.as_str()));
        // RFC 2326 §12.34: Scale changes the speed; Metronome plays at the stream's own.
        if let Some(v) = ctx.req.header(&headers::SCALE) {
            match v.as_str().trim().parse::<f64>() {
                Ok(x) if x.is_finite() && (x - 1.0).abs() < 1e-9 => {}
                Ok(_) => {
                    return Reply::error(
                        457,
                        "only Scale: 1 is served: streams play at their own speed",
                    )
                    .session(id)
                }
                Err(_) => return Reply::error(400, "Scale is not a number").session(id),
            }
        }
        // RFC 2326 §12.29: files seek to the Range start. A live stream plays from now: a range
        // that starts now (or at 0, as FFmpeg and VLC ask) is served, another one is not.
        let seek = match (s.duration, range) {
            (None, None | Some(RangeStart::Unspecified)) => None,
            (None, Some(RangeStart::At(start))) if start.is_zero() => None,
            (None, Some(RangeStart::At(_))) => {
                return Reply::error(457, "a live stream plays from now: ask npt=now- or npt=0-")
                    .session(id)
            }
            (None, Some(RangeStart::OtherUnit)) => {
                return Reply::error(457, "only npt ranges are supported").session(id)
            }
            (None, Some(RangeStart::Invalid)) => {
                return Reply::error(457, "malformed Range").session(id)
            }
            (Some(_), None | Some(RangeStart::Unspecified)) => None,
            (Some(_), Some(RangeStart::OtherUnit)) => {
                return Reply::error(457, "only npt ranges are supported").session(id)
            }
            (Some(_), Some(RangeStart::Invalid)) => {
                return Reply::error(457, "malformed Range").session(id)
            }
            (Some(d), Some(RangeStart::At(start))) if start >= d => {
                return Reply::error(457, "the range starts after the end").session(id)
            }
            (Some(_), Some(RangeStart::At(start))) => Some(start),
        };
        if s.state == SessionState::Playing {
            if let (None, Some(info)) = (seek, s.last_play) {
                return play_reply(id, &s.url, info);
            }
            // A seek while playing: stop, then start at the new position.
            match backend.pause(id) {
                Ok(position) => {
                    s.state = SessionState::Ready;
                    s.paused_at = Some(position);
                }
                Err(r) => return Reply::refusal(r).session(id),
            }
        }
        let from = s.duration.and(seek.or(s.paused_at));
        match backend.play(id, from) {
            Ok(info) => {
                s.state = SessionState::Playing;
                s.last_play = Some(info);
                s.paused_at = None;
                play_reply(id, &s.url, info)
            }
            Err(r) => Reply::refusal(r).session(id),
        }
    }

    pub(super) fn pause(
        &mut self,
        ctx: &Ctx<'_>,
        session: Lookup,
        backend: &mut dyn Backend,
    ) -> Reply {
        let id = match self.session_for(ctx, session, "PAUSE") {
            Ok(id) => id,
            Err(reply) => return reply,
        };
        let Some(s) = self.sessions.get_mut(&id) else {
            return not_found();
        };
        if s.state != SessionState::Playing {
            // Appendix A.2: PAUSE is not valid in Ready.
            return Reply::error(455, "PAUSE while not playing").session(id);
        }
        match backend.pause(id) {
            Ok(position) => {
                s.state = SessionState::Ready;
                s.paused_at = Some(position);
                Reply::ok().session(id)
            }
            Err(r) => Reply::refusal(r).session(id),
        }
    }

    pub(super) fn teardown(&mut self, session: Lookup, backend: &mut dyn Backend) -> Reply {
        match session {
            Lookup::Absent => Reply::ok(),
            Lookup::NotFound => not_found(),
            Lookup::Found(id) => {
                if self.sessions.remove(&id).is_some() {
                    backend.teardown(id);
                }
                Reply::ok()
            }
        }
    }
}

/// The Request-URI and the mount it names; `*` is only for OPTIONS and the parameter methods.
fn target_of(req: &Request<Vec<u8>>) -> Result<(&rtsp_types::Url, request::Target), Reply> {
    let Some(url) = req.request_uri() else {
        return Err(Reply::error(400, "Request-URI * is only valid for OPTIONS"));
    };
    let Some(target) = request::target(url) else {
        return Err(Reply::error(404, "the URL names no mount"));
    };
    if let Some(n) = target.track.filter(|n| *n != 0) {
        return Err(Reply::error(
            404,
            format!("no track {n}: the mount has track 0"),
        ));
    }
    Ok((url, target))
}

/// 200 to PLAY: Range (RFC 2326 §12.29) and RTP-Info (§12.33) with the SETUP URL, which is
/// what clients (ffmpeg) match it against.
fn play_reply(id: SessionId, url: &str, info: PlayInfo) -> Reply {
    let end = info.end.map(request::npt).unwrap_or_default();
    Reply::ok()
        .header(
            headers::RANGE,
            format!("npt={}-{end}", request::npt(info.start)),
        )
        .header(
            headers::RTP_INFO,
            format!("url={url};seq={};rtptime={}", info.seq, info.rtptime),
        )
        .session(id)
}
