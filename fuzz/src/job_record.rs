//! Fuzzes the job record decoder: `LOADJOB` records come from the AOF, a
//! master's stream and RDB files (`sluice-job` AUX fields), so any bytes
//! must decode to a job or an error, never a panic; a decoded job encodes
//! back to the same bytes and registers in a job store, which gives it
//! back unchanged (its id rebuilt from the slot's packed form).

/// One input.
pub fn run(data: &[u8]) {
    if let Ok(job) = queue::Job::decode(data) {
        let mut again = Vec::new();
        job.encode(&mut again);
        assert_eq!(again, data);
        let mut jobs = queue::Jobs::new(b"00000000", 1);
        let id = job.id;
        let want = job.clone();
        jobs.insert(job, 0);
        let held: Vec<queue::Job> = jobs.iter().map(|j| j.to_job()).collect();
        assert_eq!(held, [want]);
        let mut out = Vec::new();
        jobs.tick(i64::MAX, 10, &mut out);
        jobs.delete(&id);
    }
}
