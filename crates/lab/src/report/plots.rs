//! The report's plots, as inline SVG drawn by plotters (no font is needed: text goes into the
//! SVG as `<text>` and the browser sets it).
//!
//! Every plot is a `<figure class="plot">` with a caption; a plot of many receivers draws the
//! first [`MAX_LINES`] and says how many it left out, so a 10,000-receiver run stays readable.

use super::esc;
use metronome_config::stream::{parse_bitrate, parse_duration};
use plotters::prelude::*;

/// Lines drawn in one plot at most.
pub const MAX_LINES: usize = 12;

/// One line: its name, its points, and how it is drawn.
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub style: Style,
    /// Lines of one group share a colour (a receiver's measured, reference and closed-form
    /// lines); the style tells them apart.
    pub group: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A solid line with round markers: what was measured.
    Measured,
    /// Triangles on a thin line: figures from elsewhere (a seed's table).
    Reference,
    /// Crosses on a thin line: the closed form.
    Closed,
    /// A plain line (time series, distributions).
    Plain,
    /// A shaded band (a 95 % confidence interval), drawn beneath the lines: its points go
    /// along the upper edge and back along the lower one ([`band`]).
    Band,
    /// Bars from zero (a histogram), side by side at each x when several lines have them.
    Bars,
}

/// A band's outline from `(x, low, high)` triples: along the highs, back along the lows.
pub fn band(points: &[(f64, f64, f64)]) -> Vec<(f64, f64)> {
    let upper = points.iter().map(|&(x, _, hi)| (x, hi));
    let lower = points.iter().rev().map(|&(x, lo, _)| (x, lo));
    upper.chain(lower).collect()
}

/// A plot's axes and caption.
pub struct Plot<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub caption: &'a str,
    /// Lines beyond [`MAX_LINES`] are left out (and counted in the caption).
    pub lines: Vec<Line>,
    /// Names of the x positions 1, 2, … when x is a category (a controller, a file), not a
    /// quantity: the ticks are named, and points are not joined (nothing lies between two
    /// categories; an interval is a bar at its category). Empty for a quantity.
    pub x_names: Vec<String>,
}

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// Sweep values as x coordinates: rates in Mbit/s, durations in ms, numbers as they are;
/// otherwise their positions (1, 2, …). Returns the values and the unit they are in.
pub fn x_values(labels: &[String]) -> (Vec<f64>, &'static str) {
    if let Ok(v) = labels
        .iter()
        .map(|l| parse_bitrate(l).map(|b| b as f64 / 1e6))
        .collect::<Result<Vec<_>, _>>()
    {
        if labels.iter().any(|l| l.chars().any(char::is_alphabetic)) {
            return (v, "Mbit/s");
        }
    }
    if let Ok(v) = labels
        .iter()
        .map(|l| parse_duration(l).map(|d| d.as_secs_f64() * 1e3))
        .collect::<Result<Vec<_>, _>>()
    {
        return (v, "ms");
    }
    if let Ok(v) = labels
        .iter()
        .map(|l| l.parse::<f64>())
        .collect::<Result<Vec<_>, _>>()
    {
        return (v, "");
    }
    ((1..=labels.len()).map(|i| i as f64).collect(), "position")
}

/// The names of [`x_values`]' positions for [`Plot::x_names`]: the labels when they are
/// categories (`unit` "position"), else none.
pub fn category_names(labels: &[String], unit: &str) -> Vec<String> {
    if unit == "position" {
        labels.to_vec()
    } else {
        Vec::new()
    }
}

/// The plot as an HTML figure with an inline SVG; empty if it has nothing to draw.
pub fn figure(plot: Plot) -> String {
    let total = plot.lines.len();
    let lines: Vec<&Line> = plot
        .lines
        .iter()
        .filter(|l| !l.points.is_empty())
        .take(MAX_LINES)
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let left_out = total.saturating_sub(lines.len());
    let Some(svg) = draw(&plot, &lines) else {
        return String::new();
    };
    let more = if left_out > 0 {
        format!(" ({left_out} more lines left out)")
    } else {
        String::new()
    };
    let legend: String = lines
        .iter()
        .map(|l| {
            let c = PALETTE[l.group % PALETTE.len()];
            let mark = match l.style {
                Style::Measured => "●",
                Style::Reference => "▲",
                Style::Closed => "✕",
                Style::Plain => "━",
                Style::Band | Style::Bars => "▮",
            };
            format!(
                "<span class=\"key\" style=\"color:#{:02x}{:02x}{:02x}\">{mark}</span> {} ",
                c.0,
                c.1,
                c.2,
                esc(&l.name)
            )
        })
        .collect();
    format!(
        "<figure class=\"plot\" id=\"{}\">{svg}<figcaption><div class=\"legend\">{legend}</div>{}{}</figcaption></figure>\n",
        esc(plot.id),
        esc(plot.caption),
        esc(&more)
    )
}

