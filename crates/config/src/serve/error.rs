//! What is wrong with a config file, and where: the error every refusal is, and how a byte
//! offset from the TOML parser becomes a line, a column and the table it is in.

use std::fmt;
use std::ops::Range;

/// What kind of problem a config file has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigErrorKind {
    /// The file could not be read (missing, unreadable, not UTF-8).
    Read,
    /// The file is larger than [`MAX_CONFIG_BYTES`](super::MAX_CONFIG_BYTES) or declares more than [`MAX_STREAMS`](super::MAX_STREAMS).
    TooLarge,
    /// Not valid TOML, an unknown or missing key, or a value of the wrong form.
    Parse,
    /// Well-formed, but a stream does not validate or a name is used twice.
    Invalid,
}

/// A config file problem: where it is and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The kind of problem.
    pub kind: ConfigErrorKind,
    /// The file's path, or whatever names the text's origin.
    pub origin: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong and what to do, without the location.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)?;
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, " line {l}, column {c}")?,
            (Some(l), None) => write!(f, " line {l}")?,
            _ => {}
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// An error not (yet) placed at a line.
    pub(crate) fn new(kind: ConfigErrorKind, origin: &str, message: String) -> Self {
        let origin = origin.to_string();
        ConfigError {
            kind,
            origin,
            line: None,
            column: None,
            message,
        }
    }

    /// Places the error at a byte offset of `text`.
    pub(crate) fn at(mut self, text: &str, offset: Option<usize>) -> Self {
        if let Some(o) = offset {
            let (line, column) = line_col(text, o);
            (self.line, self.column) = (Some(line), Some(column));
        }
        self
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, text[start..offset].chars().count() + 1)
}

/// Rewords toml's message in the file's own terms, naming the table it is in
/// (`[[stream]] 'cam1'`, `[rtsp_auth]`, …).
pub(super) fn explain(text: &str, message: &str, offset: Option<usize>) -> String {
    let stream = offset.and_then(|o| table_at(text, o));
    let place = stream
        .as_ref()
        .map_or_else(|| "at the top level".to_string(), |p| format!("in {p}"));
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some((key, expected)) = rest.split_once("`, expected ") {
            let known = expected
                .trim_start_matches("one of ")
                .replace('`', "")
                .replace(" or ", ", ");
            // At the top level, the keys that are tables are written as tables.
            let known: Vec<&str> = known
                .split(", ")
                .map(|k| match (k, &stream) {
                    ("rtsp_auth", None) => "[rtsp_auth]",
                    ("stream", None) => "[[stream]]",
                    ("user", Some(t)) if t == "[rtsp_auth]" => "[[rtsp_auth.user]]",
                    (k, _) => k,
                })
                .collect();
            return format!(
                "unknown key '{key}' {place}; known keys: {}",
                known.join(", ")
            );
        }
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let key = rest.trim_end_matches('`');
        return format!("{place}: the key '{key}' is required; add {key} = ...");
    }
    let message = if message.contains("untagged enum OneOrMany") {
        "destination must be \"rtp://HOST:PORT\" or a list of such strings"
    } else {
        message
    };
    let line = offset.map_or("", |o| {
        let (l, _) = line_col(text, o);
        text.lines().nth(l - 1).unwrap_or("").trim()
    });
    let shown: String = line.chars().take(80).collect();
    let at = if shown.is_empty() {
        String::new()
    } else {
        format!(" (at `{shown}`)")
    };
    match stream {
        Some(_) => format!("{place}: {message}{at}"),
        None => format!("{message}{at}"),
    }
}

/// Which table holds a byte offset: "[[stream]] 'cam1'" (or "#2" without a name),
/// "[rtsp_auth]", "[[rtsp_auth.user]] 'alice'"; `None` at the top level.
fn table_at(text: &str, offset: usize) -> Option<String> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let within = |r: Range<usize>| r.start <= offset && offset < r.end.max(r.start + 1);
    let top = doc.get_ref();
    if let Some(streams) = entry(top, "stream") {
        if let Some(name) = array_entry_at(streams.get_ref(), "[[stream]]", &within) {
            return Some(name);
        }
    }
    let auth = entry(top, "rtsp_auth")?;
    let auth_table = auth.get_ref().as_table()?;
    if let Some(users) = entry(auth_table, "user") {
        if let Some(name) = array_entry_at(users.get_ref(), "[[rtsp_auth.user]]", &within) {
            return Some(name);
        }
    }
    let inside = auth_table
        .iter()
        .any(|(k, v)| within(k.span()) || within(v.span()));
    inside.then(|| "[rtsp_auth]".to_string())
}

/// The value of `key` in `table`.
fn entry<'a, 'b>(
    table: &'a toml::de::DeTable<'b>,
    key: &str,
) -> Option<&'a toml::Spanned<toml::de::DeValue<'b>>> {
    table
        .iter()
        .find(|(k, _)| k.get_ref() == key)
        .map(|(_, v)| v)
}

/// The entry of an array of tables (`what`, e.g. `[[stream]]`) that holds the offset, by its
/// `name` or its place.
fn array_entry_at(
    array: &toml::de::DeValue,
    what: &str,
    within: &dyn Fn(Range<usize>) -> bool,
) -> Option<String> {
    for (i, s) in array.as_array()?.iter().enumerate() {
        let table = s.get_ref().as_table()?;
        let inside = within(s.span())
            || table
                .iter()
                .any(|(k, v)| within(k.span()) || within(v.span()));
        if inside {
            let name = table.iter().find(|(k, _)| k.get_ref() == "name");
            return Some(match name.and_then(|(_, v)| v.get_ref().as_str()) {
                Some(n) => format!("{what} '{}'", n.escape_debug()),
                None => format!("{what} #{}", i + 1),
            });
        }
    }
    None
}
