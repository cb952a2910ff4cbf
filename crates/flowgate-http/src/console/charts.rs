//! The console's charts (D24), drawn on the server as SVG by plotters: cumulative exposed
//! users per variant per day (one line per variant), each metric's mean per variant with its
//! 95% interval, and each treatment's lift over the control with the interval of the report's
//! method (D27: sequential or fixed horizon), beside a line at 0. Plotters escapes the text it writes (variant names come from the catalog);
//! the colours are the Okabe–Ito palette, which colour-blind readers can tell apart, and every
//! chart has a table beside it with the same figures.

use std::collections::BTreeMap;

use flowgate_domain::results::{Estimate, ExperimentReport, MetricKind, MetricReport, NoEstimate};
use plotters::prelude::*;

/// Width and height of a chart, in SVG units (it scales to its container).
const SIZE: (u32, u32) = (720, 320);
/// The size of the axes' text.
const LABEL_SIZE: u32 = 15;
/// The stroke width of a series line.
const SERIES_WIDTH: u32 = 2;
/// The series colours, in variant order.
const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
];

/// The colour of the `index`th variant, as `#RRGGBB`.
pub(super) fn colour(index: usize) -> &'static str {
    PALETTE[index % PALETTE.len()]
}

fn rgb(index: usize) -> RGBColor {
    let hex = colour(index);
    let byte = |at: usize| u8::from_str_radix(hex.get(at..at + 2).unwrap_or("00"), 16).unwrap_or(0);
    RGBColor(byte(1), byte(3), byte(5))
}

/// An SVG that says the chart could not be drawn (it never happens with finite figures).
fn unavailable(error: &str) -> String {
    tracing::warn!(%error, "console: chart not drawn");
    format!(
        "<svg viewBox=\"0 0 {} 40\" xmlns=\"http://www.w3.org/2000/svg\"><text x=\"0\" y=\"20\">chart unavailable</text></svg>",
        SIZE.0
    )
}

/// The axes of a chart whose x axis is `labels`, one at each whole number from 0 (half a step
/// of margin on each side, so a single one is in the middle), and whose y axis spans `y`
/// (described as `y_desc`); with `x_mesh`, a vertical line at each label.
fn frame<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    labels: &[String],
    y: std::ops::Range<f64>,
    y_desc: &str,
    x_mesh: bool,
) -> Result<
    ChartContext<
        'a,
        SVGBackend<'b>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    DrawingAreaErrorKind<std::io::Error>,
> {
    let last = labels.len().max(1) as f64 - 0.5;
    // Whole numbers on a wide axis, tenths on a narrow one.
    let decimals = if y.end - y.start >= 10.0 { 0 } else { 1 };
    let mut chart = ChartBuilder::on(root)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(72)
        .build_cartesian_2d(-0.5f64..last, y)?;
    let label = |x: &f64| {
        let at = x.round();
        if (x - at).abs() > 1e-6 || at < 0.0 {
            return String::new();
        }
        labels.get(at as usize).cloned().unwrap_or_default()
    };
    let mut mesh = chart.configure_mesh();
    if !x_mesh {
        mesh.disable_x_mesh();
    }
    mesh.x_labels(labels.len().clamp(1, 10) + 1)
        .light_line_style(TRANSPARENT)
        .label_style(("sans-serif", LABEL_SIZE))
        .axis_desc_style(("sans-serif", LABEL_SIZE))
        .x_label_formatter(&label)
        .y_label_formatter(&|y| format!("{y:.decimals$}"))
        .y_desc(y_desc)
        .draw()?;
    Ok(chart)
}

/// Marks `svg` as an image labelled `label` for assistive technology.
fn labelled(svg: String, label: &str) -> String {
    let label = label
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;");
    svg.replacen(
        "<svg ",
        &format!("<svg role=\"img\" aria-label=\"{label}\" "),
        1,
    )
}

/// The days of a report's exposures, and per variant of the report (in its order) the users
/// exposed up to each of those days.
pub(super) fn cumulative_exposures(report: &ExperimentReport) -> (Vec<time::Date>, Vec<Vec<u64>>) {
    let days: Vec<time::Date> = {
        let mut days: Vec<_> = report.daily.iter().map(|d| d.date).collect();
        days.sort_unstable();
        days.dedup();
        days
    };
    let mut per_day: BTreeMap<(usize, time::Date), u64> = BTreeMap::new();
    for d in &report.daily {
        if let Some(v) = report
            .variants
            .iter()
            .position(|v| v.variant_id == d.variant_id)
        {
            *per_day.entry((v, d.date)).or_default() += d.users;
        }
    }
    let series = (0..report.variants.len())
        .map(|v| {
            let mut total = 0u64;
            days.iter()
                .map(|day| {
                    total += per_day.get(&(v, *day)).copied().unwrap_or(0);
                    total
                })
                .collect()
        })
        .collect();
    (days, series)
}

