//! `evicortex-bench serve-load`: HTTP load on one or more running `evicortex serve` processes
//! (appends, compiles, erasures over many keep-alive connections, optionally appends at a fixed
//! rate), sampled every interval (throughput, p50/p99, errors, the servers' RSS); then every
//! acknowledged append is read back through the export and the ledger verified.

mod histogram;
mod readback;
mod report;
mod traffic;

use std::{
    io::Read,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context, bail, ensure};

use self::{
    report::{Sample, Summary},
    traffic::{Acked, Mix, Op, Workload},
};

/// Arguments of `evicortex-bench serve-load`.
#[derive(Debug, clap::Args)]
pub struct ServeLoadArgs {
    /// A server's base URL (repeat for several: connections go to them round robin).
    #[arg(long = "server", value_name = "URL", required = true)]
    pub servers: Vec<String>,
    /// The API key: a namespace key for one namespace, an admin key for several (and for the
    /// final verify).
    #[arg(long, env = "EVICORTEX_LOAD_KEY", hide_env_values = true)]
    pub key: String,
    /// Concurrent connections in all, each a keep-alive connection sending one request after
    /// the other.
    #[arg(long, default_value_t = 200)]
    pub connections: usize,
    /// Namespaces the requests spread over: PREFIX alone when 1, else PREFIX-0, PREFIX-1, ...
    #[arg(long, default_value_t = 1)]
    pub namespaces: usize,
    /// The namespace name, or the prefix of their names.
    #[arg(long, default_value = "load")]
    pub namespace_prefix: String,
    /// Relative weights of the operations: append (a batch of new turns), compile (a question
    /// within --budget), erase (one turn the load appended earlier).
    #[arg(long, default_value = "append=4,compile=1", value_parser = Mix::parse)]
    pub mix: Mix,
    /// Turns per append request.
    #[arg(long, default_value_t = 1)]
    pub batch: u32,
    /// Reader-token budget of each compile.
    #[arg(long, default_value_t = 512)]
    pub budget: u32,
    /// Send appends open-loop at this many turns/s over --append-connections of the
    /// connections (their latency counts from when each was due); the other connections run
    /// --mix without appends.
    #[arg(long, value_name = "TURNS_PER_S")]
    pub append_rate: Option<f64>,
    /// Connections that carry the open-loop appends.
    #[arg(long, default_value_t = 32)]
    pub append_connections: usize,
    /// Send erasures open-loop at this many a second (each of the oldest turn the load
    /// appended to a namespace and has not erased) over --erase-connections of the
    /// connections; the other connections run --mix without erasures.
    #[arg(long, value_name = "PER_S")]
    pub erase_rate: Option<f64>,
    /// Connections that carry the open-loop erasures.
    #[arg(long, default_value_t = 8)]
    pub erase_connections: usize,
    /// Send compiles open-loop at this many a second over every connection that carries no
    /// open-loop append or erasure (a steady offered load, so that a p99 that grows is the
    /// server's; closed-loop compiles at saturation measure its throughput, their latency the
    /// queue's).
    #[arg(long, value_name = "PER_S")]
    pub compile_rate: Option<f64>,
    /// Turns appended to each namespace before the clock starts (batches of 1,000).
    #[arg(long, default_value_t = 0)]
    pub seed_turns: u32,
    /// Seconds of load.
    #[arg(long, default_value_t = 30.0)]
    pub seconds: f64,
    /// Seconds between samples.
    #[arg(long, default_value_t = 10.0)]
    pub interval: f64,
    /// A server's process id, whose resident memory (VmRSS) each sample reads (repeat).
    #[arg(long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Samples of warm-up before the first value the stability check compares against.
    #[arg(long, default_value_t = 1)]
    pub warmup_samples: usize,
    /// How far (percent) p99 and RSS may move from their first value after warm-up and still
    /// count as stable.
    #[arg(long, default_value_t = 10.0)]
    pub tolerance_percent: f64,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// Names this run's sessions (default: from the clock), so that runs on one store differ.
    #[arg(long)]
    pub run_id: Option<String>,
    /// Seconds a request may take before it counts as an error.
    #[arg(long, default_value_t = 120.0)]
    pub request_timeout: f64,
    /// Threads of the load generator (default: up to 4, one per core).
    #[arg(long)]
    pub client_threads: Option<usize>,
    /// Turn texts to append instead of the synthetic ones: a file of JSON strings, one a line
    /// (each turn's text is its own head, then one of them).
    #[arg(long, value_name = "FILE")]
    pub texts: Option<PathBuf>,
    /// Questions to compile instead of the synthetic ones: a file of JSON strings, one a line.
    #[arg(long, value_name = "FILE")]
    pub questions: Option<PathBuf>,
}

