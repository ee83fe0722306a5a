//! `metronome passwd NAME`: a user's `[[rtsp_auth.user]]` table for the serve config, as
//! Apache's `htdigest` makes a Digest password file: the password is read (without echo on a
//! terminal, or one line from a pipe) and only its hashes are printed.

use metronome_config::rtsp_auth::DEFAULT_REALM;
use metronome_session::rtsp::auth::{ha1, Algorithm};
use std::io::{BufRead, IsTerminal, Write};

#[derive(clap::Args, Debug)]
pub(crate) struct PasswdArgs {
    /// The user's name (no ':', '"' or '\')
    pub name: String,
    /// The realm the hashes are made for: the config's `[rtsp_auth] realm`
    #[arg(long, default_value = DEFAULT_REALM)]
    pub realm: String,
    /// Mounts the user may play (repeat it); none: every mount
    #[arg(long = "mount", value_name = "NAME")]
    pub mounts: Vec<String>,
}

pub(crate) fn run(a: PasswdArgs) -> Result<(), Box<dyn std::error::Error>> {
    let bad = |c: char| c == ':' || c == '"' || c == '\\' || c.is_control();
    if a.name.is_empty() || a.name.contains(bad) || a.realm.is_empty() || a.realm.contains(bad) {
        return Err(
            "the name and the realm must not be empty nor hold ':', '\"', '\\' or \
                    control characters"
                .into(),
        );
    }
    let password = read_password(&a.name)?;
    let md5 = ha1(Algorithm::Md5, &a.name, &a.realm, &password);
    let sha256 = ha1(Algorithm::Sha256, &a.name, &a.realm, &password);
    let mut out = format!(
        "[[rtsp_auth.user]]\nname = \"{}\"\nmd5 = \"{md5}\"\nsha256 = \"{sha256}\"\n",
        a.name
    );
    if !a.mounts.is_empty() {
        let list: Vec<String> = a.mounts.iter().map(|m| format!("{m:?}")).collect();
        out.push_str(&format!("mounts = [{}]\n", list.join(", ")));
    }
    if a.realm != DEFAULT_REALM {
        eprintln!(
            "metronome: made for realm \"{}\": set it in [rtsp_auth]",
            a.realm
        );
    }
    std::io::stdout().write_all(out.as_bytes())?;
    Ok(())
}

/// One line from stdin; on a terminal, asked for twice with echo off.
fn read_password(name: &str) -> Result<String, Box<dyn std::error::Error>> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut line = String::new();
        stdin.lock().read_line(&mut line)?;
        let password = line.trim_end_matches(['\r', '\n']).to_string();
        if password.is_empty() {
            return Err("no password on stdin: give it as one line".into());
        }
        return Ok(password);
    }
    let first = prompt(&format!("password for {name}: "))?;
    let again = prompt("again: ")?;
    if first != again {
        return Err("the two passwords differ; nothing was printed".into());
    }
    if first.is_empty() {
        return Err("an empty password protects nothing; nothing was printed".into());
    }
    Ok(first)
}

/// Reads a line from the terminal with echo off, restoring it whatever happens.
fn prompt(text: &str) -> std::io::Result<String> {
    eprint!("{text}");
    std::io::stderr().flush()?;
    let fd = libc::STDIN_FILENO;
    // SAFETY: termios is plain data, filled by tcgetattr before use.
    let mut saved: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: fd is stdin, a terminal (checked by the caller); saved is a valid termios.
    if unsafe { libc::tcgetattr(fd, &mut saved) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut quiet = saved;
    quiet.c_lflag &= !libc::ECHO;
    // SAFETY: as above; quiet is saved with echo cleared.
    unsafe { libc::tcsetattr(fd, libc::TCSANOW, &quiet) };
    let mut line = String::new();
    let read = std::io::stdin().lock().read_line(&mut line);
    // SAFETY: restores what tcgetattr returned.
    unsafe { libc::tcsetattr(fd, libc::TCSANOW, &saved) };
    eprintln!();
    read?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}