fn bounds(lines: &[&Line]) -> ((f64, f64), (f64, f64)) {
    let pts = lines.iter().flat_map(|l| l.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 0.0f64, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    let pad = (x1 - x0) * 0.03;
    ((x0 - pad, x1 + pad), (y0, y1 + (y1 - y0) * 0.08))
}

/// Tick labels and axis names large enough to read at the plot's size.
const LABEL_FONT: u32 = 13;

fn draw(plot: &Plot, lines: &[&Line]) -> Option<String> {
    let ((mut x0, mut x1), (y0, y1)) = bounds(lines);
    let categorical = !plot.x_names.is_empty();
    if categorical {
        (x0, x1) = (0.5, plot.x_names.len() as f64 + 0.5);
    }
    let name_of = |x: &f64| -> String {
        let k = x.round();
        if !categorical {
            return format!("{x}");
        }
        if (x - k).abs() > 1e-6 || k < 1.0 {
            return String::new();
        }
        plot.x_names
            .get(k as usize - 1)
            .cloned()
            .unwrap_or_default()
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 360)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        let mut chart = ChartBuilder::on(&root)
            .caption(plot.title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(x0..x1, y0..y1)
            .ok()?;
        let mut mesh = chart.configure_mesh();
        mesh.light_line_style(TRANSPARENT)
            .x_desc(plot.x_label)
            .y_desc(plot.y_label)
            .label_style(("sans-serif", LABEL_FONT))
            .axis_desc_style(("sans-serif", LABEL_FONT));
        if categorical {
            mesh.x_labels(plot.x_names.len() * 2 + 1)
                .x_label_formatter(&name_of);
        }
        mesh.draw().ok()?;
        for line in lines.iter().filter(|l| l.style == Style::Band) {
            draw_band(&mut chart, line, categorical)?;
        }
        let bars: Vec<&&Line> = lines.iter().filter(|l| l.style == Style::Bars).collect();
        for (k, line) in bars.iter().enumerate() {
            draw_bars(&mut chart, line, (k, bars.len()))?;
        }
        for line in lines
            .iter()
            .filter(|l| l.style != Style::Band && l.style != Style::Bars)
        {
            draw_line(&mut chart, line, categorical)?;
        }
        root.present().ok()?;
    }
    Some(svg)
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// A band (a 95 % interval), shaded; over categories, a bar at each.
fn draw_band(chart: &mut Chart, line: &Line, categorical: bool) -> Option<()> {
    let c = PALETTE[line.group % PALETTE.len()];
    if categorical {
        // The outline goes along the highs and back along the lows: a bar at each x.
        let n = line.points.len() / 2;
        let (highs, lows) = line.points.split_at(n);
        let bars = highs
            .iter()
            .zip(lows.iter().rev())
            .map(|(&(x, hi), &(_, lo))| {
                PathElement::new(vec![(x, lo), (x, hi)], c.mix(0.35).stroke_width(8))
            });
        chart.draw_series(bars).ok()?;
        return Some(());
    }
    chart
        .draw_series(std::iter::once(Polygon::new(
            line.points.clone(),
            c.mix(0.2).filled(),
        )))
        .ok()?;
    Some(())
}

/// Line `k` of `n` with bars: each point a bar from zero, `k`'s place beside the others'.
fn draw_bars(chart: &mut Chart, line: &Line, (k, n): (usize, usize)) -> Option<()> {
    let c = PALETTE[line.group % PALETTE.len()];
    let width = 0.8 / n.max(1) as f64;
    let left = -0.4 + k as f64 * width;
    let bars = line.points.iter().map(|&(x, y)| {
        Rectangle::new(
            [(x + left, 0.0), (x + left + width * 0.9, y)],
            c.mix(0.85).filled(),
        )
    });
    chart.draw_series(bars).ok()?;
    Some(())
}

/// A line and its markers; over categories, the markers alone (nothing lies between two).
fn draw_line(chart: &mut Chart, line: &Line, categorical: bool) -> Option<()> {
    let c = PALETTE[line.group % PALETTE.len()];
    let width = if line.style == Style::Measured || line.style == Style::Plain {
        2
    } else {
        1
    };
    let pts = line.points.clone();
    if !categorical {
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(width)))
            .ok()?
            .label(line.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    }
    match line.style {
        Style::Measured => {
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))
                .ok()?;
        }
        Style::Reference => {
            chart
                .draw_series(pts.into_iter().map(|p| TriangleMarker::new(p, 5, c)))
                .ok()?;
        }
        Style::Closed => {
            chart
                .draw_series(pts.into_iter().map(|p| Cross::new(p, 4, c)))
                .ok()?;
        }
        Style::Plain | Style::Band | Style::Bars => {}
    }
    Some(())
}