/// Cumulative exposed users per variant by day: one line per variant (`series`, each with a
/// figure per day of `days`).
pub(super) fn exposures(days: &[time::Date], series: &[Vec<u64>]) -> String {
    let series: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| {
            s.iter()
                .enumerate()
                .map(|(i, n)| (i as f64, *n as f64))
                .collect()
        })
        .collect();
    let top = series
        .iter()
        .filter_map(|s| s.last().map(|p| p.1))
        .fold(1.0f64, f64::max);
    let mut svg = String::new();
    let drawn = (|| -> Result<(), Box<dyn std::error::Error + '_>> {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let labels: Vec<String> = days
            .iter()
            .map(|d| format!("{:02}-{:02}", u8::from(d.month()), d.day()))
            .collect();
        let mut chart = frame(&root, &labels, 0.0..top * 1.08, "exposed users", true)?;
        for (v, points) in series.iter().enumerate() {
            let style = ShapeStyle::from(rgb(v)).stroke_width(SERIES_WIDTH);
            chart.draw_series(LineSeries::new(points.iter().copied(), style))?;
            // A day alone is a line of one point: the markers show it.
            let marker = rgb(v).filled();
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 3, marker)))?;
        }
        root.present()?;
        Ok(())
    })();
    // Only the series are drawn this wide (the axes and the mesh are 1 unit): they are marked
    // as such, one `polyline.series` per variant.
    let svg = svg.replace(
        &format!("stroke-width=\"{SERIES_WIDTH}\" points="),
        &format!("class=\"series\" stroke-width=\"{SERIES_WIDTH}\" points="),
    );
    match drawn {
        Ok(()) => labelled(svg, "Cumulative exposed users per variant by day"),
        Err(e) => unavailable(&e.to_string()),
    }
}

/// The figures [`means`] draws for `metric`: per variant, the low end of the interval, the
/// mean and the high end, a conversion in percent.
pub(super) fn mean_points(metric: &MetricReport) -> Vec<(f64, f64, f64)> {
    let scale = match metric.kind {
        MetricKind::Conversion => 100.0,
        _ => 1.0,
    };
    metric
        .variants
        .iter()
        .map(|v| {
            let (low, high) = v
                .sums
                .mean_interval(metric.kind)
                .unwrap_or((v.mean, v.mean));
            (low * scale, v.mean * scale, high * scale)
        })
        .collect()
}

/// A metric's means with their 95% intervals: a dot and a bar per variant, named `names`;
/// `kind` labels the axis, `label` the chart.
pub(super) fn means(
    kind: MetricKind,
    label: &str,
    names: &[&str],
    points: &[(f64, f64, f64)],
) -> String {
    let finite = points
        .iter()
        .flat_map(|p| [p.0, p.2])
        .filter(|x| x.is_finite());
    let (low, high) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
        (l.min(x), h.max(x))
    });
    let (low, high) = if low.is_finite() && high > low {
        let pad = (high - low) * 0.15;
        (
            (low - pad).max(if low >= 0.0 { 0.0 } else { f64::NEG_INFINITY }),
            high + pad,
        )
    } else {
        (0.0, 1.0)
    };
    let mut svg = String::new();
    let drawn = (|| -> Result<(), Box<dyn std::error::Error + '_>> {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let labels: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let y_desc = match kind {
            MetricKind::Conversion => "converted users (%)",
            _ => "mean per user",
        };
        let mut chart = frame(&root, &labels, low..high, y_desc, false)?;
        for (i, (low, mean, high)) in points.iter().copied().enumerate() {
            // The bar spans the interval, with caps; its dot (a circle) is the mean.
            let style = rgb(i).filled().stroke_width(3);
            let bar = ErrorBar::new_vertical(i as f64, low, mean, high, style, 12);
            chart.draw_series(std::iter::once(bar))?;
        }
        root.present()?;
        Ok(())
    })();
    match drawn {
        Ok(()) => labelled(
            svg,
            &format!("{label}: mean per variant with 95% intervals"),
        ),
        Err(e) => unavailable(&e.to_string()),
    }
}

