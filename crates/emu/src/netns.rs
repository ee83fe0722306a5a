//! Network-namespace mode (root): hosts in namespaces whose only connection is the emulator,
//! so that unchanged programs (kernel TCP, iperf3, ffmpeg, GStreamer, VLC, Metronome) talk
//! across emulated links, unicast and multicast.
//!
//! [`Hosts`] makes one namespace per host, each with a TUN device `tun0` holding the host's
//! address on 10.77.0.0/16 and the multicast range (224.0.0.0/4), and loopback up. The TUN
//! devices are created from a thread that has entered the namespace (setns), so they belong to
//! it; their descriptors stay with the emulator, which reads the IP packets each kernel sends
//! and writes them, when the link models deliver them, into the receivers' devices
//! ([`Fabric::routed`](crate::fabric::Fabric::routed)). [`Hosts::run_in`] runs code in a
//! host's namespace: a socket opened there belongs to the host for its whole life, so the lab
//! sends and measures in-process from any host. [`NetnsPair`] is two hosts, one link each way.
//!
//! Names carry the creating process's id (`mt<pid>-<tag><serial>-<n>`). Dropping the hosts deletes
//! their namespaces (the devices go with them), also when a test fails or a run is
//! interrupted; [`remove_stale`] deletes those of processes that are gone (a run that was
//! killed).

use crate::fabric::{Datagram, Ends, Fabric, Route};
use metronome_link::Link;
use metronome_rt::clock::Clock;
use metronome_rt::process::with_default_signals;
use metronome_rt::udp::UdpError;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the kernel's TCP from one host to another starts and how far its window may grow
/// ([`Hosts::set_tcp_window`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpWindow {
    /// The congestion window a connection starts with, segments (`None`: the kernel's 10).
    pub initial: Option<u32>,
    /// The most segments in flight: the congestion window's clamp, as ns-2's `window_`
    /// (`None`: no clamp).
    pub max: Option<u32>,
}

/// How long priming the TCP metrics cache may take ([`Hosts::set_tcp_window`]).
const PRIME_TIMEOUT: Duration = Duration::from_secs(3);

/// Accepts one connection on `listener` (within [`PRIME_TIMEOUT`]) and reads it to its end;
/// dropping it then closes this end.
fn serve_one(listener: TcpListener) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let clock = Clock::new();
    let deadline = clock.now() + PRIME_TIMEOUT;
    let mut s = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && clock.now() < deadline => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(e) => return Err(e),
        }
    };
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(PRIME_TIMEOUT))?;
    io::copy(&mut s, &mut io::sink()).map(drop)
}

