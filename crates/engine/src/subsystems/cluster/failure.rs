//! Failure detection and replica election, Redis 7.0.15's rules over the
//! cluster state: a node not answering for `cluster-node-timeout` is
//! possibly failing (PFAIL); when a majority of the masters report it so
//! it is failing (FAIL, broadcast); a replica of a failed master waits a
//! delay by its rank, asks the masters for their votes in a new epoch,
//! and on a majority takes its master's slots. Manual failovers (`CLUSTER
//! FAILOVER`) run through the same election.
//!
//! Everything here is a method of [`State`] given the time (`now`, Unix
//! ms) and what the node's replication reports, so the rules are tested
//! with a clock the test moves; the bus (`crates/server/src/replication/
//! bus.rs`) sends the messages the methods ask for.

use super::{flag, NodeId, State, SLOTS};
use crate::subsystems::log;

/// Redis's `CLUSTER_FAIL_REPORT_VALIDITY_MULT`: a report lasts twice the
/// node timeout.
const REPORT_VALIDITY_MULT: i64 = 2;
/// Redis's `CLUSTER_FAIL_UNDO_TIME_MULT`: a failed master with slots is
/// cleared after twice the node timeout if it comes back.
const FAIL_UNDO_TIME_MULT: i64 = 2;
/// Redis's `CLUSTER_MF_TIMEOUT` (ms) and `CLUSTER_MF_PAUSE_MULT`.
pub const MF_TIMEOUT: i64 = 5000;
pub const MF_PAUSE_MULT: i64 = 2;

/// A replica's election (Redis's `failover_auth_*`).
#[derive(Clone, Debug, Default)]
pub struct Election {
    /// When the election starts, or started (Unix ms; 0: never).
    pub auth_time: i64,
    pub auth_count: usize,
    pub auth_sent: bool,
    pub auth_rank: usize,
    pub auth_epoch: u64,
}

/// A manual failover (Redis's `mf_*`).
#[derive(Clone, Debug)]
pub struct Manual {
    /// When it times out (Unix ms; 0: none under way).
    pub end: i64,
    /// On the master: the replica that asked for it.
    pub replica: Option<NodeId>,
    /// On the replica: the master's offset once it paused (-1: not yet).
    pub master_offset: i64,
    /// On the replica: the election may start.
    pub can_start: bool,
    /// On the master: its offset once writes are held and settled
    /// (-1: not yet). Its messages say it is paused only from then on,
    /// with this offset.
    pub paused_offset: i64,
}

impl Default for Manual {
    fn default() -> Self {
        Manual { end: 0, replica: None, master_offset: -1, can_start: false, paused_offset: -1 }
    }
}

/// What the replica's election asks of the bus this turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Nothing,
    /// Tell the master's other replicas this node's offset (a PONG).
    PongReplicas,
    /// Ask every master for its vote (FORCEACK on a manual failover).
    RequestVotes {
        force: bool,
    },
    /// Won: this node took its master's slots; PONG everyone.
    Promoted,
}

/// What the replica's replication reports to its election.
#[derive(Clone, Copy, Debug)]
pub struct ReplicaView {
    /// The master's stream processed (`replicationGetSlaveOffset`).
    pub offset: i64,
    /// How old the replica's data is (ms): since the master last sent
    /// something, or since the link went down.
    pub data_age: i64,
}

/// The election's settings.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub node_timeout: i64,
    pub validity_factor: i64,
    pub ping_period_ms: i64,
    pub no_failover: bool,
}

fn name(id: &NodeId) -> &str {
    std::str::from_utf8(id).unwrap_or("")
}

impl State {
    /// Redis's `clusterNodeAddFailureReport`: true when it is a new one.
    pub fn add_failure_report(&mut self, failing: usize, by: NodeId, now: i64) -> bool {
        let reports = &mut self.nodes[failing].fail_reports;
        if let Some(r) = reports.iter_mut().find(|(b, _)| *b == by) {
            r.1 = now;
            return false;
        }
        reports.push((by, now));
        true
    }

    /// Redis's `clusterNodeDelFailureReport`: true when there was one.
    pub fn del_failure_report(
        &mut self,
        failing: usize,
        by: NodeId,
        now: i64,
        timeout: i64,
    ) -> bool {
        self.prune_failure_reports(failing, now, timeout);
        let reports = &mut self.nodes[failing].fail_reports;
        let before = reports.len();
        reports.retain(|(b, _)| *b != by);
        reports.len() != before
    }

