//! SVG of log2 latency histograms: predicted beside measured, one pair of bars per funclatency
//! bucket (`2^k .. 2^(k+1) − 1` ns), fractions of all calls on the y axis.

use std::path::Path;

use plotters::prelude::*;

use crate::error::{Error, Result};

fn bucket_label(lo_ns: u64) -> String {
    // Two or three significant digits in the unit that keeps the number >= 1: log2 bucket
    // bounds (2048 ns, 131072 ns) read as "2 µs", "131 µs", not "2.048us".
    let x = lo_ns as f64;
    let (v, unit) = if x >= 1e6 {
        (x / 1e6, "ms")
    } else if x >= 1e3 {
        (x / 1e3, "µs")
    } else {
        (x, "ns")
    };
    if v >= 10.0 {
        format!("{v:.0} {unit}")
    } else {
        format!("{:.1} {unit}", v).replace(".0 ", " ")
    }
}

/// Draws `predicted` (`(lo_ns, fraction)` per bucket, ascending) and, if given, `measured`
/// (fractions of the same buckets) to an SVG file.
pub fn draw_log2_histograms(
    path: &Path,
    title: &str,
    predicted: &[(u64, f64)],
    measured: Option<&[f64]>,
    measured_label: Option<&str>,
) -> Result<()> {
    let file = path.display().to_string();
    let fail = |e: String| Error::invalid(&file, "svg", e);
    if predicted.is_empty() {
        return Err(fail("no buckets to draw".to_string()));
    }
    if let Some(m) = measured {
        if m.len() != predicted.len() {
            return Err(fail(format!(
                "{} measured fractions for {} buckets",
                m.len(),
                predicted.len()
            )));
        }
    }
    // Headroom above the tallest bar for the legend, so it never covers a bar.
    let ymax = predicted
        .iter()
        .map(|p| p.1)
        .chain(measured.unwrap_or(&[]).iter().copied())
        .fold(0.0, f64::max)
        .max(1e-6)
        * 1.35;
    let n = predicted.len();
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(60)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax)
        .map_err(|e| fail(e.to_string()))?;
    let labels: Vec<String> = predicted.iter().map(|p| bucket_label(p.0)).collect();
    chart
        .configure_mesh()
        .x_desc("latency bucket (lower bound; log2 buckets)")
        .y_desc("fraction of calls")
        .x_labels(n.min(24))
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            labels.get(i).cloned().unwrap_or_default()
        })
        .draw()
        .map_err(|e| fail(e.to_string()))?;
    let w = if measured.is_some() { 0.4 } else { 0.8 };
    chart
        .draw_series(predicted.iter().enumerate().map(|(i, p)| {
            let x0 = i as f64 + 0.1;
            Rectangle::new([(x0, 0.0), (x0 + w, p.1)], BLUE.mix(0.7).filled())
        }))
        .map_err(|e| fail(e.to_string()))?
        .label("model")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], BLUE.mix(0.7).filled()));
    if let Some(m) = measured {
        chart
            .draw_series(m.iter().enumerate().map(|(i, f)| {
                let x0 = i as f64 + 0.5;
                Rectangle::new([(x0, 0.0), (x0 + w, *f)], RED.mix(0.6).filled())
            }))
            .map_err(|e| fail(e.to_string()))?
            .label(format!("measured ({})", measured_label.unwrap_or("data")))
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], RED.mix(0.6).filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(e.to_string()))?;
    root.present().map_err(|e| fail(e.to_string()))?;
    Ok(())
}