/// What the `ip` commands said when one failed.
fn ip(args: &[&str]) -> io::Result<()> {
    let out = with_default_signals(&mut Command::new("ip"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run ip ({e}): install iproute2")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {} failed: {} (namespace mode needs root)",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Runs `commands` (one per line, as `ip -batch` reads them) in namespace `ns`.
fn ip_batch(ns: &str, commands: &str) -> io::Result<()> {
    let mut child = with_default_signals(&mut Command::new("ip"))
        .args(["-n", ns, "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run ip ({e}): install iproute2")))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(commands.as_bytes())?;
    let out = child.wait_with_output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip -n {ns} -batch failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

const PREFIX: &str = "mt";

/// One host: its name (the scenario's), its namespace, address and TUN device.
#[derive(Debug)]
pub struct Host {
    /// The scenario's name for it.
    pub name: String,
    /// Its network namespace's name.
    pub ns: String,
    /// Its address on its TUN device.
    pub addr: Ipv4Addr,
    /// Its TUN device, opened in the emulator's namespace: what it sends is read here.
    pub tun: Arc<File>,
}

/// Hosts in namespaces of their own, deleted when dropped.
#[derive(Debug)]
pub struct Hosts {
    hosts: Vec<Host>,
    /// Namespaces made so far (all of them once created): what Drop deletes.
    made: Vec<String>,
    /// The TCP metrics set on each host's route to another, by (host, peer): `ip route
    /// replace` sets a route's metrics as a whole, so each write carries all of them.
    routes: Mutex<HashMap<(usize, usize), RouteTcp>>,
}

/// The TCP metrics of one host's route to a peer.
#[derive(Clone, Copy, Debug, Default)]
struct RouteTcp {
    window: TcpWindow,
    /// ACK every segment from the peer at once.
    quickack: bool,
}

impl RouteTcp {
    /// The route's metrics as `ip route` takes them, each with a leading space.
    fn metrics(&self) -> String {
        let mut m = String::new();
        if let Some(n) = self.window.initial {
            m += &format!(" initcwnd {n}");
        }
        if let Some(n) = self.window.max {
            m += &format!(" cwnd lock {n}");
        }
        if self.quickack {
            m += " quickack 1";
        }
        m
    }
}

/// The address of the `k`-th host (from 0) on 10.77.0.0/16.
pub fn host_addr(k: usize) -> Ipv4Addr {
    let n = k + 1;
    Ipv4Addr::new(10, 77, (n >> 8) as u8, (n & 0xff) as u8)
}

/// At most this many hosts (the /16, less the network and broadcast addresses).
pub const MAX_HOSTS: usize = 65_533;

impl Hosts {
    /// Creates a namespace `mt<pid>-<tag><serial>-<k>` for each name, with `tun0` at
    /// [`host_addr`]`(k)`.
    pub fn create(tag: &str, names: &[&str]) -> io::Result<Hosts> {
        if names.len() > MAX_HOSTS {
            return Err(io::Error::other(format!(
                "{} hosts: namespace mode addresses at most {MAX_HOSTS}",
                names.len()
            )));
        }
        let pid = std::process::id();
        // Unique within the process too: runs and tests make hosts concurrently.
        static SERIAL: AtomicUsize = AtomicUsize::new(0);
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let mut hosts = Hosts {
            hosts: Vec::with_capacity(names.len()),
            made: Vec::with_capacity(names.len()),
            routes: Mutex::new(HashMap::new()),
        };
        for (k, name) in names.iter().enumerate() {
            let ns = format!("{PREFIX}{pid}-{tag}{serial}-{k}");
            ip(&["netns", "add", &ns])?;
            // From here on, a failure deletes what was made (Drop).
            hosts.made.push(ns.clone());
            let tun = Arc::new(tun_in(&ns)?);
            let addr = host_addr(k);
            // The TUN device's own queue must not drop what the emulator has not read yet:
            // the model's queue is the one that decides (the default, 500 packets, overflows
            // in a burst at 1 Gbit/s with tens of ms of round trip).
            ip_batch(
                &ns,
                &format!(
                    "link set lo up\n\
                     addr add {addr}/16 dev tun0\n\
                     link set tun0 txqueuelen 20000 up\n\
                     route add 224.0.0.0/4 dev tun0\n"
                ),
            )?;
            hosts.hosts.push(Host {
                name: name.to_string(),
                ns,
                addr,
                tun,
            });
        }
        Ok(hosts)
    }

    /// The hosts, in the order they were made.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// The host named `name`.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }

    /// Host `from`'s TCP connections to host `to` start with the window and grow at most to
    /// the window `w` gives. Both are metrics of the route to `to`: `initcwnd` (the kernel's
    /// default is 10, RFC 6928) and `cwnd lock` (no cap by default), so they hold for every
    /// TCP from `from` to `to`, and two different asks for them are refused. The
    /// kernel takes a locked `cwnd` as a connection's clamp only from its TCP metrics cache,
    /// which it fills from the route when a connection closes; so with a cap, one short
    /// connection from `from` to `to` runs first and the cache is checked to hold the cap.
    pub fn set_tcp_window(&self, from: usize, to: usize, w: TcpWindow) -> io::Result<()> {
        if w == TcpWindow::default() {
            return Ok(());
        }
        let addr = self.hosts[to].addr;
        // Under the lock until the cache is primed: a second flow with the same cap waits
        // for it, and a failed priming records no cap.
        self.update_route(from, to, |r| {
            let clash = |had: Option<u32>, want: Option<u32>, what: &str| match (had, want) {
                (Some(a), Some(b)) if a != b => Err(io::Error::other(format!(
                    "two TCP flows to {addr} from one host ask {what} {a} and {b}: the kernel sets it for every TCP from one host to another alike"
                ))),
                _ => Ok(()),
            };
            clash(r.window.initial, w.initial, "initial_window")?;
            clash(r.window.max, w.max, "max_window")?;
            let newly_capped = r.window.max.is_none() && w.max.is_some();
            r.window.initial = w.initial.or(r.window.initial);
            r.window.max = w.max.or(r.window.max);
            Ok(w.max.filter(|_| newly_capped))
        })
    }

    /// Host `k`'s TCP ACKs every segment it gets from host `from` at once (its route's
    /// `quickack 1`), where the kernel would otherwise delay ACKs (ns-2's `TCPSink`).
    pub fn set_quick_ack(&self, k: usize, from: usize) -> io::Result<()> {
        self.update_route(k, from, |r| {
            r.quickack = true;
            Ok(None)
        })
    }

    /// Applies `change` to host `k`'s TCP metrics toward host `to`, writes them all to the
    /// route, and when `change` says so primes the TCP metrics cache for that cap: all under
    /// the routes' lock, the metrics recorded only once all of it succeeded.
    fn update_route(
        &self,
        k: usize,
        to: usize,
        change: impl FnOnce(&mut RouteTcp) -> io::Result<Option<u32>>,
    ) -> io::Result<()> {
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = routes.get(&(k, to)).copied().unwrap_or_default();
        let prime = change(&mut next)?;
        let addr = self.hosts[to].addr;
        ip_batch(
            &self.hosts[k].ns,
            &format!("route replace {addr}/32 dev tun0{}\n", next.metrics()),
        )?;
        if let Some(max) = prime {
            self.prime_tcp_metrics(k, to, max)?;
        }
        routes.insert((k, to), next);
        Ok(())
    }

    /// One connection from host `from` to host `to`, closed by `from`, so that `from`'s
    /// kernel caches the route's TCP metrics toward `to`; then checks that the cache clamps
    /// the window at `max` segments.
    fn prime_tcp_metrics(&self, from: usize, to: usize, max: u32) -> io::Result<()> {
        let addr = self.hosts[to].addr;
        let listener = self.run_in(to, move || TcpListener::bind((addr, 0)))??;
        let at = SocketAddr::from((addr, listener.local_addr()?.port()));
        let peer = std::thread::spawn(move || serve_one(listener));
        let client = self.run_in(from, move || -> io::Result<()> {
            let mut c = TcpStream::connect_timeout(&at, PRIME_TIMEOUT)?;
            c.set_read_timeout(Some(PRIME_TIMEOUT))?;
            c.write_all(b"metronome")?;
            c.shutdown(Shutdown::Write)?;
            // Until the peer's FIN: this end then waits in TIME_WAIT, its metrics saved.
            io::copy(&mut c, &mut io::sink()).map(drop)
        });
        let served = peer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the priming peer panicked")));
        client??;
        served?;
        let max = max.to_string();
        let clock = Clock::new();
        let deadline = clock.now() + PRIME_TIMEOUT;
        loop {
            let out = self
                .command(from, "ip")
                .args(["tcp_metrics", "show", &addr.to_string()])
                .stdin(Stdio::null())
                .output()?;
            let shown = String::from_utf8_lossy(&out.stdout);
            let words: Vec<&str> = shown.split_whitespace().collect();
            if words.windows(2).any(|w| w == ["cwnd", max.as_str()]) {
                return Ok(());
            }
            if clock.now() >= deadline {
                return Err(io::Error::other(format!(
                    "the kernel kept no TCP metrics toward {addr} with cwnd {max} (is net.ipv4.tcp_no_metrics_save set?): the window cannot be clamped"
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A command to run in host `k`'s namespace. It starts with default signal dispositions
    /// and an empty signal mask, whatever this process inherited
    /// ([`metronome_rt::process::with_default_signals`]).
    pub fn command(&self, k: usize, program: &str) -> Command {
        let mut c = Command::new("ip");
        with_default_signals(&mut c).args(["netns", "exec", &self.hosts[k].ns, program]);
        c
    }

    /// Runs `f` on a thread inside host `k`'s namespace: sockets it opens belong to the host.
    pub fn run_in<T: Send>(&self, k: usize, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        enter_and_run(&self.hosts[k].ns, f)
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for ns in &self.made {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// Runs `f` on a thread of its own that has entered namespace `ns` (setns changes only the
/// calling thread's namespace).
fn enter_and_run<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    let target = File::open(format!("/var/run/netns/{ns}"))?;
    std::thread::scope(|s| {
        s.spawn(move || -> io::Result<T> {
            // SAFETY: setns with a valid namespace descriptor and CLONE_NEWNET affects only
            // this thread, which ends right after `f`.
            if unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(f())
        })
        .join()
        .map_err(|_| io::Error::other("the namespace thread panicked"))?
    })
}

/// Two namespaces joined by the emulator: hosts `a` and `b`.
pub struct NetnsPair {
    /// Host `a`'s namespace.
    pub a: String,
    /// Host `b`'s namespace.
    pub b: String,
    /// Host `a`'s address.
    pub addr_a: Ipv4Addr,
    /// Host `b`'s address.
    pub addr_b: Ipv4Addr,
    /// Host `a`'s TUN device.
    pub tun_a: Arc<File>,
    /// Host `b`'s TUN device.
    pub tun_b: Arc<File>,
    hosts: Hosts,
}

impl NetnsPair {
    /// Creates `mt<pid>-<tag><serial>-0` (a) and `-1` (b), with `tun0` at 10.77.0.1 and .2.
    pub fn create(tag: &str) -> io::Result<NetnsPair> {
        let hosts = Hosts::create(tag, &["a", "b"])?;
        let [a, b] = [&hosts.hosts[0], &hosts.hosts[1]];
        Ok(NetnsPair {
            a: a.ns.clone(),
            b: b.ns.clone(),
            addr_a: a.addr,
            addr_b: b.addr,
            tun_a: a.tun.clone(),
            tun_b: b.tun.clone(),
            hosts,
        })
    }

    /// Host `a`'s TCP connections to `b` start with and grow at most to the window `w` gives
    /// ([`Hosts::set_tcp_window`]; the fabric must be running when it has a cap).
    pub fn set_tcp_window(&self, w: TcpWindow) -> io::Result<()> {
        self.hosts.set_tcp_window(0, 1, w)
    }

    /// The two routes between the namespaces: a → b over link 0, b → a over link 1.
    pub fn routes(&self) -> Vec<Route> {
        let route = |from: &Arc<File>, to: &Arc<File>, link| Route {
            ends: Ends::Tun {
                from: from.clone(),
                to: to.clone(),
            },
            links: vec![link],
        };
        vec![
            route(&self.tun_a, &self.tun_b, 0),
            route(&self.tun_b, &self.tun_a, 1),
        ]
    }

    /// One fabric per direction (a → b over `ab`, b → a over `ba`), to run on two threads:
    /// writing a packet into a TUN device runs the receiving kernel's stack in the writer's
    /// time, so one thread for both directions halves what either can carry.
    pub fn fabrics(
        &self,
        ab: Link<Datagram>,
        ba: Link<Datagram>,
        clock: Clock,
    ) -> Result<[Fabric; 2], UdpError> {
        let mut routes = self.routes();
        let back = routes.pop().expect("two routes");
        let mut there = routes.pop().expect("two routes");
        let mut back = back;
        there.links = vec![0];
        back.links = vec![0];
        Ok([
            Fabric::new(vec![ab], vec![there], clock)?,
            Fabric::new(vec![ba], vec![back], clock)?,
        ])
    }

    /// A command to run in namespace `a` (`true`) or `b`.
    pub fn command(&self, in_a: bool, program: &str) -> Command {
        self.hosts.command(if in_a { 0 } else { 1 }, program)
    }

    /// Runs `f` on a thread inside namespace `a` (`true`) or `b`: sockets it opens belong to
    /// that host.
    pub fn run_in<T: Send>(&self, in_a: bool, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        self.hosts.run_in(if in_a { 0 } else { 1 }, f)
    }
}

/// Opens a TUN device `tun0` inside namespace `ns` (IFF_TUN | IFF_NO_PI: bare IP packets),
/// non-blocking.
fn tun_in(ns: &str) -> io::Result<File> {
    enter_and_run(ns, || -> io::Result<File> {
        let tun = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/net/tun")?;
        // struct ifreq: the name, then the flags (a short) in the union.
        let mut ifr = [0u8; 40];
        ifr[..4].copy_from_slice(b"tun0");
        let flags = (libc::IFF_TUN | libc::IFF_NO_PI) as i16;
        ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
        // SAFETY: TUNSETIFF reads and writes a 40-byte struct ifreq, which `ifr` is.
        if unsafe { libc::ioctl(tun.as_raw_fd(), libc::TUNSETIFF, ifr.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let fl = libc::fcntl(tun.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(tun.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        Ok(tun)
    })?
}

/// Deletes the namespaces of emulator runs whose process is gone (killed before it could
/// clean up). Returns how many.
pub fn remove_stale() -> usize {
    let Ok(out) = with_default_signals(&mut Command::new("ip"))
        .args(["netns", "list"])
        .output()
    else {
        return 0;
    };
    let list = String::from_utf8_lossy(&out.stdout);
    let mut n = 0;
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists()
            && ip(&["netns", "del", name]).is_ok()
        {
            n += 1;
        }
    }
    n
}
