//! The examples `--help` ends with, for the commands people start from. Each line fits 78
//! columns, so that clap does not wrap a command on an 80-column terminal.

pub(crate) const SERVE: &str = "\
Examples:
  # The built-in test source (H.264 in MPEG-TS, 5 Mbit/s) to this machine
  metronome serve rtp://127.0.0.1:5004
  # A file, timed by its PCRs, over and over, to a group and to one receiver
  metronome serve -i movie.ts --loop 'rtp://239.1.1.1:5004?ttl=1' \\
      rtp://127.0.0.1:6004
  # A line a second, as iperf3 prints; JSON lines with --json
  metronome serve rtp://127.0.0.1:5004 --duration 10 --interval 1s
  # TFMCC to a group; the test source follows its rate at each GOP
  metronome serve 'rtp://239.1.1.1:5004?ttl=1' --cc tfmcc --max-bitrate 4mbit
  # Many streams under EDF with admission control, from a config file
  metronome serve --config streams.toml";

pub(crate) const RECV: &str = "\
Examples:
  # Measure what arrives for 10 s: loss, jitter, delay; a JSON summary
  metronome recv rtp://:5004 --duration 10 --json
  # A line a second; with --json, JSON lines for jq
  metronome recv rtp://:5004 --interval 1s --json | jq -c 'select(.interval)'
  # Join a group; keep what arrived and a per-packet trace
  metronome recv 'rtp://239.1.1.1:5004' --output got.ts --trace trace.csv";

pub(crate) const LAB_RUN: &str = "\
Examples:
  metronome lab list                          # the built-in scenarios
  metronome lab run seed001-udp               # → lab-results/seed001-udp/
  metronome lab run seed002-tcp --replicates 10   # claims by 95 % intervals
  metronome lab run my.toml --mode emu        # on real sockets (root)
  metronome lab run --resume lab-results/my   # finish a stopped run
  metronome lab run seed001-udp --json | jq '.summary.points[0].flows'  # JSON alone";

pub(crate) const LAB_SLURM: &str = "\
Examples:
  # Write and submit an 8-task array and its merge into /shared/runs/a
  metronome lab slurm seed002-tcp --replicates 10 --shards 8 \\
      --out /shared/runs/a --submit
  # Only write the scripts; submit later with sh /shared/b/slurm/submit.sh
  metronome lab slurm my.toml --shards 4 --cpus-per-task 2 --out /shared/b";

pub(crate) const DEMO: &str = "\
Examples:
  # The built-in test source to a unicast and a multicast receiver, 6 s
  metronome demo
  # Longer, larger, and JSON for a script
  metronome demo --duration 20s --size 1280x720 --json";

pub(crate) const SDP: &str = "\
Examples:
  # The SDP of a stream declared on the command line, for ffplay or VLC
  metronome sdp cam --stream 'name=cam,destination=rtp://127.0.0.1:5004' \\
      -o cam.sdp
  # Of uncompressed video to a destination, for GStreamer's sdpdemux
  metronome sdp --raw rtp://127.0.0.1:5004 --size 1280x720 --fps 30";

pub(crate) const QUALITY: &str = "\
Examples:
  # PSNR, SSIM and MOS of what arrived against what was sent (Y4M files)
  metronome quality ref.y4m got.y4m
  # Raw 4:2:0 files of a given size; a CSV row per frame; JSON
  metronome quality ref.yuv got.yuv --size 352x288 --frames per-frame.csv \\
      --json";

pub(crate) const FRAMES: &str = "\
Examples:
  # Frames lost by type, frame delay and cumulative jitter, from the traces
  metronome recv rtp://:5004 --trace received.csv --duration 12 &
  metronome serve rtp://127.0.0.1:5004 --frame-trace sent.csv --duration 10
  metronome frames sent.csv received.csv
  # With a 150 ms play-out deadline; Evalvid's st/sd/rd beside
  metronome frames sent.csv received.csv --playout-deadline 150ms \\
      --evalvid run1";

pub(crate) const LAB_REPORT: &str = "\
Examples:
  # Redraw a run's report (after an interrupted run too)
  metronome lab report lab-results/seed001-udp
  # Merge the shards of one sweep into one summary and report
  metronome lab report shard-1 shard-2 shard-3 --out merged
  # As JSON: where the report is, and how many of the sweep's points it shows
  metronome lab report shard-1 shard-2 --out merged --json";

pub(crate) const LAB_COMPARE: &str = "\
Examples:
  # Two runs of one scenario side by side, each figure and the difference
  metronome lab compare lab-results/before lab-results/after
  # As JSON, and as an HTML page
  metronome lab compare before after --json --html diff.html";

