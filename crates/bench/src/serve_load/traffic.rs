//! The traffic of `serve-load`: what each connection sends (appends of new turns, compiles,
//! erasures of turns acknowledged earlier), and what it remembers for the read-back.

use std::{
    collections::VecDeque,
    sync::{
        Mutex, OnceLock, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use serde::Deserialize;
use serde_json::json;

use super::histogram::Histogram;

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Append,
    Compile,
    Erase,
}

impl Op {
    pub const ALL: [Op; 3] = [Op::Append, Op::Compile, Op::Erase];

    pub fn name(self) -> &'static str {
        match self {
            Op::Append => "append",
            Op::Compile => "compile",
            Op::Erase => "erase",
        }
    }
}

/// Relative weights of the operations a closed-loop connection picks from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix {
    pub weights: [u32; 3],
}

impl Mix {
    /// Parses `append=4,compile=1,erase=1` (each at most once; absent ones weigh 0).
    pub fn parse(text: &str) -> Result<Mix, String> {
        let mut weights = [None; 3];
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) =
                part.split_once('=').ok_or_else(|| format!("{part:?} is not OP=WEIGHT"))?;
            let op = Op::ALL
                .iter()
                .position(|op| op.name() == name.trim())
                .ok_or_else(|| format!("unknown operation {name:?} (append, compile, erase)"))?;
            let weight: u32 =
                weight.trim().parse().map_err(|e| format!("weight of {name:?}: {e}"))?;
            if weights[op].replace(weight).is_some() {
                return Err(format!("{name:?} is given twice"));
            }
        }
        let mix = Mix { weights: weights.map(|w| w.unwrap_or(0)) };
        if mix.total() == 0 {
            return Err("every weight is 0: nothing to send".to_owned());
        }
        Ok(mix)
    }

    fn total(&self) -> u32 {
        self.weights.iter().sum()
    }

    /// The mix without `op` (it goes out open-loop at a fixed rate instead).
    pub fn without(&self, op: Op) -> Mix {
        let mut weights = self.weights;
        weights[op as usize] = 0;
        Mix { weights }
    }

    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// The operation for a draw `r` (any u32): each with probability weight / total.
    pub fn pick(&self, r: u32) -> Op {
        let mut at = r % self.total();
        for (op, &w) in Op::ALL.iter().zip(&self.weights) {
            if at < w {
                return *op;
            }
            at -= w;
        }
        unreachable!("the draw is below the total")
    }
}

/// The session of connection `conn` in run `run` (connection `connections` is the seeding).
pub fn session(run: &str, conn: u32) -> String {
    format!("{run}-c{conn}")
}

const TOPICS: [&str; 8] = [
    "hiking in the Alps",
    "a new job in Lisbon",
    "learning the cello",
    "the cat's vet visit",
    "planning a trip to Kyoto",
    "a sourdough recipe",
    "moving apartments",
    "marathon training",
];

/// The questions compile requests ask, about the topics the turns talk about.
const QUESTIONS: [&str; 5] = [
    "Where did I move for my new job?",
    "What instrument am I learning?",
    "When is the trip to Kyoto?",
    "How is the marathon training going?",
    "What did the vet say about the cat?",
];

/// Real texts and questions this process's turns and compiles carry (`--texts`,
/// `--questions`), set once before the load; absent or empty: the synthetic ones above.
static REAL_TEXTS: OnceLock<Vec<String>> = OnceLock::new();
static REAL_QUESTIONS: OnceLock<Vec<String>> = OnceLock::new();

/// Makes turns carry `texts` and compiles ask `questions` (each ignored when empty); the first
/// call wins.
pub fn use_real_texts(texts: Vec<String>, questions: Vec<String>) {
    let _ = REAL_TEXTS.set(texts);
    let _ = REAL_QUESTIONS.set(questions);
}

/// The text of turn `turn` of connection `conn`: the read-back recomputes it. Real texts keep
/// the synthetic head, so that every turn's text is its own (as new conversation is).
pub fn text(run: &str, conn: u32, turn: u32) -> String {
    let head = format!("Load {run}, connection {conn}, turn {turn}");
    match REAL_TEXTS.get().filter(|t| !t.is_empty()) {
        Some(texts) => {
            let at = (conn as usize).wrapping_mul(7_919).wrapping_add(turn as usize) % texts.len();
            format!("{head}: {}", texts[at])
        }
        None => {
            let topic = TOPICS[(conn as usize + turn as usize) % TOPICS.len()];
            format!("{head}: we talked about {topic}.")
        }
    }
}

