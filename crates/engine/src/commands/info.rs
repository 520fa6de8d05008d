//! INFO: Redis 7.0's sections, field names and order, CRLF lines, as a
//! bulk string (a verbatim `txt` string in RESP3).
//!
//! Fields Sluice has no counterpart for yet (replication, forks, defrag,
//! Lua, per-command and per-error statistics) are printed with the values
//! an idle Redis shows, so tools that parse INFO find every field.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use resp::ReplyBuf;

use crate::core::ctx::{Args, Ctx};
use crate::core::error::CmdResult;
use crate::core::shared::unix_us;
use crate::core::spec::{Command, Flags};
use crate::subsystems::config::REDIS_VERSION;

// No lock: the keyspace and stats sections read the stripes' published
// counts, without locking them (16,384 stripes would stall every thread).
pub const COMMANDS: &[Command] = &[Command::redis("INFO", info).flags(Flags::AFTER_INPUT)];

/// Sections in output order, and which selections include them.
const SECTIONS: &[(&str, In)] = &[
    ("server", In::Default),
    ("clients", In::Default),
    ("memory", In::Default),
    ("persistence", In::Default),
    ("stats", In::Default),
    ("replication", In::Default),
    ("cpu", In::Default),
    ("modules", In::Default),
    ("commandstats", In::All),
    ("errorstats", In::Default),
    ("latencystats", In::All),
    ("cluster", In::Default),
    ("keyspace", In::Default),
    // The job queue's (Disque's INFO sections): only when named, so that
    // INFO, INFO all and INFO everything stay Redis's for Redis clients
    // and exporters.
    ("jobs", In::Named),
    ("queues", In::Named),
];

/// Which selections of INFO print a section.
#[derive(Clone, Copy, PartialEq)]
enum In {
    /// `INFO`, `INFO default`, `all`, `everything` and its name.
    Default,
    /// `all`, `everything` and its name.
    All,
    /// Its name only.
    Named,
}

fn info(cx: &mut Ctx, args: &mut Args, out: &mut ReplyBuf) -> CmdResult {
    let mut want = [false; SECTIONS.len()];
    if args.is_empty() {
        for (i, s) in SECTIONS.iter().enumerate() {
            want[i] = s.1 == In::Default;
        }
    }
    for a in args.rest() {
        let a = a.to_ascii_lowercase();
        match a.as_slice() {
            b"all" | b"everything" => {
                for (i, s) in SECTIONS.iter().enumerate() {
                    want[i] |= s.1 != In::Named;
                }
            }
            b"default" => {
                for (i, s) in SECTIONS.iter().enumerate() {
                    want[i] |= s.1 == In::Default;
                }
            }
            name => {
                if let Some(i) = SECTIONS.iter().position(|s| s.0.as_bytes() == name) {
                    want[i] = true;
                }
            }
        }
    }
    let mut text = String::new();
    let mut counts: Counts = None;
    for (i, (name, _)) in SECTIONS.iter().enumerate() {
        if !want[i] {
            continue;
        }
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        section(cx, name, &mut text, &mut counts);
    }
    out.verbatim(text.as_bytes());
    Ok(())
}

/// Redis's `bytesToHuman`.
fn human(n: u64) -> String {
    let d = n as f64;
    const K: f64 = 1024.0;
    if n < 1024 {
        format!("{n}B")
    } else if d < K * K {
        format!("{:.2}K", d / K)
    } else if d < K * K * K {
        format!("{:.2}M", d / (K * K))
    } else if d < K * K * K * K {
        format!("{:.2}G", d / (K * K * K))
    } else if d < K * K * K * K * K {
        format!("{:.2}T", d / (K * K * K * K))
    } else {
        format!("{:.2}P", d / (K * K * K * K * K))
    }
}

fn rusage(who: libc::c_int) -> (String, String) {
    // SAFETY: getrusage fills the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to an rusage, `who` one of the RUSAGE_* values.
    let ok = unsafe { libc::getrusage(who, &mut ru) } == 0;
    if !ok {
        return ("0.000000".into(), "0.000000".into());
    }
    let t = |tv: libc::timeval| format!("{}.{:06}", tv.tv_sec, tv.tv_usec);
    (t(ru.ru_stime), t(ru.ru_utime))
}

fn uname() -> String {
    // SAFETY: uname fills the zeroed struct we own.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    let s = |f: &[libc::c_char]| {
        let b: Vec<u8> = f.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    format!("{} {} {}", s(&u.sysname), s(&u.release), s(&u.machine))
}

