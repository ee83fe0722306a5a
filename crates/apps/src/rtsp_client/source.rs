//! Interleaved media as a receiver's datagram source.

use super::*;

/// An interleaved RTSP session as a datagram source for
/// [`crate::receiver::run_datagrams`]: RTP and RTCP from the channels SETUP gave, receiver
/// reports back on the RTCP channel, keep-alives when due.
pub struct InterleavedSource {
    client: RtspClient,
    rtp_channel: u8,
    rtcp_channel: u8,
    every_ns: u64,
    due_ns: u64,
}

impl InterleavedSource {
    pub fn new(client: RtspClient, rtp_channel: u8, rtcp_channel: u8) -> InterleavedSource {
        let every_ns = client.keep_alive_interval().as_nanos() as u64;
        InterleavedSource {
            client,
            rtp_channel,
            rtcp_channel,
            every_ns,
            due_ns: mono_ns().saturating_add(every_ns),
        }
    }

    /// The client back, to TEARDOWN.
    pub fn into_client(self) -> RtspClient {
        self.client
    }
}

impl DatagramSource for InterleavedSource {
    fn recv(&mut self, buf: &mut [u8]) -> Result<Incoming, SourceError> {
        if mono_ns() >= self.due_ns {
            self.client.send_keep_alive()?;
            self.due_ns = mono_ns().saturating_add(self.every_ns);
        }
        let (rtp, rtcp) = (self.rtp_channel, self.rtcp_channel);
        match self.client.read_interleaved() {
            Ok(None) => Ok(Incoming::Nothing),
            Ok(Some((ch, data))) => {
                let n = data.len().min(buf.len());
                buf[..n].copy_from_slice(&data[..n]);
                Ok(match ch {
                    c if c == rtp => Incoming::Rtp(n),
                    c if c == rtcp => Incoming::Rtcp(n),
                    _ => Incoming::Nothing,
                })
            }
            Err(RtspClientError::Closed { .. }) => Ok(Incoming::Ended),
            Err(e) => Err(Box::new(e)),
        }
    }

    fn send_rtcp(&mut self, report: &[u8]) -> bool {
        self.client
            .send_interleaved(self.rtcp_channel, report)
            .is_ok()
    }

    fn describe(&self) -> String {
        format!(
            "{} (TCP interleaved, channels {}-{})",
            self.client.url(),
            self.rtp_channel,
            self.rtcp_channel
        )
    }
}
