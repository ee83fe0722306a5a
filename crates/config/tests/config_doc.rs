//! docs/config.md describes every key the server's config file accepts, in the table of the
//! place it goes, and no key the parser does not know: the parser's own list of known keys
//! (what an unknown key's error gives) against the doc's tables.

use metronome_config::serve::parse;

/// The keys the parser knows where `prefix` puts an unknown key, from its error message.
fn known_keys(prefix: &str) -> Vec<String> {
    let text = format!("{prefix}no_such_key = 1\n");
    let err = parse(&text, "t.toml").expect_err("an unknown key is refused");
    let (_, known) = err
        .message
        .split_once("known keys: ")
        .unwrap_or_else(|| panic!("no known keys in: {err}"));
    let mut keys: Vec<String> = known.split(", ").map(String::from).collect();
    keys.sort();
    keys
}

/// The keys in the first column of the table under the heading `## {heading}`.
fn documented(doc: &str, heading: &str) -> Vec<String> {
    let start = doc
        .find(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("docs/config.md has no section '## {heading}'"));
    let section = &doc[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let mut keys: Vec<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(k, _)| k.to_string()))
        .collect();
    keys.sort();
    keys
}

#[test]
fn every_config_key_is_documented_where_it_goes() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/config.md"))
        .expect("docs/config.md is readable");
    for (heading, prefix) in [
        ("Server settings (top level)", ""),
        ("`[rtsp_auth]`", "[rtsp_auth]\n"),
        (
            "`[[rtsp_auth.user]]`",
            "[rtsp_auth]\n[[rtsp_auth.user]]\nname = \"a\"\n",
        ),
        ("`[[stream]]`", "[[stream]]\nname = \"a\"\n"),
    ] {
        let (known, doc_keys) = (known_keys(prefix), documented(&doc, heading));
        assert!(!known.is_empty());
        assert_eq!(
            doc_keys, known,
            "docs/config.md's table under '## {heading}'"
        );
    }
}
