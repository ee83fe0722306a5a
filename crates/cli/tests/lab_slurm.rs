//! `metronome lab slurm` on a real one-node Slurm cluster (Debian's slurm-wlm and munge, run
//! as root by the test in a scratch directory, its own key, socket and ports): the sweep runs
//! as a job array, one shard a task, and the merge job's summary has the same figures as the
//! sweep run on one machine. Every daemon and job is stopped when the test ends, also when it
//! fails.

mod common;

use common::{bin, lab_figures, now, require, sweep_scenario, Running};
use metronome_testkit::TempDir;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Six points (two controllers, three replicates), a fraction of a second each.
fn sweep() -> String {
    sweep_scenario("slurm-test", 3, 3, "60s")
}

/// Two free TCP ports for slurmctld and slurmd, outside the ephemeral range so that no
/// connection made meanwhile takes them (never the same one twice in a process).
fn free_ports() -> [u16; 2] {
    let tcp = || metronome_rt::ports::free_tcp_port().unwrap();
    [tcp(), tcp()]
}

fn hostname() -> String {
    let out = Command::new("hostname").arg("-s").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// munged, slurmctld and slurmd for this machine alone, configured in `dir`.
struct Cluster {
    conf: PathBuf,
    daemons: Vec<Running>,
}

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        for (program, package) in [
            ("munged", "munge"),
            ("slurmctld", "slurm-wlm"),
            ("slurmd", "slurm-wlm"),
            ("sbatch", "slurm-wlm"),
        ] {
            require(program, package);
        }
        assert!(
            unsafe { libc::geteuid() } == 0,
            "the Slurm test runs its daemons as root: run scripts/test.sh as root"
        );
        let munge = dir.join("munge");
        std::fs::create_dir_all(&munge).unwrap();
        // A key of its own, random: the daemons listen on the machine's addresses, and only
        // a holder of the key can talk to them.
        let mut key = vec![0u8; 1024];
        std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut key)
            .unwrap();
        std::fs::write(munge.join("key"), key).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(munge.join("key"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        for d in ["state", "spool", "log"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let m = |f: &str| munge.join(f).to_string_lossy().into_owned();
        let mut daemons = vec![Running::spawn(Command::new("munged").args([
            "-F",
            "--force",
            &format!("--socket={}", m("socket")),
            &format!("--key-file={}", m("key")),
            &format!("--pid-file={}", m("pid")),
            &format!("--seed-file={}", m("seed")),
            &format!("--log-file={}", m("log")),
        ]))];
        let host = hostname();
        let d = |f: &str| dir.join(f).to_string_lossy().into_owned();
        let conf = dir.join("slurm.conf");
        let [ctld_port, slurmd_port] = free_ports();
        std::fs::write(
            &conf,
            format!(
                "ClusterName=metronome-test\nSlurmctldHost={host}(127.0.0.1)\n\
                 SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\n\
                 AuthInfo=socket={}\nSlurmctldPort={}\nSlurmdPort={}\n\
                 StateSaveLocation={}\nSlurmdSpoolDir={}\n\
                 SlurmctldPidFile={}\nSlurmdPidFile={}\n\
                 SlurmctldLogFile={}\nSlurmdLogFile={}\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
                 JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
                 SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nReturnToService=2\n\
                 MpiDefault=none\nNodeName={host} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n\
                 PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP\n",
                m("socket"),
                ctld_port,
                slurmd_port,
                d("state"),
                d("spool"),
                d("slurmctld.pid"),
                d("slurmd.pid"),
                d("log/slurmctld.log"),
                d("log/slurmd.log"),
            ),
        )
        .unwrap();
        let mut cluster = Cluster {
            conf: conf.clone(),
            daemons: Vec::new(),
        };
        let end = now() + Duration::from_secs(10);
        while !munge.join("socket").exists() {
            assert!(now() < end, "munged made no socket in 10 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        daemons.push(Running::spawn(
            Command::new("slurmctld")
                .args(["-D", "-i"])
                .env("SLURM_CONF", &conf),
        ));
        daemons.push(Running::spawn(
            Command::new("slurmd").arg("-D").env("SLURM_CONF", &conf),
        ));
        cluster.daemons = daemons;
        cluster.wait_idle(Duration::from_secs(60));
        cluster
    }

    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    /// Until the node takes jobs.
    fn wait_idle(&self, limit: Duration) {
        let end = now() + limit;
        loop {
            let out = self.cmd("sinfo").args(["-h", "-o", "%t"]).output().unwrap();
            let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if state == "idle" {
                return;
            }
            assert!(
                now() < end,
                "the one-node cluster is not up after {limit:?} (sinfo: '{state}', {})",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Until no job is queued or running; false if some still are after `limit`.
    fn wait_empty(&self, limit: Duration) -> bool {
        let end = now() + limit;
        while now() < end {
            let out = self.cmd("squeue").args(["-h", "-o", "%i %T"]).output();
            if out.is_ok_and(|o| o.status.success() && o.stdout.is_empty()) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        false
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.cmd("scancel").args(["--user", "root"]).status();
        if !self.wait_empty(Duration::from_secs(15)) {
            // Jobs that would not stop: killed, steps and all, before their slurmd goes.
            let _ = self
                .cmd("scancel")
                .args(["--user", "root", "--signal=KILL", "--full"])
                .status();
            self.wait_empty(Duration::from_secs(10));
        }
        // slurmd, slurmctld, then munged (killed and reaped by `Running`).
        while let Some(d) = self.daemons.pop() {
            d.signal(libc::SIGTERM);
            let _ = d.finish_within(Duration::from_secs(5));
        }
    }
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
fn a_sweep_run_as_a_slurm_job_array_and_merged_equals_one_machines_run() {
    let tmp = TempDir::new("cli-lab-slurm");
    let scenario = tmp.0.join("sweep.toml");
    std::fs::write(&scenario, sweep()).unwrap();
    let local = tmp.0.join("local");
    common::run(
        bin().args(["lab", "run", &s(&scenario), "--out", &s(&local), "-q"]),
        Duration::from_secs(300),
    )
    .expect_success();

    let cluster = Cluster::start(&tmp.0.join("cluster"));
    let out = tmp.0.join("on-slurm");
    let submitted = common::run(
        bin()
            .env("SLURM_CONF", &cluster.conf)
            .args(["lab", "slurm", &s(&scenario), "--shards", "3"])
            .args(["--out", &s(&out), "--submit"]),
        Duration::from_secs(60),
    )
    .expect_success();
    assert!(
        submitted.stdout.contains("submitted job array"),
        "{}",
        submitted.report()
    );
    assert!(
        cluster.wait_empty(Duration::from_secs(300)),
        "the jobs did not end"
    );
    let logs = std::fs::read_dir(out.join("slurm/logs"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n---\n");

    // Each task ran its own third, as its array index says.
    for i in 0..3 {
        let shard: Vec<u64> = lab_figures(&out.join(format!("shards/{i}")))
            .iter()
            .map(|p| p["index"].as_u64().unwrap())
            .collect();
        assert_eq!(shard, [i, i + 3], "shard {i}; the logs:\n{logs}");
    }
    // A script of the user's own in a Slurm array: --shards takes the task's index.
    let own = tmp.0.join("own-task");
    let ran = common::run(
        bin()
            .env("SLURM_ARRAY_TASK_ID", "1")
            .env("SLURM_ARRAY_TASK_COUNT", "3")
            .args([
                "lab",
                "run",
                &s(&scenario),
                "--shards",
                "3",
                "--out",
                &s(&own),
            ]),
        Duration::from_secs(120),
    )
    .expect_success();
    assert!(
        ran.stderr.contains("shard 1/3 (from SLURM_ARRAY_TASK_ID)"),
        "{}",
        ran.report()
    );
    assert_eq!(lab_figures(&own), lab_figures(&out.join("shards/1")));
    // The merge job's summary is the one machine's, point for point.
    assert_eq!(lab_figures(&out), lab_figures(&local), "the logs:\n{logs}");
    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(!report.contains("Incomplete:"));
}