    fn prune_failure_reports(&mut self, n: usize, now: i64, timeout: i64) {
        let max_age = timeout * REPORT_VALIDITY_MULT;
        self.nodes[n].fail_reports.retain(|(_, t)| now - t <= max_age);
    }

    /// Redis's `clusterNodeFailureReportsCount`: the valid reports.
    pub fn failure_reports(&mut self, n: usize, now: i64, timeout: i64) -> usize {
        self.prune_failure_reports(n, now, timeout);
        self.nodes[n].fail_reports.len()
    }

    /// Redis's `markNodeAsFailingIfNeeded`: FAIL once a majority of the
    /// masters (counting this one, if a master) sees node `n` down. True
    /// when it just failed: the caller broadcasts FAIL about it.
    pub fn mark_failing_if_needed(&mut self, n: usize, now: i64, timeout: i64) -> bool {
        let quorum = self.size as usize / 2 + 1;
        let node = &self.nodes[n];
        if node.flags & flag::PFAIL == 0 || node.flags & flag::FAIL != 0 {
            return false;
        }
        let mut failures = self.failure_reports(n, now, timeout);
        if self.me().is_master() {
            failures += 1;
        }
        if failures < quorum {
            return false;
        }
        let node = &mut self.nodes[n];
        log::notice(&format!("Marking node {} as failing (quorum reached).", node.name()));
        node.flags = (node.flags & !flag::PFAIL) | flag::FAIL;
        node.fail_time = now;
        true
    }

    /// A FAIL message about node `n` (Redis's handling of
    /// `CLUSTERMSG_TYPE_FAIL`). True when the flag changed.
    pub fn fail_received(&mut self, n: usize, from: &NodeId, now: i64) -> bool {
        let node = &mut self.nodes[n];
        if node.flags & (flag::FAIL | flag::MYSELF) != 0 {
            return false;
        }
        log::notice(&format!("FAIL message received from {} about {}", name(from), node.name()));
        node.flags = (node.flags & !flag::PFAIL) | flag::FAIL;
        node.fail_time = now;
        true
    }

    /// Redis's `clearNodeFailureIfNeeded`, when a failed node answers
    /// again: a replica or a slot-less master at once, a master with
    /// slots once nobody took them for twice the node timeout.
    pub fn clear_failure_if_needed(&mut self, n: usize, now: i64, timeout: i64) -> bool {
        let node = &mut self.nodes[n];
        if node.flags & flag::FAIL == 0 {
            return false;
        }
        if !node.is_master() || node.numslots == 0 {
            log::notice(&format!(
                "Clear FAIL state for node {}: {} is reachable again.",
                node.name(),
                if node.is_master() { "master without slots" } else { "replica" }
            ));
            node.flags &= !flag::FAIL;
            return true;
        }
        if now - node.fail_time > timeout * FAIL_UNDO_TIME_MULT {
            log::notice(&format!(
                "Clear FAIL state for node {}: is reachable again and nobody is serving its \
                 slots after some time.",
                node.name()
            ));
            node.flags &= !flag::FAIL;
            return true;
        }
        false
    }

    /// The PFAIL marks of Redis's `clusterCron`: a node whose ping has
    /// waited, with no data from it either, for over the node timeout.
    /// True when a node was newly marked.
    pub fn detect_timeouts(&mut self, now: i64, timeout: i64) -> bool {
        let mut marked = false;
        for i in 0..self.nodes.len() {
            let n = &mut self.nodes[i];
            let skip = flag::MYSELF | flag::NOADDR | flag::HANDSHAKE;
            if i == self.myself || n.flags & skip != 0 || n.ping_sent == 0 {
                continue;
            }
            let delay = (now - n.ping_sent).min(now - n.data_received);
            if delay > timeout && n.flags & (flag::PFAIL | flag::FAIL) == 0 {
                log::notice(&format!("*** NODE {} possibly failing", n.name()));
                n.flags |= flag::PFAIL;
                marked = true;
            }
        }
        marked
    }

    /// Redis's `clusterSetNodeAsMaster` for node `n`.
    pub fn set_as_master(&mut self, n: usize) {
        let node = &mut self.nodes[n];
        if node.is_master() {
            return;
        }
        node.flags = (node.flags & !flag::SLAVE) | flag::MASTER;
        node.master = None;
    }