/// An axis label: the parameter, and its unit where it has one.
pub(super) fn axis(param: &str, unit: &str) -> String {
    if unit.is_empty() || unit == "position" {
        param.to_string()
    } else {
        format!("{param}, {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_is_bars_side_by_side() {
        let line = |group: usize, name: &str| Line {
            group,
            name: name.into(),
            points: (1..=5).map(|m| (m as f64, 10.0 * m as f64)).collect(),
            style: Style::Bars,
        };
        let html = figure(Plot {
            x_names: ["1", "2", "3", "4", "5"].map(String::from).to_vec(),
            id: "h",
            title: "MOS distribution",
            x_label: "MOS",
            y_label: "% of frames",
            caption: "a test",
            lines: vec![line(0, "a"), line(1, "b")],
        });
        // The white background, then a bar per point of each line; no line joins them.
        assert_eq!(html.matches("<rect").count(), 1 + 2 * 5, "{html}");
        assert!(!html.contains("stroke-width=\"2\" points="));
    }

    #[test]
    fn categories_name_their_ticks_and_are_not_joined() {
        let labels = vec!["tfmcc".to_string(), "asmp".to_string()];
        let (xs, unit) = x_values(&labels);
        let plot = |x_names: Vec<String>| {
            figure(Plot {
                x_names,
                id: "c",
                title: "Frames lost",
                x_label: "cc",
                y_label: "%",
                caption: "a test",
                lines: vec![Line {
                    name: "deadline = 150ms".into(),
                    points: vec![(xs[0], 5.5), (xs[1], 0.6)],
                    style: Style::Measured,
                    group: 0,
                }],
            })
        };
        let named = plot(category_names(&labels, unit));
        for name in ["tfmcc", "asmp"] {
            assert!(named.contains(&format!(">\n{name}\n<")), "no tick {name}");
        }
        // Only the axes' ticks are lines (1 px); a series' line is 2 px.
        let joined = |html: &str| html.contains("stroke-width=\"2\" points=");
        assert!(!joined(&named), "the categories are joined");
        // A quantity's points are joined, and its ticks are numbers.
        assert!(category_names(&["2mbit".into()], "Mbit/s").is_empty());
        assert!(joined(&plot(Vec::new())));
    }

    #[test]
    fn a_plot_is_an_svg_with_its_text_and_says_what_it_left_out() {
        let lines = (0..15)
            .map(|i| Line {
                name: format!("r{i}"),
                points: vec![(1.0, i as f64), (2.0, i as f64 + 1.0)],
                style: Style::Measured,
                group: i,
            })
            .collect();
        let html = figure(Plot {
            x_names: Vec::new(),
            id: "t",
            title: "Loss against bitrate",
            x_label: "bitrate, Mbit/s",
            y_label: "loss, %",
            caption: "a test",
            lines,
        });
        assert!(
            html.starts_with("<figure class=\"plot\" id=\"t\"><svg"),
            "{}",
            &html[..80]
        );
        for text in ["Loss against bitrate", "bitrate, Mbit/s", "loss, %", "r11"] {
            assert!(html.contains(text), "{text}");
        }
        assert!(!html.contains(" r12 "));
        assert!(html.contains("(3 more lines left out)"));
    }

    #[test]
    fn a_band_is_drawn_beneath_its_line_and_widens_the_axes() {
        let band = band(&[(1.0, 8.0, 12.0), (2.0, 18.0, 30.0)]);
        assert_eq!(band, [(1.0, 12.0), (2.0, 30.0), (2.0, 18.0), (1.0, 8.0)]);
        let html = figure(Plot {
            x_names: Vec::new(),
            id: "b",
            title: "with a band",
            x_label: "x",
            y_label: "y",
            caption: "a test",
            lines: vec![
                Line {
                    name: "mean".into(),
                    points: vec![(1.0, 10.0), (2.0, 20.0)],
                    style: Style::Measured,
                    group: 0,
                },
                Line {
                    name: "95 % interval".into(),
                    points: band,
                    style: Style::Band,
                    group: 0,
                },
            ],
        });
        let polygon = html.find("<polygon").expect("the band is a polygon");
        assert!(
            html[polygon..].contains("stroke=\"#1F77B4\""),
            "the mean is drawn over the band"
        );
        // The axis reaches the band's top (30), not only the line's (20).
        assert!(html.contains("\n30.0\n"), "{html}");
    }

    #[test]
    fn sweep_values_become_numbers() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            x_values(&s(&["2mbit", "10mbit"])),
            (vec![2.0, 10.0], "Mbit/s")
        );
        assert_eq!(x_values(&s(&["0ms", "1.2ms"])), (vec![0.0, 1.2], "ms"));
        assert_eq!(x_values(&s(&["3", "5"])), (vec![3.0, 5.0], ""));
        assert_eq!(x_values(&s(&["a", "b"])), (vec![1.0, 2.0], "position"));
    }
}
