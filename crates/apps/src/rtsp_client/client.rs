//! The client's requests and the connection it reads responses and interleaved frames from.

use super::parse::*;
use super::*;

impl RtspClient {
    /// Connects to the server of `url` (`rtsp://HOST[:PORT]/PATH`, port 554 by default).
    pub fn connect(url: &str, cfg: &RtspClientConfig) -> Result<RtspClient, RtspClientError> {
        let bad = |problem: String| RtspClientError::BadUrl {
            url: url.to_string(),
            problem,
        };
        let parsed = Url::parse(url.trim()).map_err(|e| bad(e.to_string()))?;
        let tls = match parsed.scheme() {
            "rtsp" => false,
            "rtsps" => true,
            other => return Err(bad(format!("the scheme is '{other}', not rtsp or rtsps"))),
        };
        let port = parsed
            .port()
            .unwrap_or(if tls { DEFAULT_TLS_PORT } else { DEFAULT_PORT });
        let addrs: Vec<SocketAddr> = match parsed.host() {
            Some(rtsp_types::Host::Ipv4(a)) => vec![SocketAddr::new(a.into(), port)],
            Some(rtsp_types::Host::Ipv6(a)) => vec![SocketAddr::new(a.into(), port)],
            Some(rtsp_types::Host::Domain(d)) if !d.is_empty() => (d, port)
                .to_socket_addrs()
                .map_err(|e| bad(format!("cannot resolve '{d}': {e}")))?
                .collect(),
            _ => return Err(bad("no host".to_string())),
        };
        let shown = display_url(&parsed);
        let mut last = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, cfg.connect_timeout) {
                Ok(stream) if tls => {
                    let host = parsed.host_str().unwrap_or_default().to_string();
                    let _ = stream.set_read_timeout(Some(cfg.connect_timeout));
                    let _ = stream.set_write_timeout(Some(cfg.connect_timeout));
                    let conn = ClientStream::tls(stream, &host, cfg.tls_ca.as_deref()).map_err(
                        |source| RtspClientError::Connect {
                            url: shown.clone(),
                            addr: a.to_string(),
                            source,
                        },
                    )?;
                    return Self::with_conn(parsed, conn, cfg);
                }
                Ok(stream) => return Self::with_stream(parsed, stream, cfg),
                Err(e) => last = Some((a.to_string(), e)),
            }
        }
        let (addr, source) = last.unwrap_or_else(|| {
            (
                url.to_string(),
                io::Error::new(io::ErrorKind::NotFound, "the name has no address"),
            )
        });
        Err(RtspClientError::Connect {
            url: shown,
            addr,
            source,
        })
    }

    /// A client on an already connected stream (tests; proxies).
    pub fn with_stream(
        url: Url,
        stream: TcpStream,
        cfg: &RtspClientConfig,
    ) -> Result<RtspClient, RtspClientError> {
        Self::with_conn(url, ClientStream::Plain(stream), cfg)
    }

    fn with_conn(
        mut url: Url,
        stream: ClientStream,
        cfg: &RtspClientConfig,
    ) -> Result<RtspClient, RtspClientError> {
        let shown = display_url(&url);
        let credentials = credentials_of(&mut url);
        let io_err = |source| RtspClientError::Io {
            url: shown.clone(),
            during: "setting up the connection".to_string(),
            source,
        };
        let tcp = stream.tcp();
        tcp.set_read_timeout(Some(POLL)).map_err(io_err)?;
        tcp.set_write_timeout(Some(cfg.response_timeout))
            .map_err(io_err)?;
        let _ = tcp.set_nodelay(true);
        Ok(RtspClient {
            url,
            shown,
            cfg: cfg.clone(),
            stream,
            rbuf: Vec::with_capacity(128 << 10),
            rpos: 0,
            cseq: 0,
            session: None,
            timeout: DEFAULT_SESSION_TIMEOUT,
            get_parameter: true,
            aggregate: None,
            pending_keep_alive: None,
            credentials,
            auth: None,
            torn_down: false,
        })
    }

    /// The URL connected to (without credentials).
    pub fn url(&self) -> &str {
        &self.shown
    }

    /// This end of the RTSP connection: its address is on the interface that reaches the
    /// server (where to join a multicast group the server sends to).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.stream.tcp().local_addr().ok()
    }

    /// The session id, once SETUP has answered.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// How often to send a keep-alive: half the session timeout, at least 1 s.
    pub fn keep_alive_interval(&self) -> Duration {
        (self.timeout / 2).max(Duration::from_secs(1))
    }

    /// OPTIONS: the methods the server lists in `Public` (and whether keep-alives can use
    /// GET_PARAMETER).
    pub fn options(&mut self) -> Result<Vec<String>, RtspClientError> {
        let url = self.url.clone();
        let r = self.request(Method::Options, &url, &[])?;
        let public: Vec<String> = header(&r, &headers::PUBLIC)
            .map(|p| {
                p.split(',')
                    .map(|m| m.trim().to_ascii_uppercase())
                    .filter(|m| !m.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if !public.is_empty() {
            self.get_parameter = public.iter().any(|m| m == "GET_PARAMETER");
        }
        Ok(public)
    }

    /// DESCRIBE: the session description and the base of its controls.
    pub fn describe(&mut self) -> Result<Described, RtspClientError> {
        let url = self.url.clone();
        let r = self.request(
            Method::Describe,
            &url,
            &[(headers::ACCEPT, "application/sdp".to_string())],
        )?;
        if let Some(ct) = header(&r, &headers::CONTENT_TYPE) {
            if !ct.to_ascii_lowercase().contains("application/sdp") {
                return Err(self.protocol(format!(
                    "DESCRIBE answered with Content-Type '{ct}', not application/sdp"
                )));
            }
        }
        let text = std::str::from_utf8(r.body())
            .map_err(|_| self.protocol("the SDP of DESCRIBE is not UTF-8 text".to_string()))?
            .to_string();
        if text.trim().is_empty() {
            return Err(self.protocol("DESCRIBE answered with no SDP".to_string()));
        }
        let sdp = SessionDescription::parse(&text).map_err(|source| RtspClientError::Sdp {
            url: self.shown.clone(),
            source: Box::new(source),
        })?;
        if sdp.media.is_empty() {
            return Err(self.protocol("the SDP of DESCRIBE has no m= line".to_string()));
        }
        let base = [headers::CONTENT_BASE, headers::CONTENT_LOCATION]
            .iter()
            .filter_map(|h| header(&r, h))
            .find_map(|v| Url::parse(v.trim()).ok())
            .unwrap_or(url);
        let d = Described { sdp, base, text };
        self.aggregate = Some(d.aggregate_url());
        Ok(d)
    }

    /// SETUP of one media (see [`Described::media_url`]) with the transport asked for.
    pub fn setup(
        &mut self,
        media_url: &Url,
        transport: TransportRequest,
    ) -> Result<SetupReply, RtspClientError> {
        let mut extra = vec![(headers::TRANSPORT, transport.header())];
        if let Some(s) = &self.session {
            extra.push((headers::SESSION, s.clone()));
        }
        let r = self.request(Method::Setup, media_url, &extra)?;
        let Some(session) = header(&r, &headers::SESSION) else {
            return Err(self.protocol("SETUP answered without a Session header".to_string()));
        };
        let (id, timeout) = parse_session(session)
            .ok_or_else(|| self.protocol(format!("SETUP answered Session: '{session}'")))?;
        let Some(th) = header(&r, &headers::TRANSPORT).map(str::to_string) else {
            return Err(self.protocol("SETUP answered without a Transport header".to_string()));
        };
        let params = parse_transport(&th);
        let chosen = match transport {
            TransportRequest::Udp { rtp_port } => {
                if params.interleaved.is_some() || params.multicast {
                    return Err(self.protocol(format!(
                        "asked for UDP unicast, the server answered Transport: {th}; try --rtsp-transport {}",
                        if params.multicast { "multicast" } else { "tcp" }
                    )));
                }
                if let Some((p, _)) = params.client_port {
                    if p != rtp_port {
                        return Err(self.protocol(format!(
                            "asked for client_port={rtp_port}-{}, the server will send to client_port={p} (Transport: {th})",
                            rtp_port.saturating_add(1)
                        )));
                    }
                }
                Transport::Udp {
                    client_rtp_port: rtp_port,
                    server_rtp_port: params.server_port.map(|p| p.0),
                    source: params.source_ip(),
                }
            }
            TransportRequest::Multicast => {
                let (Some(group), Some((rtp_port, _))) = (params.destination_ip(), params.port)
                else {
                    return Err(self.protocol(format!(
                        "asked for multicast, the server answered Transport: {th} (no destination= and port=); try --rtsp-transport udp"
                    )));
                };
                if !group.is_multicast() {
                    return Err(self.protocol(format!(
                        "asked for multicast, the server answered destination={group}, not a multicast group"
                    )));
                }
                Transport::Multicast {
                    group,
                    rtp_port,
                    ttl: params.ttl,
                    source: params.source_ip(),
                }
            }
            TransportRequest::Tcp => {
                let Some((rtp_channel, rtcp)) = params.interleaved else {
                    return Err(self.protocol(format!(
                        "asked for TCP interleaved, the server answered Transport: {th}; try --rtsp-transport udp"
                    )));
                };
                Transport::Interleaved {
                    rtp_channel,
                    rtcp_channel: rtcp.unwrap_or(rtp_channel.wrapping_add(1)),
                }
            }
        };
        self.session = Some(id.clone());
        self.timeout = timeout;
        Ok(SetupReply {
            session: id,
            timeout,
            transport: chosen,
            ssrc: params.ssrc,
            transport_header: th,
        })
    }

    /// PLAY the session from its start (`Range: npt=0-`). `url` is the aggregate URL
    /// ([`Described::aggregate_url`]).
    pub fn play(&mut self, url: &Url) -> Result<(), RtspClientError> {
        let Some(s) = self.session.clone() else {
            return Err(self.protocol("PLAY before SETUP: there is no session".to_string()));
        };
        self.aggregate = Some(url.clone());
        self.request(
            Method::Play,
            url,
            &[
                (headers::SESSION, s),
                (headers::RANGE, "npt=0.000-".to_string()),
            ],
        )?;
        Ok(())
    }

    /// Sends a keep-alive and waits for its answer (UDP and multicast transports: nothing else
    /// comes on the connection). A server that does not know GET_PARAMETER gets OPTIONS.
    pub fn keep_alive(&mut self) -> Result<(), RtspClientError> {
        let url = self.aggregate.clone().unwrap_or_else(|| self.url.clone());
        let extra = self.session_header();
        let method = self.keep_alive_method();
        match self.request(method.clone(), &url, &extra) {
            Err(e) if matches!(e.status(), Some(405 | 501)) && method == Method::GetParameter => {
                self.get_parameter = false;
                self.request(Method::Options, &url, &extra).map(|_| ())
            }
            r => r.map(|_| ()),
        }
    }

    /// Sends a keep-alive without waiting: its answer is taken by
    /// [`RtspClient::read_interleaved`] (TCP interleaved transport).
    pub fn send_keep_alive(&mut self) -> Result<(), RtspClientError> {
        let url = self.aggregate.clone().unwrap_or_else(|| self.url.clone());
        let extra = self.session_header();
        let cseq = self.send(self.keep_alive_method(), &url, &extra)?;
        self.pending_keep_alive = Some(cseq);
        Ok(())
    }

    /// Sends keep-alives every [`RtspClient::keep_alive_interval`] until `stop` is set, then
    /// TEARDOWN. For a thread of its own beside a UDP or multicast receiver. Between
    /// keep-alives it reads the connection, so that a server that ends the session (its BYE,
    /// then the connection closed) ends this at once with [`RtspClientError::Closed`]; what
    /// else the server sends there is read and let go.
    pub fn keep_alive_until(mut self, stop: &AtomicBool) -> Result<(), RtspClientError> {
        let every = self.keep_alive_interval().as_nanos() as u64;
        let mut due = mono_ns().saturating_add(every);
        while !stop.load(Ordering::Relaxed) {
            if mono_ns() >= due {
                self.keep_alive()?;
                due = mono_ns().saturating_add(every);
            }
            let wait = mono_ns().saturating_add(POLL.as_nanos() as u64);
            self.next_frame(wait, "while keeping the session alive")?;
        }
        self.teardown()
    }

    /// The next interleaved frame after PLAY on a TCP transport: `Some((channel, payload))`, or
    /// `None` if nothing came for a poll period (50 ms). Answers to keep-alives are checked
    /// and consumed here.
    pub fn read_interleaved(&mut self) -> Result<Option<(u8, &[u8])>, RtspClientError> {
        let deadline = mono_ns().saturating_add(POLL.as_nanos() as u64);
        loop {
            match self.next_frame(deadline, "while receiving interleaved media")? {
                None => return Ok(None),
                Some(Frame::Data(ch, range)) => return Ok(Some((ch, &self.rbuf[range]))),
                Some(Frame::Request) => {}
                Some(Frame::Response(r)) => {
                    if self.pending_keep_alive.is_some() && cseq_of(&r) == self.pending_keep_alive {
                        self.pending_keep_alive = None;
                        let code = u16::from(r.status());
                        if matches!(code, 405 | 501) && self.get_parameter {
                            self.get_parameter = false;
                        } else if !(200..300).contains(&code) {
                            let m = self.keep_alive_method();
                            return Err(self.status_error(&m, &r));
                        }
                    }
                }
            }
        }
    }

    /// Sends an interleaved frame (an RTCP receiver report on the RTCP channel).
    pub fn send_interleaved(&mut self, channel: u8, data: &[u8]) -> Result<(), RtspClientError> {
        let len = u16::try_from(data.len())
            .map_err(|_| self.protocol(format!("a {}-byte interleaved frame", data.len())))?;
        let mut frame = Vec::with_capacity(4 + data.len());
        frame.push(b'$');
        frame.push(channel);
        frame.extend_from_slice(&len.to_be_bytes());
        frame.extend_from_slice(data);
        self.stream
            .write_all(&frame)
            .map_err(|source| RtspClientError::Io {
                url: self.shown.clone(),
                during: "sending an interleaved frame".to_string(),
                source,
            })
    }

    /// TEARDOWN the session (if there is one) and wait for the answer.
    pub fn teardown(&mut self) -> Result<(), RtspClientError> {
        if self.torn_down || self.session.is_none() {
            return Ok(());
        }
        self.torn_down = true;
        let url = self.aggregate.clone().unwrap_or_else(|| self.url.clone());
        let extra = self.session_header();
        self.request(Method::Teardown, &url, &extra).map(|_| ())
    }

    pub(super) fn keep_alive_method(&self) -> Method {
        if self.get_parameter {
            Method::GetParameter
        } else {
            Method::Options
        }
    }

    pub(super) fn session_header(&self) -> Vec<(HeaderName, String)> {
        self.session
            .iter()
            .map(|s| (headers::SESSION, s.clone()))
            .collect()
    }

    pub(super) fn protocol(&self, problem: String) -> RtspClientError {
        RtspClientError::Protocol {
            url: self.shown.clone(),
            problem,
        }
    }

    pub(super) fn status_error(&self, method: &Method, r: &Response<Vec<u8>>) -> RtspClientError {
        let code = u16::from(r.status());
        let detail = [
            headers::LOCATION,
            headers::UNSUPPORTED,
            headers::WWW_AUTHENTICATE,
        ]
        .iter()
        .find_map(|h| header(r, h).map(|v| format!("{}: {v}", h.as_str())));
        RtspClientError::Status {
            url: self.shown.clone(),
            method: <&str>::from(method).to_string(),
            code,
            reason: r.reason_phrase().to_string(),
            detail,
            hint: hint(code),
        }
    }

    /// Writes a request; returns its CSeq.
    pub(super) fn send(
        &mut self,
        method: Method,
        url: &Url,
        extra: &[(HeaderName, String)],
    ) -> Result<u32, RtspClientError> {
        self.cseq += 1;
        let cseq = self.cseq;
        let mut b = Request::builder(method.clone(), Version::V1_0)
            .request_uri(url.clone())
            .header(headers::CSEQ, cseq.to_string())
            .header(headers::USER_AGENT, self.cfg.user_agent.clone());
        for (name, value) in extra {
            b = b.header(name.clone(), value.clone());
        }
        let cnonce = match &self.auth {
            Some(_) => Some(
                metronome_rt::entropy::os_random::<8>("a Digest cnonce")
                    .map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>())
                    .map_err(|e| self.protocol(format!("no random bytes for a cnonce: {e}")))?,
            ),
            None => None,
        };
        if let (Some(auth), Some(cnonce)) = (&mut self.auth, cnonce) {
            let method_name = <&str>::from(&method);
            b = b.header(
                headers::AUTHORIZATION,
                auth.authorization(method_name, url.as_str(), &cnonce),
            );
        }
        let req = b.empty();
        let mut out = Vec::with_capacity(256);
        req.write(&mut out).map_err(|e| {
            self.protocol(format!(
                "cannot write the {} request: {e}",
                <&str>::from(&method)
            ))
        })?;
        self.stream
            .write_all(&out)
            .map_err(|source| RtspClientError::Io {
                url: self.shown.clone(),
                during: format!("sending {}", <&str>::from(&method)),
                source,
            })?;
        Ok(cseq)
    }

    /// Sends a request and waits for its answer; anything but 2xx is an error. Interleaved
    /// frames that come meanwhile are dropped.
    pub(super) fn request(
        &mut self,
        method: Method,
        url: &Url,
        extra: &[(HeaderName, String)],
    ) -> Result<Response<Vec<u8>>, RtspClientError> {
        let mut answered_challenge = false;
        loop {
            let r = self.request_once(&method, url, extra)?;
            if u16::from(r.status()) != 401 || answered_challenge || !self.answer(&r) {
                return self.judge(&method, r);
            }
            answered_challenge = true;
        }
    }

    /// Takes a 401's challenge for the next requests: `false` if there is nothing to answer
    /// it with (no credentials, or the same credentials already refused).
    fn answer(&mut self, r: &Response<Vec<u8>>) -> bool {
        use metronome_session::rtsp::auth_client::ClientAuth;
        let secure = matches!(self.stream, ClientStream::Tls(_));
        let Some((user, password)) = &self.credentials else {
            return false;
        };
        let challenges = r
            .headers()
            .filter(|(n, _)| **n == headers::WWW_AUTHENTICATE)
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        match &mut self.auth {
            // Refused with this answer: only a stale nonce is worth a second try.
            Some(a) if ClientAuth::is_stale(&challenges) => a.renew(&challenges, secure).is_ok(),
            Some(_) => false,
            None => match ClientAuth::new(&challenges, user, password, secure) {
                Ok(a) => {
                    self.auth = Some(a);
                    true
                }
                Err(e) => {
                    tracing::warn!("{}: {e}", self.shown);
                    false
                }
            },
        }
    }

    /// A 2xx answer, or the error the status says.
    fn judge(
        &self,
        method: &Method,
        r: Response<Vec<u8>>,
    ) -> Result<Response<Vec<u8>>, RtspClientError> {
        let code = u16::from(r.status());
        if !(200..300).contains(&code) {
            return Err(self.status_error(method, &r));
        }
        Ok(r)
    }

    /// Sends a request and waits for its answer, whatever its status.
    fn request_once(
        &mut self,
        method: &Method,
        url: &Url,
        extra: &[(HeaderName, String)],
    ) -> Result<Response<Vec<u8>>, RtspClientError> {
        let name = <&str>::from(method).to_string();
        let cseq = self.send(method.clone(), url, extra)?;
        let waited = self.cfg.response_timeout;
        let deadline = mono_ns().saturating_add(waited.as_nanos() as u64);
        let during = format!("waiting for the answer to {name}");
        loop {
            match self.next_frame(deadline, &during)? {
                None => {
                    return Err(RtspClientError::Timeout {
                        url: self.shown.clone(),
                        method: name,
                        waited,
                    })
                }
                Some(Frame::Response(r)) => {
                    let c = cseq_of(&r);
                    if c.is_some() && c != Some(cseq) {
                        // A late answer (a keep-alive's): not this one.
                        continue;
                    }
                    return Ok(r);
                }
                Some(_) => {}
            }
        }
    }

    /// The next message, reading until `deadline` (CLOCK_MONOTONIC ns); `None` at the deadline.
    pub(super) fn next_frame(
        &mut self,
        deadline: u64,
        during: &str,
    ) -> Result<Option<Frame>, RtspClientError> {
        loop {
            match split_frame(&self.rbuf[self.rpos..]) {
                Err(problem) => return Err(self.protocol(format!("{problem} {during}"))),
                Ok(Some(Split::Skip(n))) => {
                    self.rpos += n;
                    continue;
                }
                Ok(Some(Split::Data { channel, len })) => {
                    let start = self.rpos + 4;
                    self.rpos = start + len;
                    return Ok(Some(Frame::Data(channel, start..start + len)));
                }
                Ok(Some(Split::Message(n))) => {
                    let bytes = &self.rbuf[self.rpos..self.rpos + n];
                    let parsed = Message::<Vec<u8>>::parse(bytes);
                    self.rpos += n;
                    return match parsed {
                        Ok((Message::Response(r), _)) => Ok(Some(Frame::Response(r))),
                        Ok((Message::Request(_), _)) => Ok(Some(Frame::Request)),
                        Ok((Message::Data(_), _)) => Ok(Some(Frame::Request)),
                        Err(_) => {
                            let first = String::from_utf8_lossy(bytes);
                            let first = first.lines().next().unwrap_or("").chars().take(80);
                            Err(self.protocol(format!(
                                "not an RTSP/1.0 message {during}: '{}'",
                                first.collect::<String>()
                            )))
                        }
                    };
                }
                Ok(None) => {}
            }
            if mono_ns() >= deadline {
                return Ok(None);
            }
            self.fill(during)?;
        }
    }

    /// Reads what the socket has (waiting up to the poll period).
    pub(super) fn fill(&mut self, during: &str) -> Result<(), RtspClientError> {
        if self.rpos > 0 {
            self.rbuf.drain(..self.rpos);
            self.rpos = 0;
        }
        let mut tmp = [0u8; 16 << 10];
        match self.stream.read(&mut tmp) {
            Ok(0) => Err(RtspClientError::Closed {
                url: self.shown.clone(),
                during: during.to_string(),
            }),
            Ok(n) => {
                self.rbuf.extend_from_slice(&tmp[..n]);
                Ok(())
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(())
            }
            Err(source) => Err(RtspClientError::Io {
                url: self.shown.clone(),
                during: during.to_string(),
                source,
            }),
        }
    }
}

impl std::fmt::Debug for RtspClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RtspClient")
            .field("url", &self.shown)
            .field("session", &self.session)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Drop for RtspClient {
    fn drop(&mut self) {
        if self.session.is_some() && !self.torn_down {
            self.torn_down = true;
            let url = self.aggregate.clone().unwrap_or_else(|| self.url.clone());
            let extra = self.session_header();
            let _ = self
                .stream
                .tcp()
                .set_write_timeout(Some(Duration::from_millis(500)));
            let _ = self.send(Method::Teardown, &url, &extra);
        }
        let _ = self.stream.tcp().shutdown(Shutdown::Both);
    }
}
