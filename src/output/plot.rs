//! SVG figures (plotters with only the SVG backend, so no font files are needed: text is left to
//! the SVG viewer).
//!
//! The x axis of pcp->high curves is logarithmic in `high + 1` pages, so that bypass (0) sits at
//! the left edge.

use plotters::prelude::*;

use crate::answer::optimal_high::OptimalHigh;
use crate::error::{Error, Result};

fn plot_err<E: std::fmt::Display>(e: E) -> Error {
    Error::Unsupported(format!("drawing the SVG failed: {e}"))
}

/// Predicted relative throughput vs pcp->high with its 95 % band, the measured points (scaled by
/// the fitted score at the optimum) and markers for the optimum and the kernel default.
pub fn optimal_high_svg(o: &OptimalHigh, measured: &[(u32, f64)]) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let x_max = f64::from(o.swept_pages[1].max(1)) + 1.0;
        let opt_score = o
            .curve
            .iter()
            .find(|c| c.high_pages == o.optimal_high_pages)
            .and_then(|c| c.score);
        let pts: Vec<(f64, f64)> = match opt_score {
            Some(s) => measured
                .iter()
                .map(|&(h, y)| (f64::from(h) + 1.0, y / s))
                .collect(),
            None => Vec::new(),
        };
        let y_min = o
            .curve
            .iter()
            .map(|c| c.relative_lo95.min(c.relative))
            .chain(pts.iter().map(|p| p.1))
            .filter(|v| v.is_finite())
            .fold(1.0f64, f64::min)
            .max(0.0)
            - 0.03;
        let y_max = o
            .curve
            .iter()
            .map(|c| c.relative_hi95.max(c.relative))
            .chain(pts.iter().map(|p| p.1))
            .filter(|v| v.is_finite())
            .fold(1.0f64, f64::max)
            + 0.02;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "{} on {} (kernel {}, {}): {}",
                    o.workload,
                    o.machine,
                    o.kernel,
                    o.placement,
                    if o.plateau {
                        format!(
                            "within 1 % from {} to {} pages (plateau)",
                            o.within_1pct_pages[0], o.within_1pct_pages[1]
                        )
                    } else {
                        format!("optimum {} pages", o.optimal_high_pages)
                    }
                ),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d((1f64..x_max).log_scale(), y_min..legend_top(y_min, y_max))
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("pcp->high + 1 (4 KiB pages, log scale)")
            .x_label_formatter(&|x| page_tick(*x))
            .y_desc("throughput relative to the predicted optimum")
            .draw()
            .map_err(plot_err)?;
        let band: Vec<(f64, f64)> = o
            .curve
            .iter()
            .map(|c| (f64::from(c.high_pages) + 1.0, c.relative_hi95))
            .chain(
                o.curve
                    .iter()
                    .rev()
                    .map(|c| (f64::from(c.high_pages) + 1.0, c.relative_lo95)),
            )
            .filter(|p| p.1.is_finite())
            .collect();
        chart
            .draw_series(std::iter::once(Polygon::new(band, BLUE.mix(0.15))))
            .map_err(plot_err)?
            .label("95% band (fitted parameters and latencies)")
            .legend(|(x, y)| {
                Rectangle::new([(x, y - 5), (x + 20, y + 5)], BLUE.mix(0.15).filled())
            });
        chart
            .draw_series(LineSeries::new(
                o.curve
                    .iter()
                    .map(|c| (f64::from(c.high_pages) + 1.0, c.relative)),
                BLUE.stroke_width(2),
            ))
            .map_err(plot_err)?
            .label("model")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE.stroke_width(2)));
        if !pts.is_empty() {
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 5, RED.filled())))
                .map_err(plot_err)?
                .label("measured (thread 004), scaled by the fitted score")
                .legend(|(x, y)| Circle::new((x + 10, y), 5, RED.filled()));
        }
        let vline = |x: u32| vec![(f64::from(x) + 1.0, y_min), (f64::from(x) + 1.0, y_max)];
        chart
            .draw_series(std::iter::once(PathElement::new(
                vline(o.optimal_high_pages),
                GREEN.stroke_width(2),
            )))
            .map_err(plot_err)?
            .label(format!("optimum {} pages", o.optimal_high_pages))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREEN.stroke_width(2)));
        chart
            .draw_series(std::iter::once(PathElement::new(
                vline(o.kernel_default_high_pages),
                BLACK.stroke_width(1),
            )))
            .map_err(plot_err)?
            .label(format!(
                "kernel default {} pages",
                o.kernel_default_high_pages
            ))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperMiddle)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.9))
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// A tick on a log page axis as a plain integer ("1", "100", "10000"), not "100.0".
fn page_tick(x: f64) -> String {
    format!("{:.0}", x)
}

/// The top of a chart's y range: the data's top plus room above it for the legend (drawn at the
/// upper middle), so the legend never covers data.
fn legend_top(y_min: f64, y_max: f64) -> f64 {
    y_max + 0.4 * (y_max - y_min)
}

/// Two machines' relative-throughput curves on one figure (`plot explain`).
pub fn explain_svg(title: &str, curves: &[(String, Vec<(u32, f64)>)]) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let x_max = curves
            .iter()
            .flat_map(|c| c.1.iter().map(|p| f64::from(p.0) + 1.0))
            .fold(2.0, f64::max);
        let y_min = curves
            .iter()
            .flat_map(|c| c.1.iter().map(|p| p.1))
            .filter(|v| v.is_finite())
            .fold(1.0f64, f64::min)
            .max(0.0)
            - 0.03;
        let y_max = 1.02;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d((1f64..x_max).log_scale(), y_min..legend_top(y_min, y_max))
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("pcp->high + 1 (4 KiB pages, log scale)")
            .x_label_formatter(&|x| page_tick(*x))
            .y_desc("throughput relative to each machine's optimum")
            .draw()
            .map_err(plot_err)?;
        let colors = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
        for (i, (name, pts)) in curves.iter().enumerate() {
            let c = colors[i % colors.len()];
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|&(h, y)| (f64::from(h) + 1.0, y)),
                    c.stroke_width(2),
                ))
                .map_err(plot_err)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperMiddle)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.9))
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}