/// The JSON strings of `path`, one a line (none when not given).
fn json_lines(path: Option<&std::path::Path>) -> anyhow::Result<Vec<String>> {
    let Some(path) = path else { return Ok(Vec::new()) };
    let text = fs_err::read_to_string(path)?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str::<String>(line)
                .with_context(|| format!("{} line {}: not a JSON string", path.display(), n + 1))
        })
        .collect()
}

/// How the connections divide: the first `appends` send open-loop appends, the next `erasures`
/// open-loop erasures, the rest open-loop compiles when `compiles` is not 0, else `mix`
/// closed-loop.
struct Lanes {
    appends: usize,
    erasures: usize,
    compiles: usize,
    mix: Mix,
}

impl Lanes {
    fn of(args: &ServeLoadArgs) -> anyhow::Result<Lanes> {
        ensure!(args.connections > 0, "--connections must be at least 1");
        ensure!(
            args.namespaces > 0 && args.namespaces <= usize::from(u16::MAX),
            "--namespaces must be 1 to 65535"
        );
        ensure!(args.batch > 0, "--batch must be at least 1");
        ensure!(
            args.seconds > 0.0 && args.interval > 0.0,
            "--seconds and --interval must be positive"
        );
        let appends = match args.append_rate {
            Some(rate) => {
                ensure!(rate > 0.0, "--append-rate must be positive");
                ensure!(args.append_connections > 0, "--append-connections must be at least 1");
                args.append_connections.min(args.connections)
            }
            None => 0,
        };
        let erasures = match args.erase_rate {
            Some(rate) => {
                ensure!(rate > 0.0, "--erase-rate must be positive");
                ensure!(args.erase_connections > 0, "--erase-connections must be at least 1");
                args.erase_connections.min(args.connections - appends)
            }
            None => 0,
        };
        ensure!(args.compile_rate.is_none_or(|rate| rate > 0.0), "--compile-rate must be positive");
        let compiles = match args.compile_rate {
            Some(_) => args.connections - appends - erasures,
            None => 0,
        };
        ensure!(
            args.compile_rate.is_none() || compiles > 0,
            "--compile-rate needs a connection that carries no open-loop append or erasure"
        );
        let mut mix = args.mix.clone();
        for (rate, op) in [
            (args.append_rate, Op::Append),
            (args.erase_rate, Op::Erase),
            (args.compile_rate, Op::Compile),
        ] {
            if rate.is_some() {
                mix = mix.without(op);
            }
        }
        ensure!(
            appends + erasures + compiles == args.connections || !mix.is_empty(),
            "--mix has only what --append-rate and --erase-rate send open-loop: give the other \
             connections another weight, or all connections to the open-loop operations"
        );
        Ok(Lanes { appends, erasures, compiles, mix })
    }

    /// What connection `c` sends open-loop (`None`: the closed-loop mix).
    fn open_loop_op(&self, c: usize) -> Option<Op> {
        if c < self.appends {
            Some(Op::Append)
        } else if c < self.appends + self.erasures {
            Some(Op::Erase)
        } else if self.compiles > 0 {
            Some(Op::Compile)
        } else {
            None
        }
    }

    /// The operations this run sends.
    fn active(&self, args: &ServeLoadArgs) -> Vec<Op> {
        Op::ALL
            .into_iter()
            .filter(|&op| {
                (op == Op::Append && self.appends > 0)
                    || (op == Op::Erase && self.erasures > 0)
                    || (op == Op::Compile && self.compiles > 0)
                    || args.mix.weights[op as usize] > 0
            })
            .collect()
    }
}

