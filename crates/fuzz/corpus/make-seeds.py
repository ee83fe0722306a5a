#!/usr/bin/env python3
"""Writes the fuzz corpus's seeds: valid inputs of each format, and inputs in the shape of
known bugs in other RTSP/RTP servers (see README.md). Run from anywhere; it writes next to
itself. Chunked targets take a 16-bit big-endian length before each datagram or chunk."""
import os, struct, shutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../../.."))

def put(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)

def join(*parts):
    out = b""
    for p in parts:
        if isinstance(p, str):
            p = p.encode()
        out += struct.pack(">H", len(p)) + p
    return out

def rtp(pt=33, seq=1, ts=0, ssrc=0x1234, payload=b"", marker=0, csrc=(), ext=None, pad=0, cc=None):
    b0 = 0x80 | (0x20 if pad else 0) | (0x10 if ext is not None else 0) | (len(csrc) if cc is None else cc)
    h = struct.pack(">BBHII", b0, (marker << 7) | pt, seq, ts, ssrc)
    for c in csrc:
        h += struct.pack(">I", c)
    if ext is not None:
        profile, words, body = ext
        h += struct.pack(">HH", profile, words) + body
    body = payload
    if pad:
        body += b"\0" * (pad - 1) + bytes([pad])
    return h + body

def ts_packet(pid, payload=b"", pusi=0, cc=0, af=None):
    b1 = (0x40 if pusi else 0) | (pid >> 8)
    ctrl = 0x10 | (0x20 if af is not None else 0) | (cc & 15)
    pkt = bytes([0x47, b1, pid & 0xFF, ctrl])
    if af is not None:
        pkt += bytes([len(af)]) + af
    pkt += payload
    return (pkt + b"\xff" * 188)[:188]

