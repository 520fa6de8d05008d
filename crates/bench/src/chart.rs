//! SVG charts of a sweep, drawn with `plotters`: throughput against
//! pipeline depth (one line per server × round-trip time × clients) and
//! latency percentiles against pipeline depth.

use plotters::prelude::*;

use crate::sweep::Point;

type Series = (String, Vec<(f64, f64)>);

/// Groups points into lines over pipeline depth.
fn lines(points: &[Point], y: impl Fn(&Point) -> f64, tag: &str) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    let servers = distinct(points.iter().map(|p| p.server.clone()));
    let tests = distinct(points.iter().map(|p| p.test.clone()));
    for p in points {
        let mut name = format!("rtt {} ms, c={}", p.rtt_ms, p.clients);
        if tests.len() > 1 {
            name = format!("{} {name}", p.test);
        }
        if servers.len() > 1 {
            name = format!("{} {name}", p.server);
        }
        if !tag.is_empty() {
            name = format!("{tag} {name}");
        }
        let v = y(p).max(1e-3);
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, pts)) => pts.push((p.pipeline as f64, v)),
            None => out.push((name, vec![(p.pipeline as f64, v)])),
        }
    }
    for (_, pts) in &mut out {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

fn distinct(it: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for s in it {
        if !v.contains(&s) {
            v.push(s);
        }
    }
    v
}

fn draw(path: &str, title: &str, y_desc: &str, series: &[Series]) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| format!("{path}: {e}");
    let all = series.iter().flat_map(|(_, p)| p.iter());
    let (mut xmax, mut ymin, mut ymax) = (1.0f64, f64::MAX, 0.0f64);
    for &(x, y) in all {
        xmax = xmax.max(x);
        ymin = ymin.min(y);
        ymax = ymax.max(y);
    }
    if ymin > ymax {
        return Ok(());
    }
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(
            (1f64..(xmax * 1.5)).log_scale(),
            ((ymin / 1.5)..(ymax * 1.5)).log_scale(),
        )
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("pipeline depth (commands per write)")
        .y_desc(y_desc)
        .draw()
        .map_err(|x| e(&x))?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|x| e(&x))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// Requests per second against pipeline depth.
pub fn throughput(path: &str, points: &[Point]) -> Result<(), String> {
    let s = lines(points, |p| p.rps, "");
    draw(path, "Throughput vs pipeline depth", "requests per second", &s)
}

/// p50, p99 and p99.9 latency against pipeline depth.
pub fn latency(path: &str, points: &[Point]) -> Result<(), String> {
    let mut s = lines(points, |p| p.p50, "p50");
    s.extend(lines(points, |p| p.p99, "p99"));
    s.extend(lines(points, |p| p.p999, "p99.9"));
    draw(path, "Latency percentiles vs pipeline depth", "latency (ms)", &s)
}
