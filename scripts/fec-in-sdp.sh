#!/bin/bash
# Why an SDP of Metronome's lists no FEC flows (docs/repair.md, "Not in the SDP"): GStreamer's
# plain `filesrc ! sdpdemux ! rtpmp2tdepay` pipeline plays the SDP of a stream with SMPTE 2022-1
# FEC as `metronome sdp` writes it, and does not when the two FEC flows are listed as their own
# m= lines (RFC 5956 a=group:FEC-FR, 2dparityfec/90000 as Cisco's VQE writes them).
#
#   scripts/fec-in-sdp.sh [PORT]     # prints "plain: 0" and "fec: 124" (timeout 8 s)
#
# Needs metronome on PATH (or METRONOME=path) and gstreamer1.0-tools; writes plain.sdp and
# fec.sdp in a temporary directory; the server it starts stops by itself after 40 s.
set -u
M=${METRONOME:-metronome}
P=${1:-24710}
dir=$(mktemp -d)
trap 'kill $server 2>/dev/null; rm -rf "$dir"' EXIT
cd "$dir" || exit 1
stream="name=s1,destination=rtp://127.0.0.1:$P"
"$M" serve --duration 40 --send-cost 5us \
  --stream "$stream,size=320x240,fps=25,bitrate=1mbit,repair=fec" >/dev/null 2>&1 &
server=$!
sleep 2
"$M" sdp s1 --stream "$stream" -o plain.sdp || exit 1
{
  sed 's/^t=0 0\r$/t=0 0\r\na=group:FEC-FR 1 2 3\r/' plain.sdp
  printf 'a=mid:1\r\n'
  # Columns on the media's port + 2, rows on + 4.
  for i in 2 3; do
    printf 'm=video %d RTP/AVP %d\r\na=rtpmap:%d 2dparityfec/90000\r\na=mid:%d\r\n' \
      $((P + 2 * i - 2)) $((94 + i)) $((94 + i)) "$i"
  done
} > fec.sdp
for f in plain fec; do
  timeout 8 gst-launch-1.0 -q filesrc location=$f.sdp ! sdpdemux ! rtpmp2tdepay ! tsdemux \
    ! h264parse ! avdec_h264 ! identity eos-after=25 ! fakesink
  echo "$f: $?"
done
