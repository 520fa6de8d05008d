//! The latency monitor's commands (`LATENCY LATEST | HISTORY | RESET |
//! GRAPH | DOCTOR | HISTOGRAM | HELP`), as Redis 7.0's `latency.c`. The
//! events and their samples are the `subsystems::latency` subsystem.
//! HISTOGRAM reads the per-command HDR histograms `INFO latencystats` also
//! prints.

use resp::ReplyBuf;

use crate::commands::server::reply_help;
use crate::core::ctx::{Args, Ctx};
use crate::core::error::{CmdError, CmdResult};
use crate::core::spec::Command;
use crate::subsystems::latency::{Sample, Series, TS_LEN};

/// Columns of `LATENCY GRAPH`.
const GRAPH_COLS: usize = 80;

pub const COMMANDS: &[Command] = &[Command::redis("LATENCY", crate::commands::server::container)
    .subs(&[
        Command::redis("DOCTOR", doctor),
        Command::redis("GRAPH", graph),
        Command::redis("HELP", help),
        Command::redis("HISTOGRAM", histogram),
        Command::redis("HISTORY", history),
        Command::redis("LATEST", latest),
        Command::redis("RESET", reset),
    ])];

fn history(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let event = args.req()?;
    let g = cx.shared.latency.events.lock();
    match g.iter().find(|(n, _)| n.as_bytes() == event) {
        None => out.array(0),
        Some((_, ts)) => {
            out.array(ts.iter().count());
            for s in ts.iter() {
                out.array(2);
                out.int(s.time);
                out.int(s.ms as i64);
            }
        }
    }
    Ok(())
}

fn latest(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let g = cx.shared.latency.events.lock();
    out.array(g.len());
    for (name, ts) in g.iter() {
        let last = ts.samples[(ts.idx + TS_LEN - 1) % TS_LEN];
        out.array(4);
        out.bulk(name.as_bytes());
        out.int(last.time);
        out.int(last.ms as i64);
        out.int(ts.max as i64);
    }
    Ok(())
}

fn reset(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let mon = &cx.shared.latency;
    let n = if args.is_empty() {
        mon.reset(None)
    } else {
        args.rest().iter().map(|e| mon.reset(Some(e))).sum()
    };
    out.int(n as i64);
    Ok(())
}

fn graph(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let event = args.req()?;
    let now = cx.shared.clock.now_ms() / 1000;
    let g = cx.shared.latency.events.lock();
    let Some((name, ts)) = g.iter().find(|(n, _)| n.as_bytes() == event) else {
        let mut m = b"ERR No samples available for event '".to_vec();
        m.extend_from_slice(event);
        m.push(b'\'');
        return Err(CmdError::Bytes(m));
    };
    let mut seq = Sparkline::default();
    let (mut lo, mut hi) = (0, 0);
    for (k, s) in ts.iter().enumerate() {
        if k == 0 {
            (lo, hi) = (s.ms, s.ms);
        } else {
            (lo, hi) = (lo.min(s.ms), hi.max(s.ms));
        }
        let ago = now - s.time;
        let label = match ago {
            a if a < 60 => format!("{a}s"),
            a if a < 3600 => format!("{}m", a / 60),
            a if a < 86400 => format!("{}h", a / 3600),
            a => format!("{}d", a / 86400),
        };
        seq.add(s.ms as f64, label);
    }
    let mut text =
        format!("{name} - high {hi} ms, low {lo} ms (all time high {} ms)\n", ts.max).into_bytes();
    text.extend_from_slice(&[b'-'; GRAPH_COLS]);
    text.push(b'\n');
    seq.render(&mut text, GRAPH_COLS, 4);
    out.verbatim(&text);
    Ok(())
}

/// Redis's `sparkline.c`, filled style: rows of `_o#|` per sample, then
/// each sample's label written downwards.
#[derive(Default)]
struct Sparkline {
    samples: Vec<(f64, String)>,
    min: f64,
    max: f64,
}

impl Sparkline {
    fn add(&mut self, v: f64, label: String) {
        if self.samples.is_empty() {
            (self.min, self.max) = (v, v);
        } else if v < self.min {
            self.min = v;
        } else if v > self.max {
            self.max = v;
        }
        self.samples.push((v, label));
    }

    fn render(&self, out: &mut Vec<u8>, cols: usize, rows: usize) {
        let mut j = 0;
        while j < self.samples.len() {
            let len = (self.samples.len() - j).min(cols);
            if j != 0 {
                out.push(b'\n');
            }
            self.render_range(out, rows, j, len);
            j += cols;
        }
    }