pub(crate) const EMU_RELAY: &str = "\
Examples:
  # 5 % loss and 20 ms delay between a sender and a receiver on this host
  metronome emu relay --listen 127.0.0.1:6004 --to 127.0.0.1:5004 \\
      --loss 5% --delay 20ms
  # A 4 Mbit/s bottleneck with a 50-packet queue, for 60 s
  metronome emu relay --listen 127.0.0.1:6004 --to 127.0.0.1:5004 \\
      --rate 4mbit --queue-packets 50 --duration 60s";

pub(crate) const EMU_PAIR: &str = "\
Examples:
  # Two namespaces joined by a 10 Mbit/s, 30 ms link (as root), for 2 min
  metronome emu pair --rate 10mbit --delay 30ms --duration 120s
  # It prints the two namespaces' names and addresses: run iperf3 -s in one
  # and iperf3 -c ADDRESS in the other, each with ip netns exec NAME
  # 2 % loss each way, namespaces named after lossy, until Ctrl-C
  metronome emu pair --loss 2% --name lossy";

pub(crate) const BENCH: &str = "\
Examples:
  # The pacer against a plain sleeping sender, JSON and a summary
  metronome bench pacing --duration 10 --json
  # Many streams under EDF, DM and a thread each
  metronome bench streams --streams 1,15,100
  # Uncompressed video beside GStreamer; loss repair beside SRT (root)
  metronome bench raw
  metronome bench srt";

pub(crate) const LAB_LIST: &str = "\
Examples:
  metronome lab list                      # names and what each shows
  metronome lab list --json | jq -r '.scenarios[].name'
  metronome lab show seed002-tcp          # one's file, to start from";

pub(crate) const LAB_SHOW: &str = "\
Examples:
  # A built-in scenario as a file of your own, then run it
  metronome lab show seed001-udp > mine.toml
  metronome lab run mine.toml";

pub(crate) const SCHEMA: &str = "\
Examples:
  metronome schema                        # the documents that have one
  metronome schema recv > recv.schema.json
  # A run's output, to check against it: python3 -m jsonschema -i got.json
  # recv.schema.json (Debian's python3-jsonschema)
  metronome recv rtp://:5004 --duration 5 --json > got.json
  # The control API of serve --control, in OpenAPI 3.0
  metronome schema openapi > openapi.json";

pub(crate) const PASSWD: &str = "\
Examples:
  # Asks for the password twice; prints a table for the serve config
  metronome passwd alice >> serve.toml
  # From a script: the password as one line on stdin, one mount, a realm
  metronome passwd bob --mount cam --realm studio < bob.pass >> serve.toml";

pub(crate) const BENCH_PACING: &str = "\
Examples:
  metronome bench pacing                          # 4 runs of 10 s, a summary
  metronome bench pacing --duration 5s --rate 20M --json | jq .ratios";

pub(crate) const BENCH_STREAMS: &str = "\
Examples:
  metronome bench streams                         # 1, 15, 100, 1000 streams
  metronome bench streams --streams 1,15 --sched edf,naive --duration 10s";

pub(crate) const BENCH_RAW: &str = "\
Examples:
  metronome bench raw                             # every case, beside GStreamer
  metronome bench raw --cases 1280x720 --duration 10s --json";

pub(crate) const BENCH_SIM: &str = "\
Examples:
  metronome bench sim                             # every case, and ns-3's
  metronome bench sim --large-receivers 1000 --replicates 0 --without-ns3";

pub(crate) const BENCH_NS3: &str = "\
Examples:
  metronome bench ns3                             # builds the ns-3 program once
  metronome bench ns3 --media 30s --json";

pub(crate) const BENCH_EMU: &str = "\
Examples:
  metronome bench emu                   # as root: 1 Gbit/s, 20 ms, beside tbf
  metronome bench emu --rate 100mbit --delay 5ms --json";

pub(crate) const BENCH_QUALITY: &str = "\
Examples:
  metronome bench quality                         # 60 1080p frames
  metronome bench quality --frames 30 --size 1280x720 --json";

pub(crate) const BENCH_LADDER: &str = "\
Examples:
  # About seed 002's clip, each rung beside Table 2; quantizer 2 judged
  metronome bench ladder --seconds 73 --judge 2 --json
  # H.264 instead of MPEG-4 Part 2, a short clip
  metronome bench ladder --codec h264 --seconds 10";

pub(crate) const BENCH_VIEWERS: &str = "\
Examples:
  metronome bench viewers               # 1 and 100 viewers; baseline 1 and 8
  metronome bench viewers --viewers 50 --duration 10s --json";

pub(crate) const BENCH_SRT: &str = "\
Examples:
  metronome bench srt                   # as root: 1, 3 and 5 % loss
  metronome bench srt --loss 2% --latency 200ms --json";