/// The figures [`lifts`] draws of one metric, from its variants' `comparisons` (in the
/// report's order, the control's `None`): per treatment with an estimate, its index among the
/// variants, the low end of its lift's interval, the lift and the high end, in percent. A
/// treatment without an estimate (or with figures that are not finite) is left out: the table
/// says why.
pub(super) fn lift_points(
    comparisons: &[Option<&Result<Estimate, NoEstimate>>],
) -> Vec<(usize, f64, f64, f64)> {
    comparisons
        .iter()
        .enumerate()
        .filter_map(|(i, c)| match c {
            Some(Ok(e)) if [e.ci_low, e.lift, e.ci_high].iter().all(|x| x.is_finite()) => {
                // Clamped at -100% as the words are (D35); the JSON keeps gbstats' figures.
                let at = |x: f64| x.max(-1.0) * 100.0;
                Some((i, at(e.ci_low), at(e.lift), at(e.ci_high)))
            }
            _ => None,
        })
        .collect()
}

/// The longest variant name the lift chart writes on its axis (the table has them whole).
const LIFT_NAME_CHARS: usize = 20;
/// The height of a row of the lift chart, and of the rest (margins and the x axis).
const LIFT_ROW: u32 = 56;
const LIFT_FRAME: u32 = 84;
/// The stroke width of the line at 0, which only it has: it is marked `polyline.zero`.
const ZERO_WIDTH: u32 = 2;