    /// Redis's `clusterGetSlaveRank`: how many replicas of this node's
    /// master that may fail over have a greater offset.
    pub fn replica_rank(&self, my_offset: i64) -> usize {
        let Some(master) = self.me().master else { return 0 };
        self.nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| {
                *i != self.myself
                    && n.master == Some(master)
                    && !n.is_master()
                    && n.flags & flag::NOFAILOVER == 0
                    && n.repl_offset > my_offset
            })
            .count()
    }

    /// Redis's `clusterSendFailoverAuthIfNeeded`: whether this master
    /// votes for replica `r`, which asked in `req_epoch` for the slots
    /// `claimed` at `claimed_epoch`. A vote is recorded (the caller saves
    /// the configuration and sends FAILOVER_AUTH_ACK).
    pub fn grant_vote(
        &mut self,
        r: usize,
        req_epoch: u64,
        claimed_epoch: u64,
        claimed: &[u8],
        force: bool,
        now: i64,
        timeout: i64,
    ) -> bool {
        let me = self.me();
        if !me.is_master() || me.numslots == 0 {
            return false;
        }
        let who = self.nodes[r].name().to_string();
        if req_epoch < self.current_epoch {
            log::warning(&format!(
                "Failover auth denied to {who}: reqEpoch ({req_epoch}) < curEpoch({})",
                self.current_epoch
            ));
            return false;
        }
        if self.last_vote_epoch == self.current_epoch {
            log::warning(&format!(
                "Failover auth denied to {who}: already voted for epoch {}",
                self.current_epoch
            ));
            return false;
        }
        let node = &self.nodes[r];
        let master = node.master.and_then(|m| self.find(&m));
        let Some(m) = master.filter(|_| !node.is_master()) else {
            log::warning(&format!(
                "Failover auth denied to {who}: it is a master node or its master is unknown"
            ));
            return false;
        };
        if !self.nodes[m].is_failed() && !force {
            log::warning(&format!("Failover auth denied to {who}: its master is up"));
            return false;
        }
        if now - self.nodes[m].voted_time < timeout * 2 {
            log::warning(&format!(
                "Failover auth denied to {who}: can't vote about this master before {} \
                 milliseconds",
                timeout * 2 - (now - self.nodes[m].voted_time)
            ));
            return false;
        }
        for s in 0..SLOTS {
            if claimed.get(s / 8).is_none_or(|b| b & (1 << (s % 8)) == 0) {
                continue;
            }
            let Some(o) = self.owner(s as u16) else { continue };
            if self.nodes[o].config_epoch > claimed_epoch {
                log::warning(&format!(
                    "Failover auth denied to {who}: slot {s} epoch ({}) > reqEpoch ({claimed_epoch})",
                    self.nodes[o].config_epoch
                ));
                return false;
            }
        }
        self.last_vote_epoch = self.current_epoch;
        self.nodes[m].voted_time = now;
        log::notice(&format!("Failover auth granted to {who} for epoch {}", self.current_epoch));
        true
    }

    /// A FAILOVER_AUTH_ACK from node `from` (Redis counts a vote from a
    /// master with slots, in this election's epoch or later).
    pub fn vote_received(&mut self, from: usize, sender_epoch: u64) {
        let n = &self.nodes[from];
        if n.is_master() && n.numslots > 0 && sender_epoch >= self.election.auth_epoch {
            self.election.auth_count += 1;
        }
    }

    /// Redis's `clusterFailoverReplaceYourMaster`: this replica becomes a
    /// master with its master's slots. False when it is no replica.
    pub fn replace_my_master(&mut self) -> bool {
        let me = self.myself;
        let Some(old) = self.me().master.and_then(|m| self.find(&m)) else { return false };
        if self.me().is_master() {
            return false;
        }
        self.set_as_master(me);
        for s in 0..SLOTS as u16 {
            if self.owner(s) == Some(old) {
                self.set_owner(s, Some(me));
            }
        }
        self.manual = Manual::default();
        true
    }

    /// Redis's `clusterBumpConfigEpochWithoutConsensus` (TAKEOVER,
    /// BUMPEPOCH): true when the epoch moved.
    pub fn bump_epoch(&mut self) -> bool {
        let max =
            self.nodes.iter().map(|n| n.config_epoch).max().unwrap_or(0).max(self.current_epoch);
        let mine = self.me().config_epoch;
        if mine != 0 && mine == max {
            return false;
        }
        self.current_epoch += 1;
        let e = self.current_epoch;
        self.me_mut().config_epoch = e;
        log::warning(&format!("New configEpoch set to {e}"));
        true
    }

    /// Redis's `clusterHandleConfigEpochCollision`: two masters with one
    /// config epoch; the one with the greater id moves to a new epoch.
    pub fn handle_epoch_collision(&mut self, sender: usize) -> bool {
        let (s, me) = (&self.nodes[sender], self.me());
        if s.config_epoch != me.config_epoch || !s.is_master() || !me.is_master() {
            return false;
        }
        if s.id <= me.id {
            return false;
        }
        self.current_epoch += 1;
        let e = self.current_epoch;
        self.me_mut().config_epoch = e;
        log::verbose(&format!(
            "WARNING: configEpoch collision with node {}. configEpoch set to {e}",
            name(&self.nodes[sender].id)
        ));
        true
    }

    /// Redis's `clusterHandleManualFailover` on a replica: the election
    /// may start once this replica processed the paused master's stream.
    /// Redis waits for its offset to equal the paused master's; here a
    /// master's offset may still move a little once it reported it (a
    /// write past the pause check on another thread, a replication PING),
    /// and a replica past the offset would wait out the manual failover's
    /// timeout: having processed at least that much is enough.
    pub fn manual_step(&mut self, my_offset: i64) {
        let m = &mut self.manual;
        if m.end == 0 || m.can_start || m.master_offset == -1 {
            return;
        }
        if my_offset >= m.master_offset {
            m.can_start = true;
            log::notice("All master replication stream processed, manual failover can start.");
        }
    }

    /// Redis's `manualFailoverCheckTimeout`: true when a manual failover
    /// just timed out (a master then lifts its pause).
    pub fn manual_timed_out(&mut self, now: i64) -> bool {
        if self.manual.end != 0 && self.manual.end < now {
            log::warning("Manual failover timed out.");
            self.manual = Manual::default();
            return true;
        }
        false
    }

    /// Redis's `clusterHandleSlaveFailover`, one turn of it: `rand` is a
    /// random number for the election's jitter.
    pub fn election_step(&mut self, now: i64, view: ReplicaView, set: Settings, rand: u64) -> Step {
        let quorum = self.size as usize / 2 + 1;
        let manual = self.manual.end != 0 && self.manual.can_start;
        let auth_timeout = (set.node_timeout * 2).max(2000);
        let auth_retry = auth_timeout * 2;
        let me = self.me();
        if me.is_master() {
            return Step::Nothing;
        }
        let Some(master) = me.master.and_then(|m| self.find(&m)) else { return Step::Nothing };
        let m = &self.nodes[master];
        // Only for a failed master (unless this replica may not fail over),
        // or a manual failover; and only a master with slots.
        let wanted = manual || (m.is_failed() && !set.no_failover);
        if !wanted || m.numslots == 0 {
            return Step::Nothing;
        }
        let mut data_age = view.data_age;
        if data_age > set.node_timeout {
            data_age -= set.node_timeout;
        }
        if set.validity_factor != 0
            && data_age > set.ping_period_ms + set.node_timeout * set.validity_factor
            && !manual
        {
            return Step::Nothing;
        }
        let e = &mut self.election;
        let auth_age = now - e.auth_time;
        if auth_age > auth_retry {
            e.auth_time = now + 500 + (rand % 500) as i64;
            e.auth_count = 0;
            e.auth_sent = false;
            let rank = self.replica_rank(view.offset);
            let e = &mut self.election;
            e.auth_rank = rank;
            e.auth_time += rank as i64 * 1000;
            if self.manual.end != 0 {
                e.auth_time = now;
                e.auth_rank = 0;
            }
            log::warning(&format!(
                "Start of election delayed for {} milliseconds (rank #{}, offset {}).",
                e.auth_time - now,
                e.auth_rank,
                view.offset
            ));
            return Step::PongReplicas;
        }
        if !e.auth_sent && self.manual.end == 0 {
            let rank = self.replica_rank(view.offset);
            let e = &mut self.election;
            if rank > e.auth_rank {
                let added = (rank - e.auth_rank) as i64 * 1000;
                e.auth_time += added;
                e.auth_rank = rank;
                log::warning(&format!(
                    "Replica rank updated to #{rank}, added {added} milliseconds of delay."
                ));
            }
        }
        let e = &mut self.election;
        if now < e.auth_time || now - e.auth_time > auth_timeout {
            return Step::Nothing;
        }
        if !e.auth_sent {
            self.current_epoch += 1;
            let e = &mut self.election;
            e.auth_epoch = self.current_epoch;
            e.auth_sent = true;
            log::warning(&format!("Starting a failover election for epoch {}.", e.auth_epoch));
            return Step::RequestVotes { force: self.manual.end != 0 };
        }
        if e.auth_count < quorum {
            return Step::Nothing;
        }
        log::warning("Failover election won: I'm the new master.");
        let epoch = e.auth_epoch;
        if self.me().config_epoch < epoch {
            self.me_mut().config_epoch = epoch;
            log::warning(&format!("configEpoch set to {epoch} after successful failover"));
        }
        if self.replace_my_master() {
            Step::Promoted
        } else {
            Step::Nothing
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subsystems::cluster::Node;

    const T: i64 = 1000;

    fn id(c: u8) -> NodeId {
        [c; 40]
    }

    /// Three masters a, b, c (a is myself) with a third of the slots
    /// each, and r, a replica of c.
    fn three(myself_replica: bool) -> State {
        let mut st = State::fresh(id(b'a'));
        for c in [b'b', b'c'] {
            st.add(Node::new(id(c), flag::MASTER));
        }
        let mut r = Node::new(id(b'r'), flag::SLAVE);
        r.master = Some(id(b'c'));
        st.add(r);
        for s in 0..SLOTS as u16 {
            st.set_owner(s, Some(s as usize % 3));
        }
        for (i, e) in [1, 2, 3].into_iter().enumerate() {
            st.nodes[i].config_epoch = e;
        }
        st.current_epoch = 3;
        st.size = 3;
        if myself_replica {
            // Myself is r's twin, a replica of c; d takes a's slots.
            let d = st.add(Node::new(id(b'd'), flag::MASTER));
            st.nodes[d].config_epoch = 1;
            for s in 0..SLOTS as u16 {
                if st.owner(s) == Some(0) {
                    st.set_owner(s, Some(d));
                }
            }
            let me = st.me_mut();
            me.flags = flag::MYSELF | flag::SLAVE;
            me.master = Some(id(b'c'));
            me.config_epoch = 0;
        }
        st
    }

    #[test]
    fn a_silent_node_is_pfail_then_fail_on_a_majority_of_reports() {
        let mut st = three(false);
        let c = st.find(&id(b'c')).unwrap();
        st.nodes[c].ping_sent = 10_000;
        st.nodes[c].data_received = 9_000;
        assert!(!st.detect_timeouts(10_000 + T, T), "not yet past the timeout");
        assert!(st.detect_timeouts(10_001 + T, T));
        assert_ne!(st.nodes[c].flags & flag::PFAIL, 0);
        // Myself alone is one vote of the two needed.
        assert!(!st.mark_failing_if_needed(c, 12_000, T));
        assert!(st.add_failure_report(c, id(b'b'), 12_000));
        assert!(!st.add_failure_report(c, id(b'b'), 12_100), "a report is refreshed, not added");
        assert!(st.mark_failing_if_needed(c, 12_100, T));
        assert!(st.nodes[c].is_failed() && st.nodes[c].flags & flag::PFAIL == 0);
        assert_eq!(st.nodes[c].fail_time, 12_100);
    }

    /// A manual failover whose paused master's offset moved on after it
    /// reported it (a write on another thread past the pause check): the
    /// replica, past the reported offset, may start; it waited out the
    /// timeout when it needed the offset exactly (the failover-under-load
    /// test's manual failover never completed now and then).
    #[test]
    fn a_manual_failover_starts_once_the_replica_is_at_or_past_the_paused_offset() {
        let mut st = three(true);
        st.manual.end = 10_000;
        st.manual_step(500);
        assert!(!st.manual.can_start, "no offset from the paused master yet");
        st.manual.master_offset = 1_000;
        st.manual_step(999);
        assert!(!st.manual.can_start);
        st.manual_step(1_040);
        assert!(st.manual.can_start);
    }

    #[test]
    fn failure_reports_expire_after_twice_the_timeout() {
        let mut st = three(false);
        let c = st.find(&id(b'c')).unwrap();
        st.add_failure_report(c, id(b'b'), 1_000);
        assert_eq!(st.failure_reports(c, 1_000 + 2 * T, T), 1);
        assert_eq!(st.failure_reports(c, 1_001 + 2 * T, T), 0);
    }

    #[test]
    fn a_failed_master_is_cleared_only_after_the_undo_time() {
        let mut st = three(false);
        let c = st.find(&id(b'c')).unwrap();
        st.fail_received(c, &id(b'b'), 5_000);
        assert!(!st.clear_failure_if_needed(c, 5_000 + 2 * T, T));
        assert!(st.clear_failure_if_needed(c, 5_001 + 2 * T, T));
        let r = st.find(&id(b'r')).unwrap();
        st.fail_received(r, &id(b'b'), 5_000);
        assert!(st.clear_failure_if_needed(r, 5_001, T), "a replica is cleared at once");
    }

    #[test]
    fn a_master_votes_once_per_epoch_and_not_for_stale_slots() {
        let mut st = three(false);
        let c = st.find(&id(b'c')).unwrap();
        let r = st.find(&id(b'r')).unwrap();
        let slots_of_c = st.bitmap_of(c);
        // Its master is up: no vote without FORCEACK.
        st.current_epoch = 4;
        assert!(!st.grant_vote(r, 4, 3, &slots_of_c, false, 100_000, T));
        st.fail_received(c, &id(b'b'), 99_000);
        assert!(!st.grant_vote(r, 3, 3, &slots_of_c, false, 100_000, T), "old epoch");
        // A claim on a's slots at an older epoch than a's is refused.
        let mut stale = slots_of_c.clone();
        stale[0] |= 1;
        st.nodes[0].config_epoch = 5;
        assert!(!st.grant_vote(r, 4, 3, &stale, false, 100_000, T));
        assert!(st.grant_vote(r, 4, 3, &slots_of_c, false, 100_000, T));
        assert_eq!(st.last_vote_epoch, 4);
        assert!(!st.grant_vote(r, 4, 3, &slots_of_c, false, 100_000, T), "already voted");
        st.current_epoch = 5;
        assert!(
            !st.grant_vote(r, 5, 3, &slots_of_c, false, 100_000 + T, T),
            "not twice for one master within twice the timeout"
        );
    }

    fn settings() -> Settings {
        Settings {
            node_timeout: T,
            validity_factor: 10,
            ping_period_ms: 10_000,
            no_failover: false,
        }
    }

    #[test]
    fn a_replica_waits_its_rank_asks_for_votes_and_takes_the_slots() {
        let mut st = three(true);
        let c = st.find(&id(b'c')).unwrap();
        let r = st.find(&id(b'r')).unwrap();
        let view = ReplicaView { offset: 100, data_age: 0 };
        assert_eq!(st.election_step(50_000, view, settings(), 0), Step::Nothing, "master is up");
        st.fail_received(c, &id(b'b'), 50_000);
        // r is ahead of this replica: rank 1, a second more of delay.
        st.nodes[r].repl_offset = 200;
        assert_eq!(st.election_step(50_000, view, settings(), 100), Step::PongReplicas);
        assert_eq!(st.election.auth_time, 50_000 + 600 + 1000);
        assert_eq!(st.election_step(51_599, view, settings(), 0), Step::Nothing);
        assert_eq!(
            st.election_step(51_600, view, settings(), 0),
            Step::RequestVotes { force: false }
        );
        assert_eq!(st.current_epoch, 4);
        let (b, d) = (st.find(&id(b'b')).unwrap(), st.find(&id(b'd')).unwrap());
        st.vote_received(b, 4);
        assert_eq!(st.election_step(51_700, view, settings(), 0), Step::Nothing, "one of two");
        // A vote of an older epoch, or from a replica, does not count.
        st.vote_received(d, 3);
        st.vote_received(r, 4);
        assert_eq!(st.election.auth_count, 1);
        st.vote_received(d, 4);
        let slots_of_c = st.nodes[c].numslots;
        assert_eq!(st.election_step(51_800, view, settings(), 0), Step::Promoted);
        assert!(st.me().is_master() && st.me().master.is_none());
        assert_eq!(st.me().config_epoch, 4);
        assert_eq!((st.me().numslots, st.nodes[c].numslots), (slots_of_c, 0));
    }

    #[test]
    fn stale_data_keeps_a_replica_out_of_the_election() {
        let mut st = three(true);
        let c = st.find(&id(b'c')).unwrap();
        st.fail_received(c, &id(b'b'), 50_000);
        let old = ReplicaView { offset: 100, data_age: T + 10_000 + 10 * T + 1 };
        assert_eq!(st.election_step(50_000, old, settings(), 0), Step::Nothing);
        // A manual failover goes ahead anyway.
        st.manual = Manual { end: 60_000, can_start: true, ..Manual::default() };
        assert_eq!(st.election_step(50_000, old, settings(), 0), Step::PongReplicas);
        assert_eq!(st.election.auth_time, 50_000);
        assert_eq!(
            st.election_step(50_000, old, settings(), 0),
            Step::RequestVotes { force: true }
        );
    }
}