/// Runs the load, prints samples and the final table, and fails on any request error, lost
/// append or failed verify.
pub fn run(args: &ServeLoadArgs) -> anyhow::Result<()> {
    let lanes = Lanes::of(args)?;
    traffic::use_real_texts(
        json_lines(args.texts.as_deref())?,
        json_lines(args.questions.as_deref())?,
    );
    let servers: Vec<String> =
        args.servers.iter().map(|s| s.trim_end_matches('/').to_owned()).collect();
    let namespaces: Vec<String> = if args.namespaces == 1 {
        vec![args.namespace_prefix.clone()]
    } else {
        (0..args.namespaces).map(|i| format!("{}-{i}", args.namespace_prefix)).collect()
    };
    let run_id = args.run_id.clone().unwrap_or_else(|| {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        format!("r{}", now.as_millis())
    });
    let threads = args
        .client_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()).min(4));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .context("starting the load generator's runtime")?;
    let timeout = Duration::from_secs_f64(args.request_timeout);
    let client =
        move || reqwest::Client::builder().pool_max_idle_per_host(1).timeout(timeout).build();

    let every = [
        args.append_rate.map(|rate| Duration::from_secs_f64(f64::from(args.batch) / rate)),
        args.compile_rate.map(|rate| Duration::from_secs_f64(1.0 / rate)),
        args.erase_rate.map(|rate| Duration::from_secs_f64(1.0 / rate)),
    ];
    let mut workload = Workload::new(
        servers.clone(),
        args.key.clone(),
        namespaces.clone(),
        run_id.clone(),
        args.batch,
        args.budget,
        lanes.mix.clone(),
        every,
    );
    let seed_conn = args.connections as u32;
    let seeded = runtime.block_on(seed(&workload, &client()?, seed_conn, args.seed_turns))?;
    // Each connection a client of its own (its own keep-alive connection), all made before
    // the clock starts: making one takes a while (its TLS set-up), 200 of them seconds.
    let clients = (0..args.connections).map(|_| client()).collect::<Result<Vec<_>, _>>()?;
    workload.start(Duration::from_secs_f64(args.seconds));
    let workload = Arc::new(workload);

    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(c, client)| {
            let (workload, base) = (workload.clone(), servers[c % servers.len()].clone());
            let op = lanes.open_loop_op(c);
            runtime.spawn(async move {
                match op {
                    Some(op) => workload.open_loop(op, c as u32, client, &base).await,
                    None => workload.closed_loop(c as u32, client, &base).await,
                }
            })
        })
        .collect();

    let mut report = report::Report::new(lanes.active(args), args.pids.clone());
    report.header(args, &servers, &namespaces, &run_id, lanes.appends)?;
    let mut acked = sample_until_deadline(args, &runtime, &workload, &mut report, tasks)?;
    acked.push(seeded);

    let outcome = std::mem::take(
        &mut *workload.outcome.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let export_client = client()?;
    let handle = runtime.handle().clone();
    let read_back = readback::check(
        &run_id,
        namespaces.len(),
        &acked,
        &outcome.erased,
        &outcome.uncertain,
        |ns| {
            let url = format!("{}/v1/namespaces/{}/export", servers[0], namespaces[ns]);
            let response = handle
                .block_on(async { export_client.get(&url).bearer_auth(&args.key).send().await })?;
            ensure!(response.status().is_success(), "{url}: {}", response.status());
            Ok(Box::new(Body { handle: handle.clone(), response, chunk: Default::default() })
                as Box<dyn Read>)
        },
    );
    let verify = runtime.block_on(verify(&export_client, &servers[0], &args.key));

    let summary = Summary::new(
        &report,
        read_back.as_ref().ok(),
        verify.as_ref().ok().cloned(),
        args.tolerance_percent,
        args.warmup_samples,
        outcome.errors.clone(),
    );
    report.finish(&summary, args)?;
    if let Some(path) = &args.summary {
        fs_err::write(
            path,
            serde_json::to_string_pretty(&summary.json(args, servers.len(), namespaces.len()))?,
        )?;
    }
    let mut failures = Vec::new();
    let errors: u64 = summary.totals.iter().map(|t| t.errors).sum();
    if errors > 0 {
        failures.push(format!("{errors} requests failed, first: {}", outcome.errors.join("; ")));
    }
    if let Err(e) = read_back {
        failures.push(format!("read-back: {e:#}"));
    }
    if let Err(e) = verify {
        failures.push(format!("verify: {e:#}"));
    }
    if summary.servers_gone > 0 {
        failures.push(format!("{} server processes were gone at a sample", summary.servers_gone));
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("\n"));
    }
    Ok(())
}