    fn render_range(&self, out: &mut Vec<u8>, rows: usize, offset: usize, len: usize) {
        const FILL: &[u8] = b"_o#";
        let steps = (FILL.len() * rows) as i64;
        let relmax = if self.max - self.min == 0.0 { 1.0 } else { self.max - self.min };
        let labels = self.samples.iter().any(|(_, l)| !l.is_empty());
        let mut row = 0;
        loop {
            let mut more = false;
            let mut chars = vec![b' '; len];
            for (j, c) in chars.iter_mut().enumerate() {
                let (v, label) = &self.samples[offset + j];
                // `(int)(relval*steps)/relmax`, truncated as C does.
                let step = (((v - self.min) * steps as f64).trunc() / relmax) as i64;
                let step = step.clamp(0, steps - 1);
                if row < rows {
                    more = true;
                    let idx = step - ((rows - row - 1) * FILL.len()) as i64;
                    if (0..FILL.len() as i64).contains(&idx) {
                        *c = FILL[idx as usize];
                    } else if idx >= FILL.len() as i64 {
                        *c = b'|';
                    }
                } else {
                    // One blank line between the graph and the labels.
                    if labels && row - rows < 1 {
                        more = true;
                        break;
                    }
                    let k = row - rows - 1;
                    if let Some(&b) = label.as_bytes().get(k) {
                        more = true;
                        *c = b;
                    }
                }
            }
            if !more {
                break;
            }
            row += 1;
            out.extend_from_slice(&chars);
            out.push(b'\n');
        }
    }
}

fn doctor(cx: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let (threshold, slower_than, hz) = {
        let c = cx.shared.config.read();
        (c.latency_monitor_threshold, c.slowlog_log_slower_than, i64::from(c.hz))
    };
    let now = cx.shared.clock.now_ms() / 1000;
    let g = cx.shared.latency.events.lock();
    out.verbatim(report(&g, now, threshold, slower_than, hz).as_bytes());
    Ok(())
}

