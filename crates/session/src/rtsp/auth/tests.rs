use super::*;
use metronome_config::rtsp_auth::RtspUser;
use std::net::Ipv4Addr;

const REALM: &str = "http-auth@example.org";
const PASSWORD: &str = "Circle of Life";

fn bytes<const N: usize>(hex: &str) -> [u8; N] {
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

/// RFC 7616 §3.9.1's user, with both hashes, allowed `/dir` only.
fn auth() -> Authenticator {
    let mufasa = RtspUser {
        name: "Mufasa".into(),
        md5: Some(bytes(&ha1(Algorithm::Md5, "Mufasa", REALM, PASSWORD))),
        sha256: Some(bytes(&ha1(Algorithm::Sha256, "Mufasa", REALM, PASSWORD))),
        mounts: Some(vec!["dir".into()]),
    };
    let spec = RtspAuthSpec {
        realm: REALM.into(),
        public: vec![],
        users: vec![mufasa],
    };
    Authenticator::new(spec, [7; 32])
}

const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));

fn asking<'a>(url: &'a Url, authorization: Option<&'a str>, now: Timestamp) -> Asking<'a> {
    Asking {
        now,
        peer: PEER,
        method: "DESCRIBE",
        url,
        mount: "dir",
        authorization,
        session_user: None,
        secure: false,
    }
}