/// The question of the `i`-th compile of a connection.
fn question(i: u32) -> &'static str {
    match REAL_QUESTIONS.get().filter(|q| !q.is_empty()) {
        Some(questions) => &questions[i as usize % questions.len()],
        None => QUESTIONS[i as usize % QUESTIONS.len()],
    }
}

fn turn_json(run: &str, conn: u32, turn: u32) -> serde_json::Value {
    let (day, second) = (turn / 86_400 % 28 + 1, turn % 86_400);
    json!({
        "session": session(run, conn),
        "turn": turn,
        "role": if turn.is_multiple_of(2) { "user" } else { "assistant" },
        "text": text(run, conn, turn),
        "time": format!("2024-05-{day:02}T{:02}:{:02}:{:02}Z", second / 3600, second / 60 % 60, second % 60),
    })
}

/// One acknowledged turn: where it was sent and which it is.
#[derive(Debug, Clone, Copy)]
pub struct Acked {
    pub namespace: u16,
    pub conn: u32,
    pub turn: u32,
}

/// Counters of one operation over one sampling interval and over the whole run.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub requests: u64,
    pub turns: u64,
    pub errors: u64,
    pub latency: Histogram,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.requests += other.requests;
        self.turns += other.turns;
        self.errors += other.errors;
        self.latency.merge(&other.latency);
    }
}

/// Where the connections report to, shared by all of them.
pub struct Workload {
    pub servers: Vec<String>,
    pub key: String,
    pub namespaces: Vec<String>,
    pub run: String,
    pub batch: u32,
    pub budget: u32,
    /// The closed-loop connections' mix.
    pub mix: Mix,
    /// Per operation sent open-loop: one request (of `batch` turns for an append) every this
    /// long, from `started`.
    pub every: [Option<Duration>; 3],
    pub started: Instant,
    pub deadline: Instant,
    /// The next open-loop request of each operation.
    next_ticket: [AtomicU64; 3],
    window: Mutex<[Tally; 3]>,
    /// Acknowledged turns erasure may pick, per namespace (the latest few thousand).
    erasable: Mutex<Vec<VecDeque<(u64, Acked)>>>,
    pub outcome: Mutex<Outcome>,
}

/// What the read-back needs: the erased turns, the turns whose erasure failed (unknown state),
/// and the first few error messages.
#[derive(Debug, Default)]
pub struct Outcome {
    pub erased: Vec<Acked>,
    pub uncertain: Vec<Acked>,
    pub errors: Vec<String>,
}

