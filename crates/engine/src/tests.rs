//! In-process command tests: `run(&["SET","k","v"])` → reply bytes.

use std::sync::Arc;

use resp::ReplyBuf;

use crate::{execute, Config, Session, Shared};

pub(crate) struct Harness {
    pub shared: Arc<Shared>,
    pub sess: Session,
}

impl Harness {
    pub fn new() -> Self {
        let shared = Shared::new(Config::default());
        let sess = shared.connect("127.0.0.1:1".into(), "127.0.0.1:6379".into(), -1);
        Harness { shared, sess }
    }

    pub fn run(&mut self, argv: &[&str]) -> String {
        let argv: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        let mut out = ReplyBuf::new();
        // The server keeps one ReplyBuf per connection, so its protocol
        // persists; here a fresh buffer takes it from the client handle.
        if self.sess.handle.resp.load(std::sync::atomic::Ordering::Relaxed) == 3 {
            out.proto = resp::Proto::Resp3;
        }
        execute(&self.shared, &mut self.sess, &argv, &mut out);
        String::from_utf8_lossy(&out.to_vec()).into_owned()
    }
}

#[test]
fn set_get_del() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(h.run(&["get", "k"]), "$1\r\nv\r\n");
    assert_eq!(h.run(&["SET", "k", "w", "NX"]), "$-1\r\n");
    assert_eq!(h.run(&["SET", "k", "w", "XX", "GET"]), "$1\r\nv\r\n");
    assert_eq!(h.run(&["DEL", "k", "k2"]), ":1\r\n");
    assert_eq!(h.run(&["GET", "k"]), "$-1\r\n");
    assert_eq!(
        h.run(&["SET", "k", "v", "EX", "0"]),
        "-ERR invalid expire time in 'set' command\r\n"
    );
    assert_eq!(h.run(&["SET", "k", "v", "EX", "1", "PX", "1"]), "-ERR syntax error\r\n");
}

#[test]
fn multi_exec_watch() {
    let mut h = Harness::new();
    let mut other = Harness {
        shared: h.shared.clone(),
        sess: h.shared.connect(String::new(), String::new(), -1),
    };
    assert_eq!(h.run(&["WATCH", "a"]), "+OK\r\n");
    assert_eq!(h.run(&["MULTI"]), "+OK\r\n");
    assert_eq!(h.run(&["SET", "a", "1"]), "+QUEUED\r\n");
    assert_eq!(other.run(&["SET", "a", "2"]), "+OK\r\n");
    assert_eq!(h.run(&["EXEC"]), "*-1\r\n");
    assert_eq!(h.run(&["MULTI"]), "+OK\r\n");
    assert_eq!(h.run(&["SET", "a", "3"]), "+QUEUED\r\n");
    assert_eq!(h.run(&["GET", "a"]), "+QUEUED\r\n");
    assert_eq!(h.run(&["EXEC"]), "*2\r\n+OK\r\n$1\r\n3\r\n");
    assert_eq!(h.run(&["MULTI"]), "+OK\r\n");
    assert_eq!(h.run(&["NOPE"]), "-ERR unknown command 'NOPE', with args beginning with: \r\n");
    assert_eq!(
        h.run(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
}

/// What a recording consumer of the effects record sees for a few writes:
/// the stream a replica would read, the events, the dirty count. (The
/// differential tests compare whole scenarios with redis-server's.)
#[test]
fn effects_record_reaches_a_consumer() {
    use crate::effects::{Class, Recorder};
    let mut h = Harness::new();
    let rec = Recorder::new();
    h.shared.effects.add(rec.clone());
    h.run(&["SET", "k", "v", "EX", "100"]);
    h.run(&["GET", "k"]);
    h.run(&["SET", "j", "v", "PX", "10"]);
    h.shared.clock.advance(20);
    assert_eq!(h.run(&["GET", "j"]), "$-1\r\n");
    let r = rec.take();
    let stream: Vec<Vec<String>> = r
        .stream
        .iter()
        .map(|c| c.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect())
        .collect();
    assert_eq!(stream.len(), 4, "{stream:?}");
    assert_eq!(stream[0], ["SELECT", "0"]);
    assert_eq!(stream[1][..4], ["SET", "k", "v", "PXAT"]);
    let at: i64 = stream[1][4].parse().unwrap();
    assert!((at - h.shared.clock.now_ms() - 100_000).abs() < 5_000);
    assert_eq!(stream[2][..4], ["SET", "j", "v", "PXAT"]);
    assert_eq!(stream[3], ["DEL", "j"]);
    assert_eq!(r.dirty, 2);
    let names: Vec<&str> = r.events.iter().map(|e| e.1).collect();
    assert_eq!(names, ["new", "set", "expire", "new", "set", "expire", "expired", "keymiss"]);
    assert_eq!(r.events[6].0, Class::EXPIRED);
}
