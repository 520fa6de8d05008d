//! A client's `CLIENT LIST` line, as Redis 7.0 prints it: what CLIENT
//! LIST and CLIENT INFO (`commands::client`) reply and what an ACL LOG
//! entry records as its client info.

use std::io::Write;
use std::sync::atomic::Ordering;

use crate::core::session::ClientHandle;

/// What only the calling connection knows about itself.
pub(crate) struct Me {
    pub(crate) id: u64,
    /// Full name of the running command (`client|list`).
    pub(crate) cmd: String,
    /// Bytes of the current command's arguments (`argv-mem`).
    pub(crate) argv_mem: usize,
    /// Reply bytes pending before this command's reply (`obl`).
    pub(crate) obl: usize,
    /// The running request's bytes, as it came (`qbuf`: Redis trims the
    /// query buffer after the command).
    pub(crate) qbuf: usize,
    /// A watched key was touched (flag `d`).
    pub(crate) dirty_cas: bool,
}

/// Appends one `CLIENT LIST` line (with its `\n`), fields in 7.0's order.
pub(crate) fn client_line(buf: &mut Vec<u8>, h: &ClientHandle, now_ms: i64, me: &Me) {
    let is_me = h.id == me.id;
    let mut flags = String::new();
    if crate::subsystems::repl::is_replica(h) {
        flags.push('S');
    }
    if h.monitor.load(Ordering::Relaxed) {
        flags.push('O');
    }
    if h.subscribed() {
        flags.push('P');
    }
    if h.in_multi.load(Ordering::Relaxed) {
        flags.push('x');
    }
    if crate::core::blocking::is_blocked(h) {
        flags.push('b');
    }
    let redir = {
        let st = h.tracking.lock();
        if st.on {
            flags.push('t');
        }
        if st.broken_redirect {
            flags.push('R');
        }
        if st.bcast {
            flags.push('B');
        }
        if st.on {
            st.redirect as i64
        } else {
            -1
        }
    };
    if is_me && me.dirty_cas {
        flags.push('d');
    }
    if h.no_evict.load(Ordering::Relaxed) {
        flags.push('e');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let age = (now_ms - h.created_ms).max(0) / 1000;
    let idle = if is_me {
        0
    } else {
        (now_ms - h.last_interaction_ms.load(Ordering::Relaxed)).max(0) / 1000
    };
    let name = h.name.lock().clone().unwrap_or_default();
    let multi =
        if h.in_multi.load(Ordering::Relaxed) { h.multi_len.load(Ordering::Relaxed) } else { -1 };
    let cmd: String = if is_me { me.cmd.clone() } else { h.last_cmd.lock().clone() };
    // Redis's static reply buffer (`obl`) then its list of blocks
    // (`oll`, `omem`); Sluice's pending output is chunks of the same size,
    // and the pushes other threads queued for the connection (published
    // messages, served blocked commands) that it has not moved to its
    // buffer yet: Redis appends those to the reply list at once, and the
    // output limits count them (`pubsub::deliver`).
    let queued = h.outbox.pending();
    let pending = h.omem.load(Ordering::Relaxed) + queued;
    let obl = if is_me { me.obl } else { pending.min(resp::CHUNK) };
    let rest = if is_me { 0 } else { pending - obl };
    let oll = rest.div_ceil(resp::CHUNK);
    let qbuf = if is_me { me.qbuf } else { h.qbuf.load(Ordering::Relaxed) };
    let argv_mem = if is_me { me.argv_mem } else { 0 };
    let qbuf_free =
        h.qbuf_free.load(Ordering::Relaxed).saturating_sub(if is_me { qbuf } else { 0 });
    let events = if rest + obl > 0 && !is_me { "rw" } else { "r" };
    let multi_mem = h.multi_mem.load(Ordering::Relaxed);
    let tot_mem = h.tot_mem.load(Ordering::Relaxed) + argv_mem + queued;
    let _ = write!(buf, "id={} addr={} laddr={} fd={} name=", h.id, h.addr, h.laddr, h.fd);
    buf.extend_from_slice(&name);
    let _ = writeln!(
        buf,
        " age={age} idle={idle} flags={flags} db={} sub={} psub={} ssub={} multi={multi} \
         qbuf={qbuf} qbuf-free={qbuf_free} argv-mem={argv_mem} multi-mem={multi_mem} rbs={} rbp={obl} \
         obl={obl} oll={oll} omem={rest} tot-mem={tot_mem} events={events} cmd={cmd} \
         user={} redir={redir} resp={}",
        h.db.load(Ordering::Relaxed),
        h.subs[0].load(Ordering::Relaxed),
        h.subs[1].load(Ordering::Relaxed),
        h.subs[2].load(Ordering::Relaxed),
        resp::CHUNK,
        String::from_utf8_lossy(&h.user.lock()),
        h.resp.load(Ordering::Relaxed),
    );
    // Sluice's extension, after Redis's fields (a parser of those keeps
    // working) and only while it is on (the line is Redis's otherwise).
    if let Some(d) = *h.durable.lock() {
        buf.pop();
        let _ = write!(buf, " durable={},{}", d.replicas, d.timeout_ms);
        if d.fsync {
            buf.extend_from_slice(b",fsync");
        }
        buf.push(b'\n');
    }
}

/// The client's `CLIENT LIST` line, without its newline, as of its
/// running command (the client info of an ACL LOG entry).
pub(crate) fn info_line(_shared: &crate::Shared, sess: &crate::core::session::Session) -> Vec<u8> {
    let cmd = match sess.last_cmd {
        Some((top, spec)) => crate::core::dispatch::full_name(top, spec),
        None => "NULL".into(),
    };
    let me = Me {
        id: sess.handle.id,
        cmd,
        argv_mem: 0,
        obl: 0,
        qbuf: 0,
        dirty_cas: sess.watch_flag.load(Ordering::Relaxed),
    };
    let mut buf = Vec::new();
    client_line(&mut buf, &sess.handle, crate::core::shared::unix_ms(), &me);
    buf.pop();
    buf
}