/// `createLatencyReport`, for the events Sluice records.
fn report(
    events: &[(String, Box<Series>)],
    now: i64,
    threshold: i64,
    slower_than: i64,
    hz: i64,
) -> String {
    use std::fmt::Write;
    if events.is_empty() && threshold == 0 {
        return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis \
                instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in \
                order to enable it. If we weren't in a deep space mission I'd suggest to take a \
                look at https://redis.io/topics/latency-monitor.\n"
            .into();
    }
    let mut r = String::new();
    let (mut slowlog_enable, mut slowlog_tune, mut slowlog_inspect) = (false, false, false);
    let (mut scheduler, mut large_objects, mut advise_hz) = (false, false, false);
    let mut advices = 0;
    for (n, (event, ts)) in events.iter().enumerate() {
        if n == 0 {
            r.push_str(
                "Dave, I have observed latency spikes in this Redis instance. You don't mind \
                 talking about it, do you Dave?\n\n",
            );
        }
        let samples: Vec<Sample> = ts.iter().collect();
        let count = samples.len() as u64;
        let sum: u64 = samples.iter().map(|s| s.ms).sum();
        let avg = sum.checked_div(count).unwrap_or(0);
        let dev: u64 = samples.iter().map(|s| (avg as i64 - s.ms as i64).unsigned_abs()).sum();
        let mad = dev.checked_div(count).unwrap_or(0);
        let period = match samples.iter().map(|s| s.time).min() {
            Some(oldest) => (now - oldest).max(1),
            None => 0,
        };
        let _ = write!(
            r,
            "{}. {event}: {count} latency spikes (average {avg}ms, mean deviation {mad}ms, \
             period {:.2} sec). Worst all time event {}ms.",
            n + 1,
            period as f64 / count as f64,
            ts.max
        );
        match event.as_str() {
            "command" => {
                if slower_than < 0 {
                    slowlog_enable = true;
                    advices += 1;
                } else if slower_than / 1000 > threshold {
                    slowlog_tune = true;
                    advices += 1;
                }
                slowlog_inspect = true;
                large_objects = true;
                advices += 2;
            }
            "fast-command" => {
                scheduler = true;
                advices += 1;
            }
            "expire-cycle" => {
                advise_hz = true;
                large_objects = true;
                advices += 2;
            }
            _ => {}
        }
        r.push('\n');
    }
    let thp = std::fs::read_to_string("/proc/self/smaps_rollup").ok().is_some_and(|s| {
        s.lines().any(|l| {
            l.starts_with("AnonHugePages:") && l.split_whitespace().nth(1).is_some_and(|v| v != "0")
        })
    });
    if thp {
        advices += 1;
    }
    if events.is_empty() && advices == 0 {
        r.push_str(
            "Dave, no latency spike was observed during the lifetime of this Redis instance, not \
             in the slightest bit. I honestly think you ought to sit down calmly, take a stress \
             pill, and think things over.\n",
        );
        return r;
    }
    if advices == 0 {
        r.push_str(
            "\nWhile there are latency events logged, I'm not able to suggest any easy fix. \
             Please use the Redis community to get some help, providing this report in your help \
             request.\n",
        );
        return r;
    }
    r.push_str("\nI have a few advices for you:\n\n");
    let us = threshold.max(0) as u64 * 1000;
    if slowlog_enable {
        let _ = writeln!(
            r,
            "- There are latency issues with potentially slow commands you are using. Try to \
             enable the Slow Log Redis feature using the command 'CONFIG SET \
             slowlog-log-slower-than {us}'. If the Slow log is disabled Redis is not able to log \
             slow commands execution for you."
        );
    }
    if slowlog_tune {
        let _ = writeln!(
            r,
            "- Your current Slow Log configuration only logs events that are slower than your \
             configured latency monitor threshold. Please use 'CONFIG SET \
             slowlog-log-slower-than {us}'."
        );
    }
    if slowlog_inspect {
        r.push_str(
            "- Check your Slow Log to understand what are the commands you are running which are \
             too slow to execute. Please check https://redis.io/commands/slowlog for more \
             information.\n",
        );
    }
    if scheduler {
        r.push_str(
            "- The system is slow to execute Redis code paths not containing system calls. This \
             usually means the system does not provide Redis CPU time to run for long periods. \
             You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for \
             Redis if you are running other software in the same system.\n  3) Check if you have \
             a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' \
             what is the intrinsic latency in your system.\n  5) Check if the problem is \
             allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. \
             However this may create fragmentation problems.\n",
        );
    }
    if advise_hz && hz < 100 {
        r.push_str(
            "- In order to make the Redis keys expiring process more incremental, try to set the \
             'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n",
        );
    }
    if large_objects {
        r.push_str(
            "- Deleting, expiring or evicting (because of maxmemory policy) large objects is a \
             blocking operation. If you have very large objects that are often deleted, expired, \
             or evicted, try to fragment those objects into multiple smaller objects.\n",
        );
    }
    if thp {
        r.push_str(
            "- I detected a non zero amount of anonymous huge pages used by your process. This \
             creates very serious latency events in different conditions, especially when Redis \
             is persisting on disk. To disable THP support use the command 'echo never > \
             /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into \
             /etc/rc.local so that the command will be executed again after a reboot. Note that \
             even if you have already disabled THP, you still need to restart the Redis process \
             to get rid of the huge pages already created.\n",
        );
    }
    r
}

fn histogram(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let stats = &cx.shared.cmdstats;
    let names: Vec<String> = if args.is_empty() {
        stats.with_histograms()
    } else {
        // Each named command, then its subcommands, those with samples;
        // unknown names are skipped.
        let mut v = Vec::new();
        for a in args.rest() {
            let a = String::from_utf8_lossy(a).to_ascii_lowercase();
            let t = crate::commands::command::table();
            let Some(e) = t.iter().find(|e| e.name() == a) else { continue };
            let subs = e.subs.iter().map(|&i| t[i].name().to_string());
            v.extend(std::iter::once(a.clone()).chain(subs).filter(|n| stats.has_histogram(n)));
        }
        v
    };
    out.map(names.len());
    for n in &names {
        out.bulk(n.as_bytes());
        let (calls, points) = stats.cdf(n);
        out.map(2);
        out.bulk(b"calls");
        out.int(calls as i64);
        out.bulk(b"histogram_usec");
        out.map(points.len());
        for (us, c) in points {
            out.int(us);
            out.int(c as i64);
        }
    }
    Ok(())
}

fn help(_: &mut Ctx, _: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    reply_help(
        out,
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for \
             the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparkline_matches_redis_rendering() {
        // redis-server 7.0.15's LATENCY GRAPH body (below the title and
        // the dashes) after DEBUG SLEEP 0.1, a second, DEBUG SLEEP 0.2.
        let mut seq = Sparkline::default();
        seq.add(100.0, "1s".into());
        seq.add(200.0, "0s".into());
        let mut out = Vec::new();
        seq.render(&mut out, GRAPH_COLS, 4);
        assert_eq!(String::from_utf8(out).unwrap(), " #\n |\n |\n_|\n  \n10\nss\n");
    }
}
