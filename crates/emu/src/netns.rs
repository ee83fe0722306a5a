//! Network-namespace mode (root): two namespaces whose only connection is the emulator, so
//! that unchanged programs (kernel TCP, iperf3, ffmpeg, GStreamer, VLC, Metronome) talk
//! across emulated links.
//!
//! Each namespace gets a TUN device (`tun0`, an address on one /24, loopback up). The TUN
//! devices are created from a thread that has entered the namespace (setns), so they belong
//! to it; their descriptors stay with the emulator, which reads the IP packets one kernel
//! sends and writes them, when the link model delivers them, into the other's device: a
//! [`Fabric`] of two TUN routes over two links (one per direction).
//!
//! Names carry the creating process's id (`mt<pid>-<tag>-a`). Dropping the pair deletes both
//! namespaces (their devices go with them), also when a test fails or a run is interrupted;
//! [`remove_stale`] deletes those of processes that are gone (a run that was killed).

use crate::fabric::{Datagram, Ends, Fabric, Route};
use metronome_netsim::Link;
use metronome_rt::clock::Clock;
use metronome_rt::udp::UdpError;
use std::fs::File;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::Arc;

/// Two namespaces joined by the emulator.
pub struct NetnsPair {
    pub a: String,
    pub b: String,
    pub addr_a: Ipv4Addr,
    pub addr_b: Ipv4Addr,
    pub tun_a: Arc<File>,
    pub tun_b: Arc<File>,
}

/// What the `ip` commands said when one failed.
fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip")
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

const PREFIX: &str = "mt";

impl NetnsPair {
    /// Creates `mt<pid>-<tag>-a` and `-b` with `tun0` at 10.77.`net`.1 and .2.
    pub fn create(tag: &str, net: u8) -> io::Result<NetnsPair> {
        let pid = std::process::id();
        let a = format!("{PREFIX}{pid}-{tag}-a");
        let b = format!("{PREFIX}{pid}-{tag}-b");
        let addr_a = Ipv4Addr::new(10, 77, net, 1);
        let addr_b = Ipv4Addr::new(10, 77, net, 2);
        ip(&["netns", "add", &a])?;
        // From here on, a failure deletes what was made (Drop).
        let mut pair = NetnsPair {
            a: a.clone(),
            b: b.clone(),
            addr_a,
            addr_b,
            tun_a: Arc::new(File::open("/dev/null")?),
            tun_b: Arc::new(File::open("/dev/null")?),
        };
        ip(&["netns", "add", &b])?;
        pair.tun_a = Arc::new(tun_in(&a)?);
        pair.tun_b = Arc::new(tun_in(&b)?);
        for (ns, addr) in [(&a, addr_a), (&b, addr_b)] {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "tun0",
            ])?;
            // The TUN device's own queue must not drop what the emulator has not read yet:
            // the model's queue is the one that decides (the default, 500 packets, overflows
            // in a burst at 1 Gbit/s with tens of ms of round trip).
            ip(&["-n", ns, "link", "set", "tun0", "txqueuelen", "20000", "up"])?;
        }
        Ok(pair)
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
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            if in_a { &self.a } else { &self.b },
            program,
        ]);
        c
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// Opens a TUN device `tun0` inside namespace `ns` (IFF_TUN | IFF_NO_PI: bare IP packets),
/// non-blocking.
fn tun_in(ns: &str) -> io::Result<File> {
    let ns = ns.to_string();
    // setns changes the calling thread's namespace: do it on a thread of its own.
    std::thread::spawn(move || -> io::Result<File> {
        let target = File::open(format!("/var/run/netns/{ns}"))?;
        // SAFETY: setns with a valid namespace descriptor and CLONE_NEWNET affects only this
        // thread, which ends right after.
        if unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
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
    })
    .join()
    .map_err(|_| io::Error::other("the namespace thread panicked"))?
}

/// Deletes the namespaces of emulator runs whose process is gone (killed before it could
/// clean up). Returns how many.
pub fn remove_stale() -> usize {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
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