def crc32_mpeg(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else (crc << 1)
            crc &= 0xFFFFFFFF
    return crc

def section(table_id, ext, body):
    length = 5 + len(body) + 4
    s = bytes([table_id, 0xB0 | (length >> 8), length & 0xFF]) + struct.pack(">H", ext) + b"\xc1\x00\x00" + body
    return s + struct.pack(">I", crc32_mpeg(s))

PAT = ts_packet(0, b"\x00" + section(0, 1, struct.pack(">HH", 1, 0xE000 | 0x100)), pusi=1)
PMT = ts_packet(0x100, b"\x00" + section(2, 1, struct.pack(">HH", 0xE000 | 0x101, 0xF000) + bytes([0x1B, 0xE1, 0x01, 0xF0, 0x00])), pusi=1)
pes = b"\x00\x00\x01\xe0\x00\x00\x80\x80\x05" + bytes([0x21, 0, 1, 0, 1]) + b"\x00\x00\x00\x01\x09\xf0" + b"\x00\x00\x00\x01\x67\x42\x00\x1e"
PES = ts_packet(0x101, pes, pusi=1, af=bytes([0x10]) + b"\x00\x00\x00\x00\x7e\x00")

def main():
    for t in os.listdir(HERE):
        p = os.path.join(HERE, t)
        if os.path.isdir(p):
            shutil.rmtree(p)
    # ---- rtp
    ts3 = PAT + PMT + PES
    put("rtp", "mp2t", join(rtp(payload=ts3), rtp(seq=2, ts=3000, payload=PES), rtp(seq=4, ts=6000, payload=PES)))
    put("rtp", "one-byte-ext", join(rtp(payload=PES, ext=(0xBEDE, 3, bytes([0x17]) + bytes(8) + bytes([0x22, 1, 2, 3])))))
    put("rtp", "two-byte-ext", join(rtp(payload=PES, ext=(0x1000, 2, bytes([1, 4, 9, 9, 9, 9, 0, 0])))))
    # CVE-class: extension length beyond the packet (GStreamer rtpbuffer, live555 RTPSource).
    put("rtp", "ext-length-overflow", join(rtp(payload=b"x", ext=(0xBEDE, 0xFFFF, b""))))
    # CSRC count larger than what follows.
    put("rtp", "csrc-overflow", join(rtp(payload=b"", cc=15)))
    # Padding count larger than the payload (CVE-2016-9446-like underflow).
    put("rtp", "padding-overflow", join(bytes([0xa0]) + rtp(payload=b"")[1:] + b"abc\xff"))
    put("rtp", "seq-wrap-and-misorder", join(*[rtp(seq=s, ts=s * 10, payload=PES) for s in (65534, 65535, 0, 3, 1, 2, 40000, 5)]))
    put("rtp", "two-sources", join(rtp(ssrc=1, payload=PES), rtp(ssrc=2, payload=PES), rtp(ssrc=1, seq=2, payload=PES)))
    put("rtp", "not-rtp", join(b"\x00" * 12, b"\x40" + b"\x00" * 11, b"\xff"))
    # ---- rtcp
    sr = struct.pack(">BBHI", 0x81, 200, 12, 0x1234) + struct.pack(">IIIII", 0xe0000000, 0, 9000, 10, 1880)
    sr += struct.pack(">IIIIII", 0x5678, 0x01000010, 100, 5, 0xe0000000, 0)
    rr = struct.pack(">BBHI", 0x81, 201, 7, 0x5678) + struct.pack(">IIIIII", 0x1234, 0x02000020, 200, 7, 0, 0)
    cname = b"\x01\x04fuzz\x00\x00"
    sdes = struct.pack(">BBHI", 0x81, 202, 3, 0x5678) + cname
    bye = struct.pack(">BBHI", 0x81, 203, 1, 0x5678)
    put("rtcp", "sr-sdes-bye", join(sr + sdes, rr + sdes, rr + bye))
    # APP congestion-control packets (docs/cc.md): TFRC subtype 0/1, TFMC 0/1.
    for sub, name in ((0, b"TFRC"), (1, b"TFRC"), (0, b"TFMC"), (1, b"TFMC")):
        body = struct.pack(">IIIIII", 1, 2, 3, 4, 5, 6)
        app = struct.pack(">BBHI", 0x80 | sub, 204, 2 + len(body) // 4, 0x5678) + name + body
        put("rtcp", f"app-{name.decode().lower()}-{sub}", join(rr + app))
    # RFC 8888 feedback (GCC's): begin_seq 10, three reports (one lost), padded, timestamp;
    # and one whose num_reports runs past its packet.
    reports = struct.pack(">HHHH", 0x8005, 0x0000, 0xdfff, 0)
    ccfb = struct.pack(">BBHII", 0x80 | 11, 205, 6, 0x5678, 0x1234) + struct.pack(">HH", 10, 3) + reports + struct.pack(">I", 0x00010000)
    put("rtcp", "ccfb", join(rr + sdes + ccfb))
    ccfb_long = struct.pack(">BBHII", 0x80 | 11, 205, 5, 0x5678, 0x1234) + struct.pack(">HH", 10, 400) + struct.pack(">II", 0, 1)
    put("rtcp", "ccfb-num-reports-overflow", join(rr + ccfb_long))
    # CVE-class: a length field past the datagram, a report count beyond the length, an SDES
    # item running off the end (live555 RTCP.cpp, GStreamer gstrtcpbuffer).
    put("rtcp", "length-overflow", join(struct.pack(">BBHI", 0x81, 201, 0xFFFF, 1)))
    put("rtcp", "count-overflow", join(struct.pack(">BBHI", 0x9f, 201, 1, 1)))
    put("rtcp", "sdes-item-overflow", join(rr + struct.pack(">BBHI", 0x81, 202, 2, 1) + b"\x01\xff" + b"ab"))
    put("rtcp", "bye-reason-overflow", join(struct.pack(">BBHI", 0x81, 203, 2, 1) + b"\xffabc"))
    # ---- rtsp
    host = "rtsp://10.0.0.1/live"
    flow = [
        f"OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n",
        f"DESCRIBE {host} RTSP/1.0\r\nCSeq: 2\r\nAccept: application/sdp\r\n\r\n",
        f"SETUP {host}/trackID=0 RTSP/1.0\r\nCSeq: 3\r\nTransport: RTP/AVP;unicast;client_port=5000-5001\r\n\r\n",
        f"PLAY {host}/ RTSP/1.0\r\nCSeq: 4\r\nSession: 00\r\nRange: npt=0.000-\r\n\r\n",
        f"GET_PARAMETER {host}/ RTSP/1.0\r\nCSeq: 5\r\nSession: 00\r\n\r\n",
        f"TEARDOWN {host}/ RTSP/1.0\r\nCSeq: 6\r\nSession: 00\r\n\r\n",
    ]
    put("rtsp", "flow-udp", b"\x00" + join(*flow))
    put("rtsp", "flow-interleaved", b"\x00" + join(
        f"SETUP {host}/trackID=0 RTSP/1.0\r\nCSeq: 1\r\nTransport: RTP/AVP/TCP;unicast;interleaved=0-1\r\n\r\n",
        "$\x01\x00\x08" + "\x81\xc9\x00\x01abcd", f"PLAY {host}/ RTSP/1.0\r\nCSeq: 2\r\nSession: 00\r\n\r\n"))
    put("rtsp", "pipelined", b"\x00" + join("".join(flow)))
    put("rtsp", "small-limits", b"\x01" + join(*flow))
    # live555 CVE-2018-4013: RTSP-over-HTTP GET with an overlong header (stack overflow in
    # lookForHeader).
    put("rtsp", "cve-2018-4013-http-tunnel", b"\x00" + join("GET /live HTTP/1.1\r\nx-sessioncookie: " + "A" * 200 + "\r\nAccept: " + "B" * 3000 + "\r\n\r\n"))
    # live555 CVE-2019-6256 / CVE-2019-7314: tunnelled POST after GET with the same cookie.
    put("rtsp", "cve-2019-6256-tunnel-post", b"\x00" + join("GET / HTTP/1.0\r\nx-sessioncookie: c\r\n\r\n", "POST / HTTP/1.0\r\nx-sessioncookie: c\r\nContent-Length: 32767\r\n\r\nT1BUSU9OUyAqIFJUU1AvMS4wDQpDU2VxOiAxDQoNCg=="))
    # live555 CVE-2019-9215: parseAuthorizationHeader on a Digest header with unterminated values.
    put("rtsp", "cve-2019-9215-authorization", b"\x00" + join(f"DESCRIBE {host} RTSP/1.0\r\nCSeq: 1\r\nAuthorization: Digest username=\"a, realm=\"b\", nonce=\"" + "c" * 500 + "\r\n\r\n"))
    # live555 CVE-2020-24027-class: a Range and Session that never end; CSeq out of range.
    put("rtsp", "long-values", b"\x00" + join(f"PLAY {host} RTSP/1.0\r\nCSeq: 99999999999999999999\r\nSession: " + "f" * 4000 + "\r\nRange: npt=" + "9" * 300 + "-\r\n\r\n"))
    # Framing: Content-Length huge, negative, repeated, conflicting; a `$` frame longer than the
    # connection gives; header folding; NUL bytes.
    put("rtsp", "content-length", b"\x00" + join(
        "ANNOUNCE * RTSP/1.0\r\nCSeq: 1\r\nContent-Length: 18446744073709551616\r\n\r\n",
        "ANNOUNCE * RTSP/1.0\r\nCSeq: 2\r\nContent-Length: -1\r\n\r\n",
        "SET_PARAMETER * RTSP/1.0\r\nCSeq: 3\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"))
    put("rtsp", "data-frame-overflow", b"\x00" + join("$\x00\xff\xff" + "x" * 20, "OPTIONS * RTSP/1.0\r\nCSeq: 2\r\n\r\n"))
    put("rtsp", "folding-and-nul", b"\x00" + join("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nX: a\r\n b\r\n\x00: \x00\r\n\r\n"))
    # GStreamer gst-rtsp-server: a SETUP for a second stream with a different transport; a PLAY
    # with a Scale and a Speed.
    put("rtsp", "gst-setup-twice", b"\x00" + join(
        f"SETUP {host}/trackID=0 RTSP/1.0\r\nCSeq: 1\r\nTransport: RTP/AVP;multicast;ttl=300;port=70000-70001\r\n\r\n",
        f"SETUP {host}/trackID=1 RTSP/1.0\r\nCSeq: 2\r\nSession: 00\r\nTransport: RTP/AVP/TCP;interleaved=254-255\r\n\r\n",
        f"PLAY {host} RTSP/1.0\r\nCSeq: 3\r\nSession: 00\r\nScale: -1e309\r\nSpeed: nan\r\n\r\n"))
    # ---- rtsp-transport
    for i, t in enumerate([
        "RTP/AVP;unicast;client_port=5000-5001",
        "RTP/AVP/TCP;unicast;interleaved=0-1",
        "RTP/AVP;multicast;destination=239.1.1.1;port=5004-5005;ttl=16",
        "RTP/AVP;unicast;client_port=5001-5000",
        "RTP/AVP;unicast;client_port=65535-65536;source=::1;destination=\"10.0.0.1\"",
        "RTP/SAVP;unicast;client_port=9,RTP/AVP/TCP;unicast,RTP/AVP;unicast;client_port=6000",
        ";;;,,,=\"\\\"" + ";x=" * 200,
        "RTP/AVP;unicast;mode=\"PLAY\";ssrc=FFFFFFFFF;interleaved=300-301",
    ]):
        put("rtsp-transport", f"t{i}", t)
    put("rtsp-transport", "session", "12345678;timeout=99999999999999999999")
    # Authorization: Digest answers as FFmpeg and GStreamer write them, and Basic.
    put("rtsp-transport", "digest-qop", 'Digest username="alice", realm="metronome", nonce="00000000000003e8aabbccddeeff00112233445566778899", uri="rtsp://127.0.0.1:8554/cam1", response="0123456789abcdef0123456789abcdef", algorithm=MD5, qop="auth", cnonce="0a4f113b", nc=00000001')
    put("rtsp-transport", "digest-2069", 'Digest username="alice",realm="metronome",nonce="x",uri="/cam1",response="00"')
    put("rtsp-transport", "basic", "Basic YWxpY2U6c2VjcmV0")
    # ---- rtsp-response
    sdp_body = "v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=x\r\nt=0 0\r\nm=video 0 RTP/AVP 33\r\na=control:trackID=0\r\n"
    put("rtsp-response", "describe", f"RTSP/1.0 200 OK\r\nCSeq: 2\r\nContent-Type: application/sdp\r\nContent-Length: {len(sdp_body)}\r\n\r\n{sdp_body}")
    put("rtsp-response", "interleaved", b"RTSP/1.0 200 OK\r\nCSeq: 3\r\nSession: ab;timeout=60\r\n\r\n$\x00\x00\x04abcd\r\n$\x01\x00\x00")
    # GStreamer CVE-2019-9928 (gst_rtsp_connection): a response line far beyond any buffer.
    put("rtsp-response", "cve-2019-9928-long-line", "RTSP/1.0 200 " + "A" * 10000 + "\r\n\r\n")
    put("rtsp-response", "content-length-huge", "RTSP/1.0 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n")
    # A 401's challenges as the client reads them (auth_client): Metronome's own list, and a
    # mix with Basic, a list-valued qop, opaque and stale.
    put("rtsp-response", "www-authenticate-digest", 'Digest realm="metronome", qop="auth", algorithm=SHA-256, nonce="000000000000079fded301a5045916d69c2bed46d557af43", Digest realm="metronome", qop="auth", algorithm=MD5, nonce="000000000000079fded301a5045916d69c2bed46d557af43"')
    put("rtsp-response", "www-authenticate-mixed", 'Basic realm="x", Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=MD5, nonce="7ypf", opaque="FQhe", stale=true')
    put("rtsp-response", "frame-truncated", b"$\x00\xff\xff" + b"x" * 100)
    # ---- sdp
    put("sdp", "mp2t", sdp_body)
    put("sdp", "srtp", "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=x\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=video 5004 RTP/SAVP 33\r\na=rtpmap:33 MP2T/90000\r\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:MDEyMzQ1Njc4OWFiY2RlZmdoaWprbG1ub3BxcnN0\r\n")
    put("sdp", "raw", "v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=raw\r\nc=IN IP4 239.1.1.1/16\r\nt=0 0\r\nm=video 5004 RTP/AVP 96\r\na=rtpmap:96 raw/90000\r\na=fmtp:96 sampling=YCbCr-4:2:2; width=1920; height=1080; exactframerate=25; depth=10; TCS=SDR; colorimetry=BT709; PM=2110GPM; SSN=ST2110-20:2017\r\n")
    put("sdp", "hostile", "v=0\r\nm=video 99999999999 RTP/AVP 300 -1\r\nc=IN IP4 999.1.1.1/300/99\r\na=rtpmap:96\r\na=fmtp:96 width=4294967296;height=0;exactframerate=0/0\r\n" + "a=x\r\n" * 500)
    # ---- mpegts
    put("mpegts", "pat-pmt-pes", PAT + PMT + PES * 4)
    # CVE-class: an adaptation field longer than the packet (GStreamer mpegtsbase, live555
    # MPEG2TransportStreamParser), a section length past the packet, a PES length mismatch.
    put("mpegts", "af-length-overflow", PAT + PMT + ts_packet(0x101, b"", af=bytes([0xff]) + b"\x00" * 10))
    put("mpegts", "section-overflow", ts_packet(0, b"\x00\x00\xbf\xff\x00\x01\xc1\x00\x00", pusi=1) + PMT)
    put("mpegts", "pes-length-mismatch", PAT + PMT + ts_packet(0x101, b"\x00\x00\x01\xe0\xff\xff\x80\x80\x05" + bytes(5), pusi=1))
    put("mpegts", "sync-loss", b"\x00" * 50 + PAT + b"\x47" * 3 + PMT + PES)
    put("mpegts", "pcr-jumps", b"".join(ts_packet(0x101, b"", af=bytes([0x10]) + struct.pack(">IH", v, 0x7e00), cc=i) for i, v in enumerate([0, 0xffffffff, 1, 0x80000000, 5])))
    # ---- rfc4175 (RTP with an extended sequence number, then line headers)
    def line(length, row, offset, cont):
        return struct.pack(">HHH", length, row & 0x7FFF, (0x8000 if cont else 0) | offset)
    px = bytes(range(64))
    good = rtp(pt=96, seq=1, ts=0, payload=b"\x00\x00" + line(64, 0, 0, 1) + line(64, 1, 0, 0) + px + px, marker=0)
    last = rtp(pt=96, seq=2, ts=0, payload=b"\x00\x00" + line(64, 31, 0, 0) + px, marker=1)
    put("rfc4175", "frame", join(good, last))
    put("rfc4175", "row-and-offset-out-of-range", join(rtp(pt=96, payload=b"\x00\x00" + line(64, 0x7fff, 0x7fff, 0) + px, marker=1)))
    put("rfc4175", "continuation-forever", join(rtp(pt=96, payload=b"\x00\x00" + line(0, 0, 0, 1) * 200)))
    put("rfc4175", "length-past-payload", join(rtp(pt=96, payload=b"\x00\x00" + line(0xffff, 0, 0, 0) + px)))
    put("rfc4175", "odd-offsets", join(rtp(pt=96, payload=b"\x00\x00" + line(3, 0, 1, 1) + line(5, 0, 63, 0) + b"abcdefgh")))
    # ---- coded-depay (RTP of MPEG-4 Visual and H.264 frames; odd first byte: a gap before it)
    vop = b"\x00\x00\x01\xb6" + bytes(range(1, 200))
    put("coded-depay", "mpeg4-frames", join(rtp(pt=96, seq=2, ts=0, payload=vop[:100]), rtp(pt=96, seq=4, ts=0, payload=vop[100:], marker=1), rtp(pt=96, seq=6, ts=3600, payload=vop, marker=1)))
    sps, pps = b"\x67\x64\x00\x1f\xac", b"\x68\xee\x3c\x80"
    stap = b"\x18" + struct.pack(">H", len(sps)) + sps + struct.pack(">H", len(pps)) + pps
    fu = lambda se, body: b"\x7c" + bytes([se | 5]) + body
    put("coded-depay", "h264-stap-fu", join(rtp(pt=96, seq=2, payload=stap), rtp(pt=96, seq=4, payload=fu(0x80, b"a" * 90)), rtp(pt=96, seq=6, payload=fu(0, b"b" * 90)), rtp(pt=96, seq=8, payload=fu(0x40, b"c" * 9), marker=1)))
    put("coded-depay", "stap-size-past-payload", join(rtp(pt=96, seq=2, payload=b"\x18\xff\xff\x67", marker=1)))
    put("coded-depay", "fu-without-start-after-gap", join(rtp(pt=96, seq=2, payload=fu(0x80, b"a" * 9)), rtp(pt=96, seq=5, payload=fu(0, b"b" * 9)), rtp(pt=96, seq=6, payload=fu(0x40, b"c"), marker=1)))
    put("coded-depay", "timestamps-without-markers", join(*[rtp(pt=96, seq=2 * i, ts=i * 3000, payload=vop) for i in range(20)]))
    put("coded-depay", "fmtp", "profile-level-id=1;config=000001B0F5000001B5;sprop-parameter-sets=Z2QAH6w=,aO48gA==,!!")
    # ---- http (control API)
    put("http", "get", "GET /streams HTTP/1.1\r\nHost: x\r\n\r\n")
    put("http", "post", "POST /streams HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"name\":\"a\",\"source\":\"test\",\"to\":\"x\"}  ")
    put("http", "conflicting-length", "POST /streams HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd")
    put("http", "chunked", "POST /streams HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n")
    put("http", "huge-head", "GET /" + "a" * 9000 + " HTTP/1.1\r\n\r\n")
    put("http", "continue", "PUT /streams/a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 99999999999999999999\r\n\r\n")
    # ---- scenario and config: the files the project ships.
    for f in sorted(os.listdir(os.path.join(ROOT, "crates/lab/scenarios"))):
        with open(os.path.join(ROOT, "crates/lab/scenarios", f), "rb") as src:
            put("scenario", f, src.read())
    with open(os.path.join(ROOT, "packaging/metronome.toml"), "rb") as src:
        put("config", "packaged.toml", src.read())
    put("config", "hostile.toml", "[[stream]]\nname = \"\\u0000\"\nbitrate = \"99999999999999999999\"\nfps = -1\n[[stream]]\n" * 3)

main()