/// Samples the load every interval until its deadline, then waits for the connections' tasks
/// (their in-flight requests belong to the last sample); returns what each acknowledged.
fn sample_until_deadline(
    args: &ServeLoadArgs,
    runtime: &tokio::runtime::Runtime,
    workload: &Workload,
    report: &mut report::Report,
    mut tasks: Vec<tokio::task::JoinHandle<Vec<Acked>>>,
) -> anyhow::Result<Vec<Vec<Acked>>> {
    let spinner = crate::progress::spinner("serve-load");
    let interval = Duration::from_secs_f64(args.interval);
    let (mut last, mut next) = (workload.started, workload.started + interval);
    let mut acked: Vec<Vec<Acked>> = Vec::with_capacity(args.connections + 1);
    loop {
        let end = next.min(workload.deadline);
        std::thread::sleep(end.saturating_duration_since(Instant::now()));
        let finished = end >= workload.deadline;
        if finished {
            for task in tasks.drain(..) {
                acked.push(runtime.block_on(task).context("a connection task failed")?);
            }
        }
        let now = Instant::now();
        let sample = Sample {
            at: now.duration_since(workload.started),
            span: now.duration_since(last),
            tallies: workload.take_window(),
            rss_mib: args.pids.iter().map(|&pid| report::rss_mib(pid)).collect(),
        };
        spinner.set_message(report.progress_line(&sample));
        report.sample(sample)?;
        if finished {
            break;
        }
        // A sampler that woke late (a loaded machine) skips the intervals already past.
        last = now;
        while next <= now {
            next += interval;
        }
    }
    spinner.finish_and_clear();
    Ok(acked)
}

/// Appends `turns` turns to each namespace through the first server, in batches of 1,000, as
/// connection `conn`.
async fn seed(
    workload: &Workload,
    client: &reqwest::Client,
    conn: u32,
    turns: u32,
) -> anyhow::Result<Vec<Acked>> {
    let mut acked = Vec::new();
    let mut next = 0;
    for ns in 0..workload.namespaces.len() {
        let end = next + turns;
        while next < end {
            let count = (end - next).min(1_000);
            workload
                .append(
                    client,
                    &workload.servers[0],
                    ns as u16,
                    conn,
                    next..next + count,
                    &mut acked,
                )
                .await
                .map_err(|e| {
                    anyhow::anyhow!("seeding namespace {}: {e}", workload.namespaces[ns])
                })?;
            next += count;
        }
    }
    Ok(acked)
}

/// `GET /v1/verify`: `Some(records)` when it passed, `None` when the key may not ask (not an
/// admin key).
async fn verify(client: &reqwest::Client, base: &str, key: &str) -> anyhow::Result<Option<u64>> {
    let response = client.get(format!("{base}/v1/verify")).bearer_auth(key).send().await?;
    let status = response.status();
    if status == reqwest::StatusCode::FORBIDDEN {
        return Ok(None);
    }
    let body: serde_json::Value = response.json().await.context("the verify reply")?;
    ensure!(status.is_success(), "{status}: {body}");
    Ok(Some(body["records"].as_u64().unwrap_or_default()))
}

/// A response body read as it arrives, for a parser that reads.
struct Body {
    handle: tokio::runtime::Handle,
    response: reqwest::Response,
    chunk: std::io::Cursor<Vec<u8>>,
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.chunk.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            match self
                .handle
                .block_on(async { self.response.chunk().await })
                .map_err(std::io::Error::other)?
            {
                Some(chunk) => self.chunk = std::io::Cursor::new(chunk.to_vec()),
                None => return Ok(0),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::json_lines;

    #[test]
    fn texts_files_are_json_strings_one_a_line_and_a_bad_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("texts.jsonl");
        fs_err::write(&good, "\"a\\nb\"\n\n\"c\"\n").unwrap();
        assert_eq!(json_lines(Some(&good)).unwrap(), ["a\nb", "c"]);
        let bad = dir.path().join("bad.jsonl");
        fs_err::write(&bad, "\"a\"\n{\"text\": 1}\n").unwrap();
        let err = format!("{:#}", json_lines(Some(&bad)).unwrap_err());
        assert!(err.contains("bad.jsonl line 2: not a JSON string"), "{err}");
        assert!(json_lines(None).unwrap().is_empty());
    }
}