fn total_system_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, size) =
        unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    if pages < 0 || size < 0 {
        0
    } else {
        pages as u64 * size as u64
    }
}

fn counted<'c>(cx: &mut Ctx, c: &'c mut Counts) -> &'c (Vec<(usize, usize)>, u64, u64) {
    c.get_or_insert_with(|| keyspace_counts(cx))
}

/// Keys and keys-with-TTL per database, and expired keys and changes in
/// total: exact for stripes this command holds (inside EXEC), else as of
/// each stripe's last release.
pub(crate) fn keyspace_counts(cx: &mut Ctx) -> (Vec<(usize, usize)>, u64, u64) {
    let store = cx.keys.store();
    let mut per_db = Vec::with_capacity(store.databases());
    let mut expired = 0;
    for db in 0..store.databases() {
        let c = cx.keys.db_counts(db);
        expired += c.expired;
        per_db.push((c.keys, c.expires));
    }
    // Other connections' counts arrive when their batches end; this
    // connection's own so far are added here.
    let dirty = cx.shared.stats.dirty.load(std::sync::atomic::Ordering::Relaxed)
        + cx.sess.stats.dirty
        + cx.sess.fx.dirty;
    (per_db, expired, dirty)
}

/// Keyspace counts, computed at most once per INFO call.
type Counts = Option<(Vec<(usize, usize)>, u64, u64)>;