/// Each treatment's lift over the control with its interval, one row per point of
/// [`lift_points`] (`names` are the variants' in the report's order, so a point's colour is its
/// variant's), and a vertical line at 0 (no difference); `label` names the metric and
/// `interval` the method the intervals are from.
pub(super) fn lifts(
    label: &str,
    interval: &str,
    names: &[&str],
    points: &[(usize, f64, f64, f64)],
) -> String {
    let rows = points.len().max(1);
    let size = (SIZE.0, LIFT_FRAME + LIFT_ROW * rows as u32);
    let (low, high) = points
        .iter()
        .flat_map(|p| [p.1, p.3])
        .fold((0.0f64, 0.0f64), |(l, h), x| (l.min(x), h.max(x)));
    let (low, high) = if high > low {
        let pad = (high - low) * 0.08;
        (low - pad, high + pad)
    } else {
        (-1.0, 1.0)
    };
    // The first point on the top row.
    let row_of = |i: usize| (rows - 1 - i) as f64;
    let labels: Vec<String> = points
        .iter()
        .map(|p| {
            let name = names.get(p.0).copied().unwrap_or("?");
            if name.chars().count() > LIFT_NAME_CHARS {
                let cut: String = name.chars().take(LIFT_NAME_CHARS - 1).collect();
                format!("{cut}…")
            } else {
                name.to_owned()
            }
        })
        .collect();
    let mut svg = String::new();
    let drawn = (|| -> Result<(), Box<dyn std::error::Error + '_>> {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)?;
        let decimals = if high - low >= 10.0 { 0 } else { 1 };
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(170)
            .build_cartesian_2d(low..high, -0.5f64..rows as f64 - 0.5)?;
        let label = |y: &f64| {
            let at = y.round();
            if (y - at).abs() > 1e-6 || at < 0.0 {
                return String::new();
            }
            let row = rows.saturating_sub(1 + at as usize);
            labels.get(row).cloned().unwrap_or_default()
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows + 1)
            .light_line_style(TRANSPARENT)
            .label_style(("sans-serif", LABEL_SIZE))
            .axis_desc_style(("sans-serif", LABEL_SIZE))
            .y_label_formatter(&label)
            .x_label_formatter(&|x| format!("{x:.decimals$}%"))
            .x_desc("lift over the control (%)")
            .draw()?;
        let zero = ShapeStyle::from(BLACK).stroke_width(ZERO_WIDTH);
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(0.0, -0.5), (0.0, rows as f64 - 0.5)],
            zero,
        )))?;
        for (row, (variant, low, lift, high)) in points.iter().copied().enumerate() {
            // The bar spans the interval, with caps; its dot (a circle) is the lift.
            let style = rgb(variant).filled().stroke_width(3);
            let bar = ErrorBar::new_horizontal(row_of(row), low, lift, high, style, 12);
            chart.draw_series(std::iter::once(bar))?;
        }
        root.present()?;
        Ok(())
    })();
    // The line at 0 is the only one this wide, and the lifts the only circles.
    let svg = svg
        .replace(
            &format!("stroke-width=\"{ZERO_WIDTH}\" points="),
            &format!("class=\"zero\" stroke-width=\"{ZERO_WIDTH}\" points="),
        )
        .replace("<circle ", "<circle class=\"lift\" ");
    match drawn {
        Ok(()) => labelled(
            svg,
            &format!(
                "{label}: lift of each treatment over the control with its {interval} 95% interval"
            ),
        ),
        Err(e) => unavailable(&e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    #[test]
    fn the_exposure_chart_has_one_line_per_variant_over_every_day() {
        let days = [
            date!(2026 - 11 - 01),
            date!(2026 - 11 - 02),
            date!(2026 - 11 - 03),
        ];
        let svg = exposures(&days, &[vec![10, 15, 15], vec![0, 0, 7], vec![0, 0, 0]]);
        assert_eq!(svg.matches("class=\"series\"").count(), 3, "{svg}");
        // Three days, so three points per line.
        let lines: Vec<&str> = svg
            .split("class=\"series\"")
            .skip(1)
            .map(|rest| {
                rest.split("points=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
            })
            .collect();
        assert!(
            lines
                .iter()
                .all(|points| points.split_whitespace().count() == 3),
            "{lines:?}"
        );
        assert!(svg.starts_with("<svg role=\"img\" aria-label="), "{svg}");
        // One day: still a line (of one point) per variant, and a marker on it.
        let svg = exposures(&days[..1], &[vec![3], vec![4]]);
        assert_eq!(svg.matches("class=\"series\"").count(), 2, "{svg}");
        assert!(svg.matches("<circle").count() >= 2, "{svg}");
    }

    #[test]
    fn a_variant_name_is_text_in_the_chart() {
        let names = ["control", "<script>alert(1)</script>"];
        let svg = means(
            MetricKind::Conversion,
            "a\"b",
            &names,
            &[(1.0, 2.0, 3.0), (2.0, 3.0, 4.0)],
        );
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(
            svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{svg}"
        );
        assert!(svg.contains("aria-label=\"a&quot;b: "), "{svg}");
    }

    #[test]
    fn the_lift_chart_has_one_interval_per_treatment_with_an_estimate() {
        let estimate = |lift: f64| Estimate {
            lift,
            ci_low: lift - 0.1,
            ci_high: lift + 0.1,
            p_value: 0.5,
            chance_to_win: 0.6,
            credible_low: lift - 0.1,
            credible_high: lift + 0.1,
        };
        let (a, b) = (Ok(estimate(0.05)), Ok(estimate(-0.2)));
        let none = Err(NoEstimate::NoUsers);
        let not_finite = Ok(estimate(f64::NAN));
        let comparisons = [None, Some(&a), Some(&none), Some(&b), Some(&not_finite)];
        let points = lift_points(&comparisons);
        // The control, the one without an estimate and the one not finite are left out.
        assert_eq!(points.iter().map(|p| p.0).collect::<Vec<_>>(), [1, 3]);
        assert!((points[0].2 - 5.0).abs() < 1e-9, "{points:?}");
        assert!((points[1].1 - -30.0).abs() < 1e-9, "{points:?}");
        // Issue 65: an interval's end below -100% is drawn at -100% (D35).
        let far = Ok(estimate(-0.95));
        let clamped = lift_points(&[None, Some(&far)]);
        assert_eq!(clamped[0].1, -100.0, "{clamped:?}");
        assert!((clamped[0].2 - -95.0).abs() < 1e-9, "{clamped:?}");
        let names = ["control", "a", "none", "<script>b</script>", "nan"];
        let svg = lifts("purchase_complete", "sequential", &names, &points);
        assert_eq!(svg.matches("<circle class=\"lift\"").count(), 2, "{svg}");
        assert_eq!(svg.matches("class=\"zero\"").count(), 1, "{svg}");
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(svg.contains("&lt;script&gt;b&lt;/script&gt;"), "{svg}");
        assert!(!svg.contains(">none<"), "{svg}");
        assert!(
            svg.contains("aria-label=\"purchase_complete: lift of each treatment over the control with its sequential 95% interval\""),
            "{svg}"
        );
        // No estimate at all: a frame with the line at 0 and no interval.
        let svg = lifts("revenue", "fixed horizon", &names, &[]);
        assert_eq!(svg.matches("<circle").count(), 0, "{svg}");
    }
}