const ERASABLE_KEPT: usize = 4096;
const ERRORS_KEPT: usize = 8;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Workload {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        servers: Vec<String>,
        key: String,
        namespaces: Vec<String>,
        run: String,
        batch: u32,
        budget: u32,
        mix: Mix,
        every: [Option<Duration>; 3],
    ) -> Workload {
        let started = Instant::now();
        let erasable = Mutex::new(vec![VecDeque::new(); namespaces.len()]);
        Workload {
            servers,
            key,
            namespaces,
            run,
            batch,
            budget,
            mix,
            every,
            started,
            deadline: started,
            next_ticket: Default::default(),
            window: Mutex::new(Default::default()),
            erasable,
            outcome: Mutex::new(Outcome::default()),
        }
    }

    /// Starts the clock: the run lasts `duration` from now (after any seeding), and what was
    /// tallied before is dropped.
    pub fn start(&mut self, duration: Duration) {
        self.started = Instant::now();
        self.deadline = self.started + duration;
        self.take_window();
    }

    /// The tallies since the last call, and a fresh interval.
    pub fn take_window(&self) -> [Tally; 3] {
        std::mem::take(&mut *lock(&self.window))
    }

    fn tally(&self, op: Op, turns: u64, latency: Option<Duration>, error: Option<String>) {
        let mut window = lock(&self.window);
        let tally = &mut window[op as usize];
        tally.requests += 1;
        match latency {
            Some(latency) if error.is_none() => {
                tally.turns += turns;
                tally.latency.record(latency.as_micros() as u64);
            }
            _ => tally.errors += 1,
        }
        drop(window);
        if let Some(error) = error {
            let mut outcome = lock(&self.outcome);
            if outcome.errors.len() < ERRORS_KEPT {
                outcome.errors.push(format!("{}: {error}", op.name()));
            }
        }
    }

    fn remember_erasable(&self, id: u64, acked: Acked) {
        let mut erasable = lock(&self.erasable);
        let pool = &mut erasable[usize::from(acked.namespace)];
        if pool.len() == ERASABLE_KEPT {
            pool.pop_front();
        }
        pool.push_back((id, acked));
    }

    /// Appends turns `turns` of connection `conn` to namespace `ns` through `client` at `base`;
    /// records them in `acked` when the server acknowledged every one.
    pub async fn append(
        &self,
        client: &reqwest::Client,
        base: &str,
        ns: u16,
        conn: u32,
        turns: std::ops::Range<u32>,
        acked: &mut Vec<Acked>,
    ) -> Result<(), String> {
        let (first, count) = (turns.start, turns.len() as u32);
        let turns: Vec<_> = turns.map(|t| turn_json(&self.run, conn, t)).collect();
        let path = format!("/v1/namespaces/{}/turns", self.namespaces[usize::from(ns)]);
        let reply: AppendReply = self.post(client, base, &path, &json!({ "turns": turns })).await?;
        if reply.appended != count as usize || reply.turns.len() != count as usize {
            return Err(format!(
                "{} of {count} turns appended, {} already present",
                reply.appended, reply.already_present
            ));
        }
        for (turn, stored) in (first..).zip(reply.turns) {
            let one = Acked { namespace: ns, conn, turn };
            acked.push(one);
            self.remember_erasable(stored.id, one);
        }
        Ok(())
    }

    async fn post<T: serde::de::DeserializeOwned>(
        &self,
        client: &reqwest::Client,
        base: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, String> {
        let response = client
            .post(format!("{base}{path}"))
            .bearer_auth(&self.key)
            .json(body)
            .send()
            .await
            .map_err(|e| format!("{base}{path}: {e}"))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| format!("{base}{path}: body: {e}"))?;
        if !status.is_success() {
            let body = String::from_utf8_lossy(&bytes);
            return Err(format!(
                "{base}{path}: {status}: {}",
                body.chars().take(300).collect::<String>()
            ));
        }
        serde_json::from_slice(&bytes).map_err(|e| format!("{base}{path}: reply: {e}"))
    }

    /// One closed-loop connection: picks an operation by the mix, sends it, again, until the
    /// deadline. Returns the turns it appended and the server acknowledged.
    pub async fn closed_loop(&self, conn: u32, client: reqwest::Client, base: &str) -> Vec<Acked> {
        let mut acked = Vec::new();
        let (mut next_turn, mut draws) =
            (0u32, u64::from(conn).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let spread = self.namespaces.len() as u32;
        for i in 0u32.. {
            if Instant::now() >= self.deadline {
                break;
            }
            draws = draws
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let ns = ((conn + i) % spread) as u16;
            let op = self.mix.pick((draws >> 33) as u32);
            let began = Instant::now();
            match op {
                Op::Append => {
                    let sent = self
                        .append(
                            &client,
                            base,
                            ns,
                            conn,
                            next_turn..next_turn + self.batch,
                            &mut acked,
                        )
                        .await;
                    next_turn += self.batch;
                    let turns = u64::from(self.batch);
                    self.tally(Op::Append, turns, Some(began.elapsed()), sent.err());
                }
                Op::Compile => {
                    let sent = self.compile(&client, base, ns, i).await;
                    self.tally(Op::Compile, 0, Some(began.elapsed()), sent.err());
                }
                Op::Erase => {
                    let Some(target) = self.erasable(ns).await else { break };
                    let sent = self.erase(&client, base, target).await;
                    self.tally(Op::Erase, 1, Some(began.elapsed()), sent.err());
                }
            }
        }
        acked
    }

    /// The oldest acknowledged turn of namespace `ns` not yet erased, once there is one
    /// (`None` at the deadline).
    async fn erasable(&self, ns: u16) -> Option<(u64, Acked)> {
        loop {
            if let Some(target) = lock(&self.erasable)[usize::from(ns)].pop_front() {
                return Some(target);
            }
            if Instant::now() >= self.deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// One open-loop connection of `op`: takes the next request of the operation's fixed
    /// schedule, waits for its time and sends it; its latency counts from when it was due, so
    /// a server that falls behind shows it.
    pub async fn open_loop(
        &self,
        op: Op,
        conn: u32,
        client: reqwest::Client,
        base: &str,
    ) -> Vec<Acked> {
        let every = self.every[op as usize].expect("an open-loop rate");
        let mut acked = Vec::new();
        let mut next_turn = 0u32;
        let spread = self.namespaces.len() as u64;
        loop {
            let ticket = self.next_ticket[op as usize].fetch_add(1, Ordering::Relaxed);
            let due = self.started + every.mul_f64(ticket as f64);
            if due >= self.deadline {
                break;
            }
            tokio::time::sleep_until(due.into()).await;
            let ns = (ticket % spread) as u16;
            match op {
                Op::Erase => {
                    let Some(target) = self.erasable(ns).await else { break };
                    let sent = self.erase(&client, base, target).await;
                    self.tally(Op::Erase, 1, Some(due.elapsed()), sent.err());
                }
                Op::Compile => {
                    let sent = self.compile(&client, base, ns, ticket as u32).await;
                    self.tally(Op::Compile, 0, Some(due.elapsed()), sent.err());
                }
                Op::Append => {
                    let turns = next_turn..next_turn + self.batch;
                    let sent = self.append(&client, base, ns, conn, turns, &mut acked).await;
                    next_turn += self.batch;
                    let turns = u64::from(self.batch);
                    self.tally(Op::Append, turns, Some(due.elapsed()), sent.err());
                }
            }
        }
        acked
    }

    async fn compile(
        &self,
        client: &reqwest::Client,
        base: &str,
        ns: u16,
        i: u32,
    ) -> Result<(), String> {
        let path = format!("/v1/namespaces/{}/compile", self.namespaces[usize::from(ns)]);
        let query = question(i);
        let body =
            json!({ "query": query, "budget": self.budget, "reader_tokenizer": "o200k_base" });
        self.post::<serde_json::Value>(client, base, &path, &body).await.map(drop)
    }

    async fn erase(
        &self,
        client: &reqwest::Client,
        base: &str,
        (id, target): (u64, Acked),
    ) -> Result<(), String> {
        let path =
            format!("/v1/namespaces/{}/erase", self.namespaces[usize::from(target.namespace)]);
        let reply: Result<EraseReply, String> =
            self.post(client, base, &path, &json!({ "record": id })).await;
        let mut outcome = lock(&self.outcome);
        match reply {
            Ok(reply) if reply.erased == [id] => {
                outcome.erased.push(target);
                Ok(())
            }
            Ok(reply) => {
                outcome.uncertain.push(target);
                Err(format!("erasing record {id} erased {:?}", reply.erased))
            }
            Err(error) => {
                // A failed erasure may or may not have committed: the read-back skips the turn.
                outcome.uncertain.push(target);
                Err(error)
            }
        }
    }
}

#[derive(Deserialize)]
struct AppendReply {
    appended: usize,
    already_present: usize,
    turns: Vec<StoredTurn>,
}

#[derive(Deserialize)]
struct StoredTurn {
    id: u64,
}

#[derive(Deserialize)]
struct EraseReply {
    erased: Vec<u64>,
}

/// Sums per-operation tallies.
pub fn add_tallies(into: &mut [Tally; 3], from: &[Tally; 3]) {
    for (a, b) in into.iter_mut().zip(from) {
        a.add(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mix_parses_weights_and_refuses_what_it_cannot_send() {
        assert_eq!(Mix::parse("append=4, compile=1").unwrap().weights, [4, 1, 0]);
        assert_eq!(Mix::parse("erase=2,append=1").unwrap().weights, [1, 0, 2]);
        for bad in ["", "append=0", "apend=1", "append", "append=x", "append=1,append=2"] {
            assert!(Mix::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn picks_follow_the_weights() {
        let mix = Mix::parse("append=3,compile=1").unwrap();
        let picks: Vec<Op> = (0..8).map(|r| mix.pick(r)).collect();
        let appends = picks.iter().filter(|&&op| op == Op::Append).count();
        assert_eq!(appends, 6, "{picks:?}");
        assert!(!picks.contains(&Op::Erase));
        assert!(mix.without(Op::Append).weights == [0, 1, 0]);
        assert!(Mix::parse("append=1").unwrap().without(Op::Append).is_empty());
        assert!(Mix::parse("compile=3,erase=1").unwrap().without(Op::Erase).weights == [0, 3, 0]);
    }

    #[test]
    fn every_turn_of_a_connection_has_its_own_text_that_the_read_back_can_recompute() {
        let a = turn_json("r1", 3, 86_401);
        assert_eq!(a["session"], "r1-c3");
        assert_eq!(a["time"], "2024-05-02T00:00:01Z");
        assert_eq!(a["text"], text("r1", 3, 86_401));
        assert_ne!(text("r1", 3, 1), text("r1", 3, 2));
        assert_ne!(text("r1", 3, 1), text("r1", 4, 1));
    }
}