fn section(cx: &mut Ctx, name: &str, t: &mut String, counts: &mut Counts) {
    let sh = cx.shared;
    let cfg = sh.config.read().clone();
    let st = &sh.stats;
    let ld = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    // `writeln!` into a String cannot fail; the macro keeps lines terse.
    macro_rules! line {
        ($($arg:tt)*) => {{ let _ = write!(t, $($arg)*); t.push_str("\r\n"); }};
    }
    match name {
        "server" => {
            let uptime = sh.started.elapsed().as_secs();
            let config_file = if cfg.config_file.is_empty() {
                sh.config_file.lock().clone()
            } else {
                cfg.config_file.clone()
            };
            line!("# Server");
            line!("redis_version:{REDIS_VERSION}");
            line!("redis_git_sha1:00000000");
            line!("redis_git_dirty:0");
            line!("redis_build_id:0");
            line!("redis_mode:standalone");
            line!("os:{}", uname());
            line!("arch_bits:{}", usize::BITS);
            line!("monotonic_clock:POSIX clock_gettime");
            line!("multiplexing_api:epoll");
            line!("atomicvar_api:c11-builtin");
            line!("gcc_version:0.0.0");
            line!("process_id:{}", std::process::id());
            line!("process_supervised:no");
            line!("run_id:{}", sh.run_id);
            line!("tcp_port:{}", sh.port.load(Ordering::Relaxed));
            line!("server_time_usec:{}", unix_us());
            line!("uptime_in_seconds:{uptime}");
            line!("uptime_in_days:{}", uptime / 86400);
            line!("hz:{}", cfg.hz);
            line!("configured_hz:{}", cfg.hz);
            line!("lru_clock:{}", sh.lru_clock());
            line!("executable:{}", sh.executable.lock());
            line!("config_file:{config_file}");
            line!("io_threads_active:0");
            if let Some(ms) = sh.shutdown_state.remaining_ms(crate::core::shared::unix_ms()) {
                line!("shutdown_in_milliseconds:{ms}");
            }
            line!("sluice_version:{}", env!("CARGO_PKG_VERSION"));
            line!("sluice_threads:{}", sh.threads.load(Ordering::Relaxed));
        }
        "clients" => {
            line!("# Clients");
            // Replicas are not counted here (Redis: clients - slaves).
            let replicas = crate::subsystems::repl::view(sh).replicas.len();
            line!("connected_clients:{}", sh.connected_clients().saturating_sub(replicas));
            line!("cluster_connections:0");
            line!("maxclients:{}", cfg.maxclients);
            let mem = sh.clients_memory();
            line!("client_recent_max_input_buffer:{}", mem.max_input);
            line!("client_recent_max_output_buffer:{}", mem.max_output);
            line!("blocked_clients:{}", sh.blocked_clients.load(Ordering::Relaxed));
            line!("tracking_clients:{}", sh.tracker.nclients.load(Ordering::Relaxed));
            line!("clients_in_timeout_table:0");
        }
        "memory" => {
            let m = sh.mem_stats();
            let used = m.used_memory;
            let peak = ld(&sh.mem_peak).max(used);
            let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
            line!("# Memory");
            line!("used_memory:{used}");
            line!("used_memory_human:{}", human(used));
            line!("used_memory_rss:{}", m.used_memory_rss);
            line!("used_memory_rss_human:{}", human(m.used_memory_rss));
            line!("used_memory_peak:{peak}");
            line!("used_memory_peak_human:{}", human(peak));
            line!("used_memory_peak_perc:{:.2}%", ratio(used, peak) * 100.0);
            let o = crate::commands::memory::overhead(cx);
            let dataset = used.saturating_sub(o.overhead);
            let net = used.saturating_sub(o.startup).max(1);
            line!("used_memory_overhead:{}", o.overhead);
            line!("used_memory_startup:{}", o.startup);
            line!("used_memory_dataset:{dataset}");
            line!("used_memory_dataset_perc:{:.2}%", dataset as f32 * 100.0 / net as f32);
            line!("allocator_allocated:{}", m.allocator_allocated);
            line!("allocator_active:{}", m.allocator_active);
            line!("allocator_resident:{}", m.allocator_resident);
            let total = total_system_memory();
            line!("total_system_memory:{total}");
            line!("total_system_memory_human:{}", human(total));
            let lua = sh.scripts.lua_memory() as u64;
            let scripts = sh.scripts.body_bytes() as u64;
            line!("used_memory_lua:{lua}");
            line!("used_memory_vm_eval:{lua}");
            line!("used_memory_lua_human:{}", human(lua));
            line!("used_memory_scripts_eval:{scripts}");
            line!("number_of_cached_scripts:{}", sh.scripts.len());
            line!("number_of_functions:0");
            line!("number_of_libraries:0");
            line!("used_memory_vm_functions:0");
            line!("used_memory_vm_total:{lua}");
            line!("used_memory_vm_total_human:{}", human(lua));
            line!("used_memory_functions:0");
            line!("used_memory_scripts:{scripts}");
            line!("used_memory_scripts_human:{}", human(scripts));
            line!("maxmemory:{}", cfg.maxmemory);
            line!("maxmemory_human:{}", human(cfg.maxmemory));
            line!("maxmemory_policy:{}", cfg.maxmemory_policy);
            let (al, ac, re, rss) = (
                m.allocator_allocated,
                m.allocator_active,
                m.allocator_resident,
                m.used_memory_rss,
            );
            line!("allocator_frag_ratio:{:.2}", ratio(ac, al));
            line!("allocator_frag_bytes:{}", ac as i64 - al as i64);
            line!("allocator_rss_ratio:{:.2}", ratio(re, ac));
            line!("allocator_rss_bytes:{}", re as i64 - ac as i64);
            line!("rss_overhead_ratio:{:.2}", ratio(rss, re));
            line!("rss_overhead_bytes:{}", rss as i64 - re as i64);
            line!("mem_fragmentation_ratio:{:.2}", ratio(rss, used));
            line!("mem_fragmentation_bytes:{}", rss as i64 - used as i64);
            line!("mem_not_counted_for_evict:{}", o.not_counted);
            line!("mem_replication_backlog:{}", o.backlog);
            line!("mem_total_replication_buffers:{}", o.repl.total);
            line!("mem_clients_slaves:{}", o.clients.replicas);
            line!("mem_clients_normal:{}", o.clients.normal);
            line!("mem_cluster_links:0");
            line!("mem_aof_buffer:{}", o.aof_buffer);
            line!("mem_allocator:{}", m.allocator);
            line!("active_defrag_running:0");
            line!("lazyfree_pending_objects:{}", sh.lazyfree.pending());
            line!("lazyfreed_objects:{}", sh.lazyfree.freed());
        }
        "persistence" => {
            line!("# Persistence");
            line!("loading:{}", u8::from(sh.is_loading()));
            line!("async_loading:{}", u8::from(sh.is_async_loading()));
            let ps = &sh.persist;
            let pv = ps.progress.view(crate::core::shared::unix_ms());
            line!("current_cow_peak:{}", pv.cow_size);
            line!("current_cow_size:{}", pv.cow_size);
            line!("current_cow_size_age:{}", pv.cow_size_age);
            line!("current_fork_perc:{:.2}", pv.perc);
            line!("current_save_keys_processed:{}", pv.keys_processed);
            line!("current_save_keys_total:{}", pv.keys_total);
            let dirty = counted(cx, counts).2;
            let since = dirty.saturating_sub(ps.dirty_at_save.load(Ordering::Relaxed));
            line!("rdb_changes_since_last_save:{}", since);
            let running = ps.bgsave_in_progress.load(Ordering::Relaxed);
            let for_replicas = ps.repl_snapshots.load(Ordering::Relaxed) > 0;
            line!("rdb_bgsave_in_progress:{}", u8::from(running || for_replicas));
            line!("rdb_last_save_time:{}", ps.last_save.load(Ordering::Relaxed));
            let ok = ps.last_bgsave_ok.load(Ordering::Relaxed);
            line!("rdb_last_bgsave_status:{}", if ok { "ok" } else { "err" });
            line!("rdb_last_bgsave_time_sec:{}", ps.last_bgsave_secs.load(Ordering::Relaxed));
            let current = if running {
                (crate::core::shared::unix_ms() - ps.bgsave_started_ms.load(Ordering::Relaxed))
                    / 1000
            } else {
                -1
            };
            line!("rdb_current_bgsave_time_sec:{}", current);
            line!("rdb_saves:{}", ps.saves.load(Ordering::Relaxed));
            line!("rdb_last_cow_size:{}", pv.last_rdb_cow);
            let expired = ps.last_load_keys_expired.load(Ordering::Relaxed);
            line!("rdb_last_load_keys_expired:{}", expired);
            line!("rdb_last_load_keys_loaded:{}", ps.last_load_keys_loaded.load(Ordering::Relaxed));
            let aof = sh.host.aof.as_ref().map(|a| a.info()).unwrap_or_else(|| {
                crate::subsystems::snapshot::AofInfo {
                    enabled: cfg.appendonly,
                    last_rewrite_time_sec: -1,
                    current_rewrite_time_sec: -1,
                    last_bgrewrite_ok: true,
                    last_write_ok: true,
                    ..Default::default()
                }
            });
            let status = |ok: bool| if ok { "ok" } else { "err" };
            line!("aof_enabled:{}", u8::from(aof.enabled));
            line!("aof_rewrite_in_progress:{}", u8::from(aof.rewrite_in_progress));
            line!("aof_rewrite_scheduled:{}", u8::from(aof.rewrite_scheduled));
            line!("aof_last_rewrite_time_sec:{}", aof.last_rewrite_time_sec);
            line!("aof_current_rewrite_time_sec:{}", aof.current_rewrite_time_sec);
            line!("aof_last_bgrewrite_status:{}", status(aof.last_bgrewrite_ok));
            line!("aof_rewrites:{}", aof.rewrites);
            line!("aof_rewrites_consecutive_failures:{}", aof.rewrites_consecutive_failures);
            line!("aof_last_write_status:{}", status(aof.last_write_ok));
            line!("aof_last_cow_size:{}", pv.last_aof_cow);
            line!("module_fork_in_progress:0");
            line!("module_fork_last_cow_size:0");
            // Redis tests its `appendonly` setting here, not the AOF's
            // state: while the AOF loads at start-up (its state off, so
            // that the load feeds nothing back), the lines show zeros.
            if aof.enabled || cfg.appendonly {
                line!("aof_current_size:{}", aof.current_size);
                line!("aof_base_size:{}", aof.base_size);
                line!("aof_pending_rewrite:0");
                line!("aof_buffer_length:{}", aof.buffer_length);
                line!("aof_pending_bio_fsync:0");
                line!("aof_delayed_fsync:{}", aof.delayed_fsync);
            }
            if sh.is_loading() {
                for (name, value) in sh.load_lines() {
                    line!("{name}:{value}");
                }
            }
        }
        "stats" => {
            // This command's own session counts itself already; Redis
            // counts a command after it ran.
            sh.flush_stats(cx.sess);
            let expired = counted(cx, counts).1;
            let expired = expired.saturating_sub(ld(&sh.expired_keys_base));
            line!("# Stats");
            line!("total_connections_received:{}", ld(&st.connections_received));
            line!("total_commands_processed:{}", ld(&st.commands_processed).saturating_sub(1));
            let (ops, kin, kout) = sh.rates.get();
            line!("instantaneous_ops_per_sec:{ops}");
            let (net_in, net_out) = sh.net_bytes();
            line!("total_net_input_bytes:{net_in}");
            line!("total_net_output_bytes:{net_out}");
            line!("total_net_repl_input_bytes:0");
            line!("total_net_repl_output_bytes:0");
            line!("instantaneous_input_kbps:{kin:.2}");
            line!("instantaneous_output_kbps:{kout:.2}");
            line!("instantaneous_input_repl_kbps:0.00");
            line!("instantaneous_output_repl_kbps:0.00");
            line!("rejected_connections:{}", ld(&st.rejected_connections));
            let (full, ok, err) = crate::subsystems::repl::sync_stats(sh);
            line!("sync_full:{full}");
            line!("sync_partial_ok:{ok}");
            line!("sync_partial_err:{err}");
            line!("expired_keys:{expired}");
            line!("expired_stale_perc:0.00");
            line!("expired_time_cap_reached_count:0");
            line!("expire_cycle_cpu_milliseconds:0");
            let ev = &sh.evictor;
            line!("evicted_keys:{}", ev.evicted_keys.load(std::sync::atomic::Ordering::Relaxed));
            line!(
                "evicted_clients:{}",
                ev.evicted_clients.load(std::sync::atomic::Ordering::Relaxed)
            );
            let (total, current) = ev.exceeded_times(sh.clock.now_ms());
            line!("total_eviction_exceeded_time:{total}");
            line!("current_eviction_exceeded_time:{current}");
            line!("keyspace_hits:{}", ld(&st.keyspace_hits));
            line!("keyspace_misses:{}", ld(&st.keyspace_misses));
            let ps = &cx.shared.pubsub;
            line!("pubsub_channels:{}", ps.nchannels(false));
            line!("pubsub_patterns:{}", ps.numpat());
            line!("pubsubshard_channels:{}", ps.nchannels(true));
            line!("latest_fork_usec:0");
            line!("total_forks:{}", sh.persist.background_jobs.load(Ordering::Relaxed));
            let cached = sh.host.migrator.as_ref().map_or(0, |m| m.cached_sockets());
            line!("migrate_cached_sockets:{cached}");
            for f in [
                "slave_expires_tracked_keys",
                "active_defrag_hits",
                "active_defrag_misses",
                "active_defrag_key_hits",
                "active_defrag_key_misses",
                "total_active_defrag_time",
                "current_active_defrag_time",
            ] {
                line!("{f}:0");
            }
            let (tk, ti, tp) = cx.shared.tracker.totals();
            line!("tracking_total_keys:{tk}");
            line!("tracking_total_items:{ti}");
            line!("tracking_total_prefixes:{tp}");
            line!("unexpected_error_replies:0");
            line!("total_error_replies:{}", sh.cmdstats.total_errors());
            let (reads, writes) = sh.io_counts();
            line!("dump_payload_sanitizations:0");
            line!("total_reads_processed:{reads}");
            line!("total_writes_processed:{writes}");
            for f in [
                "io_threaded_reads_processed",
                "io_threaded_writes_processed",
                "reply_buffer_shrinks",
                "reply_buffer_expands",
            ] {
                line!("{f}:0");
            }
            // Redis 7.2's ACL counters (7.0.15 has none; kept last so a
            // 7.0 client parsing the section sees its fields unchanged).
            let d = &sh.acl.denied;
            for (f, i) in [("auth", 0), ("cmd", 1), ("key", 2), ("channel", 3)] {
                line!("acl_access_denied_{f}:{}", d[i].load(std::sync::atomic::Ordering::Relaxed));
            }
        }
        "replication" => crate::commands::repl::info_section(sh, t),
        "cpu" => {
            let (sys, user) = rusage(libc::RUSAGE_SELF);
            let (csys, cuser) = rusage(libc::RUSAGE_CHILDREN);
            // Redis's main thread is the one that runs commands; here
            // every event-loop thread does, so the figure is their sum.
            let (tsys, tuser) = sh.note_loop_cpu(false);
            let secs = |us: u64| format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
            let (tsys, tuser) = (secs(tsys), secs(tuser));
            line!("# CPU");
            line!("used_cpu_sys:{sys}");
            line!("used_cpu_user:{user}");
            line!("used_cpu_sys_children:{csys}");
            line!("used_cpu_user_children:{cuser}");
            line!("used_cpu_sys_main_thread:{tsys}");
            line!("used_cpu_user_main_thread:{tuser}");
        }
        "modules" => line!("# Modules"),
        "commandstats" => {
            // This session's calls so far (not this INFO: Redis counts a
            // command after it ran).
            sh.flush_stats(cx.sess);
            line!("# Commandstats");
            sh.cmdstats.commandstats(t);
        }
        "errorstats" => {
            sh.flush_stats(cx.sess);
            line!("# Errorstats");
            sh.cmdstats.errorstats(t);
        }
        "latencystats" => {
            sh.flush_stats(cx.sess);
            line!("# Latencystats");
            if cfg.latency_tracking {
                sh.cmdstats.latencystats(t, &cfg.latency_tracking_info_percentiles);
            }
        }
        "cluster" => {
            line!("# Cluster");
            if sh.cluster.get().is_some() {
                line!("cluster_enabled:1");
            } else {
                line!("cluster_enabled:0");
            }
        }
        "keyspace" => {
            let per_db = counted(cx, counts).0.clone();
            line!("# Keyspace");
            for (db, (keys, ttl)) in per_db.into_iter().enumerate() {
                if keys > 0 {
                    let avg = if ttl > 0 { sh.store.avg_ttl(db) } else { 0 };
                    line!("db{db}:keys={keys},expires={ttl},avg_ttl={avg}");
                }
            }
        }
        "jobs" => {
            let n = sh.jobs.lock().len();
            line!("# Jobs");
            line!("registered_jobs:{n}");
        }
        "queues" => {
            let n = sh.jobs.lock().queues_len();
            line!("# Queues");
            line!("registered_queues:{n}");
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::tests::Harness;

    fn headers(reply: &str) -> Vec<&str> {
        reply.split("\r\n").filter(|l| l.starts_with('#')).collect()
    }

    // Section lists and formats as redis-server 7.0.15 prints them.
    #[test]
    fn sections() {
        let mut h = Harness::new();
        assert_eq!(
            headers(&h.run(&["INFO"])),
            [
                "# Server",
                "# Clients",
                "# Memory",
                "# Persistence",
                "# Stats",
                "# Replication",
                "# CPU",
                "# Modules",
                "# Errorstats",
                "# Cluster",
                "# Keyspace"
            ]
        );
        assert_eq!(headers(&h.run(&["INFO", "everything"])).len(), 13);
        assert_eq!(headers(&h.run(&["INFO", "jobs", "queues"])), ["# Jobs", "# Queues"]);
        assert_eq!(h.run(&["INFO", "foo"]), "$0\r\n\r\n");
        assert_eq!(h.run(&["INFO", "modules"]), "$11\r\n# Modules\r\n\r\n");
        assert_eq!(h.run(&["INFO", "keyspace"]), "$12\r\n# Keyspace\r\n\r\n");
        h.run(&["SET", "a", "1"]);
        h.run(&["SET", "b", "1", "PX", "100000"]);
        assert_eq!(
            h.run(&["INFO", "CLUSTER", "keyspace"]),
            "$76\r\n# Cluster\r\ncluster_enabled:0\r\n\r\n# Keyspace\r\n\
             db0:keys=2,expires=1,avg_ttl=0\r\n\r\n"
        );
        let server = h.run(&["INFO", "server"]);
        assert!(server.contains("\r\nredis_version:7.0.15\r\n"));
        assert!(server.contains("\r\nsluice_version:"));
        let stats = h.run(&["INFO", "stats"]);
        assert!(stats.contains("\r\ntotal_commands_processed:10\r\n"), "{stats}");
    }

    /// INFO and CONFIG RESETSTAT read the stripes through the locks the
    /// dispatcher took; inside EXEC they must not lock them again.
    #[test]
    fn info_inside_exec_does_not_deadlock() {
        let mut h = Harness::new();
        h.run(&["MULTI"]);
        h.run(&["SET", "a", "1"]);
        h.run(&["INFO", "keyspace"]);
        h.run(&["CONFIG", "RESETSTAT"]);
        assert_eq!(
            h.run(&["EXEC"]),
            "*3\r\n+OK\r\n$44\r\n# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n\r\n+OK\r\n"
        );
    }

    #[test]
    fn verbatim_in_resp3() {
        let mut h = Harness::new();
        h.run(&["SET", "a", "1"]);
        let mut out = resp::ReplyBuf::new();
        out.proto = resp::Proto::Resp3;
        let argv: Vec<&[u8]> = vec![b"INFO", b"cluster"];
        crate::execute(&h.shared, &mut h.sess, &argv, &mut out);
        assert_eq!(
            String::from_utf8(out.to_vec()).unwrap(),
            "=34\r\ntxt:# Cluster\r\ncluster_enabled:0\r\n\r\n"
        );
    }

    #[test]
    fn human_sizes() {
        assert_eq!(super::human(965736), "943.10K");
        assert_eq!(super::human(7172096), "6.84M");
        assert_eq!(super::human(1000), "1000B");
        assert_eq!(super::human(25276510208), "23.54G");
    }
}
