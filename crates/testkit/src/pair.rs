//! The oracle and Sluice side by side, for randomized differential tests
//! that send every command to both and compare the replies.

use std::any::Any;
use std::path::Path;

use crate::{Client, RedisServer, TestServer};

/// One connection to each server.
pub struct Pair {
    pub redis: Client,
    pub sluice: Client,
}

impl Pair {
    /// Sends `args` to both; their replies (redis's first).
    pub fn both(&mut self, args: &[String]) -> Result<(Vec<u8>, Vec<u8>), String> {
        let a = self.redis.cmd(args).map_err(|e| format!("redis: {e}"))?;
        let b = self.sluice.cmd(args).map_err(|e| format!("sluice: {e}"))?;
        Ok((a, b))
    }
}

/// A running oracle and a running server under test.
pub struct Servers {
    redis: RedisServer,
    sluice_port: u16,
    _sluice: Box<dyn Any>,
}

impl Servers {
    /// Starts redis-server and `sluice_bin`; with `SCENARIO_SELF_CHECK=1` a
    /// second redis-server stands in for Sluice, to prove a test's
    /// sequences deterministic. `None` when the oracle is missing and not
    /// required (see [`crate::oracle_required`]).
    pub fn start(sluice_bin: &Path) -> Option<Servers> {
        let redis = RedisServer::start()?;
        let (sluice_port, guard): (u16, Box<dyn Any>) =
            if std::env::var_os("SCENARIO_SELF_CHECK").is_some() {
                let r = RedisServer::start().expect("second oracle");
                (r.port(), Box::new(r))
            } else {
                let t = TestServer::start_bin(sluice_bin);
                (t.port(), Box::new(t))
            };
        Some(Servers { redis, sluice_port, _sluice: guard })
    }

    /// A fresh connection to each.
    pub fn connect(&self) -> Pair {
        Pair {
            redis: self.redis.client(),
            sluice: Client::connect(self.sluice_port).expect("connect to sluice"),
        }
    }
}
