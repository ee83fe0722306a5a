//! The report renders in a real browser: headless Chromium (Debian's `chromium`) loads
//! seed001-udp's report from disk, with no network, takes a screenshot and dumps the DOM it
//! built; the plots are there, with their axes' text.

use metronome_config::scenario::ScenarioFile;
use metronome_lab::builtin;
use metronome_lab::run::{run, RunOptions};
use metronome_testkit::TempDir;
use std::path::Path;

/// Headless Chromium with `args` on the file `page`; its stdout.
fn chromium(profile: &Path, args: &[&str], page: &Path) -> String {
    metronome_testkit::chromium(profile, args, &format!("file://{}", page.display()))
}

/// What in `page`, laid out by Chromium in a window 1280 pixels wide, reaches past the
/// page's right edge (a table too wide makes the reader scroll sideways): each element's tag
/// and the start of its text. A copy of the page with a script that measures is loaded; the
/// report itself runs no script.
fn wider_than_the_page(profile: &Path, page: &Path) -> Vec<String> {
    let probe = page.with_file_name("probe.html");
    let measure = "<script>window.addEventListener('load', () => { const w = \
        document.documentElement.clientWidth; const out = []; for (const e of \
        document.querySelectorAll('body *')) { if (e.getBoundingClientRect().right > w + 1) \
        out.push(e.tagName + ': ' + (e.textContent || '').slice(0, 50)); } const p = \
        document.createElement('pre'); p.id = 'wide'; p.textContent = out.join('\\n'); \
        document.body.appendChild(p); });</script></body>";
    let html = std::fs::read_to_string(page).unwrap();
    std::fs::write(&probe, html.replace("</body>", measure)).unwrap();
    let dom = chromium(
        profile,
        &[
            "--dump-dom",
            "--window-size=1280,1000",
            "--virtual-time-budget=5000",
        ],
        &probe,
    );
    let (_, after) = dom
        .split_once("<pre id=\"wide\">")
        .expect("the measuring script ran");
    let wide = after.split("</pre>").next().unwrap_or("");
    wide.lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn the_report_renders_in_headless_chromium_with_its_plots() {
    let tmp = TempDir::new("browser");
    let b = builtin::find("seed001-udp").unwrap();
    let file = ScenarioFile::parse(b.text, "builtin:seed001-udp").unwrap();
    let out = tmp.0.join("run");
    let opts = RunOptions::new(out.clone());
    run(&file, &opts).unwrap();
    let page = out.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    // Nothing is fetched: no scripts, styles, fonts or images from elsewhere.
    for needle in ["src=\"http", "href=\"http", "url(http", "<script", "<link"] {
        assert!(!html.contains(needle), "the report refers out: {needle}");
    }

    let profile = tmp.0.join("chromium");
    let shot = tmp.0.join("report.png");
    chromium(
        &profile,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,4000",
        ],
        &page,
    );
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    assert_eq!(&png[1..4], b"PNG");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert_eq!((width, height), (1280, 4000));
    // A blank page compresses to a few kilobytes; tables and plots do not.
    assert!(
        png.len() > 100_000,
        "{} bytes: is the page blank?",
        png.len()
    );

    let dom = chromium(&profile, &["--dump-dom"], &page);
    let figures = dom.matches("<figure class=\"plot\"").count();
    let svgs = dom.matches("<svg").count();
    // Per sweep group: loss and jitter against the rate (2 groups); per point: throughput
    // and the delay and inter-arrival distributions (10 points); the receivers' sweep plots.
    assert!(
        figures >= 2 * 2 + 10 * 3,
        "{figures} plots in the rendered page"
    );
    assert_eq!(svgs, figures, "every plot is an inline SVG");
    for text in [
        "loss_percent against rate",
        "rate, Mbit/s",
        "Throughput over time",
        "delay, ms",
    ] {
        assert!(dom.contains(text), "the rendered page lacks '{text}'");
    }
    assert!(dom.contains("Seed 001: UDP loss per client"));
    let wide = wider_than_the_page(&profile, &page);
    assert!(wide.is_empty(), "wider than the page: {wide:?}");
}

/// seed002-cbr's report, shortened (6 s, 3 receivers, 2 replicates): the claims it checks,
/// every metric over the replicates, the rate controllers' tables and target plot, the
/// sharing table, and the video as sent (frame sizes, the rung of each GOP) render in
/// Chromium too.
#[test]
fn a_rate_control_report_renders_its_claims_and_controllers() {
    let tmp = TempDir::new("browser-cc");
    let text = builtin::find("seed002-cbr")
        .unwrap()
        .text
        .replace("duration = \"73s\"", "duration = \"6s\"")
        .replace("count = 45", "count = 3");
    // Two replicates (10 as built in): each figure as a mean and an interval.
    let file = ScenarioFile::parse(&text, "builtin:seed002-cbr, shortened")
        .and_then(|f| f.with_replicates(2))
        .unwrap();
    let out = tmp.0.join("run");
    run(&file, &RunOptions::new(out.clone())).unwrap();
    let page = out.join("report.html");
    let profile = tmp.0.join("chromium");
    let dom = chromium(&profile, &["--dump-dom"], &page);
    // The claims table, with its long notes, and every point's tables fit the page.
    let wide = wider_than_the_page(&profile, &page);
    assert!(wide.is_empty(), "wider than the page: {wide:?}");
    for text in [
        "Claims checked",
        "TFMCC uses more of the bandwidth",
        "Rate control",
        "Sending rate over time",
        "Jain's index",
        "PSNR per frame",
        "Frame sizes over time",
        "Rung per GOP",
        "Across replicates",
        "95 % interval",
    ] {
        assert!(dom.contains(text), "the rendered page lacks '{text}'");
    }
    // Each of the five claims has a verdict, in its row's last cell.
    let verdicts = ["\">agrees</td>", "\">differs", "\">inconclusive</td>"]
        .iter()
        .map(|v| dom.matches(v).count())
        .sum::<usize>();
    assert_eq!(verdicts, 5, "claims with a verdict");
}