/// What a client answers to `challenge` (its first challenge's nonce) with `alg`.
fn answer(challenge: &str, alg: Algorithm, password: &str, uri: &str, qop: bool) -> String {
    let nonce = challenge
        .split("nonce=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let a1 = ha1(alg, "Mufasa", REALM, password);
    let a2 = alg.hex(&[b"DESCRIBE", uri.as_bytes()]);
    let (response, extra) = if qop {
        let r = alg.hex(&[
            a1.as_bytes(),
            nonce.as_bytes(),
            b"00000001",
            b"0a4f113b",
            b"auth",
            a2.as_bytes(),
        ]);
        (r, ", qop=auth, nc=00000001, cnonce=\"0a4f113b\"")
    } else {
        (
            alg.hex(&[a1.as_bytes(), nonce.as_bytes(), a2.as_bytes()]),
            "",
        )
    };
    format!(
        "Digest username=\"Mufasa\", realm=\"{REALM}\", nonce=\"{nonce}\", uri=\"{uri}\", \
         response=\"{response}\", algorithm={}{extra}",
        alg.name()
    )
}

#[test]
fn rfc_7616_example_hashes() {
    // §3.9.1: the same request answered with MD5 and with SHA-256.
    let nonce = b"7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v";
    let cnonce = b"f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ";
    for (alg, expected) in [
        (Algorithm::Md5, "8ca523f5e9506fed4657c9700eebdbec"),
        (
            Algorithm::Sha256,
            "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1",
        ),
    ] {
        let a1 = ha1(alg, "Mufasa", REALM, PASSWORD);
        let a2 = alg.hex(&[b"GET", b"/dir/index.html"]);
        let r = alg.hex(&[
            a1.as_bytes(),
            nonce,
            b"00000001",
            cnonce,
            b"auth",
            a2.as_bytes(),
        ]);
        assert_eq!(r, expected, "{alg:?}");
    }
}

#[test]
fn the_rfc_example_answer_is_right_but_its_nonce_is_not_ours() {
    let url = Url::parse("rtsp://example.org/dir/index.html").unwrap();
    let header = "Digest username=\"Mufasa\", realm=\"http-auth@example.org\", \
        uri=\"/dir/index.html\", algorithm=MD5, nonce=\"7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v\", \
        nc=00000001, cnonce=\"f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ\", qop=auth, \
        response=\"8ca523f5e9506fed4657c9700eebdbec\", opaque=\"FQhe\"";
    let mut req = asking(&url, Some(header), Timestamp::from_secs(1));
    req.method = "GET";
    // A right answer to a nonce we did not make: stale, so the client retries silently.
    assert!(matches!(
        auth().check(&req),
        Verdict::Challenge {
            stale: true,
            failed: false,
            ..
        }
    ));
}

#[test]
fn both_algorithms_and_both_answer_forms_pass() {
    let a = auth();
    let url = Url::parse("rtsp://127.0.0.1:8554/dir").unwrap();
    let now = Timestamp::from_secs(10);
    let challenge = a.challenge(now, PEER, false, false);
    assert!(
        challenge.find("SHA-256") < challenge.find("MD5"),
        "{challenge}"
    );
    for alg in [Algorithm::Md5, Algorithm::Sha256] {
        for qop in [true, false] {
            for uri in ["rtsp://127.0.0.1:8554/dir", "/dir"] {
                let h = answer(&challenge, alg, PASSWORD, uri, qop);
                let v = a.check(&asking(&url, Some(&h), now + Duration::from_secs(1)));
                assert_eq!(v, Verdict::Pass("Mufasa".into()), "{alg:?} qop {qop} {uri}");
            }
        }
    }
}

#[test]
fn wrong_answers_are_refused() {
    let a = auth();
    let url = Url::parse("rtsp://127.0.0.1:8554/dir").unwrap();
    let now = Timestamp::from_secs(10);
    let challenge = a.challenge(now, PEER, false, false);
    let failed = |h: &str| {
        matches!(
            a.check(&asking(&url, Some(h), now)),
            Verdict::Challenge {
                failed: true,
                stale: false,
                ..
            }
        )
    };
    assert!(failed(&answer(
        &challenge,
        Algorithm::Md5,
        "circle of life",
        "/dir",
        true
    )));
    let other_url = answer(&challenge, Algorithm::Md5, PASSWORD, "/other", true);
    assert!(failed(&other_url), "an answer for another URL");
    let bob = answer(&challenge, Algorithm::Md5, PASSWORD, "/dir", true).replace("Mufasa", "Bob");
    assert!(failed(&bob), "an unknown user");
    assert!(
        failed("Basic TXVmYXNhOkNpcmNsZSBvZiBMaWZl"),
        "Basic without TLS"
    );
    assert!(failed("Digest username=\"Mufasa\""), "missing parameters");
    assert!(
        failed("Digest username=\"Mufasa, realm"),
        "an unclosed quote"
    );
    assert!(
        failed(&format!("Digest {}", "a=b, ".repeat(40))),
        "too many parameters"
    );
    let sess = answer(&challenge, Algorithm::Md5, PASSWORD, "/dir", true)
        .replace("algorithm=MD5", "algorithm=MD5-sess");
    assert!(failed(&sess), "an algorithm not offered");
    let int = answer(&challenge, Algorithm::Md5, PASSWORD, "/dir", true)
        .replace("qop=auth", "qop=auth-int");
    assert!(failed(&int), "auth-int");
    let none = a.check(&asking(&url, None, now));
    assert!(
        matches!(none, Verdict::Challenge { failed: false, .. }),
        "{none:?}"
    );
}

#[test]
fn nonces_are_bound_to_the_address_and_expire_except_for_the_session_they_set_up() {
    let a = auth();
    let url = Url::parse("rtsp://127.0.0.1:8554/dir").unwrap();
    let t0 = Timestamp::from_secs(10);
    let h = answer(
        &a.challenge(t0, PEER, false, false),
        Algorithm::Sha256,
        PASSWORD,
        "/dir",
        true,
    );
    let stale = |v: Verdict| {
        matches!(
            v,
            Verdict::Challenge {
                stale: true,
                failed: false,
                ..
            }
        )
    };
    let mut elsewhere = asking(&url, Some(&h), t0);
    elsewhere.peer = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
    assert!(stale(a.check(&elsewhere)), "another address");
    let late = t0 + NONCE_LIFETIME + Duration::from_secs(1);
    assert!(stale(a.check(&asking(&url, Some(&h), late))), "too old");
    let mut session = asking(&url, Some(&h), late);
    session.session_user = Some("Mufasa");
    assert_eq!(a.check(&session), Verdict::Pass("Mufasa".into()));
    let renewed = a.challenge(late, PEER, true, false);
    assert!(renewed.contains("stale=true"), "{renewed}");
}

#[test]
fn a_user_plays_only_its_mounts() {
    let a = auth();
    let url = Url::parse("rtsp://127.0.0.1:8554/cam2").unwrap();
    let now = Timestamp::from_secs(10);
    let h = answer(
        &a.challenge(now, PEER, false, false),
        Algorithm::Md5,
        PASSWORD,
        "/cam2",
        false,
    );
    let mut req = asking(&url, Some(&h), now);
    req.mount = "cam2";
    assert!(matches!(a.check(&req), Verdict::Forbidden(_)));
}

#[test]
fn only_algorithms_with_hashes_are_offered() {
    let mut spec = auth().spec().clone();
    spec.users[0].md5 = None;
    let a = Authenticator::new(spec, [1; 32]);
    let c = a.challenge(Timestamp::from_secs(1), PEER, false, false);
    assert!(c.contains("SHA-256") && !c.contains("MD5"), "{c}");
    assert!(!format!("{a:?}").contains("[1, 1"), "Debug hides the key");
}

#[test]
fn basic_passes_over_tls_only() {
    use base64::Engine;
    let a = auth();
    let url = Url::parse("rtsp://127.0.0.1:8554/dir").unwrap();
    let now = Timestamp::from_secs(10);
    let token = |cred: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(cred)
        )
    };
    let right = token("Mufasa:Circle of Life");
    let mut req = asking(&url, Some(&right), now);
    assert!(matches!(
        a.check(&req),
        Verdict::Challenge { failed: true, .. }
    ));
    req.secure = true;
    assert_eq!(a.check(&req), Verdict::Pass("Mufasa".into()));
    let wrong = token("Mufasa:circle of life");
    req.authorization = Some(&wrong);
    assert!(matches!(
        a.check(&req),
        Verdict::Challenge { failed: true, .. }
    ));
    req.authorization = Some("Basic !!!not base64");
    assert!(matches!(
        a.check(&req),
        Verdict::Challenge { failed: true, .. }
    ));
    assert!(a
        .challenge(now, PEER, false, true)
        .ends_with("Basic realm=\"http-auth@example.org\""));
    assert!(!a.challenge(now, PEER, false, false).contains("Basic"));
}
