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
  metronome lab run --resume lab-results/my   # finish a stopped run";

pub(crate) const LAB_SLURM: &str = "\
Examples:
  # Write and submit an 8-task array and its merge into /shared/runs/a
  metronome lab slurm seed002-tcp --replicates 10 --shards 8 \\
      --out /shared/runs/a --submit
  # Only write the scripts; submit later with sh /shared/b/slurm/submit.sh
  metronome lab slurm my.toml --shards 4 --cpus-per-task 2 --out /shared/b";
